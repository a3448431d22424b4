"""The page log: what every writer of a store stands on (the context system, the chat histories, the
Agents SDK session).

A store holds write-once pages and one state. The state's **head** says what the pages are: its
``version`` and ``kind`` (whose log it is), its ``revision`` (one more at each save) and its **live
range**, the pages ``forgotten_through + 1`` to ``pages_through``: a page at or below
``forgotten_through`` was forgotten (the save that forgot it deleted it), a page above
``pages_through`` is an orphan of a run that died before its save (the next save of that index
replaces it). The rest of the state (the **body**) is the writer's own.

:class:`PageLog` is the only code that reads and writes a head: it reads the state and checks its
head (:class:`Head`), stages the pages to write until the next save, and commits them with the new
state in one atomic save, a compare-and-set on the revision. When another writer saved first the
store raises :class:`~memci.ConflictError` and nothing is written; :data:`CONFLICTS` is the one
policy every writer retries under (reload, redo, after a short random wait). Semantics:
``docs/storage.md``, "The page log".
"""

from __future__ import annotations

import bisect
import copy
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from memci.errors import ConflictError, StateError, shown
from memci.storage.protocol import Storage, pages_of

__all__ = ["CONFLICTS", "LOG_VERSION", "ConflictPolicy", "Head", "PageLog"]

T = TypeVar("T")

#: The ``version`` every state's head carries.
LOG_VERSION = 1


@dataclass(frozen=True, slots=True)
class ConflictPolicy:
    """How a writer retries after :class:`~memci.ConflictError` (another writer saved first):
    reload, then redo, up to ``retries`` times, each after a random wait of up to ``step`` seconds
    times the attempt number (capped at ``cap`` steps) so that racing writers spread out."""

    retries: int = 100
    step: float = 0.001
    cap: int = 20

    def waits(self) -> Iterator[float]:
        """The wait before each retry, in seconds (``retries`` of them)."""
        for attempt in range(self.retries):
            yield random.uniform(0, self.step * min(attempt + 1, self.cap))

    def run(self, work: Callable[[], T], reload: Callable[[], object]) -> T:
        """``work()``, done again after each :class:`~memci.ConflictError` (a wait, then
        ``reload()``); the last conflict is raised."""
        for wait in self.waits():
            try:
                return work()
            except ConflictError:
                time.sleep(wait)
                reload()
        return work()


#: The conflict policy of every writer on a page log.
CONFLICTS = ConflictPolicy()


@dataclass(frozen=True, slots=True)
class Head:
    """The head of a saved state: whose it is (``kind``), its ``revision`` (0: never saved) and its
    live range, pages ``forgotten_through + 1`` to ``pages_through``."""

    kind: str
    revision: int = 0
    pages_through: int = 0
    forgotten_through: int = 0

    @property
    def live(self) -> range:
        """The indices of the live pages."""
        return range(self.forgotten_through + 1, self.pages_through + 1)

    def to_dict(self) -> dict[str, Any]:
        """The head's keys, in the order every state is written with (``revision`` absent while
        0, ``forgotten_through`` while 0)."""
        head: dict[str, Any] = {"version": LOG_VERSION, "kind": self.kind}
        if self.revision:
            head["revision"] = self.revision
        head["pages_through"] = self.pages_through
        if self.forgotten_through:
            head["forgotten_through"] = self.forgotten_through
        return head

    def state(self, body: dict[str, Any]) -> dict[str, Any]:
        """The whole state: this head, then ``body`` (whose keys must not be the head's)."""
        return {**self.to_dict(), **body}

    @classmethod
    def of(cls, state: object, kind: str, where: str = "load", hint: str = "") -> Head:
        """The head of ``state``, checked: a dict of ``kind`` and :data:`LOG_VERSION`, a revision
        >= 0, ``0 <= forgotten_through <= pages_through``; :class:`~memci.StateError` naming the
        key otherwise (``hint`` follows the error of a state of another kind). O(1)."""
        if not isinstance(state, dict):
            raise StateError(f"{where}: the saved state is {type(state).__name__}, not a dict")
        if state.get("version") != LOG_VERSION or state.get("kind") != kind:
            raise StateError(
                f"{where}: not a saved {kind} of version {LOG_VERSION} "
                f"(kind {shown(state.get('kind'))}, version {shown(state.get('version'))}){hint}"
            )
        values = []
        for key in ("revision", "pages_through", "forgotten_through"):
            value = state.get(key, 0)
            if type(value) is not int or value < 0:
                raise StateError(f"{where}: state[{key!r}] is {shown(value)}, expected an int >= 0")
            values.append(value)
        revision, pages_through, forgotten_through = values
        if forgotten_through > pages_through:
            raise StateError(
                f"{where}: state['forgotten_through'] is {forgotten_through}, above state['pages_through'] "
                f"({pages_through})"
            )
        return cls(kind, revision, pages_through, forgotten_through)


