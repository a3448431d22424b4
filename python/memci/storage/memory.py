"""The default store: pages and state held as JSON text in this process."""

from __future__ import annotations

from typing import Any

from memci.storage.json_store import Commit, JsonStore

__all__ = ["MemoryStorage"]


class MemoryStorage(JsonStore):
    """Pages and state held as JSON text in this process: the default store, lost at exit.

    Holding text (not the caller's dicts) keeps the same rules as the persistent stores: values
    are checked, nothing is aliased, and a page read back is a new dict.
    """

    _pages: dict[int, str]
    _state: str | None
    _revision: int
    _pages_through: int

    def __init__(self) -> None:
        super().__init__()
        self._pages = {}
        self._state = None
        self._revision = 0
        self._pages_through = 0

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) as its JSON texts: a new store holding the same pages and
        state."""
        with self._lock:
            return (_restored, (dict(self._pages), self._state, self._revision, self._pages_through))

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

    def _commit(self, commit: Commit) -> None:
        commit.check(self._revision, self._where)
        writes = commit.pages_to_write(self._pages_through, self._pages.get, self._where)
        for index in commit.pages_to_forget(list(self._pages)) if commit.forgotten_through else ():
            del self._pages[index]
        self._pages.update(writes)
        self._state = commit.state_text
        self._revision = commit.revision or 0
        self._pages_through = commit.pages_through

    def _release(self) -> None:
        self._pages = {}
        self._state = None


def _restored(pages: dict[int, str], state: str | None, revision: int, pages_through: int) -> MemoryStorage:
    """A :class:`MemoryStorage` holding what a pickled one held."""
    store = MemoryStorage()
    store._pages, store._state, store._revision, store._pages_through = dict(pages), state, revision, pages_through
    return store
