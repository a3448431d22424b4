"""``PostgresStorage``: many conversations in one PostgreSQL database, over psycopg 3 and a pool.

Tables (all prefixed ``memci_``, so the database may hold other tables too); every row belongs to a
``namespace`` (one per conversation; namespaces never see each other):

- ``memci_schema(version)``: one row, the layout version (:data:`SCHEMA_VERSION`);
- ``memci_pages(namespace, page_index, body)``: one row per archived page, JSON text (text, not
  ``jsonb``: a page comes back with its keys in their order);
- ``memci_state(namespace, revision, pages_through, forgotten_through, body)``: the state, with the
  marks a save is checked against copied into columns;
- ``memci_expiry(namespace, expires_at)``: when a namespace written with a ``ttl`` expires.

A save is one call of a function the store creates in the database (:data:`COMMIT_FUNCTION`,
PL/pgSQL), one statement and so one round trip and one transaction: it takes the namespace's
advisory lock (so writers of one conversation run one at a time and writers of others never wait),
checks the revision, writes the pages, deletes the forgotten ones and replaces the state: of two
processes saving over the same revision one wins and the other gets :class:`~memci.ConflictError`,
and a process killed mid-save leaves the previous state. A save whose connection drops before its
reply (was it committed?) is run again on another connection: it waits for the lock the lost one
held, and finds its own commit id if that one landed (no :class:`~memci.ConflictError`, nothing
written twice). A long text of the state that only grows (the dropped contents entries) is kept in
``memci_state_tails(namespace, key, start, text)`` and a save appends its new end
(:mod:`memci.storage.postgres_tails`), so a save writes what changed, not the whole history.

The transactions are written once, as steps that yield queries (:class:`Query`), and run by the sync
store here and by :class:`~memci.storage.AsyncPostgresStorage`. Needs ``pip install 'memci[postgres]'``.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from memci._optional import needs_extra
from memci.errors import StorageError, repr_of
from memci.storage.arguments import check_name, check_seconds
from memci.storage.json_store import (
    Commit,
    JsonStore,
    adds_vector,
    check_stored,
    commit_of,
    decode_stored_state,
    settled,
)
from memci.storage.postgres_tails import TailPlan, Tails

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = [
    "SCHEMA_VERSION",
    "Done",
    "PostgresStorage",
    "PostgresTarget",
    "Query",
    "advance",
    "answer_of",
    "check_options",
    "commit_steps",
    "connect_timeout",
    "insert_page_steps",
    "open_steps",
    "place_of",
]

#: The layout version written into ``memci_schema``; a newer one is refused. 2: the state's long
#: texts in ``memci_state_tails`` (a schema 1 database is upgraded when opened: it has none).
SCHEMA_VERSION = 2

T = TypeVar("T")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memci_schema (version integer NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memci_pages (namespace text NOT NULL, page_index bigint NOT NULL, "
    "body text NOT NULL, PRIMARY KEY (namespace, page_index))",
    "CREATE TABLE IF NOT EXISTS memci_state (namespace text PRIMARY KEY, revision bigint NOT NULL, "
    "pages_through bigint NOT NULL, forgotten_through bigint NOT NULL, body text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memci_expiry (namespace text PRIMARY KEY, expires_at timestamptz NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memci_state_tails (namespace text NOT NULL, key text NOT NULL, start bigint NOT NULL, "
    "text text NOT NULL, PRIMARY KEY (namespace, key, start))",
)
# Two processes creating the tables at once would race in the catalog: the first takes this lock.
_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(7346193500542158171)"
_NAMESPACE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%(ns)s, 1701))"
# A namespace whose expiry has passed reads as empty, whatever rows it still has.
_LIVE = "NOT EXISTS (SELECT 1 FROM memci_expiry WHERE namespace = %(ns)s AND expires_at <= now())"
SELECT_PAGE = f"SELECT body FROM memci_pages WHERE namespace = %(ns)s AND page_index = %(index)s AND {_LIVE}"
SELECT_PAGES = (
    f"SELECT page_index, body FROM memci_pages WHERE namespace = %(ns)s AND page_index = ANY(%(indices)s) AND {_LIVE}"
)
LIST_PAGES = f"SELECT page_index FROM memci_pages WHERE namespace = %(ns)s AND {_LIVE} ORDER BY page_index"
# The state row and its tails (key, text, parts), in one query.
SELECT_STATE = (
    "SELECT s.body, coalesce((SELECT array_agg(ARRAY[g.key, g.text, g.parts::text]) FROM "
    "(SELECT t.key, string_agg(t.text, '' ORDER BY t.start) AS text, count(*) AS parts FROM memci_state_tails t "
    "WHERE t.namespace = s.namespace GROUP BY t.key) g), '{}') "
    f"FROM memci_state s WHERE s.namespace = %(ns)s AND {_LIVE}"
)
# Deletes the namespace if it has expired (every write runs it first), and reads its marks.
_PURGE_AND_MARKS = (
    "WITH gone AS (DELETE FROM memci_expiry WHERE namespace = %(ns)s AND expires_at <= now() RETURNING namespace), "
    "p AS (DELETE FROM memci_pages WHERE namespace IN (SELECT namespace FROM gone)), "
    "s AS (DELETE FROM memci_state WHERE namespace IN (SELECT namespace FROM gone)), "
    "t AS (DELETE FROM memci_state_tails WHERE namespace IN (SELECT namespace FROM gone)) "
    "SELECT revision, pages_through, forgotten_through FROM memci_state "
    "WHERE namespace = %(ns)s AND NOT EXISTS (SELECT 1 FROM gone)"
)
# A committed page gains the vector it lacked (json_store.adds_vector), over the very text the
# client compared it with.
_AMEND_PAGE = (
    "UPDATE memci_pages SET body = %(body)s WHERE namespace = %(ns)s AND page_index = %(index)s AND body = %(old)s"
)
_INSERT_PAGE_ONCE = (
    "INSERT INTO memci_pages (namespace, page_index, body) VALUES (%(ns)s, %(index)s, %(body)s) ON CONFLICT DO NOTHING"
)
# A save, on the server: one statement, so one round trip and the COMMIT of its own (autocommit).
# It locks the namespace (writers of one conversation take turns), purges it if it expired, and
# checks the revision: over another it writes nothing and returns ('conflict', the stored revision,
# the stored state), which the client tells apart from its own landed commit by the commit trail.
# A committed page (at or below the stored mark) stored with other text, not listed in in_same,
# writes nothing either and comes back as ('differs', ..., index, stored text): the client compares
# the two as JSON (key order aside) and calls again with the same ones in in_same, or refuses.
# Otherwise it deletes the forgotten pages, writes the new pages (an orphan above the mark
# replaced, a committed page never), replaces the state, sets the expiry and returns ('done').
# Versioned by its name: a new body is a new function, so older clients keep theirs.
COMMIT_FUNCTION = "memci_commit_1"
_CREATE_COMMIT_FUNCTION = f"""
CREATE FUNCTION {COMMIT_FUNCTION}(
    in_ns text, in_revision bigint, in_stored_revision bigint, in_pages_through bigint,
    in_forgotten_through bigint, in_body text, in_indices bigint[], in_bodies text[], in_same bigint[],
    in_ttl double precision, in_tail_keys text[], in_tail_after text, in_write_keys text[],
    in_write_starts bigint[], in_write_texts text[]
) RETURNS TABLE (out_outcome text, out_revision bigint, out_index bigint, out_text text)
LANGUAGE plpgsql AS $$
DECLARE
    v_revision bigint;
    v_mark bigint;
    v_forgotten bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(in_ns, 1701));
    IF EXISTS (SELECT 1 FROM memci_expiry e WHERE e.namespace = in_ns AND e.expires_at <= now()) THEN
        DELETE FROM memci_expiry e WHERE e.namespace = in_ns;
        DELETE FROM memci_pages p WHERE p.namespace = in_ns;
        DELETE FROM memci_state s WHERE s.namespace = in_ns;
        DELETE FROM memci_state_tails t WHERE t.namespace = in_ns;
    END IF;
    SELECT s.revision, s.pages_through, s.forgotten_through INTO v_revision, v_mark, v_forgotten
        FROM memci_state s WHERE s.namespace = in_ns;
    v_revision := coalesce(v_revision, 0);
    v_mark := coalesce(v_mark, 0);
    v_forgotten := coalesce(v_forgotten, 0);
    IF in_revision IS NOT NULL AND in_revision <> v_revision + 1 THEN
        RETURN QUERY SELECT 'conflict', v_revision, NULL::bigint,
            (SELECT s.body FROM memci_state s WHERE s.namespace = in_ns);
        RETURN;
    END IF;
    RETURN QUERY SELECT 'differs', v_revision, p.page_index, p.body
        FROM memci_pages p JOIN unnest(in_indices, in_bodies) AS w(i, b) ON p.page_index = w.i
        WHERE p.namespace = in_ns AND p.page_index <= v_mark AND p.body <> w.b AND p.page_index <> ALL(in_same)
        ORDER BY p.page_index;
    IF FOUND THEN
        RETURN;
    END IF;
    IF 0 < ANY(in_write_starts) AND (SELECT s.body::json -> 'memci_commit' ->> 0 FROM memci_state s
            WHERE s.namespace = in_ns) IS DISTINCT FROM in_tail_after THEN
        RETURN QUERY SELECT 'stale', v_revision, NULL::bigint, NULL::text;
        RETURN;
    END IF;
    IF in_forgotten_through > v_forgotten THEN
        DELETE FROM memci_pages p WHERE p.namespace = in_ns AND p.page_index <= in_forgotten_through;
    END IF;
    INSERT INTO memci_pages AS p (namespace, page_index, body)
        SELECT in_ns, w.i, w.b FROM unnest(in_indices, in_bodies) AS w(i, b)
        ON CONFLICT (namespace, page_index) DO UPDATE SET body = excluded.body
        WHERE p.page_index > v_mark AND p.body <> excluded.body;
    INSERT INTO memci_state AS s (namespace, revision, pages_through, forgotten_through, body)
        VALUES (in_ns, in_stored_revision, in_pages_through, in_forgotten_through, in_body)
        ON CONFLICT (namespace) DO UPDATE SET revision = excluded.revision,
            pages_through = excluded.pages_through, forgotten_through = excluded.forgotten_through,
            body = excluded.body;
    DELETE FROM memci_state_tails t WHERE t.namespace = in_ns AND (t.key <> ALL(in_tail_keys)
        OR t.key IN (SELECT w.k FROM unnest(in_write_keys, in_write_starts) AS w(k, st) WHERE w.st = 0));
    INSERT INTO memci_state_tails (namespace, key, start, text)
        SELECT in_ns, w.k, w.st, w.tx FROM unnest(in_write_keys, in_write_starts, in_write_texts) AS w(k, st, tx);
    IF in_ttl IS NULL THEN
        DELETE FROM memci_expiry e WHERE e.namespace = in_ns;
    ELSE
        INSERT INTO memci_expiry AS e (namespace, expires_at) VALUES (in_ns, now() + make_interval(secs => in_ttl))
            ON CONFLICT (namespace) DO UPDATE SET expires_at = excluded.expires_at;
    END IF;
    RETURN QUERY SELECT 'done', v_revision, NULL::bigint, NULL::text;
