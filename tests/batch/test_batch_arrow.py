"""Arrow tables and Parquet files through the pipeline: JSON-text and list-of-struct columns give
what the iterable path gives; other columns pass through; bad rows are dropped and reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import PIPELINES, datasets, reference
from hypothesis import HealthCheck, given, settings
from memci import batch
from memci.errors import InvalidOperationError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
arrow = pytest.importorskip("memci.batch.arrow")


@pytest.mark.parametrize("name", ["sanitize_trim_count", "keywords_clear"])
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=datasets)
def test_parquet_matches_the_array_one_conversation_at_a_time(tmp_path: Path, name: str, data: list[Any]) -> None:
    steps = PIPELINES[name]
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"n": list(range(len(data))), "messages": [json.dumps(c) for c in data]}), source)
    summary = arrow.run_parquet(batch.Pipeline(steps), source, target, batch_rows=2)
    expected = [reference(c, steps) for c in data]
    out = pq.read_table(target)
    assert out.schema == pq.read_schema(source)
    assert [json.loads(x) for x in out.column("messages").to_pylist()] == [m for m, _ in expected]
    assert summary.tokens == [sum(col) for col in zip(*(c for _, c in expected), strict=True)]


def test_struct_columns_take_null_fields_as_absent() -> None:
    conversations = [
        [{"role": "user", "content": "hi"}, {"role": "tool", "content": "orphan", "tool_call_id": "x"}],
        [{"role": "user", "content": "again"}],
    ]
    table = pa.table({"messages": conversations, "k": ["a", "b"]})
    result = arrow.run_table(batch.Pipeline([batch.sanitize()]), table)
    assert result.table.schema == table.schema
    got = result.table.column("messages").to_pylist()
    assert [[{k: v for k, v in m.items() if v is not None} for m in c] for c in got] == [
        [conversations[0][0]],
        conversations[1],
    ]
    assert result.summary.removed["sanitize"] == 1


def test_bad_rows_are_dropped_and_reported_with_their_row(tmp_path: Path) -> None:
    rows = ['[{"role":"user","content":"a"}]', "{nope", None, '[{"role":"user","content":"b"}]']
    source, target, errors = tmp_path / "in.parquet", tmp_path / "out.parquet", tmp_path / "errors.jsonl"
    pq.write_table(pa.table({"id": [0, 1, 2, 3], "messages": rows}), source)
    summary = arrow.run_parquet(batch.Pipeline([]), source, target, errors=errors, batch_rows=3)
    out = pq.read_table(target)
    assert out.column("id").to_pylist() == [0, 3]
    assert [json.loads(x)["row"] for x in errors.read_text(encoding="utf-8").splitlines()] == [1, 2]
    assert (summary.conversations, summary.bad) == (2, 2)


def test_a_table_without_the_column_is_refused() -> None:
    with pytest.raises(InvalidOperationError, match="no column"):
        arrow.run_table(batch.Pipeline([]), pa.table({"x": [1]}))
    with pytest.raises(InvalidOperationError, match="JSON text or lists"):
        arrow.run_table(batch.Pipeline([]), pa.table({"messages": [1]}))
