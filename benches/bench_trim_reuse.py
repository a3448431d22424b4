"""Prefix reuse of a trimmed window: the share of each request a provider's prompt cache can bill
at its read price, with ``trim_to_tokens`` every request against ``trim_to_tokens(low_water=0.6)``
(what every memci adapter does by default).

One workload, ``trim_reuse``: a 60-round tool-using agent (a user request, a tool call and its
result, an answer; a model request after the user message and after the tool result, about 150
new tokens each), the array trimmed to the budget before each request. Reuse is token-weighted
over rounds 10-59: the tokens of the longest run of leading messages a request shares with the
previous one, over the tokens of the requests (``memci.cost.measure``). The time measured is the
whole agent's trims (the reuse is counted after it); the reuse is recorded in ``extra_info``
(``reuse``) and checked:

- ``plain``: ``trim_to_tokens(budget)``, the newest messages that fit at every request (what
  LangChain's ``trim_messages`` does every turn): the oldest turn leaves at almost every request,
  rewriting the head of the next one;
- ``low-water``: ``trim_to_tokens(budget, low_water=0.6)``: append-only until the budget is passed,
  then one cut back to 60% of it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from memci import MessageArray, cost

PEERS = ("plain", "low-water")
BUDGETS = (1800, 3000, 6000)
ROUNDS = 60
MEASURED_FROM = 10


def _round(r: int) -> list[list[dict[str, Any]]]:
    """The messages before each request of round ``r``, then the answer that closes it."""
    call = {"id": f"c{r}", "type": "function", "function": {"name": "read_log", "arguments": json.dumps({"round": r})}}
    return [
        [{"role": "user", "content": f"Round {r}: please check the build log and tell me what failed. " * 5}],
        [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": f"c{r}",
                "content": f"log line {r}: test_x failed with an assertion. " * 6,
            },
        ],
        [{"role": "assistant", "content": f"Round {r}: test_x failed; fixed it. " * 4}],
    ]


def agent(budget: int, low_water: float | None) -> list[list[dict[str, Any]]]:
    """The requests the agent sends (two a round), its array trimmed to ``budget`` before each."""
    arr = MessageArray([{"role": "system", "content": "You are a careful agent. " * 20}])
    sent: list[list[dict[str, Any]]] = []
    for r in range(ROUNDS):
        *requests, answer = _round(r)
        for new in requests:
            arr.append(new)
            arr.trim_to_tokens(budget, low_water=low_water)
            sent.append(arr.messages())
        arr.append(answer)
    return sent


def reuse(requests: list[list[dict[str, Any]]]) -> float:
    """Token-weighted prefix reuse over rounds 10-59 (``memci.cost``)."""
    return cost.measure(requests).between(2 * MEASURED_FROM, 2 * ROUNDS).reuse


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("peer", PEERS)
def test_trim_reuse(benchmark: Any, peer: str, budget: int) -> None:
    benchmark.group = f"trim_reuse-{budget}"
    low_water = 0.6 if peer == "low-water" else None
    reused = reuse(benchmark.pedantic(agent, args=(budget, low_water), rounds=1, iterations=1))
    benchmark.extra_info.update(workload="trim_reuse", peer=peer, budget=budget, reuse=round(reused, 3))
    assert 0 < reused < 1
    if peer == "low-water":
        assert reused > reuse(agent(budget, None))
