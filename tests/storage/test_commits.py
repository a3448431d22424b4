"""A save is one atomic commit (docs/storage.md, "Saves, revisions and crashes"): its pages and the
state land together, a versioned save over a newer revision is a ConflictError that writes nothing,
committed pages are written once, and orphans of a run that died before its save are replaced."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from memci import ConflictError, RedisStorage, SqliteStorage, StorageError
from memci.storage.json_store import JsonStore
from memci.storage.sqlite import SCHEMA_VERSION


def page(index: int, text: str = "q") -> dict[str, Any]:
    return {
        "index": index,
        "messages": [{"role": "user", "content": f"{text} {index}"}],
        "summary": f"{text} {index}",
        "entry_summaries": [f"user: {text}"],
        "archived_round": index,
    }


def state(revision: int | None, pages_through: int = 0, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"version": 1, "pages_through": pages_through, **extra}
    if revision is not None:
        out["revision"] = revision
    return out


def test_a_save_writes_its_pages_and_the_state_together(store: JsonStore) -> None:
    store.save_state(state(1, 2, round=1), [page(2), page(1)])
    assert store.page_indices() == [1, 2]
    assert store.get_page(2) == page(2)
    assert store.load_state() == state(1, 2, round=1)


def test_a_save_over_a_newer_revision_is_a_conflict_that_writes_nothing(store: JsonStore) -> None:
    store.save_state(state(1, 1, who="a"), [page(1, "a")])
    store.save_state(state(2, 1, who="a"))
    with pytest.raises(ConflictError, match="holds revision 2") as caught:
        store.save_state(state(2, 2, who="b"), [page(2, "b")])
    assert (caught.value.revision, caught.value.stored_revision) == (2, 2)
    assert isinstance(caught.value, StorageError)
    assert store.load_state() == state(2, 1, who="a")
    assert store.page_indices() == [1]
    store.save_state(state(3, 2, who="b"), [page(2, "b")])  # after reloading: the next revision
    assert store.load_state() == state(3, 2, who="b")


def test_a_first_versioned_save_must_be_revision_1(store: JsonStore) -> None:
    with pytest.raises(ConflictError, match="holds revision 0"):
        store.save_state(state(5))
    assert store.load_state() is None


def test_an_unversioned_save_replaces_whatever_is_stored(store: JsonStore) -> None:
    store.save_state(state(1))
    store.save_state(state(2))
    store.save_state(state(None, who="blind"))
    assert store.load_state() == state(None, who="blind")
    store.save_state(state(1))  # a blind state counts as revision 0


def test_a_committed_page_is_written_once(store: JsonStore) -> None:
    store.save_state(state(1, 1), [page(1, "first")])
    store.save_state(state(2, 1), [page(1, "first")])  # the same page again: a no-op
    with pytest.raises(StorageError, match="already stored with other content"):
        store.save_state(state(3, 1), [page(1, "other")])
    assert store.get_page(1) == page(1, "first")
    assert store.load_state() == state(2, 1)


def test_a_committed_page_may_gain_the_vector_it_lacked_and_nothing_else(store: JsonStore) -> None:
    store.save_state(state(1, 2), [page(1), page(2)])
    with_vector = {**page(1), "vector": "AACAPw=="}
    store.save_state(state(2, 2), [with_vector])  # a vector written back for a page stored without
    assert store.get_page(1) == with_vector
    for refused in ({**page(1), "vector": "AAAAQA=="}, {**page(2, "other"), "vector": "AACAPw=="}):
        with pytest.raises(StorageError, match="already stored with other content"):
            store.save_state(state(3, 2), [refused])  # another vector; another text with a vector
    assert (store.get_page(1), store.get_page(2)) == (with_vector, page(2))
    assert store.load_state() == state(2, 2)


def test_a_committed_page_saved_again_with_its_keys_reordered_is_a_no_op(store: JsonStore) -> None:
    store.save_state(state(1, 2), [page(1), page(2)])
    reordered = dict(reversed(page(2).items()))
    store.save_state(state(2, 3), [page(1), reordered, page(3)])  # page 2 the same, page 3 new
    assert store.get_page(2) == page(2)
    assert store.get_page(3) == page(3)
    with pytest.raises(StorageError, match="already stored with other content"):
        store.save_state(state(3, 3), [reordered, page(2, "other")])
    assert store.load_state() == state(2, 3)


def test_an_orphan_above_the_stored_mark_is_replaced(store: JsonStore) -> None:
    store.save_state(state(1, 1), [page(1)])
    store.put_page(2, page(2, "from a run that died before its save"))
    store.save_state(state(2, 2), [page(2, "the run that continued")])
    assert store.get_page(2) == page(2, "the run that continued")
    assert store.get_page(1) == page(1)


def test_a_page_beyond_the_states_mark_is_refused(store: JsonStore) -> None:
    with pytest.raises(StorageError, match="page 3 is saved with it but pages_through is 2"):
        store.save_state(state(1, 2), [page(3)])
    assert store.page_indices() == []
    assert store.load_state() is None


@pytest.mark.parametrize(
    ("bad", "words"),
    [({"revision": 0}, "revision must be an int >= 1"), ({"pages_through": -1}, "pages_through must be an int >= 0")],
)
def test_a_bad_revision_or_mark_is_refused(store: JsonStore, bad: dict[str, Any], words: str) -> None:
    with pytest.raises(StorageError, match=words):
        store.save_state({"version": 1, **bad})
    assert store.load_state() is None


# ---- SQLite -------------------------------------------------------------------------------------


def test_sqlite_namespaces_keep_conversations_apart_in_one_file(tmp_path: Path) -> None:
    path = tmp_path / "many.db"
    with SqliteStorage(path, namespace="a") as a, SqliteStorage(path, namespace="b") as b:
        a.save_state(state(1, 1, who="a"), [page(1, "a")])
        assert b.load_state() is None
        assert b.page_indices() == []
        b.save_state(state(1, 1, who="b"), [page(1, "b")])  # revision 1 of b: no conflict with a
        assert a.get_page(1) == page(1, "a")
        assert b.get_page(1) == page(1, "b")
    with SqliteStorage(path, namespace="a") as again:
        assert again.load_state() == state(1, 1, who="a")


def test_sqlite_upgrades_a_schema_1_file_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    raw.executescript(
        """
        CREATE TABLE memci_schema (version INTEGER NOT NULL);
        INSERT INTO memci_schema VALUES (1);
        CREATE TABLE memci_pages (page_index INTEGER PRIMARY KEY, body TEXT NOT NULL);
        CREATE TABLE memci_state (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL);
        """
    )
    raw.execute("INSERT INTO memci_pages VALUES (1, ?), (2, ?)", (json.dumps(page(1)), json.dumps(page(2))))
    raw.execute("INSERT INTO memci_state VALUES (1, ?)", (json.dumps({"version": 1, "round": 7}),))
    raw.commit()
    raw.close()
    with pytest.raises(StorageError, match="older memci"):
        SqliteStorage(path, read_only=True)
    with SqliteStorage(path) as s:
        assert s.load_state() == {"version": 1, "round": 7}
        assert s.get_page(2) == page(2)
        with pytest.raises(StorageError, match="other content"):  # schema 1's pages count as committed
            s.save_state(state(1, 2), [page(2, "other")])
        s.save_state(state(1, 3), [page(3)])
    assert sqlite3.connect(path).execute("SELECT version FROM memci_schema").fetchall() == [(SCHEMA_VERSION,)]


@pytest.mark.parametrize("name", ["file:x?mode=memory", "file::memory:", ":memory:"])
def test_sqlite_takes_its_argument_as_a_path_always(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.chdir(tmp_path)
    with SqliteStorage(name) as s:
        s.save_state(state(1))
    assert (tmp_path / name).is_file()
    with SqliteStorage(name) as again:
        assert again.load_state() == state(1)


# ---- racing writers -----------------------------------------------------------------------------

RACER = textwrap.dedent(
    """
    import sys
    import memci

    kind, where, prefix, name, cycles = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    store = memci.SqliteStorage(where) if kind == "sqlite" else memci.RedisStorage(where, prefix=prefix)
    conflicts = 0
    for _ in range(cycles):
        while True:
            loaded = store.load_state() or {"version": 1, "items": []}
            revision = loaded.get("revision", 0) + 1
            try:
                store.save_state({**loaded, "revision": revision, "items": [*loaded["items"], name]})
                break
            except memci.ConflictError:
                conflicts += 1
    print(conflicts)
    """
)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_two_processes_saving_over_each_other_lose_no_update(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = str(tmp_path / "race.db") if kind == "sqlite" else request.getfixturevalue("redis_url")
    prefix, cycles = f"race-{uuid.uuid4().hex}:", 100
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, kind, where, prefix, name, str(cycles)], stdout=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    ]
    # A racer exits non-zero on any error but ConflictError, which it answers by reloading.
    outputs = [r.communicate(timeout=120)[0] for r in racers]
    assert [r.returncode for r in racers] == [0, 0], outputs
    store: JsonStore = SqliteStorage(where) if kind == "sqlite" else RedisStorage(where, prefix=prefix)
    with store:
        final = store.load_state()
    assert final is not None
    assert sorted(final["items"]) == ["a"] * cycles + ["b"] * cycles  # every acknowledged save is there
    assert final["revision"] == 2 * cycles


def test_an_int_too_long_to_write_as_json_is_a_storage_error(store: JsonStore) -> None:
    with pytest.raises(StorageError, match=r"state: n is an integer of 16610 bits, too long to write as JSON"):
        store.save_state({"version": 1, "n": 10**5000})
    with pytest.raises(StorageError, match="must be an int >= 1, got a negative integer of 16610 bits"):
        store.save_state({"version": 1, "revision": -(10**5000)})

    class Big(int):  # a subclass is written by json as an int, and refused the same way
        pass

    with pytest.raises(StorageError, match=r"state: n\[0\] is an integer of 16610 bits"):
        store.save_state({"version": 1, "n": [Big(10**5000)]})
    assert store.load_state() is None


# ---- forgetting (ContextSystem.clear(forget=True)) ----------------------------------------------------


def test_a_save_deletes_the_pages_its_state_forgot_in_the_same_commit(opener: Any) -> None:
    store = opener()
    store.save_state(state(1, 3), [page(1), page(2), page(3)])
    store.save_state(state(2, 4, forgotten_through=2), [page(4)])
    assert store.page_indices() == [3, 4]
    assert store.get_page(1) is None
    assert store.get_page(3) == page(3)
    store.save_state(state(3, 4, forgotten_through=2))  # the same mark again: nothing more goes
    assert opener().page_indices() == [3, 4]
    assert opener().load_state() == state(3, 4, forgotten_through=2)


def test_a_forgetting_save_that_conflicts_deletes_nothing(store: JsonStore) -> None:
    store.save_state(state(1, 2), [page(1), page(2)])
    with pytest.raises(ConflictError):
        store.save_state(state(3, 2, forgotten_through=2))
    assert store.page_indices() == [1, 2]


def test_a_forgetting_state_is_checked(store: JsonStore) -> None:
    with pytest.raises(StorageError, match="forgotten_through is 2"):
        store.save_state(state(1, 3, forgotten_through=2), [page(2)])
    with pytest.raises(StorageError, match=r"forgotten_through \(4\) must not be above pages_through \(3\)"):
        store.save_state(state(1, 3, forgotten_through=4))
    with pytest.raises(StorageError, match="forgotten_through must be an int >= 0"):
        store.save_state(state(1, 3, forgotten_through=-1))
    assert store.page_indices() == []
    assert store.load_state() is None
