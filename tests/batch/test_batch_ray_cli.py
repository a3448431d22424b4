"""``memci batch --ray local``: the CLI starts a local Ray of two CPUs, runs a JSONL file and a
Parquet file through the BatchMapper on it, stops it, and writes what the local pipeline writes.
Run as a child process (a Ray of its own, bounded in time). OUT and --errors go where they point
(``-``, a symlink's file, never a directory); an input changed under the run (from the progress
callback, in this process) exits 2 with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from batch_helpers import RECORD, cut_short, reference
from memci import batch
from memci.cli import batch as cli_batch
from memci.cli.main import main
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


def test_out_on_stdout_and_errors_through_a_symlink(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    lines = [json.dumps({"id": i, "messages": c}) for i, c in enumerate(dataset(12))]
    lines[3:3] = ["", json.dumps({"id": "bad", "messages": [{"role": "robot", "content": "x"}]})]
    source.write_text("".join(line + "\n" for line in lines), "utf-8")
    local = batch.Pipeline([*STEPS, batch.count_tokens()]).run_jsonl(source, tmp_path / "local.jsonl")
    real, link = tmp_path / "real.errors", tmp_path / "link.errors"
    link.symlink_to(real.name)
    done = run_cli(source, Path("-"), "--errors", str(link))
    assert done.returncode == 1, done.stderr
    assert done.stdout == (tmp_path / "local.jsonl").read_text("utf-8")  # the summary is on stderr
    assert f"{local.records:,} ({local.blank:,} blank)" in done.stderr
    assert link.is_symlink()
    assert [json.loads(x)["line"] for x in real.read_text("utf-8").splitlines()] == [5]
    assert [p.name for p in tmp_path.iterdir() if ".partial" in p.name] == []


def test_a_directory_out_exits_two_and_a_fifo_in_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(RECORD + "\n", "utf-8")
    (tmp_path / "out").mkdir()
    done = run_cli(source, tmp_path / "out", "--errors", str(tmp_path / "errors.jsonl"))
    assert done.returncode == 2
    assert "Is a directory" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out"]
    os.mkfifo(tmp_path / "in.fifo")
    done = run_cli(tmp_path / "in.fifo", tmp_path / "out.jsonl")
    assert done.returncode == 2
    assert "not a regular file" in done.stderr


@contextmanager
def cutting(path: Path) -> Iterator[Callable[[int, int, int], None]]:
    """A progress callback that truncates ``path`` mid-line the first time it is called."""
    calls: list[int] = []

    def progress(read: int, total: int, records: int) -> None:
        if not calls:
            cut_short(path)
        calls.append(records)

    yield progress


@pytest.mark.filterwarnings("ignore")  # Ray's own deprecation warnings, in this process
def test_an_input_cut_short_under_a_ray_run_exits_two_with_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text((RECORD + "\n") * 600, "utf-8")
    monkeypatch.setattr(cli_batch, "_progress", lambda enabled, label: cutting(source))
    code = main(["batch", str(source), str(out), "--ray", "local", "--workers", "2", "--sanitize", "--errors", "-"])
    assert code == 2
    assert f"{source} changed while the run read it" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
