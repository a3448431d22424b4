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
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("llama_index.core")
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.storage.chat_store import SimpleChatStore
from memci.integrations.llama_index import COUNTINGS, MemciChatMemory, to_memci
from memci.integrations.trimming import LOW_WATER

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


@pytest.mark.parametrize("low_water", [None, LOW_WATER])
@pytest.mark.parametrize("limit", [1, 5, 20, 37, 60, 100, 150, 240, 400, 700, 1200, 5000])
def test_get_keeps_the_newest_within_the_limit_and_never_splits_a_call(limit: int, low_water: float | None) -> None:
    """Counting what a request costs: without hysteresis, the most that fits; with it, a cut keeps
    less."""
    messages = history(12)
    memory = MemciChatMemory.from_defaults(
        chat_history=messages, token_limit=limit, counting="request", low_water=low_water
    )
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
        if low_water is None and len(rest) < len(messages) - 1:
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
    memory = MemciChatMemory.from_defaults(token_limit=120, counting="request")
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
    for counting in COUNTINGS:
        small = MemciChatMemory.from_defaults(chat_history=memory.get_all(), token_limit=60, counting=counting)
        assert memci.validate_messages([to_memci(m) for m in small.get()]).valid


# ---- the async path -----------------------------------------------------------------------------


class StrictStore(SimpleChatStore):
    """A chat store that refuses arguments its API does not have (as Redis's or Postgres's do)."""

    def get_messages(self, key: str) -> list[ChatMessage]:  # type: ignore[override]
        return super().get_messages(key)

    async def aget_messages(self, key: str) -> list[ChatMessage]:  # type: ignore[override]
        return super().get_messages(key)


def test_aget_trims_as_get_does_and_passes_the_store_nothing_extra() -> None:
    messages = history(12)
    memory = MemciChatMemory.from_defaults(
        chat_history=messages, chat_store=StrictStore(), token_limit=200, counting="request"
    )

    async def run() -> tuple[list[ChatMessage], list[ChatMessage]]:
        return await memory.aget(), await memory.aget(input="hello", initial_token_count=50)

    whole, with_prompt = asyncio.run(run())
    assert whole == memory.get()
    assert with_prompt == memory.get(initial_token_count=50)
    assert len(with_prompt) < len(whole) < len(messages)
    assert memci.tokens.count_messages([to_memci(m) for m in whole]) <= 200


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # llama-index's workflows
@pytest.mark.parametrize("kind", ["ChatMemoryBuffer", "MemciChatMemory"])
def test_a_function_agent_with_a_small_limit_sends_a_trimmed_history(kind: str) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.memory import ChatMemoryBuffer

    sent: list[list[ChatMessage]] = []

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        sent.append(list(messages))
        return assistant("ok " * 5)

    cls: Any = ChatMemoryBuffer if kind == "ChatMemoryBuffer" else MemciChatMemory
    past = [m for i in range(15) for m in (user(f"question {i} " * 4), assistant(f"answer {i} " * 4))]
    memory = cls.from_defaults(chat_history=past, token_limit=200)
    agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=respond), system_prompt="Be brief.")

    async def run() -> None:
        await agent.run("the newest question", memory=memory)

    asyncio.run(run())
    history_sent = [m for m in sent[-1] if m.role != MessageRole.SYSTEM]
    assert history_sent[-1].content == "the newest question"
    assert 2 < len(history_sent) < len(past) // 2  # trimmed, as ChatMemoryBuffer trims it
    assert history_sent[0].role == MessageRole.USER
    assert len(memory.get_all()) == 30 + 2  # everything kept


