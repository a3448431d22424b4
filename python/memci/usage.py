"""What the model says it used: record each response's usage, read totals and per-batch figures.

>>> from memci import TokenUsage
>>> usage = TokenUsage()
>>> usage.record({"prompt_tokens": 1200, "completion_tokens": 80, "prompt_tokens_details": {"cached_tokens": 1024}})
Usage(prompt_tokens=1200, completion_tokens=80, cached_tokens=1024, cache_write_tokens=0, reasoning_tokens=0)
>>> usage.record({"input_tokens": 30, "output_tokens": 12, "cache_read_input_tokens": 1000})
Usage(prompt_tokens=1030, completion_tokens=12, cached_tokens=1000, cache_write_tokens=0, reasoning_tokens=0)
>>> usage.total.total_tokens
2322

``record`` takes the usage as the provider returns it, as a dict or an SDK object, or the whole
response (anything with a ``usage`` or ``usage_metadata``): OpenAI Chat Completions
(``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``), OpenAI
Responses (``input_tokens``, ``output_tokens``, ``input_tokens_details``), Anthropic
(``input_tokens`` *without* the cache, ``cache_read_input_tokens``,
``cache_creation_input_tokens``) and LangChain's ``usage_metadata``. They are normalised to OpenAI's
meaning: ``prompt_tokens`` counts every input token the model read, cached ones included.

:attr:`memci.MessageArray.usage` is a tracker that files each record under the array's current
batch, so ``per_batch()`` shows what each batch of the conversation cost (the design's
``TokenUsageTracker``), and beside each record memci's own count of the request (``counted``: the
array's ``token_count()`` when the response is recorded, so record a response before appending its
reply). Those pairs calibrate :class:`memci.claude_tokens.CalibratedCounter` for a model whose
tokenizer memci does not ship.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from memci.errors import InvalidOperationError, repr_of

__all__ = ["TokenUsage", "Usage", "UsageRecord"]

logger = logging.getLogger("memci")


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    """Token usage, normalised: ``prompt_tokens`` is every input token (``cached_tokens`` and
    ``cache_write_tokens`` are parts of it), ``reasoning_tokens`` is part of ``completion_tokens``."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True)))

    @classmethod
    def of(cls, usage: object) -> Usage:
        """Read a provider's usage (dict, SDK object, or a response carrying one); see the module
        docs for the shapes. Raises :class:`~memci.InvalidOperationError` for anything else."""
        if isinstance(usage, Usage):
            return usage
        for wrapper in ("usage", "usage_metadata"):
            inner = _field(usage, wrapper)
            if inner is not None and not isinstance(inner, int | float):
                return cls.of(inner)
        if _field(usage, "prompt_tokens") is not None or _field(usage, "completion_tokens") is not None:
            return cls(
                prompt_tokens=_int(usage, "prompt_tokens"),
                completion_tokens=_int(usage, "completion_tokens"),
                cached_tokens=_int(_field(usage, "prompt_tokens_details"), "cached_tokens"),
                reasoning_tokens=_int(_field(usage, "completion_tokens_details"), "reasoning_tokens"),
            )
        if _field(usage, "input_tokens") is None and _field(usage, "output_tokens") is None:
            raise InvalidOperationError(
                f"usage: not a usage this knows (OpenAI, Anthropic or LangChain), got {_shown(usage)}"
            )
        read, written = _int(usage, "cache_read_input_tokens"), _int(usage, "cache_creation_input_tokens")
        if read or written or _field(usage, "cache_read_input_tokens") is not None:
            # Anthropic: input_tokens leaves out what was read from or written to the cache.
            prompt, cached = _int(usage, "input_tokens") + read + written, read
        else:
            details = _field(usage, "input_tokens_details") or _field(usage, "input_token_details")
            prompt = _int(usage, "input_tokens")
            cached = _int(details, "cached_tokens") or _int(details, "cache_read")
            written = _int(details, "cache_creation")
        output = _field(usage, "output_tokens_details") or _field(usage, "output_token_details")
        return cls(
            prompt_tokens=prompt,
            completion_tokens=_int(usage, "output_tokens"),
            cached_tokens=cached,
            cache_write_tokens=written,
            reasoning_tokens=_int(output, "reasoning_tokens") or _int(output, "reasoning"),
        )


