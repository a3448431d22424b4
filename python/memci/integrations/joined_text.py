"""LlamaIndex ``ChatMemoryBuffer``'s trim, counted once per message: the newest messages whose
texts, joined by spaces and tokenized as one string, fit a token budget.

``ChatMemoryBuffer.get`` joins the texts of the whole history with spaces, tokenizes that, and
while it is over the limit drops the oldest message (and the assistant and tool messages that would
then open the history) and tokenizes the joined suffix again: quadratic in the history.
:class:`JoinedTextTrimmer` keeps the same answer at O(new + kept) a call, from counts taken once.

Why the counts add up: OpenAI's encodings split a text into pieces by a pattern before the byte
pair merges, and a piece that starts at a character other than whitespace never reaches into the
whitespace after the text (a run of letters, digits or punctuation ends there; punctuation takes
only the line breaks that follow it). So a text with any character other than whitespace (a *solid*
text) holds a piece boundary that the joined string shares with the text alone; only the whitespace
at a joint (the end of one text, the space, the start of the next) is tokenized differently. The
count of the joined suffix that starts at a solid message ``k`` is therefore::

    count(text[k]) + sum(step[i] for i > k)
    step[i] = count(join(text[s..i])) - count(join(text[s..i-1])),  s: the last solid message before i

``step[i]`` is taken once, when message ``i`` arrives. A suffix that starts at a message whose text
is only whitespace (or empty) is counted up to the next solid message, then as above. The sums are
prefix sums, so the count of any suffix is O(1) (O(run) from a whitespace-only message).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from memci import tokens
from memci.errors import InvalidOperationError
from memci.integrations.trimming import History, check_low_water, extends, same_message

__all__ = ["JoinedTextTrimmer", "check_encoding"]

T = TypeVar("T")


def check_encoding(owner: str, encoding: str) -> str:
    """``encoding`` as the joined-text count takes it: an exact encoding (or a model name), whose
    pieces the module's sums rest on. ``approximate`` (characters / 4) is refused: a rounded share
    of the characters does not add up over joints."""
    if encoding == tokens.APPROXIMATE:
        raise InvalidOperationError(
            f"{owner}: the joined-text count needs an exact encoding ({', '.join(tokens.ENCODINGS)} or a model name), "
            f"not {encoding!r}"
        )
    tokens.count("", encoding)  # an unknown name is refused here, not at the first count
    return encoding


def _solid(text: str) -> bool:
    """Whether ``text`` has a character that is not whitespace. Python's ``isspace`` takes in every
    character the encodings' patterns read as whitespace (and a few more): a text it calls blank is
    counted the long way, which is exact too."""
    return bool(text) and not text.isspace()


class JoinedTextTrimmer(Generic[T]):
    """One conversation cut as ``ChatMemoryBuffer.get`` cuts it (see the module).

    ``text(message)`` is the text a message is counted by (``str(message.content)`` for
    LlamaIndex); ``can_start(message)`` whether a cut may open the history at that message (not an
    assistant or tool message). The candidates are, newest kept longest first: the whole history,
    each suffix opening at a message that ``can_start``, and the last message alone; the longest
    whose joined texts fit is kept, the last message alone when none does. ``low_water``: cut with
    hysteresis, as :class:`~memci.integrations.trimming.HistoryTrimmer` does (the messages kept
    grow append-only until they pass the budget, then are cut to the longest candidate within
    ``low_water`` of it); None, the default: the longest candidate at every call, as
    ``ChatMemoryBuffer``. The history is recognised by its first message and the last one seen
    (``same``); one that shrank or changed there is counted again. Safe from several threads."""

    def __init__(
        self,
        text: Callable[[T], str],
        can_start: Callable[[T], bool],
        *,
        same: Callable[[T, T], bool] = same_message,
        encoding: str = tokens.DEFAULT_ENCODING,
        low_water: float | None = None,
    ) -> None:
        self.text, self.can_start, self.same = text, can_start, same
        self.encoding = check_encoding("JoinedTextTrimmer", encoding)
        self.low_water = check_low_water("JoinedTextTrimmer", low_water)
        self._lock = threading.Lock()
        self._forget()

    def _forget(self) -> None:
        self._texts: list[str] = []
        self._solid: list[bool] = []
        self._starts: list[bool] = []
        #: count(text[i]) per message.
        self._alone: list[int] = []
        #: Prefix sums of the steps (see the module): _steps[i] = step[0] + ... + step[i].
        self._steps: list[int] = []
        #: The joined texts from the last solid message to the last one, and their count.
        self._run: tuple[str, int] | None = None
        self._ends: tuple[T, T] | None = None
        #: Where the messages kept last open (hysteresis), or None.
        self._start: int | None = None

    def forget(self) -> None:
        """Drop the counts (the next call counts the history again)."""
        with self._lock:
            self._forget()

    def trim(self, history: History[T], max_tokens: int) -> list[T]:
        """The messages of ``history`` to send within ``max_tokens``: the longest candidate whose
        joined texts fit, else the last message alone (empty for an empty history).
        O(new + kept)."""
        with self._lock:
            n = self._sync(history)
            return list(history[self._cut(n, max_tokens) :]) if n else []

    def _sync(self, history: History[T]) -> int:
        """Count the messages that arrived since the last call; all of them again when the history
        is not the one seen (shorter, or another first or last-seen message). The history's
        length."""
        n, seen = len(history), len(self._texts)
        if n == 0 or not extends(history, seen, self._ends, self.same):
            self._forget()
            seen = 0
        if n == seen:
            return n
        new = history[seen:n]
        texts = [self.text(m) for m in new]
        starts = [self.can_start(m) for m in new]
        solid = [_solid(text) for text in texts]
        # What each new message's step counts: the joined texts from the last solid message to it.
        runs: list[str | None] = []
        run = self._run[0] if self._run else None
        for text, is_solid in zip(texts, solid, strict=True):
            runs.append(None if run is None else f"{run} {text}")
            run = text if is_solid or run is None else f"{run} {text}"
        counts = tokens.count_batch([*texts, *(r for r in runs if r is not None)], self.encoding)
        alone, joined = counts[: len(texts)], iter(counts[len(texts) :])
        previous = self._run[1] if self._run else 0
        total = self._steps[-1] if self._steps else 0
        steps = []
        for count, is_solid, run_text in zip(alone, solid, runs, strict=True):
            if run_text is not None:
                run_count = next(joined)
                total += run_count - previous
                previous = run_count
            if is_solid or run_text is None:  # a run opens here (blank texts before any solid one too)
                previous = count
            steps.append(total)
        self._texts += texts
        self._solid += solid
        self._starts += starts
        self._alone += alone
        self._steps += steps
        self._run = (run, previous) if run is not None else None
        self._ends = (history[0], history[n - 1])
        return n

    def _after(self, k: int) -> int:
        """The steps after message ``k``: what the messages after it add to a suffix opening at a
        solid message ``k``."""
        return self._steps[-1] - self._steps[k]

    def _count(self, k: int) -> int:
        """The count of the joined texts of messages ``k`` to the last (see the module)."""
        if self._solid[k]:
            return self._alone[k] + self._after(k)
        n = len(self._texts)
        solid = next((i for i in range(k + 1, n) if self._solid[i]), None)
        head = self._texts[k : (n if solid is None else solid + 1)]
        counted = tokens.count(" ".join(head), self.encoding)
        return counted if solid is None else counted + self._after(solid)

    def _longest(self, n: int, budget: int) -> int | None:
        """The first message of the longest candidate that fits ``budget``, or None. A suffix that
        contains a solid message whose later steps pass the budget does not fit (the steps after a
        solid message are counted in any suffix that holds it), so the search starts after the
        newest such message: O(n - that)."""
        low = 0
        for k in range(n - 1, -1, -1):
            if self._solid[k] and self._after(k) > budget:
                low = k + 1
                break
        for k in range(low, n):
            if (k in {0, n - 1} or self._starts[k]) and self._count(k) <= budget:
                return k
        return None

    def _cut(self, n: int, max_tokens: int) -> int:
        """Where the messages to send open."""
        budget = max(0, max_tokens)
        start = self._start
        if self.low_water is None:
            found = self._longest(n, budget)
        elif start is not None and start < n and self._count(start) <= budget:
            return start  # within the budget: the window grows append-only
        else:
            found = self._longest(n, int(budget * self.low_water))
            if found is None:
                found = self._longest(n, budget)
            self._start = found
        return n - 1 if found is None else found
