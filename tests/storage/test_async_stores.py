"""The async stores (docs/storage.md, "Async"): AsyncSqliteStorage, AsyncRedisStorage and
ThreadedStorage keep the sync protocol's rules (round trips, write-once pages, the revision
compare-and-set, orphans replaced), read and write the same files and keys as their sync siblings,
and refuse bad arguments with a StorageError naming what is wrong."""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from memci import ConflictError, MemoryStorage, RedisStorage, SqliteStorage, StorageError
from memci.storage import (
    AsyncPostgresStorage,
    AsyncRedisStorage,
    AsyncSqliteStorage,
    AsyncStorage,
    DirectoryStorage,
    ThreadedStorage,
)

pytest.importorskip("aiosqlite", reason="the aiosqlite package is not installed (pip install 'memci[async]')")

AsyncOpener = Callable[[], Any]


def page(index: int, text: str = "q") -> dict[str, Any]:
    return {
        "index": index,
        "messages": [{"role": "user", "content": f"{text} {index} 東京 🙂"}, {"role": "assistant", "content": "ok"}],
        "summary": f"{text} {index}",
        "entry_summaries": [f"user: {text}", "assistant: ok"],
        "archived_round": index,
    }


def state(revision: int | None, pages_through: int = 0, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"version": 1, "pages_through": pages_through, **extra}
    if revision is not None:
        out["revision"] = revision
    return out


@pytest.fixture(params=["sqlite", "redis", "postgres", "threaded-sqlite", "threaded-directory"])
def async_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def async_opener(async_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncOpener:
    """Opens the async store of ``async_kind`` at one place (each call a new store object)."""
    if async_kind == "sqlite":
        return lambda: AsyncSqliteStorage(tmp_path / "memci.db")
    if async_kind == "redis":
        url, prefix = request.getfixturevalue("redis_url"), f"test-{uuid.uuid4().hex}:"
        return lambda: AsyncRedisStorage(url, prefix=prefix)
    if async_kind == "postgres":
        dsn, namespace = request.getfixturevalue("postgres_dsn"), f"test-{uuid.uuid4().hex}"
        return lambda: AsyncPostgresStorage(dsn, namespace=namespace, pool_size=2)
    if async_kind == "threaded-sqlite":
        return lambda: ThreadedStorage(SqliteStorage(tmp_path / "memci.db"))
    return lambda: ThreadedStorage(DirectoryStorage(tmp_path / "store"))


@pytest.fixture
async def astore(async_opener: AsyncOpener) -> AsyncIterator[Any]:
    store = async_opener()
    yield store
    await store.close()


async def test_every_async_store_satisfies_the_async_protocol(astore: Any) -> None:
    assert isinstance(astore, AsyncStorage)
    for name in ("put_page", "get_page", "page_indices", "save_state", "load_state", "close"):
        assert inspect.iscoroutinefunction(getattr(astore, name)), name


async def test_round_trips_and_write_once_pages(astore: Any) -> None:
    assert await astore.load_state() is None
    assert await astore.page_indices() == []
    assert await astore.get_page(1) is None
    await astore.put_page(3, page(3))
    await astore.put_page(1, page(1))
    await astore.put_page(1, page(1))  # the same page again: a no-op
    with pytest.raises(StorageError, match=r"page 1\)?: already stored with other content"):
        await astore.put_page(1, page(1, "other"))
    assert await astore.page_indices() == [1, 3]
    got = await astore.get_page(3)
    assert got == page(3)
    got["summary"] = "changed"  # each read is a new dict
    assert (await astore.get_page(3))["summary"] == "q 3"


async def test_a_save_is_a_compare_and_set_that_writes_nothing_on_conflict(astore: Any) -> None:
    await astore.save_state(state(1, 2, who="a"), [page(2), page(1)])
    assert await astore.page_indices() == [1, 2]
    assert await astore.load_state() == state(1, 2, who="a")
    with pytest.raises(ConflictError, match="holds revision 1") as caught:
        await astore.save_state(state(1, 3, who="b"), [page(3)])
    assert (caught.value.revision, caught.value.stored_revision) == (1, 1)
    assert await astore.load_state() == state(1, 2, who="a")
    assert await astore.page_indices() == [1, 2]
    with pytest.raises(StorageError, match="already stored with other content"):
        await astore.save_state(state(2, 2), [page(1, "other")])
    await astore.save_state(state(2, 3, who="b"), [page(3)])
    assert await astore.load_state() == state(2, 3, who="b")


async def test_an_orphan_above_the_mark_is_replaced(astore: Any) -> None:
    await astore.save_state(state(1, 1), [page(1)])
    await astore.put_page(2, page(2, "orphan"))  # a run that died before its save
    await astore.save_state(state(2, 2), [page(2, "kept")])
    assert await astore.get_page(2) == page(2, "kept")


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda s: s.put_page(0, page(1)), "page index must be an int from 1"),
        (lambda s: s.get_page(True), "page index must be an int from 1"),
        (lambda s: s.put_page(2, page(1)), "the page says index 1, not 2"),
        (lambda s: s.save_state({"no": "version"}), "missing key 'version'"),
        (lambda s: s.save_state(state(1, 0), [page(1)]), "page 1 is saved with it but pages_through is 0"),
        (lambda s: s.save_state(state(1, 0, bad=float("nan"))), "bad is nan"),
    ],
)
async def test_bad_arguments_are_storage_errors_naming_the_fault(
    astore: Any, call: Callable[[Any], Any], words: str
) -> None:
    with pytest.raises(StorageError, match=words):
        await call(astore)
    assert await astore.load_state() is None


