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
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memci.batch.arrow import run_table
from memci.batch.pipeline import BatchSummary, Pipeline, Step

__all__ = ["BatchMapper", "run"]

#: The column Ray's ``read_text`` puts each line in.
TEXT_COLUMN = "text"


class BatchMapper:
    """A ``map_batches`` function running the pipeline of ``steps`` on ``column`` (JSON text or
    lists of messages; see :mod:`memci.batch.arrow`). Bad rows are dropped; their count is not
    reported back (Ray has no side channel for it: validate first with the local pipeline when it
    matters). Pickled as its steps; each worker builds its pipeline once."""

    def __init__(
        self,
        steps: Iterable[Step | Mapping[str, Any]],
        *,
        column: str = "messages",
        format: str = "chat",  # the wire format
        workers: int | None = None,
    ) -> None:
        self.pipeline = Pipeline(steps, format=format, workers=workers)
        self.column = column

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        if isinstance(batch, pa.Table):
            return run_table(self.pipeline, batch, self.column).table
        # pandas: through Arrow, and back.
        table = pa.Table.from_pandas(batch, preserve_index=False)
        return run_table(self.pipeline, table, self.column).table.to_pandas()


def run(
    pipeline: Pipeline,
    input: str | os.PathLike[str],  # the input path
    output: str | os.PathLike[str],
    *,
    column: str = "messages",
) -> BatchSummary:
    """Run ``pipeline`` over a dataset on the connected Ray cluster (``ray.init`` first): a
    Parquet file (``*.parquet``) or a folder (a local one, or a URL ending in ``/``) is read as
    Parquet and written as Parquet files into the folder ``output``;
    anything else is read as JSONL (one record per line) and written, in input order, to the file
    ``output`` (under a temporary name renamed at the end). The summary counts conversations and
    messages only (workers do not report removals)."""
    import ray

    ray.data.DataContext.get_current().execution_options.preserve_order = True
    path = os.fspath(input)
    mapper = BatchMapper(pipeline.steps, column=column, format=pipeline.format)
    summary = BatchSummary()
    if path.endswith((".parquet", "/")) or Path(path).is_dir():
        ds = ray.data.read_parquet(path).map_batches(mapper, batch_format="pyarrow")
        ds.write_parquet(os.fspath(output))
        summary.conversations = ds.count()
        return summary
    text_mapper = BatchMapper(pipeline.steps, column=TEXT_COLUMN, format=pipeline.format)
    ds = ray.data.read_text(path).map_batches(text_mapper, batch_format="pyarrow")
    out = Path(output)
    temp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        with temp.open("w", encoding="utf-8") as f:
            for batch in ds.iter_batches(batch_format="pyarrow"):
                table: Any = batch
                for line in table.column(TEXT_COLUMN).to_pylist():
                    f.write(line)
                    f.write("\n")
                    summary.conversations += 1
        os.replace(temp, out)
    finally:
        if temp.exists():
            temp.unlink()
    return summary
