"""An append-only message log on any memci store: what a chat history keeps (the LangChain history,
the Agents SDK session's full history; no framework needed).

The log stands on a :class:`~memci.storage.log.PageLog`. Each ``append`` writes its messages as one
write-once page (an :class:`~memci.context.page.ArchivedPage` without a summary) and the state in
the same commit, so an append costs what it adds; ``clear`` forgets every page in the commit that
empties the log. A log that can ``pop`` (``runs=True``) names its live messages in the state as
**runs** ``[first, last, kept]``: pages ``first..last``, whole but for the last, of which the first
``kept`` messages are live (a pop shortens it; a later append starts a new run). A save that finds
another writer's newer revision reloads and redoes the change, under the page log's one conflict
policy, so concurrent writers to one log lose nothing. Reading returns what is in memory, refreshed from
the store when its revision moved.

Loading costs O(the state + the pages the store holds), whatever the state claims: a run naming a
page the store does not hold is a :class:`~memci.StateError` before any page is read.
"""

from __future__ import annotations

import threading
from typing import Any

from memci.context.page import ArchivedPage, Message
from memci.errors import PageError, StateError, StorageError, shown
from memci.storage.log import CONFLICTS, ConflictPolicy, PageLog
from memci.storage.protocol import Storage

__all__ = ["LOG_KIND", "MessageLog"]

#: The ``kind`` of a LangChain history's state.
LOG_KIND = "memci.message_log"

Run = list[int]


