"""Build a history by appending one message at a time (the hot path of an agent loop).

Peers, each given ``conversation(n)`` and appending one message per call:

- ``memci``: ``MessageArray.append(dict)``: validates, copies into the Rust store.
- ``python``: the pure-Python peer: copies the dict (``copy_json``) and keeps the role index.
- ``langchain``: ``InMemoryChatMessageHistory.add_message`` of messages converted to LangChain
  objects *before* the timed region (as asked). It stores the caller's objects as they are: no copy,
  no validation, so it does less than a store; it is shown for scale, not as a target.
- ``langchain-convert``: the same, converting each dict as it arrives (``convert_to_messages``):
  what an application holding OpenAI dicts pays (LangChain builds 100k in about 2 s).
- ``llamaindex``: ``ChatMemoryBuffer.put`` of pre-converted ``ChatMessage`` objects (no copy either).

Target (docs/design.md): at least 10x the pure-Python peer (both O(n), memci must make the same copy).
"""

from __future__ import annotations

import warnings
from typing import Any

import generator
import harness
import memci
import pytest
from pure_python import PyMessageArray

PEERS = ("memci", "python", "langchain", "langchain-convert", "llamaindex")
CASES = harness.cases(PEERS, slow=("langchain-convert-100k",))


def _memci(messages: list[dict[str, Any]]) -> memci.MessageArray:
    arr = memci.MessageArray()
    append = arr.append
    for m in messages:
        append(m)
    return arr


def _python(messages: list[dict[str, Any]]) -> PyMessageArray:
    arr = PyMessageArray()
    append = arr.append
    for m in messages:
        append(m)
    return arr


def _langchain_history() -> Any:
    from langchain_core.chat_history import InMemoryChatMessageHistory

    with warnings.catch_warnings():
        # Deprecated in langchain-core 1.6.4 in favour of LangGraph's memory, still the documented
        # in-memory history; its deprecation warning would be an error under filterwarnings=error.
        warnings.simplefilter("ignore", DeprecationWarning)
        return InMemoryChatMessageHistory()


def _langchain(history: Any, messages: tuple[Any, ...]) -> Any:
    add = history.add_message
    for m in messages:
        add(m)
    return history


def _langchain_convert(history: Any, messages: list[dict[str, Any]]) -> Any:
    from langchain_core.messages import convert_to_messages

    add = history.add_message
    for m in messages:
        add(convert_to_messages([m])[0])
    return history


def llamaindex_messages(messages: list[dict[str, Any]]) -> list[Any]:
    """OpenAI dicts as LlamaIndex ``ChatMessage``: tool calls and ids in ``additional_kwargs``, the
    way LlamaIndex's OpenAI integration carries them."""
    from llama_index.core.llms import ChatMessage

    out = []
    for m in messages:
        extra = {k: v for k, v in m.items() if k not in ("role", "content")}
        out.append(ChatMessage(role=m["role"], content=m["content"], additional_kwargs=extra))
    return out


def _llamaindex_buffer() -> Any:
    from llama_index.core.memory import ChatMemoryBuffer

    # A token limit no history reaches: put() stores, get() would trim; only put() is measured.
    return ChatMemoryBuffer.from_defaults(token_limit=10**12)


def _llamaindex(buffer: Any, messages: list[Any]) -> Any:
    put = buffer.put
    for m in messages:
        put(m)
    return buffer


@pytest.mark.parametrize(("peer", "size"), CASES)
def test_build(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    harness.importorskip_peer(peer)
    harness.label(benchmark, "build", peer, size)
    messages = generator.conversation(generator.SIZES[size])
    slow = harness.is_slow(request)

    if peer == "memci":
        arr = harness.measure(benchmark, _memci, lambda: ((messages,), {}), slow=slow)
        assert len(arr) == len(messages)
        assert arr.messages() == messages
        assert arr.stats().total_batches == 1  # append opens no batch
    elif peer == "python":
        py = harness.measure(benchmark, _python, lambda: ((messages,), {}), slow=slow)
        assert py.messages() == messages
        assert all(a is not b for a, b in zip(py.messages(), messages, strict=True))  # copied
        assert py.count("user") == sum(m["role"] == "user" for m in messages)
    elif peer == "langchain":
        lc = harness.langchain_messages(size)
        history = harness.measure(benchmark, _langchain, lambda: ((_langchain_history(), lc), {}), slow=slow)
        assert history.messages == list(lc)
    elif peer == "langchain-convert":
        history = harness.measure(
            benchmark, _langchain_convert, lambda: ((_langchain_history(), messages), {}), slow=slow
        )
        assert history.messages == list(harness.langchain_messages(size))
    else:
        li = llamaindex_messages(messages)
        buffer = harness.measure(benchmark, _llamaindex, lambda: ((_llamaindex_buffer(), li), {}), slow=slow)
        stored = buffer.get_all()
        assert len(stored) == len(messages)
        assert [m.content for m in stored] == [m["content"] for m in messages]