END
$$"""
# Made by the first store to open a database without it (under the schema lock); a store whose
# role may not create functions finds it there.
_HAS_COMMIT_FUNCTION = f"SELECT to_regproc('{COMMIT_FUNCTION}') IS NOT NULL"
_CALL_COMMIT = (
    f"SELECT out_outcome, out_revision, out_index, out_text FROM {COMMIT_FUNCTION}(%(ns)s, %(revision)s::bigint, "
    "%(stored_revision)s::bigint, %(pages_through)s::bigint, %(forgotten_through)s::bigint, %(body)s::text, "
    "%(indices)s::bigint[], %(bodies)s::text[], %(same)s::bigint[], %(ttl)s::double precision, "
    "%(tail_keys)s::text[], %(tail_after)s::text, %(write_keys)s::text[], %(write_starts)s::bigint[], "
    "%(write_texts)s::text[])"
)
# Each write sets the namespace's expiry from the writing store's ttl (None: it no longer expires).
_SET_EXPIRY = (
    "INSERT INTO memci_expiry (namespace, expires_at) VALUES (%(ns)s, now() + make_interval(secs => %(ttl)s)) "
    "ON CONFLICT (namespace) DO UPDATE SET expires_at = excluded.expires_at"
)
_CLEAR_EXPIRY = "DELETE FROM memci_expiry WHERE namespace = %(ns)s"
PURGE_EXPIRED = (
    "WITH gone AS (DELETE FROM memci_expiry WHERE expires_at <= now() RETURNING namespace), "
    "p AS (DELETE FROM memci_pages WHERE namespace IN (SELECT namespace FROM gone)), "
    "s AS (DELETE FROM memci_state WHERE namespace IN (SELECT namespace FROM gone)), "
    "t AS (DELETE FROM memci_state_tails WHERE namespace IN (SELECT namespace FROM gone)) "
    "SELECT count(*) FROM gone"
)


@dataclass(frozen=True, slots=True)
class Query:
    """One statement of a transaction's steps, and what its steps want back: its rows
    (``"rows"``), its row count (``"count"``) or nothing (None)."""

    sql: str
    params: dict[str, Any]
    answer: Literal["rows", "count"] | None = None


#: Steps of a transaction: they yield batches of queries, get back each query's answer, and return a
#: value. A batch is sent in one round trip (psycopg's pipeline mode); a batch that wants no answer
#: is not even waited for: it goes with the next one, or with the COMMIT.
Steps = Generator[list[Query], list[Any], T]


def open_steps() -> Steps[int]:
    """Create the tables if missing (under a lock: many processes open at once) and return the
    stored schema version."""
    (*_, rows, has_function) = yield [
        Query(_SCHEMA_LOCK, {}),
        *(Query(statement, {}) for statement in _SCHEMA),
        Query("SELECT version FROM memci_schema", {}, "rows"),
        Query(_HAS_COMMIT_FUNCTION, {}, "rows"),
    ]
    if not has_function[0][0]:
        yield [Query(_CREATE_COMMIT_FUNCTION, {})]
    if not rows:
        yield [Query("INSERT INTO memci_schema (version) VALUES (%(v)s)", {"v": SCHEMA_VERSION})]
        return SCHEMA_VERSION
    if len(rows) != 1 or type(rows[0][0]) is not int:
        raise StorageError(f"corrupt memci_schema table: {repr_of(rows)}", "memci_schema")
    version: int = rows[0][0]
    if version == 1:  # no tails yet: the table is made above; an older memci must not read tails
        yield [Query("UPDATE memci_schema SET version = %(v)s", {"v": SCHEMA_VERSION})]
        return SCHEMA_VERSION
    return version


def _expiry(namespace: str, ttl: float | None) -> Query:
    if ttl is None:
        return Query(_CLEAR_EXPIRY, {"ns": namespace})
    return Query(_SET_EXPIRY, {"ns": namespace, "ttl": ttl})


def insert_page_steps(namespace: str, index: int, text: str, ttl: float | None) -> Steps[str | None]:
    """Store ``text`` under ``index`` unless a page is there; return that page's text if one is."""
    ns = {"ns": namespace}
    _, _, inserted, _ = yield [
        Query(_NAMESPACE_LOCK, ns),
        Query(_PURGE_AND_MARKS, ns),
        Query(_INSERT_PAGE_ONCE, {**ns, "index": index, "body": text}, "count"),
        _expiry(namespace, ttl),
    ]
    if inserted == 1:
        return None
    (rows,) = yield [Query(SELECT_PAGE, {**ns, "index": index}, "rows")]
    return str(rows[0][0]) if rows else None


