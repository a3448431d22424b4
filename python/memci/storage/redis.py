"""``RedisStorage``: pages and state in Redis, so that many agent workers share one store.

Keys, under a ``prefix`` (default ``"memci:"``; one prefix per agent or conversation):

- ``PREFIX schema``: the layout version (:data:`SCHEMA_VERSION`), written on first use;
- ``PREFIX pages``: a hash, field = the page index in decimal, value = the page's JSON;
- ``PREFIX state``: a string, the state's JSON;
- ``PREFIX meta``: a hash, the stored state's ``revision`` and ``pages_through``.

``put_page`` writes with ``HSETNX`` (write-once, atomic even between workers racing on the same
index). A save is one optimistic transaction (``WATCH`` the three keys, check the stored revision and
the committed pages, then ``MULTI``/``EXEC`` the pages, the state and the meta): of two workers
saving over the same revision one wins and the other gets :class:`~memci.ConflictError`, and a
reader sees the old state or the new one, never a mix. A store of schema 1 (no meta) is upgraded
when opened: its pages are taken as committed. Redis's
own persistence (RDB snapshots, AOF) decides what survives a Redis restart. Needs the ``redis``
package: ``pip install 'memci[redis]'``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from memci._optional import needs_extra
from memci.errors import StorageError, repr_of
from memci.storage.arguments import check_name, url_shown
from memci.storage.json_store import COMMIT_ATTEMPTS, Commit, JsonStore

if TYPE_CHECKING:
    import redis

__all__ = [
    "META_FIELDS",
    "SCHEMA_VERSION",
    "RedisStorage",
    "client_place",
    "open_client",
    "page_indices_of",
    "queue_commit",
    "redis_keys",
    "schema_version_of",
    "stored_marks",
]

#: The layout version written under ``PREFIX schema``; a newer one is refused, version 1 upgraded.
SCHEMA_VERSION = 2

T = TypeVar("T")

#: The names of a store's keys, each under the prefix.
KEY_NAMES = ("schema", "pages", "state", "meta")


def redis_keys(prefix: object) -> dict[str, str]:
    """The keys of the store under ``prefix``, by name (:data:`KEY_NAMES`)."""
    checked = check_name(prefix, "prefix")
    return {name: f"{checked}{name}" for name in KEY_NAMES}


def open_client(target: object, kind: Any, store: str, other: tuple[Any, str]) -> tuple[Any, bool]:
    """The client of a store and whether the store owns it: a URL opens a new ``kind`` client (owned);
    a ``kind`` client is shared. Anything else is a :class:`StorageError`, pointing a client of the
    ``other`` kind to the store that takes it (``other``: that client class, that store's name)."""
    if isinstance(target, str):
        try:
            return kind.from_url(target), True
        except (ValueError, TypeError, UnicodeError):  # redis-py's message quotes the URL, password and all
            shown = url_shown(target)
            raise StorageError(
                f"{shown}: not a Redis URL (redis://[[user]:password@]host[:port][/db], rediss://..., unix://...)",
                shown,
            ) from None
    if isinstance(target, kind):
        return target, False
    hint = (
        f" (for a {other[0].__module__}.{other[0].__name__} client use {other[1]})"
        if isinstance(target, other[0])
        else ""
    )
    raise StorageError(
        f"{store}: target must be a Redis URL or a {kind.__module__}.{kind.__name__} client, "
        f"got {type(target).__name__}{hint}",
        "target",
    )


def client_place(client: Any) -> str:
    """Where a Redis client connects (``host:port/db`` or a socket path), for messages."""
    pool: Any = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", {}) if pool is not None else {}
    return str(kwargs.get("path") or f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}")


def schema_version_of(raw: object, key: str, where: str) -> int:
    """The schema version stored under ``key`` as ``raw``; :class:`StorageError` if it is not one
    this memci reads."""
    try:
        version: int = int(raw)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise StorageError(f"{where}: {key} holds {raw!r}, not a memci schema version", key) from None
    if version > SCHEMA_VERSION:
        raise StorageError(
            f"{where}: written by a newer memci (schema {version}, this one reads {SCHEMA_VERSION})", key
        )
    return version


def page_indices_of(fields: list[Any]) -> list[int]:
    """The page indices among the fields of the pages hash (others are ignored), ascending."""
    found = []
    for field in fields:
        name = field.decode("ascii", "replace") if isinstance(field, bytes) else str(field)
        if name.isdecimal() and name.isascii() and str(int(name)) == name and int(name) > 0:
            found.append(int(name))
    return sorted(found)


#: The fields of the meta hash: the stored state's revision and page marks.
META_FIELDS = ("revision", "pages_through", "forgotten_through")


def stored_marks(raw: list[Any], key: str, where: str) -> tuple[int, int, int]:
    """The stored revision, ``pages_through`` and ``forgotten_through`` read from the meta hash's
    :data:`META_FIELDS` (0 where absent)."""
    try:
        revision, pages_through, forgotten_through = (int(value or 0) for value in raw)
    except ValueError:
        raise StorageError(f"{where}: {key} holds {raw!r}, not a revision and page marks", key) from None
    return revision, pages_through, forgotten_through


def queue_commit(
    pipe: Any, keys: dict[str, str], commit: Commit, writes: list[tuple[int, str]], forget: list[int]
) -> None:
    """Queue the writes of ``commit`` on a pipeline in ``MULTI``: the pages it forgets deleted, its
    pages, the state, the meta."""
    if forget:
        pipe.hdel(keys["pages"], *map(str, forget))
    for index, text in writes:
        pipe.hset(keys["pages"], str(index), text)
    pipe.set(keys["state"], commit.state_text)
    pipe.hset(keys["meta"], "revision", commit.revision or 0)
    pipe.hset(keys["meta"], "pages_through", commit.pages_through)
    pipe.hset(keys["meta"], "forgotten_through", commit.forgotten_through)


class RedisStorage(JsonStore):
    """Archived pages and the system state in Redis, under ``prefix``.

    ``target`` is a URL (``redis://host:6379/0``, ``rediss://...``, ``unix:///path``) or a
    ``redis.Redis`` client (shared: :meth:`close` leaves a client it was given open). A Redis that
    cannot be reached, or values under the prefix that are not memci's, raise
    :class:`~memci.StorageError` naming the place.
    """

    prefix: str
    _client: redis.Redis
    _owns_client: bool

    def __init__(self, target: str | redis.Redis = "redis://localhost:6379/0", *, prefix: str = "memci:") -> None:
        super().__init__()
        with needs_extra("redis", "RedisStorage"):
            import redis
        self._keys = redis_keys(prefix)
        self.prefix = prefix
        self._errors: tuple[type[Exception], ...] = (redis.RedisError,)
        self._watch_error: type[Exception] = redis.WatchError
        self._lost: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
        #: The URL it was opened from (None when given a client): a pickle reopens it.
        self._url = target if isinstance(target, str) else None
        import redis.asyncio

        self._client, self._owns_client = open_client(
            target, redis.Redis, "RedisStorage", (redis.asyncio.Redis, "memci.storage.AsyncRedisStorage")
        )
        try:
            self._check_schema()
        except BaseException:
            self._release()
            raise

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) by its URL and prefix when it was opened from a URL (the URL,
        with any password in it, travels in the pickle); one made on a client cannot be."""
        if self._url is None:
            return super().__reduce__()
        return (functools.partial(RedisStorage, self._url, prefix=self.prefix), ())

    def _call(self, what: str, work: Callable[[], T]) -> T:
        try:
            return work()
        except self._errors as e:
            raise StorageError(f"{self!r}: {what}: {e}", repr(self)) from e

    def _check_schema(self) -> None:
        key = self._keys["schema"]
        self._call("cannot reach Redis", lambda: self._client.set(key, SCHEMA_VERSION, nx=True))
        raw = self._call("cannot read the schema", lambda: self._client.get(key))
        # Every page schema 1 wrote was written at once: take them all as committed.
        if schema_version_of(raw, key, repr(self)) == 1:
            mark = max(self._list_page_indices(), default=0)
            meta_key = self._keys["meta"]
            self._call("cannot upgrade the store", lambda: self._client.hset(meta_key, "pages_through", mark))
            self._call("cannot upgrade the store", lambda: self._client.set(key, SCHEMA_VERSION))

    def __repr__(self) -> str:
        return f"RedisStorage({client_place(self._client)!r}, prefix={repr_of(self.prefix)})"

    def _where(self, index: int | None = None) -> str:
        return f"{self!r}: " + ("state" if index is None else f"page {index}")

    def _insert_page_text(self, index: int, text: str) -> str | bytes | None:
        key, field = self._keys["pages"], str(index)

        def work() -> str | bytes | None:
            if self._client.hsetnx(key, field, text):
                return None
            existing: str | bytes | None = self._client.hget(key, field)
            return existing

        return self._call(f"cannot write page {index}", work)

    def _read_page_text(self, index: int) -> str | bytes | None:
        key = self._keys["pages"]
        text: str | bytes | None = self._call(f"cannot read page {index}", lambda: self._client.hget(key, str(index)))
        return text

    def _list_page_indices(self) -> list[int]:
        key = self._keys["pages"]
        fields: list[str | bytes] = self._call("cannot list the pages", lambda: self._client.hkeys(key))
        return page_indices_of(fields)

    def _read_state_text(self) -> str | bytes | None:
        key = self._keys["state"]
        text: str | bytes | None = self._call("cannot read the state", lambda: self._client.get(key))
        return text

    def _commit(self, commit: Commit) -> None:
        pages, state, meta = self._keys["pages"], self._keys["state"], self._keys["meta"]

        def work() -> None:
            with self._client.pipeline(transaction=True) as pipe:
                lost = 0
                while True:
                    try:
                        pipe.watch(pages, state, meta)  # type: ignore[no-untyped-call]
                        raw = pipe.hmget(meta, *META_FIELDS)
                        stored_revision, stored_mark, forgotten = stored_marks(raw, meta, repr(self))
                        if commit.check(stored_revision, self._where, lambda: pipe.get(state)):
                            return  # this very commit, applied before its reply was lost
                        writes = commit.pages_to_write(
                            stored_mark, lambda index: pipe.hget(pages, str(index)), self._where
                        )
                        # Listing the pages only for a save that forgets more than the stored one.
                        forget = (
                            commit.pages_to_forget(page_indices_of(pipe.hkeys(pages)))
                            if commit.forgotten_through > forgotten
                            else []
                        )
                        pipe.multi()
                        queue_commit(pipe, self._keys, commit, writes, forget)
                        pipe.execute()
                        return
                    except self._watch_error:
                        continue  # a key changed under us (or the connection dropped): check again
                    except self._lost:
                        # The reply to EXEC was lost: did it apply? Checking again tells (see above).
                        lost += 1
                        if lost == COMMIT_ATTEMPTS:
                            raise
                        pipe.reset()

        self._call("cannot save the state", work)

    def _release(self) -> None:
        if self._owns_client:
            self._client.close()
