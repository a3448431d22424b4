"""memci.integrations.openai_agents.MemciSession with the real Agents SDK, offline.

The SDK's own session tests run an agent on a scripted model through ``Runner.run``, ``run_sync``
and ``run_streamed`` with a session, then read the session back; so do these, with a scripted
model of our own (``ScriptModel``, the SDK's ``Model`` interface) and with each scenario run on the
SDK's ``SQLiteSession`` too where it applies: the same assertions pass on both, which is what a
drop-in means.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("agents", reason="openai-agents is not installed (pip install 'memci[openai-agents]')")

import memci
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.memory import Session, SessionSettings
from agents.models.interface import Model
from agents.usage import Usage
from memci.integrations.openai_agents import MemciSession
from memci.storage.log import CONFLICTS
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

set_tracing_disabled(True)  # offline: no trace is exported

# ---- a scripted model --------------------------------------------------------------------------------


def reply(text: str, *, item_id: str = "msg") -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}", type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments)
    )


class ScriptModel(Model):
    """Answers each model call with the next scripted turn (a list of output items) and records
    the input it was given, streamed or not."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.inputs: list[list[Any]] = []
        self.response_id: str | None = None

    def enqueue(self, *turns: list[Any]) -> None:
        self.turns.extend(turns)

    def _next(self, input: str | list[TResponseInputItem]) -> list[Any]:
        self.inputs.append([{"role": "user", "content": input}] if isinstance(input, str) else list(input))
        if not self.turns:
            raise AssertionError("the model was called more often than scripted")
        return self.turns.pop(0)

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=self._next(input), usage=Usage(), response_id=self.response_id)

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        output = self._next(input)
        response = Response(
            id="resp",
            created_at=0,
            model="script",
            object="response",
            output=output,
            tool_choice="auto",
            tools=[],
            top_p=None,
            parallel_tool_calls=False,
            status="completed",
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)


def run_sync_in_thread(agent: Agent[Any], text: str, session: Session) -> Any:
    # run_sync needs a thread without a running loop; it runs on the thread's loop, closed after.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, text, session=session)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


async def run(method: str, agent: Agent[Any], text: str, session: Session) -> Any:
    if method == "run":
        return await Runner.run(agent, text, session=session)
    if method == "run_sync":
        return await asyncio.to_thread(run_sync_in_thread, agent, text, session)
    result = Runner.run_streamed(agent, text, session=session)
    async for _ in result.stream_events():
        pass
    return result


# ---- the sessions compared ----------------------------------------------------------------------------

SessionFactory = Callable[..., Session]


def memci_session(session_id: str, db_path: str | Path = ":memory:", **options: Any) -> Session:
    return MemciSession(session_id, db_path, **options)


def sqlite_session(session_id: str, db_path: str | Path = ":memory:", **options: Any) -> Session:
    return SQLiteSession(session_id, db_path, **options)


@pytest.fixture(params=[memci_session, sqlite_session], ids=["MemciSession", "SQLiteSession"])
def make_session(request: pytest.FixtureRequest) -> SessionFactory:
    return request.param  # type: ignore[no-any-return]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


WEATHER = [
    user("What's the weather in Paris?"),
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21°C."},
    assistant("It is sunny in Paris, 21°C."),
]


# ---- the SDK's session scenarios, on both ---------------------------------------------------------------


def test_memci_session_is_an_sdk_session() -> None:
    assert isinstance(MemciSession("s"), Session)


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
async def test_the_runner_reads_and_writes_the_session(
    method: str, make_session: SessionFactory, tmp_path: Path
) -> None:
    session = make_session("chat", tmp_path / "chat.db")
    model = ScriptModel([reply("San Francisco")], [reply("California")])
    agent = Agent(name="test", model=model)
    first = await run(method, agent, "What city is the Golden Gate Bridge in?", session)
    assert first.final_output == "San Francisco"
    second = await run(method, agent, "What state is it in?", session)
    assert second.final_output == "California"
    # The second model call was given the first turn, then the new question.
    sent = model.inputs[-1]
    assert [item.get("content") for item in sent if item.get("role") == "user"] == [
        "What city is the Golden Gate Bridge in?",
        "What state is it in?",
    ]
    stored = await session.get_items()
    assert [item.get("role") for item in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1]["content"][0]["text"] == "San Francisco"


