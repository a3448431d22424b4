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
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from typing import Any, BinaryIO

from memci._optional import needs_extra
from memci.batch.arrow import run_table
from memci.batch.output import file_identity, is_streamed, run_files, written
from memci.batch.pipeline import BadRecord, BatchSummary, Pipeline, Step
from memci.errors import InvalidOperationError, StorageError, repr_of

__all__ = ["ERROR_COLUMN", "TOTALS_COLUMN", "BatchMapper", "run"]

#: The column each line of a JSONL input is read into (:mod:`memci.integrations.ray_lines`).
TEXT_COLUMN = "text"
#: A line the local run skips as blank: ASCII whitespace only (Rust's ``u8::is_ascii_whitespace``,
#: which 0x0B is not), matched in Arrow (RE2), bytes that are not UTF-8 included.
BLANK_LINE = r"^[ \t\n\x0c\r]*\z"
#: With ``report=True``: the JSON ``{"path", "reason"}`` of a bad row (null for a good one).
ERROR_COLUMN = "memci_error"
#: With ``report=True``: the batch's totals as JSON (a :class:`~memci.batch.BatchSummary`), on
#: the batch's first row only (null on the others), so that summing the column sums the run.
TOTALS_COLUMN = "memci_totals"
#: A Parquet run's progress is reported every this many rows.
_PROGRESS_ROWS = 4096


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


def _write_error(errors: BinaryIO | None, number: int, error: str, key: str) -> None:
    if errors is not None:
        where = json.loads(error)
        errors.write(BadRecord(number, where["path"], where["reason"]).error_line(key))


def run(
    pipeline: Pipeline,
    input: str | os.PathLike[str],  # the input path
    output: str | os.PathLike[str],
    *,
    column: str = "messages",
    errors: str | os.PathLike[str] | None = None,
    progress: Callable[[int, int, int], object] | None = None,
) -> BatchSummary:
    """Run ``pipeline`` over a dataset on the connected Ray cluster (``ray.init`` first): a
    Parquet file (``*.parquet``) or a folder (a local one, or a URL ending in ``/``) is read as
    Parquet and written as Parquet files into the folder ``output``;
    anything else is read as JSONL (one record per line) and written, in input order, to the file
    ``output``. Bad records are left out of the output and written to ``errors`` as JSONL, as the
    local pipeline writes them (``{"line", "path", "reason"}`` for JSONL, the 0-based ``"row"``
    for Parquet); the summary has the local run's counts (records read, blank lines,
    conversations, bad records, messages in and out, removals, tokens, bytes).

    The JSONL output and ``errors`` go where they point, as for
    :meth:`~memci.batch.Pipeline.run_jsonl`: ``-`` is standard output, a regular file (symlinks
    resolved) is written under a temporary name renamed at the end, a device or FIFO is written to
    as the run goes, a directory is refused (``IsADirectoryError``). A local input file that
    changed while the run read it (size, modification time, device or inode) raises
    :class:`~memci.errors.StorageError` naming it, and nothing is renamed into place.
    ``progress`` is called after each batch the driver receives with ``(bytes_read, bytes_total,
    records)`` for JSONL (bytes as Ray's lines hold them, a near count) and ``(rows_read,
    rows_total, rows_read)`` for Parquet."""
    with needs_extra("ray", "memci.integrations.ray.run"):
        import ray

    what = "memci.integrations.ray.run"
    path, target, err_path = run_files(what, input, output, errors, progress)
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    parquet = path.endswith((".parquet", "/")) or os.path.isdir(path)
    if parquet and is_streamed(target):
        raise InvalidOperationError(f"{what}: a Parquet output is a folder Ray writes, got {repr_of(target)}")
    # A local file is checked for change at the end; a folder or a URL is read as Ray lists it.
    place = os.path.abspath(path) if os.path.isfile(path) else None
    opened = None if place is None else file_identity(place)

    def check_input() -> None:
        """Called once the whole input was read, before anything is renamed into place."""
        if place is not None and opened is not None and file_identity(place) != opened:
            raise StorageError(f"{what}: {path} changed while the run read it", path)

    summary = BatchSummary()
    with ExitStack() as files:
        err_file = None if err_path is None else files.enter_context(written(err_path))
        if parquet:
            # The folder is written by Ray, not renamed: the input is checked before it is written.
            mapped = _report_parquet(pipeline, path, column, summary=summary, errors=err_file, progress=progress)
            check_input()
            _write_good_rows(mapped, target)
        else:
            out_file = files.enter_context(written(target))
            total = 0 if opened is None else opened[0]

            def report(done: int, records: int) -> None:
                if progress is not None:
                    progress(min(done, total), total, records)

            _run_jsonl(pipeline, path, out_file, summary=summary, errors=err_file, progress=report)
            check_input()
    return summary


