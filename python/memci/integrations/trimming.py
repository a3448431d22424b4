"""One trim for framework histories: what every adapter that sends the model a conversation cut to
a token budget shares (the LangChain middleware, the LangGraph hook, the LlamaIndex memory and
``MemciSession`` with ``max_tokens``).

A framework keeps the whole conversation (a graph state's ``messages``, a chat store, a session)
and hands it over at every model call. :class:`HistoryTrimmer` keeps one conversation between
calls: its leading system messages apart, and the rest in a :class:`~memci.MessageArray` whose
visible messages are the window sent last. A call appends only the messages that arrived since
the last one (O(new), the conversation is never copied or re-read) and trims that window with
hysteresis (``low_water``, :data:`LOW_WATER` by default): the window grows append-only, so a
provider's prompt cache keeps hitting, until it passes the budget; then it is cut back to
``low_water`` of the budget in one step. The result is the framework's own message objects,
sliced from the history it gave: the leading system messages, then the newest ``k`` messages.
A call costs O(new + kept), whatever the length of the history.

The conversation is recognised by its first message and the last one seen (``same``: by id or
identity for LangChain, by equality otherwise): a history that shrank or changed there is
mirrored again (once, O(history)). A message changed in place in the middle is not seen.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, overload

from memci import tokens
from memci.array import MessageArray
from memci.errors import InvalidOperationError

__all__ = ["LOW_WATER", "Conversations", "History", "HistoryTrimmer", "check_low_water", "extends", "same_message"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: The adapters' default low-water mark: a window that passes its budget is cut back to 60% of it.
#: Measured on a 60-round tool-using agent (docs/benchmarks.md): the share of each request a
#: provider's cache can reuse rises from 0.23 (a cut every turn) to about 0.9.
LOW_WATER = 0.6

_INSTRUCTIONS = ("system", "developer")


def check_low_water(owner: str, low_water: float | None) -> float | None:
    """``low_water`` as an adapter takes it: a fraction in (0, 1], or None (no hysteresis: the
    newest messages that fit, every call)."""
    if low_water is None:
        return None
    if isinstance(low_water, bool) or not isinstance(low_water, int | float) or not 0 < low_water <= 1:
        raise InvalidOperationError(f"{owner}: low_water must be a fraction in (0, 1] or None, got {low_water!r}")
    return float(low_water)


class History(Protocol[T_co]):
    """A conversation as a framework hands it over: a list of its messages, or anything read like
    one (a :class:`~memci.MessageArray`)."""

    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, key: int, /) -> T_co: ...
    @overload
    def __getitem__(self, key: slice, /) -> Sequence[T_co]: ...


def same_message(a: object, b: object) -> bool:
    """Whether two of a framework's messages are the same one: the same object, or equal."""
    return a is b or a == b


def extends(history: History[T], seen: int, ends: tuple[T, T] | None, same: Callable[[T, T], bool]) -> bool:
    """Whether ``history`` is the one seen, grown or not: at least ``seen`` messages long, with the
    same first message and the same one where the last seen was (``ends``: those two; None when
    nothing was seen)."""
    if ends is None:
        return True
    return len(history) >= seen and same(history[0], ends[0]) and same(history[seen - 1], ends[1])


