"""LlamaIndex's ``ChatMemoryBuffer`` against memci's ``MemciChatMemory``: what a turn's ``get()``
with a token limit costs.

One workload, ``memory_get``: on a memory holding the generated agent conversation of N messages
(``ChatMessage`` objects, tool calls in ``additional_kwargs`` as LlamaIndex's OpenAI integration
keeps them), ``put`` of a new user message then ``get()`` with a limit of 8,000 tokens, what a chat
engine or agent does every turn:

- ``llamaindex``: ``ChatMemoryBuffer`` (its default tokenizer): it tokenizes the joined text of the
  whole history, then of a suffix one message shorter, and so on until it fits: quadratic;
- ``memci``: ``MemciChatMemory`` as it comes, the drop-in (``counting="text"``: the same count
  and the same messages kept as ``ChatMemoryBuffer``): each message counted once, when first seen,
  a get reads the cached counts of what it keeps, O(new + kept);
- ``memci-hysteresis``: the same with ``low_water=0.6`` (the messages kept grow append-only, cut
  back to 60% of the limit when they pass it);
- ``memci-request``: ``counting="request"`` (exact ``o200k_base``, the chat format's overheads,
  whole tool groups) with ``low_water=0.6``: each message converted and counted once, a get
  appends the new messages to the window and cuts it with hysteresis, O(new + kept);
- ``memci-request-plain``: the same with ``low_water=None`` (the newest messages that fit at every
  get, planned on the mirror and rolled back), O(new + kept) too.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import generator
import harness
import pytest
from bench_build import llamaindex_messages

pytest.importorskip("llama_index.core")
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer
from memci.integrations.llama_index import Counting, MemciChatMemory
from memci.integrations.trimming import LOW_WATER

PEERS = ("llamaindex", "memci", "memci-hysteresis", "memci-request", "memci-request-plain")
#: The settings of each memci peer: (counting, low_water).
SETTINGS: dict[str, tuple[Counting, float | None]] = {
    "memci": ("text", None),
    "memci-hysteresis": ("text", LOW_WATER),
    "memci-request": ("request", LOW_WATER),
    "memci-request-plain": ("request", None),
}
CASES = harness.cases(PEERS, slow=("llamaindex-1k",), very_slow=("llamaindex-10k", "llamaindex-100k"))
LIMIT = 8000


@cache
def history(size: str) -> tuple[Any, ...]:
    return tuple(llamaindex_messages(generator.conversation(generator.SIZES[size])))


class _Memory:
    def __init__(self, peer: str, size: str) -> None:
        if peer == "llamaindex":
            self.memory: Any = ChatMemoryBuffer.from_defaults(chat_history=list(history(size)), token_limit=LIMIT)
        else:
            counting, low_water = SETTINGS[peer]
            self.memory = MemciChatMemory.from_defaults(
                chat_history=list(history(size)), token_limit=LIMIT, counting=counting, low_water=low_water
            )
        self.turn = 0
        if peer != "llamaindex":
            self.memory.get()  # the first get counts the history once, as a session's first turn would

    def turn_once(self) -> int:
        self.turn += 1
        self.memory.put(ChatMessage(role="user", content=f"Question {self.turn}: and the tests?"))
        return len(self.memory.get())


_MEMORIES: dict[str, _Memory] = {}


@pytest.mark.parametrize(("peer", "size"), CASES)
def test_memory_get(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    key = f"{peer}-{size}"
    if key not in _MEMORIES:
        _MEMORIES[key] = _Memory(peer, size)
    memory = _MEMORIES[key]
    harness.label(benchmark, "memory_get", peer, size)
    kept = harness.measure(benchmark, memory.turn_once, slow=harness.is_slow(request))
    assert 0 < kept < len(history(size))
