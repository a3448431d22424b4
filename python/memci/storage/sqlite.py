"""``SqliteStorage``: the persistent store, one SQLite file (stdlib ``sqlite3``) in WAL mode.

Tables (all prefixed ``memci_``, so the file may hold other tables too); every row belongs to a
``namespace`` (one per agent or conversation; many share a file):

- ``memci_schema(version)``: one row, the layout version (:data:`SCHEMA_VERSION`);
- ``memci_pages(namespace, page_index, body)``: one row per archived page, JSON;
- ``memci_state(namespace, revision, pages_through, body)``: the namespace's state, JSON, with the
  two keys a save is checked against copied into columns.

Every write is one SQLite transaction: a save writes its pages and the state together, and checks
the revision inside the same transaction, so a process killed mid-save leaves the previous state
(with every page it names) loadable, and of two processes saving over the same revision one wins and
the other gets :class:`~memci.ConflictError`. A file of schema 1 (before namespaces and revisions)
is upgraded in place when opened writable. ``synchronous="FULL"`` (the default) also makes each write
durable across a power loss; ``"NORMAL"`` keeps the database consistent but may lose the last
writes on power loss, and is much faster on slow disks.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from memci.errors import StorageError, is_unicode, repr_of
from memci.storage.arguments import check_flag, check_path, check_seconds
from memci.storage.json_store import Commit, JsonStore, settled

__all__ = ["SCHEMA_VERSION", "SqliteStorage", "check_options", "connection_uri", "place_in", "state_row", "stored_text"]

#: The layout version written into ``memci_schema``; a newer one is refused, an older one upgraded.
SCHEMA_VERSION = 2

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memci_schema (version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memci_pages (namespace TEXT NOT NULL, page_index INTEGER NOT NULL, "
    "body TEXT NOT NULL, PRIMARY KEY (namespace, page_index)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS memci_state (namespace TEXT PRIMARY KEY, revision INTEGER NOT NULL, "
    "pages_through INTEGER NOT NULL, body TEXT NOT NULL)",
)

# Schema 1 had one conversation a file: pages keyed by index alone, the state in row 1. Every page it
# holds is taken as committed (pages_through = the highest index), as schema 1 wrote them at once.
_UPGRADE_FROM_1 = (
    "ALTER TABLE memci_pages RENAME TO memci_pages_v1",
    "ALTER TABLE memci_state RENAME TO memci_state_v1",
    *_SCHEMA[1:],
    "INSERT INTO memci_pages (namespace, page_index, body) SELECT '', page_index, body FROM memci_pages_v1",
    "INSERT INTO memci_state (namespace, revision, pages_through, body) SELECT '', 0, "
    "(SELECT coalesce(max(page_index), 0) FROM memci_pages_v1), body FROM memci_state_v1",
    "DROP TABLE memci_pages_v1",
    "DROP TABLE memci_state_v1",
    "UPDATE memci_schema SET version = 2",
)

# The statements of the stores' reads and writes, shared with memci.storage.async_sqlite (parameters:
# the namespace first, then the page index, the body, or the revision and mark).
SELECT_PAGE = "SELECT body FROM memci_pages WHERE namespace = ? AND page_index = ?"
INSERT_PAGE_ONCE = "INSERT INTO memci_pages (namespace, page_index, body) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
REPLACE_PAGE = (
    "INSERT INTO memci_pages (namespace, page_index, body) VALUES (?, ?, ?) "
    "ON CONFLICT DO UPDATE SET body = excluded.body"
)
FORGET_PAGES = "DELETE FROM memci_pages WHERE namespace = ? AND page_index <= ?"
LIST_PAGES = "SELECT page_index FROM memci_pages WHERE namespace = ? ORDER BY page_index"
SELECT_STATE = "SELECT body FROM memci_state WHERE namespace = ?"
SELECT_MARKS = "SELECT revision, pages_through FROM memci_state WHERE namespace = ?"
REPLACE_STATE = (
    "INSERT INTO memci_state (namespace, revision, pages_through, body) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (namespace) DO UPDATE SET revision = excluded.revision, "
    "pages_through = excluded.pages_through, body = excluded.body"
)

T = TypeVar("T")


def check_options(path: object, namespace: object, synchronous: object, read_only: object, timeout: object) -> Path:
    """The store's path; :class:`StorageError` naming the option if one is not what it must be."""
    if synchronous not in ("FULL", "NORMAL"):
        raise StorageError(f"synchronous must be 'FULL' or 'NORMAL', got {repr_of(synchronous)}", "synchronous")
    if not isinstance(namespace, str) or not is_unicode(namespace):
        raise StorageError(f"namespace must be a str, got {repr_of(namespace)}", "namespace")
    check_flag(read_only, "read_only")
    check_seconds(timeout, "timeout")
    return check_path(path)


