"""LangChain message lists trimmed by memci: what the LangChain and LangGraph integrations share
(needs ``langchain-core``).

:class:`MessageTrimmer` keeps, for each conversation it sees (keyed by its first message's id),
a mirror of the messages as a :class:`~memci.MessageArray` (counts cached), extended as the
conversation grows, and trims a copy of it: the newest messages within a budget, counted exactly,
whole tool groups, as the conversation's own message objects.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Sequence

from memci._optional import needs_extra

with needs_extra("langchain", __name__):
    from langchain_core.messages import BaseMessage

from memci import sanitize, tokens
from memci.array import MessageArray
from memci.errors import InvalidOperationError
from memci.formats import from_langchain

__all__ = ["MIRRORS", "MessageTrimmer"]

#: Conversations whose mirrors a trimmer keeps (least recently used dropped).
MIRRORS = 64


class _Mirror:
    """A conversation's messages as a MessageArray, extended as it grows (by message id)."""

    def __init__(self) -> None:
        self.ids: list[str | None] = []
        self.array = MessageArray()

    def sync(self, messages: Sequence[BaseMessage]) -> MessageArray:
        ids = [m.id for m in messages]
        n = len(self.ids)
        if len(ids) < n or ids[:n] != self.ids or None in self.ids:
            self.ids, self.array = [], MessageArray()
            n = 0
        if len(ids) > n:
            self.array.append(from_langchain(messages[n:]))
            self.ids = ids
        return self.array


class MessageTrimmer:
    """Trims LangChain message lists to ``max_tokens`` exact tokens (``MessageArray.trim_to_tokens``:
    whole tool groups, a leading system message kept with ``keep_system``, starting on
    ``start_on``). When no unit fits from ``start_on`` (mid-turn, after a long tool result), the
    newest units that fit from anywhere; when not even the newest tool group fits, that group
    alone, over the budget: a model call must send something. Thread-safe enough for one agent
    run at a time per conversation; O(new + kept) a call, the counts cached."""

    def __init__(
        self,
        max_tokens: int,
        *,
        encoding: str = tokens.DEFAULT_ENCODING,
        keep_system: bool = True,
        start_on: str | None = "user",
    ) -> None:
        if type(max_tokens) is not int or max_tokens < 0:
            raise InvalidOperationError(f"max_tokens must be an int >= 0, got {max_tokens!r}")
        tokens.count("", encoding)  # an unknown encoding is refused here
        self.max_tokens, self.encoding, self.keep_system, self.start_on = max_tokens, encoding, keep_system, start_on
        self._mirrors: OrderedDict[str | None, _Mirror] = OrderedDict()

    def trim(self, messages: list[BaseMessage], max_tokens: int | None = None) -> list[BaseMessage]:
        """The kept messages (the objects given), oldest first; ``max_tokens`` overrides the
        budget for this call (a caller sending a system prompt besides subtracts it)."""
        if not messages:
            return []
        budget = self.max_tokens if max_tokens is None else max(0, max_tokens)
        key = messages[0].id
        mirror = self._mirrors.pop(key, None) or _Mirror()
        self._mirrors[key] = mirror
        while len(self._mirrors) > MIRRORS:
            self._mirrors.popitem(last=False)
        mirrored = mirror.sync(messages)
        for start in (self.start_on, None):
            trimmed = copy.copy(mirrored)  # O(1): the trim is not kept
            trimmed.trim_to_tokens(budget, encoding=self.encoding, keep_system=self.keep_system, start_on=start)
            kept = trimmed.messages()
            first_is_system = messages[0].type == "system"
            system = 1 if kept and self.keep_system and kept[0]["role"] == "system" and first_is_system else 0
            tail = len(kept) - system  # the trim keeps a suffix, and the leading system message
            if tail:
                return [*messages[:system], *messages[len(messages) - tail :]]
        return newest_group(messages)


def newest_group(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The shortest suffix of ``messages`` that is a valid history (a tool result with its call)."""
    for k in range(1, len(messages) + 1):
        if sanitize.validate_messages(from_langchain(messages[-k:])).valid:
            return messages[-k:]
    return messages[-1:]
