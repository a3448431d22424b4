"""``AsyncRedisStorage``: :class:`~memci.RedisStorage`'s keys, awaited, over ``redis.asyncio``.

The same keys, schema and rules as the sync store (the key layout, the meta and schema parsing and
the queued writes of a save are :mod:`memci.storage.redis`'s), so sync and async workers share one
prefix: ``put_page`` is one ``HSETNX``, a save is ``WATCH`` on the pages, state and meta keys, the
revision check, then ``MULTI``/``EXEC``; of two workers saving over the same revision one wins and
the other gets :class:`~memci.ConflictError`. Needs ``pip install 'memci[redis]'``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from memci._optional import needs_extra
from memci.errors import StorageError, repr_of
from memci.storage.async_json_store import AsyncJsonStore, existing_pages
from memci.storage.json_store import COMMIT_ATTEMPTS, Commit
from memci.storage.redis import (
    META_FIELDS,
    SCHEMA_VERSION,
    client_place,
    open_client,
    page_indices_of,
    queue_commit,
    redis_keys,
    schema_version_of,
    stored_marks,
)

if TYPE_CHECKING:
    import redis.asyncio

__all__ = ["AsyncRedisStorage"]

T = TypeVar("T")


class AsyncRedisStorage(AsyncJsonStore):
    """Archived pages and the system state in Redis under ``prefix``, awaited.

    ``target`` is a URL or a ``redis.asyncio.Redis`` client (shared: :meth:`close` leaves a client it
    was given open). The schema is checked (and a schema 1 prefix upgraded) at the first call, or by
    ``await store.open()`` or ``async with``; a Redis that cannot be reached raises
    :class:`~memci.StorageError` then.
    """

    prefix: str
    _client: redis.asyncio.Redis
    _owns_client: bool

    def __init__(
        self, target: str | redis.asyncio.Redis = "redis://localhost:6379/0", *, prefix: str = "memci:"
    ) -> None:
        super().__init__()
        with needs_extra("redis", "AsyncRedisStorage"):
            import redis
            import redis.asyncio
        self._keys = redis_keys(prefix)
        self.prefix = prefix
        self._errors: tuple[type[Exception], ...] = (redis.RedisError,)
        self._watch_error: type[Exception] = redis.WatchError
        self._lost: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
        self._client, self._owns_client = open_client(
            target, redis.asyncio.Redis, "AsyncRedisStorage", (redis.Redis, "memci.RedisStorage")
        )

    def __repr__(self) -> str:
        return f"AsyncRedisStorage({client_place(self._client)!r}, prefix={repr_of(self.prefix)})"

    def _where(self, index: int | None = None) -> str:
        return f"{self!r}: " + ("state" if index is None else f"page {index}")

    async def _call(self, what: str, work: Callable[[], Awaitable[T]]) -> T:
        try:
            return await work()
        except self._errors as e:
            raise StorageError(f"{self!r}: {what}: {e}", repr(self)) from e

    async def _open(self) -> None:
        try:
            await self._check_schema()
        except BaseException:
            await self._release()
            raise

    async def _check_schema(self) -> None:
        key, client = self._keys["schema"], self._client
        await self._call("cannot reach Redis", lambda: client.set(key, SCHEMA_VERSION, nx=True))
        raw = await self._call("cannot read the schema", lambda: client.get(key))
        if schema_version_of(raw, key, repr(self)) == 1:  # schema 1 wrote its pages at once: all committed
            mark = max(await self._list_page_indices(), default=0)
            meta_key = self._keys["meta"]
            await self._call("cannot upgrade the store", lambda: client.hset(meta_key, "pages_through", mark))
            await self._call("cannot upgrade the store", lambda: client.set(key, SCHEMA_VERSION))

    async def _insert_page_text(self, index: int, text: str) -> str | bytes | None:
        key, field, client = self._keys["pages"], str(index), self._client

        async def work() -> str | bytes | None:
            if await client.hsetnx(key, field, text):
                return None
            existing: str | bytes | None = await client.hget(key, field)
            return existing

        return await self._call(f"cannot write page {index}", work)

    async def _read_page_text(self, index: int) -> str | bytes | None:
        key = self._keys["pages"]
        text: str | bytes | None = await self._call(
            f"cannot read page {index}", lambda: self._client.hget(key, str(index))
        )
        return text

    async def _list_page_indices(self) -> list[int]:
        key = self._keys["pages"]
        fields: list[Any] = await self._call("cannot list the pages", lambda: self._client.hkeys(key))
        return page_indices_of(fields)

    async def _read_state_text(self) -> str | bytes | None:
        key = self._keys["state"]
        text: str | bytes | None = await self._call("cannot read the state", lambda: self._client.get(key))
        return text

    async def _commit(self, commit: Commit) -> None:
        pages, state, meta = self._keys["pages"], self._keys["state"], self._keys["meta"]

        async def work() -> None:
            async with self._client.pipeline(transaction=True) as pipe:
                lost = 0
                while True:
                    try:
                        await pipe.watch(pages, state, meta)
                        raw = await pipe.hmget(meta, list(META_FIELDS))
                        stored_revision, stored_mark, forgotten = stored_marks(raw, meta, repr(self))
                        if not commit.follows(stored_revision):
                            if commit.landed(await pipe.get(state)):
                                return  # this very commit, applied before its reply was lost
                            commit.check(stored_revision, self._where)  # a ConflictError

                        async def read(index: int, pipe: Any = pipe) -> str | bytes | None:
                            text: str | bytes | None = await pipe.hget(pages, str(index))
                            return text

                        stored = await existing_pages(commit, read)
                        writes = commit.pages_to_write(stored_mark, stored, self._where)
                        # Listing the pages only for a save that forgets more than the stored one.
                        forget = (
                            commit.pages_to_forget(page_indices_of(await pipe.hkeys(pages)))
                            if commit.forgotten_through > forgotten
                            else []
                        )
                        pipe.multi()  # type: ignore[no-untyped-call]
                        queue_commit(pipe, self._keys, commit, writes, forget)
                        await pipe.execute()
                        return
                    except self._watch_error:
                        continue  # a key changed under us (or the connection dropped): check again
                    except self._lost:
                        lost += 1  # the reply to EXEC was lost: checking again tells whether it applied
                        if lost == COMMIT_ATTEMPTS:
                            raise
                        await pipe.reset()  # type: ignore[no-untyped-call]

        await self._call("cannot save the state", work)

    async def _release(self) -> None:
        if self._owns_client:
            await self._client.aclose()
