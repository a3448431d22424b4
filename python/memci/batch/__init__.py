"""Batch processing of conversation datasets: a pipeline of steps applied to every conversation,
run in Rust on all cores with the GIL released, from bytes in to bytes out.

>>> from memci import batch, ops
>>> pipeline = batch.Pipeline([batch.sanitize(), ops.Filter(roles=["user", "assistant"])])
>>> pipeline.apply([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
[{'role': 'user', 'content': 'hi'}]

Inputs: an iterable of message lists (:meth:`Pipeline.run`), of JSON records
(:meth:`Pipeline.run_records`), a JSONL file (:meth:`Pipeline.run_jsonl`, streamed), Arrow tables
and Parquet files (:mod:`memci.batch.arrow`, with ``pyarrow``). Every step has the semantics of
the :class:`~memci.MessageArray` operation of the same name. Semantics: ``docs/batch.md``.
"""

from __future__ import annotations

from memci.batch.pipeline import (
    BadRecord,
    BatchResults,
    BatchSummary,
    CountTokens,
    Pipeline,
    Step,
    clear,
    clear_tool_uses,
    count_tokens,
    filter,  # the FILTER step, named like the operation
    sanitize,
    trim_to_tokens,
    truncate,
)

__all__ = [
    "BadRecord",
    "BatchResults",
    "BatchSummary",
    "CountTokens",
    "Pipeline",
    "Step",
    "clear",
    "clear_tool_uses",
    "count_tokens",
    "filter",
    "sanitize",
    "trim_to_tokens",
    "truncate",
]
