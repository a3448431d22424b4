"""Bench sizes: `make test` runs each bench once at 1k (a correctness check); `make bench` sets
MEMCI_BENCH_SIZES to time 1k, 10k and 100k against the peers."""

from __future__ import annotations

import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from generator import conversation

SIZES = [int(s) for s in os.environ.get("MEMCI_BENCH_SIZES", "1000").split(",")]


@cache
def history(n: int) -> tuple[dict[str, Any], ...]:
    return tuple(conversation(n))
