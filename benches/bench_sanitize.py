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

Targets (docs/design.md, and the sanitizer's own) at 100k: the array entry points at least 20x pure Python, the
list entry points at least 3x.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import cache
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


@cache
def _expected(size: str) -> tuple[list[dict[str, Any]], list[pure_sanitize.Removal]]:
    """What the pure-Python peer, the reference the memci cases are checked against, returns."""
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
    if peer == "memci":  # the peer's array is the reference's rules on a list of dicts
        assert _report(got) == removals
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
    if peer == "memci":
        assert not got.valid
        assert got.errors == [f"messages[{i}] ({role}): {reason}" for i, role, reason in removals]


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS))
def test_validate_array_first(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "validate_array_first", peer, size)
    _, removals = _expected(size)
    if peer == "memci":  # a new array for every round: its pair index is never built yet
        got = harness.measure(benchmark, _validate, lambda: ((_array(size, peer),), {}))
        assert len(got.errors) == len(removals)
    else:
        arr = _array(size, peer)
        harness.measure(benchmark, _validate, lambda: ((arr,), {}))


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
        harness.measure(benchmark, pure_sanitize.sanitize_messages, lambda: ((history,), {}))


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS))
def test_validate_list(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "validate_list", peer, size)
    _, removals = _expected(size)
    history = _history(size)
    if peer == "memci":
        got = harness.measure(benchmark, memci.validate_messages, lambda: ((history,), {}))
        assert (got.valid, len(got.errors)) == (False, len(removals))
    else:
        harness.measure(benchmark, pure_sanitize.validate_messages, lambda: ((history,), {}))
