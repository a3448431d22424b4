"""memci as a LlamaIndex chat memory (``pip install 'memci[llama-index]'``).

:class:`MemciChatMemory` is a ``BaseChatStoreMemory``, built as ``ChatMemoryBuffer`` is
(``from_defaults(chat_history=, llm=, chat_store=, chat_store_key=, token_limit=)``), so it goes
wherever that one or ``Memory`` goes: ``SimpleChatEngine``, ``FunctionAgent.run(memory=...)``::

    from memci.integrations.llama_index import MemciChatMemory

    memory = MemciChatMemory.from_defaults(token_limit=3000)
    response = await agent.run("What's the weather in Paris?", memory=memory)

The messages live in the chat store (LlamaIndex's ``SimpleChatStore`` by default, or any
``BaseChatStore``: Redis, Postgres, ...), as ``ChatMemoryBuffer`` keeps them. ``get`` returns
the newest messages within ``token_limit`` in O(new + kept), each message counted once, where
``ChatMemoryBuffer`` re-tokenizes a shrinking suffix per message dropped (quadratic). Two ways
of counting (``counting=``):

- ``"text"`` (the default, the drop-in): as ``ChatMemoryBuffer`` counts, the messages' texts
  joined by spaces, in ``cl100k_base`` (its default tokenizer's), so the same messages are kept
  (:class:`~memci.integrations.joined_text.JoinedTextTrimmer`);
- ``"request"``: what the messages cost in a request, the chat format's per-message overhead and
  the tool calls included (``o200k_base`` by default), whole tool groups, a leading system
  message kept (:class:`~memci.integrations.trimming.HistoryTrimmer`).

Decisions: ``docs/integrations/llama-index.md``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from memci._optional import needs_extra

with needs_extra("llama-index", __name__):
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
    from llama_index.core.bridge.pydantic import Field, PrivateAttr, ValidationError
    from llama_index.core.llms.llm import LLM
    from llama_index.core.memory.types import DEFAULT_CHAT_STORE_KEY, BaseChatStoreMemory
    from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore

from memci import tokens
from memci.errors import InvalidOperationError, repr_of
from memci.formats import dumped
from memci.integrations.joined_text import JoinedTextTrimmer, check_encoding
from memci.integrations.trimming import HistoryTrimmer, check_low_water

__all__ = ["COUNTINGS", "Counting", "MemciChatMemory", "to_memci"]

#: The share of an LLM's context window a memory built ``from_defaults(llm=...)`` may fill, as
#: ``ChatMemoryBuffer`` takes it.
DEFAULT_TOKEN_LIMIT_RATIO = 0.75
DEFAULT_TOKEN_LIMIT = 3000
#: How ``get`` counts: ``"text"``, ``ChatMemoryBuffer``'s count (the drop-in), or ``"request"``.
Counting = Literal["text", "request"]
COUNTINGS: tuple[Counting, ...] = ("text", "request")
#: The encoding of ``ChatMemoryBuffer``'s default tokenizer (LlamaIndex's ``get_tokenizer()``:
#: tiktoken's for ``gpt-3.5-turbo``), the default of ``counting="text"``.
TEXT_ENCODING = "cl100k_base"
#: The roles a cut may not open the history at, as ``ChatMemoryBuffer`` cuts.
_NOT_FIRST = (MessageRole.ASSISTANT, MessageRole.TOOL)
#: LlamaIndex roles memci reads as another role.
_ROLES = {MessageRole.CHATBOT: "assistant", MessageRole.MODEL: "assistant"}


def _chat_call(call: Any) -> dict[str, Any] | None:
    """One tool call, in any shape LlamaIndex keeps it, as a chat ``tool_call``: OpenAI's
    (``{id, type, function: {name, arguments}}``, a dict or the SDK's object), LlamaIndex's own
    ``ToolSelection`` and ``ToolCallBlock`` (``tool_id``/``tool_call_id``, ``tool_name``,
    ``tool_kwargs``) and Anthropic's ``tool_use`` (``id``, ``name``, ``input``). None for a shape
    without a tool name (it cannot be paired)."""
    call_id: Any
    name: Any
    arguments: Any
    if isinstance(call, ToolCallBlock):
        call_id, name, arguments = call.tool_call_id, call.tool_name, call.tool_kwargs
    else:
        as_dict = dumped(call)
        if not isinstance(as_dict, dict):
            return None
        function = as_dict.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            call_id, name, arguments = as_dict.get("id"), function["name"], function.get("arguments")
        else:
            name = as_dict.get("tool_name", as_dict.get("name"))
            call_id = next((as_dict[k] for k in ("tool_id", "tool_call_id", "id") if as_dict.get(k)), None)
            arguments = next((as_dict[k] for k in ("tool_kwargs", "input", "arguments") if k in as_dict), {})
        if not isinstance(name, str):
            return None
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)
    return {"id": str(call_id or ""), "type": "function", "function": {"name": name, "arguments": text}}


def _tool_calls(message: ChatMessage) -> list[dict[str, Any]]:
    """The tool calls of an assistant message as chat ``tool_calls``: those an LLM integration
    keeps in ``additional_kwargs["tool_calls"]``, then the message's tool call blocks; a call with
    the id of one already read is read once."""
    calls: list[dict[str, Any]] = []
    kept = message.additional_kwargs.get("tool_calls") or ()
    blocks = [block for block in message.blocks if isinstance(block, ToolCallBlock)]
    for call in [*(kept if isinstance(kept, list | tuple) else ()), *blocks]:
        chat = _chat_call(call)
        if chat is not None and not (chat["id"] and any(c["id"] == chat["id"] for c in calls)):
            calls.append(chat)
    return calls


def to_memci(message: ChatMessage) -> dict[str, Any]:
    """A LlamaIndex chat message as the chat message memci counts and groups: its role, its text
    (text blocks joined; other blocks are not counted), its tool calls (``additional_kwargs`` or
    tool call blocks), a tool result's ``tool_call_id``, a ``name``. A tool result without a call
    id is read as a user message (it cannot be paired)."""
    role = _ROLES.get(message.role, message.role.value)
    text = "".join(block.text for block in message.blocks if isinstance(block, TextBlock))
    out: dict[str, Any] = {"role": role, "content": text}
    extra = message.additional_kwargs
    if role == "assistant":
        calls = _tool_calls(message)
        if calls:
            out["tool_calls"] = calls
    elif role == "tool":
        call_id = extra.get("tool_call_id")
        if isinstance(call_id, str) and call_id:
            out["tool_call_id"] = call_id
        else:
            out["role"] = "user"
    if isinstance(extra.get("name"), str) and role in ("user", "assistant", "system"):
        out["name"] = extra["name"]
    return out


def _converted(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    return [to_memci(m) for m in messages]


def _text(message: ChatMessage) -> str:
    """The text ``ChatMemoryBuffer`` counts a message by: ``str`` of its content (its text blocks
    joined by line breaks; ``"None"`` for a message without any)."""
    return str(message.content)


def _can_open(message: ChatMessage) -> bool:
    return message.role not in _NOT_FIRST


class MemciChatMemory(BaseChatStoreMemory):
    """A chat memory whose ``get`` keeps the newest messages within ``token_limit``, counted once
    each (see the module).

    ``token_limit``: the tokens ``get`` may return (``initial_token_count`` of them taken by what
    the caller sends besides: a system prompt). ``counting``: ``"text"`` (default), the messages'
    texts joined by spaces, so ``get`` keeps what ``ChatMemoryBuffer`` keeps at the same limit; or
    ``"request"``, what they cost in a request (overheads and tool calls included), whole tool
    groups, a leading system message kept, the history returned starting at a user message.
    ``encoding``: ``o200k_base``, ``cl100k_base`` (or a model name), or, for ``"request"``,
    ``approximate``; None (default): ``cl100k_base`` for ``"text"`` (as ``ChatMemoryBuffer``),
    ``o200k_base`` for ``"request"``.
    ``low_water``: cut with hysteresis, the history returned grows append-only (a provider's
    prompt cache keeps hitting) until it passes the limit, then is cut back to ``low_water`` of it
    (:data:`~memci.integrations.trimming.LOW_WATER`, 0.6, is the adapters' usual mark) in one
    step; None (default): the newest messages that fit at every ``get``, as ``ChatMemoryBuffer``.
    Messages changed in place in the middle of the chat store by someone else are not seen (one
    appended or removed is)."""

    token_limit: int = Field(default=DEFAULT_TOKEN_LIMIT, gt=0)
    counting: Counting = "text"
    encoding: str | None = None
    low_water: float | None = Field(default=None, gt=0, le=1)
    _trimmer: HistoryTrimmer[ChatMessage] | JoinedTextTrimmer[ChatMessage] | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "MemciChatMemory"

    @classmethod
    def from_defaults(  # noqa: PLR0917  # ChatMemoryBuffer.from_defaults' positional order, for a drop-in
        cls,
        chat_history: list[ChatMessage] | None = None,
        llm: LLM | None = None,
        chat_store: BaseChatStore | None = None,
        chat_store_key: str = DEFAULT_CHAT_STORE_KEY,
        token_limit: int | None = None,
        counting: Counting = "text",
        encoding: str | None = None,
        low_water: float | None = None,
        **kwargs: Any,
    ) -> MemciChatMemory:
        """As ``ChatMemoryBuffer.from_defaults``: the limit is ``token_limit``, else 75% of
        ``llm``'s context window, else 3,000. Every setting is checked before ``chat_history`` is
        written to the chat store."""
        if kwargs:
            raise InvalidOperationError(f"MemciChatMemory.from_defaults: unexpected arguments {sorted(kwargs)}")
        if token_limit is None:
            window = llm.metadata.context_window if llm is not None else None
            token_limit = int(window * DEFAULT_TOKEN_LIMIT_RATIO) if window else DEFAULT_TOKEN_LIMIT
        store = chat_store or SimpleChatStore()
        memory = cls(
            token_limit=token_limit,
            counting=counting,
            encoding=encoding,
            low_water=low_water,
            chat_store=store,
            chat_store_key=chat_store_key,
        )
        if chat_history is not None:
            store.set_messages(chat_store_key, chat_history)
        return memory

    def __init__(self, **data: Any) -> None:
        """memci's checks of ``counting``, ``low_water`` and ``encoding``, then the fields as
        pydantic takes them: a bad setting raises :class:`~memci.InvalidOperationError` naming it
        (pydantic's own refusals turned into it)."""
        counting = data.get("counting", "text")
        if counting not in COUNTINGS:  # named before pydantic's literal check words it its way
            raise InvalidOperationError(f"MemciChatMemory: counting must be one of {list(COUNTINGS)}, got {counting!r}")
        check_low_water("MemciChatMemory", data.get("low_water"))
        encoding = data.get("encoding")
        if encoding is not None and counting == "text":
            check_encoding("MemciChatMemory", encoding)
        elif encoding is not None:
            tokens.count("", encoding)  # an unknown encoding is refused here, not at the first get
        try:
            super().__init__(**data)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(map(str, error['loc']))}: {error['msg']}, got {repr_of(error.get('input'))}"
                for error in e.errors()
            )
            raise InvalidOperationError(f"MemciChatMemory: {problems}") from None

    def __getstate__(self) -> dict[Any, Any]:
        """Pickled without the mirror (rebuilt at the next ``get``)."""
        state = dict(super().__getstate__())
        state["__pydantic_private__"] = {"_trimmer": None}
        return state

    def _encoding(self) -> str:
        """The encoding counted in: ``encoding``, else the default of the counting."""
        if self.encoding is not None:
            return self.encoding
        return TEXT_ENCODING if self.counting == "text" else tokens.DEFAULT_ENCODING

    def _history_trimmer(self) -> HistoryTrimmer[ChatMessage] | JoinedTextTrimmer[ChatMessage]:
        """The trimmer of this memory's history, made at the first use (a pydantic model has no
        lock-free lazy field: two first calls at once may each make one, and one is kept)."""
        trimmer = self._trimmer
        if trimmer is None:
            if self.counting == "text":
                trimmer = JoinedTextTrimmer(_text, _can_open, encoding=self._encoding(), low_water=self.low_water)
            else:
                trimmer = HistoryTrimmer(
                    _converted,
                    encoding=self._encoding(),
                    low_water=self.low_water,
                    relaxed=[{"keep_system": False}],  # the system message goes only if no turn fits beside it
                )
            self._trimmer = trimmer
        return trimmer

    def tokenizer_fn(self, text: str) -> list[int]:
        """A list as long as ``text``'s exact token count in the memory's encoding (its items are
        not token ids): what LlamaIndex's chat engines take the length of to count a prefix."""
        return [0] * tokens.count(text, self._encoding())

    def _check_initial(self, initial_token_count: int) -> None:
        if initial_token_count > self.token_limit:
            raise InvalidOperationError(
                f"initial_token_count ({initial_token_count}) exceeds the token limit ({self.token_limit})"
            )

    def get(self, input: str | None = None, initial_token_count: int = 0, **kwargs: Any) -> list[ChatMessage]:
        """The newest messages whose count, with ``initial_token_count``, fits ``token_limit``.
        ``counting="text"``: ``ChatMemoryBuffer``'s answer (the whole history, or the longest
        suffix opening at a message that is not an assistant or tool message, whose texts joined
        by spaces fit). ``counting="request"``: whole tool groups, starting at a user message, a
        leading system message kept when a turn fits beside it (dropped when none does). Like
        ``ChatMemoryBuffer``, when nothing fits, the last message alone (so that the model reports
        the overflow rather than losing it silently). O(new + kept), the counts cached: the first
        call after messages were added counts those. ``input`` and other keywords are accepted and
        ignored, as ``ChatMemoryBuffer`` does. With ``low_water``, a cut keeps less (see the
        class)."""
        self._check_initial(initial_token_count)
        return self._trimmed(self.chat_store.get_messages(self.chat_store_key), initial_token_count)

    async def aget(self, input: str | None = None, initial_token_count: int = 0, **kwargs: Any) -> list[ChatMessage]:
        """:meth:`get`, reading the chat store by its async API."""
        self._check_initial(initial_token_count)
        return self._trimmed(await self.chat_store.aget_messages(self.chat_store_key), initial_token_count)

    def _trimmed(self, history: list[ChatMessage], initial_token_count: int) -> list[ChatMessage]:
        if not history:
            return []
        kept = self._history_trimmer().trim(history, self.token_limit - initial_token_count)
        return history[-1:] if kept is None else kept  # no turn fits: the last message alone

    def put(self, message: ChatMessage) -> None:
        """Append a message to the chat store."""
        self.chat_store.add_message(self.chat_store_key, message)

    async def aput(self, message: ChatMessage) -> None:
        """Append a message to the chat store, by its async API."""
        await self.chat_store.async_add_message(self.chat_store_key, message)

    def put_messages(self, messages: Sequence[ChatMessage]) -> None:
        """Append messages to the chat store."""
        for message in messages:
            self.chat_store.add_message(self.chat_store_key, message)

    async def aput_messages(self, messages: Sequence[ChatMessage]) -> None:
        """Append messages to the chat store, by its async API."""
        for message in messages:
            await self.chat_store.async_add_message(self.chat_store_key, message)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the history."""
        self.chat_store.set_messages(self.chat_store_key, messages)

    async def aset(self, messages: list[ChatMessage]) -> None:
        """Replace the history, by the chat store's async API."""
        await self.chat_store.aset_messages(self.chat_store_key, messages)

    def reset(self) -> None:
        """Forget the history."""
        self.chat_store.delete_messages(self.chat_store_key)
        self._history_trimmer().forget()

    async def areset(self) -> None:
        """Forget the history, by the chat store's async API."""
        await self.chat_store.adelete_messages(self.chat_store_key)
        self._history_trimmer().forget()

    def to_string(self) -> str:
        """The memory as JSON text (its settings and its chat store), as ``ChatMemoryBuffer``
        writes it; :meth:`from_string` reads it back."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_string(cls, json_str: str) -> MemciChatMemory:
        """The memory :meth:`to_string` wrote."""
        return cls.from_dict(json.loads(json_str))

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """The memory as a dict (its settings and its chat store), as ``ChatMemoryBuffer`` has it.
        A ``SimpleChatStore``'s messages are written one by one as ``model_dump(mode="json")``
        (pydantic fails on a ``ChatMessage`` nested in another model's dump)."""
        store = self.chat_store
        if isinstance(store, SimpleChatStore):
            messages = {key: [m.model_dump(mode="json") for m in store.get_messages(key)] for key in store.get_keys()}
            stored: dict[str, Any] = {"store": messages, "class_name": store.class_name()}
        else:
            stored = {**store.model_dump(), "class_name": store.class_name()}
        settings = {
            "token_limit": self.token_limit,
            "counting": self.counting,
            "encoding": self.encoding,
            "low_water": self.low_water,
            "chat_store_key": self.chat_store_key,
        }
        return {**settings, "chat_store": stored, "class_name": self.class_name()}

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> MemciChatMemory:
        """The memory :meth:`to_dict` wrote (its chat store rebuilt by LlamaIndex's
        ``load_chat_store``)."""
        from llama_index.core.storage.chat_store.loading import load_chat_store

        data = {k: v for k, v in data.items() if k != "class_name"}
        if isinstance(data.get("chat_store"), dict):
            data["chat_store"] = load_chat_store(data["chat_store"])
        return cls(**data)
