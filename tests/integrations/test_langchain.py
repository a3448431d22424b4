"""memci in LangChain v1, with the real langchain and langchain-core and their fake chat model,
offline: the trim middleware on ``create_agent`` (every model call within budget, tool groups
whole, sync and async, the state keeping everything), the context middleware (the model reads the
paged window and recalls a page through the agent's tool), and the chat history (sync and async,
many sessions in one file, concurrent writers, RunnableWithMessageHistory, Redis). The docs page's
examples run in tests/test_docs.py."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import memci
import pytest

pytest.importorskip("langchain.agents")
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
