"""LangChain's ``trim_messages`` against memci's ``MemciTrimMiddleware``: what trimming costs per
model call of an agent.

One workload, ``agent_trim``: a conversation of N messages (LangChain messages, with ids, as an
agent's state holds them) grows by a turn (a user message and an answer), then the messages for
the next model call are trimmed to 8,000 o200k_base tokens, the newest kept:

- ``langchain``: ``trim_messages(strategy="last", include_system=True, start_on="human")`` with
  a per-message exact counter (tiktoken, the OpenAI cookbook's formula), what a LangChain user
  writes in a ``before_model`` hook: it counts a prefix of the history per step of a binary
  search, re-tokenizing each time;
- ``memci``: the middleware's trimmer (``MessageTrimmer``, ``HistoryTrimmer`` underneath) as it
  comes: the conversation mirrored once, extended by the new messages only, and the window cut
  with hysteresis (cut back to 60% of the budget when it passes it, append-only between cuts);
- ``memci-plain``: the same with ``low_water=None``: the newest messages that fit at every call,
  planned on the mirror and rolled back (checkpoint/rollback, O(1) each).

Both memci peers cost O(new + kept) a call: the same at 1k and at 100k messages.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import generator
import harness
import pytest
from bench_tokens import _langchain_trim, _lc_exact_counter

pytest.importorskip("langchain_core")
from langchain_core.messages import AIMessage, HumanMessage
from memci.formats import to_langchain
from memci.integrations.langchain_messages import MessageTrimmer
from memci.integrations.trimming import LOW_WATER

PEERS = ("langchain", "memci", "memci-plain")
CASES = harness.cases(PEERS, slow=("langchain-100k",))
BUDGET = 8000


@cache
def history(size: str) -> tuple[Any, ...]:
    messages = to_langchain(generator.conversation(generator.SIZES[size]))
    for i, message in enumerate(messages):
        message.id = f"m{i}"
    return tuple(messages)


class _Agent:
    def __init__(self, peer: str, size: str) -> None:
        self.messages = list(history(size))
        self.turn = 0
        if peer.startswith("memci"):
            trimmer = MessageTrimmer(BUDGET, low_water=None if peer == "memci-plain" else LOW_WATER)
            self.trim = trimmer.trim
            trimmer.trim(self.messages)  # the conversation's first call mirrors and counts it once
        else:
            counter = _lc_exact_counter()
            self.trim = lambda messages: _langchain_trim(messages, BUDGET, counter)

    def call(self) -> int:
        self.turn += 1
        self.messages.append(HumanMessage(f"Question {self.turn}: and the tests?", id=f"q{self.turn}"))
        self.messages.append(AIMessage(f"Answer {self.turn}: they pass.", id=f"a{self.turn}"))
        return len(self.trim(self.messages))


_AGENTS: dict[str, _Agent] = {}


@pytest.mark.parametrize(("peer", "size"), CASES)
def test_agent_trim(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    key = f"{peer}-{size}"
    if key not in _AGENTS:
        _AGENTS[key] = _Agent(peer, size)
    agent = _AGENTS[key]
    harness.label(benchmark, "agent_trim", peer, size)
    kept = harness.measure(benchmark, agent.call, slow=harness.is_slow(request))
    assert 0 < kept < len(agent.messages)