class MessageLog:
    """The messages of one conversation in ``storage`` (this conversation's own store), its state
    of ``kind``; ``runs``: the state names its live messages as runs, so that :meth:`pop` can take
    one back. Thread-safe (one lock); the store's calls happen under it."""

    def __init__(
        self,
        storage: Storage,
        kind: str = LOG_KIND,
        *,
        runs: bool = False,
        owner: str = "",
        hint: str = "",
        conflicts: ConflictPolicy | None = CONFLICTS,
    ) -> None:
        """``owner`` names the log in errors; ``hint`` follows the error of a state of another kind;
        ``conflicts``: the policy each change is redone under after a conflict (None: a conflict is
        raised at once, for a caller that redoes whole calls under the policy itself)."""
        self._log = PageLog(storage, kind)
        self._conflicts = conflicts
        self._keeps_runs = runs
        self._owner, self._hint = owner or kind, hint
        self._lock = threading.Lock()
        self._read = False
        #: One more at each load: a reader of :meth:`current` knows when to read it whole again.
        self.generation = 0
        self._messages: list[Message] = []
        #: The live runs (``runs=True``), and the size of each live page.
        self._runs: list[Run] = []
        self._sizes: dict[int, int] = {}

    @property
    def storage(self) -> Storage:
        return self._log.storage

    # ---- reading -----------------------------------------------------------------------------------

    def _load(self) -> None:
        """Read the state and the live messages from the store. Until it has succeeded, the log
        counts as unread: a load that fails is tried again by the next call."""
        self._read = False
        log = self._log
        state = log.load(self._owner, self._hint)
        held = log.held()
        runs = self._checked_runs([] if state is None else state.get("runs", []), held) if self._keeps_runs else []
        indices = [index for first, last, _ in runs for index in range(first, last + 1)] if runs else held
        pages: dict[int, tuple[Message, ...]] = {}
        for index, page in log.pages(indices):
            try:
                pages[index] = ArchivedPage.from_dict(page, index).messages
            except PageError as e:
                raise StorageError(f"{self._owner}: {e}", f"page {index}") from None
        messages: list[Message] = []
        if not self._keeps_runs:
            for stored in pages.values():
                messages.extend(stored)
        for first, last, kept in runs:
            if kept > len(pages[last]):
                raise StateError(f"{self._owner}: the state keeps {kept} items of page {last}, which holds fewer")
            for index in range(first, last):
                messages.extend(pages[index])
            messages.extend(pages[last][:kept])
        self._messages, self._runs, self._read = messages, runs, True
        self.generation += 1
        self._sizes = {index: len(stored) for index, stored in pages.items()}

    def _checked_runs(self, raw: object, held: list[int]) -> list[Run]:
        """The runs a state names: ascending ``[first, last, kept]`` triples of live pages, every
        page of them held by the store; :class:`~memci.StateError` otherwise. O(runs * log held)."""
        live = self._log.head.live
        if not isinstance(raw, list):
            raise StateError(f"{self._owner}: state['runs'] is {shown(raw)}, expected a list of runs")
        runs: list[Run] = []
        after = live.start - 1
        for i, run in enumerate(raw):
            fine = isinstance(run, list) and len(run) == 3 and all(type(x) is int for x in run)
            if not fine or not after < run[0] <= run[1] <= live.stop - 1 or run[2] < 1:
                raise StateError(
                    f"{self._owner}: state['runs'][{i}] is {shown(run)}, expected [first, last, kept] with "
                    f"{after} < first <= last <= {live.stop - 1} and kept >= 1"
                )
            if not self._log.holds_run(held, run[0], run[1]):
                gap = self._log.missing(held, 1, first=run[0])[0]
                raise StateError(f"{self._owner}: the state names page {gap}, which the store does not hold")
            runs.append(list(run))
            after = run[1]
        return runs

    def refresh(self) -> bool:
        """Reload when another writer saved since (one state read); whether it did."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> bool:
        if self._read and not self._log.changed():
            return False
        self._load()
        return True

    def messages(self) -> list[Message]:
        """The messages, oldest first, refreshed (the log's own dicts: copy before changing them)."""
        with self._lock:
            self._refresh()
            return list(self._messages)

    def current(self) -> list[Message]:
        """The messages as last read or written, without reading the store."""
        with self._lock:
            return list(self._messages)

    # ---- writing -----------------------------------------------------------------------------------

    def _retried(self, change: Any) -> Any:
        """``change()`` after a refresh, again (reloaded) after each conflict, by the log's policy."""
        self._refresh()
        return change() if self._conflicts is None else self._conflicts.run(change, self._load)

    def _body(self, runs: list[Run]) -> dict[str, Any]:
        return {"runs": runs} if self._keeps_runs else {}

    def append(self, messages: list[Message]) -> None:
        """Append ``messages`` in one commit (one page)."""
        if not messages:
            return
        batch = list(messages)

        def change() -> None:
            log = self._log
            index = log.head.pages_through + 1
            runs = [list(run) for run in self._runs]
            whole = runs and runs[-1][1] == log.head.pages_through and runs[-1][2] == self._sizes[runs[-1][1]]
            if whole:
                runs[-1][1:] = [index, len(batch)]  # the run goes on: its last page was whole
            elif self._keeps_runs:
                runs.append([index, index, len(batch)])
            log.stage(ArchivedPage(index, tuple(batch)).to_dict())
            try:
                log.commit(self._body(runs), pages_through=index)
            except BaseException:
                log.unstage()
                raise
            self._runs, self._sizes[index] = runs, len(batch)
            self._messages.extend(batch)

        with self._lock:
            self._retried(change)

    def pop(self) -> Message | None:
        """Remove and return the last message (None when there is none), in one commit of the
        state alone. Needs ``runs=True``."""
        if not self._keeps_runs:
            raise StateError(f"{self._owner}: this log keeps no runs, so it cannot pop")

        def change() -> Message | None:
            if not self._runs:
                return None
            runs = [list(run) for run in self._runs]
            first, last, kept = runs[-1]
            if kept > 1:
                runs[-1][2] = kept - 1
            elif first < last:
                runs[-1][1:] = [last - 1, self._sizes[last - 1]]
            else:
                runs.pop()
            self._log.commit(self._body(runs))
            self._runs = runs
            return self._messages.pop()

        with self._lock:
            popped: Message | None = self._retried(change)
            return popped

    def replace(self, messages: list[Message]) -> None:
        """Make ``messages`` the whole log in one commit: they are written as one page and every
        older page is deleted in the same commit (a compaction's replacement). O(len(messages))."""
        batch = list(messages)

        def change() -> None:
            log = self._log
            through = log.head.pages_through
            index = through + 1
            runs = [[index, index, len(batch)]] if batch else []
            if batch:
                log.stage(ArchivedPage(index, tuple(batch)).to_dict())
            try:
                log.commit(self._body(runs), pages_through=index if batch else through, forgotten_through=through)
            except BaseException:
                if batch:
                    log.unstage()
                raise
            self._runs, self._sizes = runs, ({index: len(batch)} if batch else {})
            self._messages = list(batch)

        with self._lock:
            self._retried(change)

    def clear(self) -> None:
        """Forget every message: the pages are deleted in the commit that empties the log."""

        def change() -> None:
            through = self._log.head.pages_through
            self._log.commit(self._body([]), forgotten_through=through)
            self._messages, self._runs, self._sizes = [], [], {}

        with self._lock:
            self._retried(change)
