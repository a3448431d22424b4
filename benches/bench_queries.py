"""Recent-by-role queries: 1,000 calls on a history of n messages.

- ``recent_user``: the last 3 user messages (a common role: about 1 message in 5).
- ``recent_system``: the last system message (a rare role: only the first message is one, so a
  backwards scan walks the whole history).

Peers:

- ``memci``: ``MessageArray.recent(3, role="user")`` / ``recent(1, role="system")``: the role index,
  and fresh dicts out.
- ``python``: the pure-Python peer's backwards scan (``recent_scan``), returning its stored dicts
  (no copy out: cheaper than memci's contract, so conservative). docs/design.md's targets name this one.
- ``python-indexed``: the same peer through its per-role index lists (``recent_indexed``), also O(k).
  Shown for honesty: against an indexed list of dicts there is no O(n) cost left to beat.

Targets (docs/design.md): for the common role, no slower than the scan; for the rare role, at least 100x
the scan at 100k.
"""

from __future__ import annotations

from typing import Any

import generator
import harness
import pytest

QUERIES = 1000
PEERS = ("memci", "python", "python-indexed")
USER_CASES = harness.cases(PEERS)
# 1,000 scans of 100k messages take about 10 s.
SYSTEM_CASES = harness.cases(PEERS, slow=("python-100k",))


def _memci(arr: Any, n: int, role: str) -> list[Any]:
    recent = arr.recent
    out = []
    for _ in range(QUERIES):
        out = recent(n, role=role)
    return out


def _python(query: Any, n: int, role: str) -> list[Any]:
    out = []
    for _ in range(QUERIES):
        out = query(n, role)
    return out


def _run(
    benchmark: Any, request: pytest.FixtureRequest, workload: str, peer: str, size: str, *, n: int, role: str
) -> None:
    harness.label(benchmark, workload, peer, size, queries=QUERIES)
    py = harness.python_history(size)
    expected = [m for m in generator.conversation(generator.SIZES[size]) if m["role"] == role][-n:]
    if peer == "memci":
        target, subject = _memci, harness.memci_history(size)
    else:
        target, subject = _python, py.recent_scan if peer == "python" else py.recent_indexed
    got = harness.measure(benchmark, target, lambda: ((subject, n, role), {}), slow=harness.is_slow(request))
    assert got == expected


@pytest.mark.parametrize(("peer", "size"), USER_CASES)
def test_recent_user(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    _run(benchmark, request, "recent_user", peer, size, n=3, role="user")


@pytest.mark.parametrize(("peer", "size"), SYSTEM_CASES)
def test_recent_system(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    _run(benchmark, request, "recent_system", peer, size, n=1, role="system")
