"""The async protocol of the stores: :class:`AsyncStorage`, the :class:`~memci.storage.Storage`
protocol with every method a coroutine, for agents that run on asyncio.

Three kinds implement it: :class:`~memci.storage.AsyncSqliteStorage` (``aiosqlite``; the file format
of :class:`~memci.SqliteStorage`), :class:`~memci.storage.AsyncRedisStorage` (``redis.asyncio``; the
keys of :class:`~memci.RedisStorage`) and :class:`~memci.storage.ThreadedStorage`, which runs any
sync store in a thread. Pages, states, the write-once rule and the revision compare-and-set are the
sync protocol's, exactly. Semantics and guarantees: ``docs/storage.md``, "Async".
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

__all__ = ["AsyncStorage", "async_pages_of", "is_async_store"]


def is_async_store(storage: object) -> bool:
    """Whether ``storage`` is an :class:`AsyncStorage` (its methods are coroutines), not a sync
    :class:`~memci.storage.Storage`: the one test every face that takes either makes."""
    return inspect.iscoroutinefunction(getattr(storage, "save_state", None))


@runtime_checkable
class AsyncStorage(Protocol):
    """Archived pages (each written once) and the whole system state (replaced atomically), awaited.

    ``isinstance`` checks only that the methods exist (a sync store has them too): to tell the two
    apart, :func:`is_async_store`."""

    async def put_page(self, index: int, page: dict[str, Any]) -> None:
        """Store an archived page under ``index`` (a positive int), once."""

    async def get_page(self, index: int) -> dict[str, Any] | None:
        """The page stored under ``index``, or None."""

    async def page_indices(self) -> list[int]:
        """The indices of the stored pages, ascending."""

    async def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        """Write ``pages`` and replace the whole system state, as one atomic commit; a compare-and-set
        on ``state["revision"]`` when it has one (:class:`~memci.ConflictError` over any revision
        but ``revision - 1``, nothing written)."""

    async def load_state(self) -> dict[str, Any] | None:
        """The last state saved, or None."""

    async def close(self) -> None:
        """Release the store."""


async def async_pages_of(storage: AsyncStorage, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The pages ``storage`` holds among ``indices``, by index: its ``get_pages`` when it has one,
    else a ``get_page`` per index (as :func:`~memci.storage.protocol.pages_of`)."""
    get_pages = getattr(storage, "get_pages", None)
    if get_pages is not None:
        found: dict[int, dict[str, Any]] = await get_pages(indices)
        return found
    pages = {}
    for index in indices:
        page = await storage.get_page(index)
        if page is not None:
            pages[index] = page
    return pages
