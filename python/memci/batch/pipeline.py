"""The batch pipeline: steps, the :class:`Pipeline` that runs them, and what a run reports."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeAlias, TypeVar

from memci import _core, ops
from memci.batch.output import positive_int, run_files
from memci.errors import InvalidOperationError, StorageError, is_unicode, repr_of
from memci.tokens import DEFAULT_ENCODING, DEFAULT_THINKING

Message: TypeAlias = dict[str, Any]
#: Conversations are handed to the core this many at a time by :meth:`Pipeline.run`.
DEFAULT_CHUNK = 2048
#: A JSONL run reads about this many bytes at a time (memory is bounded by a few times this).
DEFAULT_CHUNK_BYTES = 4 << 20
#: The most threads a pipeline may run on (``workers``): more than any machine's cores need for
#: work that is all CPU, few enough that a mistyped count cannot start thousands of threads.
MAX_WORKERS: int = _core.BatchPipeline.MAX_WORKERS


@dataclasses.dataclass(frozen=True, slots=True)
class CountTokens:
    """COUNT_TOKENS: record each conversation's token count at this point of the pipeline (reply
    priming included, as :meth:`memci.MessageArray.token_count`); the run's summary adds them up."""

    name: ClassVar[str] = "count_tokens"
    encoding: str = DEFAULT_ENCODING

    def __post_init__(self) -> None:
        if not isinstance(self.encoding, str):
            raise InvalidOperationError(f"count_tokens: encoding must be a str, got {repr_of(self.encoding)}")
        _core.encoding_name(self.encoding, self.name)  # an unknown encoding fails here, not per conversation


#: What a pipeline step is: a config of :mod:`memci.ops` that removes messages, or CountTokens.
Step: TypeAlias = (
    ops.Sanitize | ops.TrimToTokens | ops.Truncate | ops.Filter | ops.Clear | CountTokens | ops.ClearToolUses
)
_STEPS = (ops.Sanitize, ops.TrimToTokens, ops.Truncate, ops.Filter, ops.Clear, CountTokens, ops.ClearToolUses)


def sanitize() -> ops.Sanitize:
    """The SANITIZE step: drop broken tool-call groups, orphan and duplicate results."""
    return ops.Sanitize()


def trim_to_tokens(
    max_tokens: int,
    *,
    strategy: str = "last",
    keep_system: bool = True,
    start_on: str | Sequence[str] | None = "user",
    end_on: str | Sequence[str] | None = None,
    allow_partial: bool = False,
    encoding: str = DEFAULT_ENCODING,
    thinking: str = DEFAULT_THINKING,
) -> ops.TrimToTokens:
    """The TRIM_TO_TOKENS step, with the options of :meth:`memci.MessageArray.trim_to_tokens`
    (``thinking``: the reasoning of turns before the kept history's last one costs nothing by
    default, as the array counts it)."""
    return ops.TrimToTokens(
        max_tokens, strategy, keep_system, start_on, end_on, allow_partial, encoding, thinking=thinking
    )


def truncate(
    *,
    keep_first: int | None = None,
    keep_last: int | None = None,
    remove_first: int | None = None,
    remove_last: int | None = None,
    range: tuple[int, int] | None = None,  # the operation's own field name
    role: str | None = None,
) -> ops.Truncate:
    """The TRUNCATE step, as :meth:`memci.MessageArray.truncate`."""
    return ops.Truncate(keep_first, keep_last, remove_first, remove_last, range, role)


def filter(  # the FILTER step, named like the operation
    roles: Sequence[str] | None = None,
    content_contains: Sequence[str] | None = None,
    content_excludes: Sequence[str] | None = None,
) -> ops.Filter:
    """The FILTER step, as :meth:`memci.MessageArray.filter`."""
    return ops.Filter(roles, content_contains, content_excludes)


def clear(keep_system: bool = True) -> ops.Clear:
    """The CLEAR step, as :meth:`memci.MessageArray.clear` (a batch has no tool description)."""
    return ops.Clear(keep_system)


