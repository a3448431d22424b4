"""``RedisStorage``: pages and state in Redis, so that many agent workers share one store.

Keys, under a ``prefix`` (default ``"memci:"``; one prefix per agent or conversation):

- ``PREFIX schema``: the layout version (:data:`SCHEMA_VERSION`), written on first use;
- ``PREFIX pages``: a hash, field = the page index in decimal, value = the page's JSON;
- ``PREFIX state``: a string, the state's JSON.

A page is written with ``HSETNX`` (write-once, atomic even between workers racing on the same
index); the state with one ``SET`` (atomic: a reader sees the old state or the new one). Redis's
own persistence (RDB snapshots, AOF) decides what survives a Redis restart. Needs the ``redis``
package: ``pip install 'memci[redis]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from memci.errors import StorageError
from memci.storage.json_store import JsonStore

if TYPE_CHECKING:
    import redis

__all__ = ["SCHEMA_VERSION", "RedisStorage"]

#: The layout version written under ``PREFIX schema``; a newer one is refused.
SCHEMA_VERSION = 1

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
        if isinstance(target, str):
            try:
                self._client = redis.Redis.from_url(target)
            except ValueError as e:
                raise StorageError(f"{target!r}: not a Redis URL: {e}", target) from None
            self._owns_client = True
        else:
            self._client = target
            self._owns_client = False
        self._keys = {name: f"{prefix}{name}" for name in ("schema", "pages", "state")}
        try:
            self._check_schema()
        except BaseException:
            self._release()
            raise

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
        found = []
        for field in fields:
            name = field.decode("ascii", "replace") if isinstance(field, bytes) else field
            if name.isdecimal() and name.isascii() and str(int(name)) == name and int(name) > 0:
                found.append(int(name))
        return sorted(found)

    def _read_state_text(self) -> str | bytes | None:
        key = self._keys["state"]
        text: str | bytes | None = self._call("cannot read the state", lambda: self._client.get(key))
        return text

    def _write_state_text(self, text: str) -> None:
        key = self._keys["state"]
        self._call("cannot save the state", lambda: self._client.set(key, text))

    def _release(self) -> None:
        if self._owns_client:
            self._client.close()