async def test_a_tool_turn_is_stored_whole_and_in_order(make_session: SessionFactory) -> None:
    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}."

    session = make_session("tools")
    model = ScriptModel([call("get_weather", {"city": "Paris"}, "call_1")], [reply("It is sunny.")])
    agent = Agent(name="test", model=model, tools=[get_weather])
    result = await Runner.run(agent, "Weather in Paris?", session=session)
    assert result.final_output == "It is sunny."
    stored = await session.get_items()
    assert [item.get("type") or item.get("role") for item in stored] == [
        "user",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert stored[2]["output"] == "Sunny in Paris."
    assert stored[1]["call_id"] == stored[2]["call_id"] == "call_1"


# (limit, the index of the first item returned of the 4); None for none returned.
LIMITS = [(None, 0), (0, None), (1, 3), (2, 2), (3, 1), (4, 0), (5, 0), (9, 0), (-1, 0)]


@pytest.mark.parametrize(("limit", "first"), LIMITS)
async def test_get_items_limit_is_the_latest_n_in_order(
    make_session: SessionFactory, limit: int | None, first: int | None
) -> None:
    session = make_session("limits")
    await session.add_items(WEATHER[:1])
    await session.add_items(WEATHER[1:])
    assert await session.get_items(limit) == ([] if first is None else WEATHER[first:])


@pytest.mark.parametrize("settings", [SessionSettings(limit=2), {"limit": 2}], ids=["SessionSettings", "dict"])
async def test_the_settings_limit_is_the_default(make_session: SessionFactory, settings: Any) -> None:
    session = make_session("settings", session_settings=settings)
    await session.add_items(WEATHER)
    assert await session.get_items() == WEATHER[2:]
    assert await session.get_items(3) == WEATHER[1:]


async def test_pop_returns_the_newest_item_then_none(make_session: SessionFactory) -> None:
    session = make_session("pop")
    assert await session.pop_item() is None
    await session.add_items(WEATHER[:2])
    await session.add_items(WEATHER[2:])
    popped = [await session.pop_item() for _ in range(5)]
    assert popped == [*reversed(WEATHER), None]
    assert await session.get_items() == []
    await session.add_items(WEATHER[:1])
    assert await session.get_items() == WEATHER[:1]


async def test_pop_then_add_then_reopen(make_session: SessionFactory, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    session = make_session("undo", db)
    await session.add_items(WEATHER[:3])
    await session.add_items([assistant("first answer")])
    assert await session.pop_item() == assistant("first answer")
    assert await session.pop_item() == WEATHER[2]
    await session.add_items(WEATHER[2:])
    reopened = make_session("undo", db)
    assert await reopened.get_items() == WEATHER
    assert await reopened.pop_item() == WEATHER[-1]
    assert await session.get_items() == WEATHER[:-1]  # the first object sees the second's pop


async def test_clear_empties_one_session_only(make_session: SessionFactory, tmp_path: Path) -> None:
    db = tmp_path / "many.db"
    alice, bob = make_session("alice", db), make_session("bob", db)
    await alice.add_items(WEATHER)
    await bob.add_items([user("hi"), assistant("hello")])
    await alice.clear_session()
    assert await alice.get_items() == []
    assert await bob.get_items() == [user("hi"), assistant("hello")]
    assert await make_session("bob", db).get_items() == [user("hi"), assistant("hello")]
    await alice.add_items(WEATHER[:1])
    assert await make_session("alice", db).get_items() == WEATHER[:1]


async def test_in_memory_sessions_are_their_own(make_session: SessionFactory) -> None:
    first, second = make_session("same"), make_session("same")
    await first.add_items(WEATHER)
    assert await second.get_items() == []


async def test_the_runner_continues_a_reopened_session(make_session: SessionFactory, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    model = ScriptModel([reply("Nice to meet you, Ada.")], [reply("Your name is Ada.")])
    agent = Agent(name="test", model=model)
    await Runner.run(agent, "My name is Ada.", session=make_session("ada", db))
    result = await Runner.run(agent, "What is my name?", session=make_session("ada", db))
    assert result.final_output == "Your name is Ada."
    assert model.inputs[-1][0] == {"role": "user", "content": "My name is Ada."}


# ---- SQLiteSession as the reference model -------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
ITEM = st.one_of(
    st.builds(user, TEXT),
    st.builds(assistant, TEXT),
    st.builds(
        lambda call_id, name: {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}"},
        TEXT,
        TEXT,
    ),
    st.builds(
        lambda call_id, output: {"type": "function_call_output", "call_id": call_id, "output": output}, TEXT, TEXT
    ),
)
OPERATION = st.one_of(
    st.tuples(st.just("add"), st.lists(ITEM, max_size=3)),
    st.tuples(st.just("get"), st.none() | st.integers(-2, 6)),
    st.just(("pop",)),
    st.just(("clear",)),
    st.just(("reopen",)),
)


@settings(max_examples=60)
@given(st.lists(OPERATION, max_size=20))
def test_every_call_answers_as_sqlite_session_does(operations: list[tuple[Any, ...]]) -> None:
    async def play(folder: Path) -> None:
        db = folder / "both.db"
        sessions: list[Any] = [SQLiteSession("s", db), MemciSession("s", db)]
        for operation in operations:
            if operation[0] == "reopen":
                for session in sessions:
                    session.close()
                sessions = [SQLiteSession("s", db), MemciSession("s", db)]
                continue
            answers = []
            for session in sessions:
                if operation[0] == "add":
                    answers.append(await session.add_items(operation[1]))
                elif operation[0] == "get":
                    answers.append(await session.get_items(operation[1]))
                elif operation[0] == "pop":
                    answers.append(await session.pop_item())
                else:
                    answers.append(await session.clear_session())
            assert answers[0] == answers[1], operation
            reopened = MemciSession("s", db)  # what each call saved is what a new object loads
            assert await reopened.get_items() == await sessions[0].get_items()
            reopened.close()
        for session in sessions:
            session.close()

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(play(Path(folder)))


# ---- memci's own: exact round trips, budgets, stores ----------------------------------------------------


async def test_items_round_trip_exactly() -> None:
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]},
        {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "status": "completed"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "done"}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"role": "assistant", "content": "ünïcødé 東京", "extra": {"nested": [1, 2.5, True, None]}},
    ]
    session = MemciSession("exact")
    await session.add_items(items)
    got = await session.get_items()
    assert got == items
    assert [list(item) for item in got] == [list(item) for item in items]  # key order too
    got[0]["content"] = "mutated"
    assert await session.get_items() == items  # what was returned is a copy


