"""``AnyLoopLock``: an async lock that tasks on any event loop, in any thread, can share.

``asyncio.Lock`` belongs to the first loop that waits on it; a second loop then gets "is bound to a
different event loop". A session object the Agents SDK's ``Runner.run_sync`` uses from several
threads meets exactly that: each thread runs its own loop. This lock keeps its state under a
``threading.Lock`` held only for a few statements (never across an ``await``), and a waiter waits on
a future of its own loop, so no loop ever blocks on another.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from types import TracebackType

__all__ = ["AnyLoopLock"]


class AnyLoopLock:
    """A mutual-exclusion lock for coroutines on any loop: ``async with lock: ...``.

    Fair (first come, first served). A waiter cancelled before it got the lock leaves the queue; one
    cancelled after the lock was handed to it passes the lock on. A waiter whose loop has closed is
    skipped. Acquiring and releasing are O(1)."""

    __slots__ = ("_guard", "_locked", "_waiters")

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locked = False
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    def locked(self) -> bool:
        """Whether some coroutine holds the lock."""
        return self._locked

    async def acquire(self) -> None:
        """Wait until the lock is free, then take it."""
        loop = asyncio.get_running_loop()
        with self._guard:
            if not self._locked:
                self._locked = True
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._guard:
                queued = (loop, waiter) in self._waiters
                if queued:
                    self._waiters.remove((loop, waiter))
            # Not queued: the lock was handed over and the hand-over sees the cancelled waiter.
            raise

    def release(self) -> None:
        """Hand the lock to the oldest waiter (on its own loop), or free it."""
        with self._guard:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(self._hand_over, waiter)
                except RuntimeError:  # that loop has closed: nobody is waiting there any more
                    continue
                return
            self._locked = False

    def _hand_over(self, waiter: asyncio.Future[None]) -> None:
        """On the waiter's loop: wake it holding the lock, or pass the lock on if it was cancelled."""
        if waiter.done():
            self.release()
        else:
            waiter.set_result(None)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()
