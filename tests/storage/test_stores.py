"""The stores behind the context system (docs/storage.md): the protocol's round trips, the JSON and
write-once rules, corrupt stores, and crash safety (a writer killed mid-save leaves a whole state)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from factories import (
    assert_same,
    calling,
    free_port,
    json_values,
    run_together,
    stored_page,
    tool,
    user,
    valid_messages,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from memci import DirectoryStorage, MemciError, MemoryStorage, RedisStorage, SqliteStorage, Storage, StorageError
from memci.storage.json_store import JsonStore
from memci.storage.sqlite import SCHEMA_VERSION

Page = dict[str, Any]
Opener = Callable[[], JsonStore]


def page(index: int, *, text: str = "hello", archived_round: int = 3, **extra: Any) -> Page:
    """A page as the context system writes it: a user message and the messages it caused."""
    return {
        "index": index,
        "messages": [
            user(f"{text} {index}"),
            calling(),
            tool(content="東京: 21°C 🙂"),
            {"role": "assistant", "content": "done", "metadata": {"n": [1, 2.5, None, True, 10**30]}},
        ],
        "summary": f"user asked {text} {index}",
        "entry_summaries": ["user: q", "assistant: call", "tool: 東京", "assistant: done"],
        "archived_round": archived_round,
        **extra,
    }


# ---- the protocol -------------------------------------------------------------------------------


def test_every_store_satisfies_the_protocol(store: JsonStore) -> None:
    assert isinstance(store, Storage)


def test_a_new_store_is_empty(store: JsonStore) -> None:
    assert store.page_indices() == []
    assert store.get_page(1) is None
    assert store.load_state() is None


def test_a_page_comes_back_exactly_as_written(store: JsonStore) -> None:
    written = page(1)
    store.put_page(1, written)
    assert_same(store.get_page(1), written)


def test_page_indices_are_ascending_whatever_the_write_order(store: JsonStore) -> None:
    for index in (5, 1, 12, 3, 100_000_000_000):
        store.put_page(index, page(index))
    assert store.page_indices() == [1, 3, 5, 12, 100_000_000_000]
    assert store.get_page(2) is None


def test_extra_page_fields_are_kept(store: JsonStore) -> None:
    written = page(2, tokens=812, first_round=4)
    store.put_page(2, written)
    assert_same(store.get_page(2), written)


def test_a_tuple_is_stored_as_a_list(store: JsonStore) -> None:
    written = page(1)
    written["entry_summaries"] = tuple(written["entry_summaries"])
    store.put_page(1, written)
    got = store.get_page(1)
    assert got is not None
    assert got["entry_summaries"] == list(written["entry_summaries"])


def test_the_caller_mutating_its_page_afterwards_changes_nothing_stored(store: JsonStore) -> None:
    written = page(1)
    store.put_page(1, written)
    written["messages"][0]["content"] = "changed"
    written["summary"] = "changed"
    got = store.get_page(1)
    assert got is not None
    assert got["messages"][0]["content"] == "hello 1"
    assert got["summary"] == "user asked hello 1"


def test_each_read_is_a_new_dict(store: JsonStore) -> None:
    store.put_page(1, page(1))
    first = store.get_page(1)
    assert first is not None
    first["messages"].clear()
    assert store.get_page(1) == page(1)


def test_the_state_round_trips_and_is_replaced_whole(store: JsonStore) -> None:
    first = {"version": 1, "round": 4, "contents": [{"index": 1, "summary": "天气"}], "open_page": None}
    store.save_state(first)
    assert_same(store.load_state(), first)
    second = {"version": 1, "round": 5}
    store.save_state(second)
    assert_same(store.load_state(), second)
    second["round"] = 99
    assert store.load_state() == {"version": 1, "round": 5}


@pytest.mark.parametrize("kind", ["sqlite", "directory", "redis", "postgres"])
def test_pages_and_state_survive_reopening(opener: Opener) -> None:
    first = opener()
    first.put_page(1, page(1))
    first.put_page(2, page(2))
    first.save_state({"version": 1, "round": 7})
    first.close()
    with opener() as again:
        assert again.page_indices() == [1, 2]
        assert_same(again.get_page(2), page(2))
        assert again.load_state() == {"version": 1, "round": 7}


# ---- write once ---------------------------------------------------------------------------------


def test_writing_the_same_page_again_is_a_no_op(store: JsonStore) -> None:
    store.put_page(1, page(1))
    reordered = dict(reversed(list(page(1).items())))
    store.put_page(1, page(1))
    store.put_page(1, reordered)
    assert store.page_indices() == [1]
    assert_same(store.get_page(1), page(1))


@pytest.mark.parametrize(
    "other",
    [
        page(1, text="other", note=1.0),
        page(1, archived_round=4, note=1.0),
        page(1, note=1.0, extra=True),
        page(1, note=1),
        page(1, note=True),
    ],
    ids=["text", "round", "extra-field", "1", "True"],
)
def test_a_page_written_twice_with_other_content_is_refused(store: JsonStore, other: Page) -> None:
    store.put_page(1, page(1, note=1.0))
    with pytest.raises(StorageError, match=r"page 1.*already stored with other content"):
        store.put_page(1, other)
    assert_same(store.get_page(1), page(1, note=1.0))


# ---- what is refused, and leaves the store as it was --------------------------------------------


@pytest.mark.parametrize(
    "index", [0, -1, True, 1.0, "1", None, 2**64 * -1, 2**63, pytest.param(10**5000, id="10**5000")]
)
def test_a_page_index_must_be_an_int_from_1_to_2_to_the_63(store: JsonStore, index: Any) -> None:
    with pytest.raises(StorageError, match="an int from 1 to 2"):
        store.put_page(index, page(1))
    with pytest.raises(StorageError, match="an int from 1 to 2"):
        store.get_page(index)
    assert store.page_indices() == []


BAD_PAGES: list[tuple[Any, str]] = [
    ("not a page", "must be a dict"),
    ({k: v for k, v in page(1).items() if k != "index"}, "missing field 'index'"),
    ({**page(1), "index": 2}, "says index 2, not 1"),
    ({**page(1), "index": True}, "says index True, not 1"),
    ({**page(1), "messages": [user("x", when=object())]}, r"page 1: messages\[0\]\.when is a object"),
    ({**page(1), "messages": [user("x", tags={"a"})]}, r"messages\[0\]\.tags is a set"),
    ({**page(1), "messages": [user(b"bytes")]}, r"messages\[0\]\.content is a bytes"),
    ({**page(1), "messages": [user("x", meta={1: "one"})]}, r"messages\[0\]\.meta has a key 1"),
    ({**page(1), "messages": [user("x", score=float("nan"))]}, r"messages\[0\]\.score is nan"),
    ({**page(1), "messages": [user("x", score=float("-inf"))]}, r"messages\[0\]\.score is -inf"),
    ({**page(1), 7: "seven"}, "key 7 that is not a string"),
]


@pytest.mark.parametrize(("bad", "words"), BAD_PAGES)
def test_a_bad_page_is_refused_naming_the_place(store: JsonStore, bad: Any, words: str) -> None:
    with pytest.raises(StorageError, match=words) as info:
        store.put_page(1, bad)
    assert isinstance(info.value, MemciError)
    assert isinstance(info.value, ValueError)
    assert info.value.where is not None
    assert store.page_indices() == []
    assert store.get_page(1) is None


def test_a_page_that_holds_itself_is_refused(store: JsonStore) -> None:
    looped = page(1)
    looped["messages"][0]["self"] = looped["messages"][0]
    with pytest.raises(StorageError, match="nested more than"):
        store.put_page(1, looped)
    assert store.page_indices() == []


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ([1, 2], "must be a dict"),
        ({"round": 3}, "missing key 'version'"),
        ({"version": 1, "when": object()}, "state: when is a object"),
        ({"version": 1, "contents": [{"index": 1, "score": float("inf")}]}, r"contents\[0\]\.score is inf"),
    ],
)
def test_a_bad_state_is_refused_and_the_previous_one_kept(store: JsonStore, state: Any, words: str) -> None:
    store.save_state({"version": 1, "round": 1})
    with pytest.raises(StorageError, match=words):
        store.save_state(state)
    assert store.load_state() == {"version": 1, "round": 1}


def test_a_closed_store_refuses_every_call(store: JsonStore) -> None:
    store.put_page(1, page(1))
    store.close()
    store.close()
    assert store.closed
    for call in (
        lambda: store.put_page(2, page(2)),
        lambda: store.get_page(1),
        store.page_indices,
        lambda: store.save_state({"version": 1}),
        store.load_state,
    ):
        with pytest.raises(StorageError, match="closed"):
            call()


def test_a_store_is_a_context_manager_that_closes(opener: Opener) -> None:
    with opener() as s:
        s.put_page(1, page(1))
    assert s.closed


# ---- properties ---------------------------------------------------------------------------------

json_pages = st.builds(
    lambda messages, summary, entries, rnd, extra: {
        "index": 1,
        "messages": messages,
        "summary": summary,
        "entry_summaries": entries,
        "archived_round": rnd,
        **extra,
    },
    st.lists(valid_messages(), max_size=5),
    st.text(),
    st.lists(st.text(), max_size=5),
    st.integers(min_value=0, max_value=2**63),
    st.dictionaries(st.text(max_size=6).filter(lambda k: k not in ("index", "summary")), json_values, max_size=3),
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(written=json_pages, state=st.dictionaries(st.text(max_size=6), json_values, max_size=4))
def test_any_json_page_and_state_round_trip_exactly(store: JsonStore, written: Page, state: dict[str, Any]) -> None:
    index = 1 + max(store.page_indices(), default=0)
    written["index"] = index
    store.put_page(index, written)
    assert_same(store.get_page(index), written)
    state = {"version": 1, **state}
    store.save_state(state)
    assert_same(store.load_state(), state)


class StoreModel(RuleBasedStateMachine):
    """Any sequence of writes, reads, refusals and reopenings leaves a store holding what a dict of
    pages and one state say it should. Subclasses say which store; fsyncs are off (semantics only)."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        self.store = self.open()
        self.pages: dict[int, Page] = {}
        self.state: dict[str, Any] | None = None

    def open(self) -> JsonStore:
        raise NotImplementedError

    @rule(index=st.integers(1, 6), text=st.sampled_from(["a", "b", "天气"]))
    def put(self, index: int, text: str) -> None:
        written = page(index, text=text)
        if index in self.pages and self.pages[index] != written:
            with pytest.raises(StorageError, match="already stored"):
                self.store.put_page(index, written)
        else:
            self.store.put_page(index, written)
            self.pages[index] = written

    @rule(bad=st.sampled_from(BAD_PAGES))
    def put_bad(self, bad: tuple[Any, str]) -> None:
        with pytest.raises(StorageError, match=bad[1]):
            self.store.put_page(1, bad[0])

    @rule(index=st.integers(1, 7))
    def get(self, index: int) -> None:
        got = self.store.get_page(index)
        if index in self.pages:
            assert_same(got, self.pages[index])
        else:
            assert got is None

    @rule(state=st.dictionaries(st.text(max_size=4), json_values, max_size=3))
    def save(self, state: dict[str, Any]) -> None:
        state = {**state, "version": 1}
        self.store.save_state(state)
        self.state = state

    @rule()
    def load(self) -> None:
        got = self.store.load_state()
        if self.state is None:
            assert got is None
        else:
            assert_same(got, self.state)

    @precondition(lambda self: not isinstance(self.store, MemoryStorage))
    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = self.open()

    @invariant()
    def indices(self) -> None:
        assert self.store.page_indices() == sorted(self.pages)

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class MemoryModel(StoreModel):
    def open(self) -> JsonStore:
        return MemoryStorage()


