"""The sanitizer on a history of n messages with 1% of its tool-call groups broken
(``generator.broken_conversation``: the last result lost, every result lost, a result sent twice,
an orphan result), against the pure-Python implementation of the same rules and report
(``pure_sanitize.py``). Both loggers are silenced: the warning line costs the same for both.

- ``sanitize_array``: ``MessageArray.sanitize()`` (a new batch; the report's messages are decoded
  only if read) against ``PySanitizingArray.sanitize()`` (a new batch whose snapshot is the old list,
  the kept list built from slices). The state is rolled back to batch 0 between rounds, untimed.
- ``validate_array``: ``MessageArray.validate()`` against the peer's ``validate()``. memci reads the
  pair index of its stored messages (built by the first scan; see ``validate_array_first``).
- ``validate_array_first``: the same on a store that has never been scanned (a new array each
  round, built untimed), so the pair facts are read from every stored message's encoding.
- ``sanitize_list`` / ``validate_list``: ``memci.sanitize_messages`` / ``validate_messages`` on the
  list of dicts against the peer's functions. Both must look at every dict (its role, and the ids of
  the messages that carry calls or results): memci's scan is bound by those dict lookups.

DESIGN.md and issue 3 targets at 100k: the array entry points at least 20x pure Python, the
list entry points at least 3x.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import generator
import harness
import memci
import pure_sanitize
import pytest
from pure_sanitize import PySanitizingArray

PEERS = ("memci", "python")


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    loggers = [logging.getLogger("memci"), pure_sanitize.logger]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    yield
    for lg, level in zip(loggers, levels, strict=True):
        lg.setLevel(level)


def _history(size: str) -> list[dict[str, Any]]:
    return generator.broken_conversation(generator.SIZES[size])


def _expected(size: str) -> tuple[list[dict[str, Any]], list[pure_sanitize.Removal]]:
    return pure_sanitize.sanitize_messages(_history(size))


def _report(result: memci.SanitizeResult) -> list[pure_sanitize.Removal]:
    return [(r.index, r.role, r.reason) for r in result.removed_messages]


def _array(size: str, peer: str) -> memci.MessageArray | PySanitizingArray:
    if peer == "memci":
        return memci.MessageArray(_history(size))
    arr = PySanitizingArray()
    arr.extend(_history(size))
    return arr


def _rolled_back(arr: memci.MessageArray | PySanitizingArray) -> Any:
    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        arr.rollback(0)
        return (arr,), {}

    return setup


def _sanitize(arr: memci.MessageArray | PySanitizingArray) -> Any:
    return arr.sanitize()


def _validate(arr: memci.MessageArray | PySanitizingArray) -> Any:
    return arr.validate()


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS))
def test_sanitize_array(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "sanitize_array", peer, size)
    kept, removals = _expected(size)
    assert removals
    arr = _array(size, peer)
    got = harness.measure(benchmark, _sanitize, _rolled_back(arr))
    assert (_report(got) if peer == "memci" else got) == removals
    assert arr.messages() == kept
    assert arr.batch_index == 1
    arr.rollback(0)
    assert len(arr) == len(_history(size))


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS))
def test_validate_array(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "validate_array", peer, size)
    _, removals = _expected(size)
    arr = _array(size, peer)
    got = harness.measure(benchmark, _validate, lambda: ((arr,), {}))
    valid, errors = (got.valid, got.errors) if peer == "memci" else got
    assert not valid
    assert errors == [f"messages[{i}] ({role}): {reason}" for i, role, reason in removals]


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS))
def test_validate_array_first(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "validate_array_first", peer, size)
    _, removals = _expected(size)
    arr = _array(size, peer)
    got = harness.measure(benchmark, _validate, lambda: ((_array(size, peer) if peer == "memci" else arr,), {}))
    errors = got.errors if peer == "memci" else got[1]
    assert len(errors) == len(removals)


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS))
def test_sanitize_list(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "sanitize_list", peer, size)
    kept, removals = _expected(size)
    history = _history(size)
    if peer == "memci":
        got = harness.measure(benchmark, memci.sanitize_messages, lambda: ((history,), {}))
        assert (got.messages, _report(got)) == (kept, removals)
        assert all(a is b for a, b in zip(got.messages, kept, strict=True))
    else:
        assert harness.measure(benchmark, pure_sanitize.sanitize_messages, lambda: ((history,), {})) == (kept, removals)


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS))
def test_validate_list(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "validate_list", peer, size)
    _, removals = _expected(size)
    history = _history(size)
    if peer == "memci":
        got = harness.measure(benchmark, memci.validate_messages, lambda: ((history,), {}))
        assert (got.valid, len(got.errors)) == (False, len(removals))
    else:
        valid, errors = harness.measure(benchmark, pure_sanitize.validate_messages, lambda: ((history,), {}))
        assert (valid, len(errors)) == (False, len(removals))
