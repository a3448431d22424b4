"""The package's figures, as the README gives them: the wheel's size, its installed size, the time of
``import memci`` and of the first token count in a new process.

    python scripts/package_figures.py [--python PY] [--runs N] [--wheel dist/memci-*.whl]

Each time is the median over ``--runs`` new processes of ``--python`` (default: this interpreter),
measured inside the process with ``time.perf_counter`` (the interpreter's own start-up is not
counted). The first count is of one short text, with memci already imported: it includes building
that encoding's tables. ``--wheel`` adds the wheel's size and the bytes its files take once
unpacked (each file's size, as ``pip install`` writes them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import zipfile
from pathlib import Path

PROBE = """
import json, time
t0 = time.perf_counter()
import memci
t1 = time.perf_counter()
n = memci.tokens.count("hello world", encoding={encoding!r})
t2 = time.perf_counter()
m = memci.tokens.count("hello again", encoding={encoding!r})
t3 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "first": t2 - t1, "second": t3 - t2, "n": n + m}}))
"""


def probe(python: str, encoding: str) -> dict[str, float]:
    done = subprocess.run(
        [python, "-c", PROBE.format(encoding=encoding)], capture_output=True, text=True, check=True, timeout=120
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def timings(python: str, runs: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for encoding in ("o200k_base", "cl100k_base"):
        samples = [probe(python, encoding) for _ in range(runs)]
        out[f"first_count_{encoding}_ms"] = 1000 * statistics.median(s["first"] for s in samples)
        out[f"second_count_{encoding}_ms"] = 1000 * statistics.median(s["second"] for s in samples)
        out.setdefault("import_samples", 0)
        out[f"import_ms_{encoding}"] = 1000 * statistics.median(s["import"] for s in samples)
    out["import_ms"] = statistics.median(out.pop(f"import_ms_{e}") for e in ("o200k_base", "cl100k_base"))
    out.pop("import_samples")
    return out


def wheel_sizes(wheel: Path) -> dict[str, float]:
    with zipfile.ZipFile(wheel) as z:
        installed = sum(info.file_size for info in z.infolist())
        biggest = max(z.infolist(), key=lambda info: info.file_size)
    return {
        "wheel_mb": wheel.stat().st_size / 1e6,
        "installed_mb": installed / 1e6,
        "largest_file": biggest.filename,
        "largest_file_mb": biggest.file_size / 1e6,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--wheel", type=Path)
    args = parser.parse_args(argv)
    figures: dict[str, object] = {}
    if args.wheel is not None:
        figures.update(wheel_sizes(args.wheel))
    figures.update(timings(args.python, args.runs))
    print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in figures.items()}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
