"""LangChain message lists trimmed by memci: what the LangChain and LangGraph integrations share
(needs ``langchain-core``).

:func:`conversation_key` names the conversation a model call or a tool call belongs to: the
framework's own thread id when the run has one, else the id of the conversation's first message.
:class:`MessageTrimmer` keeps, for each conversation it sees (by that key), a
:class:`~memci.integrations.trimming.HistoryTrimmer`: the newest messages within a budget,
counted exactly, whole tool groups, cut with hysteresis, as the conversation's own message
objects, at O(new + kept) a call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memci._optional import needs_extra

with needs_extra("langchain", __name__):
    from langchain_core.messages import BaseMessage

from memci import sanitize, tokens
from memci.errors import InvalidOperationError
from memci.formats import from_langchain
from memci.integrations.trimming import LOW_WATER, Conversations, HistoryTrimmer, check_low_water

__all__ = ["MIRRORS", "MessageTrimmer", "conversation_key", "current_config", "same_message"]

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


def same_message(a: BaseMessage, b: BaseMessage) -> bool:
    """Whether two LangChain messages are the same message of a conversation: the same object, or
    the same id (LangGraph gives every message of a state one)."""
    return a is b or (a.id is not None and a.id == b.id)


class MessageTrimmer:
    """Trims LangChain message lists to ``max_tokens`` exact tokens (``MessageArray.trim_to_tokens``:
    whole tool groups, a leading system message kept with ``keep_system``, starting on
    ``start_on``), with hysteresis (``low_water``, :data:`~memci.integrations.trimming.LOW_WATER`
    by default; None: the newest messages that fit at every call): see
    :class:`~memci.integrations.trimming.HistoryTrimmer`. When no unit fits from ``start_on``
    (mid-turn, after a long tool result), the newest units that fit from anywhere; when not even
    the newest tool group fits, that group alone, over the budget: a model call must send
    something. Conversations are kept apart by :func:`conversation_key` (the ``MIRRORS`` most
    recent kept); safe from several threads at once (a lock per conversation); O(new + kept) a
    call, whatever the length of the conversation."""

    def __init__(
        self,
        max_tokens: int,
        *,
        encoding: str = tokens.DEFAULT_ENCODING,
        keep_system: bool = True,
        start_on: str | None = "user",
        low_water: float | None = LOW_WATER,
    ) -> None:
        if type(max_tokens) is not int or max_tokens < 0:
            raise InvalidOperationError(f"max_tokens must be an int >= 0, got {max_tokens!r}")
        tokens.count("", encoding)  # an unknown encoding is refused here
        self.max_tokens, self.encoding, self.keep_system, self.start_on = max_tokens, encoding, keep_system, start_on
        self.low_water = check_low_water("MessageTrimmer", low_water)
        relaxed = [{"start_on": None}] if start_on is not None else []
        self._conversations: Conversations[tuple[str, str | None], HistoryTrimmer[BaseMessage]] = Conversations(
            lambda: HistoryTrimmer(
                _converted,
                same=same_message,
                encoding=encoding,
                keep_system=keep_system,
                start_on=start_on,
                low_water=self.low_water,
                relaxed=relaxed,
            ),
            MIRRORS,
        )

    def trim(
        self,
        messages: Sequence[BaseMessage],
        max_tokens: int | None = None,
        *,
        config: Mapping[str, Any] | None = None,
    ) -> list[BaseMessage]:
        """The kept messages (the objects given), oldest first; ``max_tokens`` overrides the
        budget for this call (a caller sending a system prompt besides subtracts it); ``config``
        is the run's (read for its thread id; the running graph's by default)."""
        if not messages:
            return []
        budget = self.max_tokens if max_tokens is None else max(0, max_tokens)
        key = conversation_key(current_config() if config is None else config, messages)
        kept = self._conversations[key].trim(messages, budget)
        return newest_group(messages) if kept is None else kept


def _converted(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return from_langchain(list(messages))


def newest_group(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The shortest suffix of ``messages`` that is a valid history (a tool result with its call)."""
    for k in range(1, len(messages) + 1):
        if sanitize.validate_messages(from_langchain(list(messages[-k:]))).valid:
            return list(messages[-k:])
    return list(messages[-1:])
