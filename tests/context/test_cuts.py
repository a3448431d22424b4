"""Cache-stable windows: cuts in blocks with hysteresis, the contents page frozen between cuts,
never over ``max_context_tokens``, the settings saved; and the seed's rules when not asked for."""

from __future__ import annotations

from typing import Any

import memci
import pytest
from context_helpers import FixedSummarizer, interaction, make, run_rounds, user, words
from hypothesis import given, settings
from hypothesis import strategies as st
from memci.context.cuts import CutPolicy


def _extends(before: list[Any], after: list[Any]) -> bool:
    return after[: len(before)] == before


def _agent(ctx: memci.ContextSystem, rounds: int, words_per: int = 20) -> list[list[Any]]:
    """A tool-using agent: two requests a round (after the user message, after the tool result)."""
    sent = []
    for n in range(1, rounds + 1):
        question, call, result, answer = interaction(n)
        filler = " word" * words_per
        ctx.add({**question, "content": question["content"] + filler})
        sent.append(ctx.build_messages(sanitize=False))
        ctx.extend([call, {**result, "content": result["content"] + filler}])
        sent.append(ctx.build_messages(sanitize=False))
        ctx.add(answer)
        ctx.end_round()
    return sent


# ---- defaults -----------------------------------------------------------------------------------


def test_cache_stable_is_on_under_a_token_budget_and_off_with_page_counts_alone():
    assert make(max_context_tokens=5000).cache_stable
    assert not make().cache_stable
    assert make(cache_stable=True).cache_stable
    assert not make(max_context_tokens=5000, cache_stable=False).cache_stable


def test_page_counts_alone_keep_the_seed_rule_a_page_leaves_each_time_one_opens_beyond_n():
    ctx = make(active_pages=3, summarizer=FixedSummarizer())
    for n in range(1, 9):
        ctx.extend(interaction(n))
        ctx.end_round()
        assert [p.index for p in ctx.pages] == list(range(max(1, n - 2), n + 1))


@pytest.mark.parametrize(("active", "opened", "keep"), [(0, 7, 3), (3, 1, 3), (5, 4, 2), (2, 0, 2), (9, 3, 2)])
def test_the_seed_policy_gives_the_seed_count_for_any_batch(active: int, opened: int, keep: int):
    policy = CutPolicy.of(False, 0.5, keep, None)
    assert policy.leaving(active, opened) == (max(0, active + opened - keep) if opened else 0)


# ---- page mode ----------------------------------------------------------------------------------


def test_stable_pages_grow_to_the_high_water_count_then_cut_back_to_n_in_one_step():
    ctx = make(active_pages=4, cache_stable=True, low_water=0.5, summarizer=FixedSummarizer())
    counts = []
    for n in range(1, 20):
        ctx.extend(interaction(n))
        ctx.end_round()
        counts.append(len(ctx.pages))
    assert max(counts) == 8  # floor(4 / 0.5)
    assert counts[:8] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert counts[8] == 4  # the 9th page opened: back to n at once
    assert counts[9:13] == [5, 6, 7, 8]


def test_between_cuts_each_request_extends_the_previous_one():
    ctx = make(active_pages=3, cache_stable=True, summarizer=FixedSummarizer())
    sent = _agent(ctx, 30)
    breaks = [i for i in range(1, len(sent)) if not _extends(sent[i - 1], sent[i])]
    assert breaks  # it does cut
    assert len(breaks) <= len(sent) // 2 // 3  # one cut at most in 3 rounds (6 pages high, 3 kept)
    for i in breaks:  # a cut keeps the system segment
        assert sent[i][:2] == sent[i - 1][:2]


