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
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memci._optional import needs_extra
from memci.batch.pipeline import BadRecord, BatchSummary, Pipeline
from memci.errors import InvalidOperationError

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
    if column not in table.column_names:
        raise InvalidOperationError(f"batch: the table has no column {column!r} (columns: {table.column_names})")
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
    ``output`` (same schema), under a temporary name renamed at the end; bad rows go to
    ``errors`` as JSONL (``{"row", "path", "reason"}``). ``progress`` gets ``(rows_read,
    rows_total, rows_read)``."""
    with needs_extra("arrow", "memci.batch.arrow"):
        import pyarrow.parquet as pq

    started = time.perf_counter()
    source = pq.ParquetFile(os.fspath(input))
    total = source.metadata.num_rows
    out_path, err_path = Path(output), None if errors is None else Path(errors)
    temp = out_path.with_name(f".{out_path.name}.partial-{os.getpid()}")
    err_temp = None if err_path is None else err_path.with_name(f".{err_path.name}.partial-{os.getpid()}")
    summary = BatchSummary()
    rows = 0
    try:
        with pq.ParquetWriter(temp, source.schema_arrow) as writer:
            err_file = None if err_temp is None else err_temp.open("w", encoding="utf-8")
            try:
                for batch in source.iter_batches(batch_size=batch_rows):
                    table = _pyarrow().Table.from_batches([batch])
                    result = run_table(pipeline, table, column, first_row=rows)
                    rows += table.num_rows
                    summary.merge(result.summary)
                    writer.write_table(result.table)
                    if err_file is not None:
                        for bad in result.errors:
                            err_file.write(json.dumps(bad.to_json("row")) + "\n")
                    if progress is not None:
                        progress(rows, total, rows)
            finally:
                if err_file is not None:
                    err_file.close()
        os.replace(temp, out_path)
        if err_temp is not None and err_path is not None:
            os.replace(err_temp, err_path)
    finally:
        for leftover in (temp, err_temp):
            if leftover is not None and leftover.exists():
                leftover.unlink()
    summary.bytes_in = os.path.getsize(input)
    summary.bytes_out = os.path.getsize(out_path)
    summary.seconds = time.perf_counter() - started
    return summary
