"""The archive policies run by ``end_round``: the m rule, the p rule, then LRU under the contents cap.

Pages here are one user message each and the counter gives every contents entry ten tokens
(``pages_counter``), so the arithmetic of each rule can be read off the test.
"""

from __future__ import annotations

import memci
import pytest
from context_helpers import DictStorage, FixedSummarizer, make, pages_counter, user


def paged(policy: memci.ArchivePolicy, **kwargs: object) -> memci.ContextSystem:
    return make(active_pages=1, policy=policy, counter=pages_counter, summarizer=FixedSummarizer(), **kwargs)


def archive(ctx: memci.ContextSystem, count: int) -> None:
    """Open pages until ``count`` more have been archived (one page per round, rounds ended)."""
    for _ in range(count):
        ctx.add(user("q"))
        ctx.end_round()


def visible(ctx: memci.ContextSystem) -> list[int]:
    return [e.index for e in ctx.contents]


LOOSE = {"unrecalled_rounds": 1000, "unchanged_rounds": 1000, "contents_max_tokens": 10_000}


def test_end_round_counts_rounds():
    ctx = paged(memci.ArchivePolicy())
    assert ctx.round == 0
    assert ctx.end_round().round == 1
    assert ctx.end_round().round == 2
    assert ctx.round == 2


def test_m_rule_drops_an_entry_never_recalled_for_m_rounds():
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "unrecalled_rounds": 3}))
    ctx.add(user("q1"))
    ctx.add(user("q2"))  # page 1 archived in round 0
    assert visible(ctx) == [1]
    assert ctx.end_round().dropped == ()  # round 1
    ctx.end_round()  # round 2
    result = ctx.end_round()  # round 3: 3 - 0 >= 3
    assert result.by_rule("unrecalled") == [1]
    assert visible(ctx) == []
    (gone,) = ctx.dropped
    assert (gone.index, gone.rule, gone.dropped_round, gone.recall_count) == (1, "unrecalled", 3, 0)


def test_m_rule_spares_a_recalled_entry():
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "unrecalled_rounds": 2}))
    ctx.add(user("q1"))
    ctx.add(user("q2"))
    ctx.recall(1)
    for _ in range(5):
        assert ctx.end_round().by_rule("unrecalled") == []
    assert visible(ctx) == [1]


def test_p_rule_drops_an_entry_whose_count_has_not_changed_for_p_rounds():
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "unchanged_rounds": 4}))
    ctx.add(user("q1"))
    ctx.add(user("q2"))
    ctx.end_round()  # round 1
    ctx.recall(1)  # recalled in round 1
    ctx.end_round()
    ctx.end_round()
    ctx.end_round()  # round 4: 4 - 1 = 3 < 4
    assert visible(ctx) == [1]
    result = ctx.end_round()  # round 5: 5 - 1 >= 4
    assert result.by_rule("unchanged") == [1]
    assert ctx.dropped[0].recall_count == 1


def test_each_recall_restarts_the_p_clock():
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "unchanged_rounds": 2}))
    ctx.add(user("q1"))
    ctx.add(user("q2"))
    for _ in range(6):
        ctx.recall(1)
        ctx.end_round()
    assert visible(ctx) == [1]
    assert ctx.contents[0].recall_count == 6


def test_m_runs_before_p():
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "unrecalled_rounds": 2, "unchanged_rounds": 2}))
    ctx.add(user("q1"))
    ctx.add(user("q2"))  # page 1, never recalled
    ctx.add(user("q3"))  # page 2
    ctx.recall(2)
    ctx.end_round()
    result = ctx.end_round()
    assert [(d.index, d.rule) for d in result.dropped] == [(1, "unrecalled"), (2, "unchanged")]


def test_lru_drops_least_recently_recalled_first_down_to_the_floor():
    # cap 100: over 90 tokens (10 entries) triggers; entries go until at most 80 (8 entries).
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "contents_max_tokens": 100}))
    ctx.add(user("q0"))
    archive(ctx, 9)  # pages 1..9 archived in rounds 0..8
    assert visible(ctx) == list(range(1, 10))
    assert ctx.contents_tokens() == 90
    ctx.recall(1)  # page 1 is now the most recently recalled
    ctx.recall(2)
    ctx.add(user("q"))  # archives page 10 in round 9: 100 tokens
    result = ctx.end_round()
    assert result.by_rule("lru") == [3, 4]
    assert visible(ctx) == [1, 2, 5, 6, 7, 8, 9, 10]
    assert result.contents_tokens == 80