def test_the_contents_page_is_rewritten_only_at_a_cut_not_by_a_recall_or_a_round():
    ctx = make(active_pages=2, cache_stable=True, low_water=0.5, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 5)  # 5 pages opened on 4 high: cut back to 2 -> pages 1-3 archived
    frozen = ctx.contents_text()
    assert frozen is not None
    assert "[page 1]" in frozen
    before = ctx.build_messages(sanitize=False)
    ctx.recall(1)
    ctx.end_round()
    assert ctx.contents_text() == frozen
    assert ctx.build_messages(sanitize=False) == before
    run_rounds(ctx, 6, 8)  # pages 6-8 open on 4 and 5: the third passes 4, the next cut
    assert ctx.contents_text() != frozen
    assert "recalled 1x" in (ctx.contents_text() or "")


def test_archive_rules_run_at_the_cut_not_every_round():
    policy = memci.ArchivePolicy(unrecalled_rounds=2)
    ctx = make(active_pages=2, cache_stable=True, policy=policy, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 5)
    assert [e.index for e in ctx.contents] == [1, 2, 3]
    results = [ctx.end_round() for _ in range(4)]
    assert all(not r.dropped for r in results)
    assert [e.index for e in ctx.contents] == [1, 2, 3]
    run_rounds(ctx, 6, 8)  # the cut: the m rule drops what fell due meanwhile
    assert {d.index for d in ctx.dropped} == {1, 2, 3}


# ---- token budget -------------------------------------------------------------------------------


def test_under_a_budget_the_window_is_never_over_it_and_a_cut_lands_at_low_water():
    limit = 900
    ctx = make(active_pages=2, max_context_tokens=limit, low_water=0.5, summarizer=FixedSummarizer())
    budget = limit - ctx.tool_tokens()
    sent = _agent(ctx, 60)
    for request in sent:
        assert ctx.count_tokens(request) <= budget
    cuts = [i for i in range(1, len(sent)) if not _extends(sent[i - 1], sent[i])]
    assert 2 <= len(cuts) <= 60 // 4
    for i in cuts:
        # the request before the cut had the new messages added: it would have passed the budget
        assert ctx.count_tokens(sent[i]) <= budget // 2 + ctx.count_tokens(sent[i][-2:])


def test_a_cut_keeps_the_last_n_pages_whole_even_above_low_water():
    ctx = make(active_pages=4, max_context_tokens=700, low_water=0.2, summarizer=FixedSummarizer())
    for n in range(1, 40):
        ctx.extend(interaction(n))
        ctx.build_messages()
        assert len(ctx.pages) >= min(n, 4)
        ctx.end_round()


def test_the_last_pages_over_the_budget_fall_back_to_the_exact_fit_and_never_exceed_it():
    # Room for 189 tokens of messages beside the tool definitions: the last 5 pages pass it.
    limit = 189 + make().tool_tokens()
    ctx = make(active_pages=5, max_context_tokens=limit, summarizer=FixedSummarizer())
    for n in range(1, 12):
        ctx.extend(interaction(n))
        assert ctx.count_tokens(ctx.build_messages(sanitize=False)) + ctx.tool_tokens() <= limit
        ctx.end_round()


def test_a_budget_that_cannot_fit_raises_and_changes_nothing():
    ctx = make(max_context_tokens=10)
    ctx.add(user("hello " * 50))
    before = ctx.state()
    with pytest.raises(memci.ContextOverflowError):
        ctx.build_messages()
    assert ctx.state() == before


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 60), st.integers(0, 80), st.booleans()), min_size=1, max_size=40),
    limit=st.integers(400, 1500),
    keep=st.integers(1, 4),
    low=st.sampled_from([0.3, 0.5, 0.6, 0.8]),
)
def test_any_conversation_stays_under_the_budget_and_grows_append_only_between_cuts(
    sizes: list[tuple[int, int, bool]], limit: int, keep: int, low: float
):
    ctx = make(active_pages=keep, max_context_tokens=limit, low_water=low, summarizer=FixedSummarizer())
    budget = limit - ctx.tool_tokens()
    previous: list[Any] | None = None
    for n, (question, answer, recall) in enumerate(sizes, 1):
        ctx.add(user(f"q{n}" + " w" * question))
        ctx.add({"role": "assistant", "content": f"a{n}" + " w" * answer})
        if recall and ctx.contents:
            ctx.recall(ctx.contents[0].index)
        try:
            sent = ctx.build_messages(sanitize=False)
        except memci.ContextOverflowError:
            return  # the open page alone is over the budget: refused, as documented
        assert ctx.count_tokens(sent) <= budget
        if previous is not None and not _extends(previous, sent):
            # a cut: at low water, or as low as the last pages allow
            assert ctx.count_tokens(sent) <= low * budget or len(ctx.pages) <= keep
        previous = sent
        ctx.end_round()


