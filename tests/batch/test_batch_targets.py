"""Batch output goes where the user pointed, or nowhere (docs/batch.md, "Files"): a symlink's file
gets the output and the link stays; ``-`` is standard output; a FIFO (standing in for a device
such as /dev/null, which a test must never risk replacing) is written to and stays a FIFO; a
directory is refused; no run, failed or not, leaves a ``.partial`` file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from memci import batch
from memci.cli.main import main
from memci.errors import InvalidOperationError

LINES = [
    json.dumps([{"role": "user", "content": f"question {i}"}, {"role": "tool", "tool_call_id": "x", "content": "o"}])
    for i in range(40)
]
#: What a sanitize run writes for LINES (the orphan tool result dropped), and the bad line's error.
EXPECTED = b"".join(json.dumps([{"role": "user", "content": f"question {i}"}]).encode() + b"\n" for i in range(40))


def source(tmp_path: Path, bad: bool = False) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([*LINES, "{broken"] if bad else LINES) + "\n", encoding="utf-8")
    return path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".partial" in p.name)


@contextmanager
def fifo_reader(path: Path) -> Iterator[list[bytes]]:
    """A FIFO at ``path`` and a thread reading it to its end; what it read is in the list after."""
    os.mkfifo(path)
    got: list[bytes] = []

    def read() -> None:
        with path.open("rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        yield got
    finally:
        if reader.is_alive():  # the run never opened it: open it once so the reader ends
            with path.open("wb"):
                pass
        reader.join()


def test_a_symlink_to_a_file_is_followed_and_stays_a_symlink(tmp_path: Path) -> None:
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    real.write_text("old\n")
    link.symlink_to(real.name)
    batch.Pipeline([batch.sanitize()]).run_jsonl(source(tmp_path), link)
    assert link.is_symlink()
    assert real.read_bytes() == EXPECTED
    assert leftovers(tmp_path) == []


def test_a_dangling_symlink_creates_the_file_it_names(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.jsonl"
    link.symlink_to(Path("sub") / "new.jsonl")
    batch.Pipeline([batch.sanitize()]).run_jsonl(source(tmp_path), link, errors=tmp_path / "errors.jsonl")
    assert link.is_symlink()
    assert (tmp_path / "sub" / "new.jsonl").read_bytes() == EXPECTED


def test_a_fifo_is_streamed_to_and_never_replaced(tmp_path: Path) -> None:
    out, errors = tmp_path / "out.fifo", tmp_path / "errors.fifo"
    with fifo_reader(out) as got, fifo_reader(errors) as bad:
        summary = batch.Pipeline([batch.sanitize()]).run_jsonl(source(tmp_path, bad=True), out, errors=errors)
    assert (summary.conversations, summary.bad) == (40, 1)
    assert got == [EXPECTED]
    assert [json.loads(line)["line"] for line in bad[0].splitlines()] == [41]
    assert stat.S_ISFIFO(out.stat().st_mode)
    assert stat.S_ISFIFO(errors.stat().st_mode)
    assert leftovers(tmp_path) == []


def test_a_symlink_to_a_fifo_is_streamed_to(tmp_path: Path) -> None:
    fifo, link = tmp_path / "sink.fifo", tmp_path / "null"
    with fifo_reader(fifo) as got:
        link.symlink_to(fifo)
        assert main(["batch", str(source(tmp_path)), str(link), "--sanitize", "--quiet"]) == 0
    assert got == [EXPECTED]
    assert link.is_symlink()
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_dash_is_standard_output_and_the_summary_goes_to_stderr(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "memci", "batch", str(source(tmp_path)), "-", "--sanitize", "--workers", "2"],
        capture_output=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == EXPECTED
    assert b"conversations" in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_dash_from_the_api_follows_what_python_printed(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    print("before", end="\n")
    batch.Pipeline([batch.sanitize()]).run_jsonl(source(tmp_path), "-")
    assert capfd.readouterr().out.encode() == b"before\n" + EXPECTED


@pytest.mark.parametrize("where", ["output", "errors"])
def test_a_directory_is_refused_and_nothing_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    out = folder if where == "output" else tmp_path / "out.jsonl"
    args = ["batch", str(source(tmp_path)), str(out), "--quiet"]
    if where == "errors":
        args += ["--errors", str(folder)]
    assert main(args) == 2
    assert "is a directory" in capsys.readouterr().err
    assert list(folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "in.jsonl"]


def test_an_errors_file_that_cannot_be_opened_leaves_no_partial_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["batch", str(source(tmp_path)), str(out), "--errors", str(tmp_path / "no" / "e.jsonl")]) == 2
    assert "No such file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


@pytest.mark.parametrize("same", ["path", "symlink", "dash"])
def test_output_and_errors_on_one_file_are_refused(tmp_path: Path, same: str) -> None:
    out = tmp_path / "out.jsonl"
    errors: str | Path = out
    if same == "symlink":
        errors = tmp_path / "link"
        errors.symlink_to(out.name)
    elif same == "dash":
        out, errors = Path("-"), "-"
    with pytest.raises(InvalidOperationError, match="output and errors"):
        batch.Pipeline([]).run_jsonl(source(tmp_path), out, errors=errors)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "link") == ["in.jsonl"]


def test_parquet_output_follows_the_same_rules(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from memci.batch.arrow import run_parquet

    table = pa.table({"messages": LINES})
    pq.write_table(table, tmp_path / "in.parquet")
    real, link, fifo = tmp_path / "real.parquet", tmp_path / "link.parquet", tmp_path / "out.fifo"
    link.symlink_to(real.name)
    pipeline = batch.Pipeline([batch.sanitize()])
    run_parquet(pipeline, tmp_path / "in.parquet", link)
    assert link.is_symlink()
    written = pq.read_table(real).column("messages").to_pylist()
    with fifo_reader(fifo) as got:
        run_parquet(pipeline, tmp_path / "in.parquet", fifo)
    streamed = tmp_path / "streamed.parquet"
    streamed.write_bytes(got[0])
    assert pq.read_table(streamed).column("messages").to_pylist() == written
    assert [json.loads(m) for m in written] == [json.loads(line) for line in EXPECTED.decode().splitlines()]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert leftovers(tmp_path) == []


def test_a_corrupt_parquet_file_is_exit_code_two_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    good, corrupt, garbage = tmp_path / "good.parquet", tmp_path / "corrupt.parquet", tmp_path / "garbage.parquet"
    pq.write_table(pa.table({"messages": LINES * 50}), good)
    data = bytearray(good.read_bytes())
    data[100:2000] = bytes(1900)  # the column data zeroed, the footer intact
    corrupt.write_bytes(bytes(data))
    garbage.write_bytes(b"not parquet at all")
    for path in (corrupt, garbage):
        assert main(["batch", str(path), str(tmp_path / "out.parquet"), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert f"memci batch: run_parquet: {path}: not a readable Parquet file" in err, err
        assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.parquet", "garbage.parquet", "good.parquet"]
