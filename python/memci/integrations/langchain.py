"""memci in LangChain v1 (``pip install 'memci[langchain]'``).

- :class:`MemciTrimMiddleware`: an agent middleware for ``create_agent`` that trims each model
  call to an exact token budget, never separating a tool call from its results, while the agent's
  state keeps every message.
- :class:`MemciContextMiddleware`: an agent middleware that feeds the model a memci
  :class:`~memci.ContextSystem`'s paged window (old turns archived to its store, listed on the
  contents page), one per conversation, and gives the model the ``recall_page`` and
  ``list_pages`` tools.
- :class:`MemciContextHookMiddleware`: LangGraph's
  :class:`~memci.integrations.langgraph.ContextHook` as an agent middleware (the context system in
  the agent's state, its archive in the agent's store).
- :class:`MemciChatMessageHistory`: a lossless ``BaseChatMessageHistory`` (sync and async) on any
  memci store, many conversations in one SQLite file.

Decisions and guarantees: ``docs/integrations/langchain.md``.
"""

from __future__ import annotations

import asyncio
import copy
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired, cast

from memci._optional import needs_extra

with needs_extra("langchain", __name__):
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import AnyMessage, BaseMessage, message_to_dict, messages_from_dict
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.prebuilt import ToolRuntime
    from langgraph.runtime import Runtime

from memci import tokens
from memci.context.system import ContextSystem
from memci.errors import InvalidOperationError
from memci.formats import from_langchain, to_langchain
from memci.integrations.langchain_messages import MessageTrimmer, conversation_key, current_config
from memci.integrations.langgraph import STATE_KEY, ContextHook, newest_state
from memci.integrations.message_log import MessageLog
from memci.integrations.trimming import LOW_WATER
from memci.storage.memory import MemoryStorage
from memci.storage.protocol import Storage
from memci.storage.sqlite import SqliteStorage

__all__ = [
    "ContextHookState",
    "MemciChatMessageHistory",
    "MemciContextHookMiddleware",
    "MemciContextMiddleware",
    "MemciTrimMiddleware",
    "RequestMiddleware",
    "loaded_message",
    "stored_message",
]


def _system_tokens(request: ModelRequest[Any], encoding: str) -> int:
    """What the request's system message costs, counted as memci counts a message."""
    if request.system_message is None:
        return 0
    return tokens.count_messages(from_langchain([request.system_message]), encoding) - tokens.reply_priming(encoding)


class RequestMiddleware(AgentMiddleware[Any]):
    """An agent middleware that rewrites each model request (:meth:`_request`) and calls the
    model with the result, sync or async: what memci's middlewares share."""

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        raise NotImplementedError

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return handler(self._request(request))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        return await handler(self._request(request))


class MemciTrimMiddleware(RequestMiddleware):
    """Trims every model call of a ``create_agent`` agent to ``max_tokens`` exact tokens (the
    system prompt's share included): the newest messages that fit, whole tool groups, starting on
    a user message (see :class:`~memci.integrations.langchain_messages.MessageTrimmer` for what
    happens when none fits). Only the request is trimmed: the state keeps every message. Each
    conversation (by its ``thread_id``, see
    :func:`~memci.integrations.langchain_messages.conversation_key`) is mirrored once and extended
    as it grows, so a call costs O(new + kept), whatever the conversation's length.

    Cut with hysteresis by default: the messages sent grow append-only (a provider's prompt cache
    keeps hitting) until they pass ``max_tokens``, then are cut back to ``low_water`` of it
    (:data:`~memci.integrations.trimming.LOW_WATER`, 0.6) in one step; ``low_water=None`` sends
    the newest messages that fit at every call."""

    def __init__(
        self,
        max_tokens: int,
        *,
        encoding: str = tokens.DEFAULT_ENCODING,
        start_on: str | None = "user",
        low_water: float | None = LOW_WATER,
    ) -> None:
        super().__init__()
        self.trimmer = MessageTrimmer(
            max_tokens, encoding=encoding, keep_system=True, start_on=start_on, low_water=low_water
        )
        self.encoding = encoding
        self._system: tuple[BaseMessage, int] | None = None

    def _system_tokens(self, request: ModelRequest[Any]) -> int:
        """What the request's system message costs, counted again only when it changes."""
        message = request.system_message
        if message is None:
            return 0
        known = self._system
        if known is not None and (known[0] is message or known[0] == message):
            return known[1]
        counted = _system_tokens(request, self.encoding)
        self._system = (message, counted)
        return counted

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        budget = self.trimmer.max_tokens - self._system_tokens(request)
        return request.override(messages=cast("list[AnyMessage]", self.trimmer.trim(request.messages, budget)))


