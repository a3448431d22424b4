"""Bytes held per message, and the memory of 100 snapshots relative to the history.

Each case runs ``benches/memory.py`` in a fresh interpreter (see its docstring for what is measured
and how) and records the figures in ``benchmark.extra_info``; ``report.py`` prints them. The time
pytest-benchmark records is that of the subprocess and means nothing.

Peers: ``memci`` (a ``MessageArray``, its Rust heap counted by the core's counting allocator) and
``list`` (a list of dicts, counted by ``tracemalloc``); both also by resident-set growth. The counting
allocator is in builds with the ``count-alloc`` cargo feature only (``make bench`` builds with it);
without it these cases are skipped, with that reason.

Target (docs/design.md): memci holds at most 0.6x the bytes per message of a list of dicts.

At 100k each subprocess takes about 5 s, so those cases are ``bench_slow`` (``make bench`` only).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import generator
import harness
import memci
import pytest

SCRIPT = Path(__file__).with_name("memory.py")
SNAPSHOTS = 100
SIZES = ("10k", "100k")


def _write_inputs(directory: Path, n: int) -> tuple[Path, Path]:
    step = n // SNAPSHOTS
    both = generator.conversation(n + SNAPSHOTS * step)
    history, extra = directory / "history.json", directory / "extra.json"
    history.write_text(json.dumps(both[:n], ensure_ascii=False), encoding="utf-8")
    batches = [both[n + i * step : n + (i + 1) * step] for i in range(SNAPSHOTS)]
    extra.write_text(json.dumps(batches, ensure_ascii=False), encoding="utf-8")
    return history, extra


def _run(peer: str, history: Path, extra: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), peer, str(history), str(extra)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(done.stdout)


# The Rust heap is read from the counting allocator, which only the memory bench's build has.
needs_counting_allocator = pytest.mark.skipif(
    not hasattr(memci._core, "allocated_bytes"),
    reason="memci was built without the count-alloc cargo feature: `make bench` builds with it",
)


@needs_counting_allocator
@pytest.mark.parametrize(("peer", "size"), harness.cases(("memci", "list"), SIZES, slow=("memci-100k", "list-100k")))
def test_memory(benchmark: Any, tmp_path: Path, peer: str, size: str) -> None:
    n = generator.SIZES[size]
    harness.label(benchmark, "memory", peer, size)
    history, extra = _write_inputs(tmp_path, n)
    result = benchmark.pedantic(_run, args=(peer, history, extra), rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    benchmark.extra_info["bytes_per_message"] = result["heap_bytes"] / n
    if result["rss_bytes"] is not None:
        benchmark.extra_info["rss_bytes_per_message"] = result["rss_bytes"] / n

    assert result["n"] == n
    text = result["text_bytes"]
    # Both hold every message's text: UTF-8 in memci; in Python, 1 byte a character for ASCII and
    # 2 for CJK, which is less than UTF-8's 3, hence the margin.
    assert result["heap_bytes"] > 0.9 * text
    if peer == "memci":
        # Copy-on-write: 100 snapshots of an unchanged history cost far less than one copy of it.
        assert 0 <= result["snapshot_bytes"] < result["heap_bytes"] / 10
        assert result["snapshot_mixed_bytes"] >= 0
    else:
        assert result["snapshot_shallow_bytes"] >= SNAPSHOTS * 8 * n
        assert result["snapshot_deep_bytes"] > result["snapshot_shallow_bytes"]
