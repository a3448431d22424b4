"""Counting for Claude, whose tokenizer memci does not ship: an estimate calibrated from the usage
the API reports, and Anthropic's ``count_tokens`` endpoint called at most once per ``every`` turns.

>>> from memci.claude_tokens import CalibratedCounter
>>> claude = CalibratedCounter()
>>> claude.observe([{"role": "user", "content": "hello world"}], {"input_tokens": 12, "output_tokens": 3})
>>> claude.count_messages([{"role": "user", "content": "hello world"}])
12

:class:`CalibratedCounter` counts exactly in an encoding memci ships (``o200k_base``) and scales
by what the API reported for the requests it saw: a line fitted to (memci's count, the reported
``prompt_tokens``), its slope the tokenizers' ratio, its intercept what each request carries
beside its messages (a system prompt given apart, tool definitions). It is an estimate: its
:meth:`~CalibratedCounter.error` is its leave-one-out error on the requests it saw, and
``docs/tokens.md`` gives the error measured on the project's generated conversations.

:class:`CountTokensCounter` asks Anthropic's ``count_tokens`` endpoint (free, rate-limited) for
the exact count, at most once per ``every`` turns, and in between adds the calibrated estimate of
what changed since its last exact count; an unchanged request is answered from its cache.

Both are message counters (``counter=`` of :meth:`memci.MessageArray.trim_to_tokens`,
:class:`memci.ContextSystem`): a message in, its calibrated tokens out. The thinking of earlier
turns is dropped by default, as Anthropic's API drops it (see :mod:`memci.tokens`).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from memci import formats, tokens
from memci.errors import InvalidOperationError, repr_of
from memci.tokens import Message
from memci.usage import TokenUsage, Usage

__all__ = ["CalibratedCounter", "CountTokensCounter", "TokenCountingClient"]


class CalibratedCounter:
    """memci's exact count in ``encoding``, scaled to a provider's by the usage it reports.

    ``observe(messages, usage)`` adds one request; :meth:`from_usage` takes the records of a
    :class:`~memci.TokenUsage` that carry memci's count (``arr.usage``). With no observation the
    estimate is memci's own count. O(1) per observation (sums kept); thread-safe."""

    __slots__ = ("_encoding", "_lock", "_points", "_thinking")

    def __init__(self, encoding: str = tokens.DEFAULT_ENCODING, *, thinking: str = tokens.DEFAULT_THINKING) -> None:
        self._encoding = tokens.encoding_for_model(encoding)
        self._thinking = tokens.thinking_rule("CalibratedCounter", thinking)
        self._lock = threading.Lock()
        #: (memci's count, the provider's) per observed request.
        self._points: list[tuple[int, int]] = []

    @classmethod
    def from_usage(cls, usage: TokenUsage, encoding: str = tokens.DEFAULT_ENCODING) -> CalibratedCounter:
        """A counter fitted to the records of ``usage`` that carry memci's count of their request
        (``arr.usage`` records the array's ``token_count()``, in ``o200k_base``)."""
        if not isinstance(usage, TokenUsage):
            raise InvalidOperationError(f"CalibratedCounter.from_usage: expected a TokenUsage, got {repr_of(usage)}")
        counter = cls(encoding)
        for record in usage.records():
            if record.counted is not None:
                counter.add(record.counted, record.usage.prompt_tokens)
        return counter

    def observe(self, messages: Iterable[Mapping[str, Any]], usage: object) -> None:
        """Add one request: the messages sent and the usage the API reported for them (any shape
        :meth:`memci.Usage.of` reads)."""
        self.add(self.local_count(messages), Usage.of(usage).prompt_tokens)

    def add(self, counted: int, reported: int) -> None:
        """Add one request by its counts: memci's and the provider's."""
        for name, value in (("counted", counted), ("reported", reported)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidOperationError(f"CalibratedCounter: {name} must be an int >= 0, got {repr_of(value)}")
        with self._lock:
            self._points.append((counted, reported))

    def local_count(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """memci's exact count of ``messages`` in the counter's encoding (the thinking rule applied)."""
        return tokens.count_messages(messages, self._encoding, thinking=self._thinking)

    @property
    def observations(self) -> int:
        return len(self._points)

    @property
    def line(self) -> tuple[float, float]:
        """``(ratio, overhead)``: the provider's count of a request is ``ratio * memci's +
        overhead``. Least squares over the observations; through the origin when there are fewer
        than two distinct counts or the fitted overhead is negative; ``(1.0, 0.0)`` with none."""
        with self._lock:
            return _fit(self._points)

    @property
    def ratio(self) -> float:
        return self.line[0]

    @property
    def slope(self) -> float:
        """What one more of memci's tokens costs in the provider's: the fitted ratio once two
        distinct counts fix a line, else 1.0 (one request's ratio holds its fixed overhead too)."""
        with self._lock:
            distinct = len({x for x, _ in self._points})
        return self.ratio if distinct >= 2 else 1.0

    @property
    def overhead(self) -> float:
        return self.line[1]

    def __call__(self, message: Message) -> int:
        """One message's estimated tokens: memci's count scaled by the ratio, rounded up (a
        message counter; the overhead is the request's, not a message's)."""
        return math.ceil(tokens.count_message(message, self._encoding) * self.ratio)

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """The estimated tokens of one request holding ``messages``: the fitted line at memci's count."""
        ratio, overhead = self.line
        return round(ratio * self.local_count(messages) + overhead)

    def error(self) -> float | None:
        """The mean relative error of the estimate on the requests observed, each predicted by a
        line fitted to the others (leave-one-out); None with fewer than 3 observations."""
        with self._lock:
            points = list(self._points)
        if len(points) < 3:
            return None
        errors = []
        for i, (counted, reported) in enumerate(points):
            ratio, overhead = _fit(points[:i] + points[i + 1 :])
            errors.append(abs(ratio * counted + overhead - reported) / max(reported, 1))
        return sum(errors) / len(errors)

    def __repr__(self) -> str:
        ratio, overhead = self.line
        return (
            f"<memci.CalibratedCounter: {self._encoding} x {ratio:.4f} + {overhead:.1f}, {self.observations} requests>"
        )


def _fit(points: Sequence[tuple[int, int]]) -> tuple[float, float]:
    """Least squares of reported on counted; through the origin when the line is not defined by
    the points or would give a negative intercept."""
    if not points:
        return 1.0, 0.0
    n = len(points)
    sx = sum(x for x, _ in points)
    sy = sum(y for _, y in points)
    sxx = sum(x * x for x, _ in points)
    sxy = sum(x * y for x, y in points)
    spread = n * sxx - sx * sx
    if spread > 0:
        slope = (n * sxy - sx * sy) / spread
        intercept = (sy - slope * sx) / n
        if slope > 0 and intercept >= 0:
            return slope, intercept
    return (sxy / sxx if sxx else 1.0), 0.0


class _CountTokens(Protocol):
    def count_tokens(self, **request: Any) -> Any: ...


class TokenCountingClient(Protocol):
    """What :class:`CountTokensCounter` needs of a client: the Anthropic SDK's
    ``client.messages.count_tokens(model=..., messages=..., system=..., tools=...)``."""

    @property
    def messages(self) -> _CountTokens: ...


class CountTokensCounter:
    """Claude's count from Anthropic's ``count_tokens`` endpoint, called at most once per
    ``every`` turns (a turn: one :meth:`count_messages` call).

    ``client``: an ``anthropic.Anthropic`` (or anything with ``messages.count_tokens``); ``model``
    the model to count for; ``system`` and ``tools`` what each request carries beside its messages
    (a system message among the messages is lifted into ``system`` by
    :func:`memci.formats.to_anthropic`). Between calls a count is the last exact one plus the
    calibrated estimate (:class:`CalibratedCounter`, fitted to every exact count so far) of the
    change since; a request identical to the last one counted exactly is answered from the cache.
    Thread-safe; the endpoint is called outside the lock."""

    __slots__ = (
        "_calibration",
        "_client",
        "_every",
        "_last",
        "_lock",
        "_model",
        "_since",
        "_system",
        "_tools",
        "calls",
    )

    def __init__(
        self,
        client: TokenCountingClient,
        model: str,
        *,
        every: int = 5,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        encoding: str = tokens.DEFAULT_ENCODING,
    ) -> None:
        if not callable(getattr(getattr(client, "messages", None), "count_tokens", None)):
            raise InvalidOperationError(
                f"CountTokensCounter: client must have messages.count_tokens (an anthropic.Anthropic), "
                f"got {type(client).__name__}"
            )
        if not isinstance(model, str) or not model:
            raise InvalidOperationError(f"CountTokensCounter: model must be a non-empty str, got {repr_of(model)}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise InvalidOperationError(f"CountTokensCounter: every must be an int >= 1, got {repr_of(every)}")
        self._client, self._model, self._every = client, model, every
        self._system, self._tools = system, None if tools is None else list(tools)
        self._calibration = CalibratedCounter(encoding)
        self._lock = threading.Lock()
        #: (request digest, memci's count, the endpoint's) of the last exact count.
        self._last: tuple[str, int, int] | None = None
        #: Turns since the last call.
        self._since = 0
        #: Calls made to the endpoint.
        self.calls = 0

    @property
    def calibration(self) -> CalibratedCounter:
        """The estimate fitted to the exact counts so far (also the per-message counter)."""
        return self._calibration

    def __call__(self, message: Message) -> int:
        """One message's estimated tokens (:class:`CalibratedCounter`), for ``counter=``."""
        return self._calibration(message)

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """The tokens of one request holding ``messages``: exact when the endpoint is asked (the
        first turn, then once ``every`` turns have passed since the last call) or the request is
        the last one asked about; otherwise the last exact count plus the estimated change."""
        items = list(messages)
        request = self._request(items)
        digest = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()
        local = self._calibration.local_count(items)
        with self._lock:
            last = self._last
            if last is not None and last[0] == digest:
                return last[2]
            self._since += 1
            if last is not None and self._since < self._every:
                return max(0, round(last[2] + self._calibration.slope * (local - last[1])))
            self._since = 0
        exact = self._ask(request)
        self._calibration.add(local, exact)
        with self._lock:
            self._last = (digest, local, exact)
        return exact

    def _request(self, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The ``count_tokens`` arguments for ``items``: Anthropic's format, the thinking of earlier
        turns left in (the endpoint applies the rule itself)."""
        request: dict[str, Any] = dict(formats.to_anthropic(items))
        if self._system is not None:
            lifted = request.pop("system", None)
            request["system"] = self._system if lifted is None else _joined(self._system, lifted)
        if self._tools is not None:
            request["tools"] = self._tools
        return request

    def _ask(self, request: dict[str, Any]) -> int:
        """The endpoint's ``input_tokens`` for ``request``."""
        reply = self._client.messages.count_tokens(model=self._model, **request)
        value = reply.get("input_tokens") if isinstance(reply, Mapping) else getattr(reply, "input_tokens", None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidOperationError(
                f"CountTokensCounter: count_tokens returned no input_tokens, got {repr_of(reply)}"
            )
        with self._lock:
            self.calls += 1
        return value


def _joined(first: str | Sequence[Mapping[str, Any]], second: Any) -> list[Any]:
    """Two ``system`` values as one list of text blocks."""

    def blocks(system: Any) -> list[Any]:
        return [{"type": "text", "text": system}] if isinstance(system, str) else list(system)

    return blocks(first) + blocks(second)
