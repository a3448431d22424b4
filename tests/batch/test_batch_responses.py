"""Responses API items as a batch format: every input path (iterable, records, JSONL, Arrow,
Parquet, the CLI) gives what the same steps give run one conversation at a time through
MessageArray, and sanitize gives what sanitize_messages gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import memci
import pytest
from batch_helpers import as_line, messages_of, reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memci import batch
from memci.cli.main import main
from tool_histories import RESPONSES, damaged

STEPS: dict[str, list[batch.Step]] = {
    "sanitize_trim_count": [batch.sanitize(), batch.trim_to_tokens(60), batch.count_tokens()],
    "filter_truncate": [batch.sanitize(), batch.filter(content_excludes=["why?"]), batch.truncate(keep_last=4)],
    "count_trim_first": [
        batch.count_tokens("cl100k_base"),
        batch.trim_to_tokens(40, strategy="first", keep_system=False, start_on=None),
        batch.count_tokens("approximate"),
    ],
}

items_datasets = st.lists(damaged(RESPONSES), max_size=5)


@pytest.mark.parametrize("name", sorted(STEPS))
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=items_datasets)
def test_every_input_path_matches_the_array(tmp_path: Path, name: str, data: list[Any]) -> None:
    steps = STEPS[name]
    pipeline = batch.Pipeline(steps, format="responses", workers=2)
    expected = [reference(c, steps) for c in data]
    kept = [m for m, _ in expected]
    results = pipeline.run(data, chunk_size=2)
    assert list(results) == kept
    assert results.tokens == [counts for _, counts in expected]
    records = pipeline.run_records([as_line(c, i) for i, c in enumerate(data)])
    assert [messages_of(r) for r in records] == kept
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(as_line(c, i) + "\n" for i, c in enumerate(data)), encoding="utf-8")
    summary = pipeline.run_jsonl(source, target, chunk_bytes=300)
    assert [messages_of(line) for line in target.read_text(encoding="utf-8").splitlines()] == kept
    assert summary.conversations == len(data)


EARLIER_REASONING = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "hi"},
    {"type": "function_call", "call_id": "call_a", "name": "search", "arguments": '{"q": "call_a"}'},
    {"type": "function_call_output", "call_id": "call_a", "output": "result of call_a"},
    {"type": "reasoning", "id": "rs_call_a", "summary": []},
    {"type": "function_call", "call_id": "call_a", "name": "search", "arguments": '{"q": "call_a"}'},
    {"type": "function_call_output", "call_id": "call_a", "output": "result of call_a"},
    {"role": "user", "content": "hi"},
]


@pytest.mark.parametrize("thinking", ["drop_earlier", "count"])
def test_a_trim_counts_earlier_reasoning_as_the_array_does(thinking: str) -> None:
    """A reasoning item before the last user turn costs nothing by default (docs/tokens.md): the
    history is 59 tokens as sent and fits 60 whole; counted (3 more), it does not."""
    steps = [batch.sanitize(), batch.trim_to_tokens(60, thinking=thinking), batch.count_tokens()]
    results = batch.Pipeline(steps, format="responses").run([EARLIER_REASONING])
    kept, counts = reference(EARLIER_REASONING, steps)
    assert list(results) == [kept]
    assert results.tokens == [counts]
    assert len(kept) == (len(EARLIER_REASONING) if thinking == "drop_earlier" else 2)


@pytest.mark.parametrize("thinking", ["drop_earlier", "count"])
def test_the_cli_trims_by_the_thinking_rule_it_is_given(tmp_path: Path, thinking: str) -> None:
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(as_line(EARLIER_REASONING, 0) + "\n", encoding="utf-8")
    args = [
        "batch",
        str(source),
        str(target),
        "--format",
        "responses",
        "--max-tokens",
        "60",
        "--keep-system",
        "--quiet",
    ]
    assert main([*args, "--thinking", thinking] if thinking != "drop_earlier" else args) == 0
    steps = [batch.trim_to_tokens(60, thinking=thinking), batch.count_tokens()]
    kept = messages_of(target.read_text(encoding="utf-8").strip())
    assert kept == reference(EARLIER_REASONING, steps)[0]
    assert len(kept) == (len(EARLIER_REASONING) if thinking == "drop_earlier" else 2)


@given(conversation=damaged(RESPONSES))
def test_sanitize_matches_sanitize_messages(conversation: list[Any]) -> None:
    assert batch.Pipeline([batch.sanitize()], format="responses").apply(conversation) == (
        memci.sanitize_messages(conversation).messages
    )


def items(i: int) -> list[dict[str, Any]]:
    call = {"type": "function_call", "call_id": f"c{i}", "name": "search", "arguments": '{"q": "x"}'}
    output = {"type": "function_call_output", "call_id": f"c{i}", "output": "found " * i}
    conversation = [{"role": "user", "content": [{"type": "input_text", "text": f"q{i}"}], "type": "message"}, call]
    if i % 3:
        conversation.append(output)  # else the call is left unanswered: sanitize drops it
    return [*conversation, {"role": "assistant", "content": "done"}]


def test_arrow_and_parquet_match_the_array(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from memci.batch.arrow import run_parquet, run_table

    data = [items(i) for i in range(12)]
    steps = STEPS["sanitize_trim_count"]
    expected = [reference(c, steps)[0] for c in data]
    pipeline = batch.Pipeline(steps, format="responses")
    table = pa.table({"id": list(range(12)), "messages": [json.dumps(c) for c in data]})
    out = run_table(pipeline, table).table
    assert [json.loads(x) for x in out.column("messages").to_pylist()] == expected
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(table, source)
    run_parquet(pipeline, source, target, batch_rows=5)
    assert [json.loads(x) for x in pq.read_table(target).column("messages").to_pylist()] == expected


def test_the_cli_reads_responses_items(tmp_path: Path) -> None:
    data = [items(i) for i in range(9)]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps({"messages": c}) + "\n" for c in data), encoding="utf-8")
    args = ["--format", "responses", "--sanitize", "--max-tokens", "50", "--quiet"]
    assert main(["batch", str(source), str(target), *args]) == 0
    steps = [batch.sanitize(), batch.trim_to_tokens(50, keep_system=False)]
    got = [messages_of(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert got == [reference(c, steps)[0] for c in data]
    assert any(len(g) < len(c) for g, c in zip(got, data, strict=True))
