"""A save whose reply is lost is never ambiguous (docs/storage.md, "Lost replies"): the write was
applied, then the connection dropped (or the COMMIT reported an error) before the store read the
reply. The store runs the commit again, finds its own commit id in the stored state, and returns:
one stored batch, no ConflictError, and the next save follows on. Each store gets the fault its own
way, injected once after the write landed."""

from __future__ import annotations

import inspect
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from memci import DirectoryStorage, SqliteStorage
from memci.storage import directory as directory_module
from memci.storage.json_store import COMMIT_KEY


def page(index: int) -> dict[str, Any]:
    return {
        "index": index,
        "messages": [{"role": "user", "content": f"turn {index}"}],
        "summary": f"turn {index}",
        "entry_summaries": [],
        "archived_round": index,
    }


def turn(revision: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The state and page of a message log's turn ``revision``: its batch is the list so far."""
    return (
        {
            "version": 1,
            "revision": revision,
            "pages_through": revision,
            "batches": [f"b{i}" for i in range(1, revision + 1)],
        },
        [page(revision)],
    )


class Fault:
    """Fires once: ``after(write)`` runs the write, then ``meanwhile()`` (another writer, when a
    test sets one), then raises ``error`` as if its reply was lost."""

    def __init__(self, error: BaseException) -> None:
        self.error, self.fired = error, 0
        self.meanwhile: Callable[[], Any] = lambda: None

    def after(self, write: Callable[[], Any]) -> Any:
        result = write()
        if not self.fired:
            self.fired += 1
            self.meanwhile()
            raise self.error
        return result


def _saves_once_through_a_lost_reply(store: Any, fault: Fault) -> None:
    """Turn 1 is stored; turn 2's reply is lost: no ConflictError, one batch; turn 3 follows on."""
    store.save_state(*turn(2))
    assert fault.fired == 1, "the fault was injected"
    assert store.load_state() == turn(2)[0]
    assert store.page_indices() == [1, 2]
    store.save_state(*turn(3))
    assert store.load_state()["batches"] == ["b1", "b2", "b3"]


def _saves_once_through_a_lost_reply_and_a_racer(store: Any, fault: Fault, other: Any) -> None:
    """Turn 2's reply is lost, and before the store reads back, ``other`` (another writer on the
    same storage) loads turn 2 and saves turn 3 over it: the store recognises its commit in the
    trail (no ConflictError, turn 2 stored once), and a save of turn 3 of its own is a conflict."""
    from memci import ConflictError

    def racer() -> None:
        assert other.load_state() == turn(2)[0]
        other.save_state(*turn(3))

    fault.meanwhile = racer
    store.save_state(*turn(2))
    assert fault.fired == 1, "the fault was injected"
    assert store.load_state() == turn(3)[0]
    assert store.load_state()["batches"] == ["b1", "b2", "b3"]
    assert store.page_indices() == [1, 2, 3]
    with pytest.raises(ConflictError):  # a commit that did not land is never taken for one that did
        store.save_state({**turn(3)[0], "batches": ["mine"]}, turn(3)[1])
    store.save_state(*turn(4))
    assert store.load_state()["batches"] == ["b1", "b2", "b3", "b4"]


class _CommitFails:
    """A SQLite connection whose first COMMIT after arming is applied, then reported as failed."""

    def __init__(self, conn: sqlite3.Connection, fault: Fault) -> None:
        self._conn, self._fault, self.armed = conn, fault, False

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and self.armed:
            return self._fault.after(lambda: self._conn.execute(sql, *args))
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_sqlite_a_commit_reported_as_failed_after_it_landed(tmp_path: Path) -> None:
    fault = Fault(sqlite3.OperationalError("disk I/O error"))
    with SqliteStorage(tmp_path / "s.db") as store:
        wrapped = _CommitFails(store._conn, fault)
        store._conn = wrapped  # type: ignore[assignment]
        store.save_state(*turn(1))
        wrapped.armed = True
        _saves_once_through_a_lost_reply(store, fault)


def test_sqlite_a_lost_commit_then_another_writers_save(tmp_path: Path) -> None:
    fault = Fault(sqlite3.OperationalError("disk I/O error"))
    with SqliteStorage(tmp_path / "s.db") as store, SqliteStorage(tmp_path / "s.db") as other:
        wrapped = _CommitFails(store._conn, fault)
        store._conn = wrapped  # type: ignore[assignment]
        store.save_state(*turn(1))
        wrapped.armed = True
        _saves_once_through_a_lost_reply_and_a_racer(store, fault, other)


def _lossy_directory(monkeypatch: pytest.MonkeyPatch, fault: Fault) -> None:
    """The directory store's first state write after this lands, then reports an I/O error."""
    real = directory_module.write_atomic

    def write_atomic(path: Path, text: str, *, fsync: bool = True) -> None:
        if path.name == "state.json" and not fault.fired:
            fault.after(lambda: real(path, text, fsync=fsync))
        else:
            real(path, text, fsync=fsync)

    monkeypatch.setattr(directory_module, "write_atomic", write_atomic)


def test_directory_an_error_after_the_state_was_renamed_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault = Fault(OSError(5, "Input/output error"))
    with DirectoryStorage(tmp_path / "store") as store:
        store.save_state(*turn(1))
        _lossy_directory(monkeypatch, fault)
        _saves_once_through_a_lost_reply(store, fault)


@contextmanager
def _lost_exec(module: Any, fault: Fault) -> Iterator[Fault]:
    """The pipeline of ``module`` (redis.client or redis.asyncio.client) loses its first EXEC reply
    (``fault``)."""
    real = module.Pipeline._execute_transaction

    if module.__name__.startswith("redis.asyncio"):

        async def lossy(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = await real(self, *args, **kwargs)
            if not fault.fired:
                fault.fired += 1
                racer = fault.meanwhile()
                if inspect.isawaitable(racer):
                    await racer
                raise fault.error
            return result

    else:

        def lossy(self: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            return fault.after(lambda: real(self, *args, **kwargs))

    module.Pipeline._execute_transaction = lossy
    try:
        yield fault
    finally:
        module.Pipeline._execute_transaction = real


def test_redis_the_reply_to_exec_is_lost(redis_url: str) -> None:
    import redis
    import redis.client
    from memci import RedisStorage

    with RedisStorage(redis_url, prefix=f"lost-{uuid.uuid4().hex}:") as store:
        store.save_state(*turn(1))
        with _lost_exec(redis.client, Fault(redis.ConnectionError("Connection closed by server."))) as fault:
            _saves_once_through_a_lost_reply(store, fault)


def test_redis_a_lost_exec_reply_then_another_writers_save(redis_url: str) -> None:
    import redis
    import redis.client
    from memci import RedisStorage

    prefix = f"lost-{uuid.uuid4().hex}:"
    with RedisStorage(redis_url, prefix=prefix) as store, RedisStorage(redis_url, prefix=prefix) as other:
        store.save_state(*turn(1))
        with _lost_exec(redis.client, Fault(redis.ConnectionError("Connection closed by server."))) as fault:
            _saves_once_through_a_lost_reply_and_a_racer(store, fault, other)


async def test_async_redis_the_reply_to_exec_is_lost(redis_url: str) -> None:
    import redis
    import redis.asyncio.client
    from memci.storage import AsyncRedisStorage

    async with AsyncRedisStorage(redis_url, prefix=f"lost-{uuid.uuid4().hex}:") as store:
        await store.save_state(*turn(1))
        with _lost_exec(redis.asyncio.client, Fault(redis.ConnectionError("Connection closed by server."))) as fault:
            await store.save_state(*turn(2))
            assert fault.fired == 1
            assert await store.load_state() == turn(2)[0]
            assert await store.page_indices() == [1, 2]
            await store.save_state(*turn(3))


async def test_async_redis_a_lost_exec_reply_then_another_writers_save(redis_url: str) -> None:
    import redis
    import redis.asyncio.client
    from memci.storage import AsyncRedisStorage

    prefix = f"lost-{uuid.uuid4().hex}:"
    async with (
        AsyncRedisStorage(redis_url, prefix=prefix) as store,
        AsyncRedisStorage(redis_url, prefix=prefix) as other,
    ):
        with ExitStack() as stack:
            fault = Fault(redis.ConnectionError("Connection closed by server."))
            await _async_lost_reply_and_a_racer(
                store, other, fault, lambda: stack.enter_context(_lost_exec(redis.asyncio.client, fault))
            )


def test_postgres_the_connection_drops_after_commit(postgres_dsn: str) -> None:
    import psycopg
    from memci import PostgresStorage

    fault = Fault(psycopg.OperationalError("server closed the connection unexpectedly"))
    with PostgresStorage(postgres_dsn, namespace=f"lost-{uuid.uuid4().hex}") as store:
        store.save_state(*turn(1))
        real = store._run_calls

        def lossy(conn: psycopg.Connection[Any], steps: Any) -> Any:
            def write() -> Any:
                result = real(conn, steps)  # committed: the commit call is a transaction of its own
                conn.close()  # the connection drops before the reply is read
                return result

            return fault.after(write)

        store._run_calls = lossy  # type: ignore[method-assign]
        _saves_once_through_a_lost_reply(store, fault)


def test_postgres_a_dropped_connection_then_another_writers_save(postgres_dsn: str) -> None:
    import psycopg
    from memci import PostgresStorage

    fault = Fault(psycopg.OperationalError("server closed the connection unexpectedly"))
    namespace = f"lost-{uuid.uuid4().hex}"
    with (
        PostgresStorage(postgres_dsn, namespace=namespace, pool_size=1) as store,
        PostgresStorage(postgres_dsn, namespace=namespace, pool_size=1) as other,
    ):
        store.save_state(*turn(1))
        real = store._run_calls

        def lossy(conn: psycopg.Connection[Any], steps: Any) -> Any:
            def write() -> Any:
                result = real(conn, steps)
                conn.close()
                return result

            return fault.after(write)

        store._run_calls = lossy  # type: ignore[method-assign]
        _saves_once_through_a_lost_reply_and_a_racer(store, fault, other)


async def _async_lost_reply_and_a_racer(store: Any, other: Any, fault: Fault, lose: Callable[[], Any]) -> None:
    """As :func:`_saves_once_through_a_lost_reply_and_a_racer`, awaited: ``lose()`` arms the fault
    whose ``meanwhile`` (set here) is a coroutine function of the racer."""
    from memci import ConflictError

    async def racer() -> None:
        assert await other.load_state() == turn(2)[0]
        await other.save_state(*turn(3))

    fault.meanwhile = racer
    await store.save_state(*turn(1))
    lose()
    await store.save_state(*turn(2))
    assert fault.fired == 1
    assert (await store.load_state())["batches"] == ["b1", "b2", "b3"]
    assert await store.page_indices() == [1, 2, 3]
    with pytest.raises(ConflictError):
        await store.save_state({**turn(3)[0], "batches": ["mine"]}, turn(3)[1])
    await store.save_state(*turn(4))
    assert (await store.load_state())["batches"] == ["b1", "b2", "b3", "b4"]


def _async_postgres_loses_a_reply(fault: Fault) -> Callable[..., Any]:
    """A stand-in for ``async_postgres._run_calls`` whose first transaction commits, then its
    connection closes, ``fault.meanwhile`` runs (awaited) and ``fault.error`` is raised."""
    from memci.storage import async_postgres

    real = async_postgres._run_calls

    async def lossy(conn: Any, steps: Any) -> Any:
        result = await real(conn, steps)
        if not fault.fired:
            fault.fired += 1
            await conn.close()
            racer = fault.meanwhile()
            if inspect.isawaitable(racer):
                await racer
            raise fault.error
        return result

    return lossy


async def test_async_postgres_a_dropped_connection_then_another_writers_save(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg
    from memci.storage import AsyncPostgresStorage, async_postgres

    fault = Fault(psycopg.OperationalError("server closed the connection unexpectedly"))
    lossy = _async_postgres_loses_a_reply(fault)

    namespace = f"lost-{uuid.uuid4().hex}"
    async with (
        AsyncPostgresStorage(postgres_dsn, namespace=namespace, pool_size=1) as store,
        AsyncPostgresStorage(postgres_dsn, namespace=namespace, pool_size=1) as other,
    ):
        await _async_lost_reply_and_a_racer(
            store, other, fault, lambda: monkeypatch.setattr(async_postgres, "_run_calls", lossy)
        )


async def test_async_postgres_the_connection_drops_after_commit(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg
    from memci.storage import AsyncPostgresStorage, async_postgres

    fault = Fault(psycopg.OperationalError("server closed the connection unexpectedly"))
    lossy = _async_postgres_loses_a_reply(fault)

    async with AsyncPostgresStorage(postgres_dsn, namespace=f"lost-{uuid.uuid4().hex}") as store:
        await store.save_state(*turn(1))
        monkeypatch.setattr(async_postgres, "_run_calls", lossy)
        await store.save_state(*turn(2))
        assert fault.fired == 1
        assert await store.load_state() == turn(2)[0]
        assert await store.page_indices() == [1, 2]


def test_a_state_may_not_carry_the_stores_commit_key(tmp_path: Path) -> None:
    from memci import StorageError

    with (
        SqliteStorage(tmp_path / "s.db") as store,
        pytest.raises(StorageError, match=f"the key '{COMMIT_KEY}' is the store's own"),
    ):
        store.save_state({"version": 1, COMMIT_KEY: "mine"})


def test_a_state_stored_before_commit_ids_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SqliteStorage(path).close()
    raw = sqlite3.connect(path)
    raw.execute(
        "INSERT INTO memci_state (namespace, revision, pages_through, body) VALUES ('', 4, 0, ?)",
        ('{"version":1,"revision":4,"round":9}',),
    )
    raw.commit()
    raw.close()
    with SqliteStorage(path) as store:
        assert store.load_state() == {"version": 1, "revision": 4, "round": 9}
        store.save_state({"version": 1, "revision": 5, "round": 10})
        assert store.load_state() == {"version": 1, "revision": 5, "round": 10}