async def test_a_value_that_is_not_json_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    session = MemciSession("bad", tmp_path / "chat.db")
    await session.add_items(WEATHER[:1])
    with pytest.raises(memci.InvalidMessageError, match=r"messages\[1\]\.item\.content"):
        await session.add_items([assistant("fine"), {"role": "user", "content": object()}])
    assert await session.get_items() == WEATHER[:1]
    assert await MemciSession("bad", tmp_path / "chat.db").get_items() == WEATHER[:1]


@pytest.mark.parametrize("paged", [False, True])
async def test_items_memci_cannot_read_are_kept_as_json(make_session: SessionFactory, paged: bool) -> None:
    # JSON the SDK's sessions store: a message without its role, a call without its call_id, an
    # unknown role. Kept verbatim; the readable items beside them stay readable (a budget counts them).
    odd = [{"type": "message", "content": "no role"}, {"type": "function_call", "name": "f"}, {"role": "nobody"}]
    options = {"paged": True} if paged else {}
    if paged and make_session is sqlite_session:
        pytest.skip("paged is memci's")
    session = make_session("odd", **options)
    await session.add_items([user("hi"), *odd, assistant("hello")])
    got = await session.get_items()
    assert [item for item in got if item.get("role") != "system"] == [user("hi"), *odd, assistant("hello")]
    assert await session.pop_item() == assistant("hello")
    assert await session.pop_item() == odd[-1]


@pytest.mark.parametrize("budget", range(0, 120, 7))
async def test_a_budget_never_splits_a_call_from_its_output(budget: int) -> None:
    session = MemciSession("budget", max_tokens=budget)
    history = [*WEATHER, user("And in Rome?"), *WEATHER[1:3], assistant("Also sunny.")]
    await session.add_items(history)
    sent = await session.get_items()
    assert sent == history[len(history) - len(sent) :]  # the newest items, as they were
    assert memci.validate_messages(sent).valid
    assert memci.tokens.count_messages(sent) <= budget
    fuller = await MemciSession("budget", max_tokens=budget + 200, storage=session.storage).get_items()
    assert len(fuller) >= len(sent)
    assert await session.get_items() == sent  # reading trims nothing stored
    assert len(await MemciSession("budget", storage=session.storage).get_items()) == len(history)


async def test_a_budget_cuts_in_blocks_and_grows_append_only_between_cuts() -> None:
    """With max_tokens (hysteresis by default), each read repeats the previous one and adds the
    new items, until the budget is passed; then one cut back to 60% of it. Popping and adding
    again is seen (the mirror is rebuilt)."""
    session = MemciSession("blocks", max_tokens=150)
    previous: list[Any] = []
    cuts = 0
    for i in range(30):
        await session.add_items([user(f"question {i} " * 3), assistant(f"answer {i} " * 3)])
        sent = await session.get_items()
        assert memci.tokens.count_messages(sent) <= 150
        if sent[: len(previous)] != previous:
            cuts += 1
            assert memci.tokens.count_messages(sent) <= 90
        previous = sent
    assert 2 <= cuts <= 10
    await session.pop_item()
    await session.add_items([assistant("replaced")])
    assert (await session.get_items())[-1] == assistant("replaced")
    plain = MemciSession("plain", max_tokens=150, low_water=None, storage=session.storage)
    assert memci.tokens.count_messages(await plain.get_items()) > 90  # the most that fits


def test_bad_options_are_named() -> None:
    with pytest.raises(memci.InvalidOperationError, match="low_water"):
        MemciSession("s", max_tokens=10, low_water=0)
    with pytest.raises(memci.InvalidOperationError, match="max_tokens"):
        MemciSession("s", max_tokens=-1)
    with pytest.raises(memci.InvalidOperationError, match="session_id"):
        MemciSession(42)  # type: ignore[arg-type]
    with pytest.raises(memci.InvalidOperationError, match="paged"):
        MemciSession("s").tools()


