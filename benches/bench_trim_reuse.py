"""Prefix reuse of a trimmed window: the share of each request a provider's prompt cache can bill
at its read price, with ``trim_to_tokens`` every request against ``trim_to_tokens(low_water=0.6)``
(what every memci adapter does by default).

One workload, ``trim_reuse``: a 60-round tool-using agent (a user request, a tool call and its
result, an answer; a model request after the user message and after the tool result, about 150
new tokens each), the array trimmed to the budget before each request. Reuse is token-weighted
over rounds 10-59: the tokens of the longest run of leading messages a request shares with the
previous one, over the tokens of the requests. The time measured is the whole agent's trims;
the reuse is recorded in ``extra_info`` (``reuse``) and checked:

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
from memci import MessageArray, tokens

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


def agent(budget: int, low_water: float | None) -> float:
    """The token-weighted prefix reuse of the agent's requests over rounds 10-59."""
    arr = MessageArray([{"role": "system", "content": "You are a careful agent. " * 20}])
    previous: list[dict[str, Any]] = []
    shared = total = 0
    for r in range(ROUNDS):
        *requests, answer = _round(r)
        for new in requests:
            arr.append(new)
            arr.trim_to_tokens(budget, low_water=low_water)
            sent = arr.messages()
            if r >= MEASURED_FROM:
                common = next((k for k, (a, b) in enumerate(zip(previous, sent, strict=False)) if a != b), None)
                k = min(len(previous), len(sent)) if common is None else common
                shared += tokens.count_messages(sent[:k]) if k else 0
                total += tokens.count_messages(sent)
            previous = sent
        arr.append(answer)
    return shared / total


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("peer", PEERS)
def test_trim_reuse(benchmark: Any, peer: str, budget: int) -> None:
    benchmark.group = f"trim_reuse-{budget}"
    low_water = 0.6 if peer == "low-water" else None
    reuse = benchmark.pedantic(agent, args=(budget, low_water), rounds=1, iterations=1)
    benchmark.extra_info.update(workload="trim_reuse", peer=peer, budget=budget, reuse=round(reuse, 3))
    assert 0 < reuse < 1
    if peer == "low-water":
        assert reuse > agent(budget, None)