class MemciContextMiddleware(RequestMiddleware):
    """Feeds the model a :class:`~memci.ContextSystem`'s window instead of the agent's message
    list, one context system per conversation, and registers its recall tools (``recall_page``,
    ``list_pages``, ...) as the agent's tools.

    ``context`` is either a factory, ``context(key) -> ContextSystem``, called once for each
    conversation the agent serves (``key``: the run's ``thread_id``, or the id of the
    conversation's first message when the run has no thread), or one ``ContextSystem``, which then
    serves the first conversation alone: a model call of another thread is refused, never fed
    that system's window.

    At each model call the messages the agent added since the conversation's last call join its
    context system (:meth:`~memci.ContextSystem.feed`: a new user request first ends the round, so
    the archive policies run between turns), the system is saved when it has a store, and the model
    is sent ``build_messages()`` (the agent's system prompt stays the request's). A recall tool call
    runs on the calling conversation's system and saves it. Conversations never share a system, a
    lock or a seen-set; each has its own lock, so threads run in parallel. Every system is kept for
    the middleware's life (one per conversation served)."""

    def __init__(self, context: ContextSystem | Callable[[str], ContextSystem]) -> None:
        super().__init__()
        if isinstance(context, ContextSystem):
            template = context
            self._factory: Callable[[str], ContextSystem] | None = None
        elif callable(context):
            template = ContextSystem(None)
            self._factory = context
        else:
            raise InvalidOperationError(
                f"context must be a memci ContextSystem or a factory of one, got {type(context).__name__}"
            )
        self._single = None if self._factory is not None else template
        #: conversation key -> (its lock, its system, the ids of its messages the system holds).
        self._conversations: dict[tuple[str, str | None], tuple[threading.Lock, ContextSystem, set[str]]] = {}
        self._lock = threading.Lock()
        self.tools: Sequence[BaseTool] = [self._tool(d["function"]) for d in template.tool_definitions("openai")]

    def _conversation(self, key: tuple[str, str | None]) -> tuple[threading.Lock, ContextSystem, set[str]]:
        """The conversation's lock, system and seen ids, made at its first call."""
        with self._lock:
            found = self._conversations.get(key)
            if found is not None:
                return found
            if self._factory is None:
                if self._conversations:
                    (bound,) = self._conversations
                    raise InvalidOperationError(
                        f"MemciContextMiddleware was given one ContextSystem, which serves {_name(bound)}; "
                        f"{_name(key)} needs its own: pass a factory, "
                        "MemciContextMiddleware(lambda key: ContextSystem(...)), to serve several threads"
                    )
                assert self._single is not None
                ctx = self._single
            else:
                ctx = self._factory(str(key[1]))
                if not isinstance(ctx, ContextSystem):
                    raise InvalidOperationError(
                        f"the context factory must return a memci ContextSystem, got {type(ctx).__name__}"
                    )
            found = (threading.Lock(), ctx, set())
            self._conversations[key] = found
            return found

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        lock, ctx, seen = self._conversation(conversation_key(current_config(), request.messages))
        with lock:
            new = [m for m in request.messages if m.id is None or m.id not in seen]
            if new:
                ctx.feed(from_langchain(new))
                seen.update(m.id for m in new if m.id is not None)
                ctx.save()
            window = to_langchain(ctx.build_messages())
        return request.override(messages=cast("list[AnyMessage]", window))

    def _tool(self, function: Mapping[str, Any]) -> StructuredTool:
        name = str(function["name"])

        def run(runtime: ToolRuntime, **arguments: Any) -> str:
            state = runtime.state
            messages = (state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)) or []
            lock, ctx, _ = self._conversation(conversation_key(runtime.config, messages))
            with lock:
                result = ctx.run_tool(name, arguments)
                ctx.save()  # the recall counts
            return result

        return StructuredTool.from_function(
            func=run,
            name=name,
            description=str(function.get("description", "")),
            args_schema=dict(function.get("parameters") or {"type": "object", "properties": {}}),
        )