async def test_many_sessions_on_one_redis(redis_url: str) -> None:
    def on_redis(session_id: str) -> MemciSession:
        return MemciSession(session_id, storage=memci.RedisStorage(redis_url, prefix=f"test-agents:{session_id}:"))

    alice, bob = on_redis("alice"), on_redis("bob")
    await alice.add_items(WEATHER)
    await bob.add_items([user("hi")])
    assert await on_redis("alice").get_items() == WEATHER
    assert await on_redis("bob").pop_item() == user("hi")
    assert await bob.get_items() == []
    await alice.clear_session()
    assert await on_redis("alice").get_items() == []


@pytest.mark.parametrize("paged", [False, True])
async def test_an_async_store_works_too(tmp_path: Path, paged: bool) -> None:
    pytest.importorskip("aiosqlite")
    store = memci.AsyncSqliteStorage(tmp_path / "async.db", namespace="chat")
    session = MemciSession("chat", storage=store, paged=paged, active_pages=1)
    await session.add_items(WEATHER)
    await session.add_items([user("And in Rome?"), assistant("Rainy.")])
    assert await session.pop_item() == assistant("Rainy.")
    expected = await session.get_items()
    await store.close()
    # The same file and namespace, through the sync store a db_path session opens.
    assert await MemciSession("chat", tmp_path / "async.db", paged=paged).get_items() == expected
    assert expected[-1] == user("And in Rome?")
    if paged:
        assert "[page 1] What's the weather in Paris?" in expected[1]["content"]
    else:
        assert expected == [*WEATHER, user("And in Rome?")]


@pytest.mark.parametrize("paged", [False, True])
async def test_sdk_objects_are_stored_as_their_dump_and_bad_batches_change_nothing(paged: bool) -> None:
    session = MemciSession("objects", paged=paged)
    answer = reply("Hello.")
    await session.add_items([user("Hi"), answer])  # type: ignore[list-item]
    before = await session.get_items()
    assert before[-1] == answer.model_dump(mode="json", exclude_unset=True)
    with pytest.raises(memci.InvalidOperationError, match="list of items"):
        await session.add_items(user("not in a list"))  # type: ignore[arg-type]
    with pytest.raises(memci.InvalidMessageError, match=r"messages\[1\]"):
        await session.add_items([user("next"), {"role": "user", "content": float("nan")}])
    assert await session.get_items() == before


