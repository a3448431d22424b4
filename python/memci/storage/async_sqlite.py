"""``AsyncSqliteStorage``: :class:`~memci.SqliteStorage`'s file, awaited, over ``aiosqlite``.

The same tables, statements and rules as the sync store (the statements are
:mod:`memci.storage.sqlite`'s, the rules :mod:`memci.storage.json_store`'s), so a sync and an async
store open the same file, even at once: every write is one SQLite transaction (``BEGIN
IMMEDIATE``), a save checks the revision inside it, WAL lets readers run beside the writer.
``aiosqlite`` runs each connection's calls in a thread of its own: the event loop never waits on
SQLite's locks or fsyncs. Needs ``pip install 'memci[async]'``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from memci.errors import StorageError
from memci.storage.async_json_store import AsyncJsonStore, existing_pages
from memci.storage.json_store import COMMIT_ATTEMPTS, Commit
from memci.storage.sqlite import (
    FORGET_PAGES,
    INSERT_PAGE_ONCE,
    LIST_PAGES,
    REPLACE_PAGE,
    REPLACE_STATE,
    SELECT_MARKS,
    SELECT_PAGE,
    SELECT_STATE,
    SqliteStorage,
    check_options,
    connection_uri,
    place_in,
    state_row,
    stored_text,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import aiosqlite

__all__ = ["AsyncSqliteStorage"]

T = TypeVar("T")


class AsyncSqliteStorage(AsyncJsonStore):
    """Archived pages and the system state in one SQLite file, awaited: the file, the options and the
    guarantees of :class:`~memci.SqliteStorage` (``namespace``, ``read_only``, ``synchronous``,
    ``timeout``).

    The file is opened at the first call (or by ``await store.open()``, or ``async with``): the
    schema is created, checked or upgraded then, by the sync store's code in a thread, and the
    errors of a file that is not a memci store are raised there. Use it as an async context manager,
    or ``await store.close()``.
    """

    path: Path
    namespace: str
    read_only: bool
    _conn: aiosqlite.Connection

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str = "",
        read_only: bool = False,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        timeout: float = 30.0,
    ) -> None:
        super().__init__()
        self.path = check_options(path, namespace, synchronous, read_only, timeout)
        self.namespace = namespace
        self.read_only = read_only
        self._synchronous = synchronous
        self._timeout = timeout

    def __repr__(self) -> str:
        namespace = f", namespace={self.namespace!r}" if self.namespace else ""
        return f"AsyncSqliteStorage({str(self.path)!r}{namespace})"

    def _where(self, index: int | None = None) -> str:
        return place_in(self.path, self.namespace, index)

    async def _open(self) -> None:
        try:
            import aiosqlite
        except ImportError as e:
            raise ImportError("AsyncSqliteStorage needs the aiosqlite package: pip install 'memci[async]'") from e

        def prepare() -> None:  # creates, checks or upgrades the schema, and refuses what is not a store
            SqliteStorage(
                self.path,
                namespace=self.namespace,
                read_only=self.read_only,
                synchronous=self._synchronous,
                timeout=self._timeout,
            ).close()

        await asyncio.to_thread(prepare)
        async with self._errors("cannot open the database"):
            self._conn = await aiosqlite.connect(
                connection_uri(self.path, self.read_only), uri=True, timeout=self._timeout, isolation_level=None
            )
        try:
            if not self.read_only:
                async with self._errors("cannot open the database"):
                    await self._conn.execute(f"PRAGMA synchronous={self._synchronous}")
        except BaseException:
            await self._conn.close()
            raise

    @asynccontextmanager
    async def _errors(self, what: str) -> AsyncIterator[None]:
        """SQLite's errors become :class:`StorageError` naming the file, as in the sync store."""
        try:
            yield
        except sqlite3.Error as e:
            raise StorageError(f"{self.path}: {what}: {e}", str(self.path)) from e

    async def _transaction(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` in one write transaction (taken at once: ``BEGIN IMMEDIATE``)."""
        await self._conn.execute("BEGIN IMMEDIATE")
        try:
            result = await work()
            await self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                await self._conn.execute("ROLLBACK")
            raise
        return result

    def _writable(self) -> None:
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only", str(self.path))

    async def _one(self, sql: str, parameters: tuple[Any, ...]) -> Any:
        async with self._conn.execute(sql, parameters) as cursor:
            return await cursor.fetchone()

    async def _insert_page_text(self, index: int, text: str) -> str | bytes | None:
        self._writable()

        async def work() -> str | bytes | None:
            cursor = await self._conn.execute(INSERT_PAGE_ONCE, (self.namespace, index, text))
            if cursor.rowcount == 1:
                return None
            return await self._read_page_text(index)

        async with self._errors(f"cannot write page {index}"):
            return await self._transaction(work)

    async def _read_page_text(self, index: int) -> str | bytes | None:
        async with self._errors(f"cannot read page {index}"):
            row = await self._one(SELECT_PAGE, (self.namespace, index))
        return None if row is None else stored_text(row[0], lambda: self._where(index))

    async def _list_page_indices(self) -> list[int]:
        async with self._errors("cannot list the pages"):
            return [row[0] for row in await self._conn.execute_fetchall(LIST_PAGES, (self.namespace,))]

    async def _read_state_text(self) -> str | bytes | None:
        async with self._errors("cannot read the state"):
            row = await self._one(SELECT_STATE, (self.namespace,))
        return None if row is None else stored_text(row[0], self._where)

    async def _commit(self, commit: Commit) -> None:
        self._writable()

        async def work() -> None:
            row = await self._one(SELECT_MARKS, (self.namespace,))
            stored_revision, stored_mark = (0, 0) if row is None else row
            if not commit.follows(stored_revision):
                if commit.landed(await self._read_state_text()):
                    return  # this very commit, applied before its COMMIT failed
                commit.check(stored_revision, self._where)  # a ConflictError
            stored = await existing_pages(commit, self._read_page_text)
            writes = commit.pages_to_write(stored_mark, stored, self._where)
            if commit.forgotten_through:
                await self._conn.execute(FORGET_PAGES, (self.namespace, commit.forgotten_through))
            for index, text in writes:
                await self._conn.execute(REPLACE_PAGE, (self.namespace, index, text))
            await self._conn.execute(REPLACE_STATE, state_row(self.namespace, commit))

        async with self._errors("cannot save the state"):
            for attempt in range(1, COMMIT_ATTEMPTS + 1):
                try:
                    await self._transaction(work)
                    return
                except sqlite3.OperationalError:
                    if attempt == COMMIT_ATTEMPTS:  # a failed COMMIT may have been applied: run again
                        raise

    async def _release(self) -> None:
        await self._conn.close()