def _name(key: tuple[str, str | None]) -> str:
    """A conversation key as the error messages name it."""
    return f"thread {key[1]!r}" if key[0] == "thread" else f"the conversation opened by message {key[1]!r}"


class ContextHookState(AgentState):
    """An agent's state with the key :class:`MemciContextHookMiddleware` keeps the context system
    in (the newest revision wins when two writes land in one step)."""

    memci: NotRequired[Annotated[dict[str, Any] | None, newest_state]]


class MemciContextHookMiddleware(RequestMiddleware):
    """LangGraph's :class:`~memci.integrations.langgraph.ContextHook` as a ``create_agent``
    middleware: the conversation lives in a context system carried in the agent's state (key
    ``"memci"``, declared by this middleware's state schema), its archived pages in the agent's
    store (``create_agent(store=...)``), one system per ``thread_id``. Before each model call the
    messages that arrived join the thread's system and leave the state (checkpoints stay small);
    the model is sent the system's window; the recall tools come with the middleware.
    ``hook`` (or the keywords, passed to a new ``ContextHook``) sets the namespace and policies."""

    state_schema = ContextHookState

    def __init__(self, hook: ContextHook | None = None, **options: Any) -> None:
        super().__init__()
        if hook is not None and options:
            raise InvalidOperationError("give MemciContextHookMiddleware a ContextHook or its options, not both")
        self.hook = hook if hook is not None else ContextHook(**options)
        self.tools: Sequence[BaseTool] = self.hook.tools()

    def before_model(self, state: ContextHookState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        update = self.hook(state)
        return {"messages": update["messages"], STATE_KEY: update[STATE_KEY]}

    async def abefore_model(self, state: ContextHookState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        store = request.runtime.store
        if store is None:
            raise InvalidOperationError("MemciContextHookMiddleware needs the agent's store: create_agent(store=...)")
        thread_id = str((current_config().get("configurable") or {}).get("thread_id", "default"))
        ctx = self.hook.context(request.state, store, thread_id)
        return request.override(messages=cast("list[AnyMessage]", to_langchain(ctx.build_messages())))


class MemciChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history on a memci store: ``MemciChatMessageHistory(session_id,
    db_path)`` keeps each session under its own namespace of one SQLite file (``":memory:"``, the
    default: this process only); ``storage=`` takes any memci store instead, this session's own.

    Lossless: a message comes back equal to the one added, whatever its class and fields (ids,
    names, tool calls, ``invalid_tool_calls``, ``usage_metadata``, ``response_metadata``,
    ``additional_kwargs``, a tool message's ``artifact`` and ``status``, content blocks kept as
    blocks); see :func:`stored_message`. Values must be JSON values (an ``artifact`` that is not
    is refused with its path). An ``add_messages`` is one commit that writes only what it adds;
    concurrent writers to one session lose nothing; ``clear`` deletes the session's pages.

    The constructor does no I/O: the store is opened at the first use, so building a history in
    async code never blocks the event loop; the async methods run the store's work in a worker
    thread, and :meth:`acreate` opens it there too."""

    def __init__(
        self, session_id: str, db_path: str | os.PathLike[str] = ":memory:", *, storage: Storage | None = None
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidOperationError(f"session_id must be a non-empty str, got {session_id!r}")
        self.session_id = session_id
        self.db_path = db_path
        self._storage = storage
        self._log: MessageLog | None = None
        self._opening = threading.Lock()

    @classmethod
    async def acreate(
        cls, session_id: str, db_path: str | os.PathLike[str] = ":memory:", *, storage: Storage | None = None
    ) -> MemciChatMessageHistory:
        """A history with its store opened and its messages read, in a worker thread."""
        history = cls(session_id, db_path, storage=storage)
        await asyncio.to_thread(history._opened)
        return history

    @property
    def storage(self) -> Storage:
        """The session's store (opened at the first use)."""
        return self._opened().storage

    def _opened(self) -> MessageLog:
        with self._opening:
            if self._log is None:
                storage = self._storage
                if storage is None:
                    path = os.fspath(self.db_path)
                    storage = MemoryStorage() if path == ":memory:" else SqliteStorage(path, namespace=self.session_id)
                self._storage = storage
                self._log = MessageLog(storage)
            return self._log

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a property, as LangChain's own histories
        """The session's messages, oldest first (new objects each time)."""
        return [loaded_message(m) for m in self._opened().messages()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in one commit."""
        stored = [stored_message(m) for m in messages]
        self._opened().append(stored)

    def clear(self) -> None:
        """Forget every message of the session."""
        self._opened().clear()

    async def aget_messages(self) -> list[BaseMessage]:
        """:attr:`messages`, read in a worker thread."""
        return await asyncio.to_thread(lambda: self.messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """:meth:`add_messages` in a worker thread."""
        await asyncio.to_thread(self.add_messages, messages)

    async def aclear(self) -> None:
        """:meth:`clear` in a worker thread."""
        await asyncio.to_thread(self.clear)

    def close(self) -> None:
        """Release the store (when it was opened)."""
        if self._storage is not None:
            self._storage.close()


#: The key a stored message keeps LangChain's own fields under.
LANGCHAIN_KEY = "langchain"


def stored_message(message: BaseMessage) -> dict[str, Any]:
    """A LangChain message as :class:`MemciChatMessageHistory` stores it: a chat message memci
    reads (``role``, ``content`` as it is: a string or the blocks, a tool result's
    ``tool_call_id``) and, under ``"langchain"``, the message's class and every other field
    (LangChain's own ``message_to_dict``), so :func:`loaded_message` rebuilds an equal message."""
    if not isinstance(message, BaseMessage):
        raise InvalidOperationError(f"a chat history takes LangChain messages, got {type(message).__name__}")
    serialized = message_to_dict(message)
    data = dict(serialized["data"])
    content = data.pop("content")
    out: dict[str, Any] = {"role": _ROLES.get(message.type, "user"), "content": content}
    if isinstance(data.get("tool_call_id"), str):
        out["tool_call_id"] = data["tool_call_id"]
    out[LANGCHAIN_KEY] = {"type": serialized["type"], "data": data}
    return out


def loaded_message(stored: Mapping[str, Any]) -> BaseMessage:
    """The LangChain message :func:`stored_message` stored (one stored without the
    ``"langchain"`` key, by an older memci, is read as :func:`memci.formats.to_langchain` reads it)."""
    saved = stored.get(LANGCHAIN_KEY)
    if not isinstance(saved, Mapping):
        return to_langchain([stored])[0]
    data = {**copy.deepcopy(saved["data"]), "content": copy.deepcopy(stored["content"])}
    return messages_from_dict([{"type": saved["type"], "data": data}])[0]


#: LangChain message types as chat roles (any other type is stored as a user message).
_ROLES = {
    "human": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
}
