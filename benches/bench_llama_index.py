"""LlamaIndex's ``ChatMemoryBuffer`` against memci's ``MemciChatMemory``: what a turn's ``get()``
with a token limit costs.

One workload, ``memory_get``: on a memory holding the generated agent conversation of N messages
(``ChatMessage`` objects, tool calls in ``additional_kwargs`` as LlamaIndex's OpenAI integration
keeps them), ``put`` of a new user message then ``get()`` with a limit of 8,000 tokens, what a chat
engine or agent does every turn:

- ``llamaindex``: ``ChatMemoryBuffer`` (its default tokenizer): it tokenizes the joined text of the
  whole history, then of a suffix one message shorter, and so on until it fits: quadratic;
- ``memci``: ``MemciChatMemory`` (exact ``o200k_base``, the chat format's overheads): each message
  counted once, when first seen; a get trims a copy of the mirror, O(messages kept).
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
from memci.integrations.llama_index import MemciChatMemory

PEERS = ("llamaindex", "memci")
CASES = harness.cases(PEERS, slow=("llamaindex-1k",), very_slow=("llamaindex-10k", "llamaindex-100k"))
LIMIT = 8000


@cache
def history(size: str) -> tuple[Any, ...]:
    return tuple(llamaindex_messages(generator.conversation(generator.SIZES[size])))


class _Memory:
    def __init__(self, peer: str, size: str) -> None:
        kind = ChatMemoryBuffer if peer == "llamaindex" else MemciChatMemory
        self.memory = kind.from_defaults(chat_history=list(history(size)), token_limit=LIMIT)
        self.turn = 0
        if peer == "memci":
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
