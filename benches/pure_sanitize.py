"""The honest peer of the sanitizer: the same rules (docs/sanitizer.md) and the same report, in
careful pure Python.

Written to be fast, so that beating it means something: one pass over the list; a message costs
one ``m["role"]`` lookup plus, for the roles that can carry calls or results, one or two ``.get``;
a group's ids are matched in a small list (groups hold a handful of calls); the kept list is built
from slices between the removed indices (C speed); reason texts are built only for removed
messages. ``PySanitizingArray`` adds ``sanitize`` / ``validate`` to the pure-Python message array:
sanitize is a new batch whose snapshot is the old list itself (no copy), like its FILTER.
"""

from __future__ import annotations

import logging
from typing import Any

from pure_python import PyMessageArray

Message = dict[str, Any]
#: (index, role, reason)
Removal = tuple[int, str, str]

logger = logging.getLogger("pure_sanitize")


def _id(value: Any) -> str | None:
    return value if type(value) is str and value else None


def _call_ids(m: Message) -> list[str | None]:
    calls = m.get("tool_calls")
    ids: list[str | None] = []
    if type(calls) is list:
        ids = [_id(c.get("id")) if type(c) is dict else None for c in calls]
    elif calls is not None:
        ids = [None]
    content = m.get("content")
    if type(content) is list:
        ids += [_id(b.get("id")) for b in content if type(b) is dict and b.get("type") == "tool_use"]
    return ids


def _result_ids(m: Message) -> list[str | None]:
    content = m.get("content")
    if type(content) is not list:
        return []
    return [_id(b.get("tool_use_id")) for b in content if type(b) is dict and b.get("type") == "tool_result"]


def _late(content: list[Any]) -> bool:
    """Whether a tool_result block comes after a block of another type."""
    other = False
    for b in content:
        if type(b) is dict and b.get("type") == "tool_result":
            if other:
                return True
        else:
            other = True
    return False


def _answer(calls: list[str | None], answered: dict[str, int], a: int, at: int, rid: str | None) -> str | None:
    """Record a result; return why it goes, if it does."""
    if rid is None:
        return "no_id"
    if rid not in calls:
        return f"orphan tool result for {rid}: the assistant message at index {a} made no such call"
    if rid in answered:
        first = answered[rid]
        if first == at:
            return f"holds two tool_result blocks for {rid}"
        return f"duplicate tool result for {rid} (the first is at index {first})"
    answered[rid] = at
    return None


def _no_id(role: str) -> str:
    if role == "tool":
        return "tool message without a tool_call_id: it answers no call"
    return "holds a tool_result block without a tool_use_id: it answers no call"


def _group(messages: list[Message], a: int, calls: list[str | None], out: list[Removal]) -> int:
    n = len(messages)
    answered: dict[str, int] = {}
    results: list[tuple[int, str, str | None]] = []
    j = a + 1
    while j < n and messages[j]["role"] == "tool":
        t = messages[j]
        results.append((j, "tool", _answer(calls, answered, a, j, _id(t.get("tool_call_id")))))
        j += 1
    assistant_reason = None
    if j == a + 1 and j < n and messages[j]["role"] == "user":
        rids = _result_ids(messages[j])
        if rids:
            problem = None
            for rid in rids:
                reason = _answer(calls, answered, a, j, rid)
                problem = problem or reason
            if not problem and _late(messages[j]["content"]):
                problem = "its tool_result blocks must come first in the message, before any other block"
            if problem:
                answered = {}
                assistant_reason = f"its tool results (message {j}) were removed, so its calls are unanswered"
            results.append((j, "user", problem))
            j += 1
    for k, cid in enumerate(calls):
        if cid is None:
            assistant_reason = f"tool call #{k} has no id, so no result can answer it"
            break
        if cid in calls[:k]:
            assistant_reason = f"makes two tool calls with the id {cid}, so their results cannot be told apart"
            break
    if assistant_reason is None and len(answered) < len(calls):
        missing = ", ".join(c for c in calls if c not in answered)  # type: ignore[misc]
        assistant_reason = f"missing tool results for: {missing} (each call must be answered right after it)"
    if assistant_reason is not None:
        out.append((a, "assistant", assistant_reason))
    incomplete = f"associated with the incomplete assistant message at index {a} (removed with it)"
    for index, role, reason in results:
        if reason == "no_id":
            out.append((index, role, _no_id(role)))
        elif reason is not None:
            out.append((index, role, reason))
        elif assistant_reason is not None:
            out.append((index, role, incomplete))
    return j


def scan(messages: list[Message]) -> list[Removal]:
    """What to remove, in index order. O(n)."""
    out: list[Removal] = []
    n = len(messages)
    i = 0
    while i < n:
        m = messages[i]
        role = m["role"]
        if role == "assistant":
            if m.get("tool_calls") is not None or type(m.get("content")) is list:
                calls = _call_ids(m)
                if calls:
                    i = _group(messages, i, calls, out)
                    continue
        elif role == "tool":
            rid = _id(m.get("tool_call_id"))
            if rid is None:
                out.append((i, role, _no_id(role)))
            else:
                reason = f"orphan tool result for {rid}: no assistant message with tool calls comes right before it"
                out.append((i, role, reason))
        elif role == "user" and type(m.get("content")) is list:
            rids = _result_ids(m)
            if rids and all(rids):
                reason = f"orphan tool result for {rids[0]}: no assistant message with tool calls comes right before it"
                out.append((i, role, reason))
            elif rids:
                out.append((i, role, _no_id(role)))
        i += 1
    return out


def sanitize_messages(messages: list[Message]) -> tuple[list[Message], list[Removal]]:
    """(kept messages, removals); logs one warning line when something goes."""
    removals = scan(messages)
    if not removals:
        return list(messages), removals
    kept: list[Message] = []
    start = 0
    for index, _, _ in removals:
        kept += messages[start:index]
        start = index + 1
    kept += messages[start:]
    if logger.isEnabledFor(logging.WARNING):
        details = "; ".join(f"[{i}] {r}: {w}" for i, r, w in removals)
        logger.warning("messages sanitized: removed %d: %s", len(removals), details)
    return kept, removals


def validate_messages(messages: list[Message]) -> tuple[bool, list[str]]:
    errors = [f"messages[{i}] ({role}): {reason}" for i, role, reason in scan(messages)]
    return not errors, errors


class PySanitizingArray(PyMessageArray):
    """The pure-Python message array with ``sanitize`` and ``validate``."""

    __slots__ = ()

    def sanitize(self) -> list[Removal]:
        """A new batch when something goes (the old list is its snapshot); none otherwise."""
        kept, removals = sanitize_messages(self.visible)
        if removals:
            self._open_batch(self.visible)
            self._set_visible(kept)
        return removals

    def validate(self) -> tuple[bool, list[str]]:
        return validate_messages(self.visible)
