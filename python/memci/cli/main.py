"""The ``memci`` command (also ``python -m memci``):

- ``memci demo [--array] [--rounds N] [--db PATH]``: a long scripted conversation through a
  ContextSystem on SqliteStorage (``--array``: the MessageArray tour);
- ``memci inspect DB [--page N] [--limit N]``: what a SqliteStorage file or DirectoryStorage folder
  holds (read-only);
- ``memci batch IN OUT [--sanitize] [--max-tokens N] ...``: clean a dataset of conversations (JSONL
  or Parquet) in Rust on all cores (see ``memci batch -h``);
- ``memci --version``: the installed version.
"""

from __future__ import annotations

import argparse
import sys

from memci._core import __version__
from memci.errors import MemciError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memci", description="memci: an LLM agent's context window, held in Rust.")
    parser.add_argument("--version", action="version", version=f"memci {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # The demo parses its own options (memci.demo.main): listed here for --help only.
    commands.add_parser("demo", help="run the demo: a long conversation through a ContextSystem (see demo -h)")
    inspect = commands.add_parser(
        "inspect",
        help="list what a store holds (a SqliteStorage file or a DirectoryStorage folder)",
        description="List what a memci store holds: the saved state (round, counts, contents entries, "
        "active pages) and the stored pages. The store is opened read-only.",
    )
    inspect.add_argument("db", metavar="DB", help="a SqliteStorage file or a DirectoryStorage folder")
    inspect.add_argument("--page", type=int, metavar="N", help="show stored page N whole")
    inspect.add_argument(
        "--limit", type=int, default=20, metavar="N", help="show the last N stored pages (default 20; 0: none)"
    )
    from memci.cli.batch import add_parser as add_batch

    add_batch(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["demo"]:
        from memci.cli.demo import main as run_demo

        return run_demo(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "batch":
        from memci.cli.batch import run_batch

        return run_batch(args)
    from memci.cli.inspect import inspect_store, printable

    if args.limit < 0:
        print("memci inspect: --limit must be >= 0", file=sys.stderr)
        return 2
    try:
        return inspect_store(args.db, page=args.page, limit=args.limit)
    except MemciError as e:  # a store it cannot read, a page index no store holds
        print(printable(f"memci inspect: {e}"), file=sys.stderr)
        return 1
