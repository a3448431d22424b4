"""memci in LangChain v1, with the real langchain and langchain-core and their fake chat model,
offline: the trim middleware on ``create_agent`` (every model call within budget, tool groups
whole, sync and async, the state keeping everything), the context middleware (the model reads the
paged window and recalls a page through the agent's tool), and the chat history (sync and async,
many sessions in one file, concurrent writers, RunnableWithMessageHistory, Redis). The docs page's
examples run in tests/test_docs.py."""

from __future__ import annotations

import asyncio
import functools
import threading
from pathlib import Path
from typing import Any

import memci
import pytest

pytest.importorskip("langchain.agents")
from factories import run_together
from fake_chat import model  # needs langchain-core
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from memci.integrations.langchain import (
    MemciChatMessageHistory,
    MemciContextMiddleware,
    MemciTrimMiddleware,
)


def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21C. " * 4


def script(turns: int) -> list[AIMessage]:
    """Every other turn calls the tool before answering."""
    out: list[AIMessage] = []
    for i in range(turns):
        if i % 2 == 0:
            out.append(
                AIMessage(content="", tool_calls=[{"name": "weather", "args": {"city": f"C{i}"}, "id": f"c{i}"}])
            )
        out.append(AIMessage(content=f"Answer {i}: " + "it is fine. " * (i % 4 + 1)))
    return out


def as_dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return memci.formats.from_langchain(messages)


# ---- the trim middleware ------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [30, 60, 120, 250, 1000])
def test_every_model_call_fits_the_budget_with_its_system_prompt(budget: int) -> None:
    fake = model(script(6))
    agent = create_agent(fake, [weather], system_prompt="Be brief.", middleware=[MemciTrimMiddleware(budget)])
    messages: list[Any] = []
    for i in range(6):
        messages = agent.invoke({"messages": [*messages, HumanMessage(f"Question {i}: " + "more? " * (i + 1))]})[
            "messages"
        ]
    assert len(messages) == 6 * 2 + 3 * 2  # the state keeps everything
    for sent in fake.sent:
        assert sent[0].content == "Be brief."
        dicts = as_dicts(sent)
        assert memci.validate_messages(dicts).valid  # no tool result without its call
        if memci.tokens.count_messages(dicts) > budget:  # only when not even the newest group fits
            assert not memci.validate_messages(dicts[2:]).valid or len(sent) == 2
        rest = [m.id for m in sent[1:]]
        ids = [m.id for m in messages]
        start = ids.index(rest[0])
        assert ids[start : start + len(rest)] == rest  # a contiguous run of the state, in order


def test_the_trim_middleware_runs_async() -> None:
    fake = model(script(2))
    agent = create_agent(fake, [weather], middleware=[MemciTrimMiddleware(80)])

    async def run() -> list[Any]:
        messages: list[Any] = []
        for i in range(2):
            state = await agent.ainvoke({"messages": [*messages, HumanMessage(f"q{i} " * 30)]})
            messages = state["messages"]
        return messages

    messages = asyncio.run(run())
    assert len(messages) == 2 * 2 + 2
    assert all(memci.validate_messages(as_dicts(sent)).valid for sent in fake.sent)
    assert len(fake.sent[-1]) < len(messages)


def test_bad_options_are_refused() -> None:
    with pytest.raises(memci.InvalidOperationError, match="max_tokens"):
        MemciTrimMiddleware(-5)
    with pytest.raises(memci.InvalidOperationError, match="p50k"):
        MemciTrimMiddleware(10, encoding="p50k_base")
    with pytest.raises(memci.InvalidOperationError, match="ContextSystem"):
        MemciContextMiddleware(object())  # type: ignore[arg-type]


# ---- the context middleware ---------------------------------------------------------------------


