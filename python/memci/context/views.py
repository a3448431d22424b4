"""What a context system shows of itself: its round, pages, contents and settings, read-only (the
half of :class:`~memci.ContextSystem` that changes nothing)."""

from __future__ import annotations

from memci.context.contents import ArchivePolicy, ContentsEntry, DroppedEntry
from memci.context.cuts import CutPolicy
from memci.context.page import Page
from memci.context.parts import SystemParts

__all__ = ["SystemViews"]


class SystemViews(SystemParts):
    """The read-only properties of a context system. Each is O(1) but :attr:`pages`,
    :attr:`contents` and :attr:`dropped`, O(what they list), read under the system's lock."""

    _active_pages: int
    _encoding: str
    _max_context_tokens: int | None
    _cuts: CutPolicy

    @property
    def round(self) -> int:
        """Rounds ended so far."""
        return self._round

    @property
    def pages(self) -> list[Page]:
        """The active pages, oldest first (the last one is open)."""
        with self._lock:
            return [Page.of(i, self._window.page(i)) for i in self._window.page_indices()]

    @property
    def contents(self) -> list[ContentsEntry]:
        """The contents entries the model sees, by index."""
        with self._lock:
            return list(self._archive.entries.values())

    @property
    def dropped(self) -> list[DroppedEntry]:
        """Entries the rules dropped from the contents page (their pages stay stored), by index."""
        with self._lock:
            return sorted(self._archive.dropped.values(), key=lambda d: d.index)

    @property
    def policy(self) -> ArchivePolicy:
        return self._archive.policy

    @property
    def active_pages(self) -> int:
        return self._active_pages

    @property
    def encoding(self) -> str:
        return self._encoding

    @property
    def max_context_tokens(self) -> int | None:
        return self._max_context_tokens

    @property
    def cache_stable(self) -> bool:
        return self._cuts.cache_stable

    @property
    def low_water(self) -> float:
        return self._cuts.low_water
