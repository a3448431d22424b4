"""The one bridge from asyncio to memci's sync code: run sync work (a context system, a page log) in a
worker thread, and let it call an :class:`~memci.storage.AsyncStorage` (or any coroutine) back on the
event loop that awaits it.

:func:`in_worker` runs the work; :class:`LoopRunner` is the way back to the loop from the worker
thread; :func:`sync_view` gives the worker a sync :class:`~memci.storage.Storage` of any store (an
async one through the loop, a sync one as it is). So the sync rules are written once and every async
face (``AsyncContextSystem``, the Agents SDK session) runs them unchanged.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast

from memci.errors import InvalidOperationError
from memci.storage.async_protocol import AsyncStorage, async_pages_of, is_async_store
from memci.storage.protocol import Storage

__all__ = ["LoopRunner", "OnLoopStorage", "in_worker", "sync_view"]

T = TypeVar("T")

_workers: ThreadPoolExecutor | None = None
_workers_lock = threading.Lock()


def _worker_pool() -> ThreadPoolExecutor:
    """The threads the work runs in: a pool of their own, not the loop's default executor. A worker
    waits for the loop to run the store's coroutines, and those may use the default executor
    (``asyncio.to_thread``): on a shared pool, enough calls at once would hold every thread, waiting
    for coroutines that wait for a thread."""
    global _workers  # noqa: PLW0603 (made once, on first use)
    with _workers_lock:
        if _workers is None:
            _workers = ThreadPoolExecutor(min(32, (os.cpu_count() or 1) + 4), thread_name_prefix="memci-context")
        return _workers


class LoopRunner:
    """The event loop the current call runs on, and the way back to it from the worker thread."""

    __slots__ = ("loop", "owner")

    def __init__(self, owner: str) -> None:
        #: Who runs on it, for the error of a call from outside its coroutines.
        self.owner = owner
        self.loop: asyncio.AbstractEventLoop | None = None

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its result (from a worker thread only)."""
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or loop.is_closed():
            coroutine.close()
            raise InvalidOperationError(
                f"{self.owner}: its async storage and summarizer are awaited only inside its own "
                f"coroutines (await the {self.owner}'s methods; do not reach its sync parts)"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


class OnLoopStorage:
    """The sync :class:`~memci.storage.Storage` a worker thread sees of an async store: each call
    awaits the store's coroutine on the loop."""

    __slots__ = ("loop", "store")

    def __init__(self, store: AsyncStorage, loop: LoopRunner) -> None:
        self.store = store
        self.loop = loop

    def put_page(self, index: int, page: dict[str, Any]) -> None:
        self.loop.run(_awaited(self.store.put_page(index, page)))

    def get_page(self, index: int) -> dict[str, Any] | None:
        return self.loop.run(_awaited(self.store.get_page(index)))

    def get_pages(self, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
        return self.loop.run(async_pages_of(self.store, list(indices)))

    def page_indices(self) -> list[int]:
        return self.loop.run(_awaited(self.store.page_indices()))

    def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        self.loop.run(_awaited(self.store.save_state(state, list(pages))))

    def load_state(self) -> dict[str, Any] | None:
        return self.loop.run(_awaited(self.store.load_state()))

    def close(self) -> None:
        self.loop.run(_awaited(self.store.close()))

    def __repr__(self) -> str:
        return repr(self.store)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def sync_view(storage: Storage | AsyncStorage, loop: LoopRunner) -> Storage:
    """``storage`` as a worker thread calls it: an async store through ``loop``, a sync one as it
    is."""
    if is_async_store(storage):
        return cast("Storage", OnLoopStorage(cast("AsyncStorage", storage), loop))
    return cast("Storage", storage)


async def in_worker(loop: LoopRunner, work: Callable[[], T]) -> T:
    """``work()`` in a worker thread (in a copy of the caller's context), its coroutines
    (``loop.run``) run on the running loop. If the
    caller is cancelled, the thread (which cannot be stopped) still finishes before this returns, so
    the next call sees nothing half-way through; then the cancellation is raised."""
    running = loop.loop = asyncio.get_running_loop()
    future = running.run_in_executor(_worker_pool(), contextvars.copy_context().run, work)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            try:
                await asyncio.wait([future])
            except asyncio.CancelledError:
                continue
        if not future.cancelled():
            future.exception()  # retrieved: the caller was cancelled, it wants no result
        raise
