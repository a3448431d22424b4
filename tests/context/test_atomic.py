"""All or nothing: a summarizer that raises while ``add``/``extend`` archive leaves the system exactly
as it was; ``extend`` gives what adding one by one gives; and ``max_context_tokens`` drops contents
entries (LRU) when archiving pages alone cannot make the window fit."""

from __future__ import annotations

import json

import memci
import pytest
from context_helpers import FixedSummarizer, assistant, interaction, make, run_rounds, tool, user, words
from fake_embedder import HashingEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st
from memci.context.summary import PageSummary


class FailsOn(FixedSummarizer):
    """Summarises like :class:`FixedSummarizer`, but raises on the pages it is told to."""

    def __init__(self, *pages: int) -> None:
        self.pages = set(pages)
        self.calls: list[int] = []

    def summarize(self, page: memci.Page) -> PageSummary:
        self.calls.append(page.index)
        if page.index in self.pages:
            raise RuntimeError(f"cannot summarise page {page.index}")
        return super().summarize(page)


def snapshot(ctx: memci.ContextSystem) -> str:
    """Everything observable, as text: the state, the window, search and the pending pages."""
    return json.dumps(
        [ctx.state(), ctx.contents_text(), ctx.search("item"), [p.messages() for p in ctx.pages]],
        default=repr,
    )


def test_extend_that_fails_on_its_third_archive_changes_nothing():
    summarizer = FailsOn()
    ctx = make(active_pages=2, summarizer=summarizer)
    run_rounds(ctx, 1, 2)
    before = snapshot(ctx)
    summarizer.pages = {3}
    batch = [m for n in (3, 4, 5, 6) for m in interaction(n)]  # archives pages 1, 2, 3, 4
    with pytest.raises(RuntimeError, match="page 3"):
        ctx.extend(batch)
    assert snapshot(ctx) == before
    summarizer.pages = set()
    assert ctx.extend(batch)[::4] == [3, 4, 5, 6]
    assert [e.index for e in ctx.contents] == [1, 2, 3, 4]


def test_add_that_must_archive_two_pages_and_fails_on_the_second_changes_nothing():
    summarizer = FailsOn()
    store = memci.MemoryStorage()
    ctx = memci.ContextSystem("x", storage=store, active_pages=4, summarizer=summarizer, counter=words)
    run_rounds(ctx, 1, 4)
    ctx.save()
    fewer = memci.ContextSystem.open(store, active_pages=2, summarizer=summarizer, counter=words)
    before = snapshot(fewer)
    summarizer.pages = {2}
    with pytest.raises(RuntimeError, match="page 2"):
        fewer.add(user("next"))  # pages 1, 2 and 3 must leave: page 2 fails
    assert snapshot(fewer) == before
    summarizer.pages = set()
    assert fewer.add(user("next")) == 5
    assert [p.index for p in fewer.pages] == [4, 5]


def test_feed_whose_summarizer_raises_changes_nothing_the_round_included():
    summarizer = FailsOn()
    ctx, twin = make(active_pages=1, summarizer=summarizer), make(active_pages=1, summarizer=FixedSummarizer())
    for n in (1, 2):
        ctx.feed(interaction(n))
        twin.feed(interaction(n))
    before = snapshot(ctx)
    summarizer.pages = {2}
    with pytest.raises(RuntimeError, match="page 2"):
        ctx.feed(interaction(3))  # a new request: the round would end, then page 2 leave
    assert snapshot(ctx) == before
    summarizer.pages = set()
    assert ctx.feed(interaction(3)) == twin.feed(interaction(3)), "made again, the round ends once"
    assert ctx.to_state() == twin.to_state()


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(st.tuples(st.booleans(), st.integers(0, 3)), min_size=1, max_size=12),
    active=st.integers(1, 3),
    failing=st.sets(st.integers(1, 12), max_size=4),
)
def test_feed_retried_after_any_summary_failure_gives_what_feeding_without_failure_gives(
    turns: list[tuple[bool, int]], active: int, failing: set[int]
):
    """Each turn fed as a framework feeds it (a request, then answers in ``extra`` more feeds);
    a summarizer failing on any page leaves the system as it was, and the retry lands."""
    summarizer = FailsOn(*failing)
    ctx, twin = (
        make(active_pages=active, summarizer=summarizer),
        make(active_pages=active, summarizer=FixedSummarizer()),
    )
    for n, (with_tool, extra) in enumerate(turns, 1):
        batches = [interaction(n, with_tool=with_tool)] + [[assistant(f"more {n}.{i}")] for i in range(extra)]
        for batch in batches:
            while True:
                before = snapshot(ctx)
                try:
                    ctx.feed(batch)
                    break
                except RuntimeError:
                    assert snapshot(ctx) == before
                    summarizer.pages.discard(summarizer.calls[-1])  # that page summarises next time
            twin.feed(batch)
            assert ctx.to_state() == twin.to_state()


