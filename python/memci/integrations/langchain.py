"""memci in LangChain v1 (``pip install 'memci[langchain]'``).

- :class:`MemciTrimMiddleware`: an agent middleware for ``create_agent`` that trims each model
  call to an exact token budget, never separating a tool call from its results, while the agent's
  state keeps every message.
- :class:`MemciContextMiddleware`: an agent middleware that feeds the model a memci
  :class:`~memci.ContextSystem`'s paged window (old turns archived to its store, listed on the
  contents page) and gives the model the ``recall_page`` and ``list_pages`` tools.
- :class:`MemciChatMessageHistory`: a ``BaseChatMessageHistory`` (sync and async) on any memci
  store, many conversations in one SQLite file.

Decisions and guarantees: ``docs/integrations/langchain.md``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from memci._optional import needs_extra

with needs_extra("langchain", __name__):
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
    from langchain_core.tools import BaseTool, StructuredTool

from memci import tokens
from memci.context.system import ContextSystem
from memci.errors import InvalidOperationError
from memci.formats import from_langchain, to_langchain
from memci.integrations.langchain_messages import MessageTrimmer
from memci.integrations.message_log import MessageLog
from memci.storage.memory import MemoryStorage
from memci.storage.protocol import Storage
from memci.storage.sqlite import SqliteStorage

__all__ = ["MemciChatMessageHistory", "MemciContextMiddleware", "MemciTrimMiddleware"]


def _system_tokens(request: ModelRequest[Any], encoding: str) -> int:
    """What the request's system message costs, counted as memci counts a message."""
    if request.system_message is None:
        return 0
    return tokens.count_messages(from_langchain([request.system_message]), encoding) - tokens.reply_priming(encoding)


class MemciTrimMiddleware(AgentMiddleware):
    """Trims every model call of a ``create_agent`` agent to ``max_tokens`` exact tokens (the
    system prompt's share included): the newest messages that fit, whole tool groups, starting on
    a user message (see :class:`~memci.integrations.langchain_messages.MessageTrimmer` for what
    happens when none fits). Only the request is trimmed: the state keeps every message. Each
    conversation is mirrored once and extended as it grows, so a call costs O(new + kept)."""

    def __init__(
        self, max_tokens: int, *, encoding: str = tokens.DEFAULT_ENCODING, start_on: str | None = "user"
    ) -> None:
        super().__init__()
        self.trimmer = MessageTrimmer(max_tokens, encoding=encoding, keep_system=True, start_on=start_on)
        self.encoding = encoding

    def _trimmed(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        budget = self.trimmer.max_tokens - _system_tokens(request, self.encoding)
        return request.override(messages=cast("list[AnyMessage]", self.trimmer.trim(list(request.messages), budget)))

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return handler(self._trimmed(request))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        return await handler(self._trimmed(request))


class MemciContextMiddleware(AgentMiddleware):
    """Feeds the model ``context``'s window (a :class:`~memci.ContextSystem` of your making, on
    the store of your choosing) instead of the agent's message list, and registers its
    ``recall_page`` and ``list_pages`` as the agent's tools.

    At each model call the messages the agent added since the last call join the context system
    (a human message first ends the round, so the archive policies run between turns), the system
    is saved when it has a store, and the model is sent ``build_messages()`` (the agent's system
    prompt stays the request's). One conversation per middleware: the agent's state holds it all,
    the context system what the model reads."""

    def __init__(self, context: ContextSystem) -> None:
        super().__init__()
        if not isinstance(context, ContextSystem):
            raise InvalidOperationError(f"context must be a memci ContextSystem, got {type(context).__name__}")
        self.context = context
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self.tools: Sequence[BaseTool] = [self._tool(d["function"]) for d in context.tool_definitions("openai")]

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        with self._lock:
            new = [m for m in request.messages if m.id is None or m.id not in self._seen]
            if new:
                if any(isinstance(m, HumanMessage) for m in new):
                    self.context.end_round()
                self.context.extend(from_langchain(new))
                self._seen.update(m.id for m in new if m.id is not None)
                self.context.save()
            window = to_langchain(self.context.build_messages())
        return request.override(messages=cast("list[AnyMessage]", window))

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return handler(self._request(request))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        return await handler(self._request(request))

    def _tool(self, function: Mapping[str, Any]) -> StructuredTool:
        name = str(function["name"])

        def run(**arguments: Any) -> str:
            call = {"id": "call", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            with self._lock:
                return str(self.context.handle_tool_call(call)["content"])

        return StructuredTool.from_function(
            func=run,
            name=name,
            description=str(function.get("description", "")),
            args_schema=dict(function.get("parameters") or {"type": "object", "properties": {}}),
        )


class MemciChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history on a memci store: ``MemciChatMessageHistory(session_id,
    db_path)`` keeps each session under its own namespace of one SQLite file (``":memory:"``, the
    default: this process only); ``storage=`` takes any memci store instead, this session's own.
    Messages come back as LangChain messages equal to those added (ids, names, tool calls and
    results included, as :func:`memci.formats.from_langchain` keeps them). An ``add_messages`` is
    one commit that writes only what it adds; concurrent writers to one session lose nothing;
    ``clear`` deletes the session's pages. The async methods run the same in a worker thread."""

    def __init__(
        self, session_id: str, db_path: str | os.PathLike[str] = ":memory:", *, storage: Storage | None = None
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidOperationError(f"session_id must be a non-empty str, got {session_id!r}")
        if storage is None:
            storage = (
                MemoryStorage() if os.fspath(db_path) == ":memory:" else SqliteStorage(db_path, namespace=session_id)
            )
        self.session_id = session_id
        self.storage = storage
        self._log = MessageLog(storage)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a property, as LangChain's own histories
        """The session's messages, oldest first (new objects each time)."""
        stored = self._log.messages()
        return to_langchain(stored) if stored else []

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in one commit."""
        self._log.append(from_langchain(list(messages)))

    def clear(self) -> None:
        """Forget every message of the session."""
        self._log.clear()

    def close(self) -> None:
        """Release the store."""
        self.storage.close()