def test_lru_breaks_ties_by_lower_index():
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "contents_max_tokens": 50, "lru_trigger": 0.5, "lru_floor": 0.2}))
    ctx.add(user("q0"))
    for _ in range(4):
        ctx.add(user("q"))  # pages 1..4 archived, all in round 0
    result = ctx.end_round()  # 40 tokens > 25: down to 10
    assert result.by_rule("lru") == [1, 2, 3]
    assert visible(ctx) == [4]


def test_lru_does_nothing_at_or_below_the_trigger():
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "contents_max_tokens": 100}))
    ctx.add(user("q0"))
    archive(ctx, 9)  # 90 tokens: not over 0.9 * 100
    assert ctx.end_round().dropped == ()
    assert len(ctx.contents) == 9


def test_lru_checks_the_real_count_after_its_estimate():
    """Tokens may merge across entries: LRU stops on the real count of the contents page."""

    def merging(message: dict[str, object]) -> int:
        # Each entry costs 10 alone but pairs of entries share 5 tokens on the page.
        n = str(message["content"]).count("[page ")
        return 10 * n - 5 * (n // 2)

    ctx = make(
        active_pages=1,
        counter=merging,
        summarizer=FixedSummarizer(),
        policy=memci.ArchivePolicy(**{**LOOSE, "contents_max_tokens": 40, "lru_trigger": 0.5, "lru_floor": 0.5}),
    )
    ctx.add(user("q0"))
    for _ in range(4):
        ctx.add(user("q"))  # 4 entries: 30 tokens > 20
    result = ctx.end_round()
    # The estimate (10 each) stops after one drop at 20; the real count of 3 entries is 25, so a
    # second goes: 2 entries are 15 tokens.
    assert result.by_rule("lru") == [1, 2]
    assert ctx.contents_tokens() == 15


def test_a_dropped_page_stays_stored_and_recall_brings_its_entry_back():
    storage = DictStorage()
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "unrecalled_rounds": 1}), storage=storage)
    ctx.add(user("q1"))
    ctx.add(user("q2"))
    ctx.end_round()
    assert visible(ctx) == []
    ctx.save()
    assert storage.page_indices() == [1]
    page = ctx.recall(1)
    assert page.messages() == [user("q1")]
    (entry,) = ctx.contents
    assert (entry.index, entry.summary, entry.entry_summaries) == (1, "p1", ("p1.0",))
    assert (entry.recall_count, entry.last_recall_round, entry.archived_round) == (1, 1, 0)
    assert ctx.dropped == []
    assert "[page 1]" in (ctx.contents_text() or "")


def test_a_recalled_dropped_entry_keeps_its_earlier_count():
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "unchanged_rounds": 1}))
    ctx.add(user("q1"))
    ctx.add(user("q2"))
    ctx.recall(1)
    ctx.recall(1)
    ctx.end_round()  # round 1: 1 - 0 >= 1: dropped with 2 recalls
    assert ctx.dropped[0].recall_count == 2
    ctx.recall(1)
    assert ctx.contents[0].recall_count == 3


def test_round_result_reports_the_contents_tokens():
    ctx = paged(memci.ArchivePolicy(**LOOSE))
    ctx.add(user("q1"))
    ctx.add(user("q2"))
    ctx.add(user("q3"))
    assert ctx.end_round().contents_tokens == 20 == ctx.contents_tokens()


@pytest.mark.parametrize("limit", [0, 2, 50])
def test_list_pages_lists_the_newest_entries_with_counts(limit: int):
    ctx = paged(memci.ArchivePolicy(**LOOSE))
    ctx.add(user("q0"))
    archive(ctx, 4)  # pages 1..4 archived in rounds 0..3; round is 4
    ctx.recall(2)
    listing = ctx.list_pages(limit)
    expected = [(4, 0, 1), (3, 0, 2), (2, 1, 0), (1, 0, 4)][:limit]
    assert [(p.index, p.recall_count, p.rounds_since_recall) for p in listing] == expected
    assert all(p.summary == f"p{p.index}" for p in listing)


def test_list_pages_leaves_out_dropped_entries_and_checks_its_limit():
    ctx = paged(memci.ArchivePolicy(**{**LOOSE, "unrecalled_rounds": 1}))
    ctx.add(user("q1"))
    ctx.add(user("q2"))
    ctx.end_round()
    assert ctx.list_pages() == []
    with pytest.raises(memci.InvalidOperationError, match="limit"):
        ctx.list_pages(-1)
