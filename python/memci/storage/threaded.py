"""``ThreadedStorage``: any sync :class:`~memci.storage.Storage` as an
:class:`~memci.storage.AsyncStorage`, each call run in a thread (``asyncio.to_thread``), so that
its file, network or lock waits never block the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Self, TypeVar

from memci.errors import StorageError
from memci.storage.protocol import Storage, pages_of

__all__ = ["ThreadedStorage"]

T = TypeVar("T")


class ThreadedStorage:
    """A sync store, awaited: ``ThreadedStorage(memci.DirectoryStorage("agent"))``.

    Every call runs the store's own method in a worker thread, one call at a time (an
    :class:`asyncio.Lock`: a store of your own need not be thread-safe); its guarantees are the
    store's. :meth:`close` closes the store."""

    __slots__ = ("_lock", "store")

    store: Storage

    def __init__(self, store: Storage) -> None:
        if not isinstance(store, Storage):
            raise StorageError(
                f"ThreadedStorage: store must be a memci Storage (put_page, get_page, page_indices, "
                f"save_state, load_state, close), got {type(store).__name__}",
                "store",
            )
        self.store = store
        self._lock = asyncio.Lock()

    async def _run(self, work: Callable[[], T]) -> T:
        async with self._lock:
            return await asyncio.to_thread(work)

    async def put_page(self, index: int, page: dict[str, Any]) -> None:
        await self._run(lambda: self.store.put_page(index, page))

    async def get_page(self, index: int) -> dict[str, Any] | None:
        return await self._run(lambda: self.store.get_page(index))

    async def get_pages(self, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
        wanted = list(indices)
        return await self._run(lambda: pages_of(self.store, wanted))

    async def page_indices(self) -> list[int]:
        return await self._run(self.store.page_indices)

    async def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        batch = list(pages)
        await self._run(lambda: self.store.save_state(state, batch))

    async def load_state(self) -> dict[str, Any] | None:
        return await self._run(self.store.load_state)

    async def close(self) -> None:
        await self._run(self.store.close)

    def __repr__(self) -> str:
        return f"ThreadedStorage({self.store!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) as the store it wraps is (a memory store by its contents, a
        SQLite or directory store by its path; a store that cannot be, refuses)."""
        return (ThreadedStorage, (self.store,))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