def test_the_model_reads_the_paged_window_and_recalls_a_page(tmp_path: Path) -> None:
    store = memci.SqliteStorage(tmp_path / "agent.db")
    context = memci.ContextSystem(None, active_pages=1, storage=store)
    middleware = MemciContextMiddleware(context)
    recall = AIMessage(content="", tool_calls=[{"name": "recall_page", "args": {"page_index": 1}, "id": "r1"}])
    fake = model([AIMessage("Noted: alpha."), AIMessage("Noted: beta."), recall, AIMessage("It was alpha.")])
    agent = create_agent(fake, [], system_prompt="You remember.", middleware=[middleware])
    messages: list[Any] = []
    for text in ["The code word is alpha.", "The next one is beta.", "What was the first code word?"]:
        messages = agent.invoke({"messages": [*messages, HumanMessage(text)]})["messages"]
    assert messages[-1].content == "It was alpha."
    third = fake.sent[2]
    conversation = [m.content for m in third if m.type != "system"]
    assert "The code word is alpha." not in conversation  # archived, out of the window
    assert any("[page 1] The code word is alpha." in str(m.content) for m in third)  # on the contents page
    answer = fake.sent[-1][-1]
    assert isinstance(answer, ToolMessage)
    assert "The code word is alpha." in str(answer.content)
    reopened = memci.ContextSystem.open(memci.SqliteStorage(tmp_path / "agent.db"))
    assert reopened.search("alpha")[0].page_index == 1  # saved to the store at each call


def test_the_model_searches_the_archive() -> None:
    middleware = MemciContextMiddleware(memci.ContextSystem(None, active_pages=1))
    assert [tool.name for tool in middleware.tools] == ["recall_page", "list_pages", "search_pages"]
    search = AIMessage(content="", tool_calls=[{"name": "search_pages", "args": {"query": "code word"}, "id": "s1"}])
    fake = model([AIMessage("Noted: alpha."), AIMessage("Noted."), search, AIMessage("It was alpha.")])
    agent = create_agent(fake, [], system_prompt="You remember.", middleware=[middleware])
    messages: list[Any] = []
    for text in ["The code word is alpha.", "The weather is fine.", "What was the code word?"]:
        messages = agent.invoke({"messages": [*messages, HumanMessage(text)]})["messages"]
    answer = fake.sent[-1][-1]
    assert isinstance(answer, ToolMessage)
    assert str(answer.content).startswith("[page 1] The code word is alpha.")


# ---- the chat history ---------------------------------------------------------------------------

HISTORY: list[BaseMessage] = [
    HumanMessage("What's the weather in Paris?", id="m1"),
    AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}], id="m2"),
    ToolMessage("Sunny, 21C.", tool_call_id="c1", id="m3"),
    AIMessage("It is sunny in Paris. ñ 漢字", id="m4"),
]


def test_a_history_round_trips_reopens_and_clears(tmp_path: Path) -> None:
    history = MemciChatMessageHistory("s1", tmp_path / "chats.db")
    assert history.messages == []
    history.add_messages(HISTORY[:2])
    history.add_message(HISTORY[2])
    history.add_messages(HISTORY[3:])
    assert history.messages == HISTORY
    assert MemciChatMessageHistory("s1", tmp_path / "chats.db").messages == HISTORY
    history.clear()
    assert history.messages == []
    assert MemciChatMessageHistory("s1", tmp_path / "chats.db").messages == []


def test_the_async_methods(tmp_path: Path) -> None:
    async def run() -> list[BaseMessage]:
        history = MemciChatMessageHistory("s", tmp_path / "chats.db")
        await history.aadd_messages(HISTORY)
        got = await history.aget_messages()
        await history.aclear()
        assert await history.aget_messages() == []
        return got

    assert asyncio.run(run()) == HISTORY


def test_sessions_in_one_file_stay_apart(tmp_path: Path) -> None:
    alice = MemciChatMessageHistory("alice", tmp_path / "chats.db")
    bob = MemciChatMessageHistory("bob", tmp_path / "chats.db")
    alice.add_messages(HISTORY)
    bob.add_user_message("Hi, I'm Bob.")
    alice.clear()
    assert [m.content for m in MemciChatMessageHistory("bob", tmp_path / "chats.db").messages] == ["Hi, I'm Bob."]
    assert MemciChatMessageHistory("alice", tmp_path / "chats.db").messages == []


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    writers = [MemciChatMessageHistory("shared", tmp_path / "chats.db") for _ in range(4)]
    barrier = threading.Barrier(4)

    def write(w: int) -> None:
        barrier.wait()
        for i in range(10):
            writers[w].add_user_message(f"w{w}-{i}")

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    contents = [str(m.content) for m in MemciChatMessageHistory("shared", tmp_path / "chats.db").messages]
    assert sorted(contents) == sorted(f"w{w}-{i}" for w in range(4) for i in range(10))
    assert writers[0].messages == MemciChatMessageHistory("shared", tmp_path / "chats.db").messages  # refreshed