def _report_parquet(
    pipeline: Pipeline,
    path: str,
    column: str,
    *,
    summary: BatchSummary,
    errors: BinaryIO | None,
    progress: Callable[[int, int, int], object] | None,
) -> Any:
    """The dataset mapped with a reporting mapper, materialised (the input read whole); its bad
    rows written to ``errors`` and its totals added to ``summary``."""
    import ray

    mapper = BatchMapper(pipeline.steps, column=column, format=pipeline.format, report=True)
    ds = ray.data.read_parquet(path).map_batches(mapper, batch_format="pyarrow").materialize()
    total = ds.count()
    reports = ds.select_columns([column, ERROR_COLUMN, TOTALS_COLUMN]).iter_batches(batch_format="pyarrow")
    rows = 0
    for rows, (_, error) in enumerate(_reported(reports, summary), 1):
        if error is not None:
            _write_error(errors, rows - 1, error, "row")
        if progress is not None and rows % _PROGRESS_ROWS == 0:
            progress(rows, total, rows)
    if progress is not None:
        progress(rows, total, rows)
    return ds


def _write_good_rows(ds: Any, output: str) -> None:
    """The good rows of a reported dataset, without the report's columns, as Parquet files in the
    folder ``output``."""

    def good_rows(table: Any) -> Any:
        import pyarrow.compute as pc

        return table.filter(pc.is_null(table.column(ERROR_COLUMN))).drop_columns([ERROR_COLUMN, TOTALS_COLUMN])

    ds.map_batches(good_rows, batch_format="pyarrow").write_parquet(output)


def _run_jsonl(
    pipeline: Pipeline,
    path: str,
    output: BinaryIO,
    *,
    summary: BatchSummary,
    errors: BinaryIO | None,
    progress: Callable[[int, int], object],
) -> None:
    import ray

    from memci.integrations.ray_lines import JsonLines

    mapper = BatchMapper(pipeline.steps, column=TEXT_COLUMN, format=pipeline.format, report=True)
    # Lines split as the local run splits them, as bytes; blank ones are kept so that rows number
    # the file's lines, and the mapper skips and counts them, as the local pipeline does.
    ds = ray.data.read_datasource(JsonLines(path, column=TEXT_COLUMN)).map_batches(
        _drop_blank_then(mapper), batch_format="pyarrow"
    )
    number = done = 0
    batches: Iterable[Any] = ds.iter_batches(batch_format="pyarrow")
    for batch in batches:
        lines = batch.column(TEXT_COLUMN).to_pylist()
        for line, error in _reported([batch], summary):
            number += 1
            if error is not None:
                _write_error(errors, number, error, "line")
            elif line is not None:
                output.write(line + b"\n")
        done += sum(len(x) + 1 for x in lines if x is not None)
        progress(done, summary.records)


def _drop_blank_then(mapper: BatchMapper) -> Any:
    """``mapper`` over a batch of lines whose blank ones come back null, with no error, counted in the
    batch's ``records`` and ``blank`` as the local run counts them."""

    def run_lines(table: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        column = table.column(TEXT_COLUMN)
        blank = pc.match_substring_regex(column, BLANK_LINE)
        if not pc.any(blank).as_py():
            return mapper(table)
        done = mapper(table.filter(pc.invert(blank)))
        lines, errs, totals = (
            iter(done.column(TEXT_COLUMN).to_pylist()),
            iter(done.column(ERROR_COLUMN).to_pylist()),
            done.column(TOTALS_COLUMN).to_pylist(),
        )
        rows = [(None, None) if b else (next(lines), next(errs)) for b in blank.to_pylist()]
        first = next((json.loads(t) for t in totals if t is not None), None)
        counts = dataclasses.asdict(BatchSummary()) if first is None else first
        blanks = sum(blank.to_pylist())
        counts["records"] += blanks
        counts["blank"] += blanks
        return pa.table(
            {
                TEXT_COLUMN: pa.array([r[0] for r in rows], type=column.type),
                ERROR_COLUMN: pa.array([r[1] for r in rows], type=pa.string()),
                TOTALS_COLUMN: pa.array([json.dumps(counts)] + [None] * (len(rows) - 1), type=pa.string()),
            }
        )

    return run_lines
