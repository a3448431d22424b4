"""The sanitizer: remove what the model APIs would refuse about tool calls, and say why.

The rules are the APIs' own (``docs/sanitizer.md``): the tool calls of an assistant message must
all be answered right after it, by the run of ``tool`` messages that follows it (OpenAI) or by the
``tool_result`` blocks of the user message that follows it (Anthropic); otherwise the assistant
message and its partial results go. A Responses API call item (``function_call``, ...) must be
answered by an output item with its ``call_id`` somewhere after it; otherwise it goes, with the
``reasoning`` items before it when all the calls they precede go. Orphan results, results without
an id and duplicate results go. Every format, mixed freely, in one pass.

The scan itself is Rust (``memci._core``); this module holds the policy: the result records, the
reasons a person reads, and the one warning line logged on ``logging.getLogger("memci")``.

>>> r = sanitize_messages([
...     {"role": "user", "content": "hi"},
...     {"role": "tool", "tool_call_id": "call_9", "content": "42"},
... ])
>>> r.removed_messages[0].reason
'orphan tool result for call_9: no assistant message with tool calls comes right before it'
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memci import _core
from memci.errors import InvalidMessageError

__all__ = ["RemovedMessage", "SanitizeResult", "ValidationResult", "sanitize_messages", "validate_messages"]

logger = logging.getLogger("memci")

Message = dict[str, Any]
#: What the core reports per message to remove: index, role, reason code, the ids the reason
#: names, and the other position it names (a call number, an assistant message, a first result).
_Finding = tuple[int, str, str, list[str], int | None]


@dataclass(frozen=True, slots=True)
class RemovedMessage:
    """One message the sanitizer removed: its ``index`` in the input (for
    :meth:`MessageArray.sanitize <memci.MessageArray.sanitize>`, its position in the visible list
    before the call), its ``role``, and the ``reason``."""

    index: int
    role: str
    reason: str


class SanitizeResult:
    """What :func:`sanitize_messages` and :meth:`MessageArray.sanitize <memci.MessageArray.sanitize>`
    return.

    ``messages`` is the sanitized list; ``sanitized`` is whether anything was removed;
    ``removed_count`` how many; ``removed_messages`` which and why, in index order. From
    ``MessageArray.sanitize`` the messages are the visible list right after the call, decoded on
    first access (O(n), then kept): a report that is only read costs nothing more.
    """

    __slots__ = ("_messages", "removed_messages")

    def __init__(
        self, messages: Sequence[Message] | _core.MessageView, removed_messages: Iterable[RemovedMessage] = ()
    ) -> None:
        self._messages = messages
        #: Which messages were removed and why, in index order.
        self.removed_messages: list[RemovedMessage] = list(removed_messages)

    @property
    def messages(self) -> list[Message]:
        """The sanitized messages, in order."""
        messages = self._messages
        if isinstance(messages, _core.MessageView):
            messages = self._messages = messages.messages()
        elif not isinstance(messages, list):
            messages = self._messages = list(messages)
        return messages

    @property
    def sanitized(self) -> bool:
        """Whether any message was removed."""
        return bool(self.removed_messages)

    @property
    def removed_count(self) -> int:
        """How many messages were removed."""
        return len(self.removed_messages)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SanitizeResult):
            return NotImplemented
        return self.removed_messages == other.removed_messages and self.messages == other.messages

    __hash__ = None  # type: ignore[assignment]  # it holds lists, like a list

    def __repr__(self) -> str:
        return (
            f"SanitizeResult(messages=<{len(self._messages)} messages>, sanitized={self.sanitized}, "
            f"removed_messages={self.removed_messages!r})"
        )


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """What :func:`validate_messages` returns: ``valid`` when the model APIs would accept the tool
    calls and results as they are; otherwise ``errors`` says, for each message the sanitizer would
    remove, where it is and why (``"messages[5] (assistant): missing tool results for: call_2"``)."""

    valid: bool
    errors: list[str]


# ---- reasons --------------------------------------------------------------------------------------


def _reason(index: int, role: str, code: str, ids: list[str], other: int | None) -> str:
    """The reason a person reads, from what the core found."""
    first = ids[0] if ids else ""
    match code:
        case "unanswered":
            return f"missing tool results for: {', '.join(ids)} (each call must be answered right after it)"
        case "call_without_id":
            return f"tool call #{other} has no id, so no result can answer it"
        case "repeated_call_id":
            return f"makes two tool calls with the id {first}, so their results cannot be told apart"
        case "results_removed":
            return f"its tool results (message {other}) were removed, so its calls are unanswered"
        case "incomplete":
            return f"associated with the incomplete assistant message at index {other} (removed with it)"
        case "orphan" if other is None:
            return f"orphan tool result for {first}: no assistant message with tool calls comes right before it"
        case "orphan":
            return f"orphan tool result for {first}: the assistant message at index {other} made no such call"
        case "no_id" if role == "tool":
            return "tool message without a tool_call_id: it answers no call"
        case "no_id":
            return "holds a tool_result block without a tool_use_id: it answers no call"
        case "results_not_first":
            return "its tool_result blocks must come first in the message, before any other block"
        case "duplicate" if other == index:
            return f"holds two tool_result blocks for {first}"
        case "duplicate":
            return f"duplicate tool result for {first} (the first is at index {other})"
        case "unanswered_call":
            return (
                f"no output item answers the call {first} (the Responses API: No tool output found for function call)"
            )
        case "call_item_without_id":
            return "call item with an empty call_id: no output can answer it"
        case "orphan_output":
            return f"orphan output for {first}: no call item with this call_id comes before it"
        case "duplicate_output":
            return f"duplicate output for {first} (the first is at index {other})"
        case "output_without_id":
            return "output item with an empty call_id: it answers no call"
        case "reasoning_of_removed":
            return f"reasoning item before the removed call at index {other} (removed with it: it needs its next item)"
    return code  # pragma: no cover - the core reports only the codes above


def _records(findings: list[_Finding]) -> list[RemovedMessage]:
    return [
        RemovedMessage(index, role, _reason(index, role, code, ids, other))
        for index, role, code, ids, other in findings
    ]


def _errors(findings: list[_Finding]) -> list[str]:
    return [f"messages[{r.index}] ({r.role}): {r.reason}" for r in _records(findings)]


class _Details:
    """The removals as one line, formatted only if the warning is emitted."""

    __slots__ = ("removed",)

    def __init__(self, removed: list[RemovedMessage]) -> None:
        self.removed = removed

    def __str__(self) -> str:
        return "; ".join(f"[{r.index}] {r.role}: {r.reason}" for r in self.removed)


def _warn(removed: list[RemovedMessage]) -> None:
    logger.warning("messages sanitized: removed %d: %s", len(removed), _Details(removed))


# ---- entry points ---------------------------------------------------------------------------------


def _as_sequence(messages: object) -> list[Message] | tuple[Message, ...]:
    if type(messages) is list or type(messages) is tuple:
        return messages
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise InvalidMessageError(
            f"messages: expected a list of message dicts, got {type(messages).__name__}", path="messages"
        )
    return list(messages)


def sanitize_messages(messages: Iterable[Mapping[str, Any]]) -> SanitizeResult:
    """Remove the messages the model APIs would refuse for their tool calls or results.

    Accepts OpenAI chat, Anthropic and Responses API lists, mixed (or any iterable of message
    dicts, SDK objects taken as their ``model_dump``); never changes them. The result's ``messages``
    is a new list of the input's own objects, in order, without the removed ones; when nothing is
    removed it equals the input. Logs one warning on ``logging.getLogger("memci")`` when something
    is removed. Reads only ``role``, ``type``, ``call_id``, ``tool_calls[*].id``, ``tool_call_id``
    and content blocks' ``type``, ``id`` and ``tool_use_id``. Raises
    :class:`~memci.errors.InvalidMessageError` when an entry is not a dict, or is not a Responses
    item and has no ``str`` role. O(n).
    """
    items = _as_sequence(messages)
    findings = _core.scan_list(items)
    if not findings:
        return SanitizeResult(list(items))
    kept: list[Message] = []
    start = 0
    for index, *_ in findings:
        kept += items[start:index]
        start = index + 1
    kept += items[start:]
    removed = _records(findings)
    _warn(removed)
    return SanitizeResult(kept, removed)


def validate_messages(messages: Iterable[Mapping[str, Any]]) -> ValidationResult:
    """Check, without changing anything, that the tool calls and results of ``messages`` are as
    the model APIs require: ``valid`` is True exactly when :func:`sanitize_messages` would remove
    nothing, and ``errors`` names each message it would remove and why. O(n)."""
    errors = _errors(_core.scan_list(_as_sequence(messages)))
    return ValidationResult(not errors, errors)


def sanitize_store(store: _core.MessageStore) -> SanitizeResult:
    """:meth:`MessageArray.sanitize <memci.MessageArray.sanitize>` on its store."""
    findings, view = _core.sanitize_store(store, "sanitize()")
    if not findings:
        return SanitizeResult(view)
    removed = _records(findings)
    _warn(removed)
    return SanitizeResult(view, removed)


def validate_store(store: _core.MessageStore) -> ValidationResult:
    """:meth:`MessageArray.validate <memci.MessageArray.validate>` on its store."""
    errors = _errors(_core.scan_store(store))
    return ValidationResult(not errors, errors)