async def test_a_closed_store_refuses_every_call(async_opener: AsyncOpener) -> None:
    store = async_opener()
    await store.put_page(1, page(1))
    await store.close()
    await store.close()  # twice is fine
    with pytest.raises(StorageError, match="closed"):
        await store.get_page(1)


async def test_two_async_writers_racing_get_one_conflict(async_opener: AsyncOpener) -> None:
    first, second = async_opener(), async_opener()
    try:
        results = await asyncio.gather(
            first.save_state(state(1, 1, who="first"), [page(1, "first")]),
            second.save_state(state(1, 1, who="second"), [page(1, "second")]),
            return_exceptions=True,
        )
        conflicts = [r for r in results if isinstance(r, ConflictError)]
        assert len(conflicts) == 1, results
        assert sum(r is None for r in results) == 1
        winner = (await first.load_state())["who"]
        assert await second.load_state() == state(1, 1, who=winner)
        assert await second.get_page(1) == page(1, winner)
    finally:
        await first.close()
        await second.close()


# ---- sync and async stores on one file or prefix ----------------------------------------------------


async def test_sqlite_sync_and_async_stores_read_each_others_writes(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with SqliteStorage(path, namespace="agent") as sync:
        sync.save_state(state(1, 1, by="sync"), [page(1)])
    async with AsyncSqliteStorage(path, namespace="agent") as store:
        assert await store.load_state() == state(1, 1, by="sync")
        assert await store.get_page(1) == page(1)
        await store.save_state(state(2, 2, by="async"), [page(2)])
        with SqliteStorage(path, namespace="agent") as sync:  # open at the same time
            assert sync.load_state() == state(2, 2, by="async")
            assert sync.page_indices() == [1, 2]
            with pytest.raises(ConflictError):
                sync.save_state(state(2, 2, by="sync, stale"))
        assert await store.load_state() == state(2, 2, by="async")
    async with AsyncSqliteStorage(path) as other:  # another namespace of the same file
        assert await other.load_state() is None
    rows = sqlite3.connect(path).execute("SELECT namespace, page_index FROM memci_pages").fetchall()
    assert sorted(rows) == [("agent", 1), ("agent", 2)]


async def test_redis_sync_and_async_stores_read_each_others_writes(redis_url: str) -> None:
    prefix = f"test-{uuid.uuid4().hex}:"
    sync = RedisStorage(redis_url, prefix=prefix)
    sync.save_state(state(1, 1, by="sync"), [page(1)])
    async with AsyncRedisStorage(redis_url, prefix=prefix) as store:
        assert await store.load_state() == state(1, 1, by="sync")
        await store.save_state(state(2, 2, by="async"), [page(2)])
        assert sync.load_state() == state(2, 2, by="async")
        assert sync.get_page(2) == page(2)
        with pytest.raises(ConflictError):
            sync.save_state(state(2, 2, by="sync, stale"))
    sync.close()


async def test_async_sqlite_keeps_the_sync_stores_refusals(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all, not even close" * 40)
    with pytest.raises(StorageError, match="not a memci SQLite store"):
        await AsyncSqliteStorage(junk).open()
    with pytest.raises(StorageError, match="no such database file"):
        await AsyncSqliteStorage(tmp_path / "absent.db", read_only=True).open()
    with pytest.raises(StorageError, match="synchronous must be 'FULL' or 'NORMAL'"):
        AsyncSqliteStorage(tmp_path / "x.db", synchronous="OFF")  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="namespace must be a str"):
        AsyncSqliteStorage(tmp_path / "x.db", namespace=3)  # type: ignore[arg-type]
    path = tmp_path / "ro.db"
    SqliteStorage(path).close()
    async with AsyncSqliteStorage(path, read_only=True) as reader:
        with pytest.raises(StorageError, match="opened read-only"):
            await reader.save_state(state(1))
        assert await reader.load_state() is None


async def test_redis_clients_of_the_wrong_kind_are_named(redis_url: str) -> None:
    import redis
    import redis.asyncio

    sync_client = redis.Redis.from_url(redis_url)
    async_client = redis.asyncio.Redis.from_url(redis_url)
    try:
        with pytest.raises(StorageError, match=r"use memci\.RedisStorage"):
            AsyncRedisStorage(sync_client)  # type: ignore[arg-type]
        with pytest.raises(StorageError, match=r"use memci\.storage\.AsyncRedisStorage"):
            RedisStorage(async_client)  # type: ignore[arg-type]
        with pytest.raises(StorageError, match="prefix must be a str"):
            AsyncRedisStorage(redis_url, prefix=b"x")  # type: ignore[arg-type]
        store = AsyncRedisStorage(async_client, prefix=f"test-{uuid.uuid4().hex}:")
        await store.put_page(1, page(1))
        await store.close()
        assert await async_client.ping()  # a client it was given stays open
    finally:
        sync_client.close()
        await async_client.aclose()


async def test_an_unreachable_redis_is_a_storage_error_at_open() -> None:
    from factories import free_port

    store = AsyncRedisStorage(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(StorageError, match="cannot reach Redis"):
        await store.open()
    await store.close()


async def test_threaded_storage_refuses_what_is_not_a_store() -> None:
    with pytest.raises(StorageError, match="store must be a memci Storage"):
        ThreadedStorage(object())  # type: ignore[arg-type]
    async with ThreadedStorage(MemoryStorage()) as store:
        await store.put_page(1, page(1))
        assert await store.page_indices() == [1]


async def test_a_save_that_forgets_deletes_the_pages_with_the_state(astore: Any) -> None:
    await astore.save_state(state(1, 3), [page(1), page(2), page(3)])
    with pytest.raises(StorageError, match="page 2 is saved with it but forgotten_through is 2"):
        await astore.save_state(state(2, 3, forgotten_through=2), [page(2)])
    assert await astore.page_indices() == [1, 2, 3]
    await astore.save_state(state(2, 3, forgotten_through=2))
    assert await astore.page_indices() == [3]
    assert await astore.get_page(1) is None
    assert await astore.load_state() == state(2, 3, forgotten_through=2)


async def test_pickling_an_async_store_refuses_or_follows_the_wrapped_store(tmp_path: Path) -> None:
    import copy
    import pickle

    async with AsyncSqliteStorage(tmp_path / "a.db") as store:
        with pytest.raises(StorageError, match="cannot be pickled or deep-copied"):
            pickle.dumps(store)
    memory = ThreadedStorage(MemoryStorage())
    await memory.put_page(1, page(1))
    twin = copy.deepcopy(memory)
    assert await twin.get_page(1) == page(1)
    await twin.put_page(2, page(2))
    assert await memory.page_indices() == [1], "the copy holds its own pages"
    sqlite_twin = pickle.loads(pickle.dumps(ThreadedStorage(SqliteStorage(tmp_path / "b.db"))))
    await sqlite_twin.save_state(state(1))
    async with AsyncSqliteStorage(tmp_path / "b.db") as reader:
        assert await reader.load_state() == state(1)
    await sqlite_twin.close()
