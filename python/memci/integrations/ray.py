"""memci's batch pipeline on a Ray cluster (``pip install memci[ray]``).

:class:`BatchMapper` is a callable for ``ray.data.Dataset.map_batches``: it runs a
:class:`~memci.batch.Pipeline` on the messages column of each batch (Arrow tables or pandas
frames, returned in the same kind) on the worker's cores. :func:`run` runs a JSONL or Parquet
dataset end to end::

    import ray
    from memci import batch
    from memci.integrations.ray import BatchMapper

    ray.init(address="ray://head:10001")
    ds = ray.data.read_parquet("s3://bucket/conversations/")
    ds = ds.map_batches(BatchMapper([batch.sanitize(), batch.trim_to_tokens(4096)]), batch_format="pyarrow")
    ds.write_parquet("s3://bucket/cleaned/")

Ray gives a ``map_batches`` function no way to report anything but rows, so :class:`BatchMapper`
drops bad rows silently unless asked to report them (``report=True``); :func:`run` does, and
writes the errors file and the full summary the local pipeline writes.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from memci._optional import needs_extra
from memci.batch.arrow import run_table
from memci.batch.pipeline import BadRecord, BatchSummary, Pipeline, Step

__all__ = ["ERROR_COLUMN", "TOTALS_COLUMN", "BatchMapper", "run"]

#: The column Ray's ``read_text`` puts each line in.
TEXT_COLUMN = "text"
#: With ``report=True``: the JSON ``{"path", "reason"}`` of a bad row (null for a good one).
ERROR_COLUMN = "memci_error"
#: With ``report=True``: the batch's totals as JSON (a :class:`~memci.batch.BatchSummary`), on
#: the batch's first row only (null on the others), so that summing the column sums the run.
TOTALS_COLUMN = "memci_totals"


class BatchMapper:
    """A ``map_batches`` function running the pipeline of ``steps`` on ``column`` (JSON text or
    lists of messages; see :mod:`memci.batch.arrow`). Pickled as its steps; each worker builds its
    pipeline once.

    By default bad rows are dropped and the output has the input's schema. With ``report=True``
    every row comes back (a bad one with its ``column`` null), with two more columns that carry
    what Ray has no side channel for: :data:`ERROR_COLUMN` and :data:`TOTALS_COLUMN`.
    :func:`run` reads them to write the errors file and the summary."""

    def __init__(
        self,
        steps: Iterable[Step | Mapping[str, Any]],
        *,
        column: str = "messages",
        format: str = "chat",  # the wire format
        workers: int | None = None,
        report: bool = False,
    ) -> None:
        self.pipeline = Pipeline(steps, format=format, workers=workers)
        self.column = column
        self.report = report

    def __call__(self, batch: Any) -> Any:
        with needs_extra("ray", "memci.integrations.ray.BatchMapper"):
            import pyarrow as pa

        if isinstance(batch, pa.Table):
            return self._run(batch)
        # pandas: through Arrow, and back.
        return self._run(pa.Table.from_pandas(batch, preserve_index=False)).to_pandas()

    def _run(self, table: Any) -> Any:
        import pyarrow as pa

        result = run_table(self.pipeline, table, self.column)
        if not self.report:
            return result.table
        bad = {e.number: e for e in result.errors}
        kept = iter(result.table.column(self.column).to_pylist())
        values = [None if i in bad else next(kept) for i in range(table.num_rows)]
        errors = [
            json.dumps({"path": bad[i].path, "reason": bad[i].reason}) if i in bad else None
            for i in range(table.num_rows)
        ]
        totals = [json.dumps(dataclasses.asdict(result.summary))] + [None] * (table.num_rows - 1)
        kind = table.schema.field(self.column)
        out = table.set_column(table.column_names.index(self.column), kind, pa.array(values, type=kind.type))
        out = out.append_column(ERROR_COLUMN, pa.array(errors, type=pa.string()))
        return out.append_column(TOTALS_COLUMN, pa.array(totals[: table.num_rows], type=pa.string()))


def _reported(batches: Iterable[Any], summary: BatchSummary) -> Iterator[tuple[Any, str | None]]:
    """Each row's output value and its error, in order; the batches' totals added to ``summary``."""
    for batch in batches:
        for totals in batch.column(TOTALS_COLUMN).to_pylist():
            if totals is not None:
                summary.add(json.loads(totals))
        yield from zip(batch.column(0).to_pylist(), batch.column(ERROR_COLUMN).to_pylist(), strict=True)


def _write_error(errors: TextIO | None, number: int, error: str, key: str) -> None:
    if errors is not None:
        where = json.loads(error)
        errors.write(json.dumps(BadRecord(number, where["path"], where["reason"]).to_json(key)) + "\n")


def run(
    pipeline: Pipeline,
    input: str | os.PathLike[str],  # the input path
    output: str | os.PathLike[str],
    *,
    column: str = "messages",
    errors: str | os.PathLike[str] | None = None,
) -> BatchSummary:
    """Run ``pipeline`` over a dataset on the connected Ray cluster (``ray.init`` first): a
    Parquet file (``*.parquet``) or a folder (a local one, or a URL ending in ``/``) is read as
    Parquet and written as Parquet files into the folder ``output``;
    anything else is read as JSONL (one record per line) and written, in input order, to the file
    ``output`` (under a temporary name renamed at the end). Bad records are left out of the output
    and written to ``errors`` as JSONL, as the local pipeline writes them (``{"line", "path",
    "reason"}`` for JSONL, the 0-based ``"row"`` for Parquet); the summary has the local run's
    counts (conversations, bad records, messages in and out, removals, tokens, bytes)."""
    with needs_extra("ray", "memci.integrations.ray.run"):
        import ray

    ray.data.DataContext.get_current().execution_options.preserve_order = True
    path = os.fspath(input)
    summary = BatchSummary()
    err_path = None if errors is None else Path(errors)
    err_temp = None if err_path is None else err_path.with_name(f".{err_path.name}.partial-{os.getpid()}")
    err_file = None if err_temp is None else err_temp.open("w", encoding="utf-8")
    try:
        if path.endswith((".parquet", "/")) or Path(path).is_dir():
            _run_parquet(pipeline, path, os.fspath(output), column, summary=summary, errors=err_file)
        else:
            _run_jsonl(pipeline, path, Path(output), summary=summary, errors=err_file)
        if err_file is not None and err_temp is not None and err_path is not None:
            err_file.close()
            os.replace(err_temp, err_path)
    finally:
        if err_file is not None:
            err_file.close()
        if err_temp is not None and err_temp.exists():
            err_temp.unlink()
    return summary


def _run_parquet(
    pipeline: Pipeline, path: str, output: str, column: str, *, summary: BatchSummary, errors: TextIO | None
) -> None:
    import ray

    mapper = BatchMapper(pipeline.steps, column=column, format=pipeline.format, report=True)
    ds = ray.data.read_parquet(path).map_batches(mapper, batch_format="pyarrow").materialize()
    reports = ds.select_columns([column, ERROR_COLUMN, TOTALS_COLUMN]).iter_batches(batch_format="pyarrow")
    for row, (_, error) in enumerate(_reported(reports, summary)):
        if error is not None:
            _write_error(errors, row, error, "row")

    def good_rows(table: Any) -> Any:
        import pyarrow.compute as pc

        return table.filter(pc.is_null(table.column(ERROR_COLUMN))).drop_columns([ERROR_COLUMN, TOTALS_COLUMN])

    ds.map_batches(good_rows, batch_format="pyarrow").write_parquet(output)


def _run_jsonl(pipeline: Pipeline, path: str, output: Path, *, summary: BatchSummary, errors: TextIO | None) -> None:
    import ray

    mapper = BatchMapper(pipeline.steps, column=TEXT_COLUMN, format=pipeline.format, report=True)
    # Blank lines are kept so that rows number the file's lines; the mapper skips them, as the
    # local pipeline does.
    ds = ray.data.read_text(path, drop_empty_lines=False).map_batches(_drop_blank_then(mapper), batch_format="pyarrow")
    temp = output.with_name(f".{output.name}.partial-{os.getpid()}")
    try:
        with temp.open("w", encoding="utf-8") as f:
            reports = ds.iter_batches(batch_format="pyarrow")
            for number, (line, error) in enumerate(_reported(reports, summary), 1):
                if error is not None:
                    _write_error(errors, number, error, "line")
                elif line is not None:
                    f.write(line)
                    f.write("\n")
        os.replace(temp, output)
    finally:
        if temp.exists():
            temp.unlink()


def _drop_blank_then(mapper: BatchMapper) -> Any:
    """``mapper`` over a batch of lines whose blank ones come back null, with no error, uncounted."""

    def run_lines(table: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        blank = pc.equal(pc.utf8_trim_whitespace(table.column(TEXT_COLUMN)), "")
        if not pc.any(blank).as_py():
            return mapper(table)
        done = mapper(table.filter(pc.invert(blank)))
        lines, errs, totals = (
            iter(done.column(TEXT_COLUMN).to_pylist()),
            iter(done.column(ERROR_COLUMN).to_pylist()),
            done.column(TOTALS_COLUMN).to_pylist(),
        )
        rows = [(None, None) if b else (next(lines), next(errs)) for b in blank.to_pylist()]
        first = next((t for t in totals if t is not None), None)
        return pa.table(
            {
                TEXT_COLUMN: pa.array([r[0] for r in rows], type=pa.string()),
                ERROR_COLUMN: pa.array([r[1] for r in rows], type=pa.string()),
                TOTALS_COLUMN: pa.array([first] + [None] * (len(rows) - 1), type=pa.string()),
            }
        )

    return run_lines