def test_feed_whose_embedder_raises_changes_nothing_the_round_included():
    failing = {"now": False}
    embedder = HashingEmbedder()

    def flaky(texts: list[str]) -> object:
        if failing["now"]:
            raise ConnectionError("embeddings endpoint unreachable")
        return embedder(texts)

    ctx = make(active_pages=1, embedder=flaky)
    ctx.feed(interaction(1))
    before = snapshot(ctx)
    failing["now"] = True
    with pytest.raises(ConnectionError, match="unreachable"):
        ctx.feed(interaction(2))
    failing["now"] = False
    assert snapshot(ctx) == before
    assert ctx.feed(interaction(2)).round == 2, "made again, the round ends once"
    assert [h.page_index for h in ctx.search("item 1", 1)] == [1]


def _message(kind: int, n: int) -> dict[str, object]:
    return [user(f"question {n} about item {n}"), assistant(f"answer {n}"), tool(f"c{n}", f"item {n}")][kind]


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(st.integers(0, 1), min_size=1, max_size=30),
    active=st.integers(1, 4),
    split=st.integers(0, 30),
)
def test_extend_gives_what_adding_one_by_one_gives(kinds: list[int], active: int, split: int):
    batch = [_message(kind, n) for n, kind in enumerate(kinds)]
    one = make(active_pages=active)
    many = make(active_pages=active)
    one.extend(batch[:split])
    many.extend(batch[:split])
    indices = [one.add(m) for m in batch[split:]]
    assert many.extend(batch[split:]) == indices
    assert snapshot(many) == snapshot(one)
    assert [many.recall(e.index) for e in many.contents] == [one.recall(e.index) for e in one.contents]


# ---- max_context_tokens with small pages ------------------------------------------------------------------


def test_small_pages_fit_by_dropping_contents_entries_instead_of_overflowing():
    # Pages of one short message each: a page's contents entry costs about what the page does, so
    # archiving pages alone never makes the window smaller; dropping entries does.
    ctx = make(active_pages=50, summarizer=FixedSummarizer(), max_context_tokens=10_000)
    for n in range(1, 41):
        ctx.add(user(f"q{n}"))
        ctx.end_round()
    need = ctx.token_count() + ctx.tool_tokens()
    limit = need - 30
    tight = make(active_pages=50, summarizer=FixedSummarizer(), max_context_tokens=limit)
    for n in range(1, 41):
        tight.add(user(f"q{n}"))
        tight.end_round()
    sent = tight.build_messages(sanitize=False)
    assert tight.token_count() + tight.tool_tokens() <= limit
    assert sum(map(words, sent)) == tight.token_count()
    gone = [d for d in tight.dropped if d.rule == "lru"]
    assert gone, "entries were dropped to fit"
    assert [d.index for d in gone] == sorted(d.index for d in gone)  # least recently recalled first
    assert tight.pages[-1].index == 40  # the open page stays
    assert tight.search("q1")[0].page_index == 1  # a dropped entry's page is still found
    assert tight.recall(gone[0].index).index == gone[0].index


def test_fitting_applies_the_contents_cap_as_pages_are_archived():
    policy = memci.ArchivePolicy(contents_max_tokens=40)
    ctx = make(active_pages=20, summarizer=FixedSummarizer(), policy=policy, max_context_tokens=10_000)
    run_rounds(ctx, 1, 10)
    limit = ctx.token_count() + ctx.tool_tokens() - 1
    tight = make(active_pages=20, summarizer=FixedSummarizer(), policy=policy, max_context_tokens=limit)
    run_rounds(tight, 1, 10)
    tight.build_messages()
    assert tight.contents_tokens() <= policy.lru_trigger * policy.contents_max_tokens
    assert {d.rule for d in tight.dropped} <= {"lru"}


def test_an_overflow_that_dropping_entries_cannot_cure_changes_nothing():
    ctx = make(active_pages=3, summarizer=FixedSummarizer(), max_context_tokens=200 + make().tool_tokens())
    run_rounds(ctx, 1, 6)
    ctx.add(user("word " * 300))
    before = snapshot(ctx)
    with pytest.raises(memci.ContextOverflowError, match="and no contents entry"):
        ctx.build_messages()
    assert snapshot(ctx) == before