# LangChain deprecates it in favour of LangGraph's persistence; it is still what takes a history.
@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history(tmp_path: Path) -> None:
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables.history import RunnableWithMessageHistory

    fake = model([AIMessage("Hello Ada."), AIMessage("Your name is Ada.")])
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    chain = RunnableWithMessageHistory(
        prompt | fake,
        lambda session_id: MemciChatMessageHistory(session_id, tmp_path / "chats.db"),
        input_messages_key="question",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "ada"}}
    chain.invoke({"question": "I am Ada."}, config)
    assert chain.invoke({"question": "What is my name?"}, config).content == "Your name is Ada."
    assert [m.content for m in fake.sent[-1]] == ["I am Ada.", "Hello Ada.", "What is my name?"]
    assert len(MemciChatMessageHistory("ada", tmp_path / "chats.db").messages) == 4


def test_a_history_on_redis(redis_url: str) -> None:
    def on_redis(session: str) -> MemciChatMessageHistory:
        return MemciChatMessageHistory(session, storage=memci.RedisStorage(redis_url, prefix=f"chats:{session}:"))

    on_redis("x").add_messages(HISTORY)
    assert on_redis("x").messages == HISTORY
    assert on_redis("y").messages == []


# ---- conversations kept apart -------------------------------------------------------------------


def test_the_context_middleware_keeps_interleaved_threads_apart(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    def for_thread(thread_id: str) -> memci.ContextSystem:
        return memci.ContextSystem(
            None, active_pages=1, storage=memci.SqliteStorage(tmp_path / "agent.db", namespace=thread_id)
        )

    fake = model([AIMessage(f"Noted {i}.") for i in range(12)])
    agent = create_agent(fake, [], middleware=[MemciContextMiddleware(for_thread)], checkpointer=InMemorySaver())
    users = ["alice", "bob", "carol@example.com"]
    for turn in range(3):
        for name in users:
            agent.invoke(
                {"messages": [HumanMessage(f"{name} says secret {turn}.")]}, {"configurable": {"thread_id": name}}
            )
    for sent, name in zip(fake.sent, [n for _ in range(3) for n in users], strict=True):
        text = " ".join(str(m.content) for m in sent)
        assert f"{name} says" in text
        assert all(f"{other} says" not in text for other in users if other != name)
    for name in users:  # each thread's archive is its own
        assert (
            memci.ContextSystem.open(memci.SqliteStorage(tmp_path / "agent.db", namespace=name))
            .search("secret 0")[0]
            .page_index
            == 1
        )


def test_the_context_middleware_keeps_concurrent_threads_apart() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    class Echo(type(model([]))):  # type: ignore[misc]
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            from langchain_core.outputs import ChatGeneration, ChatResult

            self.sent.append(list(messages))
            return ChatResult(generations=[ChatGeneration(message=AIMessage("heard: " + str(messages[-1].content)))])

    fake = Echo(messages=iter([]), sent=[])
    agent = create_agent(
        fake, [], middleware=[MemciContextMiddleware(lambda _: memci.ContextSystem(None))], checkpointer=InMemorySaver()
    )

    def talk(user: int) -> None:
        for turn in range(5):
            config = {"configurable": {"thread_id": f"u{user}"}}
            agent.invoke({"messages": [HumanMessage(f"user{user} turn{turn}")]}, config)

    run_together(*(functools.partial(talk, u) for u in range(4)))
    assert len(fake.sent) == 20
    for sent in fake.sent:
        owner = str(sent[-1].content).split()[0]
        text = " ".join(str(m.content) for m in sent)
        assert all(f"user{u} " not in text for u in range(4) if f"user{u}" != owner), text  # nobody else's words


def test_one_context_system_serves_one_thread_only() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    agent = create_agent(
        model([AIMessage("a"), AIMessage("b")]),
        [],
        middleware=[MemciContextMiddleware(memci.ContextSystem(None))],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("alice's secret")]}, {"configurable": {"thread_id": "alice"}})
    with pytest.raises(memci.InvalidOperationError, match=r"thread .bob.*factory"):
        agent.invoke({"messages": [HumanMessage("bob here")]}, {"configurable": {"thread_id": "bob"}})