class SqliteModel(StoreModel):
    def open(self) -> JsonStore:
        return SqliteStorage(self.folder / "memci.db", synchronous="NORMAL")


class DirectoryModel(StoreModel):
    def open(self) -> JsonStore:
        return DirectoryStorage(self.folder / "store", fsync=False)


TestMemoryModel = MemoryModel.TestCase
TestSqliteModel = SqliteModel.TestCase
TestDirectoryModel = DirectoryModel.TestCase
for _case in (TestMemoryModel, TestSqliteModel, TestDirectoryModel):
    _case.settings = settings(max_examples=30, stateful_step_count=25)


def test_threads_writing_distinct_pages_all_land(store: JsonStore) -> None:
    def writer(start: int) -> None:
        for index in range(start, 200, 4):
            store.put_page(index, page(index))
            store.save_state({"version": 1, "last": index})

    run_together(*(lambda s=s: writer(s) for s in (1, 2, 3, 4)))
    assert store.page_indices() == list(range(1, 200))
    assert all(store.get_page(i) == page(i) for i in (1, 77, 199))
    state = store.load_state()
    assert state is not None
    assert state["last"] in range(1, 200)


# ---- SQLite: the file ---------------------------------------------------------------------------


def test_sqlite_uses_wal_and_a_schema_version_table(tmp_path: Path) -> None:
    path = tmp_path / "memci.db"
    with SqliteStorage(path) as s:
        s.put_page(1, page(1))
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("SELECT version FROM memci_schema").fetchall() == [(SCHEMA_VERSION,)]
    (body,) = raw.execute("SELECT body FROM memci_pages WHERE page_index = 1").fetchone()
    raw.close()
    assert json.loads(body) == page(1)
    assert "東京" in body  # UTF-8 text, not \\u escapes