def clear_tool_uses(
    *,
    trigger: int | None = None,
    keep: int = 3,
    clear_at_least: int | None = None,
    exclude_tools: Sequence[str] = (),
    clear_tool_inputs: bool = False,
    placeholder: str | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> ops.ClearToolUses:
    """The CLEAR_TOOL_USES step, as :meth:`memci.MessageArray.clear_tool_uses`: each conversation's
    old tool results replaced by the placeholder, their pairs kept; the summary adds up
    ``cleared_tool_uses`` and ``cleared_input_tokens``."""
    return ops.ClearToolUses(trigger, keep, clear_at_least, exclude_tools, clear_tool_inputs, placeholder, encoding)


def count_tokens(encoding: str = DEFAULT_ENCODING) -> CountTokens:
    """The COUNT_TOKENS step."""
    return CountTokens(encoding)


def as_step(step: Step | Mapping[str, Any]) -> Step:
    """A step from a config, or from an operation dict in either seed format
    (``{"operation": "count_tokens", "encoding": ...}`` for COUNT_TOKENS)."""
    if isinstance(step, _STEPS):
        return step
    operation = step.get("operation") if isinstance(step, Mapping) else None
    if isinstance(operation, str) and operation.lower() == "count_tokens":
        fields = {k: v for k, v in step.items() if k != "operation"}
        nested = fields.pop("count_tokens", None)
        if isinstance(nested, Mapping):
            fields.update(nested)
        unknown = [repr_of(k) for k in fields if k != "encoding"]
        if unknown:
            raise InvalidOperationError(f"count_tokens: unknown keys {repr_of(unknown)}")
        return CountTokens(**fields)
    config = ops.parse(step) if isinstance(step, Mapping) else step
    if not isinstance(config, _STEPS):
        name = getattr(config, "name", None)
        raise InvalidOperationError(
            f"batch: {name if isinstance(name, str) else repr_of(config)} is not a batch step "
            "(steps: sanitize, trim_to_tokens, truncate, filter, clear, count_tokens, clear_tool_uses)"
        )
    return config


@dataclasses.dataclass(frozen=True, slots=True)
class BadRecord:
    """A record that could not be processed: its number (the JSONL line, 1-based; otherwise the
    0-based position in the input), the path of the bad field (``messages[3].tool_calls[0]``,
    empty for the record itself) and the reason."""

    number: int
    path: str
    reason: str

    def to_json(self, key: str = "line") -> dict[str, Any]:
        return {key: self.number, "path": self.path, "reason": self.reason}

    def error_line(self, key: str = "line") -> bytes:
        """The record's line in an errors file, as the core writes one for a JSONL run: compact
        JSON, text unescaped, then a newline. Every run writes this form, local or on Ray."""
        return json.dumps(self.to_json(key), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@dataclasses.dataclass(slots=True)
class BatchSummary:
    """What a run did: records read, blank lines skipped, conversations processed, bad records,
    messages in and out, messages removed by each step kind, the total of each count_tokens step
    (in step order), what the clear_tool_uses steps cleared (tool uses and tokens), bytes in and
    out, and the wall time. Every record read is accounted for:
    ``records == conversations + bad + blank``."""

    records: int = 0
    blank: int = 0
    conversations: int = 0
    bad: int = 0
    messages_in: int = 0
    messages_out: int = 0
    removed: dict[str, int] = dataclasses.field(default_factory=dict)
    tokens: list[int] = dataclasses.field(default_factory=list)
    cleared_tool_uses: int = 0
    cleared_input_tokens: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0

    def add(self, totals: Mapping[str, Any]) -> None:
        """Add the totals the core reports for a chunk."""
        self.records += totals["records"]
        self.blank += totals["blank"]
        self.conversations += totals["conversations"]
        self.bad += totals["bad"]
        self.messages_in += totals["messages_in"]
        self.messages_out += totals["messages_out"]
        for name, n in totals["removed"].items():
            self.removed[name] = self.removed.get(name, 0) + n
        counts = totals["tokens"]
        self.tokens.extend([0] * (len(counts) - len(self.tokens)))
        for i, n in enumerate(counts):
            self.tokens[i] += n
        self.cleared_tool_uses += totals.get("cleared_tool_uses", 0)
        self.cleared_input_tokens += totals.get("cleared_input_tokens", 0)
        self.bytes_in += totals["bytes_in"]
        self.bytes_out += totals["bytes_out"]

    def merge(self, other: BatchSummary) -> None:
        """Add another run's counts (not its time)."""
        self.add(dataclasses.asdict(other))

    @property
    def exit_code(self) -> int:
        """0 when every record was processed, 1 when some were bad."""
        return 1 if self.bad else 0


T = TypeVar("T")
#: What the core returns for a chunk: outputs, count_tokens counts, bad records, totals.
_Chunk: TypeAlias = tuple[list[Any], list[list[int]], list[BadRecord], dict[str, Any]]


class BatchResults(Generic[T]):
    """The outputs of a run over an iterable, in input order (bad records are skipped and listed
    in :attr:`errors`); :attr:`summary` and :attr:`tokens` grow as the results are iterated."""

    def __init__(self, chunks: Iterator[_Chunk]):
        self._chunks = chunks
        self.errors: list[BadRecord] = []
        self.summary = BatchSummary()
        #: Per processed conversation, its count_tokens counts (in step order).
        self.tokens: list[list[int]] = []

    def __iter__(self) -> Iterator[T]:
        started = time.perf_counter()
        for outputs, counts, bad, totals in self._chunks:
            self.errors.extend(bad)
            self.summary.add(totals)
            for output, tokens in zip(outputs, counts, strict=True):
                if output is not None:
                    self.tokens.append(tokens)
                    yield output
            self.summary.seconds = time.perf_counter() - started


def _numbered(run: Callable[[list[Any]], tuple[Any, ...]], items: Iterable[Any], size: int) -> Iterator[_Chunk]:
    """``run`` on each chunk of ``items``, its bad records numbered by position in ``items``."""
    start = 0
    for chunk in _chunks(items, size):
        outputs, counts, bad, totals = run(chunk)
        yield outputs, counts, [BadRecord(start + i, p, r) for i, p, r in bad], totals
        start += len(chunk)


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class Pipeline:
    """Steps applied to every conversation of a dataset, in order, each conversation on its own.

    ``steps``: configs of :mod:`memci.ops` (Sanitize, TrimToTokens, Truncate, Filter, Clear), the
    :class:`CountTokens` step, or operation dicts in either seed format. ``format``: the messages'
    wire format (``"chat"``, ``"anthropic"`` or ``"responses"``). ``workers``: threads, 1 to
    :data:`MAX_WORKERS` (default one per core). A pipeline holds no per-run state: one may serve
    many runs, from many threads. Pipelines with the same ``workers`` share one pool of threads in
    a process (a child process starts its own); the process keeps a few pools for pipelines to
    come, and a pool no pipeline uses any more stops its threads. Every argument is checked before
    a thread starts.
    """

    def __init__(
        self,
        steps: Iterable[Step | Mapping[str, Any]],
        *,
        format: str = "chat",  # the wire format, as memci.formats names it
        workers: int | None = None,
    ) -> None:
        if isinstance(steps, Mapping | str | bytes) or not isinstance(steps, Iterable):
            raise InvalidOperationError(f"batch: steps must be a list of steps, got {type(steps).__name__}")
        if not isinstance(format, str) or not is_unicode(format):
            raise InvalidOperationError(f"batch: format must be a format name, got {repr_of(format)}")
        if workers is not None and (
            isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS
        ):
            raise InvalidOperationError(
                f"batch: workers must be an int from 1 to {MAX_WORKERS} or None, got {repr_of(workers)}"
            )
        self.steps: tuple[Step, ...] = tuple(as_step(s) for s in steps)
        self.format = format
        self._core = _core.BatchPipeline(self.steps, format, workers)

    @property
    def workers(self) -> int:
        """The number of threads the pipeline runs on."""
        return self._core.workers

    def __repr__(self) -> str:
        steps = ", ".join(
            s.describe() if not isinstance(s, CountTokens) else f"count_tokens({s.encoding!r})" for s in self.steps
        )
        return f"Pipeline([{steps}], format={self.format!r}, workers={self.workers})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its steps (for process pools and Ray workers); the threads are not."""
        return (_rebuild, (self.steps, self.format, None))

    def apply(self, messages: Sequence[Message]) -> list[Message]:
        """The steps applied to one conversation: its kept messages (the input's own dicts, in
        order; a message cut by ``allow_partial`` is a new dict). A bad message raises
        :class:`~memci.errors.InvalidMessageError` naming it."""
        outputs, _, bad, _ = self._core.run_messages([messages])
        if bad:
            from memci.errors import InvalidMessageError

            _, path, reason = bad[0]
            raise InvalidMessageError(f"{path}: {reason}" if path else reason, path=path or "messages")
        result = outputs[0]
        assert result is not None
        return result

    def run(
        self, conversations: Iterable[Sequence[Message]], *, chunk_size: int = DEFAULT_CHUNK
    ) -> BatchResults[list[Message]]:
        """Run over message lists, ``chunk_size`` at a time (each chunk on all workers, the GIL
        released while the steps run). Yields each good conversation's kept messages (the input's
        own dicts) in input order; bad ones go to ``results.errors`` with their 0-based position."""
        _check_iterable(conversations, "run: conversations")
        return BatchResults(
            _numbered(self._core.run_messages, conversations, positive_int(chunk_size, "run: chunk_size"))
        )

    def run_records(self, records: Iterable[str | bytes], *, chunk_size: int = DEFAULT_CHUNK) -> BatchResults[bytes]:
        """Run over records as JSON text (a list of messages, or an object with a ``messages``
        key whose other keys are kept byte for byte). Yields each good record's output as UTF-8
        bytes, kept messages byte for byte as they were read; bad ones go to ``results.errors``."""
        _check_iterable(records, "run_records: records")
        size = positive_int(chunk_size, "run_records: chunk_size")
        return BatchResults(_numbered(self._core.run_records, records, size))

    def run_jsonl(
        self,
        input: str | os.PathLike[str],  # the input file
        output: str | os.PathLike[str],
        *,
        errors: str | os.PathLike[str] | None = None,
        progress: Callable[[int, int, int], object] | None = None,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    ) -> BatchSummary:
        """Stream a JSONL file (a regular file) through the pipeline into ``output``, in input
        order; bad records go to ``errors`` (JSONL: ``{"line", "path", "reason"}``) and are
        counted. ``output`` and ``errors`` go where they point: ``-`` is standard output; a
        regular file, or a symlink to one (resolved), is written under a temporary name beside it
        and renamed over it at the end, so a run that stops (an exception, Ctrl-C) leaves neither
        it nor a temporary file; a device or a FIFO is written to as the run goes, never replaced.
        Blank lines are skipped. ``progress`` is called after each chunk with ``(bytes_read,
        bytes_total, records)``. Memory is bounded by a few times ``chunk_bytes``, whatever the
        file's size. An input that changed while it was read (its size, modification time or
        inode, or fewer bytes read than it held) raises :class:`~memci.errors.StorageError` naming
        it, and nothing is renamed into place. Raises ``OSError`` when a file cannot be read or
        written."""
        source, target, errors_target = run_files("run_jsonl", input, output, errors, progress)
        chunk_bytes = positive_int(chunk_bytes, "run_jsonl: chunk_bytes")
        if "-" in (target, errors_target):
            sys.stdout.flush()  # what Python buffered goes out before the run writes to fd 1
        started = time.perf_counter()
        # The core never reads more than the file holds at once: a larger chunk is the whole file.
        run = self._core.open_jsonl(source, target, errors_target, chunk_bytes)
        try:
            while run.step():
                if progress is not None:
                    progress(*run.progress())
            if progress is not None:
                progress(*run.progress())
            change = run.input_change()
            if change is not None:
                raise StorageError(f"run_jsonl: {source} changed while the run read it: {change}", source)
            totals = run.finish()
        finally:
            run.close()
        summary = BatchSummary(seconds=time.perf_counter() - started)
        summary.add(totals)
        return summary


def _check_iterable(items: object, what: str) -> None:
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise InvalidOperationError(f"{what} must be an iterable of records, got {type(items).__name__}")


def _rebuild(steps: tuple[Step, ...], format: str, workers: int | None) -> Pipeline:
    return Pipeline(steps, format=format, workers=workers)