class SameIds(type(model([]))):  # type: ignore[misc]
    """Answers "ok" with the id ``a<n>`` (n: the human messages it was sent): every thread's
    answers get the same ids."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        from langchain_core.outputs import ChatGeneration, ChatResult

        self.sent.append(list(messages))
        answer = AIMessage("ok", id=f"a{sum(m.type == 'human' for m in messages)}")
        return ChatResult(generations=[ChatGeneration(message=answer)])


def test_the_trim_middleware_keeps_threads_with_the_same_message_ids_apart() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    fake = SameIds(messages=iter([]), sent=[])
    agent = create_agent(fake, [], middleware=[MemciTrimMiddleware(60)], checkpointer=InMemorySaver())
    # Both threads' messages have the same ids, with different texts: a mirror keyed by ids alone
    # counts one thread's texts for the other's.
    for turn in range(4):
        for name, words in (("short", "hi"), ("long", "a much longer question " * 6)):
            config = {"configurable": {"thread_id": name}}
            agent.invoke({"messages": [HumanMessage(f"{words} {turn}", id=f"q{turn}")]}, config)
    assert len(fake.sent) == 8
    for sent in fake.sent:
        assert memci.tokens.count_messages(as_dicts(sent)) <= 60 or len(sent) == 1
        assert len({("much longer" in str(m.content)) for m in sent if m.type == "human"}) == 1


def test_a_recall_saves_its_count(tmp_path: Path) -> None:
    store = memci.SqliteStorage(tmp_path / "agent.db")
    middleware = MemciContextMiddleware(memci.ContextSystem(None, active_pages=1, storage=store))
    recall = AIMessage(content="", tool_calls=[{"name": "recall_page", "args": {"page_index": 1}, "id": "r1"}])
    agent = create_agent(model([AIMessage("a"), AIMessage("b"), recall, AIMessage("c")]), [], middleware=[middleware])
    messages: list[Any] = []
    for text in ["alpha", "beta", "which first?"]:
        messages = agent.invoke({"messages": [*messages, HumanMessage(text)]})["messages"]
    reopened = memci.ContextSystem.open(memci.SqliteStorage(tmp_path / "agent.db"))
    assert {e.index: e.recall_count for e in reopened.contents}[1] == 1


# ---- a lossless history -------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessageChunk,
    SystemMessage,
)

USAGE = {
    "input_tokens": 120,
    "output_tokens": 30,
    "total_tokens": 150,
    "input_token_details": {"cache_read": 100},
    "output_token_details": {"reasoning": 12},
}
#: Realistic shapes of every LangChain message class, as providers' integrations fill them.
SHAPES: list[BaseMessage] = [
    HumanMessage("plain", id="h1"),
    HumanMessage(
        [
            {"type": "text", "text": "What is in this image?"},
            {"type": "text", "text": "And this one?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
        id="h2",
        name="ada",
        additional_kwargs={"metadata": {"source": "web"}},
    ),
    HumanMessage([{"type": "image", "source_type": "url", "url": "https://example.com/x.png"}]),
    SystemMessage([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}], id="s1"),
    AIMessage(
        "Sunny.",
        id="run-1",
        usage_metadata=USAGE,
        response_metadata={
            "model_name": "gpt-4o",
            "finish_reason": "stop",
            "logprobs": None,
            "system_fingerprint": "fp",
        },
        additional_kwargs={"refusal": None},
    ),
    AIMessage(
        "",
        tool_calls=[
            {"name": "weather", "args": {"city": "Paris", "days": [1, 2]}, "id": "c1", "type": "tool_call"},
            {"name": "time", "args": {}, "id": "c2", "type": "tool_call"},
        ],
        invalid_tool_calls=[
            {"name": "broken", "args": "{not json", "id": "c3", "error": "bad JSON", "type": "invalid_tool_call"}
        ],
        additional_kwargs={
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]
        },
        usage_metadata=USAGE,
        id="run-2",
    ),
    AIMessage(
        [
            {"type": "thinking", "thinking": "The user wants...", "signature": "sig=="},
            {"type": "text", "text": "First part."},
            {"type": "text", "text": "Second part."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Rome"}},
        ],
        tool_calls=[{"name": "weather", "args": {"city": "Rome"}, "id": "toolu_1", "type": "tool_call"}],
        response_metadata={"stop_reason": "tool_use", "model": "claude", "usage": {"input_tokens": 9}},
        name="assistant-1",
    ),
    AIMessageChunk("partial", id="chunk-1", usage_metadata=USAGE, response_metadata={"finish_reason": "length"}),
    ToolMessage(
        "Sunny, 21C.",
        tool_call_id="c1",
        id="t1",
        name="weather",
        artifact={"raw": {"temp": 21.5, "ok": True, "tags": ["a", None]}},
        additional_kwargs={"latency_ms": 3},
    ),
    ToolMessage([{"type": "text", "text": "error: city unknown"}], tool_call_id="c2", status="error"),
    ChatMessage("A custom role.", role="critic", id="x1"),
    FunctionMessage("42", name="compute", id="f1"),
    HumanMessageChunk("chunked", id="hc"),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda m: f"{type(m).__name__}")
def test_every_message_shape_round_trips(shape: BaseMessage, tmp_path: Path) -> None:
    MemciChatMessageHistory("s", tmp_path / "chats.db").add_messages([shape])
    (back,) = MemciChatMessageHistory("s", tmp_path / "chats.db").messages
    assert type(back) is type(shape)
    assert back == shape
    assert back.model_dump() == shape.model_dump()  # every field, content blocks kept as blocks


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kwargs=st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    metadata=st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    artifact=json_values,
    text=st.text(),
)
def test_any_json_fields_round_trip(kwargs: dict[str, Any], metadata: dict[str, Any], artifact: Any, text: str) -> None:
    messages: list[BaseMessage] = [
        HumanMessage(text, additional_kwargs=kwargs, response_metadata=metadata),
        AIMessage([{"type": "text", "text": text}], additional_kwargs=kwargs, response_metadata=metadata),
        ToolMessage(text, tool_call_id="c", artifact=artifact, additional_kwargs=kwargs),
    ]
    history = MemciChatMessageHistory("p")
    history.add_messages(messages)
    assert history.messages == messages


def test_a_value_that_is_not_json_is_refused_and_nothing_is_written() -> None:
    history = MemciChatMessageHistory("s")
    history.add_messages(HISTORY[:1])
    with pytest.raises(memci.MemciError, match="artifact"):
        history.add_messages([ToolMessage("x", tool_call_id="c", artifact=object())])
    assert history.messages == HISTORY[:1]


def test_the_constructor_does_no_io_and_acreate_opens_off_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "chats.db"
    history = MemciChatMessageHistory("s", path)
    assert not path.exists()  # nothing opened yet

    async def run() -> list[BaseMessage]:
        opened = await MemciChatMessageHistory.acreate("s", path)
        assert path.exists()
        await opened.aadd_messages(HISTORY)
        return await history.aget_messages()

    assert asyncio.run(run()) == HISTORY


def test_messages_stored_by_an_older_memci_are_read() -> None:
    storage = memci.MemoryStorage()
    from memci.integrations.message_log import MessageLog

    MessageLog(storage).append(memci.formats.from_langchain(HISTORY))
    assert MemciChatMessageHistory("s", storage=storage).messages == HISTORY


# ---- trim_messages through the migration guide's mapping ------------------------------------------


def per_block_counter(messages: list[BaseMessage]) -> int:
    """A LangChain token counter that counts a message's text blocks one by one (3 per message,
    1 per word, 2 per block), as counters that bill blocks do."""
    total = 0
    for m in messages:
        total += 3
        if isinstance(m.content, str):
            total += len(m.content.split())
        else:
            total += sum(2 + len(str(block.get("text", "")).split()) for block in m.content if isinstance(block, dict))
    return total


@pytest.mark.parametrize("strategy", ["first", "last"])
@pytest.mark.parametrize("budget", [8, 15, 22, 30, 40, 60])
def test_trim_to_tokens_keeps_what_trim_messages_keeps_on_block_content(strategy: str, budget: int) -> None:
    from langchain_core.messages import trim_messages

    messages: list[BaseMessage] = [
        SystemMessage("You are a terse agent."),
        HumanMessage("What is in the two reports?", id="q1"),
        AIMessage(
            [
                {"type": "text", "text": "The first report says sales rose."},
                {"type": "text", "text": "The second one agrees."},
            ],
            id="a1",
        ),
        HumanMessage([{"type": "text", "text": "And the costs?"}], id="q2"),
        AIMessage("Costs fell by a tenth.", id="a2"),
    ]
    converted = memci.formats.from_langchain(messages)
    assert converted[2]["content"] == [
        {"type": "text", "text": "The first report says sales rose."},
        {"type": "text", "text": "The second one agrees."},
    ]  # blocks stay blocks; a counter reading them sees what LangChain's sees
    keep_system = strategy == "last"  # LangChain takes include_system with "last" only
    native = trim_messages(
        messages, max_tokens=budget, token_counter=per_block_counter, strategy=strategy, include_system=keep_system
    )
    arr = memci.MessageArray(converted)
    arr.trim_to_tokens(
        budget,
        strategy=strategy,
        keep_system=keep_system,
        start_on=None,
        counter=lambda m: per_block_counter(memci.formats.to_langchain([m])),
    )
    assert memci.formats.to_langchain(arr.messages()) == native


# ---- ContextHook as a create_agent middleware ------------------------------------------------------


def test_the_context_hook_middleware_keeps_checkpoints_small_and_recalls_per_thread() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore
    from memci.integrations.langchain import MemciContextHookMiddleware

    store, saver = InMemoryStore(), InMemorySaver()
    recall = AIMessage(content="", tool_calls=[{"name": "recall_page", "args": {"page_index": 1}, "id": "r1"}])
    fake = model([AIMessage("Noted."), AIMessage("Noted."), AIMessage("Noted."), recall, AIMessage("It was alpha.")])
    middleware = MemciContextHookMiddleware(active_pages=1)
    agent = create_agent(fake, [], middleware=[middleware], checkpointer=saver, store=store)
    ada, bob = {"configurable": {"thread_id": "ada@example.com"}}, {"configurable": {"thread_id": "bob"}}
    agent.invoke({"messages": [HumanMessage("The code word is alpha.")]}, ada)
    agent.invoke({"messages": [HumanMessage("Bob's word is omega.")]}, bob)
    agent.invoke({"messages": [HumanMessage("The next one is beta.")]}, ada)
    state = agent.invoke({"messages": [HumanMessage("What was the first code word?")]}, ada)
    assert state["messages"][-1].content == "It was alpha."
    assert len(state["messages"]) <= 3  # only what arrived since the last model call
    answer = fake.sent[-1][-1]
    assert isinstance(answer, ToolMessage)
    assert "The code word is alpha." in str(answer.content)
    assert all("omega" not in str(m.content) for sent in fake.sent[2:] for m in sent)  # Bob's stays Bob's
    ctx = middleware.hook.context(state, store, "ada@example.com")
    assert {e.index: e.recall_count for e in ctx.contents}[1] == 1  # the recall, saved


def test_the_context_hook_middleware_refuses_both_a_hook_and_options() -> None:
    from memci.integrations.langchain import MemciContextHookMiddleware
    from memci.integrations.langgraph import ContextHook

    with pytest.raises(memci.InvalidOperationError, match="not both"):
        MemciContextHookMiddleware(ContextHook(), active_pages=2)