def test_sqlite_shares_a_file_with_other_tables(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE app (x)")
    raw.commit()
    raw.close()
    with SqliteStorage(path) as s:
        s.put_page(1, page(1))
        assert s.page_indices() == [1]


def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database, just some text " * 100)
    with pytest.raises(StorageError, match=r"junk\.db.*not a memci SQLite store"):
        SqliteStorage(path)


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "memci.db"
    SqliteStorage(path).close()
    raw = sqlite3.connect(path)
    raw.execute("UPDATE memci_schema SET version = 99")
    raw.commit()
    raw.close()
    with pytest.raises(StorageError, match="newer memci"):
        SqliteStorage(path)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("{not json", "page 1: corrupt"),
        ('{"messages": []}', "page 1: corrupt: missing field 'index'"),
        ("[]", "must be a dict"),
        (b"\xff\xfe{}", "page 1: corrupt"),
    ],
)
def test_sqlite_reports_a_damaged_page_naming_file_and_page(tmp_path: Path, body: str | bytes, words: str) -> None:
    path = tmp_path / "memci.db"
    with SqliteStorage(path) as s:
        s.put_page(1, page(1))
        s.save_state({"version": 1})
    raw = sqlite3.connect(path)
    raw.execute("UPDATE memci_pages SET body = ? WHERE page_index = 1", (body,))
    raw.execute("UPDATE memci_state SET body = 'NaN'")
    raw.commit()
    raw.close()
    with SqliteStorage(path) as s:
        with pytest.raises(StorageError, match=words) as info:
            s.get_page(1)
        assert str(path) in str(info.value)
        with pytest.raises(StorageError, match="state: corrupt"):
            s.load_state()


