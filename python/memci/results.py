"""What the operations and queries of :class:`memci.MessageArray` return: plain frozen records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BatchSnapshot", "EditResult", "OperationResult", "Stats"]


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts of a :class:`~memci.MessageArray` at one moment.

    ``total_messages`` counts every message ever stored (replaced and hidden ones included),
    ``current_batch_messages`` the visible ones; batches are numbered ``0..=current_batch_index``,
    so ``total_batches == current_batch_index + 1``.
    """

    total_messages: int
    current_batch_messages: int
    total_batches: int
    current_batch_index: int


@dataclass(frozen=True, slots=True)
class BatchSnapshot:
    """The visible messages of one batch.

    For a batch that has ended, the state when it ended, with ``description`` saying what ended it
    (``"truncate(keep_last=5)"``, a checkpoint's own text) and ``timestamp`` when (epoch seconds).
    For the current batch, the current state, with ``description`` ``None`` and the current time.
    """

    batch_index: int
    timestamp: float
    messages: list[dict[str, Any]]
    message_count: int
    description: str | None


@dataclass(frozen=True, slots=True)
class OperationResult:
    """The outcome of one operation.

    ``operation`` is the lower-case operation name, ``affected_batch_index`` the batch the operation
    left current, ``message_count`` the number of visible messages after it.
    """

    operation: str
    affected_batch_index: int
    message_count: int
    stats: Stats


@dataclass(frozen=True, slots=True)
class EditResult(OperationResult):
    """The outcome of a context edit (``clear_tool_uses``, ``clear_thinking``), with what it
    cleared, as Anthropic's API reports its own edits: ``cleared_tool_uses`` (tool uses whose
    result or input was cleared), ``cleared_thinking_turns``, and ``cleared_input_tokens``, exact:
    the visible messages' token count before the edit less the count after it (in the edit's
    encoding and thinking rule). All 0 when nothing was cleared (then no batch opened)."""

    cleared_tool_uses: int = 0
    cleared_thinking_turns: int = 0
    cleared_input_tokens: int = 0
