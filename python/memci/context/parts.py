"""The parts of a context system, declared once for the halves of :class:`~memci.ContextSystem` that
read them (:class:`~memci.context.persistence.Persistent`, :class:`~memci.context.recalling.Recalling`);
the system's constructor makes them."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from memci.context.contents import ArchiveChapter
from memci.context.search import PageSearch
from memci.storage.log import PageLog

if TYPE_CHECKING:
    from memci import _core

__all__ = ["SystemParts"]


class SystemParts:
    """What every half of a context system reads: its page log, lock, round, window, contents
    chapter, search index (and the stored pages it does not hold yet) and the index up to which
    pages were forgotten."""

    _log: PageLog
    _lock: contextlib.AbstractContextManager[None]
    _round: int
    _window: _core.PageWindow
    _archive: ArchiveChapter
    _search: PageSearch
    _forgotten_through: int
    #: Stored pages up to this index are not in :attr:`_search` yet: a loaded system indexes them at
    #: its first search (:meth:`_searched`), so that a load costs O(state), not O(stored pages).
    _unindexed_through: int

    if TYPE_CHECKING:  # Persistent's, which reads the page log

        def _searched(self) -> PageSearch: ...
