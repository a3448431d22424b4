"""``SqliteStorage``: the persistent store, one SQLite file (stdlib ``sqlite3``) in WAL mode.

Tables (all prefixed ``memci_``, so the file may hold other tables too):

- ``memci_schema(version)``: one row, the layout version (:data:`SCHEMA_VERSION`);
- ``memci_pages(page_index INTEGER PRIMARY KEY, body TEXT)``: one row per archived page, JSON;
- ``memci_state(id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT)``: the one state, JSON.

Every write is one SQLite transaction, so a process killed mid-save leaves the previous state (and
every page written before) loadable. ``synchronous="FULL"`` (the default) also makes each write
durable across a power loss; ``"NORMAL"`` keeps the database consistent but may lose the last
writes on power loss, and is much faster on slow disks.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Literal, TypeVar
from urllib.parse import quote

from memci.errors import StorageError
from memci.storage.json_store import JsonStore

__all__ = ["SCHEMA_VERSION", "SqliteStorage"]

#: The layout version written into ``memci_schema``; a newer one is refused.
SCHEMA_VERSION = 1

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memci_schema (version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memci_pages (page_index INTEGER PRIMARY KEY, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memci_state (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL)",
)

T = TypeVar("T")


class SqliteStorage(JsonStore):
    """Archived pages and the system state in one SQLite file (created if missing), WAL mode.

    ``SqliteStorage(path)`` opens or creates the store; ``read_only=True`` opens an existing one
    without creating or writing anything (what ``memci inspect`` does). Several processes may open
    the same file: SQLite's locks serialise their writes (``timeout`` seconds to wait for one).
    A file that is not a SQLite database, or whose memci tables are damaged, raises
    :class:`~memci.StorageError`. Use it as a context manager, or call :meth:`close`.
    """

    path: Path
    read_only: bool
    _conn: sqlite3.Connection

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        timeout: float = 30.0,
    ) -> None:
        super().__init__()
        if synchronous not in ("FULL", "NORMAL"):
            raise StorageError(f"synchronous must be 'FULL' or 'NORMAL', got {synchronous!r}", str(path))
        self.path = Path(path)
        self.read_only = read_only
        if read_only and not self.path.is_file():
            raise StorageError(f"{self.path}: no such database file", str(self.path))
        target = f"file:{quote(str(self.path.absolute()))}?mode=ro" if read_only else str(self.path)
        with self._errors("cannot open the database"):
            self._conn = sqlite3.connect(
                target, uri=read_only, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        try:
            self._open(synchronous)
        except BaseException:
            self._conn.close()
            raise

    def _open(self, synchronous: str) -> None:
        with self._errors("not a memci SQLite store"):
            if not self.read_only:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute(f"PRAGMA synchronous={synchronous}")
                self._transaction(self._create_schema)
            tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"memci_schema", "memci_pages", "memci_state"} <= tables:
                raise StorageError(f"{self.path}: not a memci store (no memci tables)", str(self.path))
            rows = self._conn.execute("SELECT version FROM memci_schema").fetchall()
        if len(rows) != 1 or type(rows[0][0]) is not int:
            raise StorageError(f"{self.path}: corrupt memci_schema table: {rows!r}", str(self.path))
        if rows[0][0] > SCHEMA_VERSION:
            raise StorageError(
                f"{self.path}: written by a newer memci (schema {rows[0][0]}, this one reads {SCHEMA_VERSION})",
                str(self.path),
            )

    def _create_schema(self) -> None:
        for statement in _SCHEMA:
            self._conn.execute(statement)
        if self._conn.execute("SELECT count(*) FROM memci_schema").fetchone()[0] == 0:
            self._conn.execute("INSERT INTO memci_schema (version) VALUES (?)", (SCHEMA_VERSION,))

    def __repr__(self) -> str:
        return f"SqliteStorage({str(self.path)!r})"

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """SQLite's errors (a file that is not a database, a damaged one, a lock not obtained)
        become :class:`StorageError` naming the file."""
        try:
            yield
        except sqlite3.Error as e:
            raise StorageError(f"{self.path}: {what}: {e}", str(self.path)) from e

    def _transaction(self, work: Callable[[], T]) -> T:
        """Run ``work`` in one write transaction (taken at once, so it never fails half-way on a lock)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            result = work()
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        return result

    def _writable(self) -> None:
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only", str(self.path))

    def _where(self, index: int | None = None) -> str:
        return f"{self.path}: " + ("state" if index is None else f"page {index}")

    def _insert_page_text(self, index: int, text: str) -> str | None:
        self._writable()
        with self._errors(f"cannot write page {index}"):

            def work() -> str | None:
                cursor = self._conn.execute(
                    "INSERT INTO memci_pages (page_index, body) VALUES (?, ?) ON CONFLICT DO NOTHING", (index, text)
                )
                if cursor.rowcount == 1:
                    return None
                row = self._conn.execute("SELECT body FROM memci_pages WHERE page_index = ?", (index,)).fetchone()
                return row[0] if row is not None else None

            return self._transaction(work)

    def _read_page_text(self, index: int) -> str | bytes | None:
        try:  # not `with self._errors(...)`: this is the hot path, and a generator costs a few µs
            row = self._conn.execute("SELECT body FROM memci_pages WHERE page_index = ?", (index,)).fetchone()
        except sqlite3.Error as e:
            raise StorageError(f"{self.path}: cannot read page {index}: {e}", str(self.path)) from e
        return None if row is None else _text(row[0], lambda: self._where(index))

    def _list_page_indices(self) -> list[int]:
        with self._errors("cannot list the pages"):
            return [row[0] for row in self._conn.execute("SELECT page_index FROM memci_pages ORDER BY page_index")]

    def _read_state_text(self) -> str | bytes | None:
        with self._errors("cannot read the state"):
            row = self._conn.execute("SELECT body FROM memci_state WHERE id = 1").fetchone()
        return None if row is None else _text(row[0], self._where)

    def _write_state_text(self, text: str) -> None:
        self._writable()
        with self._errors("cannot save the state"):
            self._conn.execute(
                "INSERT INTO memci_state (id, body) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body",
                (text,),
            )

    def _release(self) -> None:
        self._conn.close()

    def file_bytes(self) -> int:
        """Bytes the store takes on disk now: the database file plus its write-ahead log."""
        total = 0
        for suffix in ("", "-wal"):
            with suppress(FileNotFoundError):
                total += os.stat(f"{self.path}{suffix}").st_size
        return total

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file (SQLite also does this by itself)."""
        self._writable()
        with self._errors("cannot checkpoint"):
            self._locked(lambda: self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))


def _text(body: object, where: Callable[[], str]) -> str | bytes:
    if isinstance(body, (str, bytes)):
        return body
    place = where()
    raise StorageError(f"{place}: corrupt: the stored body is a {type(body).__name__}, not JSON text", place)
