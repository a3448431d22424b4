"""Where the context system keeps archived pages and its saved state.

:class:`Storage` is the protocol the :class:`~memci.ContextSystem` relies on; four stores implement
it: :class:`MemoryStorage` (the default), :class:`~memci.SqliteStorage` (one file, WAL,
transactions), :class:`~memci.DirectoryStorage` (one JSON file per page, each written atomically)
and :class:`~memci.RedisStorage` (shared by many agent workers; needs the ``redis`` extra).

A page is ``{"index": int, "messages": [message dicts], "summary": str, "entry_summaries": [str],
"archived_round": int}`` (other JSON keys are kept); a state is a JSON-able dict with a ``version``
key, opaque to the store. Everything is stored as JSON text, never pickle; what goes in is checked
and copied, so a caller mutating its dicts afterwards changes nothing stored, and every read
returns new dicts. Semantics and guarantees: ``docs/storage.md``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from memci.directory_storage import DirectoryStorage
from memci.json_store import JsonStore
from memci.redis_storage import RedisStorage
from memci.sqlite_storage import SqliteStorage

__all__ = ["DirectoryStorage", "MemoryStorage", "RedisStorage", "SqliteStorage", "Storage"]


@runtime_checkable
class Storage(Protocol):
    """Archived pages (each written once) and the whole system state (replaced atomically)."""

    def put_page(self, index: int, page: dict[str, Any]) -> None:
        """Store an archived page under ``index`` (a positive int), once."""

    def get_page(self, index: int) -> dict[str, Any] | None:
        """The page stored under ``index``, or None."""

    def page_indices(self) -> list[int]:
        """The indices of the stored pages, ascending."""

    def save_state(self, state: dict[str, Any]) -> None:
        """Replace the whole system state, atomically."""

    def load_state(self) -> dict[str, Any] | None:
        """The last state saved, or None."""

    def close(self) -> None:
        """Release the store."""


class MemoryStorage(JsonStore):
    """Pages and state held as JSON text in this process: the default store, lost at exit.

    Holding text (not the caller's dicts) keeps the same rules as the persistent stores: values
    are checked, nothing is aliased, and a page read back is a new dict.
    """

    _pages: dict[int, str]
    _state: str | None

    def __init__(self) -> None:
        super().__init__()
        self._pages = {}
        self._state = None

    def __repr__(self) -> str:
        return f"MemoryStorage(<{len(self._pages)} pages>)"

    def _insert_page_text(self, index: int, text: str) -> str | None:
        existing = self._pages.setdefault(index, text)
        return None if existing is text else existing

    def _read_page_text(self, index: int) -> str | None:
        return self._pages.get(index)

    def _list_page_indices(self) -> list[int]:
        return sorted(self._pages)

    def _read_state_text(self) -> str | None:
        return self._state

    def _write_state_text(self, text: str) -> None:
        self._state = text

    def _release(self) -> None:
        self._pages = {}
        self._state = None
