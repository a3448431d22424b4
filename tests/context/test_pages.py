"""The context system's pages: how messages open and join pages, and how a page leaves the window.

Includes the regressions for the bugs of the Go project the paged design comes from: archived messages staying in the
window, assistant entries falling out of their page, archive indices off by the page count.
"""

from __future__ import annotations

import re
from typing import Any

import memci
import pytest
from context_helpers import (
    DictStorage,
    FailingStorage,
    FixedSummarizer,
    assistant,
    calling,
    interaction,
    make,
    run_rounds,
    tool,
    user,
    words,
)
from memci.context.recall import ATTP_RESULT_HEADER


def indices(ctx: memci.ContextSystem) -> list[int]:
    return [p.index for p in ctx.pages]


def window(ctx: memci.ContextSystem) -> list[memci.context.Message]:
    return ctx.build_messages(sanitize=False)


# ---- opening and joining ------------------------------------------------------------------------


def test_pages_are_numbered_from_one_and_a_user_message_opens_each():
    ctx = make()
    assert ctx.add(user("first")) == 1
    assert ctx.add(assistant("reply")) == 1
    assert ctx.add(user("second")) == 2
    assert indices(ctx) == [1, 2]
    assert [e.role for e in ctx.pages[0].entries] == ["user", "assistant"]


def test_assistant_and_tool_messages_join_the_open_page_in_order():
    ctx = make()
    ctx.extend(interaction(1))
    (page,) = ctx.pages
    assert page.messages() == interaction(1)


def test_the_first_message_opens_a_page_whatever_its_role():
    ctx = make()
    assert ctx.add(assistant("Hello! How can I help?")) == 1
    assert ctx.add(user("hi")) == 2
    assert indices(ctx) == [1, 2]


def test_a_user_message_carrying_only_anthropic_tool_results_joins_the_open_page():
    ctx = make()
    ctx.add(user("what is the weather?"))
    ctx.add({"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "weather", "input": {}}]})
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "sunny"}]}
    assert ctx.add(result) == 1
    mixed = {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]}
    assert ctx.add(mixed) == 2


def test_an_attp_result_joins_the_open_page():
    ctx = make()
    ctx.add(user("recall page 1 please"))
    assert ctx.add({"role": "user", "content": f'{ATTP_RESULT_HEADER}\nstatus = "success"\n'}) == 1
    assert indices(ctx) == [1]


def test_invalid_messages_raise_and_change_nothing():
    ctx = make(active_pages=1)
    ctx.extend(interaction(1))
    before = ctx.state()
    with pytest.raises(memci.InvalidMessageError):
        ctx.add({"role": "user"})  # no content
    with pytest.raises(memci.InvalidMessageError):
        ctx.add({"role": "tool", "content": "x"})  # no tool_call_id
    with pytest.raises(memci.InvalidMessageError):
        ctx.add("hello")  # type: ignore[arg-type]
    assert ctx.state() == before


def test_messages_come_back_as_they_went_in_and_are_not_aliased():
    ctx = make()
    message = {"role": "user", "content": "x", "name": "ana", "metadata": {"k": [1, 2.5, None]}}
    ctx.add(message)
    message["content"] = "changed"
    message["metadata"]["k"].append(3)
    expected = {"role": "user", "content": "x", "name": "ana", "metadata": {"k": [1, 2.5, None]}}
    assert ctx.pages[0].messages() == [expected]


# ---- archiving ------------------------------------------------------------------------------------


def test_a_page_opening_beyond_active_pages_archives_the_oldest():
    storage = DictStorage()
    ctx = make(active_pages=3, storage=storage)
    run_rounds(ctx, 1, 3)
    assert indices(ctx) == [1, 2, 3]
    assert ctx.contents == []
    ctx.add(user("Question 4"))
    assert indices(ctx) == [2, 3, 4]
    assert [e.index for e in ctx.contents] == [1]
    assert storage.puts == [], "an archived page waits for the next save"
    ctx.save()
    assert storage.puts == [1]
    stored = storage.get_page(1)
    assert stored is not None
    assert stored["index"] == 1
    assert stored["messages"] == interaction(1)
    assert stored["archived_round"] == 3
    assert len(stored["entry_summaries"]) == 4


def test_contents_entries_start_unrecalled_with_rounds_of_now():
    ctx = make(active_pages=1, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 4)
    entry = ctx.contents[-1]
    assert (entry.index, entry.summary, entry.entry_summaries) == (3, "p3", ("p3.0", "p3.1", "p3.2", "p3.3"))
    assert (entry.recall_count, entry.last_recall_round, entry.archived_round) == (0, 3, 3)


def test_regression_archived_messages_leave_the_window():
    """Go bug: archived messages stayed in the window."""
    ctx = make(active_pages=2)
    run_rounds(ctx, 1, 6)
    sent = window(ctx)
    for n in (1, 2, 3, 4):
        assert all(f"Question {n}:" not in str(m.get("content")) for m in sent if m["role"] != "system")
        assert all(m.get("tool_call_id") != f"call_{n}" for m in sent)
    assert [m for m in sent if m["role"] != "system"] == interaction(5) + interaction(6)