def _field(obj: object, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(obj: object, name: str) -> int:
    value = _field(obj, name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidOperationError(f"usage: {name} must be an int >= 0 or None, got {repr_of(value)}")
    return int(value)


def _shown(obj: object) -> str:
    if isinstance(obj, Mapping):
        return f"a dict with keys {sorted(map(str, obj))}"
    return type(obj).__name__


@dataclasses.dataclass(frozen=True, slots=True)
class UsageRecord:
    """One recorded response: its usage, the batch it was filed under (``None`` outside an
    array), the model if given, when it was recorded (epoch seconds), and memci's own count of
    the request (``None`` when not known)."""

    usage: Usage
    batch_index: int | None
    model: str | None
    timestamp: float
    counted: int | None = None


class TokenUsage:
    """Every response's usage, in order, with totals, per-batch and per-model sums.

    ``limit`` (optional): when a response's ``prompt_tokens`` exceed it, :attr:`over_limit` turns
    true and a warning is logged on ``logging.getLogger("memci")``. ``batch`` (optional): a
    callable giving the batch index to file each record under (what :attr:`MessageArray.usage`
    passes). ``count`` (optional): a callable giving memci's count of the request each record is
    for (what :attr:`MessageArray.usage` passes: the array's ``token_count()``). Safe to share
    between threads. Records are kept in memory; they are not part of an array's saved state, and
    a rollback does not remove them (the tokens were spent).
    """

    __slots__ = ("_batch", "_count", "_limit", "_lock", "_records", "_total")

    def __init__(
        self,
        *,
        limit: int | None = None,
        batch: Callable[[], int] | None = None,
        count: Callable[[], int] | None = None,
    ) -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidOperationError(f"TokenUsage: limit must be an int >= 0 or None, got {repr_of(limit)}")
        self._limit = limit
        self._batch = batch
        self._count = count
        self._lock = threading.Lock()
        self._records: list[UsageRecord] = []
        self._total = Usage()

    def record(
        self,
        usage: object,
        *,
        model: str | None = None,
        batch_index: int | None = None,
        counted: int | None = None,
    ) -> Usage:
        """Record one response's usage (see :meth:`Usage.of` for the shapes) and return it
        normalised. ``batch_index`` overrides the tracker's own, ``counted`` (memci's count of the
        request) its ``count``. O(1) (plus the count, O(1) once counted for an array)."""
        normalised = Usage.of(usage)
        if model is not None and not isinstance(model, str):
            raise InvalidOperationError(f"usage: model must be a str or None, got {repr_of(model)}")
        if counted is not None and (isinstance(counted, bool) or not isinstance(counted, int) or counted < 0):
            raise InvalidOperationError(f"usage: counted must be an int >= 0 or None, got {repr_of(counted)}")
        batch = batch_index if batch_index is not None else (self._batch() if self._batch else None)
        if counted is None and self._count is not None:
            counted = self._count()
        with self._lock:
            self._records.append(UsageRecord(normalised, batch, model, time.time(), counted))
            self._total += normalised
        if self._limit is not None and normalised.prompt_tokens > self._limit:
            logger.warning(
                "memci: a prompt of %d tokens exceeds the limit of %d", normalised.prompt_tokens, self._limit
            )
        return normalised

    @property
    def total(self) -> Usage:
        """The sum over every record. O(1)."""
        return self._total

    @property
    def last(self) -> Usage | None:
        """The latest record's usage (``prompt_tokens`` is the size of the last request)."""
        with self._lock:
            return self._records[-1].usage if self._records else None

    @property
    def limit(self) -> int | None:
        return self._limit

    @property
    def over_limit(self) -> bool:
        """Whether the latest prompt exceeded ``limit``."""
        last = self.last
        return self._limit is not None and last is not None and last.prompt_tokens > self._limit

    def records(self) -> list[UsageRecord]:
        """Every record, oldest first (a copy)."""
        with self._lock:
            return list(self._records)

    def per_batch(self) -> dict[int | None, Usage]:
        """The sum of the records filed under each batch index, in first-seen order. O(records)."""
        return self._sum_by(lambda r: r.batch_index)

    def per_model(self) -> dict[str | None, Usage]:
        """The sum of the records of each model, in first-seen order. O(records)."""
        return self._sum_by(lambda r: r.model)

    def _sum_by(self, key: Callable[[UsageRecord], Any]) -> dict[Any, Usage]:
        out: dict[Any, Usage] = {}
        for r in self.records():
            k = key(r)
            out[k] = out.get(k, Usage()) + r.usage
        return out

    def reset(self) -> None:
        """Forget every record."""
        with self._lock:
            self._records.clear()
            self._total = Usage()

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[UsageRecord]:
        return iter(self.records())

    def __repr__(self) -> str:
        t = self._total
        return (
            f"<memci.TokenUsage: {len(self)} responses, {t.prompt_tokens} prompt "
            f"({t.cached_tokens} cached) + {t.completion_tokens} completion tokens>"
        )
