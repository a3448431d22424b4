"""``memci.cost``: prefix reuse, cache breaks and the modelled bill of consecutive requests; and the
bill of a cache-stable context system against one cut every round."""

from __future__ import annotations

from typing import Any

import memci
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memci import cost, tokens


def _msg(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def test_an_append_only_request_reuses_the_whole_previous_request():
    first = [_msg("system", "Be brief."), _msg("user", "What is the cache?")]
    second = [*first, _msg("assistant", "A store of prefixes."), _msg("user", "And the price?")]
    report = cost.measure([first, second])
    assert report.requests[0].reused == 0
    assert report.requests[1].reused == report.requests[0].tokens == sum(map(tokens.count_message, first))
    assert report.breaks == 0


def test_a_changed_head_breaks_the_cache_and_reuses_only_what_is_still_equal():
    system = _msg("system", "Be brief.")
    first = [system, _msg("user", "one two three"), _msg("assistant", "four")]
    second = [system, _msg("user", "one two three!"), _msg("assistant", "four"), _msg("user", "five")]
    report = cost.measure([first, second], tool_tokens=50)
    assert report.requests[1].broke
    assert report.requests[1].reused == 50 + tokens.count_message(system)
    assert report.breaks == 1


def test_the_bill_reads_the_reused_tokens_and_writes_the_rest():
    first = [_msg("system", "x " * 100)]
    second = [*first, _msg("user", "y " * 20)]
    prices = cost.Prices(read=0.1, write=1.25)
    report = cost.measure([first, second], prices=prices)
    a, b = report.requests
    assert a.bill == pytest.approx(1.25 * a.tokens)
    assert b.bill == pytest.approx(0.1 * a.tokens + 1.25 * (b.tokens - a.tokens))
    assert report.bill_ratio == pytest.approx((a.bill + b.bill) / (a.tokens + b.tokens))
    assert report.reuse == pytest.approx(a.tokens / (a.tokens + b.tokens))


def test_a_prefix_shorter_than_the_providers_minimum_is_not_read():
    first = [_msg("system", "short")]
    report = cost.measure([first, [*first, _msg("user", "more")]], min_cached=1024)
    assert report.requests[1].reused == 0
    assert not report.requests[1].broke


def test_between_keeps_each_request_measured_against_the_one_before():
    requests = [[_msg("user", "a")], [_msg("user", "a"), _msg("assistant", "b")], [_msg("user", "c")]]
    report = cost.measure(requests)
    part = report.between(1, 3)
    assert part.requests == report.requests[1:]
    assert part.breaks == 1


def test_no_request_reuses_nothing_and_costs_nothing():
    report = cost.measure([])
    assert (report.tokens, report.reuse, report.bill, report.bill_ratio, report.breaks) == (0, 0.0, 0.0, 0.0, 0)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: cost.measure("text"), "requests"),
        (lambda: cost.measure([_msg("user", "a")]), r"requests\[0\]"),
        (lambda: cost.measure([[_msg("user", "a"), 3]]), r"requests\[0\]\[1\]"),
        (lambda: cost.measure([], tool_tokens=-1), "tool_tokens"),
        (lambda: cost.measure([], min_cached=True), "min_cached"),
        (lambda: cost.measure([], prices={"read": 0.1}), "prices"),
        (lambda: cost.Prices(read=-0.1), "read"),
        (lambda: cost.Prices(write=float("nan")), "write"),
    ],
)
def test_bad_arguments_are_refused_by_name(call: Any, name: str):
    with pytest.raises(memci.InvalidOperationError, match=name):
        call()


_message = st.builds(_msg, st.sampled_from(["user", "assistant", "system"]), st.text("abc ", min_size=0, max_size=12))


@settings(max_examples=150, deadline=None)
@given(requests=st.lists(st.lists(_message, max_size=6), max_size=8), tools=st.integers(0, 30))
def test_reuse_and_the_bill_stay_within_their_bounds(requests: list[list[dict[str, Any]]], tools: int):
    report = cost.measure(requests, tool_tokens=tools)
    assert 0.0 <= report.reuse <= 1.0
    assert report.prices.read <= report.bill_ratio <= report.prices.write or report.tokens == 0
    for before, (request, measured) in zip(
        [None, *requests], zip(requests, report.requests, strict=True), strict=False
    ):
        assert measured.reused <= measured.tokens
        if before is not None and request[: len(before)] == before:
            assert not measured.broke
        if before is not None and measured.broke:
            assert request[: len(before)] != before


# ---- the agent ------------------------------------------------------------------------------------


def _agent_requests(ctx: memci.ContextSystem, rounds: int) -> list[list[Any]]:
    sent = []
    for n in range(rounds):
        ctx.add(_msg("user", f"Question {n}: " + "what about the window " * 8))
        sent.append(ctx.build_messages())
        call = {"id": f"c{n}", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        ctx.extend(
            [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{n}", "content": "found it " * 30},
            ]
        )
        sent.append(ctx.build_messages())
        ctx.add(_msg("assistant", "The answer is short. " * 6))
        ctx.end_round()
    return sent


def test_a_cache_stable_budget_reads_most_of_each_request_from_the_cache_and_breaks_rarely():
    ctx = memci.ContextSystem("Be brief. " * 30, max_context_tokens=2500)
    requests = _agent_requests(ctx, 40)
    report = cost.measure(requests, tool_tokens=ctx.tool_tokens()).between(20, 80)
    assert all(r.tokens <= 2500 for r in report.requests)
    assert report.reuse >= 0.85
    assert report.bill_ratio <= 0.3
    assert report.breaks <= 30 // 5


def test_cutting_every_round_breaks_the_cache_every_round_it_cuts():
    seed = memci.ContextSystem("Be brief. " * 30, max_context_tokens=2500, cache_stable=False)
    stable = memci.ContextSystem("Be brief. " * 30, max_context_tokens=2500)
    seed_report = cost.measure(_agent_requests(seed, 40)).between(20, 80)
    stable_report = cost.measure(_agent_requests(stable, 40)).between(20, 80)
    assert seed_report.breaks > stable_report.breaks
    assert seed_report.bill > stable_report.bill