def connection_uri(path: Path, read_only: bool) -> str:
    """The URI SQLite opens ``path`` by: always built from the path, so that a name such as
    ``file:x?mode=memory`` is a file of that name and never SQLite URI syntax (which would keep
    everything in memory)."""
    return f"file:{quote(str(path.absolute()))}?mode={'ro' if read_only else 'rwc'}"


class SqliteStorage(JsonStore):
    """Archived pages and the system state in one SQLite file (created if missing), WAL mode.

    ``SqliteStorage(path)`` opens or creates the store; ``path`` is always a file path (never read
    as a SQLite URI). ``namespace`` picks one conversation among many in the file (default ``""``).
    ``read_only=True`` opens an existing one without creating or writing anything (what
    ``memci inspect`` does). Several processes may open
    the same file: SQLite's locks serialise their writes (``timeout`` seconds to wait for one).
    A file that is not a SQLite database, or whose memci tables are damaged, raises
    :class:`~memci.StorageError`. Use it as a context manager, or call :meth:`close`.
    """

    path: Path
    namespace: str
    read_only: bool
    _conn: sqlite3.Connection

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
        self._synchronous: Literal["FULL", "NORMAL"] = synchronous
        self._timeout = timeout
        if read_only and not self.path.is_file():
            raise StorageError(f"{self.path}: no such database file", str(self.path))
        target = connection_uri(self.path, read_only)
        with self._errors("cannot open the database"):
            self._conn = sqlite3.connect(
                target, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        try:
            self._open(synchronous)
        except BaseException:
            self._conn.close()
            raise

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) by its path and options: the copy opens the same file."""
        reopen = functools.partial(
            SqliteStorage,
            str(self.path),
            namespace=self.namespace,
            read_only=self.read_only,
            synchronous=self._synchronous,
            timeout=self._timeout,
        )
        return (reopen, ())

    def _open(self, synchronous: str) -> None:
        with self._errors("not a memci SQLite store"):
            if not self.read_only:
                self._write_ahead_log()
                self._conn.execute(f"PRAGMA synchronous={synchronous}")
                self._transaction(self._create_schema)
            version = self._schema_version()
        if version < SCHEMA_VERSION:
            raise StorageError(
                f"{self.path}: written by an older memci (schema {version}); open it once without "
                "read_only to upgrade it",
                str(self.path),
            )

    def _write_ahead_log(self) -> None:
        """Switch the file to WAL. SQLite answers "database is locked" at once, without waiting, when
        another connection opens a new file at the same moment: retried, backing off, for up to
        ``timeout`` seconds, as SQLite waits for its other locks."""
        deadline = time.monotonic() + self._timeout
        pause = 0.001
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 0.05)

    def _schema_version(self) -> int:
        tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"memci_schema", "memci_pages", "memci_state"} <= tables:
            raise StorageError(f"{self.path}: not a memci store (no memci tables)", str(self.path))
        rows = self._conn.execute("SELECT version FROM memci_schema").fetchall()
        if len(rows) != 1 or type(rows[0][0]) is not int:
            raise StorageError(f"{self.path}: corrupt memci_schema table: {rows!r}", str(self.path))
        version: int = rows[0][0]
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"{self.path}: written by a newer memci (schema {version}, this one reads {SCHEMA_VERSION})",
                str(self.path),
            )
        return version

    def _create_schema(self) -> None:
        tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "memci_schema" in tables and self._schema_version() == 1:
            for statement in _UPGRADE_FROM_1:
                self._conn.execute(statement)
            return
        for statement in _SCHEMA:
            self._conn.execute(statement)
        if self._conn.execute("SELECT count(*) FROM memci_schema").fetchone()[0] == 0:
            self._conn.execute("INSERT INTO memci_schema (version) VALUES (?)", (SCHEMA_VERSION,))

    def __repr__(self) -> str:
        namespace = f", namespace={repr_of(self.namespace)}" if self.namespace else ""
        return f"SqliteStorage({str(self.path)!r}{namespace})"

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
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        return result

    def _writable(self) -> None:
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only", str(self.path))

    def _where(self, index: int | None = None) -> str:
        return place_in(self.path, self.namespace, index)

    def _insert_page_text(self, index: int, text: str) -> str | None:
        self._writable()
        with self._errors(f"cannot write page {index}"):

            def work() -> str | None:
                cursor = self._conn.execute(INSERT_PAGE_ONCE, (self.namespace, index, text))
                if cursor.rowcount == 1:
                    return None
                existing: str | None = self._page_body(index)
                return existing

            return self._transaction(work)

    def _page_body(self, index: int) -> Any:
        row = self._conn.execute(SELECT_PAGE, (self.namespace, index)).fetchone()
        return None if row is None else row[0]

    def _read_page_text(self, index: int) -> str | bytes | None:
        try:  # not `with self._errors(...)`: this is the hot path, and a generator costs a few µs
            body = self._page_body(index)
        except sqlite3.Error as e:
            raise StorageError(f"{self.path}: cannot read page {index}: {e}", str(self.path)) from e
        return None if body is None else stored_text(body, lambda: self._where(index))

    def _list_page_indices(self) -> list[int]:
        with self._errors("cannot list the pages"):
            return [row[0] for row in self._conn.execute(LIST_PAGES, (self.namespace,))]

    def _read_state_text(self) -> str | bytes | None:
        with self._errors("cannot read the state"):
            row = self._conn.execute(SELECT_STATE, (self.namespace,)).fetchone()
        return None if row is None else stored_text(row[0], self._where)

    def _commit(self, commit: Commit) -> None:
        self._writable()

        def work() -> None:
            row = self._conn.execute(SELECT_MARKS, (self.namespace,)).fetchone()
            stored_revision, stored_mark = (0, 0) if row is None else row
            if commit.check(stored_revision, self._where, self._read_state_text):
                return  # this very commit, applied before its COMMIT failed
            writes = commit.pages_to_write(stored_mark, self._read_page_text, self._where)
            if commit.forgotten_through:
                self._conn.execute(FORGET_PAGES, (self.namespace, commit.forgotten_through))
            for index, text in writes:
                self._conn.execute(REPLACE_PAGE, (self.namespace, index, text))
            self._conn.execute(REPLACE_STATE, state_row(self.namespace, commit))

        with self._errors("cannot save the state"):
            # A failed COMMIT may have been applied (an I/O error reported after the write): run again.
            settled(lambda: self._transaction(work), sqlite3.OperationalError)

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


def place_in(path: Path, namespace: str, index: int | None) -> str:
    """Where page ``index`` (or the state, for None) of ``namespace`` lives, for error messages."""
    shown_namespace = f"[{namespace}]" if namespace else ""
    return f"{path}{shown_namespace}: " + ("state" if index is None else f"page {index}")


def state_row(namespace: str, commit: Commit) -> tuple[str, int, int, str]:
    """The parameters of :data:`REPLACE_STATE` for ``commit``."""
    return (namespace, commit.revision or 0, commit.pages_through, commit.state_text)


def stored_text(body: object, where: Callable[[], str]) -> str | bytes:
    if isinstance(body, (str, bytes)):
        return body
    place = where()
    raise StorageError(f"{place}: corrupt: the stored body is a {type(body).__name__}, not JSON text", place)
