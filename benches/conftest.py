"""Bench configuration: the markers that keep slow peers out of the untimed pass.

``make test`` collects these files with ``--benchmark-disable``: every case runs once, untimed, and
checks what it computed. Cases marked ``bench_slow`` (a single round takes seconds: LangGraph at any size,
the deep-copy snapshots at 10k and 100k, the backwards scan for the system prompt at 100k,
converting 100k dicts to LangChain messages) are skipped there and run under ``make bench``; cases
marked ``bench_very_slow`` (minutes a round: LangGraph at 100k) only with ``MEMCI_BENCH_SLOW=1``.
"""

from __future__ import annotations

from pathlib import Path

import harness
import pytest


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in harness.MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def _untimed(config: pytest.Config) -> bool:
    return bool(config.getoption("benchmark_disable") and not config.getoption("benchmark_enable"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    untimed = _untimed(config)
    here = Path(__file__).parent
    for item in items:
        if here not in item.path.parents:
            continue
        if untimed and item.get_closest_marker("bench_slow"):
            item.add_marker(pytest.mark.skip(reason="slow peer: a single round takes seconds; runs under `make bench`"))
        if item.get_closest_marker("bench_very_slow") and not harness.slow_enabled():
            item.add_marker(
                pytest.mark.skip(reason=f"a round takes minutes; set {harness.SLOW_ENV}=1 to run it under `make bench`")
            )
