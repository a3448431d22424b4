"""The context edits of a :class:`~memci.ContextSystem` (``context_edits=[...]``), applied to each
window it builds, never to what it stores: pages keep their messages as they were added, so
``recall_page`` returns them byte for byte. Semantics: ``docs/context-edits.md``.

A :class:`~memci.ops.ClearToolUses` clears whole pages, in blocks: the pages through a boundary
(``cleared_through``) have their tool results replaced by the placeholder (each naming the page
that keeps the original); the boundary moves only when the window passes the edit's ``trigger``,
and then as far as ``keep`` allows in one step, so between two steps the cleared prefix of the
window is the same bytes request after request (what a prompt cache reuses). The open page is
never cleared. A :class:`~memci.ops.ClearThinking` is applied to the whole window at each build:
what it clears changes only when a new turn with thinking starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memci import ops
from memci.array import MessageArray
from memci.errors import InvalidOperationError, repr_of

Message = dict[str, Any]
Edit = ops.ClearToolUses | ops.ClearThinking

#: The placeholder of a cleared result in a context system: ``{page}`` is the page that keeps it.
PAGE_PLACEHOLDER = (
    "[tool result cleared to save context: the output of {name} (call {id}) is kept in page {page}; "
    "recall_page({page}) shows it]"
)

_CALL_ITEMS = frozenset(("function_call", "custom_tool_call", "computer_call", "shell_call", "apply_patch_call"))


def checked_edits(edits: Iterable[object] | None, where: str = "ContextSystem: context_edits") -> tuple[Edit, ...]:
    """``edits`` as a tuple of edit configs; anything else is refused, named by ``where``."""
    if edits is None:
        return ()
    if isinstance(edits, str | bytes | dict) or not isinstance(edits, Iterable):
        raise InvalidOperationError(f"{where} must be a list of edits, got {repr_of(edits)}")
    out = tuple(edits)
    for i, edit in enumerate(out):
        if not isinstance(edit, ops.EDITS):
            raise InvalidOperationError(
                f"{where}[{i}] must be memci.ops.ClearToolUses or ClearThinking, got {repr_of(edit)}"
            )
    return out  # type: ignore[return-value]  # each item checked above


def tool_uses(messages: Iterable[Message]) -> int:
    """The number of tool calls in ``messages`` (chat ``tool_calls``, ``tool_use`` blocks, call items)."""
    n = 0
    for m in messages:
        if m.get("type") in _CALL_ITEMS:
            n += 1
        elif m.get("role") == "assistant":
            n += len(m.get("tool_calls") or ())
            content = m.get("content")
            if isinstance(content, list):
                n += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_use")
    return n


class WindowEdits:
    """The edits of one context system and the boundary of the pages cleared so far."""

    __slots__ = ("cleared_through", "edits")

    def __init__(self, edits: Sequence[Edit]) -> None:
        self.edits = tuple(edits)
        #: Pages with an index up to this one have their tool uses cleared (0: none).
        self.cleared_through = 0

    def apply_to(
        self, window: list[Message], pages: list[tuple[int, list[Message]]], count: Callable[[list[Message]], int]
    ) -> list[Message]:
        """:meth:`apply` to a built ``window`` whose tail is the active ``pages`` (``(index,
        messages)``, oldest first); if they are not its tail, the tail they would cover is edited
        as one block. O(window)."""
        start = len(window) - sum(len(msgs) for _, msgs in pages)
        if window[start:] != [m for _, msgs in pages for m in msgs]:
            pages = [(0, window[start:])]
        return self.apply(window[:start], pages, count)

    def apply(
        self, head: list[Message], pages: list[tuple[int, list[Message]]], count: Callable[[list[Message]], int]
    ) -> list[Message]:
        """The window ``head`` + ``pages`` (``(index, messages)``, oldest first) with the edits
        applied, in order, moving the cleared boundary when a ``ClearToolUses`` trigger is passed;
        ``count`` counts a window's tokens. A ``ClearThinking`` applies to the pages together
        (a turn's thinking is cleared by the turns after it). O(window)."""
        for edit in self.edits:
            if isinstance(edit, ops.ClearToolUses):
                pages = self._clear_tool_uses(edit, head, pages, count)
            else:
                pages = [(0, _edited([m for _, msgs in pages for m in msgs], edit))]
        return head + [m for _, msgs in pages for m in msgs]

    def _clear_tool_uses(
        self,
        edit: ops.ClearToolUses,
        head: list[Message],
        pages: list[tuple[int, list[Message]]],
        count: Callable[[list[Message]], int],
    ) -> list[tuple[int, list[Message]]]:
        cleared = _cleared(edit, pages, self.cleared_through)
        tokens = count(head + [m for _, msgs in cleared for m in msgs])
        if edit.trigger is not None and tokens <= edit.trigger:
            return cleared
        # The newest page that must stay: the one holding the `keep`-th newest tool use (the open one at least).
        kept = 0
        boundary = pages[-1][0] if pages else 0
        for index, msgs in reversed(pages):
            if kept >= edit.keep:
                break
            kept += tool_uses(msgs)
            boundary = index
        through = boundary - 1
        if through <= self.cleared_through:
            return cleared
        further = _cleared(edit, pages, through)
        saved = tokens - count(head + [m for _, msgs in further for m in msgs])
        if saved <= 0 or saved < (edit.clear_at_least or 0):
            return cleared
        self.cleared_through = through
        return further


def _cleared(
    edit: ops.ClearToolUses, pages: list[tuple[int, list[Message]]], through: int
) -> list[tuple[int, list[Message]]]:
    """The pages with the tool uses of those up to ``through`` cleared, each in full."""
    template = PAGE_PLACEHOLDER if edit.placeholder is None else edit.placeholder
    out = []
    for index, msgs in pages:
        if 0 < index <= through:
            whole = dataclasses.replace(
                edit, trigger=None, keep=0, clear_at_least=None, placeholder=template.replace("{page}", str(index))
            )
            out.append((index, _edited(msgs, whole)))
        else:
            out.append((index, msgs))
    return out


def _edited(messages: list[Message], edit: Edit) -> list[Message]:
    """``messages`` with ``edit`` applied (the messages themselves are not changed)."""
    arr = MessageArray(messages)
    if arr.execute(edit).affected_batch_index == 0:
        return messages
    return arr.messages()
