"""LangChain message lists trimmed by memci: what the LangChain and LangGraph integrations share
(needs ``langchain-core``).

:func:`conversation_key` names the conversation a model call or a tool call belongs to: the
framework's own thread id when the run has one, else the id of the conversation's first message.
:class:`MessageTrimmer` keeps, for each conversation it sees (by that key), a mirror of the
messages as a :class:`~memci.MessageArray` (counts cached), extended as the conversation grows,
and trims a copy of it: the newest messages within a budget, counted exactly, whole tool groups,
as the conversation's own message objects.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from memci import sanitize, tokens
from memci.array import MessageArray
from memci.errors import InvalidOperationError
from memci.formats import from_langchain

__all__ = ["MIRRORS", "MessageTrimmer", "conversation_key", "current_config"]

#: Conversations whose mirrors a trimmer keeps (least recently used dropped).
MIRRORS = 64


def current_config() -> Mapping[str, Any]:
    """The running graph's config (LangGraph's ``get_config``), or an empty one outside a run."""
    try:
        from langgraph.config import get_config

        return get_config()
    except (ImportError, RuntimeError):  # not inside a LangGraph run: no thread to read
        return {}


def conversation_key(config: Mapping[str, Any], messages: Sequence[BaseMessage]) -> tuple[str, str | None]:
    """The conversation ``messages`` belong to: ``("thread", id)`` from the run's
    ``configurable.thread_id`` when it has one (LangGraph's own key for a conversation), else
    ``("first", id)`` of the first message (a run without a checkpointer carries the whole
    conversation in its messages). Two threads never share a key."""
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is not None:
        return ("thread", str(thread_id))
    return ("first", messages[0].id if messages else None)


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
    alone, over the budget: a model call must send something. Conversations are kept apart by
    :func:`conversation_key`; safe from several threads at once (a lock per conversation);
    O(new + kept) a call, the counts cached."""

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
        self._mirrors: OrderedDict[tuple[str, str | None], tuple[threading.Lock, _Mirror]] = OrderedDict()
        self._lock = threading.Lock()

    def trim(
        self, messages: list[BaseMessage], max_tokens: int | None = None, *, config: Mapping[str, Any] | None = None
    ) -> list[BaseMessage]:
        """The kept messages (the objects given), oldest first; ``max_tokens`` overrides the
        budget for this call (a caller sending a system prompt besides subtracts it); ``config``
        is the run's (read for its thread id; the running graph's by default)."""
        if not messages:
            return []
        budget = self.max_tokens if max_tokens is None else max(0, max_tokens)
        key = conversation_key(current_config() if config is None else config, messages)
        with self._lock:
            found = self._mirrors.pop(key, None)
            lock, mirror = found if found is not None else (threading.Lock(), _Mirror())
            self._mirrors[key] = (lock, mirror)
            while len(self._mirrors) > MIRRORS:
                self._mirrors.popitem(last=False)
        with lock:
            return self._trim(mirror.sync(messages), messages, budget)

    def _trim(self, mirrored: MessageArray, messages: list[BaseMessage], budget: int) -> list[BaseMessage]:
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
