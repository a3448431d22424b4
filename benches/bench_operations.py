"""TRUNCATE and FILTER on a history of n messages (one operation per round; the state is restored
between rounds, untimed, by rolling back).

``truncate``: keep the last 20% of the messages.

- ``memci``: ``truncate(keep_last=n // 5)``: a new batch, the old state kept as its snapshot.
- ``python``: the pure-Python peer's ``truncate(keep_last=...)``: a list slice (O(k), in C); the old
  list is kept as the snapshot, no copy.
- ``langchain``: ``trim_messages(messages, max_tokens=n // 5, token_counter=len, strategy="last")``:
  ``token_counter=len`` makes each message count 1, so it keeps the last n // 5 messages. Returns a
  new list; there is no snapshot to keep.

``filter``: keep user and assistant messages whose text (what they say, then the names and
arguments of the tools they call) does not contain "deprecated" (about 2% of texts do; 62% of the
messages are kept).

- ``memci``: ``filter(roles=["user", "assistant"], content_excludes=["deprecated"])``.
- ``python``: the same on the pure-Python peer (one pass, C substring search).
- ``langchain``: ``filter_messages(messages, include_types=["human", "ai"])`` then a list
  comprehension dropping messages whose text contains the keyword. ``filter_messages`` filters by
  type, name, id and tool calls only; it has no content predicate, and excluding by id would need
  the same content scan to find the ids, so a comprehension over its output is the fairest
  exclusion LangChain allows (its cost is part of the measurement).

DESIGN.md targets: FILTER at least 10x pure Python (both O(n)). TRUNCATE keep_last has no target of
its own; memci and the list slice are both O(k), so the 100x-at-100k rule for O(k) against O(n)
work is applied to the O(n) peer, LangChain's ``trim_messages``.
"""

from __future__ import annotations

from typing import Any

import generator
import harness
import memci
import pytest
from pure_python import PyMessageArray, text_of

PEERS = ("memci", "python", "langchain")
ROLES = ("user", "assistant")
EXCLUDE = "deprecated"
LANGCHAIN_TYPES = {"user": "human", "assistant": "ai", "system": "system", "tool": "tool"}


def _keep_last(n: int) -> int:
    return n // 5


def _fresh(size: str, peer: str) -> tuple[list[dict[str, Any]], memci.MessageArray | PyMessageArray]:
    """The conversation, and a new memci array or pure-Python peer holding it."""
    messages = generator.conversation(generator.SIZES[size])
    if peer == "memci":
        return messages, memci.MessageArray(messages)
    py = PyMessageArray()
    py.extend(messages)
    return messages, py


def _restore(subject: Any, *args: Any) -> Any:
    """A setup for ``measure``: roll the array back to batch 0, pass it on with ``args``."""

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        subject.rollback(0)
        return (subject, *args), {}

    return setup


def _truncate(arr: memci.MessageArray | PyMessageArray, k: int) -> None:
    arr.truncate(keep_last=k)


def _langchain_trim(messages: list[Any], k: int) -> list[Any]:
    from langchain_core.messages import trim_messages

    return trim_messages(messages, max_tokens=k, token_counter=len, strategy="last")


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS))
def test_truncate(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    harness.importorskip_peer(peer)
    n = generator.SIZES[size]
    k = _keep_last(n)
    harness.label(benchmark, "truncate", peer, size, keep_last=k)
    slow = harness.is_slow(request)
    if peer == "langchain":
        lc = list(harness.langchain_messages(size))
        got = harness.measure(benchmark, _langchain_trim, lambda: ((lc, k), {}), slow=slow)
        assert got == lc[n - k :]
        return
    messages, arr = _fresh(size, peer)
    harness.measure(benchmark, _truncate, _restore(arr, k), slow=slow)
    assert arr.messages() == messages[n - k :]
    assert arr.batch_index == 1
    arr.rollback(0)
    assert len(arr) == n


def _filter(arr: memci.MessageArray | PyMessageArray) -> None:
    arr.filter(roles=ROLES, content_excludes=[EXCLUDE])


def _langchain_text(message: Any) -> str:
    """memci's text rule on a LangChain message: its text, then each tool call's name and the
    strings of its arguments."""
    content = message.content
    text = content if type(content) is str else message.text
    calls = getattr(message, "tool_calls", None)
    if not calls:
        return text
    pieces = [text]
    for call in calls:
        pieces.append(call["name"])
        pieces.extend(v for v in call["args"].values() if type(v) is str)
    return "\n".join(pieces)


def _langchain_filter(messages: list[Any]) -> list[Any]:
    from langchain_core.messages import filter_messages

    kept = filter_messages(messages, include_types=[LANGCHAIN_TYPES[r] for r in ROLES])
    return [m for m in kept if EXCLUDE not in _langchain_text(m)]


def _expected_filter(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] in ROLES and EXCLUDE not in text_of(m)]


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS))
def test_filter(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    harness.importorskip_peer(peer)
    harness.label(benchmark, "filter", peer, size)
    slow = harness.is_slow(request)
    if peer == "langchain":
        lc = list(harness.langchain_messages(size))
        got = harness.measure(benchmark, _langchain_filter, lambda: ((lc,), {}), slow=slow)
        expected = _expected_filter(generator.conversation(generator.SIZES[size]))
        assert [(m.type, m.content) for m in got] == [
            (LANGCHAIN_TYPES[m["role"]], m["content"] or "") for m in expected
        ]
        return
    messages, arr = _fresh(size, peer)
    expected = _expected_filter(messages)
    assert 0 < len(expected) < len(messages)
    harness.measure(benchmark, _filter, _restore(arr), slow=slow)
    assert arr.messages() == expected
    assert arr.batch_index == 1