class PageLog:
    """One writer's log on ``storage``: the :class:`Head` it last read or wrote, and the pages
    staged for the next :meth:`commit`. Not thread-safe: its writer serialises its calls."""

    __slots__ = ("_staged", "head", "storage")

    def __init__(self, storage: Storage, kind: str) -> None:
        self.storage = storage
        self.head = Head(kind)
        self._staged: dict[int, dict[str, Any]] = {}

    @property
    def kind(self) -> str:
        return self.head.kind

    # ---- reading -----------------------------------------------------------------------------------

    def load(self, where: str = "load", hint: str = "") -> dict[str, Any] | None:
        """Read the stored state and take its head (a fresh log's head when none is stored); the
        state, or None. Staged pages are dropped: they belonged to the state this log had.
        :class:`~memci.StateError` if it is another kind's (followed by ``hint``; the log is left as
        it was). O(state)."""
        state = self.storage.load_state()
        self.take(state, where, hint)
        return state

    def take(self, state: dict[str, Any] | None, where: str = "load", hint: str = "") -> None:
        """Take the head of ``state`` (read elsewhere: a framework's state), checked as :meth:`load`
        checks it, and drop the staged pages."""
        head = Head(self.kind) if state is None else Head.of(state, self.kind, where, hint)
        self.head = head
        self._staged = {}

    def changed(self) -> bool:
        """Whether another writer saved since this log's head was read (one state read)."""
        state = self.storage.load_state()
        revision = 0 if state is None else state.get("revision", 0)
        return revision != self.head.revision

    def held(self) -> list[int]:
        """The indices of the live pages the store (or the stage) holds, ascending: O(stored
        pages), whatever the head claims."""
        live = self.head.live
        stored = (index for index in self.storage.page_indices() if index in live)
        return sorted({*stored, *(index for index in self._staged if index in live)})

    def missing(self, held: list[int], limit: int = 5, first: int | None = None) -> list[int]:
        """Up to ``limit`` live indices (from ``first``, the first live one by default), ascending,
        that ``held`` (:meth:`held`) lacks. O(held)."""
        gaps: list[int] = []
        expected = self.head.forgotten_through + 1 if first is None else first
        for index in [*(i for i in held if i >= expected), self.head.pages_through + 1]:
            gaps.extend(range(expected, min(index, expected + limit - len(gaps))))
            if len(gaps) >= limit:
                break
            expected = index + 1
        return gaps

    def holds_run(self, held: list[int], first: int, last: int) -> bool:
        """Whether ``held`` (ascending) holds every index from ``first`` to ``last``. O(log held)."""
        start = bisect.bisect_left(held, first)
        end = bisect.bisect_right(held, last)
        return last >= first and end - start == last - first + 1

    def page(self, index: int) -> dict[str, Any] | None:
        """Page ``index``: a copy of it while staged, else the store's (None if it holds none)."""
        staged = self._staged.get(index)
        return copy.deepcopy(staged) if staged is not None else self.storage.get_page(index)

    def pages(self, indices: list[int]) -> list[tuple[int, dict[str, Any]]]:
        """The pages of ``indices`` that are held (staged or stored), in that order: the stored ones
        in one batched read (:func:`~memci.storage.protocol.pages_of`; one query on PostgreSQL)."""
        stored = pages_of(self.storage, [index for index in indices if index not in self._staged])
        found = []
        for index in indices:
            staged = self._staged.get(index)
            page = copy.deepcopy(staged) if staged is not None else stored.get(index)
            if page is not None:
                found.append((index, page))
        return found

    # ---- writing -----------------------------------------------------------------------------------

    def stage(self, page: dict[str, Any]) -> None:
        """Keep ``page`` (a page dict with its ``index``) for the next :meth:`commit`."""
        self._staged[page["index"]] = page

    @property
    def staged(self) -> list[dict[str, Any]]:
        """The staged pages, in the order they were staged (the log's own dicts)."""
        return list(self._staged.values())

    def unstage(self) -> None:
        """Drop every staged page (they were forgotten before being saved)."""
        self._staged.clear()

    def next_head(self, pages_through: int | None = None, forgotten_through: int | None = None) -> Head:
        """The head the next commit writes: the next revision, and the live range given (each
        bound unchanged when None)."""
        head = self.head
        return Head(
            head.kind,
            head.revision + 1,
            head.pages_through if pages_through is None else pages_through,
            head.forgotten_through if forgotten_through is None else forgotten_through,
        )

    def commit(
        self,
        body: dict[str, Any],
        *,
        pages_through: int | None = None,
        forgotten_through: int | None = None,
        amended: Iterable[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """Save the staged pages and the state (the next head, then ``body``) as one atomic commit,
        a compare-and-set on the revision: on :class:`~memci.ConflictError` (another writer saved
        first) nothing is written and the log is as it was. ``amended``: committed pages written
        again with the search vector they were stored without (the one change a store takes to a
        committed page). The state written. O(state + pages)."""
        head = self.next_head(pages_through, forgotten_through)
        state = head.state(body)
        self.storage.save_state(state, [*self.staged, *amended])
        self.head = head
        self._staged.clear()
        return state
