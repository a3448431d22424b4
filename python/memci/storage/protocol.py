"""The protocol every store implements: where the context system keeps archived pages and its state.

:class:`Storage` is the protocol the :class:`~memci.ContextSystem` relies on; five stores implement
it: :class:`~memci.MemoryStorage` (the default), :class:`~memci.SqliteStorage` (one file, WAL,
transactions), :class:`~memci.DirectoryStorage` (one JSON file per page, each written atomically),
:class:`~memci.RedisStorage` (shared by many agent workers; needs the ``redis`` extra) and
:class:`~memci.PostgresStorage` (many conversations in one database; the ``postgres`` extra), and
:class:`~memci.EncryptedStorage` seals what any of them stores.

A page is a JSON-able dict naming its own ``index`` (what else it holds is its writer's: the
context system writes an ``ArchivedPage``); a state is a JSON-able dict with a ``version`` key, whose
head (``revision``, ``pages_through``, ``forgotten_through``) the store checks a save against and
whose body is opaque to it. :class:`~memci.storage.log.PageLog` is the one writer of heads.
Everything is stored as JSON text, never pickle; what goes in is checked
and copied, so a caller mutating its dicts afterwards changes nothing stored, and every read
returns new dicts. Semantics and guarantees: ``docs/storage.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

__all__ = ["Storage", "pages_of"]


@runtime_checkable
class Storage(Protocol):
    """Archived pages (each written once) and the whole system state (replaced atomically)."""

    def put_page(self, index: int, page: dict[str, Any]) -> None:
        """Store an archived page under ``index`` (a positive int), once."""

    def get_page(self, index: int) -> dict[str, Any] | None:
        """The page stored under ``index``, or None."""

    def page_indices(self) -> list[int]:
        """The indices of the stored pages, ascending."""

    def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        """Write ``pages`` and replace the whole system state, as one atomic commit; a compare-and-set
        on ``state["revision"]`` when it has one (:class:`~memci.ConflictError` over any revision
        but ``revision - 1``, nothing written). Pages at or below the stored state's
        ``pages_through`` are written once; a stored page above it (an orphan) is replaced. Every
        stored page at or below ``state["forgotten_through"]`` (when it has one) is deleted in the
        same commit."""

    def load_state(self) -> dict[str, Any] | None:
        """The last state saved, or None."""

    def close(self) -> None:
        """Release the store."""


def pages_of(storage: Storage, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The pages ``storage`` holds among ``indices``, by index (absent ones left out): one batched
    read with the store's ``get_pages`` when it has one (every memci store does; PostgreSQL reads
    them in one query), else a ``get_page`` per index. The protocol does not require ``get_pages``,
    so a store of one's own keeps working."""
    get_pages = getattr(storage, "get_pages", None)
    if get_pages is not None:
        found: dict[int, dict[str, Any]] = get_pages(indices)
        return found
    pages = {}
    for index in indices:
        page = storage.get_page(index)
        if page is not None:
            pages[index] = page
    return pages