@pytest.mark.parametrize("kind", ["ChatMemoryBuffer", "MemciChatMemory"])
def test_a_simple_chat_engine_chats_async_and_streams(kind: str) -> None:
    from llama_index.core.chat_engine import SimpleChatEngine
    from llama_index.core.llms.mock import MockLLMWithChatMemoryOfLastCall
    from llama_index.core.memory import ChatMemoryBuffer

    cls: Any = ChatMemoryBuffer if kind == "ChatMemoryBuffer" else MemciChatMemory
    llm = MockLLMWithChatMemoryOfLastCall()
    memory = cls.from_defaults(token_limit=100)
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt="Be brief.")

    async def run() -> str:
        for i in range(6):
            await engine.achat(f"message {i} " * 4)
        streamed = await engine.astream_chat("streamed " * 3)
        return "".join([token async for token in streamed.async_response_gen()])

    text = asyncio.run(run())
    assert "streamed" in text
    sent = list(llm.last_chat_messages or [])
    assert sent[0].content == "Be brief."
    assert sent[-1].content == "streamed " * 3
    assert len(sent) - 1 < 13  # trimmed to the limit
    assert len(memory.get_all()) == 14


# ---- tool calls in every shape LlamaIndex keeps them ---------------------------------------------


def test_get_reads_tool_selections_blocks_and_anthropic_calls() -> None:
    from llama_index.core.llms.llm import ToolSelection

    shapes: list[dict[str, Any]] = [
        {"tool_calls": [ToolSelection(tool_id="t1", tool_name="weather", tool_kwargs={"city": "Paris"})]},
        {"tool_calls": [{"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}}]},
        {"tool_calls": [{"tool_id": "t1", "tool_name": "weather", "tool_kwargs": {"city": "Paris"}}]},
    ]
    for kwargs in shapes:
        call = ChatMessage(role="assistant", content="", additional_kwargs=kwargs)
        result = ChatMessage(role="tool", content="Sunny " * 40, additional_kwargs={"tool_call_id": "t1"})
        messages = [user("weather?"), call, result, assistant("Sunny."), user("thanks " * 3), assistant("welcome")]
        read = to_memci(call)
        assert read["tool_calls"][0]["id"] == "t1"
        assert read["tool_calls"][0]["function"]["name"] == "weather"
        for limit in (10, 30, 80, 400):
            got = MemciChatMemory.from_defaults(chat_history=messages, token_limit=limit, counting="request").get()
            assert memci.validate_messages([to_memci(m) for m in got]).valid
            assert (call in got) == (result in got)
    # The same call kept both as a block and in additional_kwargs is read once.
    block = ToolCallBlock(tool_call_id="t1", tool_name="weather", tool_kwargs={"city": "Paris"})
    both = ChatMessage(role="assistant", blocks=[block], additional_kwargs={"tool_calls": [block]})
    assert len(to_memci(both)["tool_calls"]) == 1


# ---- ChatMemoryBuffer's behaviours, side by side ----------------------------------------------------
# llama-index-core ships no tests in its sdist; these are the behaviours its test_chat_memory_buffer
# checks, with ChatMemoryBuffer as the control in the same run.


def buffer(kind: str, **kwargs: Any) -> Any:
    from llama_index.core.memory import ChatMemoryBuffer

    cls: Any = ChatMemoryBuffer if kind == "ChatMemoryBuffer" else MemciChatMemory
    return cls.from_defaults(**kwargs)


KINDS = ["ChatMemoryBuffer", "MemciChatMemory"]


@pytest.mark.parametrize("kind", KINDS)
def test_buffer_put_get_set_reset(kind: str) -> None:
    memory = buffer(kind, chat_history=[user("first")])
    memory.put(assistant("second"))
    assert [m.content for m in memory.get()] == ["first", "second"]
    memory.set([user("only")])
    assert [m.content for m in memory.get_all()] == ["only"]
    memory.reset()
    assert memory.get() == []


@pytest.mark.parametrize("kind", KINDS)
def test_buffer_initial_tokens(kind: str) -> None:
    memory = buffer(kind, chat_history=[user("hello there"), assistant("hi")], token_limit=50)
    assert len(memory.get(initial_token_count=5)) == 2
    assert memory.get(initial_token_count=50) == memory.get_all()[-1:]  # nothing fits: the last message
    with pytest.raises(ValueError, match=r"(?i)initial"):
        memory.get(initial_token_count=51)


@pytest.mark.parametrize("kind", KINDS)
def test_buffer_drops_the_oldest_and_starts_on_a_user_message(kind: str) -> None:
    messages = [m for i in range(20) for m in (user(f"question {i} " * 3), assistant(f"answer {i} " * 3))]
    memory = buffer(kind, chat_history=messages, token_limit=60)
    got = memory.get()
    assert 0 < len(got) < len(messages)
    assert got == messages[len(messages) - len(got) :]
    assert got[0].role == MessageRole.USER


@pytest.mark.parametrize("kind", KINDS)
def test_buffer_string_dict_and_pickle_round_trips(kind: str) -> None:
    import pickle

    from pydantic_core import PydanticSerializationError

    memory = buffer(kind, chat_history=[user("first"), assistant("second")], token_limit=77)
    cls = type(memory)
    copies = [pickle.loads(pickle.dumps(memory))]
    try:
        copies += [cls.from_string(memory.to_string()), cls.from_dict(memory.to_dict())]
    except PydanticSerializationError:
        # ChatMemoryBuffer serializes its store with model_dump, which fails on every ChatMessage
        # with this llama-index-core and pydantic; MemciChatMemory writes the messages' JSON itself.
        assert kind == "ChatMemoryBuffer"
    for again in copies:
        assert again.token_limit == 77
        assert again.get_all() == memory.get_all()
        assert again.get() == memory.get()


# ---- Memory on a memci store, side by side with LlamaIndex's SQL store ----------------------------
# The behaviours llama-index-core's own Memory tests check (its sdist ships none), each run on
# SQLAlchemyChatStore (SQLite through aiosqlite, the default) and on MemciChatStore, asserting the
# same observable results.

STORES = ["SQLAlchemyChatStore", "MemciChatStore"]


def chat_store(kind: str, path: Path) -> Any:
    from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
    from memci.integrations.llama_index_memory import MemciChatStore

    if kind == "SQLAlchemyChatStore":
        from sqlalchemy.ext.asyncio import create_async_engine
        from sqlalchemy.pool import NullPool

        # No pool: Memory's sync methods run each call on a loop of its own, and a pooled
        # aiosqlite connection would outlive its loop.
        engine = create_async_engine(f"sqlite+aiosqlite:///{path}/native.db", poolclass=NullPool)
        return SQLAlchemyChatStore(table_name="memory", async_engine=engine)
    return MemciChatStore(lambda session: memci.SqliteStorage(path / "memci.db", namespace=session))


def recording_block(name: str = "seen") -> Any:
    """A memory block that keeps the text of every message flushed into it."""
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.memory.memory import BaseMemoryBlock

    class Recording(BaseMemoryBlock[str]):
        flushed: list[str] = Field(default_factory=list)

        async def _aget(self, messages: Any = None, **kwargs: Any) -> str:
            return " | ".join(self.flushed)

        async def _aput(self, messages: list[ChatMessage]) -> None:
            self.flushed = [*self.flushed, *(str(m.content) for m in messages)]

    return Recording(name=name)


def conversation(n: int) -> list[ChatMessage]:
    return [m for i in range(n) for m in (user(f"question {i} " * 5), assistant(f"answer {i} " * 5))]


def memory_run(kind: str, path: Path) -> dict[str, Any]:
    """One scenario on a Memory with a flush into a memory block; what an observer sees."""
    from llama_index.core.memory import Memory
    from llama_index.core.storage.chat_store.sql import MessageStatus

    block = recording_block()
    memory = Memory.from_defaults(
        session_id="user-42", chat_store=chat_store(kind, path), token_limit=120, memory_blocks=[block]
    )
    other = Memory.from_defaults(session_id="user-7", chat_store=memory.sql_store, token_limit=120)
    for message in conversation(10):
        memory.put(message)
    other.put(user("I am someone else."))
    got = memory.get()
    return {
        "flushed": list(block.flushed),
        "active": [m.content for m in memory.get_all(status=MessageStatus.ACTIVE)],
        "archived": [m.content for m in memory.get_all(status=MessageStatus.ARCHIVED)],
        "sent": [(m.role.value, m.content) for m in got],
        "other": [m.content for m in other.get_all()],
    }


def test_memory_flushes_into_blocks_as_on_the_sql_store(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    native, ours = memory_run("SQLAlchemyChatStore", tmp_path / "a"), memory_run("MemciChatStore", tmp_path / "b")
    assert ours == native
    assert ours["flushed"]
    assert ours["flushed"] == ours["archived"]
    assert ours["active"][0].startswith("question")  # the queue starts on a user turn
    assert ours["sent"][0][0] == "system"
    assert "question 0" in str(ours["sent"][0][1])
    assert ours["other"] == ["I am someone else."]  # sessions apart


@pytest.mark.parametrize("kind", STORES)
def test_memory_put_get_set_reset_and_reopen(kind: str, tmp_path: Path) -> None:
    from llama_index.core.memory import Memory

    memory = Memory.from_defaults(session_id="s", chat_store=chat_store(kind, tmp_path), token_limit=10_000)

    async def run() -> None:
        await memory.aput(user("one"))
        await memory.aput_messages([assistant("two"), user("three")])
        assert [m.content for m in await memory.aget()] == ["one", "two", "three"]
        await memory.aset([user("only")])
        assert [m.content for m in await memory.aget_all()] == ["only"]

    asyncio.run(run())
    again = Memory.from_defaults(session_id="s", chat_store=chat_store(kind, tmp_path), token_limit=10_000)
    assert [m.content for m in again.get_all()] == ["only"]  # persisted under its session id
    memory.reset()
    assert memory.get_all() == []


@pytest.mark.parametrize("kind", STORES)
def test_the_store_contract(kind: str, tmp_path: Path) -> None:
    from llama_index.core.storage.chat_store.sql import MessageStatus

    store = chat_store(kind, tmp_path)

    async def run() -> dict[str, Any]:
        await store.set_messages("k", [user(f"m{i}") for i in range(6)])
        await store.add_message("k", assistant("late"), status=MessageStatus.ARCHIVED)
        archived = await store.archive_oldest_messages("k", 2)
        deleted = await store.delete_oldest_messages("k", 1)
        out = {
            "archived": [m.content for m in archived],
            "deleted": [m.content for m in deleted],
            "active": [m.content for m in await store.get_messages("k")],
            "all": [m.content for m in await store.get_messages("k", status=None)],
            "page": [m.content for m in await store.get_messages("k", limit=2, offset=1)],
            "counts": (await store.count_messages("k"), await store.count_messages("k", status=None)),
        }
        await store.delete_messages("k", status=MessageStatus.ARCHIVED)
        out["after"] = [m.content for m in await store.get_messages("k", status=None)]
        out["keys"] = await store.get_keys()
        return out

    got = asyncio.run(run())
    assert got == {
        "archived": ["m0", "m1"],
        "deleted": ["m2"],
        "active": ["m3", "m4", "m5"],
        "all": ["m0", "m1", "m3", "m4", "m5", "late"],
        "page": ["m4", "m5"],
        "counts": (3, 6),
        "after": ["m3", "m4", "m5"],
        "keys": ["k"],
    }


def test_a_chat_store_state_is_written_by_the_page_log_and_old_states_load(tmp_path: Path) -> None:
    from memci.integrations.llama_index_memory import STORE_KIND, MemciChatStore

    storage = memci.SqliteStorage(tmp_path / "memci.db", namespace="k")
    old = {"role": "user", "content": "from before", "blocks": [{"block_type": "text", "text": "from before"}]}
    storage.save_state(
        {"version": 1, "kind": STORE_KIND, "revision": 1, "messages": [{"status": "active", "message": old}]}
    )
    store = MemciChatStore(lambda session: storage)
    assert [m.content for m in asyncio.run(store.get_messages("k"))] == ["from before"]
    asyncio.run(store.add_message("k", user("new")))
    state = storage.load_state()
    assert state is not None
    assert (state["kind"], state["revision"], state["pages_through"]) == (STORE_KIND, 2, 0)
    assert [row["message"]["blocks"][0]["text"] for row in state["messages"]] == ["from before", "new"]


def test_a_chat_store_on_another_kind_of_state_is_refused_by_session(tmp_path: Path) -> None:
    from memci.integrations.llama_index_memory import MemciChatStore

    storage = memci.SqliteStorage(tmp_path / "memci.db", namespace="k")
    memci.ContextSystem("Be brief.", storage=storage).save()
    saved = storage.load_state()
    store = MemciChatStore(lambda session: storage)
    with pytest.raises(memci.StateError, match=r"session 'k': .*another kind of state"):
        asyncio.run(store.get_messages("k"))
    assert storage.load_state() == saved


# ---- counting="text": what ChatMemoryBuffer keeps, side by side -----------------------------------

LLAMA_ROLES = [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.SYSTEM, MessageRole.CHATBOT]
WORDS = st.sampled_from(["first", "message", "answer", " ", "  ", "\n", " \n", "\t", "!", "42", "é", "don't", "x."])
TEXTS = st.lists(WORDS | st.text(max_size=3), max_size=6).map("".join)


@st.composite
def chat_messages(draw: st.DrawFn) -> ChatMessage:
    """A message with a text, or (an assistant's) tool call without any (content None, counted as
    "None" by ChatMemoryBuffer), or two text blocks (joined by a line break)."""
    role = draw(st.sampled_from(LLAMA_ROLES))
    shape = draw(st.sampled_from(["text", "text", "text", "call", "blocks"]))
    if shape == "call":
        call = ToolCallBlock(tool_call_id="c1", tool_name="f", tool_kwargs={})
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])
    if shape == "blocks":
        return ChatMessage(role=role, blocks=[TextBlock(text=draw(TEXTS)), TextBlock(text=draw(TEXTS))])
    return ChatMessage(role=role, content=draw(TEXTS))


@settings(max_examples=200, deadline=None)
@given(st.lists(chat_messages(), min_size=1, max_size=10), st.integers(1, 30), st.data())
def test_text_counting_keeps_what_chat_memory_buffer_keeps(
    messages: list[ChatMessage], limit: int, data: st.DataObject
) -> None:
    """At any limit and initial count, after each put, MemciChatMemory's default keeps the very
    messages ChatMemoryBuffer keeps; counting="request" on the same history sends its newest
    messages (a leading system message aside) within the limit counted as a request, or the last
    message alone."""
    from llama_index.core.memory import ChatMemoryBuffer

    native = ChatMemoryBuffer.from_defaults(token_limit=limit)
    ours = MemciChatMemory.from_defaults(token_limit=limit)
    request = MemciChatMemory.from_defaults(token_limit=limit, counting="request")
    for message in messages:
        for memory in (native, ours, request):
            memory.put(message)
        initial = data.draw(st.integers(0, limit))
        assert ours.get(initial_token_count=initial) == native.get(initial_token_count=initial)
        sent, stored = request.get(initial_token_count=initial), request.get_all()
        assert tokens_of(sent) + initial <= limit or sent == stored[-1:]
        rest = sent[1:] if sent and sent[0] is stored[0] and sent[0].role == MessageRole.SYSTEM else sent
        assert rest == stored[len(stored) - len(rest) :]


def tokens_of(messages: list[ChatMessage]) -> int:
    return memci.tokens.count_messages([to_memci(m) for m in messages]) if messages else 0


def test_the_counting_is_chat_memory_buffer_s_and_its_tokenizer() -> None:
    """ChatMemoryBuffer's own tests at token_limit=5: "first message" is 2 tokens of text (9 as a
    request), so two fit in the text count and none in the request count."""
    first = user("first message")
    text = MemciChatMemory.from_defaults(chat_history=[first, first], token_limit=5)
    request = MemciChatMemory.from_defaults(chat_history=[first, first], token_limit=5, counting="request")
    assert text.get() == [first, first]
    assert request.get() == [first]  # nothing fits: the last message alone
    assert len(text.tokenizer_fn("first message")) == 2
    # cl100k_base, ChatMemoryBuffer's tokenizer's, unless an encoding is given.
    hindi = "नमस्ते दुनिया"  # 13 tokens in cl100k_base, 5 in o200k_base
    assert len(text.tokenizer_fn(hindi)) == memci.tokens.count(hindi, "cl100k_base") == 13
    assert len(request.tokenizer_fn(hindi)) == memci.tokens.count(hindi, "o200k_base") == 5
    given_one = MemciChatMemory.from_defaults(encoding="o200k_base")
    assert len(given_one.tokenizer_fn(hindi)) == 5


def test_a_bad_counting_is_refused_and_the_store_left_as_it_was() -> None:
    store = SimpleChatStore()
    store.set_messages("chat_history", [user("kept")])
    with pytest.raises(memci.InvalidOperationError, match=r"counting must be one of \['text', 'request'\]"):
        MemciChatMemory.from_defaults(chat_history=[user("new")], chat_store=store, counting="tokens")  # type: ignore[arg-type]
    with pytest.raises(memci.InvalidOperationError, match="low_water"):
        MemciChatMemory.from_defaults(chat_history=[user("new")], chat_store=store, low_water=2.0)
    # Characters / 4 rounded does not add up over the joints of the text count.
    with pytest.raises(memci.InvalidOperationError, match=r"exact encoding .* not 'approximate'"):
        MemciChatMemory.from_defaults(chat_history=[user("new")], chat_store=store, encoding="approximate")
    with pytest.raises(memci.InvalidOperationError, match="p50k"):
        MemciChatMemory.from_defaults(chat_history=[user("new")], chat_store=store, encoding="p50k_base")
    with pytest.raises(memci.InvalidOperationError, match="token_limit: Input should be greater than 0, got 0"):
        MemciChatMemory.from_defaults(chat_history=[user("new")], chat_store=store, token_limit=0)
    assert [m.content for m in store.get_messages("chat_history")] == ["kept"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"counting": "tokens"}, r"MemciChatMemory: counting must be one of \['text', 'request'\], got 'tokens'"),
        ({"token_limit": -5}, "MemciChatMemory: token_limit: Input should be greater than 0, got -5"),
        ({"token_limit": "many"}, "MemciChatMemory: token_limit: Input should be a valid integer.*got 'many'"),
        ({"low_water": 0.0}, "low_water must be a fraction"),
        ({"encoding": "approximate"}, "exact encoding"),
        ({"counting": "request", "encoding": "p50k_base"}, "p50k"),
        ({"chat_store_key": 7}, "MemciChatMemory: chat_store_key: Input should be a valid string, got 7"),
    ],
)
def test_a_memory_built_directly_refuses_bad_settings_by_name(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(memci.InvalidOperationError, match=message):
        MemciChatMemory(**settings)


def test_request_counting_takes_the_approximate_rule() -> None:
    memory = MemciChatMemory.from_defaults(
        chat_history=[user("a question " * 20), user("hi")], counting="request", encoding="approximate"
    )
    assert memory.get() == memory.get_all()
    assert len(memory.tokenizer_fn("abcdefgh")) == 2


@pytest.mark.parametrize("counting", COUNTINGS)
def test_the_counting_survives_a_round_trip(counting: str) -> None:
    import pickle

    memory = MemciChatMemory.from_defaults(
        chat_history=[user("first message"), user("first message")], token_limit=5, counting=counting
    )
    for again in (
        MemciChatMemory.from_string(memory.to_string()),
        MemciChatMemory.from_dict(memory.to_dict()),
        pickle.loads(pickle.dumps(memory)),
    ):
        assert again.counting == counting
        assert again.get() == memory.get()


def test_text_counting_with_low_water_cuts_less_often() -> None:
    """Hysteresis on the text count: the messages sent grow append-only until they pass the limit,
    then are cut to within low_water of it; ChatMemoryBuffer, the control, cuts at every turn."""
    from llama_index.core.memory import ChatMemoryBuffer

    native = ChatMemoryBuffer.from_defaults(token_limit=60)
    ours = MemciChatMemory.from_defaults(token_limit=60, low_water=LOW_WATER)
    firsts_native, firsts_ours = set(), set()
    for i in range(40):
        for memory in (native, ours):
            memory.put(user(f"question {i}"))
            memory.put(assistant(f"answer {i}"))
        sent = ours.get()
        text = " ".join(str(m.content) for m in sent)
        assert memci.tokens.count(text, "cl100k_base") <= 60
        assert sent == ours.get_all()[-len(sent) :]
        assert sent[0].role == MessageRole.USER
        firsts_native.add(native.get()[0].content)
        firsts_ours.add(sent[0].content)
    assert len(firsts_ours) < len(firsts_native) / 2  # fewer cuts: the prefix a cache reuses changes less
