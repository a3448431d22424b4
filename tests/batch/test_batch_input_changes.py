"""Batch never loses a record silently (docs/batch.md, "Files"): an input that changes while a run
reads it (cut short, grown, rewritten, replaced) ends the run with an error naming it, exit code 2
from the CLI, and nothing renamed into place; a run that reads its input whole accounts for every
record (records read = conversations + bad + blank).

The change is made at a point of the run, not at a time: the progress callback runs between two
chunks, with the file half read."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from memci import batch
from memci.cli import batch as cli_batch
from memci.cli.main import main
from memci.errors import StorageError

RECORD = json.dumps([{"role": "user", "content": "question " * 20}, {"role": "assistant", "content": "answer"}])
RECORDS = 400


def write_source(tmp_path: Path, records: int = RECORDS) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text((RECORD + "\n") * records, encoding="utf-8")
    return path


def cut_short(path: Path) -> None:
    """Truncate the file mid-line, as a writer rewriting it in place would."""
    os.truncate(path, path.stat().st_size // 2 + 7)


def grown(path: Path) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write((RECORD + "\n") * 10)


def rewritten(path: Path) -> None:
    """The same size, other bytes, a later modification time."""
    data = path.read_bytes().replace(b"question", b"QUESTION")
    path.write_bytes(data)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def replaced(path: Path) -> None:
    """Another file renamed into its place (the run goes on reading the one it opened)."""
    other = path.with_name("other.jsonl")
    other.write_bytes(path.read_bytes())
    os.replace(other, path)


CHANGES: dict[str, Callable[[Path], None]] = {
    "cut short": cut_short,
    "grown": grown,
    "rewritten": rewritten,
    "replaced": replaced,
}


def once(change: Callable[[Path], None], path: Path) -> Callable[[int, int, int], None]:
    """A progress callback that changes ``path`` the first time it is called (after one chunk)."""
    done: list[bool] = []

    def progress(read: int, total: int, records: int) -> None:
        if not done:
            done.append(True)
            assert read < total  # the run is under way, not over
            change(path)

    return progress


@pytest.mark.parametrize("name", CHANGES)
def test_an_input_changed_under_the_run_is_an_error_and_nothing_is_renamed(tmp_path: Path, name: str) -> None:
    source = write_source(tmp_path)
    out, errors = tmp_path / "out.jsonl", tmp_path / "errors.jsonl"
    out.write_text("the previous output\n")
    pipeline = batch.Pipeline([batch.sanitize()], workers=1)
    with pytest.raises(StorageError, match="changed while the run read it") as raised:
        pipeline.run_jsonl(source, out, errors=errors, progress=once(CHANGES[name], source), chunk_bytes=4096)
    assert raised.value.where == str(source)
    assert str(source) in str(raised.value)
    assert out.read_text() == "the previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


@contextmanager
def progress_that(change: Callable[[Path], None], path: Path) -> Iterator[Callable[[int, int, int], None]]:
    yield once(change, path)


def test_the_cli_exits_two_on_an_input_truncated_mid_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Four chunks of the CLI's 4 MiB: the first step reads two.
    source = write_source(tmp_path, records=(16 << 20) // len(RECORD))
    out = tmp_path / "out.jsonl"
    # The CLI's progress bar is the run's callback: it truncates the input after the first chunk.
    monkeypatch.setattr(cli_batch, "_progress", lambda enabled, label: progress_that(cut_short, source))
    code = main(["batch", str(source), str(out), "--sanitize", "--errors", str(tmp_path / "bad.jsonl")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{source} changed while the run read it" in err
    assert "nothing was written to" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_every_record_read_is_accounted_for(tmp_path: Path) -> None:
    source, out, errors = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "errors.jsonl"
    lines = []
    for i in range(300):
        lines.append(RECORD if i % 7 else "{not json")
        if i % 11 == 0:
            lines.append("   ")
    source.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    summary = batch.Pipeline([batch.sanitize()]).run_jsonl(source, out, errors=errors, chunk_bytes=1000)
    assert summary.records == len(lines) + 1  # the empty last line too
    assert summary.records == summary.conversations + summary.bad + summary.blank
    assert summary.bad == len(errors.read_text().splitlines()) == sum(1 for line in lines if line == "{not json")
    assert summary.conversations == len(out.read_text().splitlines())
    assert summary.bytes_in == source.stat().st_size


def test_iterable_runs_account_for_every_record() -> None:
    results = batch.Pipeline([]).run_records([RECORD, "{not json", RECORD.encode(), 5], chunk_size=3)  # type: ignore[list-item]
    outputs = list(results)
    summary = results.summary
    assert (summary.records, summary.conversations, summary.bad, summary.blank) == (4, 2, 2, 0)
    assert len(outputs) == 2
