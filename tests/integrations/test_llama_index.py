"""MemciChatMemory with the real llama-index-core, offline: the BaseMemory contract (sync and
async), the token limit counted exactly and never splitting a tool call from its result, the
chat store as ChatMemoryBuffer uses it (keys, persistence), and real users of a memory: a
SimpleChatEngine on a mock LLM and a FunctionAgent whose mock LLM calls a tool."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import memci
import pytest

pytest.importorskip("llama_index.core")
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.storage.chat_store import SimpleChatStore
from memci.integrations.llama_index import MemciChatMemory, to_memci

ROOT = Path(__file__).resolve().parents[2]


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def tool_turn(i: int, *, blocks: bool) -> list[ChatMessage]:
    """A user question, the assistant's tool call (as a ToolCallBlock or, as LlamaIndex's OpenAI
    integration keeps it, in additional_kwargs), the tool's result, and the answer."""
    call_id = f"call_{i}"
    if blocks:
        call = ChatMessage(
            role="assistant", blocks=[ToolCallBlock(tool_call_id=call_id, tool_name="weather", tool_kwargs={"i": i})]
        )
    else:
        function = {"name": "weather", "arguments": f'{{"i": {i}}}'}
        call = ChatMessage(
            role="assistant",
            content="",
            additional_kwargs={"tool_calls": [{"id": call_id, "type": "function", "function": function}]},
        )
    result = ChatMessage(role="tool", content=f"result {i} " * (i % 7 + 1), additional_kwargs={"tool_call_id": call_id})
    return [user(f"question {i} " * (i % 5 + 1)), call, result, assistant(f"answer {i} " * (i % 3 + 2))]


def history(n: int) -> list[ChatMessage]:
    out = [ChatMessage(role="system", content="You are a helpful agent.")]
    for i in range(n):
        out += tool_turn(i, blocks=i % 2 == 0)
    return out


# ---- the contract -----------------------------------------------------------------------------


def test_put_get_all_set_reset() -> None:
    memory = MemciChatMemory.from_defaults(token_limit=10_000)
    assert memory.get() == []
    messages = history(3)
    memory.put_messages(messages[:5])
    memory.put(messages[5])
    assert memory.get_all() == messages[:6]
    assert memory.get() == messages[:6]  # everything fits
    memory.set(messages[:2])
    assert memory.get() == messages[:2]
    memory.reset()
    assert memory.get_all() == []
    assert memory.get() == []


def test_the_async_methods() -> None:
    async def run() -> list[ChatMessage]:
        memory = MemciChatMemory.from_defaults(token_limit=10_000)
        await memory.aput(user("a"))
        await memory.aput_messages([assistant("b"), user("c")])
        assert [m.content for m in await memory.aget_all()] == ["a", "b", "c"]
        await memory.aset([user("x")])
        got = await memory.aget()
        await memory.areset()
        assert await memory.aget() == []
        return got

    assert [m.content for m in asyncio.run(run())] == ["x"]


def test_from_defaults_as_chat_memory_buffer_takes_it() -> None:
    from llama_index.core.llms import MockLLM

    assert MemciChatMemory.from_defaults().token_limit == 3000
    assert MemciChatMemory.from_defaults(llm=MockLLM()).token_limit == int(MockLLM().metadata.context_window * 0.75)
    assert MemciChatMemory.from_defaults(llm=MockLLM(), token_limit=50).token_limit == 50
    with pytest.raises(memci.InvalidOperationError, match="unexpected"):
        MemciChatMemory.from_defaults(tokens=5)
    with pytest.raises(memci.InvalidOperationError, match="p50k"):
        MemciChatMemory.from_defaults(encoding="p50k_base")
    with pytest.raises(memci.InvalidOperationError, match="initial_token_count"):
        MemciChatMemory.from_defaults(token_limit=10).get(initial_token_count=11)


