"""What every swap plugin shares: which side this run is, and rebinding a name in the suite's modules."""

from __future__ import annotations

import os
import sys
from pathlib import Path

SIDES = ("native", "noop", "memci")


def side() -> str:
    """This run's side, from ``MEMCI_PEER_SIDE`` (set by ``run.py``; ``native`` when unset)."""
    chosen = os.environ.get("MEMCI_PEER_SIDE", "native")
    if chosen not in SIDES:
        raise ValueError(f"MEMCI_PEER_SIDE must be one of {SIDES}, got {chosen!r}")
    return chosen


def rebind(name: str, native: object, replacement: object, root: Path) -> int:
    """Bind ``name`` to ``replacement`` in every imported module under ``root`` (the suite's
    sources) where it is bound to ``native``. Run after collection: the test bodies look their
    globals up when they run. Returns how many modules were changed."""
    changed = 0
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path is None or not Path(path).resolve().is_relative_to(root):
            continue
        if getattr(module, name, None) is native:
            setattr(module, name, replacement)
            changed += 1
    return changed
