"""Arrow tables and Parquet files through a :class:`~memci.batch.Pipeline` (needs ``pyarrow``:
``pip install memci[arrow]``).

The messages column may hold JSON text (``string``/``large_string``/``binary``: one record per
row, a list of messages or an object with a ``messages`` key; processed from bytes to bytes) or
Arrow lists of structs (converted to dicts; a struct field that is null is taken as absent, as
Arrow writes an absent key as null). Other columns pass through untouched. Bad rows are dropped
from the output and reported with their 0-based row number.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from memci._optional import needs_extra
from memci.batch.output import file_identity, positive_int, run_files, written
from memci.batch.pipeline import BadRecord, BatchSummary, Pipeline
from memci.errors import InvalidOperationError, StorageError, repr_of

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ArrowResult", "run_parquet", "run_table"]

#: Rows read from a Parquet file at a time.
DEFAULT_BATCH_ROWS = 4096


def _pyarrow() -> Any:
    with needs_extra("arrow", "memci.batch.arrow"):
        import pyarrow
    return pyarrow


@dataclasses.dataclass(slots=True)
class ArrowResult:
    """A processed table (bad rows dropped), the bad rows, and the summary."""

    table: pa.Table
    errors: list[BadRecord]
    summary: BatchSummary


def _is_text(kind: Any) -> bool:
    pa = _pyarrow()
    t = pa.types
    return bool(t.is_string(kind) or t.is_large_string(kind) or t.is_binary(kind) or t.is_large_binary(kind))


def _present(message: Any) -> Any:
    """A struct row as the message it stands for: null fields are absent keys."""
    if isinstance(message, dict):
        return {k: v for k, v in message.items() if v is not None}
    return message


def run_table(pipeline: Pipeline, table: pa.Table, column: str = "messages", *, first_row: int = 0) -> ArrowResult:
    """Run the pipeline on the ``column`` of every row of ``table``; the output table has the
    same schema. ``first_row`` numbers the rows in errors (for tables read in batches)."""
    pa = _pyarrow()
    started = time.perf_counter()
    if not isinstance(pipeline, Pipeline):
        raise InvalidOperationError(f"run_table: pipeline must be a memci.batch.Pipeline, got {repr_of(pipeline)}")
    if not isinstance(table, pa.Table):
        raise InvalidOperationError(f"run_table: table must be a pyarrow.Table, got {repr_of(table)}")
    _check_column(column, "run_table")
    if isinstance(first_row, bool) or not isinstance(first_row, int) or first_row < 0:
        raise InvalidOperationError(f"run_table: first_row must be an int >= 0, got {repr_of(first_row)}")
    if column not in table.column_names:
        raise InvalidOperationError(
            f"batch: the table has no column {repr_of(column)} (columns: {repr_of(table.column_names)})"
        )
    values = table.column(column)
    kind = values.type
    summary = BatchSummary()
    if _is_text(kind):
        records = values.to_pylist()
        outputs_b, _, bad, totals = pipeline._core.run_records([b"" if r is None else r for r in records])
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            outputs: list[Any] = [None if o is None else o.decode() for o in outputs_b]
        else:
            outputs = list(outputs_b)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        conversations = [[_present(m) for m in c] if c is not None else None for c in values.to_pylist()]
        outputs, _, bad, totals = pipeline._core.run_messages(conversations)
    else:
        raise InvalidOperationError(f"batch: column {column!r} must hold JSON text or lists of messages, got {kind}")
    summary.add(totals)
    keep = [o is not None for o in outputs]
    kept = table.filter(pa.array(keep, type=pa.bool_())) if not all(keep) else table
    new_column = pa.array([o for o in outputs if o is not None], type=kind)
    kept = kept.set_column(kept.column_names.index(column), kept.schema.field(column), new_column)
    summary.seconds = time.perf_counter() - started
    return ArrowResult(kept, [BadRecord(first_row + i, p, r) for i, p, r in bad], summary)


def _check_column(column: object, what: str) -> None:
    if not isinstance(column, str):
        raise InvalidOperationError(f"{what}: column must be a str, got {repr_of(column)}")


def _unreadable(path: str, error: Exception) -> StorageError:
    """A Parquet file pyarrow cannot read, as the family's error naming it."""
    return StorageError(f"run_parquet: {path}: not a readable Parquet file: {repr_of(str(error))}", path)


def _batches(source: Any, batch_rows: int, path: str) -> Iterator[Any]:
    """The file's row batches; a decoding failure is :func:`_unreadable`."""
    pa = _pyarrow()
    batches = source.iter_batches(batch_size=batch_rows)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except pa.ArrowException as e:
            raise _unreadable(path, e) from e
        yield batch


def run_parquet(
    pipeline: Pipeline,
    input: str | os.PathLike[str],  # the input file
    output: str | os.PathLike[str],
    *,
    column: str = "messages",
    errors: str | os.PathLike[str] | None = None,
    progress: Callable[[int, int, int], object] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> BatchSummary:
    """Stream a Parquet file through the pipeline, ``batch_rows`` rows at a time, into
    ``output`` (same schema); bad rows go to ``errors`` as JSONL (``{"row", "path",
    "reason"}``). Both go where they point, as for :meth:`Pipeline.run_jsonl`: ``-`` is
    standard output, a regular file (symlinks resolved) is written under a temporary name renamed
    at the end, a device or FIFO is written to as the run goes. ``progress`` gets ``(rows_read,
    rows_total, rows_read)``. A file pyarrow cannot read, or an input that changed while it was
    read, raises :class:`~memci.errors.StorageError` naming it, and nothing is renamed into
    place."""
    with needs_extra("arrow", "memci.batch.arrow"):
        import pyarrow.parquet as pq

    pa = _pyarrow()
    if not isinstance(pipeline, Pipeline):
        raise InvalidOperationError(f"run_parquet: pipeline must be a memci.batch.Pipeline, got {repr_of(pipeline)}")
    source_path, out_path, err_path = run_files("run_parquet", input, output, errors, progress)
    _check_column(column, "run_parquet")
    batch_rows = positive_int(batch_rows, "run_parquet: batch_rows", most=1 << 62)
    started = time.perf_counter()
    place = os.path.abspath(source_path)  # the same file at the end, whatever the working folder
    opened = file_identity(place)
    try:
        source = pq.ParquetFile(source_path)
    except pa.ArrowException as e:
        if isinstance(e, OSError) and not isinstance(e, pa.ArrowInvalid):
            raise
        raise _unreadable(source_path, e) from e
    total = source.metadata.num_rows
    summary = BatchSummary()
    rows = 0
    with ExitStack() as files:
        out_file = files.enter_context(written(out_path))
        err_file = None if err_path is None else files.enter_context(written(err_path))
        with pq.ParquetWriter(out_file, source.schema_arrow) as writer:
            for batch in _batches(source, batch_rows, source_path):
                table = pa.Table.from_batches([batch])
                result = run_table(pipeline, table, column, first_row=rows)
                rows += table.num_rows
                summary.merge(result.summary)
                writer.write_table(result.table)
                if err_file is not None:
                    for bad in result.errors:
                        err_file.write(bad.error_line("row"))
                if progress is not None:
                    progress(rows, total, rows)
        if file_identity(place) != opened or rows != total:
            raise StorageError(f"run_parquet: {source_path} changed while the run read it", source_path)
        summary.bytes_out = out_file.tell() if out_file.seekable() else 0
    summary.bytes_in = opened[0]
    summary.seconds = time.perf_counter() - started
    return summary
