"""When a cache-stable context system cuts its window: :class:`CutPolicy`, and the contents page
the model sees between cuts: :class:`StableContents`.

A provider's prompt cache bills the part of a request that repeats the previous request's prefix
at about a tenth of the price. A window that archives its oldest page every round rewrites its
head every round, and the cache never hits past the system prompt. A cache-stable window
(``ContextSystem(cache_stable=True)``, the default under ``max_context_tokens``) grows append-only
until it passes its high-water mark, then cuts back to its low-water mark in one step:

- under ``max_context_tokens`` the high-water mark is the budget (the limit less the tool
  definitions) and the low-water mark ``low_water`` times it; the last ``active_pages`` pages
  stay whole unless they alone are over the budget (then they yield too, never the open page,
  and the window is never over the limit);
- with page counts alone the window holds ``active_pages`` (n) to ``high_pages`` pages
  (``max(n + 1, floor(n / low_water))``) and cuts back to n when a page opens beyond that.

The contents page is rewritten only at a cut (the archive rules, m, p and the cap, run there
too): between cuts it is the text frozen at the last cut, so the system segment and the contents
page are one stable prefix. A recall between cuts changes the chapter (its count, a dropped entry
restored) but not the frozen text: the model reads the page itself in the tool result, which is
in the append-only tail. Semantics and measured figures: ``docs/context-system.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from memci.errors import InvalidOperationError, repr_of

__all__ = ["DEFAULT_LOW_WATER", "CutPolicy", "StableContents", "checked_low_water", "fewest_to_cut"]

#: What a cut leaves, as a share of the high-water mark: cutting back to half the budget makes a
#: cut every ~budget/2 new tokens (with 6,000 tokens and 300 tokens a round, one in 10 rounds).
DEFAULT_LOW_WATER = 0.5


def checked_low_water(value: object) -> float:
    """``low_water`` if it is a number in (0, 1), else a named error."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise InvalidOperationError(f"ContextSystem: low_water must be a number in (0, 1), got {repr_of(value)}")
    return float(value)


@dataclass(frozen=True, slots=True)
class CutPolicy:
    """When pages leave the window. ``cache_stable`` False is the seed's exact rule: the window
    keeps ``keep`` (n) pages, a page leaves each time one opens beyond them, and the archive rules
    run every round. True: the window grows to ``high_pages`` (None under a token budget: only the
    budget cuts) and a cut takes it back to ``keep`` pages, or to ``low_water`` of the budget."""

    cache_stable: bool
    low_water: float
    keep: int
    high_pages: int | None

    @classmethod
    def of(cls, cache_stable: object, low_water: object, keep: int, max_context_tokens: int | None) -> CutPolicy:
        """The policy for the settings: ``cache_stable`` None is on under ``max_context_tokens``
        and off with page counts alone."""
        if cache_stable is not None and not isinstance(cache_stable, bool):
            raise InvalidOperationError(
                f"ContextSystem: cache_stable must be a bool or None, got {type(cache_stable).__name__}"
            )
        low = checked_low_water(low_water)
        stable = max_context_tokens is not None if cache_stable is None else cache_stable
        if not stable:
            return cls(False, low, keep, keep)
        if max_context_tokens is not None:
            return cls(True, low, keep, None)
        return cls(True, low, keep, max(keep + 1, math.floor(keep / low)))

    def leaving(self, active: int, opened: int) -> int:
        """How many of the oldest pages leave the window when ``opened`` pages open, one after the
        other, on ``active`` active pages: each opening past the high-water count cuts back to
        ``keep``. With the seed's rule, ``max(0, active + opened - keep)`` (0 if none opens).
        O(opened)."""
        if self.high_pages is None:
            return 0
        count, gone = active, 0
        for _ in range(opened):
            count += 1
            if count > self.high_pages:
                gone += count - self.keep
                count = self.keep
        return gone

    def low_target(self, budget: int) -> int:
        """The tokens a cut under a budget of ``budget`` tokens brings the window down to."""
        return math.floor(self.low_water * budget)


def fewest_to_cut(candidates: int, target: int, tokens_after: Callable[[int], int]) -> int:
    """The fewest of the ``candidates`` oldest pages whose archiving brings the window to at most
    ``target`` tokens (``tokens_after(k)``: its tokens with the k oldest archived), or all of them
    when none does. The window shrinks as pages leave (a page costs more than its contents entry),
    so the first k that fits is the fewest. O(candidates) calls."""
    for k in range(1, candidates + 1):
        if tokens_after(k) <= target:
            return k
    return candidates


class StableContents:
    """The contents page the model sees: with a cache-stable policy, the text frozen at the last
    cut (and its tokens); otherwise the chapter's live text. ``live()`` and ``live_tokens()`` read
    the chapter's text and its (cached) tokens; ``count(text)`` counts a contents page's text."""

    __slots__ = ("_count", "_live", "_live_tokens", "policy", "text", "tokens")

    def __init__(
        self,
        policy: CutPolicy,
        live: Callable[[], str | None],
        live_tokens: Callable[[], int],
        count: Callable[[str], int],
    ) -> None:
        self.policy = policy
        self._live, self._live_tokens, self._count = live, live_tokens, count
        #: The frozen text (None while the page has no entry) and its tokens.
        self.text: str | None = None
        self.tokens = 0

    def shown(self) -> str | None:
        """The contents page's text as the model sees it now."""
        return self.text if self.policy.cache_stable else self._live()

    def shown_tokens(self) -> int:
        """Tokens of :meth:`shown` (0 while it has no entry)."""
        return self.tokens if self.policy.cache_stable else self._live_tokens()

    def freeze(self) -> None:
        """A cut: the model sees the chapter as it is now, until the next cut."""
        self.text, self.tokens = self._live(), self._live_tokens()

    def restore(self, text: str | None) -> None:
        """Take up the frozen text a saved state carried (``""``: no page; None: a state without
        one, whose page is the chapter's as it is)."""
        if text is None:
            self.freeze()
        else:
            self.text = text or None
            self.tokens = self._count(text) if text else 0

    def saved(self) -> str:
        """The frozen text as a state saves it (``""`` for no page)."""
        return self.text or ""