def test_regression_assistant_entries_stay_in_their_page():
    """Go bug: assistant entries fell out of their page when it was archived."""
    storage = DictStorage()
    ctx = make(active_pages=1, storage=storage)
    long_page = [user("plan a trip"), calling("a"), tool("a"), calling("b"), tool("b"), assistant("done")]
    ctx.extend(long_page)
    ctx.add(user("next"))
    ctx.save()
    stored = storage.get_page(1)
    assert stored is not None
    assert stored["messages"] == long_page
    assert len(ctx.contents[0].entry_summaries) == len(long_page)
    assert ctx.recall(1).messages() == long_page


def test_regression_archive_indices_match_page_indices():
    """Go bug: archive indices were off by the page count."""
    storage = DictStorage()
    ctx = make(active_pages=3, storage=storage)
    run_rounds(ctx, 1, 12)
    assert [e.index for e in ctx.contents] == list(range(1, 10))
    ctx.save()
    assert storage.page_indices() == list(range(1, 10))
    for k in range(1, 10):
        assert ctx.recall(k).messages()[0]["content"].startswith(f"Question {k}:")
    assert indices(ctx) == [10, 11, 12]


def test_indices_are_never_reused():
    ctx = make(active_pages=1)
    run_rounds(ctx, 1, 5)
    assert ctx.add(user("later")) == 6
    with pytest.raises(memci.PageError, match="page 7 does not exist"):
        ctx.recall(7)


def test_a_failing_save_changes_nothing_and_the_next_one_writes_everything():
    storage = FailingStorage()
    ctx = make(active_pages=2, storage=storage)
    run_rounds(ctx, 1, 3)
    before = ctx.state()
    storage.failing = True
    with pytest.raises(OSError, match="disk full"):
        ctx.save()
    assert ctx.state() == before
    assert (storage.state, storage.page_indices()) == (None, [])
    assert ctx.recall(1).messages() == interaction(1), "the unsaved page is still recallable"
    storage.failing = False
    ctx.save()
    assert storage.page_indices() == [1]
    assert memci.ContextSystem.load(storage, counter=words).state() == ctx.state()


def test_a_summarizer_that_breaks_its_contract_is_named_and_changes_nothing():
    class Short:
        def summarize(self, page: memci.Page) -> memci.PageSummary:
            return memci.PageSummary("s", ("only one",))

    ctx = make(active_pages=1, summarizer=Short())
    ctx.extend(interaction(1))
    before = ctx.state()
    with pytest.raises(memci.SummaryError, match="page 1: 1 entry summaries for 4 entries"):
        ctx.add(user("next"))
    assert ctx.state() == before


def test_arguments_are_checked():
    with pytest.raises(memci.InvalidOperationError, match="active_pages"):
        make(active_pages=0)
    with pytest.raises(memci.InvalidOperationError, match="max_context_tokens"):
        make(max_context_tokens=-5)
    with pytest.raises(memci.InvalidOperationError, match="tools"):
        make(tools="xml")
    with pytest.raises(memci.InvalidMessageError, match="system_prompt"):
        memci.ContextSystem({"role": "user", "content": "x"}, storage=DictStorage(), counter=len)
    with pytest.raises(memci.InvalidOperationError, match="lru_floor"):
        memci.ArchivePolicy(lru_trigger=0.5, lru_floor=0.8)
    with pytest.raises(memci.InvalidOperationError, match="unrecalled_rounds"):
        memci.ArchivePolicy(unrecalled_rounds=0)


def test_a_long_conversation_keeps_only_the_last_pages_in_the_window():
    # That the window's arena stays bounded too (detached runs are compacted away) is the core's
    # test (pages.rs, compaction_keeps_memory_bounded_by_the_window).
    ctx = make(active_pages=2)
    run_rounds(ctx, 1, 1500)
    assert indices(ctx) == [1499, 1500]


@pytest.mark.parametrize(
    ("bad", "named"),
    [({"role": "robot", "content": "x"}, "messages[1].role"), ("text", "messages[1]: a message must be a dict")],
)
def test_regression_extend_is_all_or_nothing(bad: Any, named: str):
    """extend([good, bad]) kept the good message."""
    ctx = make(active_pages=1)
    run_rounds(ctx, 1, 3)
    before = ctx.state()
    with pytest.raises(memci.InvalidMessageError, match=re.escape(named)):
        ctx.extend([user("fine"), bad, user("also fine")])
    assert ctx.state() == before
    assert ctx.extend([user("fine"), assistant("ok")]) == [4, 4]


def test_a_page_and_its_texts_are_read_together() -> None:
    ctx = make()
    ctx.add(user("what is the weather?"))
    ctx.add(calling("c1"))
    messages, texts, lines = ctx._window.page_texts(1)
    assert messages == ctx._window.page(1)
    assert texts == memci.context.search.message_texts(messages)
    assert lines == memci._core.entry_texts(messages)
    assert texts[1] == 'lookup\n{"q": "x"}', "a tool call's name and arguments are text"
    with pytest.raises(memci.InvalidOperationError, match="page 2 is not in the window"):
        ctx._window.page_texts(2)
