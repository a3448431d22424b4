"""``memci batch IN OUT``: end to end, exit codes, the summary, and the interrupted-run guarantee
(the CLI killed mid-run leaves nothing under OUT)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import reference
from memci import batch
from memci.cli.main import main
from tool_histories import ANTHROPIC, OPENAI


def dataset(n: int) -> list[list[dict[str, Any]]]:
    out = []
    for i in range(n):
        fmt = OPENAI if i % 2 else ANTHROPIC
        conversation = [fmt.system(), fmt.user(f"question {i} " * 5), fmt.calls(f"c{i}"), *fmt.results(f"c{i}")]
        if i % 3 == 0:  # a broken group: the call is never answered
            conversation += [fmt.calls(f"d{i}"), fmt.user("never mind")]
        conversation.append(fmt.reply("answer " * (i % 7)))
        out.append(conversation)
    return out


def write_jsonl(path: Path, data: list[Any], extra: list[str] = ()) -> None:  # type: ignore[assignment]
    path.write_text("".join(json.dumps(c) + "\n" for c in data) + "".join(x + "\n" for x in extra), encoding="utf-8")


def test_cleans_a_dataset_end_to_end_with_a_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = dataset(30)
    source, target, errors = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "errors.jsonl"
    write_jsonl(source, data, extra=['{"broken": ', '[{"role": "robot", "content": "x"}]'])
    code = main(
        [
            "batch",
            str(source),
            str(target),
            "--sanitize",
            "--max-tokens",
            "40",
            "--count-before",
            "--errors",
            str(errors),
            "--workers",
            "2",
        ]
    )
    assert code == 1  # two bad records
    steps = [batch.count_tokens(), batch.sanitize(), batch.trim_to_tokens(40, keep_system=False), batch.count_tokens()]
    expected = [reference(c, steps) for c in data]
    assert [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()] == [m for m, _ in expected]
    assert [json.loads(x)["line"] for x in errors.read_text(encoding="utf-8").splitlines()] == [31, 32]
    shown = capsys.readouterr().out
    before = sum(c[0] for _, c in expected)
    after = sum(c[1] for _, c in expected)
    for text in [
        "conversations",
        "30",
        "bad records",
        "removed by sanitize",
        "tokens before",
        f"{before:,}",
        "tokens after",
        f"{after:,}",
    ]:
        assert text in shown


def test_roles_and_keep_last_and_exit_zero(tmp_path: Path) -> None:
    data = dataset(5)
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(source, data)
    code = main(["batch", str(source), str(target), "--roles", "user", "assistant", "--keep-last", "2", "--quiet"])
    assert code == 0
    steps = [batch.filter(roles=["user", "assistant"]), batch.truncate(keep_last=2)]
    got = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert got == [reference(c, steps)[0] for c in data]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl", "out.jsonl"], "no such file"),
        (["in.jsonl", "out.jsonl", "--workers", "0"], "--workers must be >= 1"),
        (["in.jsonl", "out.jsonl", "--workers", "257"], "workers must be an int from 1 to 256"),
        (["in.jsonl", "out.jsonl", "--workers", str(2**64)], "workers must be an int from 1 to 256"),
        (["in.jsonl", "out.jsonl", "--max-tokens", "-1"], "--max-tokens"),
        (["in.jsonl", "out.jsonl", "--encoding", "nope", "--max-tokens", "5"], "unknown encoding"),
        (["in.jsonl", "nodir/out.jsonl"], "No such file"),
    ],
)
def test_could_not_run_is_exit_code_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    write_jsonl(tmp_path / "in.jsonl", dataset(2))
    monkeypatch.chdir(tmp_path)
    assert main(["batch", *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_parquet_in_and_out(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    data = dataset(12)
    source, target = tmp_path / "in.parquet", tmp_path / "out.parquet"
    table = pa.table({"id": list(range(12)), "messages": [json.dumps(c) for c in data]})
    pq.write_table(table, source, row_group_size=5)
    assert main(["batch", str(source), str(target), "--sanitize", "--quiet"]) == 0
    out = pq.read_table(target)
    assert out.column("id").to_pylist() == list(range(12))
    steps = [batch.sanitize()]
    assert [json.loads(x) for x in out.column("messages").to_pylist()] == [reference(c, steps)[0] for c in data]


def _start_and_kill(tmp_path: Path, sig: int) -> tuple[Path, subprocess.Popen[bytes]]:
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    line = json.dumps(dataset(1)[0] * 20)
    with source.open("w", encoding="utf-8") as f:
        # 120 MB: about a second of work on one worker of a release build on an idle machine (the
        # signal must land while the run is under way, not after it ends).
        for _ in range((120 << 20) // len(line)):
            f.write(line + "\n")
    # Ctrl-C as at a terminal: a shell starts background jobs with SIGINT ignored, and a child
    # inherits an ignored signal (Python then installs no KeyboardInterrupt handler); a handled
    # one is reset to its default at exec.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memci",
                "batch",
                str(source),
                str(target),
                "--sanitize",
                "--max-tokens",
                "500",
                "--workers",
                "1",
                "--quiet",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 60
    # Wait until the run is under way: its temporary output exists (it is opened once the signal
    # handlers are in place, before the first record is read).
    while time.monotonic() < deadline:
        if any(p.name.startswith(".out.jsonl.partial") for p in tmp_path.iterdir()):
            break
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.communicate(timeout=60)  # waits, and closes the pipe
    return target, proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_no_file_behind(tmp_path: Path, sig: int) -> None:
    target, proc = _start_and_kill(tmp_path, sig)
    assert proc.returncode == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    assert not target.exists()


def test_a_killed_run_leaves_no_half_output(tmp_path: Path) -> None:
    target, _ = _start_and_kill(tmp_path, signal.SIGKILL)
    # Killed outright nothing can clean up, but OUT never holds a partial result.
    assert not target.exists()
