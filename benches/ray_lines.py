"""Reading a JSONL file into Ray, line by line: memci's ``JsonLines`` datasource (lines split at
``\\n`` only, kept as bytes; docs/batch.md, "Ray") against Ray's own ``read_text`` (decoded and
split with ``str.splitlines``), on a local Ray with 2 CPUs, over a generated file of chat records.

Printed per reader: the best and the median of ``--runs`` full reads (``materialize()`` of the
dataset, then its row count), and the floor: reading the file's bytes in this process. Two small
files show what each reader makes of a raw U+2028 in every tenth record, and of one line that is
not UTF-8 (rows, or the read failed).

    python benches/ray_lines.py [--mb 100] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from memci.integrations.ray_lines import JsonLines


def write_records(path: Path, megabytes: int, *, separator_every: int = 0) -> int:
    """Chat records of about 1.2 kB each up to ``megabytes``; a raw U+2028 inside every
    ``separator_every``-th record's text when given. The number of lines."""
    lines = 0
    with path.open("w", encoding="utf-8") as out:
        while out.tell() < megabytes << 20:
            text = f"question {lines} " * 40 + ("\u2028" if separator_every and lines % separator_every == 0 else "")
            record = [{"role": "user", "content": text}, {"role": "assistant", "content": "answer " * 80}]
            out.write(json.dumps({"messages": record}, ensure_ascii=False) + "\n")
            lines += 1
    return lines


def timed(read: Callable[[], Any], runs: int) -> tuple[float, float, int]:
    """Best and median seconds of ``runs`` reads, and the rows of the last."""
    seconds, rows = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        rows = read()
        seconds.append(time.perf_counter() - started)
    return min(seconds), statistics.median(seconds), rows


def readers(path: str) -> dict[str, Callable[[], int]]:
    return {
        "ray read_text": lambda: ray.data.read_text(path, drop_empty_lines=False).materialize().count(),
        "memci JsonLines": lambda: ray.data.read_datasource(JsonLines(path, column="text")).materialize().count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=100, help="the generated file's size (default 100 MB)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "records.jsonl"
            lines = write_records(path, args.mb)
            size = path.stat().st_size
            best, median, _ = timed(lambda: len(path.read_bytes()), args.runs)
            print(f"{lines:,} lines, {size / 1e6:.0f} MB; floor (read the bytes here): {best:.2f} s best")
            for name, read in readers(str(path)).items():
                read()  # warm: the workers start
                best, median, rows = timed(read, args.runs)
                print(f"{name}: {best:.2f} s best, {median:.2f} s median, {rows:,} rows, {size / best / 1e6:.0f} MB/s")
            raw = Path(folder) / "separators.jsonl"
            lines = write_records(raw, 1, separator_every=10)
            bad = Path(folder) / "not-utf8.jsonl"
            bad.write_bytes(raw.read_bytes() + b"\xff not UTF-8\n")
            cases = {f"raw U+2028 in every tenth of {lines:,} records": raw, "one more line, not UTF-8": bad}
            for case, file in cases.items():
                for name, read in readers(str(file)).items():
                    try:
                        print(f"{case}, {name}: {read():,} rows")
                    except Exception as e:  # what the reader raises is the figure
                        print(f"{case}, {name}: failed, {type(e).__name__}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