def commit_steps(
    namespace: str, commit: Commit, tails: TailPlan, ttl: float | None, where: Callable[..., str]
) -> Steps[None]:
    """Carry out ``commit``: one call of the server's commit function (:data:`COMMIT_FUNCTION`), a
    transaction of its own (one round trip, then the COMMIT). A conflict that finds this very commit
    in the stored state's trail is done (its reply was lost before); another is a
    :class:`~memci.ConflictError`. A committed page stored with other text is compared as JSON: the
    same page (key order aside) is left as stored and the call made again, another is refused.
    ``tails``: the state's long texts (:mod:`memci.storage.postgres_tails`), appended or rewritten."""
    same: list[int] = []
    amended: list[Query] = []
    while True:
        params = {**_commit_params(namespace, commit, ttl, same), **tails.params()}
        (rows,) = yield [Query(_CALL_COMMIT, params, "rows")]
        outcome, stored_revision = rows[0][0], rows[0][1]
        if outcome == "done":
            if amended:  # after the commit (autocommit), each over the text it was compared with: a
                # crash between leaves the page without its vector, embedded again at the next load
                yield amended
            return
        if outcome == "stale":  # the stored tails are not those this store appends to
            tails = tails.rewritten()
            continue
        if outcome == "conflict":
            if commit.landed(rows[0][3]):
                return  # this very commit, applied before its reply was lost
            commit.check(stored_revision, where)  # a ConflictError
            raise AssertionError("unreachable")  # pragma: no cover
        pages = {index: (text, page) for index, text, page in commit.pages}
        for _, _, index, stored in rows:  # 'differs': committed pages stored with other text
            text, page = pages[index]
            if adds_vector(stored, page):  # the vector written back for a page stored without one
                amended.append(Query(_AMEND_PAGE, {"ns": namespace, "index": index, "body": text, "old": stored}))
            else:
                check_stored(stored, page, functools.partial(where, index))
            same.append(index)