async def test_a_state_naming_a_missing_page_is_a_state_error(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    session = MemciSession("gone", db)
    await session.add_items(WEATHER[:2])
    await session.add_items(WEATHER[2:])
    session.close()
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM memci_pages WHERE namespace = 'gone' AND page_index = 1")
    with pytest.raises(memci.StateError, match="page 1"):
        await MemciSession("gone", db).get_items()


async def test_close_closes_only_the_store_the_session_opened(tmp_path: Path) -> None:
    owned = MemciSession("s", tmp_path / "owned.db")
    await owned.add_items(WEATHER)
    owned.close()
    with pytest.raises(memci.StorageError, match="closed"):
        await owned.get_items()
    given = memci.SqliteStorage(tmp_path / "given.db", namespace="s")
    session = MemciSession("s", storage=given)
    await session.add_items(WEATHER)
    session.close()
    assert given.load_state() is not None  # still open: the caller's to close
    given.close()


# ---- the paged mode --------------------------------------------------------------------------------------


def texts(items: list[Any]) -> str:
    return json.dumps(items, ensure_ascii=False)


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
async def test_the_agent_recalls_an_archived_turn_through_the_sdk(method: str, tmp_path: Path) -> None:
    db = tmp_path / "paged.db"
    session = MemciSession("paged", db, paged=True, active_pages=1)
    model = ScriptModel(
        [reply("Sunny in Paris.")],
        [reply("Rainy in Rome.")],
        [call("recall_page", {"page_index": 1}, "recall_1")],
        [reply("You first asked about Paris.")],
    )
    agent = Agent(name="test", model=model, tools=session.tools())
    for question in ["Weather in Paris?", "And in Rome?", "What did I ask first?"]:
        await run(method, agent, question, session)
    # Turn 3 was sent the contents page, not page 1 itself.
    third = model.inputs[2]
    assert "[page 1] Weather in Paris?" in texts(third)
    assert "Sunny in Paris." not in [item.get("content") for item in third]
    assert not any(item.get("content") == "Weather in Paris?" for item in third)
    # The SDK ran memci's recall_page; the model's next call had page 1 back, whole.
    output = next(item for item in model.inputs[3] if item.get("type") == "function_call_output")
    recalled = json.loads(output["output"])
    assert recalled["page"] == 1
    assert recalled["messages"][0] == {"content": "Weather in Paris?", "role": "user"}
    assert recalled["messages"][1]["content"][0]["text"] == "Sunny in Paris."
    # Saved: a new session object on the file sees the window, the recall counted.
    window = await MemciSession("paged", db, paged=True).get_items()
    assert "[page 1] Weather in Paris? (recalled 1x)" in texts(window)
    assert [item.get("type") for item in window[-3:]] == ["function_call", "function_call_output", "message"]


async def test_list_pages_through_the_sdk_and_a_refusal_never_raises() -> None:
    session = MemciSession("listing", paged=True, active_pages=1)
    await session.add_items([user("first question"), assistant("first answer")])
    await session.add_items([user("second question"), assistant("second answer")])
    model = ScriptModel(
        [call("list_pages", {"limit": 5}, "c1"), call("recall_page", {"page_index": 99}, "c2")],
        [reply("done")],
    )
    agent = Agent(name="test", model=model, tools=session.tools())
    await Runner.run(agent, "What pages are there?", session=session)
    sent = model.inputs[1]
    outputs = {item["call_id"]: item["output"] for item in sent if item.get("type") == "function_call_output"}
    # The SDK saved the new question before the model ran: page 3 opened, page 2 left the window.
    assert [listing["index"] for listing in json.loads(outputs["c1"])] == [2, 1]
    assert "page 99 does not exist" in outputs["c2"]


async def test_paged_limit_pop_and_clear(tmp_path: Path) -> None:
    session = MemciSession("ops", tmp_path / "ops.db", paged=True, active_pages=2)
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.add_items(WEATHER)
    await session.add_items([user("And in Rome?"), assistant("Rainy.")])
    window = await session.get_items()
    assert window[1:] == [*WEATHER, user("And in Rome?"), assistant("Rainy.")]  # after the recall note
    assert window[0]["role"] == "system"
    assert await session.get_items(limit=1) == [window[0], assistant("Rainy.")]
    assert await session.pop_item() == assistant("Rainy.")
    assert await MemciSession("ops", tmp_path / "ops.db", paged=True).get_items() == window[:-1]
    await session.clear_session()
    assert await session.get_items() == []
    assert await MemciSession("ops", tmp_path / "ops.db", paged=True).get_items() == []


async def test_a_session_id_keeps_its_mode(tmp_path: Path) -> None:
    await MemciSession("mode", tmp_path / "m.db").add_items(WEATHER)
    with pytest.raises(memci.StateError, match="full-history"):
        await MemciSession("mode", tmp_path / "m.db", paged=True).get_items()
    await MemciSession("paged", tmp_path / "m.db", paged=True).add_items(WEATHER)
    with pytest.raises(memci.StateError, match="paged=True"):
        await MemciSession("paged", tmp_path / "m.db").get_items()


async def test_two_objects_racing_on_one_session_lose_no_item(tmp_path: Path) -> None:
    db = tmp_path / "race.db"
    first, second = MemciSession("race", db), MemciSession("race", db)

    async def writer(session: MemciSession, name: str) -> None:
        for number in range(15):
            await session.add_items([user(f"{name} {number}")])

    await asyncio.gather(writer(first, "a"), writer(second, "b"))
    stored = [item["content"] for item in await MemciSession("race", db).get_items()]
    assert sorted(stored) == sorted([f"a {n}" for n in range(15)] + [f"b {n}" for n in range(15)])
    assert [text for text in stored if text.startswith("a")] == [f"a {n}" for n in range(15)]  # each in order
    assert await first.get_items() == await second.get_items()


class RacedStore(memci.MemoryStorage):
    """A memory store that runs ``rival`` (another writer's whole call) just before the next save."""

    rival: Callable[[], None] | None = None

    def save_state(self, state: dict[str, Any], pages: Any = ()) -> None:
        rival, self.rival = self.rival, None
        if rival is not None:
            rival()
        super().save_state(state, pages)


@pytest.mark.parametrize("paged", [False, True])
async def test_a_save_that_lost_a_race_is_redone_on_the_winners_history(paged: bool) -> None:
    store = RacedStore()
    mine, theirs = MemciSession("s", storage=store, paged=paged), MemciSession("s", storage=store, paged=paged)
    await mine.add_items([user("first")])
    # Between this call's read and its save, the other object adds an item (on a loop of its own).
    store.rival = lambda: asyncio.run(theirs.add_items([user("theirs")]))
    await mine.add_items([user("mine")])
    assert store.rival is None  # the race happened
    expected = [user("first"), user("theirs"), user("mine")]
    for session in (mine, theirs, MemciSession("s", storage=store, paged=paged)):
        got = await session.get_items()
        assert [item for item in got if item.get("role") != "system"] == expected


class AlwaysBeaten(memci.MemoryStorage):
    """A store every save of which another writer has beaten."""

    saves = 0

    def save_state(self, state: dict[str, Any], pages: Any = ()) -> None:
        self.saves += 1
        raise memci.ConflictError("beaten", revision=1, stored_revision=1)


async def test_a_session_beaten_at_every_save_gives_up_with_the_conflict() -> None:
    store = AlwaysBeaten()
    session = MemciSession("s", storage=store)
    with pytest.raises(memci.ConflictError):
        await session.add_items(WEATHER)
    assert store.saves == CONFLICTS.retries + 1  # the call and its retries, by the page log's one policy
    assert await session.get_items() == []


async def test_a_limit_that_is_not_an_int_is_named() -> None:
    with pytest.raises(memci.InvalidOperationError, match="limit must be an int"):
        await MemciSession("s").get_items("3")  # type: ignore[arg-type]


# ---- the SDK's session contract: threads and loops, wrappers, close, cancellation, compaction ---------


def test_one_session_serves_threads_each_running_its_own_loop(make_session: SessionFactory, tmp_path: Path) -> None:
    # Runner.run_sync from several threads at once: each thread runs the session's calls on a loop
    # of its own. The calls must neither fail nor wait on one another's loop.
    session = make_session("threads", tmp_path / "threads.db")
    model = ScriptModel(*[[reply(f"answer {n}")] for n in range(8)])
    agent = Agent(name="test", model=model)
    start = threading.Barrier(8)

    def turn(number: int) -> Any:
        start.wait()
        return run_sync_in_thread(agent, f"question {number}", session)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = [future.result(timeout=120) for future in [pool.submit(turn, n) for n in range(8)]]
    assert sorted(result.final_output for result in results) == sorted(f"answer {n}" for n in range(8))
    stored = asyncio.run(session.get_items())
    assert sorted(item["content"] for item in stored if item.get("role") == "user") == sorted(
        f"question {n}" for n in range(8)
    )
    assert len(stored) == 16


def test_adds_racing_from_many_loops_lose_nothing(make_session: SessionFactory) -> None:
    session = make_session("loops")
    start = threading.Barrier(6)

    def writer(name: str) -> None:
        start.wait()
        for number in range(10):
            asyncio.run(session.add_items([user(f"{name} {number}")]))

    with ThreadPoolExecutor(max_workers=6) as pool:
        for future in [pool.submit(writer, name) for name in "abcdef"]:
            future.result(timeout=120)
    stored = [item["content"] for item in asyncio.run(session.get_items())]
    assert sorted(stored) == sorted(f"{name} {n}" for name in "abcdef" for n in range(10))
    for name in "abcdef":  # each writer's items in its order
        assert [text for text in stored if text.startswith(name)] == [f"{name} {n}" for n in range(10)]


OPAQUE = [
    {"__enc__": 1, "v": 1, "kid": "hkdf-v1", "payload": "gAAAAABk..."},  # EncryptedSession's envelope
    {"content": "no role, no type"},
    {"type": "memci.opaque", "item": {"a": 1}},  # the envelope's own type, as an item of its own
    {"type": "some_future_item", "data": [1, None]},
]


async def test_any_json_item_is_stored_verbatim(make_session: SessionFactory, tmp_path: Path) -> None:
    db = tmp_path / "opaque.db"
    session = make_session("opaque", db)
    await session.add_items([user("hi"), *OPAQUE])
    assert await session.get_items() == [user("hi"), *OPAQUE]
    assert await session.get_items(2) == OPAQUE[2:]
    assert await make_session("opaque", db).get_items() == [user("hi"), *OPAQUE]
    assert await session.pop_item() == OPAQUE[-1]
    assert await session.pop_item() == OPAQUE[-2]
    assert await session.get_items() == [user("hi"), *OPAQUE[:2]]


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
async def test_encrypted_session_wraps_it(method: str, make_session: SessionFactory, tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from agents.extensions.memory.encrypt_session import EncryptedSession

    db = tmp_path / "encrypted.db"
    backend = make_session("secret", db)
    session = EncryptedSession("secret", backend, encryption_key="a key", ttl=600)
    model = ScriptModel([reply("Noted, Ada.")], [reply("You are Ada.")])
    agent = Agent(name="test", model=model)
    await run(method, agent, "My name is Ada.", session)
    result = await run(method, agent, "Who am I?", session)
    assert result.final_output == "You are Ada."
    assert model.inputs[-1][0] == {"role": "user", "content": "My name is Ada."}
    stored = await make_session("secret", db).get_items()
    assert len(stored) == 4
    said = ("My name is Ada.", "Noted, Ada.", "Who am I?", "You are Ada.")  # "Ada" alone turns up in base64
    assert all(item.get("__enc__") == 1 and not any(text in json.dumps(item) for text in said) for item in stored)
    assert [item.get("role") for item in await session.get_items()] == ["user", "assistant", "user", "assistant"]


async def test_a_closed_session_raises_runtime_error(make_session: SessionFactory, tmp_path: Path) -> None:
    session = make_session("closed", tmp_path / "closed.db")
    await session.add_items(WEATHER)
    session.close()
    for call in (
        lambda: session.add_items([]),
        lambda: session.add_items(WEATHER[:1]),
        session.get_items,
        session.pop_item,
        session.clear_session,
    ):
        with pytest.raises(RuntimeError, match="is closed"):
            await call()


def async_sqlite_session(session_id: str, db_path: str | Path = ":memory:") -> Any:
    pytest.importorskip("aiosqlite")
    from agents.extensions.memory import AsyncSQLiteSession

    return AsyncSQLiteSession(session_id, db_path)


@pytest.mark.parametrize("make", [memci_session, async_sqlite_session], ids=["MemciSession", "AsyncSQLiteSession"])
async def test_close_can_be_awaited_as_the_sdks_async_sessions_close(make: SessionFactory, tmp_path: Path) -> None:
    # Code written for AsyncSQLiteSession awaits close(), twice at once and again; it runs unchanged.
    db = tmp_path / "awaited.db"
    session = make("awaited", db)
    await session.add_items(WEATHER[:1])
    await asyncio.gather(session.close(), session.close())  # type: ignore[attr-defined]
    await session.close()  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="is closed"):
        await session.get_items()
    reopened = make("awaited", db)
    assert await reopened.get_items() == WEATHER[:1]  # the close kept what was added
    await reopened.close()  # type: ignore[attr-defined]


def test_close_without_awaiting_closes_and_warns_of_nothing(tmp_path: Path) -> None:
    # SQLiteSession's callers close without awaiting: the close is done on return and leaves no
    # un-awaited coroutine behind (warnings are errors in this suite).
    session = MemciSession("sync", tmp_path / "sync.db")
    session.close()
    with pytest.raises(memci.SessionClosedError, match="MemciSession is closed"):
        asyncio.run(session.get_items())
    with pytest.raises(memci.StorageError, match="closed"):
        session.storage.load_state()


class PausedStore(memci.MemoryStorage):
    """A memory store whose next save waits until ``resume`` is set (``saving`` tells it began)."""

    def __init__(self) -> None:
        super().__init__()
        self.saving, self.resume = threading.Event(), threading.Event()
        self.pause = False

    def save_state(self, state: dict[str, Any], pages: Any = ()) -> None:
        if self.pause:
            self.pause = False
            self.saving.set()
            assert self.resume.wait(timeout=60)
        super().save_state(state, pages)


@pytest.mark.parametrize("operation", ["add", "pop", "clear"])
async def test_a_cancelled_write_settles_before_the_cancellation_is_raised(operation: str) -> None:
    store = PausedStore()
    session = MemciSession("cancel", storage=store)
    await session.add_items(WEATHER[:2])
    store.pause = True
    calls = {"add": lambda: session.add_items(WEATHER[2:]), "pop": session.pop_item, "clear": session.clear_session}
    task = asyncio.ensure_future(calls[operation]())
    assert await asyncio.to_thread(store.saving.wait, 60)
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    assert not task.done()  # the write is still under way: the caller has not heard yet
    store.resume.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    expected = {"add": WEATHER, "pop": WEATHER[:1], "clear": []}[operation]
    # What the caller finds once cancelled is final: nothing lands afterwards.
    assert await session.get_items() == expected
    assert await MemciSession("cancel", storage=store).get_items() == expected


class CompactClient:
    """The OpenAI client's ``responses.compact``, offline: records its calls, returns one
    compaction item."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.responses = self

    async def compact(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return SimpleNamespace(output=[{"type": "compaction", "id": "cmp_1", "encrypted_content": "summary"}])


def compacting(backend: Session, **options: Any) -> tuple[Any, CompactClient]:
    """The SDK's ``OpenAIResponsesCompactionSession`` over ``backend``, on an offline client."""
    from agents.memory import OpenAIResponsesCompactionSession

    client = CompactClient()
    client_as_sdk: Any = client
    return OpenAIResponsesCompactionSession(backend.session_id, backend, client=client_as_sdk, **options), client


SUMMARY = {"type": "compaction", "id": "cmp_1", "encrypted_content": "summary"}


async def test_automatic_compaction_replaces_the_suffix_beyond_the_rollback_budget(
    make_session: SessionFactory, tmp_path: Path
) -> None:
    backend = make_session("compact", tmp_path / "compact.db")
    await backend.add_items([user("q") if n % 2 == 0 else assistant("a") for n in range(6)])
    # The history is over the rollback budget: only the session's own atomic replacement of what the
    # model was sent can compact it (a session without one raises "exceeds max_rollback_items").
    session, client = compacting(backend, should_trigger_compaction=lambda _: True, max_rollback_items=2)
    model = ScriptModel([reply("done")])
    model.response_id = "resp_1"  # compaction follows a response the API would have stored
    await Runner.run(Agent(name="test", model=model), "continue", session=session)
    assert client.calls == [{"model": "gpt-4.1", "previous_response_id": "resp_1"}]
    assert await backend.get_items() == [SUMMARY]


async def test_automatic_compaction_of_a_partial_window(make_session: SessionFactory, tmp_path: Path) -> None:
    from agents import RunConfig

    backend = make_session("partial", tmp_path / "partial.db")
    history = [user(f"q{n}") if n % 2 == 0 else assistant(f"a{n}") for n in range(10)]
    await backend.add_items(history)
    session, client = compacting(backend, should_trigger_compaction=lambda _: True)
    model = ScriptModel([reply("done")])
    model.response_id = "resp_1"
    # The model is sent the newest 3 items: only that suffix (from its first user message) is compacted.
    run_config = RunConfig(session_settings=SessionSettings(limit=3))
    await Runner.run(Agent(name="test", model=model), "continue", session=session, run_config=run_config)
    assert len(client.calls) == 1
    assert [item.get("content") for item in client.calls[0]["input"]][:3] == ["q8", "a9", "continue"]
    assert await backend.get_items() == [*history[:8], SUMMARY]


async def test_manual_compaction_replaces_the_whole_history(make_session: SessionFactory, tmp_path: Path) -> None:
    db = tmp_path / "manual.db"
    backend = make_session("manual", db)
    await backend.add_items(WEATHER)
    session, _ = compacting(backend, compaction_mode="input")
    await session.run_compaction({"force": True})
    assert await backend.get_items() == [SUMMARY]
    assert await make_session("manual", db).get_items() == [SUMMARY]


class NamedSession(MemciSession):
    """A subclass that adds nothing: it stores and reads as ``MemciSession`` does."""


class ShoutingSession(MemciSession):
    """A subclass that transforms what it returns."""

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return [{**item, "content": str(item.get("content", "")).upper()} for item in await super().get_items(limit)]


async def test_a_closed_subclass_names_itself(tmp_path: Path) -> None:
    session = NamedSession("named", tmp_path / "named.db")
    session.close()
    with pytest.raises(memci.SessionClosedError, match=r"^NamedSession is closed"):
        await session.get_items()
    assert repr(session).startswith("NamedSession('named', ")


async def test_a_subclass_keeping_the_reads_and_writes_compacts(tmp_path: Path) -> None:
    backend = NamedSession("named", tmp_path / "named.db")
    await backend.add_items([user("q") if n % 2 == 0 else assistant("a") for n in range(6)])
    session, client = compacting(backend, should_trigger_compaction=lambda _: True, max_rollback_items=2)
    model = ScriptModel([reply("done")])
    model.response_id = "resp_1"
    await Runner.run(Agent(name="test", model=model), "continue", session=session)
    assert len(client.calls) == 1
    assert await backend.get_items() == [SUMMARY]


async def test_a_subclass_transforming_its_reads_offers_no_compaction_hooks(tmp_path: Path) -> None:
    # The hooks read and replace the stored items, bypassing the subclass's get_items.
    backend = ShoutingSession("shout", tmp_path / "shout.db")
    await backend.add_items(WEATHER)
    assert await backend._get_compaction_snapshot(2) is None
    assert not await backend._atomic_replace_items([SUMMARY])
    assert len(await MemciSession("shout", tmp_path / "shout.db").get_items()) == len(WEATHER)


# ---- a state costs what it holds ---------------------------------------------------------------------------


class _CountingStorage(memci.MemoryStorage):
    """A memory store that counts its page reads."""

    reads = 0

    def get_page(self, index: int) -> dict[str, Any] | None:
        self.reads += 1
        return super().get_page(index)


@pytest.mark.parametrize(
    ("runs", "words"),
    [
        ([[1, 10**7, 1]], "names page 2, which the store does not hold"),
        ([[2, 1, 1]], r"state\['runs'\]\[0\] is a list, expected \[first, last, kept\]"),
        ([[1, 1, 1], [1, 1, 1]], r"state\['runs'\]\[1\]"),
        ([[1, 1, 5]], "keeps 5 items of page 1, which holds fewer"),
        ([[1, 10**7 + 1, 1]], r"state\['runs'\]\[0\]"),
        ("runs", r"state\['runs'\] is 'runs'"),
    ],
)
async def test_a_small_session_state_claiming_many_pages_reads_none_of_them(runs: Any, words: str) -> None:
    storage = _CountingStorage()
    session = MemciSession("claims", storage=storage)
    await session.add_items([user("one")])  # page 1, the only page the store holds
    state = storage.load_state()
    assert state is not None
    state.update(revision=state["revision"] + 1, pages_through=10**7, runs=runs)
    storage.save_state(state)
    storage.reads = 0
    with pytest.raises(memci.StateError, match=words):
        await MemciSession("claims", storage=storage).get_items()
    assert storage.reads <= 1  # it read 10**7 pages before its StateError


async def test_search_pages_through_the_sdk() -> None:
    session = MemciSession("search", paged=True, active_pages=1)
    await session.add_items([user("The code word is alpha."), assistant("Noted.")])
    await session.add_items([user("The next one is beta."), assistant("Noted.")])
    assert [tool.name for tool in session.tools()] == ["recall_page", "list_pages", "search_pages"]
    model = ScriptModel([call("search_pages", {"query": "code word alpha"}, "c1")], [reply("done")])
    agent = Agent(name="test", model=model, tools=session.tools())
    await Runner.run(agent, "Which was the first code word?", session=session)
    outputs = {
        item["call_id"]: item["output"] for item in model.inputs[1] if item.get("type") == "function_call_output"
    }
    assert outputs["c1"].startswith("[page 1] The code word is alpha.")