def test_sqlite_read_only_reads_and_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "memci.db"
    with SqliteStorage(path) as s:
        s.put_page(1, page(1))
        s.save_state({"version": 1, "round": 2})
        with SqliteStorage(path, read_only=True) as reader:  # while the writer is open (WAL)
            assert reader.page_indices() == [1]
            assert reader.load_state() == {"version": 1, "round": 2}
            with pytest.raises(StorageError, match="read-only"):
                reader.put_page(2, page(2))
            with pytest.raises(StorageError, match="read-only"):
                reader.save_state({"version": 1})
    with pytest.raises(StorageError, match="no such database"):
        SqliteStorage(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(StorageError, match="not a memci store"):
        SqliteStorage(other, read_only=True)


def test_sqlite_two_connections_see_each_others_writes(tmp_path: Path) -> None:
    path = tmp_path / "memci.db"
    with SqliteStorage(path, synchronous="NORMAL") as a, SqliteStorage(path) as b:
        a.put_page(1, page(1))
        b.put_page(2, page(2))
        with pytest.raises(StorageError, match="already stored"):
            b.put_page(1, page(1, text="other"))
        assert a.page_indices() == b.page_indices() == [1, 2]


def test_sqlite_checkpoint_folds_the_log_into_the_file(tmp_path: Path) -> None:
    with SqliteStorage(tmp_path / "memci.db") as s:
        for i in range(1, 20):
            s.put_page(i, page(i))
        before = s.file_bytes()
        s.checkpoint()
        assert (tmp_path / "memci.db-wal").stat().st_size == 0
        assert 0 < s.file_bytes() <= before


# ---- the directory store: the files -------------------------------------------------------------


def test_directory_layout_is_one_json_file_per_page(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with DirectoryStorage(root) as s:
        s.put_page(3, page(3))
        s.save_state({"version": 1})
    assert json.loads((root / "pages" / "00000003.json").read_text(encoding="utf-8")) == page(3)
    stored = json.loads((root / "state.json").read_text(encoding="utf-8"))
    (commit_id,) = stored.pop("memci_commit")  # the trail of ids: of the save that wrote it (docs/storage.md)
    assert len(commit_id) == 24
    assert stored == {"version": 1}
    assert json.loads((root / "memci-store.json").read_text(encoding="utf-8"))["format"] == "memci-directory"


def test_directory_ignores_stray_files_in_pages(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with DirectoryStorage(root) as s:
        s.put_page(3, page(3))
        (root / "pages" / ".00000004.json.abc.tmp").write_text("{half", encoding="utf-8")
        (root / "pages" / "4.json").write_text("{}", encoding="utf-8")
        (root / "pages" / "notes.txt").write_text("x", encoding="utf-8")
        assert s.page_indices() == [3]


def test_directory_refuses_a_folder_of_other_files_and_a_file(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "thesis.tex").write_text("x", encoding="utf-8")
    with pytest.raises(StorageError, match="holds other files"):
        DirectoryStorage(tmp_path / "busy")
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    with pytest.raises(StorageError, match="not a folder"):
        DirectoryStorage(tmp_path / "afile")
    with pytest.raises(StorageError, match="not a memci directory store"):
        DirectoryStorage(tmp_path / "missing", read_only=True)
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("marker", ["{bad", '{"format": "other", "version": 1}', '{"format": "memci-directory"}'])
def test_directory_refuses_a_damaged_marker(tmp_path: Path, marker: str) -> None:
    DirectoryStorage(tmp_path / "store").close()
    (tmp_path / "store" / "memci-store.json").write_text(marker, encoding="utf-8")
    with pytest.raises(StorageError, match="corrupt store marker"):
        DirectoryStorage(tmp_path / "store")


def test_directory_refuses_a_newer_format(tmp_path: Path) -> None:
    DirectoryStorage(tmp_path / "store").close()
    (tmp_path / "store" / "memci-store.json").write_text('{"format": "memci-directory", "version": 9}', "utf-8")
    with pytest.raises(StorageError, match="newer memci"):
        DirectoryStorage(tmp_path / "store")


def test_directory_reports_a_damaged_file_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with DirectoryStorage(root) as s:
        s.put_page(1, page(1))
        (root / "pages" / "00000001.json").write_bytes(b'{"index": 1, "mess')
        (root / "state.json").write_bytes(b"\xff\xfe")
        with pytest.raises(StorageError, match=r"\(page 1\): corrupt") as info:
            s.get_page(1)
        assert str(root / "pages" / "00000001.json") in str(info.value)
        with pytest.raises(StorageError, match=r"state\.json: corrupt"):
            s.load_state()


def test_directory_read_only_never_writes(tmp_path: Path) -> None:
    root = tmp_path / "store"
    DirectoryStorage(root).close()
    with DirectoryStorage(root, read_only=True) as s:
        with pytest.raises(StorageError, match="read-only"):
            s.put_page(1, page(1))
        with pytest.raises(StorageError, match="read-only"):
            s.save_state({"version": 1})
    assert list((root / "pages").iterdir()) == []


def test_directory_a_save_that_fails_half_way_keeps_the_old_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "store"
    with DirectoryStorage(root) as s:
        s.save_state({"version": 1, "round": 1})

        def failing_replace(src: Any, dst: Any) -> None:
            raise OSError("disk gone")

        monkeypatch.setattr(os, "replace", failing_replace)
        with pytest.raises(OSError, match="disk gone"):
            s.save_state({"version": 1, "round": 2})
        monkeypatch.undo()
        assert s.load_state() == {"version": 1, "round": 1}
        assert sorted(p.name for p in root.iterdir()) == [".lock", "memci-store.json", "pages", "state.json"]


# ---- crash safety: a writer killed with SIGKILL in the middle of a save ------------------------

WRITER = textwrap.dedent(
    """
    import sys
    import memci

    kind, path, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = memci.SqliteStorage(path) if kind == "sqlite" else memci.DirectoryStorage(path)
    blob = "天气 and weather " * 20_000
    i = start
    while True:
        i += 1
        print("begin", i, flush=True)
        store.put_page(i, {"index": i, "messages": [{"role": "user", "content": blob}], "summary": str(i),
                           "entry_summaries": [str(i)], "archived_round": i})
        store.save_state({"version": 1, "counter": i, "items": [i] * 5_000, "blob": blob + str(i)})
        print("done", i, flush=True)
    """
)


def _consistent(state: dict[str, Any]) -> int:
    """The state's counter, after checking every part of the state agrees with it."""
    counter = state["counter"]
    assert state["items"] == [counter] * 5_000
    assert state["blob"].endswith(str(counter))
    return int(counter)


@pytest.mark.parametrize("kind", ["sqlite", "directory"])
def test_a_writer_killed_mid_save_leaves_a_complete_previous_state(kind: str, tmp_path: Path) -> None:
    path = tmp_path / ("memci.db" if kind == "sqlite" else "store")
    start = 0
    for kill_after in (2, 5, 3):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, kind, str(path), str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert writer.stdout is not None
        done, begun = start, start
        for line in writer.stdout:
            word, number = line.split()
            if word == "done":
                done = int(number)
            else:
                begun = int(number)
                if begun >= start + kill_after:
                    writer.send_signal(signal.SIGKILL)  # it is now writing page `begun`, then its state
                    break
        writer.wait()
        for line in writer.stdout.read().splitlines():  # it may have finished that save first
            done = max(done, int(line.split()[1]))
        writer.stdout.close()
        assert writer.returncode == -signal.SIGKILL
        with SqliteStorage(path) if kind == "sqlite" else DirectoryStorage(path) as s:
            state = s.load_state()
            assert state is not None
            counter = _consistent(state)
            assert done <= counter <= begun
            indices = s.page_indices()
            assert indices[:counter] == list(range(1, counter + 1))
            for index in indices:
                stored = s.get_page(index)
                assert stored is not None
                assert stored["summary"] == str(index)
        start = counter  # the next writer rewrites page counter + 1 if it is there: same content, a no-op


# ---- Redis: shared by workers -------------------------------------------------------------------


def test_redis_prefixes_keep_agents_apart(redis_url: str) -> None:
    with RedisStorage(redis_url, prefix="agent-a:") as a, RedisStorage(redis_url, prefix="agent-b:") as b:
        a.put_page(1, page(1))
        a.save_state({"version": 1, "who": "a"})
        assert b.page_indices() == []
        assert b.load_state() is None
        b.put_page(1, page(1, text="other"))  # the same index under another prefix is another page
        assert a.get_page(1) == page(1)


def test_redis_workers_racing_on_one_page_store_it_once(redis_url: str) -> None:
    prefix = f"race-{uuid.uuid4().hex}:"
    outcomes: list[str] = []

    def worker(text: str) -> None:
        with RedisStorage(redis_url, prefix=prefix) as store:
            try:
                store.put_page(1, page(1, text=text))
                outcomes.append("stored")
            except StorageError:
                outcomes.append("refused")

    run_together(*(lambda i=i: worker(f"text {i}") for i in range(8)))
    assert sorted(outcomes) == ["refused"] * 7 + ["stored"]
    with RedisStorage(redis_url, prefix=prefix) as store:
        assert store.page_indices() == [1]


def test_redis_leaves_a_client_it_was_given_open(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with RedisStorage(client, prefix=f"client-{uuid.uuid4().hex}:") as store:
        store.put_page(2, page(2))
        assert_same(store.get_page(2), page(2))
    assert client.ping()
    client.close()


def test_redis_refuses_foreign_and_newer_schemas_and_damaged_values(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    client.set("foreign:schema", "not a version")
    with pytest.raises(StorageError, match="not a memci schema version"):
        RedisStorage(redis_url, prefix="foreign:")
    client.set("newer:schema", "7")
    with pytest.raises(StorageError, match="newer memci"):
        RedisStorage(redis_url, prefix="newer:")
    with RedisStorage(redis_url, prefix="damaged:") as store:
        client.hset("damaged:pages", "3", "{oops")
        client.hset("damaged:pages", "x", "{}")
        client.set("damaged:state", "[]")
        assert store.page_indices() == [3]
        with pytest.raises(StorageError, match="page 3: corrupt"):
            store.get_page(3)
        with pytest.raises(StorageError, match="state: corrupt"):
            store.load_state()
    client.close()


def test_redis_unreachable_or_a_bad_url_is_a_storage_error() -> None:
    pytest.importorskip("redis")
    with pytest.raises(StorageError, match="cannot reach Redis"):
        RedisStorage(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(StorageError, match="not a Redis URL"):
        RedisStorage("http://example.com")
    for url in ("redis://memci:s3cret@127.0.0.1:notaport/0", "redis://:s3cret@[::1/0", "x" * 100_000):
        with pytest.raises(StorageError, match="not a Redis URL") as caught:
            RedisStorage(url)
        assert "s3cret" not in str(caught.value)
        assert len(str(caught.value)) < 300


def test_sqlite_two_connections_creating_one_new_file_at_once_both_open(tmp_path: Path) -> None:
    # SQLite answers "database is locked" to the second switch to WAL without waiting: retried.
    for attempt in range(20):
        path = tmp_path / f"new-{attempt}.db"
        opened: list[int] = []

        def open_it(path: Path = path, opened: list[int] = opened) -> None:
            with SqliteStorage(path) as store:
                opened.append(len(store.page_indices()))

        run_together(open_it, open_it)
        assert opened == [0, 0]


def test_get_pages_leaves_the_garbage_collector_as_it_found_it() -> None:
    import gc

    store = MemoryStorage()
    store.save_state({"version": 1, "revision": 1, "pages_through": 2}, [stored_page(1), stored_page(2)])
    assert gc.isenabled()
    assert store.get_pages([1, 2]) == {1: stored_page(1), 2: stored_page(2)}
    assert gc.isenabled()
    gc.disable()
    try:
        assert store.get_pages([2]) == {2: stored_page(2)}
        assert not gc.isenabled()
    finally:
        gc.enable()
    store._pages[2] = "{oops"  # a corrupt page: the error leaves the collector on
    with pytest.raises(StorageError, match="page 2: corrupt"):
        store.get_pages([1, 2])
    assert gc.isenabled()