def _commit_params(namespace: str, commit: Commit, ttl: float | None, same: list[int]) -> dict[str, Any]:
    return {
        "ns": namespace,
        "revision": commit.revision,
        "stored_revision": commit.revision or 0,
        "pages_through": commit.pages_through,
        "forgotten_through": commit.forgotten_through,
        "body": commit.state_text,
        "indices": [index for index, _, _ in commit.pages],
        "bodies": [text for _, text, _ in commit.pages],
        "same": same,
        "ttl": ttl,
    }


def check_options(namespace: object, ttl: object, timeout: object, pool_size: object) -> float | None:
    """:class:`StorageError` naming the option that is not one; the ttl in seconds (or None)."""
    check_name(namespace, "namespace")
    seconds = check_seconds(ttl.total_seconds() if isinstance(ttl, timedelta) else ttl, "ttl", optional=True)
    check_seconds(timeout, "timeout")
    if type(pool_size) is not int or not 1 <= pool_size <= 1000:
        raise StorageError(f"pool_size must be an int from 1 to 1000, got {repr_of(pool_size)}", "pool_size")
    return seconds


def connect_timeout(timeout: float) -> int:
    """libpq's ``connect_timeout`` (whole seconds, at least 1) for a store's ``timeout``."""
    return max(1, math.ceil(timeout))


