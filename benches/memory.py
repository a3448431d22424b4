"""Bytes held per message, measured in a fresh interpreter:
``python benches/memory.py PEER HISTORY.json EXTRA.json`` prints one JSON object; ``bench_memory.py``
writes the files (the history of N messages, and 100 batches of 1% of N to append) and runs it for
each peer and size.

The messages are read with ``json.loads`` in the fresh process, so every string is a new object
(as when messages arrive from an API), and nothing was allocated and freed before the baseline that
the measured structure could quietly reuse (which would hide it from the resident-set figure).

``list``: the list of dicts itself (what an application keeps when it keeps messages as they came):

- ``heap_bytes``: what ``tracemalloc`` sees allocated by ``json.loads`` of the messages, text
  included; ``rss_bytes``: the process's resident-set growth for the same (measured first, in a
  run without tracemalloc).
- ``snapshot_shallow_bytes``: 100 shallow snapshots (list copies) of the history, exactly
  (``sys.getsizeof`` of each list: they hold only pointers).
- ``snapshot_deep_bytes``: 100 deep-copy snapshots: ``tracemalloc`` of one ``copy_json`` of the
  history, times 100 (every copy is the same size; strings are shared by the copies).

``memci``: a ``MessageArray`` built by appending the same messages one at a time, then the caller's
dicts dropped:

- ``heap_bytes``: the Rust core's allocations (``arr._store.heap_bytes()`` if the store has it,
  else the change in ``memci._core.allocated_bytes()``, a counting allocator); ``rss_bytes``: the
  resident-set growth (the caller's dicts are created before the baseline and freed after the
  measurement, so they are not counted).
- ``snapshot_bytes``: the heap growth of 100 ``checkpoint()`` calls on the history, and
  ``snapshot_mixed_bytes``: of 100 checkpoints taken while appending 1% of N between them, minus
  the same appends without checkpoints (the snapshots' own cost, copy-on-write).

Sizes are reported with ``text_bytes`` (UTF-8 bytes of message text and tool-call arguments) so the
text's share of each figure is visible.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import sys
import tracemalloc
from typing import Any

from pure_python import copy_json

SNAPSHOTS = 100


def rss() -> int | None:
    """The resident set size of this process, in bytes (None where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def _settle() -> None:
    """Collect garbage and hand the allocator's free pages back to the system, so that what is
    allocated next shows up in the resident set instead of quietly reusing freed pages (without
    this, a 10k-message store could grow the RSS by almost nothing)."""
    gc.collect()
    if _malloc_trim is not None:
        _malloc_trim(0)


def _load_malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim  # glibc
    except (AttributeError, OSError):
        return None


_malloc_trim = _load_malloc_trim()


def text_bytes(messages: list[dict[str, Any]]) -> int:
    total = 0
    for m in messages:
        total += len((m["content"] or "").encode())
        for call in m.get("tool_calls") or ():
            total += len(call["function"]["arguments"].encode())
    return total


def measure_list(text: str) -> dict[str, Any]:
    _settle()
    before = rss()
    messages = json.loads(text)
    _settle()
    after = rss()
    out: dict[str, Any] = {
        "peer": "list",
        "n": len(messages),
        "text_bytes": text_bytes(messages),
        "rss_bytes": None if before is None or after is None else after - before,
    }
    out["snapshot_shallow_bytes"] = sum(sys.getsizeof(messages.copy()) for _ in range(SNAPSHOTS))
    del messages
    _settle()

    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    messages = json.loads(text)
    heap, _ = tracemalloc.get_traced_memory()
    out["heap_bytes"] = heap - base
    before_copy, _ = tracemalloc.get_traced_memory()
    copy = [copy_json(m) for m in messages]
    after_copy, _ = tracemalloc.get_traced_memory()
    out["snapshot_deep_bytes"] = (after_copy - before_copy) * SNAPSHOTS
    tracemalloc.stop()
    del copy
    return out


def measure_memci(text: str, extra_text: str) -> dict[str, Any]:
    import memci

    messages = json.loads(text)
    out: dict[str, Any] = {"peer": "memci", "n": len(messages), "text_bytes": text_bytes(messages)}
    _settle()
    before_rss = rss()
    before = memci._core.allocated_bytes()
    arr = memci.MessageArray()
    for m in messages:
        arr.append(m)
    own = getattr(arr._store, "heap_bytes", None)
    out["heap_bytes"] = own() if own is not None else memci._core.allocated_bytes() - before
    out["heap_source"] = "MessageStore.heap_bytes()" if own is not None else "memci._core.allocated_bytes() delta"
    _settle()
    after_rss = rss()
    out["rss_bytes"] = None if before_rss is None or after_rss is None else after_rss - before_rss
    del messages

    start = memci._core.allocated_bytes()
    for _ in range(SNAPSHOTS):
        arr.checkpoint()
    out["snapshot_bytes"] = memci._core.allocated_bytes() - start
    del arr
    batches = json.loads(extra_text)

    def grow(checkpoints: bool) -> int:
        history = memci.MessageArray(json.loads(text))
        start = memci._core.allocated_bytes()
        for batch in batches:
            history.append(batch)
            if checkpoints:
                history.checkpoint()
        return memci._core.allocated_bytes() - start

    out["snapshot_mixed_bytes"] = grow(True) - grow(False)
    return out


def main(argv: list[str]) -> None:
    peer, history, extra = argv
    with open(history, encoding="utf-8") as f:
        text = f.read()
    with open(extra, encoding="utf-8") as f:
        extra_text = f.read()
    result = measure_memci(text, extra_text) if peer == "memci" else measure_list(text)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
