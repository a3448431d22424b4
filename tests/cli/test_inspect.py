"""``memci inspect DB`` (python/memci/cli/inspect.py): what a store holds, read-only."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memci import DirectoryStorage, SqliteStorage, StorageError
from memci.cli.inspect import inspect_store
from memci.cli.main import main
from rich.console import Console

STATE = {
    "version": 1,
    "round": 41,
    "pages": [{"index": 9, "messages": [{"role": "user", "content": "the open page's question"}]}],
    "contents": [
        {
            "index": 7,
            "summary": "asked about 東京 weather",
            "entry_summaries": ["user: 東京?", "tool: 21°C"],
            "recall_count": 2,
            "last_recall_round": 39,
            "archived_round": 30,
        }
    ],
    "dropped": [
        {"index": 2, "recall_count": 0, "last_recall_round": 5, "archived_round": 5, "dropped_round": 15, "rule": "m"}
    ],
}


def stored_page(index: int) -> dict[str, Any]:
    return {
        "index": index,
        "messages": [
            {"role": "user", "content": f"question number {index}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "匹配 3 行"},
        ],
        "summary": f"summary of page {index}",
        "entry_summaries": ["user: question", "assistant: grep", "tool: 匹配"],
        "archived_round": index + 1,
    }


@pytest.fixture(params=["sqlite", "directory"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / ("memci.db" if request.param == "sqlite" else "store")
    with SqliteStorage(path) if request.param == "sqlite" else DirectoryStorage(path) as store:
        for index in range(1, 9):
            store.put_page(index, stored_page(index))
        store.save_state(STATE)
    return path


def shown(path: Path, **options: Any) -> tuple[int, str]:
    out = io.StringIO()
    status = inspect_store(path, console=Console(file=out, width=200), **options)
    return status, out.getvalue()


def test_it_shows_the_state_contents_dropped_and_active_pages(db: Path) -> None:
    status, text = shown(db)
    assert status == 0
    assert "8 stored pages (1..8)" in text
    assert "round" in text
    assert "41" in text
    assert "Contents page: 1 entry" in text
    assert "asked about 東京 weather" in text
    assert "user: 東京? | tool: 21°C" in text
    assert "Dropped from the contents page: 1" in text
    assert "Active pages: 1" in text
    assert "the open page's question" in text


def test_it_shows_dropped_entries_written_as_rows(tmp_path: Path) -> None:
    with SqliteStorage(tmp_path / "memci.db") as store:
        store.save_state({**STATE, "dropped": "2,0,5,5,15,unrecalled;3,1,9,6,17,lru"})
    _, text = shown(tmp_path / "memci.db")
    assert "Dropped from the contents page: 2" in text
    assert "unrecalled" in text
    assert "lru" in text


def test_it_lists_the_most_recent_stored_pages(db: Path) -> None:
    _, text = shown(db, limit=3)
    assert "Stored pages: 8 (the last 3" in text
    for index in (6, 7, 8):
        assert f"summary of page {index}" in text
    assert "summary of page 5" not in text
    assert "user 1, assistant 1, tool 1" in text
    _, everything = shown(db, limit=100)
    assert all(f"summary of page {i}" in everything for i in range(1, 9))


def test_page_shows_one_page_whole(db: Path) -> None:
    status, text = shown(db, page=4)
    assert status == 0
    assert "Page 4, archived in round 5: summary of page 4" in text
    for part in ("question number 4", "grep({})", "匹配 3 行", "assistant: grep"):
        assert part in text
    status, text = shown(db, page=99)
    assert status == 1
    assert "no stored page 99 (stored: 1..8)" in text


def test_a_page_that_is_not_an_archived_page_is_shown_as_it_is(tmp_path: Path) -> None:
    with DirectoryStorage(tmp_path / "store") as store:  # a store checks only a page's index
        store.put_page(1, {"index": 1, "messages": [{"role": "user", "content": "hi"}], "entry_summaries": [3]})
        store.put_page(2, {"index": 2, "summary": {"not": "text"}, "entry_summaries": "abc"})
    status, text = shown(tmp_path / "store", page=1)
    assert status == 0
    assert "hi" in text
    status, text = shown(tmp_path / "store", page=2)
    assert status == 0
    assert '{"not": "text"}' in text


def test_a_store_without_state_says_so(tmp_path: Path) -> None:
    SqliteStorage(tmp_path / "empty.db").close()
    status, text = shown(tmp_path / "empty.db")
    assert status == 0
    assert "0 stored pages (none)" in text
    assert "No saved state." in text


def _files(root: Path) -> dict[str, bytes]:
    """Every file's bytes, but SQLite's shared-memory index and an empty write-ahead log (which
    SQLite makes to read a WAL database, even read-only)."""
    return {
        str(p): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith("-shm") and not (p.name.endswith("-wal") and p.stat().st_size == 0)
    }


def test_it_never_writes(db: Path) -> None:
    before = _files(db.parent)
    shown(db)
    shown(db, page=3)
    assert _files(db.parent) == before


def test_what_is_not_a_store_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such file or folder"):
        shown(tmp_path / "missing")
    (tmp_path / "notes.txt").write_text("hello " * 1000, encoding="utf-8")
    with pytest.raises(StorageError, match="not a memci"):
        shown(tmp_path / "notes.txt")
    (tmp_path / "folder").mkdir()
    with pytest.raises(StorageError, match="not a memci directory store"):
        shown(tmp_path / "folder")


def test_the_command_line(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(db), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "summary of page 8" in out
    assert "summary of page 7" not in out
    assert main(["inspect", str(db.parent / "missing")]) == 1
    assert "memci inspect:" in capsys.readouterr().err
    assert main(["inspect", str(db), "--limit", "-1"]) == 2
    with pytest.raises(SystemExit):
        main([])
    with pytest.raises(SystemExit):
        main(["inspect"])


def test_python_dash_m_memci_inspect(db: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memci", "inspect", str(db), "--page", "2"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "question number 2" in done.stdout


@pytest.mark.parametrize("text", ["a [/] b", "[link=https://example.com]click[/link]", "[bold red]loud[/]", "\\[x]"])
def test_stored_text_is_shown_as_it_is_never_as_markup(tmp_path: Path, text: str) -> None:
    path = tmp_path / "markup.db"
    page = {**stored_page(1), "summary": text}
    page["messages"] = [{"role": "user", "content": text}]
    page["entry_summaries"] = [text]
    with SqliteStorage(path) as store:
        store.put_page(1, page)
        store.save_state({**STATE, "note": text})
    for options in ({}, {"page": 1}):
        status, out = shown(path, **options)
        assert status == 0
        assert text in out


#: What a stored message could make a terminal do: retitle its window (OSC ... BEL), clear the
#: screen, hide the text after it, move the cursor by a C1 CSI, reorder what follows.
HOSTILE = ["\x1b]0;owned\x07", "\x1b[2J\x1b[H", "\x1b[8mhidden\x1b[0m", "\x9b31m", "ring\x07", "\u202eevil"]


def _hostile_store(tmp_path: Path) -> Path:
    path = tmp_path / "escapes.db"
    text = " ".join(HOSTILE)
    page = {**stored_page(1), "summary": text, "entry_summaries": [text]}
    page["messages"] = [
        {"role": "user\x1b[8m", "content": text},
        {"role": "assistant", "content": [{"type": "text", "text": text}]},
    ]
    state = {**STATE, "note\x1b]2;title\x07": text, "contents": [{**STATE["contents"][0], "summary": text}]}
    with SqliteStorage(path) as store:
        store.put_page(1, page)
        store.save_state(state)
    return path


@pytest.mark.parametrize("options", [[], ["--page", "1"]])
@pytest.mark.parametrize("term", ["dumb", "xterm-256color"])
def test_control_characters_are_shown_escaped_never_sent_to_the_terminal(
    tmp_path: Path, options: list[str], term: str
) -> None:
    path = _hostile_store(tmp_path)
    env = {**os.environ, "TERM": term, "COLUMNS": "300"}
    done = subprocess.run(
        [sys.executable, "-m", "memci", "inspect", str(path), *options], capture_output=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in done.stdout
    assert b"\x07" not in done.stdout
    assert "\x9b".encode() not in done.stdout
    assert "\u202e".encode() not in done.stdout
    assert b"\\x1b]0;owned\\x07" in done.stdout
    assert b"\\u202eevil" in done.stdout


def test_on_a_colour_terminal_only_rich_styles_are_escapes(tmp_path: Path) -> None:
    path = _hostile_store(tmp_path)
    for options in ({}, {"page": 1}):
        out = io.StringIO()
        inspect_store(path, console=Console(file=out, width=300, force_terminal=True), **options)
        text = out.getvalue()
        assert "\x1b[" in text  # the console does style its output
        for sequence in HOSTILE:
            assert sequence not in text
        assert "\x07" not in text
        assert "\x1b]" not in text
        assert "\x1b[8m" not in text
        assert "\x1b[2J" not in text


def test_an_error_naming_a_hostile_path_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "gone\x1b]0;x\x07")]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert "\x07" not in err
    assert "gone\\x1b]0;x\\x07" in err