def place_of(dsn: str) -> str:
    """Where a connection string points (``host:port/dbname``), for messages: never its password.
    :class:`StorageError` if it is not a PostgreSQL connection string or URL."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # psycopg's message may quote the string, password and all
        raise StorageError(
            "dsn is not a PostgreSQL connection string ('host=... dbname=...') or URL ('postgresql://...')", "dsn"
        ) from None
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


def check_dsn(target: object, store: str, pool_kind: type) -> None:
    """:class:`StorageError` unless ``target`` is a connection string or a pool of ``pool_kind``."""
    if not isinstance(target, str | pool_kind):
        raise StorageError(
            f"{store}: target must be a PostgreSQL connection string or URL, or a "
            f"{pool_kind.__module__}.{pool_kind.__name__}, got {type(target).__name__}",
            "target",
        )


class PostgresTarget:
    """What :class:`PostgresStorage` and the async store share: their checked options, where they
    point (``host:port/dbname``, never a password) and how their messages name a page."""

    namespace: str
    ttl: float | None
    _dsn: str | None
    _place: str
    _timeout: float
    _pool_size: int
    _errors: type[Exception]
    _unsure: type[Exception]
    _trail: tuple[str, ...]
    #: The tails of the state this store last read or wrote (:mod:`memci.storage.postgres_tails`).
    _tails: Tails

    def _configure(
        self, target: object, namespace: object, ttl: object, timeout: object, pool_size: object, *, pool_kind: str
    ) -> None:
        """Check the options (:class:`StorageError`) and keep them; ``pool_kind``: the pool class
        of psycopg_pool a ``target`` may be instead of a connection string."""
        name = type(self).__name__
        with needs_extra("postgres", name):
            import psycopg
            import psycopg_pool

        self.ttl = check_options(namespace, ttl, timeout, pool_size)
        check_dsn(target, name, getattr(psycopg_pool, pool_kind))
        self.namespace = namespace  # type: ignore[assignment]  # checked above
        self._timeout, self._pool_size = timeout, pool_size  # type: ignore[assignment]
        self._dsn = target if isinstance(target, str) else None
        self._place = place_of(target if isinstance(target, str) else str(target.conninfo))  # type: ignore[attr-defined]
        self._errors, self._unsure = psycopg.Error, psycopg.OperationalError
        self._tails = Tails()

    def __repr__(self) -> str:
        namespace = f", namespace={repr_of(self.namespace)}" if self.namespace else ""
        return f"{type(self).__name__}({self._place!r}{namespace})"

    def _stored_state(self, rows: list[tuple[Any, ...]]) -> dict[str, Any] | None:
        """The state :data:`SELECT_STATE` read (its tails put back), or None; its commit trail and
        tails become this store's."""
        if not rows:
            return None
        body, tails = rows[0]
        state, self._trail = decode_stored_state(body, self._where)
        self._tails.loaded(state, [(key, text, int(parts)) for key, text, parts in tails], self._trail)
        return state

    def _planned(self, state: dict[str, Any], pages: Iterable[dict[str, Any]]) -> tuple[Commit, TailPlan]:
        """The commit of a save of ``state`` and ``pages``, with the state's tails taken out."""
        tails = self._tails.plan(state)
        return commit_of(tails.state, pages, self._trail), tails

    def _saved(self, commit: Commit, tails: TailPlan) -> None:
        """Take the commit just saved as the state this store last wrote."""
        self._trail = commit.trail
        self._tails.written(tails, commit.commit_id)

    def _where(self, index: int | None = None) -> str:
        shown = f"[{self.namespace}]" if self.namespace else ""
        return f"{self._place}{shown}: " + ("state" if index is None else f"page {index}")


