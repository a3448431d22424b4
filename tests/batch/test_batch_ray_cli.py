"""``memci batch --ray local``: the CLI starts a local Ray of two CPUs, runs a JSONL file and a
Parquet file through the BatchMapper on it, stops it, and writes what the local pipeline writes.
Run as a child process (a Ray of its own, bounded in time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from batch_helpers import reference
from memci import batch
from tool_histories import ANTHROPIC, OPENAI

pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

pytestmark = pytest.mark.ray

STEPS = [batch.sanitize(), batch.trim_to_tokens(60, keep_system=False)]


def dataset(n: int) -> list[list[dict[str, object]]]:
    out = []
    for i in range(n):
        fmt = OPENAI if i % 2 else ANTHROPIC
        conversation = [fmt.user(f"q{i} " * (i % 9)), fmt.calls(f"c{i}")]
        if i % 4:
            conversation += fmt.results(f"c{i}")
        out.append([*conversation, fmt.reply("done " * (i % 30))])
    return out


def run_cli(source: Path, target: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "memci", "batch", str(source), str(target), "--ray", "local", "--workers", "2"]
    command += ["--sanitize", "--max-tokens", "60", *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)


def test_jsonl_and_parquet_on_a_local_ray_match_the_local_pipeline(tmp_path: Path) -> None:
    data = dataset(24)
    expected = [reference(c, STEPS)[0] for c in data]
    assert any(len(e) < len(c) for e, c in zip(expected, data, strict=True))
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [json.dumps({"id": i, "messages": c}) for i, c in enumerate(data)]
    lines.insert(5, json.dumps({"id": "bad", "messages": [{"role": "robot", "content": "x"}]}))
    source.write_text("".join(line + "\n" for line in lines), "utf-8")
    done = run_cli(source, target, "--errors", str(tmp_path / "errors.jsonl"))
    assert done.returncode == 1, done.stderr  # some records bad
    rows = [[cell.strip() for cell in row.split("│")[1:3]] for row in done.stdout.splitlines() if row.startswith("│")]
    summary = dict(rows)
    local = batch.Pipeline([*STEPS, batch.count_tokens()]).run_jsonl(source, tmp_path / "local.jsonl")
    assert summary["conversations"] == "24"
    assert summary["bad records"] == "1"
    assert summary["messages out"] == f"{local.messages_out:,}"
    assert summary["removed by sanitize"] == f"{local.removed['sanitize']:,}"
    assert summary["tokens after"] == f"{local.tokens[0]:,}"
    assert [json.loads(x)["line"] for x in (tmp_path / "errors.jsonl").read_text("utf-8").splitlines()] == [6]
    lines = target.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["id"] for x in lines] == list(range(24))
    assert [json.loads(x)["messages"] for x in lines] == expected
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert (tmp_path / "local.jsonl").read_text("utf-8") == target.read_text("utf-8")
    parquet_in, parquet_out = tmp_path / "in.parquet", tmp_path / "out"
    pq.write_table(pa.table({"id": list(range(24)), "messages": [json.dumps(c) for c in data]}), parquet_in)
    done = run_cli(parquet_in, parquet_out)
    assert done.returncode == 0, done.stderr
    table = pq.read_table(parquet_out).sort_by("id")
    assert [json.loads(x) for x in table.column("messages").to_pylist()] == expected
