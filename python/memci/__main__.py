"""``python -m memci demo [--array] [--rounds N] [--db PATH]``: run the demo (see :mod:`memci.demo`)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["demo"]:
        from memci.demo import main as run_demo

        return run_demo(args[1:])
    print("usage: python -m memci demo", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