@pytest.mark.parametrize("limit", [1, 5, 20, 37, 60, 100, 150, 240, 400, 700, 1200, 5000])
def test_get_keeps_the_newest_within_the_limit_and_never_splits_a_call(limit: int) -> None:
    messages = history(12)
    memory = MemciChatMemory.from_defaults(chat_history=messages, token_limit=limit)
    for initial in (0, limit // 3):
        got = memory.get(initial_token_count=initial)
        as_memci = [to_memci(m) for m in got]
        if got == messages[-1:]:  # no turn fits: the last message alone, as ChatMemoryBuffer does
            last_turn = [to_memci(m) for m in messages[-4:]]
            assert memci.tokens.count_messages(last_turn) + initial > limit
            continue
        assert memci.tokens.count_messages(as_memci) + initial <= limit
        system = got[:1] if got and got[0].role == MessageRole.SYSTEM else []
        assert system == messages[:1] or not system
        rest = got[len(system) :]
        assert rest == messages[len(messages) - len(rest) :]  # a suffix
        assert memci.validate_messages(as_memci).valid  # no result without its call
        if rest:
            assert rest[0].role == MessageRole.USER
        # One more turn would not have fit.
        if len(rest) < len(messages) - 1:
            longer = [*messages[:1], *messages[len(messages) - len(rest) - 4 :]]
            assert memci.tokens.count_messages([to_memci(m) for m in longer]) + initial > limit


def test_messages_added_behind_its_back_are_seen() -> None:
    store = SimpleChatStore()
    memory = MemciChatMemory.from_defaults(chat_store=store, token_limit=10_000)
    memory.put(user("one"))
    assert len(memory.get()) == 1
    store.add_message("chat_history", assistant("two"))  # another writer on the same store
    assert [m.content for m in memory.get()] == ["one", "two"]
    store.delete_last_message("chat_history")
    store.delete_last_message("chat_history")
    store.add_message("chat_history", user("three"))
    assert [m.content for m in memory.get()] == ["three"]


def test_keys_keep_conversations_apart_and_a_store_reloads() -> None:
    store = SimpleChatStore()
    alice = MemciChatMemory.from_defaults(chat_store=store, chat_store_key="alice", token_limit=500)
    bob = MemciChatMemory.from_defaults(chat_store=store, chat_store_key="bob", token_limit=500)
    alice.put_messages(history(2))
    bob.put(user("hi, I'm Bob"))
    # A store built again from what it held (SimpleChatStore.persist fails on every message with
    # this llama-index-core and pydantic, so the round trip goes through the messages' JSON).
    dumped = {key: [m.model_dump_json() for m in store.get_messages(key)] for key in store.get_keys()}
    reloaded = SimpleChatStore()
    for key, texts in dumped.items():
        reloaded.set_messages(key, [ChatMessage.model_validate_json(text) for text in texts])
    again = MemciChatMemory.from_defaults(chat_store=reloaded, chat_store_key="alice", token_limit=500)
    assert again.get() == alice.get()
    assert [m.content for m in MemciChatMemory.from_defaults(chat_store=reloaded, chat_store_key="bob").get()] == [
        "hi, I'm Bob"
    ]


def test_tokenizer_fn_counts_exactly() -> None:
    memory = MemciChatMemory.from_defaults()
    assert len(memory.tokenizer_fn("hello world")) == memci.tokens.count("hello world") == 2


# ---- real users of a memory ---------------------------------------------------------------------


def test_a_simple_chat_engine_sends_the_trimmed_history() -> None:
    from llama_index.core.chat_engine import SimpleChatEngine
    from llama_index.core.llms.mock import MockLLMWithChatMemoryOfLastCall

    llm = MockLLMWithChatMemoryOfLastCall()
    memory = MemciChatMemory.from_defaults(token_limit=120)
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be brief.")
    for i in range(12):
        engine.chat(f"message {i} " * 4)
    sent = list(llm.last_chat_messages or [])
    assert sent[0].content == "Be brief."
    assert sent[-1].content == "message 11 " * 4
    history_sent = [to_memci(m) for m in sent[1:]]
    prefix = memci.tokens.count("Be brief.")
    assert memci.tokens.count_messages(history_sent) + prefix <= 120
    assert len(memory.get_all()) == 24  # everything is kept; only what is sent is trimmed
    assert len(sent) - 1 < 23


# llama-index's workflows read a deprecated pydantic attribute.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_function_agent_stores_its_tool_calls_whole() -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool

    def weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}."

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        if messages[-1].role == MessageRole.TOOL:
            return assistant(f"It says: {messages[-1].content}")
        call = ToolCallBlock(tool_call_id=f"c{len(messages)}", tool_name="weather", tool_kwargs={"city": "Paris"})
        return ChatMessage(role="assistant", blocks=[call])

    llm = MockFunctionCallingLLM(response_generator=respond)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(weather)], llm=llm, system_prompt="Use tools.")
    memory = MemciChatMemory.from_defaults(token_limit=10_000)

    async def run() -> str:
        result = ""
        for question in ["Weather in Paris?", "And now?"]:
            result = str(await agent.run(question, memory=memory))
        return result

    assert "Sunny in Paris." in asyncio.run(run())
    stored = [to_memci(m) for m in memory.get_all()]
    assert [m["role"] for m in stored][:4] == ["user", "assistant", "tool", "assistant"]
    assert memci.validate_messages(stored).valid
    small = MemciChatMemory.from_defaults(chat_history=memory.get_all(), token_limit=60)
    assert memci.validate_messages([to_memci(m) for m in small.get()]).valid
