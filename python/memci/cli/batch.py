"""``memci batch IN OUT``: clean a dataset of conversations end to end.

IN is a JSONL file (one conversation a line: a list of messages, or an object with a ``messages``
key whose other keys are kept) or a Parquet file (``*.parquet``, with a ``messages`` column). The
steps run in this order: sanitize, filter by roles, truncate to the last N messages, clear old tool
results (``--clear-tool-uses KEEP``), trim to a token budget; then the kept tokens are counted when
an encoding or budget is given. A progress bar (conversations/s, MB/s, ETA) shows on a terminal; a
summary is printed at the end (on stderr when OUT is ``-``, standard output). OUT and ``--errors``
go where they point: ``-`` is standard output, a regular file (symlinks resolved) is renamed into
place at the end, a device or FIFO is written to as the run goes and never replaced. Exit code 0:
every record processed; 1: some records were bad (see ``--errors``); 2: the run could not happen
(bad arguments, unreadable or corrupt input, an input that changed while it was read).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from memci import ops
from memci._optional import needs_extra
from memci.batch import BatchSummary, Pipeline, Step, clear_tool_uses, count_tokens, sanitize, trim_to_tokens
from memci.batch.output import is_streamed
from memci.batch.pipeline import MAX_WORKERS
from memci.errors import MemciError
from memci.tokens import DEFAULT_THINKING, THINKING

__all__ = ["add_parser", "run_batch"]


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "batch",
        help="clean a dataset of conversations (JSONL or Parquet): sanitize, filter, trim, count",
        description="Clean a dataset of conversations in Rust on all cores. Steps run in the order: "
        "--sanitize, --roles, --keep-last, --max-tokens; the kept tokens are counted when --encoding "
        "or --max-tokens is given. Exit code 0: all records processed; 1: some were bad; 2: could not run.",
    )
    p.add_argument("input", metavar="IN", help="a JSONL file, or a Parquet file (*.parquet)")
    p.add_argument("output", metavar="OUT", help="where to write the result (same format as IN; - for standard output)")
    p.add_argument("--sanitize", action="store_true", help="drop broken tool-call groups, orphan and duplicate results")
    p.add_argument("--max-tokens", type=int, metavar="N", help="keep the newest messages within N tokens")
    p.add_argument("--encoding", metavar="E", help="token encoding or model name (default o200k_base)")
    p.add_argument("--keep-system", action="store_true", help="--max-tokens keeps the leading system messages")
    p.add_argument(
        "--thinking",
        default=DEFAULT_THINKING,
        choices=list(THINKING),
        help="--max-tokens: the thinking of turns before the last one kept costs nothing (drop_earlier, the "
        "providers' rule and the default) or is counted (count)",
    )
    p.add_argument("--roles", nargs="+", metavar="ROLE", help="keep only messages of these roles")
    p.add_argument("--keep-last", type=int, metavar="N", help="keep the last N messages of each conversation")
    p.add_argument(
        "--clear-tool-uses",
        type=int,
        metavar="KEEP",
        help="replace the results of all but the last KEEP tool uses with a placeholder (their pairs kept)",
    )
    p.add_argument("--count-before", action="store_true", help="also count the tokens of the input (costs a full pass)")
    p.add_argument("--workers", type=int, metavar="N", help=f"threads, 1 to {MAX_WORKERS} (default: one per core)")
    p.add_argument("--errors", metavar="FILE", help="write bad records here (JSONL: line, path, reason; - for stdout)")
    p.add_argument("--format", default="chat", choices=["chat", "anthropic", "responses"], help="message format")
    p.add_argument("--column", default="messages", help="Parquet: the messages column (default messages)")
    p.add_argument(
        "--ray", metavar="ADDRESS", help="run on a Ray cluster (ray.init(address=ADDRESS); 'local' starts one)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")


def _steps(args: argparse.Namespace) -> list[Step]:
    encoding = args.encoding or "o200k_base"
    steps: list[Step] = []
    if args.count_before:
        steps.append(count_tokens(encoding))
    if args.sanitize:
        steps.append(sanitize())
    if args.roles:
        steps.append(ops.Filter(roles=args.roles))
    if args.keep_last is not None:
        steps.append(ops.Truncate(keep_last=args.keep_last))
    if args.clear_tool_uses is not None:
        steps.append(clear_tool_uses(keep=args.clear_tool_uses, encoding=encoding))
    if args.max_tokens is not None:
        steps.append(
            trim_to_tokens(args.max_tokens, keep_system=args.keep_system, encoding=encoding, thinking=args.thinking)
        )
    if args.max_tokens is not None or args.encoding or args.count_before:
        steps.append(count_tokens(encoding))
    return steps


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so an interrupted run removes its temporary files."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _progress(enabled: bool, total_label: str) -> Iterator[Callable[[int, int, int], None]]:
    if not enabled:
        yield lambda done, total, records: None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    started = time.perf_counter()
    with Progress(
        TextColumn("[bold]batch"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task("batch", total=None, rate="")

        def update(done: int, total: int, records: int) -> None:
            elapsed = max(time.perf_counter() - started, 1e-9)
            rate = f"{records / elapsed:,.0f} conv/s"
            if total_label == "bytes":
                rate += f"  {done / elapsed / 1e6:,.1f} MB/s"
            bar.update(task, completed=done, total=total, rate=rate)

        yield update


def _print_summary(summary: BatchSummary, steps: list[Step], out: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="memci batch", show_header=False)
    table.add_row("records read", f"{summary.records:,}" + (f" ({summary.blank:,} blank)" if summary.blank else ""))
    table.add_row("conversations", f"{summary.conversations:,}")
    table.add_row("bad records", f"{summary.bad:,}")
    table.add_row("messages in", f"{summary.messages_in:,}")
    table.add_row("messages out", f"{summary.messages_out:,}")
    for name, n in summary.removed.items():
        if any(getattr(s, "name", "") == name for s in steps):
            table.add_row(f"  removed by {name}", f"{n:,}")
    counts = [s for s in steps if s.name == "count_tokens"]
    labels = ["tokens before", "tokens after"] if len(counts) == 2 else ["tokens after"]
    for label, n in zip(labels, summary.tokens, strict=False):
        table.add_row(label, f"{n:,}")
    if any(s.name == "clear_tool_uses" for s in steps):
        table.add_row("tool uses cleared", f"{summary.cleared_tool_uses:,}")
        table.add_row("tokens cleared", f"{summary.cleared_input_tokens:,}")
    if summary.bytes_in:
        table.add_row("MB in / out", f"{summary.bytes_in / 1e6:,.1f} / {summary.bytes_out / 1e6:,.1f}")
    rate = summary.conversations / summary.seconds if summary.seconds else 0.0
    table.add_row("time", f"{summary.seconds:,.2f} s ({rate:,.0f} conversations/s)")
    Console(file=out).print(table)


def run_batch(args: argparse.Namespace) -> int:
    """Run ``memci batch`` with parsed arguments; returns the exit code."""
    name = "memci batch"
    # On Ray the input may be a folder, or a URL the cluster reads (s3://..., gs://...).
    remote = bool(args.ray) and (Path(args.input).is_dir() or "://" in args.input)
    if not Path(args.input).is_file() and not remote:
        fault = "not a regular file" if Path(args.input).exists() else "no such file"
        print(f"{name}: {args.input}: {fault}", file=sys.stderr)
        return 2
    for flag in ("max_tokens", "keep_last", "clear_tool_uses", "workers"):
        value = getattr(args, flag)
        if value is not None and value < (1 if flag == "workers" else 0):
            print(f"{name}: --{flag.replace('_', '-')} must be >= {1 if flag == 'workers' else 0}", file=sys.stderr)
            return 2
    try:
        steps = _steps(args)
        pipeline = Pipeline(steps, format=args.format, workers=args.workers)
    except MemciError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 2
    interactive = not args.quiet and sys.stderr.isatty()
    parquet = args.input.endswith(".parquet")
    try:
        with _terminate_as_interrupt():
            if args.ray:
                with _progress(interactive, "rows" if parquet else "bytes") as progress:
                    summary = _run_ray(pipeline, args, progress)
            elif parquet:
                from memci.batch.arrow import run_parquet

                with _progress(interactive, "rows") as progress:
                    summary = run_parquet(
                        pipeline, args.input, args.output, column=args.column, errors=args.errors, progress=progress
                    )
            else:
                with _progress(interactive, "bytes") as progress:
                    summary = pipeline.run_jsonl(args.input, args.output, errors=args.errors, progress=progress)
    except KeyboardInterrupt:
        print(f"{name}: interrupted; {_not_written(args.output)}", file=sys.stderr)
        return 2
    except (OSError, MemciError, ImportError) as e:
        print(f"{name}: {e}" if args.ray else f"{name}: {e}; {_not_written(args.output)}", file=sys.stderr)
        return 2
    if not args.quiet:
        # With OUT on standard output, the summary must not land in the data.
        _print_summary(summary, steps, sys.stderr if args.output == "-" else sys.stdout)
    return summary.exit_code


def _not_written(output: str) -> str:
    """What a run that stopped left in OUT."""
    if is_streamed(output):
        return f"what was written to {output} is incomplete"
    return f"nothing was written to {output}"


def _run_ray(pipeline: Pipeline, args: argparse.Namespace, progress: Callable[[int, int, int], None]) -> BatchSummary:
    with needs_extra("ray", "memci batch --ray"):
        import ray

    from memci.integrations.ray import run

    started = time.perf_counter()
    # 'local': a new Ray of this machine's cores (or --workers of them), never a cluster already
    # running here, stopped at the end.
    if args.ray == "local":
        ray.init(address="local", num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=args.ray, include_dashboard=False, log_to_driver=False)
    try:
        summary = run(pipeline, args.input, args.output, column=args.column, errors=args.errors, progress=progress)
    finally:
        ray.shutdown()
    summary.seconds = time.perf_counter() - started
    return summary