# ---- settings and state -------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.2, "half", True, None])
def test_a_bad_low_water_is_refused_by_name(bad: object):
    with pytest.raises(memci.InvalidOperationError, match="low_water"):
        make(low_water=bad)


def test_a_bad_cache_stable_is_refused_by_name():
    with pytest.raises(memci.InvalidOperationError, match="cache_stable"):
        make(cache_stable="yes")


def test_a_reload_sends_the_same_window_with_the_contents_frozen_at_the_last_cut():
    ctx = make(active_pages=2, cache_stable=True, low_water=0.4, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 6)
    ctx.recall(1)  # changes the chapter, not the frozen page
    before = ctx.build_messages(sanitize=False)
    ctx.save()
    again = memci.ContextSystem.load(ctx.storage, counter=words, summarizer=FixedSummarizer())
    assert (again.cache_stable, again.low_water) == (True, 0.4)
    assert again.build_messages(sanitize=False) == before
    copied = memci.ContextSystem.from_state(ctx.to_state(), ctx.storage, counter=words)
    assert copied.build_messages(sanitize=False) == before


def test_open_replaces_the_cut_settings_it_is_given():
    ctx = make(active_pages=2)
    ctx.save()
    again = memci.ContextSystem.open(ctx.storage, cache_stable=True, low_water=0.7, counter=words)
    assert (again.cache_stable, again.low_water) == (True, 0.7)
    kept = memci.ContextSystem.open(ctx.storage, counter=words)
    assert not kept.cache_stable


def test_a_state_saved_without_the_cut_settings_loads_with_the_defaults():
    ctx = make(active_pages=2, max_context_tokens=5000, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 4)
    state = ctx.to_state()
    assert "low_water" not in state  # a default is not written
    assert "cache_stable" not in state  # nor the default for the limit
    del state["stable_contents"]
    again = memci.ContextSystem.from_state(state, ctx.storage, counter=words)
    assert again.cache_stable
    assert again.contents_text() == ctx.contents_text()


def test_a_bad_saved_low_water_is_a_state_error():
    ctx = make()
    state = ctx.to_state()
    state["low_water"] = 2
    with pytest.raises(memci.StateError, match="low_water"):
        memci.ContextSystem.from_state(state, ctx.storage)


async def test_the_async_system_takes_and_reports_the_cut_settings():
    actx = memci.AsyncContextSystem("Be brief.", cache_stable=True, low_water=0.6, counter=words)
    assert (actx.cache_stable, actx.low_water) == (True, 0.6)
    assert memci.AsyncContextSystem("Be brief.", max_context_tokens=900).cache_stable


def test_when_the_last_pages_alone_pass_the_budget_they_yield_to_a_cut_at_low_water_not_one_per_request():
    # Room for 289 tokens of messages beside the tool definitions: five pages pass it.
    limit = 289 + make().tool_tokens()
    ctx = make(active_pages=5, max_context_tokens=limit, summarizer=FixedSummarizer())
    budget = limit - ctx.tool_tokens()
    sent = _agent(ctx, 40)
    assert max(ctx.count_tokens(request) for request in sent) <= budget
    assert 5 * ctx.count_tokens(sent[-1][-4:]) > budget  # five pages do not fit
    cuts = [i for i in range(1, len(sent)) if not _extends(sent[i - 1], sent[i])]
    assert len(cuts) <= len(sent) // 4