class PostgresStorage(PostgresTarget, JsonStore):
    """Archived pages and the system state of one conversation (``namespace``) in PostgreSQL.

    ``target`` is a connection string (``"host=... dbname=..."`` or ``"postgresql://..."``; the store
    opens a pool of up to ``pool_size`` connections and closes it) or a ``psycopg_pool.ConnectionPool``
    (shared by many stores, one per conversation; :meth:`close` leaves it open; its connections must
    be autocommit). ``ttl`` (seconds or a ``timedelta``): the conversation, its state and every page,
    expires ``ttl`` after its last write, and reads as empty from then on. ``timeout`` bounds the
    wait for a connection. A database that cannot be reached, or memci tables of a newer memci,
    raise :class:`~memci.StorageError`.
    """

    _pool: psycopg_pool.ConnectionPool[Any]
    _owns_pool: bool

    def __init__(
        self,
        target: str | psycopg_pool.ConnectionPool[Any],
        *,
        namespace: str = "",
        ttl: float | timedelta | None = None,
        timeout: float = 30.0,
        pool_size: int = 4,
    ) -> None:
        super().__init__()
        self._configure(target, namespace, ttl, timeout, pool_size, pool_kind="ConnectionPool")
        self._options: dict[str, Any] = {"namespace": namespace, "ttl": ttl, "timeout": timeout, "pool_size": pool_size}
        import psycopg
        import psycopg_pool

        if isinstance(target, str):
            # The tables are made on a connection of its own: a server that cannot be reached fails
            # here at once, where a pool would retry in the background until its timeout.
            try:
                with psycopg.connect(target, autocommit=True, connect_timeout=connect_timeout(timeout)) as conn:
                    version = self._run_transaction(conn, open_steps)
            except psycopg.Error as e:
                raise StorageError(f"{self._place}: cannot reach PostgreSQL: {e}", self._place) from None
            self._pool = psycopg_pool.ConnectionPool(
                target, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, timeout=timeout, open=True
            )
            self._owns_pool = True
            # A store dropped without close() still closes its pool (and stops its threads), in the
            # thread that dropped it rather than in whichever thread the pool's own collection runs.
            self._close_pool = weakref.finalize(self, self._pool.close)
        else:
            self._pool, self._owns_pool = target, False
            version = self._transaction("cannot create the memci tables", open_steps)
        if version > SCHEMA_VERSION:
            self._release()
            raise StorageError(
                f"{self._place}: written by a newer memci (schema {version}, this one reads {SCHEMA_VERSION})",
                self._place,
            )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) by its connection string and options when it was opened from one
        (the string, with any password in it, travels in the pickle); one made on a pool cannot be."""
        if self._dsn is None:
            return super().__reduce__()
        return (functools.partial(PostgresStorage, self._dsn, **self._options), ())

    def _query(self, what: str, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The rows of one read (autocommit)."""
        try:
            with self._pool.connection() as conn:
                rows: list[tuple[Any, ...]] = conn.execute(sql, params).fetchall()
                return rows
        except self._errors as e:
            raise StorageError(f"{self._place}: {what}: {e}", self._place) from e

    def _transaction(self, what: str, steps: Callable[[], Steps[T]], *, calls: bool = False) -> T:
        """Run ``steps()`` in one transaction (``calls``: each of its statements a transaction of its
        own, :meth:`_run_calls`); when its connection fails, again on another (the steps recognise a
        commit that landed before its reply was lost)."""

        def once() -> T:
            with self._pool.connection() as conn:
                return (self._run_calls if calls else self._run_transaction)(conn, steps)

        try:
            return settled(once, self._unsure)
        except self._errors as e:
            raise StorageError(f"{self._place}: {what}: {e}", self._place) from e

    @staticmethod
    def _run_transaction(conn: psycopg.Connection[Any], steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()`` in one transaction on ``conn``, in pipeline mode: BEGIN goes with the first
        batch, COMMIT with the last."""
        with conn.pipeline() as pipeline, conn.transaction():
            return _run(conn, pipeline, steps())

    @staticmethod
    def _run_calls(conn: psycopg.Connection[Any], steps: Callable[[], Steps[T]]) -> T:
        """Run ``steps()``, whose every batch is one statement, each in a transaction of its own on
        ``conn`` (autocommit): one round trip a statement, with no BEGIN or COMMIT to send."""
        return _drive(
            steps(), lambda batch: [answer_of(conn.execute(query.sql, query.params), query) for query in batch]
        )

    def _insert_page_text(self, index: int, text: str) -> str | None:
        return self._transaction(
            f"cannot write page {index}", lambda: insert_page_steps(self.namespace, index, text, self.ttl)
        )

    def _read_page_text(self, index: int) -> str | None:
        rows = self._query(f"cannot read page {index}", SELECT_PAGE, {"ns": self.namespace, "index": index})
        return str(rows[0][0]) if rows else None

    def _list_page_indices(self) -> list[int]:
        return [int(row[0]) for row in self._query("cannot list the pages", LIST_PAGES, {"ns": self.namespace})]

    def _commit(self, commit: Commit) -> None:
        self._save(commit, TailPlan(None))

    def _save(self, commit: Commit, tails: TailPlan) -> None:
        self._transaction(
            "cannot save the state",
            lambda: commit_steps(self.namespace, commit, tails, self.ttl, self._where),
            calls=True,
        )

    def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        """:meth:`JsonStore.save_state <memci.storage.json_store.JsonStore.save_state>`, writing only
        the end a long text of the state grew by (:mod:`memci.storage.postgres_tails`)."""

        def work() -> None:
            commit, tails = self._planned(state, pages)
            self._save(commit, tails)
            self._saved(commit, tails)

        self._locked(work)

    def load_state(self) -> dict[str, Any] | None:
        """The last state saved (a new dict, its tails joined back), or None: one query."""
        return self._locked(
            lambda: self._stored_state(self._query("cannot read the state", SELECT_STATE, {"ns": self.namespace}))
        )

    def _release(self) -> None:
        if self._owns_pool:
            self._close_pool()

    def _read_pages_text(self, indices: list[int]) -> list[tuple[int, str | bytes]]:
        """Every page among ``indices`` in one query: a 10k-page conversation loads in one round trip."""
        return self._query("cannot read pages", SELECT_PAGES, {"ns": self.namespace, "indices": indices})

    def purge_expired(self) -> int:
        """Delete every expired namespace of the database (any store's, not only this one's), and
        return how many: expired rows read as empty already, this gives their space back. Run it
        from a periodic job."""
        rows = self._locked(lambda: self._query("cannot purge expired namespaces", PURGE_EXPIRED, {}))
        return int(rows[0][0])


def _run(conn: psycopg.Connection[Any], pipeline: psycopg.Pipeline, steps: Steps[T]) -> T:
    """Drive ``steps``: each batch sent at once, and waited for only when a query wants an answer."""

    def send(batch: list[Query]) -> list[Any]:
        cursors = [conn.execute(query.sql, query.params) for query in batch]
        if any(query.answer for query in batch):
            pipeline.sync()
        return [answer_of(cursor, query) for cursor, query in zip(cursors, batch, strict=True)]

    return _drive(steps, send)


def _drive(steps: Steps[T], send: Callable[[list[Query]], list[Any]]) -> T:
    """Run ``steps``, each batch it yields through ``send``, which returns the batch's answers."""
    batch = advance(steps, None)
    while not isinstance(batch, Done):
        batch = advance(steps, send(batch))
    return batch.value


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """What steps returned, once they yield no more batches."""

    value: T


def advance(steps: Steps[T], answers: list[Any] | None) -> list[Query] | Done[T]:
    """The next batch ``steps`` yields, given the answers to the last one (None to start them), or
    :class:`Done` with their value."""
    try:
        return steps.send(answers)  # type: ignore[arg-type]
    except StopIteration as done:
        return Done(done.value)


def answer_of(cursor: Any, query: Query) -> Any:
    """What ``query`` wants back from ``cursor`` (after its results arrived)."""
    if query.answer == "rows":
        return cursor.fetchall()
    return cursor.rowcount if query.answer == "count" else None
