"""The context edits of a :class:`~memci.ContextSystem` (``context_edits=[...]``), applied to each
window it builds, never to what it stores: pages keep their messages as they were added, so
``recall_page`` returns them byte for byte. Semantics: ``docs/context-edits.md``.

A :class:`~memci.ops.ClearToolUses` clears whole pages, in blocks: the pages through a boundary
(``cleared_through``) have their tool results replaced by the placeholder (each naming the page
that keeps the original). The system decides when the boundary may move (:meth:`WindowEdits.planned`):
at every build with the seed's exact rules, only at a cut with a cache-stable window, so that
between two cuts the window's prefix is the same bytes request after request (what a prompt cache
reuses). When it moves, it moves as far as ``keep`` allows in one step, if the window is over the
edit's ``trigger``. The open page is never cleared. A cleared page is edited and counted once
(cached by index): what the edits save is arithmetic over those counts, so planning a window under
``max_context_tokens`` counts nothing again. A :class:`~memci.ops.ClearThinking` is applied at each
build: with the seed's rules to the whole window; with a cache-stable window to the pages that were
closed at the last cut (``thinking_through``) as one block, so what it clears changes only at a cut
too (the turns after them keep their thinking until the next cut).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memci import _core, ops
from memci.array import MessageArray
from memci.errors import InvalidOperationError, StateError, repr_of, shown

Message = dict[str, Any]
Edit = ops.ClearToolUses | ops.ClearThinking

#: The placeholder of a cleared result in a context system: ``{page}`` is the page that keeps it.
PAGE_PLACEHOLDER = (
    "[tool result cleared to save context: the output of {name} (call {id}) is kept in page {page}; "
    "recall_page({page}) shows it]"
)

_CALL_ITEMS = frozenset(("function_call", "custom_tool_call", "computer_call", "shell_call", "apply_patch_call"))
#: What follows a page when its cost is counted alone: a page before it is an earlier turn, as every
#: cleared page is in the window (the thinking rule drops earlier turns' thinking). Its own cost cancels.
_NEXT_TURN: Message = {"role": "user", "content": ""}


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
        _core.encoding_name(edit.encoding, f"{where}[{i}]")
    return out  # type: ignore[return-value]  # each item checked above


def edits_to_state(edits: Sequence[Edit]) -> list[dict[str, Any]]:
    """``edits`` as a saved state writes them: each an operation dict of every field (the format
    ``MessageArray.execute`` takes), so a later change of a default changes no saved system."""
    out = []
    for edit in edits:
        fields = {f.name: getattr(edit, f.name) for f in dataclasses.fields(edit)}
        out.append({"operation": edit.name, **{k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}})
    return out


def edits_from_state(raw: object, key: str = "context_edits") -> tuple[Edit, ...]:
    """The edits a saved state holds under ``key``, each checked as its config checks itself;
    :class:`~memci.StateError` names the first that is wrong (``state['context_edits'][1]``)."""
    if not isinstance(raw, list):
        raise StateError(f"load: state[{key!r}] is {shown(raw)}, expected a list of edits")
    out = []
    for i, item in enumerate(raw):
        where = f"state[{key!r}][{i}]"
        try:
            edit = ops.parse(item)
            (checked,) = checked_edits([edit], where)
        except (InvalidOperationError, TypeError) as e:
            raise StateError(f"load: {where}: {e}") from None
        out.append(checked)
    return tuple(out)


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


@dataclasses.dataclass(frozen=True, slots=True)
class _ClearedPage:
    """A page with its tool uses cleared: its messages as added, as sent, and the tokens that saves."""

    original: list[Message]
    edited: list[Message]
    saved: int


class WindowEdits:
    """The edits of one context system, the boundary of the pages cleared so far
    (``cleared_through``), and each cleared page as edited and counted once. ``page(index)`` reads
    an active page's messages; ``count`` counts a list of messages as the system counts its window."""

    __slots__ = ("_cleared", "_count", "_page", "at_cuts", "cleared_through", "clears", "edits", "thinking_through")

    def __init__(
        self,
        edits: Sequence[Edit],
        page: Callable[[int], list[Message]],
        count: Callable[[list[Message]], int],
        *,
        at_cuts: bool = False,
    ) -> None:
        self.edits = tuple(edits)
        self.clears = tuple(e for e in self.edits if isinstance(e, ops.ClearToolUses))
        #: Whether the edits move only at the cuts of a cache-stable window (:meth:`moved`).
        self.at_cuts = at_cuts
        #: Pages with an index up to this one have their tool uses cleared (0: none).
        self.cleared_through = 0
        #: With ``at_cuts``: the pages a ``ClearThinking`` applies to, up to this index (0: none).
        self.thinking_through = 0
        self._page, self._count = page, count
        self._cleared: dict[int, _ClearedPage] = {}

    @property
    def clears_thinking(self) -> bool:
        return any(isinstance(e, ops.ClearThinking) for e in self.edits)

    def moved(self, through: int, indices: Sequence[int]) -> None:
        """The edits move (at a cut, or at each build with the seed's rules): the tool uses of
        pages up to ``through`` are cleared; with ``at_cuts``, a ``ClearThinking`` applies to the
        pages of ``indices`` that are closed now, until the next move."""
        self.cleared_through = through
        if self.at_cuts and indices:
            self.thinking_through = indices[-1] - 1

    def popped(self, index: int) -> None:
        """Page ``index`` went (its only message popped): the page before is the open one again,
        never cleared, and it may change."""
        self.forget_from(index - 1)
        self.cleared_through = min(self.cleared_through, index - 2)
        self.thinking_through = min(self.thinking_through, index - 2)

    def through(self, indices: Sequence[int]) -> int:
        """The boundary as it applies to active pages ``indices``: never the last (open) page."""
        return min(self.cleared_through, indices[-1] - 1) if indices else self.cleared_through

    def forget_from(self, index: int) -> None:
        """Page ``index`` and those after it may have changed (a pop): their edits are made again."""
        for i in [i for i in self._cleared if i >= index]:
            del self._cleared[i]

    def _cleared_page(self, index: int, messages: list[Message] | None = None) -> _ClearedPage:
        """Page ``index`` cleared whole by every ``ClearToolUses`` (``messages``: the page as it is
        now, checked against the cached one; None: the cached one is taken as it is)."""
        cached = self._cleared.get(index)
        if cached is not None and (messages is None or cached.original == messages):
            return cached
        original = self._page(index) if messages is None else messages
        edited = original
        for edit in self.clears:
            placeholder = (PAGE_PLACEHOLDER if edit.placeholder is None else edit.placeholder).replace(
                "{page}", str(index)
            )
            whole = dataclasses.replace(edit, trigger=None, keep=0, clear_at_least=None, placeholder=placeholder)
            edited = _edited(edited, whole)
        saved = 0 if edited is original else self._count([*original, _NEXT_TURN]) - self._count([*edited, _NEXT_TURN])
        page = _ClearedPage(original, edited, saved)
        self._cleared[index] = page
        return page

    def savings(self, indices: Sequence[int], through: int) -> list[int]:
        """Item k: the tokens the cleared pages (those up to ``through``) save in a window of the
        active pages ``indices`` without its k oldest (``len(indices) + 1`` items). O(pages), each
        cleared page edited and counted once, when first asked."""
        for i in [i for i in self._cleared if not indices or i < indices[0]]:
            del self._cleared[i]  # archived: no longer in any window
        out = [0] * (len(indices) + 1)
        for k in range(len(indices) - 1, -1, -1):
            index = indices[k]
            out[k] = out[k + 1] + (self._cleared_page(index).saved if index <= through and self.clears else 0)
        return out

    def planned(self, indices: Sequence[int], tokens: int) -> int:
        """Where the boundary moves now, for active pages ``indices`` (oldest first, the last open)
        in a window of ``tokens`` unedited tokens: each ``ClearToolUses`` in turn, when the window
        as edited so far is over its ``trigger`` (or it has none), moves it to just before the page
        holding its ``keep``-th newest tool use (never past the open page), if that saves at least
        ``clear_at_least`` tokens (and any). Arithmetic over cached counts; nothing is changed."""
        through = self.through(indices)
        if not indices:
            return through
        for edit in self.clears:
            saved = self.savings(indices, through)[0]
            if edit.trigger is not None and tokens - saved <= edit.trigger:
                continue
            kept = 0
            boundary = indices[-1]
            for index in reversed(indices):
                if kept >= edit.keep:
                    break
                kept += tool_uses(self._page(index))
                boundary = index
            further = boundary - 1
            if further <= through:
                continue
            gain = self.savings(indices, further)[0] - saved
            if gain > 0 and gain >= (edit.clear_at_least or 0):
                through = further
        return through

    def apply_to(self, window: list[Message], pages: list[tuple[int, list[Message]]]) -> list[Message]:
        """A built ``window`` whose tail is the active ``pages`` (``(index, messages)``, oldest
        first) with the edits applied: the pages up to the boundary cleared (copies of their cached
        edits), then each ``ClearThinking`` over the pages together (a turn's thinking is cleared by
        the turns after it). If ``pages`` are not the window's tail, the tail they would cover is
        edited by ``ClearThinking`` alone. With ``at_cuts``, ``ClearThinking`` applies to the pages
        up to ``thinking_through`` together. O(window)."""
        start = len(window) - sum(len(msgs) for _, msgs in pages)
        tail = window[start:]
        block = len(tail)  # what ClearThinking applies to: the first `block` messages of the tail
        if tail == [m for _, msgs in pages for m in msgs]:
            through = self.through([index for index, _ in pages])
            tail = []
            for index, msgs in pages:
                cleared = index <= through and self.clears
                tail += copy.deepcopy(self._cleared_page(index, msgs).edited) if cleared else msgs
                if self.at_cuts and index <= self.thinking_through:
                    block = len(tail)
            if self.at_cuts and (not pages or pages[0][0] > self.thinking_through):
                block = 0
        for edit in self.edits:
            if isinstance(edit, ops.ClearThinking) and block:
                edited = _edited(tail[:block], edit)
                tail, block = edited + tail[block:], len(edited)
        return window[:start] + tail


def _edited(messages: list[Message], edit: Edit) -> list[Message]:
    """``messages`` with ``edit`` applied (the messages themselves are not changed)."""
    arr = MessageArray(messages)
    if arr.execute(edit).affected_batch_index == 0:
        return messages
    return arr.messages()
