"""``AsyncPostgresStorage``: :class:`~memci.PostgresStorage`'s tables, awaited, over psycopg's
``AsyncConnectionPool``.

The same tables, statements and transactions (the steps of :mod:`memci.storage.postgres`, driven
here with ``await``), so sync and async workers share one namespace: a save locks the namespace,
checks the revision and writes in one transaction; of two workers saving over the same revision one
wins and the other gets :class:`~memci.ConflictError`. Needs ``pip install 'memci[postgres]'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from memci.errors import StorageError
from memci.storage.async_json_store import AsyncJsonStore
from memci.storage.json_store import COMMIT_ATTEMPTS, Commit
from memci.storage.postgres import (
    LIST_PAGES,
    PURGE_EXPIRED,
    SCHEMA_VERSION,
    SELECT_PAGE,
    SELECT_PAGES,
    SELECT_STATE,
    Done,
    PostgresTarget,
    Query,
    Steps,
    advance,
    answer_of,
    commit_steps,
    connect_timeout,
    insert_page_steps,
    open_steps,
)
from memci.storage.postgres_tails import TailPlan

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["AsyncPostgresStorage"]

T = TypeVar("T")


class AsyncPostgresStorage(PostgresTarget, AsyncJsonStore):
    """Archived pages and the system state of one conversation (``namespace``) in PostgreSQL,
    awaited: the options and guarantees of :class:`~memci.PostgresStorage`.

    ``target`` is a connection string (the store opens an ``AsyncConnectionPool`` of up to
    ``pool_size`` connections at the first call, and closes it) or a
    ``psycopg_pool.AsyncConnectionPool`` (shared; left open; autocommit connections). The tables are
    created or checked at the first call, or by ``await store.open()`` or ``async with``.
    """

    _pool: psycopg_pool.AsyncConnectionPool[Any]
    _owns_pool: bool

    def __init__(
        self,
        target: str | psycopg_pool.AsyncConnectionPool[Any],
        *,
        namespace: str = "",
        ttl: float | timedelta | None = None,
        timeout: float = 30.0,
        pool_size: int = 4,
    ) -> None:
        super().__init__()
        self._configure(target, namespace, ttl, timeout, pool_size, pool_kind="AsyncConnectionPool")
        self._owns_pool = isinstance(target, str)
        if not isinstance(target, str):
            self._pool = target

    async def _open(self) -> None:
        import psycopg
        import psycopg_pool

        if self._dsn is not None:
            try:  # the tables on a connection of its own: an unreachable server fails at once
                async with await psycopg.AsyncConnection.connect(
                    self._dsn, autocommit=True, connect_timeout=connect_timeout(self._timeout)
                ) as conn:
                    version = await _run_transaction(conn, open_steps)
            except psycopg.Error as e:
                raise StorageError(f"{self._place}: cannot reach PostgreSQL: {e}", self._place) from None
            self._pool = psycopg_pool.AsyncConnectionPool(
                self._dsn,
                min_size=1,
                max_size=self._pool_size,
                kwargs={"autocommit": True},
                timeout=self._timeout,
                open=False,
            )
            await self._pool.open()
        else:
            version = await self._transaction("cannot create the memci tables", open_steps)
        if version > SCHEMA_VERSION:
            await self._release()
            raise StorageError(
                f"{self._place}: written by a newer memci (schema {version}, this one reads {SCHEMA_VERSION})",
                self._place,
            )

    async def _query(self, what: str, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(sql, params)
                rows: list[tuple[Any, ...]] = await cursor.fetchall()
                return rows
        except self._errors as e:
            raise StorageError(f"{self._place}: {what}: {e}", self._place) from e

    async def _transaction(self, what: str, steps: Callable[[], Steps[T]], *, calls: bool = False) -> T:
        """Run ``steps()`` in one transaction (``calls``: each statement a transaction of its own, as
        the sync store's ``_run_calls``), again on another connection when one fails (as the sync
        store does), up to :data:`~memci.storage.json_store.COMMIT_ATTEMPTS` runs."""
        run = _run_calls if calls else _run_transaction
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                async with self._pool.connection() as conn:
                    return await run(conn, steps)
            except self._unsure as e:
                if attempt == COMMIT_ATTEMPTS:
                    raise StorageError(f"{self._place}: {what}: {e}", self._place) from e
            except self._errors as e:
                raise StorageError(f"{self._place}: {what}: {e}", self._place) from e
        raise AssertionError("unreachable")  # pragma: no cover

    async def _insert_page_text(self, index: int, text: str) -> str | None:
        return await self._transaction(
            f"cannot write page {index}", lambda: insert_page_steps(self.namespace, index, text, self.ttl)
        )

    async def _read_page_text(self, index: int) -> str | None:
        rows = await self._query(f"cannot read page {index}", SELECT_PAGE, {"ns": self.namespace, "index": index})
        return str(rows[0][0]) if rows else None

    async def _list_page_indices(self) -> list[int]:
        rows = await self._query("cannot list the pages", LIST_PAGES, {"ns": self.namespace})
        return [int(row[0]) for row in rows]

    async def _commit(self, commit: Commit) -> None:
        await self._save(commit, TailPlan(None))

    async def _save(self, commit: Commit, tails: TailPlan) -> None:
        await self._transaction(
            "cannot save the state",
            lambda: commit_steps(self.namespace, commit, tails, self.ttl, self._where),
            calls=True,
        )

    async def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        """The sync store's :meth:`~memci.PostgresStorage.save_state`, awaited (the state checked and
        encoded in a thread)."""

        async def work() -> None:
            commit, tails = await asyncio.to_thread(self._planned, state, list(pages))
            await self._save(commit, tails)
            self._saved(commit, tails)

        await self._locked(work)

    async def load_state(self) -> dict[str, Any] | None:
        """The last state saved (its tails joined back), or None: one query."""

        async def read() -> dict[str, Any] | None:
            rows = await self._query("cannot read the state", SELECT_STATE, {"ns": self.namespace})
            return await asyncio.to_thread(self._stored_state, rows)

        return await self._locked(read)

    async def _release(self) -> None:
        if self._owns_pool and hasattr(self, "_pool"):
            await self._pool.close()

    async def _read_pages_text(self, indices: list[int]) -> list[tuple[int, str | bytes]]:
        """Every page among ``indices`` in one query (as the sync store)."""
        return await self._query("cannot read pages", SELECT_PAGES, {"ns": self.namespace, "indices": indices})

    async def purge_expired(self) -> int:
        """Delete every expired namespace of the database and return how many (as
        :meth:`PostgresStorage.purge_expired <memci.PostgresStorage.purge_expired>`)."""

        async def purge() -> list[tuple[Any, ...]]:
            return await self._query("cannot purge expired namespaces", PURGE_EXPIRED, {})

        return int((await self._locked(purge))[0][0])


async def _run_transaction(conn: psycopg.AsyncConnection[Any], steps: Callable[[], Steps[T]]) -> T:
    """Run ``steps()`` in one transaction on ``conn``, in pipeline mode, as the sync store does."""
    async with conn.pipeline() as pipeline, conn.transaction():

        async def send(batch: list[Query]) -> list[Any]:
            cursors = [await conn.execute(query.sql, query.params) for query in batch]
            if any(query.answer for query in batch):
                await pipeline.sync()
            return [await _answer(cursor, query) for cursor, query in zip(cursors, batch, strict=True)]

        return await _drive(steps(), send)


async def _run_calls(conn: psycopg.AsyncConnection[Any], steps: Callable[[], Steps[T]]) -> T:
    """Run ``steps()``, whose every batch is one statement, each a transaction of its own on ``conn``
    (autocommit), as the sync store's ``_run_calls`` does."""

    async def send(batch: list[Query]) -> list[Any]:
        return [await _answer(await conn.execute(query.sql, query.params), query) for query in batch]

    return await _drive(steps(), send)


async def _answer(cursor: psycopg.AsyncCursor[Any], query: Query) -> Any:
    """What ``query`` wants back from ``cursor`` (after its results arrived)."""
    return (await cursor.fetchall()) if query.answer == "rows" else answer_of(cursor, query)


async def _drive(steps: Steps[T], send: Callable[[list[Query]], Awaitable[list[Any]]]) -> T:
    """Run ``steps``, each batch it yields through ``send`` (awaited), which returns its answers."""
    batch = advance(steps, None)
    while not isinstance(batch, Done):
        batch = advance(steps, await send(batch))
    return batch.value
