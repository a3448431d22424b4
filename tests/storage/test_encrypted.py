"""EncryptedStorage (docs/storage.md, "Encryption"): pages and states round-trip through any store
while the store holds only ciphertext; a changed byte, a sealed page moved to another index, or a
changed revision fails to open; keys rotate by id (old keys still open what they sealed, new writes
use the current key); the write-once rule and the revision compare-and-set are the store's."""

from __future__ import annotations

import base64
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from factories import saved_state as state
from factories import stored_page
from memci import ConflictError, ContextSystem, EncryptedStorage, MemoryStorage, SqliteStorage, StorageError
from memci.storage import AsyncEncryptedStorage, AsyncSqliteStorage

pytest.importorskip(
    "cryptography", reason="the cryptography package is not installed (pip install 'memci[encryption]')"
)

KEY, NEW_KEY = os.urandom(32), os.urandom(32)


def page(index: int, text: str = "secret") -> dict[str, Any]:
    return stored_page(index, text)


def raw_rows(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    rows = [body for (body,) in conn.execute("SELECT body FROM memci_pages UNION ALL SELECT body FROM memci_state")]
    conn.close()
    return rows


def test_pages_and_states_round_trip_and_the_store_holds_no_plaintext(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    with EncryptedStorage(SqliteStorage(path), KEY) as store:
        store.save_state(state(1, 2, note="private note"), [page(1), page(2)])
        store.put_page(3, page(3))
        assert store.get_page(1) == page(1)
        assert list(store.get_page(2) or {}) == list(page(2))  # key order kept
        assert store.load_state() == state(1, 2, note="private note")
        assert store.page_indices() == [1, 2, 3]
        assert store.get_page(9) is None
    rows = raw_rows(path)
    assert len(rows) == 4
    assert not any("secret" in row or "東京" in row or "private" in row for row in rows)
    with EncryptedStorage(SqliteStorage(path), KEY) as again:  # another process, the same key
        assert again.get_page(3) == page(3)


def test_the_write_once_rule_and_the_revision_are_the_stores() -> None:
    store = EncryptedStorage(MemoryStorage(), KEY)
    store.put_page(1, page(1))
    store.put_page(1, page(1))  # the same page again: a no-op
    store.put_page(1, dict(reversed(list(page(1).items()))))  # keys in another order: the same page
    with pytest.raises(StorageError, match="already stored with other content"):
        store.put_page(1, page(1, "other"))
    store.save_state(state(1, 1))
    with pytest.raises(ConflictError):
        store.save_state(state(1, 1))
    with pytest.raises(StorageError, match="missing field 'summary'"):  # checked before sealing
        store.put_page(2, {"index": 2, "messages": []})
    assert store.get_page(1) == page(1)


def _stored_record(store: MemoryStorage, index: int | None) -> dict[str, Any]:
    got = store.get_page(index) if index is not None else store.load_state()
    assert got is not None
    return got


@pytest.mark.parametrize("where", ["page", "state"])
def test_a_changed_byte_fails_to_open(where: str) -> None:
    inner = MemoryStorage()
    store = EncryptedStorage(inner, KEY)
    store.save_state(state(1, 1), [page(1)])
    record = _stored_record(inner, 1 if where == "page" else None)
    data = bytearray(base64.b64decode(record["sealed"]["data"]))
    data[-20] ^= 1
    record["sealed"]["data"] = base64.b64encode(bytes(data)).decode()
    tampered = MemoryStorage()
    if where == "page":
        tampered.put_page(1, record)
        with pytest.raises(StorageError, match="page 1: cannot be opened: changed since it was sealed"):
            EncryptedStorage(tampered, KEY).get_page(1)
    else:
        tampered.save_state(record)
        with pytest.raises(StorageError, match="state: cannot be opened"):
            EncryptedStorage(tampered, KEY).load_state()


def test_a_sealed_page_moved_or_a_revision_changed_fails_to_open() -> None:
    inner = MemoryStorage()
    EncryptedStorage(inner, KEY).save_state(state(1, 1), [page(1)])
    moved = MemoryStorage()
    moved.put_page(2, {**_stored_record(inner, 1), "index": 2})
    with pytest.raises(StorageError, match="page 2: cannot be opened"):
        EncryptedStorage(moved, KEY).get_page(2)
    replayed = MemoryStorage()
    replayed.save_state(state(1))
    replayed.save_state({**_stored_record(inner, None), "revision": 2})  # the sealed state, revision 2
    with pytest.raises(StorageError, match="state: cannot be opened"):
        EncryptedStorage(replayed, KEY).load_state()


def test_a_plaintext_store_or_a_wrong_key_is_refused() -> None:
    plain = MemoryStorage()
    plain.put_page(1, page(1))
    with pytest.raises(StorageError, match="page 1: not sealed"):
        EncryptedStorage(plain, KEY).get_page(1)
    inner = MemoryStorage()
    EncryptedStorage(inner, KEY).put_page(1, page(1))
    with pytest.raises(StorageError, match="cannot be opened"):
        EncryptedStorage(inner, NEW_KEY).get_page(1)  # the same id, another key


def test_keys_rotate_by_id(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with EncryptedStorage(SqliteStorage(path), KEY, key_id="2025") as old:
        old.save_state(state(1, 2), [page(1), page(2)])
    with EncryptedStorage(SqliteStorage(path), NEW_KEY, key_id="2026", old_keys={"2025": KEY}) as store:
        assert store.get_page(1) == page(1)  # sealed with the old key, opened with it
        assert store.load_state() == state(1, 2)
        store.save_state(state(2, 3), [page(2), page(3)])  # page 2 again: stored under the old key, a no-op
        store.put_page(1, page(1))
        with pytest.raises(StorageError, match="already stored with other content"):
            store.put_page(1, page(1, "other"))
        inner = store.store
        assert inner.get_page(3)["sealed"]["key"] == "2026"  # new writes: the current key
        assert inner.get_page(2)["sealed"]["key"] == "2025"
        assert inner.load_state()["sealed"]["key"] == "2026"
    with EncryptedStorage(SqliteStorage(path), NEW_KEY, key_id="2026") as forgetful:
        assert forgetful.get_page(3) == page(3)
        with pytest.raises(StorageError, match="sealed with key '2025', which this store was not given"):
            forgetful.get_page(1)


@pytest.mark.parametrize(
    ("key", "options", "words"),
    [
        (b"short", {}, "must be 16, 24 or 32 bytes"),
        ("a str key" * 4, {}, "must be 16, 24 or 32 bytes"),
        (KEY, {"key_id": ""}, "a key id must be a printable str"),
        (KEY, {"key_id": "x" * 100}, "a key id must be a printable str"),
        (KEY, {"old_keys": {"old": b"x"}}, "key 'old' must be 16, 24 or 32 bytes"),
        (KEY, {"old_keys": [KEY]}, "old_keys must be a mapping"),
    ],
)
def test_bad_keys_are_storage_errors(key: Any, options: dict[str, Any], words: str) -> None:
    with pytest.raises(StorageError, match=words):
        EncryptedStorage(MemoryStorage(), key, **options)
    with pytest.raises(StorageError, match="store must be a memci Storage"):
        EncryptedStorage(object(), KEY)


def test_a_context_system_runs_on_an_encrypted_store(tmp_path: Path) -> None:
    path = tmp_path / "ctx.db"
    with EncryptedStorage(SqliteStorage(path), KEY) as store:
        ctx = ContextSystem("sys", active_pages=1, storage=store)
        for n in range(4):
            ctx.add({"role": "user", "content": f"question {n} about zebras"})
            ctx.add({"role": "assistant", "content": f"answer {n}"})
            ctx.end_round()
        ctx.save()
    assert not any("zebras" in row for row in raw_rows(path))
    with EncryptedStorage(SqliteStorage(path), KEY) as store:
        again = ContextSystem.load(store)
        assert again.recall(1).messages()[0]["content"] == "question 0 about zebras"
        assert [hit.page_index for hit in again.search("zebras", k=10)] != []


async def test_the_async_wrapper_seals_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    async with AsyncEncryptedStorage(AsyncSqliteStorage(path), KEY) as store:
        await store.save_state(state(1, 1), [page(1)])
        await store.put_page(1, page(1))
        assert await store.get_page(1) == page(1)
        assert await store.page_indices() == [1]
        with pytest.raises(ConflictError):
            await store.save_state(state(1, 1))
    with EncryptedStorage(SqliteStorage(path), KEY) as sync:  # sync and async wrappers read each other
        assert sync.load_state() == state(1, 1)
    with pytest.raises(StorageError, match="store must be a memci AsyncStorage"):
        AsyncEncryptedStorage(object(), KEY)
