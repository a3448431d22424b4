"""JSONL files through the pipeline: results equal the iterable path and the array, bytes are
kept, bad lines go to the errors file, nothing is left under the output's name by a failed run,
and memory stays bounded on a file many times the chunk."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import PIPELINES, as_line, datasets, messages_of, reference
from hypothesis import HealthCheck, given, settings
from memci import batch, ops


@pytest.mark.parametrize("name", ["sanitize_trim_count", "filter_truncate", "partial"])
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=datasets)
def test_jsonl_matches_the_array_one_conversation_at_a_time(tmp_path: Path, name: str, data: list[Any]) -> None:
    steps = PIPELINES[name]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(as_line(c, i) + "\n" for i, c in enumerate(data)), encoding="utf-8")
    summary = batch.Pipeline(steps).run_jsonl(source, target, chunk_bytes=200)
    expected = [reference(c, steps) for c in data]
    lines = target.read_text(encoding="utf-8").splitlines()
    assert [messages_of(line) for line in lines] == [m for m, _ in expected]
    assert summary.conversations == len(data)
    assert summary.tokens == [sum(col) for col in zip(*(c for _, c in expected), strict=True)]
    assert summary.bytes_in == source.stat().st_size
    assert summary.bytes_out == target.stat().st_size


def test_kept_messages_and_other_keys_are_written_byte_for_byte(tmp_path: Path) -> None:
    kept = '{"content":"x \\u00e9 é","role":"user","n":1.50,"big":123456789012345678901234567890}'
    orphan = '{"role":"tool","tool_call_id":"nope","content":"o"}'
    line = '{"z": [1,  2], "messages": [' + kept + ", " + orphan + '], "a": {"b": null}}'
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(line + "\n", encoding="utf-8")
    batch.Pipeline([batch.sanitize()]).run_jsonl(source, target)
    assert target.read_text(encoding="utf-8") == '{"z": [1,  2], "messages": [' + kept + '], "a": {"b": null}}\n'


def test_a_record_nothing_was_dropped_from_is_written_exactly_as_read(tmp_path: Path) -> None:
    user, answer = {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}
    orphan = {"role": "tool", "tool_call_id": "gone", "content": "o"}
    whole = json.dumps({"id": 1, "messages": [user, answer, user]}, indent=None)  # ", " and ": "
    cut = json.dumps({"id": 2, "messages": [user, answer, orphan, user, answer]})
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(whole + "\n" + cut + "\n", encoding="utf-8")
    batch.Pipeline([batch.sanitize()]).run_jsonl(source, target)
    first, second = target.read_text(encoding="utf-8").splitlines()
    assert first == whole
    # Kept neighbours keep their ", "; the dropped orphan is closed over with a ",".
    pair = json.dumps([user, answer])[1:-1]
    assert second == '{"id": 2, "messages": [' + pair + "," + pair + "]}"


def test_bad_lines_go_to_the_errors_file_and_the_rest_is_written(tmp_path: Path) -> None:
    good = json.dumps([{"role": "user", "content": "hi"}])
    lines = [good, "{oops", "", good, '{"messages": [{"role": "user", "content": 3}]}', "   ", good]
    source, target, errors = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "errors.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary = batch.Pipeline([]).run_jsonl(source, target, errors=errors, chunk_bytes=10)
    assert target.read_text(encoding="utf-8").splitlines() == [good, good, good]
    reported = [json.loads(x) for x in errors.read_text(encoding="utf-8").splitlines()]
    assert [(e["line"], e["path"]) for e in reported] == [(2, ""), (5, "messages[0].content")]
    assert "not valid JSON" in reported[0]["reason"]
    assert (summary.conversations, summary.bad, summary.exit_code) == (3, 2, 1)


def test_a_failed_run_leaves_nothing_under_the_output_name(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('[{"role":"user","content":"x"}]\n' * 100, encoding="utf-8")
    target = tmp_path / "out.jsonl"
    calls = []

    def progress(done: int, total: int, records: int) -> None:
        calls.append(records)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        batch.Pipeline([]).run_jsonl(source, target, errors=tmp_path / "e.jsonl", progress=progress, chunk_bytes=64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    with pytest.raises(FileNotFoundError):
        batch.Pipeline([]).run_jsonl(tmp_path / "missing.jsonl", target)
    assert not target.exists()


_MEMORY_SCRIPT = """
import resource, sys
from memci import batch
pipeline = batch.Pipeline([batch.sanitize(), batch.filter(roles=["user", "assistant"])], workers=2)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
summary = pipeline.run_jsonl(sys.argv[1], sys.argv[2], chunk_bytes=1 << 20)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(summary.conversations, (after - before) * 1024)
"""


def test_memory_stays_bounded_on_a_file_many_times_the_chunk(tmp_path: Path) -> None:
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    messages = [{"role": "user", "content": "q " * 200}, {"role": "assistant", "content": "a " * 200}] * 10
    line = json.dumps(messages, separators=(",", ":"))
    count = (40 << 20) // len(line)  # a 40 MB file, 40 chunks of 1 MB
    with source.open("w", encoding="utf-8") as f:
        for _ in range(count):
            f.write(line + "\n")
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(source), str(target)], capture_output=True, text=True, check=True
    )
    conversations, grown = map(int, out.stdout.split())
    assert conversations == count
    assert target.stat().st_size == source.stat().st_size
    # Reading the whole file would grow the peak by more than 40 MB; a few chunks stay far below.
    assert grown < 16 << 20, grown


def test_an_object_record_keeps_its_keys_when_every_message_goes(tmp_path: Path) -> None:
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(
        '{"messages": [{"role": "tool", "tool_call_id": "x", "content": "o"}], "k": 1}\n', encoding="utf-8"
    )
    batch.Pipeline([ops.Sanitize()]).run_jsonl(source, target)
    assert target.read_text(encoding="utf-8") == '{"messages": [], "k": 1}\n'
