"""What every bench shares: the cases (peer x size), the markers that keep slow peers out of the
untimed pass, and ``measure``, which runs a workload under pytest-benchmark.

Naming: a test is ``test_<workload>[<peer>-<size>]`` and its ``benchmark.group`` is
``<workload>-<size>``, so ``report.py`` can compare the peers of one group. ``extra_info`` carries
``workload``, ``peer``, ``size`` and ``n`` too.

Timing: ``make bench`` runs each case for about ``BUDGET`` seconds (at least ``MIN_ROUNDS`` rounds,
after one calibration run) with the cyclic GC on, as in an application; objects that existed before
the case (cached conversations, other peers' inputs) are moved out of the GC's sight with
``gc.freeze()`` so that one case's inputs do not slow another case's collections. Cases marked
``bench_slow`` (a round takes many seconds) run one round, uncalibrated.
"""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

import generator
import memci
import pytest
from generator import SIZES
from pure_python import PyMessageArray

#: Seconds of timed rounds per case under ``make bench``.
BUDGET = 1.5
MIN_ROUNDS = 3
MAX_ROUNDS = 50

#: Set to 1 to run the cases that take minutes per round (see ``bench_very_slow``).
SLOW_ENV = "MEMCI_BENCH_SLOW"

MARKERS = {
    "bench_slow": "one round takes seconds: skipped in the untimed pass of `make test`, one round under `make bench`",
    "bench_very_slow": f"one round takes minutes: skipped unless {SLOW_ENV}=1",
}


def cases(
    peers: Iterable[str],
    sizes: Iterable[str] = SIZES,
    *,
    slow: Iterable[str] = (),
    very_slow: Iterable[str] = (),
    missing: Iterable[str] = (),
) -> list[Any]:
    """``pytest.param(peer, size)`` for every pair whose size this run measures (``MEMCI_BENCH_SIZES``,
    see ``generator.SELECTED``), id ``peer-size``. ``slow``, ``very_slow`` and
    ``missing`` name pairs as ``"peer-size"``; a missing pair is not generated at all."""
    slow, very_slow, missing = set(slow), set(very_slow), set(missing)
    out = []
    for size in (s for s in sizes if s in generator.SELECTED):
        for peer in peers:
            case = f"{peer}-{size}"
            if case in missing:
                continue
            marks = []
            if case in slow:
                marks.append(pytest.mark.bench_slow)
            if case in very_slow:
                marks.append(pytest.mark.bench_very_slow)
            out.append(pytest.param(peer, size, id=case, marks=marks))
    return out


def label(benchmark: Any, workload: str, peer: str, size: str, **info: Any) -> None:
    benchmark.group = f"{workload}-{size}"
    benchmark.extra_info.update(workload=workload, peer=peer, size=size, n=SIZES[size], **info)


def is_slow(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker("bench_slow") is not None


def measure(
    benchmark: Any,
    target: Callable[..., Any],
    setup: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]] | None = None,
    *,
    slow: bool = False,
) -> Any:
    """Time ``target`` (called with what ``setup`` returns, setup untimed) and return what its last
    round returned, for the bench to check. Untimed (``--benchmark-disable``): one call."""
    if not benchmark.enabled:
        return benchmark.pedantic(target, setup=setup, rounds=1, iterations=1)
    rounds = 1
    if not slow:
        start = time.perf_counter()
        args, kwargs = setup() if setup is not None else ((), {})
        target(*args, **kwargs)
        del args, kwargs
        once = time.perf_counter() - start
        rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, int(BUDGET / max(once, 1e-9))))
    gc.collect()
    gc.freeze()
    try:
        return benchmark.pedantic(target, setup=setup, rounds=rounds, iterations=1)
    finally:
        gc.unfreeze()


def slow_enabled() -> bool:
    return os.environ.get(SLOW_ENV) == "1"


# ---- inputs shared by the cases of a session ----------------------------------------------------


@cache
def memci_history(size: str) -> memci.MessageArray:
    """A memci array holding ``conversation(n)``. Shared: tests that change it must restore it."""
    return memci.MessageArray(generator.conversation(generator.SIZES[size]))


@cache
def python_history(size: str) -> PyMessageArray:
    """The pure-Python peer holding ``conversation(n)``. Shared, like :func:`memci_history`."""
    arr = PyMessageArray()
    arr.extend(generator.conversation(generator.SIZES[size]))
    return arr


@cache
def langchain_messages(size: str) -> tuple[Any, ...]:
    """``conversation(n)`` converted to LangChain messages (the conversion is never timed)."""
    from langchain_core.messages import convert_to_messages

    return tuple(convert_to_messages(generator.conversation(generator.SIZES[size])))


def importorskip_peer(peer: str) -> None:
    """Skip the case when the peer's package (the ``bench`` extra) is not installed."""
    module = {"langchain": "langchain_core", "langgraph": "langgraph", "llamaindex": "llama_index.core"}
    for prefix, name in module.items():
        if peer.startswith(prefix):
            pytest.importorskip(name)


def temp_dir(prefix: str) -> Path:
    """A new directory in the temp dir, removed when the process exits (a bench's SQLite files and
    caches must not pile up there, run after run)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, True)
    return path
