"""One context system used from several threads: every call is atomic, nothing is lost."""

from __future__ import annotations

import json
from typing import Any

import memci
import pytest
from context_helpers import DictStorage, FixedSummarizer, make, user
from factories import run_together

THREADS = 4
PAGES_EACH = 60


def test_concurrent_adds_rounds_and_recalls_keep_the_pages_whole() -> None:
    storage = DictStorage()
    ctx = make(active_pages=3, storage=storage)

    def writer(t: int) -> None:
        for i in range(PAGES_EACH):
            # A page is one add: every thread's pages stay whole whatever the interleaving.
            ctx.add(user(f"thread {t} question {i}"))
            ctx.end_round()

    def reader() -> None:
        for _ in range(PAGES_EACH):
            sent = ctx.build_messages(sanitize=False)
            assert sent[0]["role"] == "system"
            for entry in ctx.contents[:2]:
                assert ctx.recall(entry.index).index == entry.index
            ctx.list_pages(5)

    run_together(*(lambda t=t: writer(t) for t in range(THREADS)), reader)
    total = THREADS * PAGES_EACH
    assert ctx.round == total
    assert [p.index for p in ctx.pages] == [total - 2, total - 1, total]
    ctx.save()
    assert storage.page_indices() == list(range(1, total - 2))
    asked = [json.loads(storage.pages[i])["messages"][0]["content"] for i in storage.page_indices()]
    asked += [p.messages()[0]["content"] for p in ctx.pages]
    assert sorted(asked) == sorted(f"thread {t} question {i}" for t in range(THREADS) for i in range(PAGES_EACH))


class CallingBack:
    """A summarizer that reads the system it serves while that system archives."""

    def __init__(self) -> None:
        self.ctx: memci.ContextSystem | None = None

    def summarize(self, page: memci.Page) -> Any:
        if self.ctx is not None:
            self.ctx.contents_text()
        return FixedSummarizer().summarize(page)


def test_a_callback_into_the_system_from_its_own_summarizer_is_refused_and_changes_nothing() -> None:
    summarizer = CallingBack()
    ctx = make(active_pages=1, summarizer=summarizer)
    summarizer.ctx = ctx
    ctx.add(user("first"))
    before = ctx.state()
    with pytest.raises(memci.InvalidOperationError, match="called back from its own summarizer"):
        ctx.add(user("second"))  # archiving page 1 calls the summarizer, under the lock
    assert ctx.state() == before
    summarizer.ctx = None
    ctx.add(user("third"))  # the lock was given back
    assert [p.index for p in ctx.pages] == [2]
    assert [e.index for e in ctx.contents] == [1]