class HistoryTrimmer(Generic[T]):
    """One conversation's history trimmed to a token budget at each model call (see the module).

    ``convert`` turns a run of the framework's messages into memci chat messages, one for one;
    ``same(a, b)`` says two of them are the same message. ``keep_system`` keeps the history's
    leading system/developer messages whatever they cost; ``start_on`` is the role the rest must
    start on; ``relaxed``: options (``start_on``, ``keep_system``) tried in order, without
    hysteresis, when nothing but the system messages fits (for one call; the window is kept).
    Safe from several threads (one lock)."""

    def __init__(
        self,
        convert: Callable[[Sequence[T]], list[dict[str, Any]]],
        *,
        same: Callable[[T, T], bool] = same_message,
        encoding: str = tokens.DEFAULT_ENCODING,
        keep_system: bool = True,
        start_on: str | None = "user",
        low_water: float | None = LOW_WATER,
        relaxed: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.convert, self.same, self.encoding = convert, same, encoding
        self.keep_system, self.start_on, self.relaxed = keep_system, start_on, tuple(relaxed)
        self.low_water = check_low_water("HistoryTrimmer", low_water)
        self._lock = threading.Lock()
        self._forget()

    def _forget(self) -> None:
        #: The history after its leading system messages, from the last cut on.
        self._window = MessageArray()
        self._seen = 0
        #: The history's first message and the last one seen (None: nothing seen).
        self._ends: tuple[T, T] | None = None
        #: The leading system messages held apart, and what they cost.
        self._lead = 0
        self._lead_tokens = 0

    def forget(self) -> None:
        """Drop the mirror (the next call mirrors the history again)."""
        with self._lock:
            self._forget()

    def trim(self, history: History[T], max_tokens: int) -> list[T] | None:
        """The messages of ``history`` to send within ``max_tokens``: its leading system messages
        (with ``keep_system``) and its newest messages, whole tool groups; None when nothing but
        the system messages fits (the caller decides what to send). O(new + kept)."""
        with self._lock:
            n = len(history)
            if n == 0:
                self._forget()
                return []
            self._sync(history, n)
            found = self._trimmed(max(0, max_tokens))
            if found is None:
                return None
            tail, with_system = found
            return [*history[: self._lead if with_system else 0], *history[n - tail :]]

    def _sync(self, history: History[T], n: int) -> None:
        """Append the messages that arrived since the last call; mirror again when the history is
        not the one seen (shorter, or another first or last-seen message)."""
        seen = self._seen
        if not extends(history, seen, self._ends, self.same):
            self._forget()
            seen = 0
        if n == seen:
            return
        new = self.convert(history[seen:n])
        if seen == 0 and self.keep_system:
            lead = next((i for i, m in enumerate(new) if m.get("role") not in _INSTRUCTIONS), len(new))
            if lead:
                counted = tokens.count_messages(new[:lead], self.encoding)
                self._lead, self._lead_tokens = lead, counted - tokens.reply_priming(self.encoding)
            new = new[lead:]
        if new:
            self._window.append(new)
        self._ends, self._seen = (history[0], history[n - 1]), n

    def _trimmed(self, max_tokens: int) -> tuple[int, bool] | None:
        """How many of the newest messages to send, the window cut with hysteresis, and whether
        the system messages go with them; None when none fits, even relaxed."""
        window = self._window
        before, count = window.batch_index, len(window)
        room = max(0, max_tokens - self._lead_tokens)
        window.trim_to_tokens(
            room, keep_system=False, start_on=self.start_on, encoding=self.encoding, low_water=self.low_water
        )
        kept = len(window)
        if kept in {0, count} or self.low_water is None:
            # Nothing cut, no hysteresis, or nothing fits: the window stays as it was.
            window.rollback(before)
        if kept:
            return kept, True
        for options in self.relaxed:
            keep_system = options.get("keep_system", self.keep_system)
            start_on = options.get("start_on", self.start_on)
            budget = room if keep_system else max_tokens
            window.trim_to_tokens(budget, keep_system=False, start_on=start_on, encoding=self.encoding)
            kept = len(window)
            window.rollback(before)
            if kept:
                return kept, keep_system
        return None


class Conversations(Generic[K, V]):
    """The most recently used ``limit`` conversations' values by key (the least recently used
    dropped): one :class:`HistoryTrimmer` per thread id, for an adapter that serves many."""

    def __init__(self, make: Callable[[], V], limit: int) -> None:
        self._make, self._limit = make, limit
        self._values: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __getitem__(self, key: K) -> V:
        with self._lock:
            value = self._values.pop(key, None)
            if value is None:
                value = self._make()
            self._values[key] = value
            while len(self._values) > self._limit:
                self._values.popitem(last=False)
            return value

    def __len__(self) -> int:
        return len(self._values)
