"""What a run of requests costs to send: prefix reuse, the modelled input bill, cache breaks.

A provider's prompt cache bills the part of a request that repeats the previous request's prefix
at a fraction of the input price. :func:`measure` takes the requests an agent sent, in order (each
a list of chat messages), and reports for each how many of its tokens repeat the previous
request's prefix, message by message, and what its input costs under :class:`Prices`.

>>> from memci import cost
>>> first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
>>> second = [*first, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}]
>>> report = cost.measure([first, second])
>>> report.requests[1].reused == report.requests[0].tokens
True

The model, stated once: a request's tokens are its messages' tokens (``memci.tokens``, or a
``counter``) plus ``tool_tokens``, the tool definitions every request carries first. Its
**reused** tokens are the tool tokens and those of its leading messages equal to the previous
request's (the first request reuses nothing). Reused tokens are billed at ``read``; the others at
``write``, as a request that marks a cache breakpoint at its end writes everything after the part it
read (Anthropic's incremental caching: a write costs 1.25x for the 5-minute cache); ``uncached`` is the
price without a cache. A provider that caches only from a length on (1,024 tokens at the time of
writing) reads nothing shorter: give ``min_cached``. A **cache break** is a request that does not
start with the whole previous request: the cache it could have read was written for nothing.
Bills are in units of one uncached token. O(total messages) plus the counting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memci import tokens
from memci.errors import InvalidOperationError, repr_of
from memci.tokens import Counter

__all__ = ["ANTHROPIC", "CostReport", "Prices", "RequestCost", "measure"]


@dataclass(frozen=True, slots=True)
class Prices:
    """Input prices as multiples of the uncached price of a token: ``read`` for a token read from
    the cache, ``write`` for one written to it, ``uncached`` without a cache. The defaults are
    Anthropic's published multipliers (cache read 0.1x, 5-minute cache write 1.25x); OpenAI bills
    cached input at 0.1x to 0.5x by model and writes at 1x: ``Prices(read=0.1, write=1.0)``."""

    read: float = 0.1
    write: float = 1.25
    uncached: float = 1.0

    def __post_init__(self) -> None:
        for name in ("read", "write", "uncached"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise InvalidOperationError(f"Prices: {name} must be a finite number >= 0, got {repr_of(value)}")


#: Anthropic's published multipliers: cache read 0.1x, cache write (5 minutes) 1.25x.
ANTHROPIC = Prices()


@dataclass(frozen=True, slots=True)
class RequestCost:
    """One request: its ``tokens``, the ``reused`` ones (its prefix shared with the previous
    request), whether it is a cache ``break``, and its ``bill`` in uncached-token units."""

    tokens: int
    reused: int
    broke: bool
    bill: float


@dataclass(frozen=True, slots=True)
class CostReport:
    """The requests measured, in order, and the prices they were billed at."""

    requests: tuple[RequestCost, ...]
    prices: Prices

    @property
    def tokens(self) -> int:
        """Input tokens of every request."""
        return sum(r.tokens for r in self.requests)

    @property
    def reuse(self) -> float:
        """Token-weighted prefix reuse: reused tokens over all tokens (0.0 for no token)."""
        total = self.tokens
        return sum(r.reused for r in self.requests) / total if total else 0.0

    @property
    def bill(self) -> float:
        """The modelled input bill, in uncached-token units."""
        return sum(r.bill for r in self.requests)

    @property
    def bill_ratio(self) -> float:
        """The bill as a share of sending every token uncached (0.0 for no token)."""
        total = self.tokens * self.prices.uncached
        return self.bill / total if total else 0.0

    @property
    def breaks(self) -> int:
        """Requests that did not start with the whole previous request."""
        return sum(r.broke for r in self.requests)

    def between(self, first: int, end: int) -> CostReport:
        """The report of requests ``first`` to ``end - 1`` (each still measured against the
        request before it), like a slice."""
        return CostReport(self.requests[first:end], self.prices)


def measure(
    requests: Sequence[Sequence[Mapping[str, Any]]],
    *,
    prices: Prices = ANTHROPIC,
    tool_tokens: int = 0,
    min_cached: int = 0,
    encoding: str = tokens.DEFAULT_ENCODING,
    counter: Counter | None = None,
) -> CostReport:
    """Each request's tokens, reused prefix, break and bill, by the model in this module's
    docstring. ``requests``: the message lists sent, in order; ``tool_tokens``: tokens of the tool
    definitions each carries; ``min_cached``: the shortest prefix the provider caches. Messages
    are counted once each per request (``encoding`` or ``counter``, as ``memci.tokens`` counts a
    message). O(total messages)."""
    if not isinstance(prices, Prices):
        raise InvalidOperationError(f"measure: prices must be a memci.cost.Prices, got {type(prices).__name__}")
    for name, value in (("tool_tokens", tool_tokens), ("min_cached", min_cached)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
            raise InvalidOperationError(f"measure: {name} must be an int from 0 to 2**53 - 1, got {repr_of(value)}")
    if isinstance(requests, str | Mapping) or not isinstance(requests, Sequence):
        raise InvalidOperationError(f"measure: requests must be a list of message lists, got {type(requests).__name__}")
    out: list[RequestCost] = []
    previous: Sequence[Mapping[str, Any]] | None = None
    for i, request in enumerate(requests):
        if isinstance(request, str | Mapping) or not isinstance(request, Sequence):
            raise InvalidOperationError(
                f"measure: requests[{i}] must be a list of messages, got {type(request).__name__}"
            )
        counts = [_tokens(m, encoding, counter, f"requests[{i}][{k}]") for k, m in enumerate(request)]
        shared = 0
        if previous is not None:
            while shared < min(len(request), len(previous)) and request[shared] == previous[shared]:
                shared += 1
        total = tool_tokens + sum(counts)
        reused = 0 if previous is None else tool_tokens + sum(counts[:shared])
        if reused < min_cached:
            reused = 0
        broke = previous is not None and shared < len(previous)
        bill = reused * prices.read + (total - reused) * prices.write
        out.append(RequestCost(total, reused, broke, bill))
        previous = request
    return CostReport(tuple(out), prices)


def _tokens(message: object, encoding: str, counter: Counter | None, path: str) -> int:
    if not isinstance(message, Mapping):
        raise InvalidOperationError(f"measure: {path} must be a message dict, got {type(message).__name__}")
    return tokens.count_message(dict(message), encoding, counter=counter)
