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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from memci.errors import StorageError
from memci.storage.json_store import Commit, JsonStore

if TYPE_CHECKING:
    import redis

__all__ = ["SCHEMA_VERSION", "RedisStorage"]

#: The layout version written under ``PREFIX schema``; a newer one is refused, version 1 upgraded.
SCHEMA_VERSION = 2

T = TypeVar("T")


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
        try:
            import redis
        except ImportError as e:
            raise ImportError("RedisStorage needs the redis package: pip install 'memci[redis]'") from e
        if not isinstance(prefix, str):
            raise StorageError(f"prefix must be a str, got {type(prefix).__name__}", "prefix")
        self.prefix = prefix
        self._errors: tuple[type[Exception], ...] = (redis.RedisError,)
        self._watch_error: type[Exception] = redis.WatchError
        #: The URL it was opened from (None when given a client): a pickle reopens it.
        self._url = target if isinstance(target, str) else None
        if isinstance(target, str):
            try:
                self._client = redis.Redis.from_url(target)
            except ValueError as e:
                raise StorageError(f"{target!r}: not a Redis URL: {e}", target) from None
            self._owns_client = True
        else:
            self._client = target
            self._owns_client = False
        self._keys = {name: f"{prefix}{name}" for name in ("schema", "pages", "state", "meta")}
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
        try:
            version = int(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise StorageError(f"{self!r}: {key} holds {raw!r}, not a memci schema version", key) from None
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"{self!r}: written by a newer memci (schema {version}, this one reads {SCHEMA_VERSION})", key
            )
        if version == 1:  # every page schema 1 wrote was written at once: take them all as committed
            mark = max(self._list_page_indices(), default=0)
            meta_key = self._keys["meta"]
            self._call("cannot upgrade the store", lambda: self._client.hset(meta_key, "pages_through", mark))
            self._call("cannot upgrade the store", lambda: self._client.set(key, SCHEMA_VERSION))

    def __repr__(self) -> str:
        pool: Any = getattr(self._client, "connection_pool", None)
        kwargs = getattr(pool, "connection_kwargs", {}) if pool is not None else {}
        where = kwargs.get("path") or f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
        return f"RedisStorage({where!r}, prefix={self.prefix!r})"

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
        return _page_fields(fields)

    def _read_state_text(self) -> str | bytes | None:
        key = self._keys["state"]
        text: str | bytes | None = self._call("cannot read the state", lambda: self._client.get(key))
        return text

    def _stored_meta(self, client: Any) -> tuple[int, int]:
        raw = client.hmget(self._keys["meta"], "revision", "pages_through")
        try:
            return (int(raw[0] or 0), int(raw[1] or 0))
        except ValueError:
            place = self._keys["meta"]
            raise StorageError(f"{self!r}: {place} holds {raw!r}, not a revision and a page mark", place) from None

    def _commit(self, commit: Commit) -> None:
        pages, state, meta = self._keys["pages"], self._keys["state"], self._keys["meta"]

        def work() -> None:
            with self._client.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        pipe.watch(pages, state, meta)  # type: ignore[no-untyped-call]
                        stored_revision, stored_mark = self._stored_meta(pipe)
                        commit.check(stored_revision, self._where)
                        writes = commit.pages_to_write(
                            stored_mark, lambda index: pipe.hget(pages, str(index)), self._where
                        )
                        # Listing the pages only for a save that forgets more than the stored one.
                        forgotten = int(pipe.hget(meta, "forgotten_through") or 0)
                        forget = (
                            commit.pages_to_forget(_page_fields(pipe.hkeys(pages)))
                            if commit.forgotten_through > forgotten
                            else []
                        )
                        pipe.multi()
                        if forget:
                            pipe.hdel(pages, *map(str, forget))
                        for index, text in writes:
                            pipe.hset(pages, str(index), text)
                        pipe.set(state, commit.state_text)
                        pipe.hset(meta, "revision", commit.revision or 0)
                        pipe.hset(meta, "pages_through", commit.pages_through)
                        pipe.hset(meta, "forgotten_through", commit.forgotten_through)
                        pipe.execute()
                        return
                    except self._watch_error:
                        continue  # a key changed under us: check again (a save in between is a conflict)

        self._call("cannot save the state", work)

    def _release(self) -> None:
        if self._owns_client:
            self._client.close()


def _page_fields(fields: Iterable[str | bytes]) -> list[int]:
    """The page indices among the pages hash's fields, ascending (other fields are ignored)."""
    found = []
    for field in fields:
        name = field.decode("ascii", "replace") if isinstance(field, bytes) else field
        if name.isdecimal() and name.isascii() and str(int(name)) == name and int(name) > 0:
            found.append(int(name))
    return sorted(found)
