"""What the async stores share: :class:`AsyncJsonStore`, the rules of
:class:`~memci.storage.json_store.JsonStore` over awaited primitives.

The rules themselves (checking and encoding a page or a state, the write-once check, the
:class:`~memci.storage.json_store.Commit` of a save) are the sync stores' functions, called here:
an async store accepts, refuses and stores exactly what its sync sibling does. A concrete store
supplies ``_open`` (connect, check the schema; run once, at the first call) and the five text
primitives as coroutines, and ``_release``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any, Self, TypeVar

from memci.errors import StorageError
from memci.storage.json_store import (
    Commit,
    check_index,
    check_stored,
    commit_of,
    decode_page,
    decode_pages,
    decode_stored_state,
    encode_page,
    refuse_pickle,
)

__all__ = ["AsyncJsonStore", "existing_pages"]

T = TypeVar("T")


async def existing_pages(
    commit: Commit, read: Callable[[int], Awaitable[str | bytes | None]]
) -> Callable[[int], str | bytes | None]:
    """What is stored at each index of ``commit``'s pages, read with ``read`` first, as the lookup
    :meth:`Commit.pages_to_write` takes."""
    stored = {index: await read(index) for index, _, _ in commit.pages}
    return stored.get


class AsyncJsonStore:
    """Base of the async stores: the shared rules over awaited text primitives. The store's calls
    are serialised by an :class:`asyncio.Lock` (a transaction of one call never interleaves with
    another's on the same store); use it from one event loop."""

    _lock: asyncio.Lock
    _closed: bool
    _opened: bool

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._closed = False
        self._opened = False
        #: The commit trail of the state this store last read or wrote (see :class:`Commit`).
        self._trail: tuple[str, ...] = ()

    # ---- what a concrete store supplies -----------------------------------------------------------

    async def _open(self) -> None:
        """Connect and check (or create) the schema; called once, under the lock, at the first call."""

    async def _insert_page_text(self, index: int, text: str) -> str | bytes | None:
        """Store ``text`` under ``index`` unless a page is there; return that page's text if one is."""
        raise NotImplementedError

    async def _read_page_text(self, index: int) -> str | bytes | None:
        raise NotImplementedError

    async def _list_page_indices(self) -> list[int]:
        raise NotImplementedError

    async def _read_state_text(self) -> str | bytes | None:
        raise NotImplementedError

    async def _commit(self, commit: Commit) -> None:
        """Carry out ``commit`` atomically, as :meth:`JsonStore._commit` says."""
        raise NotImplementedError

    async def _release(self) -> None:
        """Free what the store holds open (called once, by the first ``close``, if it was opened)."""

    def _where(self, index: int | None = None) -> str:
        """Where page ``index`` (or the state, for None) lives, for error messages."""
        return f"{type(self).__name__}: " + ("state" if index is None else f"page {index}")

    # ---- the protocol -----------------------------------------------------------------------------

    async def _locked(self, work: Callable[[], Awaitable[T]]) -> T:
        async with self._lock:
            if self._closed:
                raise StorageError(f"{self!r} is closed", repr(self))
            if not self._opened:
                await self._open()
                self._opened = True
            return await work()

    async def open(self) -> Self:
        """Connect now (else the first call does) and return the store: errors of a bad file, URL or
        schema are raised here."""
        await self._locked(_nothing)
        return self

    async def put_page(self, index: int, page: dict[str, Any]) -> None:
        """Store an archived page under ``index``, once (the same content again is a no-op, other
        content a :class:`StorageError`). O(size of the page)."""
        check_index(index)
        text = encode_page(index, page)
        existing = await self._locked(lambda: self._insert_page_text(index, text))
        check_stored(existing, page, lambda: self._where(index))

    async def get_page(self, index: int) -> dict[str, Any] | None:
        """The page stored under ``index`` (a new dict), or None. O(size of the page)."""
        check_index(index)
        text = await self._locked(lambda: self._read_page_text(index))
        return None if text is None else decode_page(text, index, lambda: self._where(index))

    async def get_pages(self, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The stored pages among ``indices``, by index (absent ones left out), read under one lock
        (a store that can read many in one query overrides :meth:`_read_pages_text`). O(size of
        the pages)."""
        wanted = [check_index(index) for index in indices]
        texts = await self._locked(lambda: self._read_pages_text(wanted))
        return decode_pages(texts, self._where)

    async def _read_pages_text(self, indices: list[int]) -> list[tuple[int, str | bytes]]:
        """(index, text) of each stored page among ``indices``: a read per page, unless overridden."""
        found = []
        for index in indices:
            text = await self._read_page_text(index)
            if text is not None:
                found.append((index, text))
        return found

    async def page_indices(self) -> list[int]:
        """The indices of the stored pages, ascending."""
        return await self._locked(self._list_page_indices)

    async def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        """Write ``pages`` and replace the system state in one atomic commit, a compare-and-set on
        ``state["revision"]``: the sync stores' :meth:`~memci.storage.json_store.JsonStore.save_state`.
        The state is checked and encoded in a thread (it can be large), off the event loop."""
        commit = await asyncio.to_thread(commit_of, state, list(pages), self._trail)

        async def work() -> None:
            await self._commit(commit)
            self._trail = commit.trail

        await self._locked(work)

    async def load_state(self) -> dict[str, Any] | None:
        """The last state saved (a new dict, decoded in a thread), or None if none was."""
        text = await self._locked(self._read_state_text)
        if text is None:
            return None
        state, self._trail = await asyncio.to_thread(decode_stored_state, text, self._where)
        return state

    async def close(self) -> None:
        """Release the store; later calls raise :class:`StorageError`. Closing twice is fine."""
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._opened:
                await self._release()

    def __reduce__(self) -> tuple[Any, ...]:
        """Refused with a :class:`StorageError`: an async store holds a connection bound to its loop."""
        refuse_pickle(self)

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def _nothing() -> None:
    return None
