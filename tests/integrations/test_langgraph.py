"""memci in LangGraph, with the real langgraph, a fake chat model and InMemorySaver, offline: the
trim hook of a prebuilt agent (every model call within budget, tool groups whole, the state
keeping everything), the context system carried in graph state (small checkpoints, recall through
the agent's tool, a resumed thread). LangGraphStorage runs the shared store contract in
tests/storage (kind ``langgraph``); the docs page's examples run in tests/test_docs.py."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import memci
import pytest

pytest.importorskip("langgraph")
from factories import run_together
from fake_chat import model  # needs langchain-core
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from langgraph.prebuilt import create_react_agent
from langgraph.store.memory import InMemoryStore
from memci.integrations.langgraph import ContextHook, ContextState, LangGraphStorage, newest_state, trim_hook
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
# create_react_agent moved to langchain.agents in LangGraph 1.0 and warns; it is what the issue names.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21C. " * 3


def call(i: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "weather", "args": {"city": f"City{i}"}, "id": f"c{i}"}])


def script(turns: int) -> Iterator[AIMessage]:
    """Every other turn calls the tool before answering."""
    for i in range(turns):
        if i % 2 == 0:
            yield call(i)
        yield AIMessage(content=f"Answer {i}: " + "it is fine. " * (i % 4 + 1))


def history_so_far(history: list[BaseMessage], sent: list[BaseMessage]) -> list[BaseMessage]:
    """The thread's messages up to the last one ``sent`` (what the state held at that call)."""
    position = [m.id for m in history].index(sent[-1].id)
    return history[: position + 1]


def as_dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return memci.formats.from_langchain(messages)


# ---- the trim hook ------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [40, 90, 150, 400])
def test_every_model_call_is_trimmed_exactly_and_keeps_tool_groups(budget: int) -> None:
    fake = model(list(script(8)))
    agent = create_react_agent(fake, [weather], pre_model_hook=trim_hook(budget), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for i in range(8):
        state = agent.invoke({"messages": [("user", f"Question {i}: " + "tell me more. " * (i % 3 + 1))]}, config)
    history = state["messages"]
    assert len(history) == 8 * 2 + 4 * 2  # the state keeps everything
    for sent in fake.sent:
        dicts = as_dicts(sent)
        assert memci.validate_messages(dicts).valid  # never a tool result without its call
        if memci.tokens.count_messages(dicts) > budget:  # only the newest tool group, alone
            assert not memci.validate_messages(dicts[1:]).valid or len(sent) == 1
            assert sent[-1].id == history_so_far(history, sent)[-1].id
        ids = [m.id for m in sent]
        assert ids == [m.id for m in history[: len(history)] if m.id in ids]  # the graph's own objects, in order


def test_the_hook_cuts_in_blocks_and_sends_an_append_only_window_between_cuts() -> None:
    hook, plain = trim_hook(600), trim_hook(600, low_water=None)
    messages = memci.formats.to_langchain([{"role": "system", "content": "Be brief."}])
    previous: list[Any] = []
    cuts = 0
    for i in range(40):
        messages += memci.formats.to_langchain(
            [{"role": "user", "content": f"q{i} " * 10}, {"role": "assistant", "content": f"a{i} " * 10}]
        )
        for k, m in enumerate(messages):
            m.id = f"m{k}"
        sent = hook({"messages": messages})["llm_input_messages"]
        assert memci.tokens.count_messages(as_dicts(sent)) <= 600
        assert sent[0] is messages[0]
        if sent[: len(previous)] != previous:
            cuts += 1
            assert memci.tokens.count_messages(as_dicts(sent)) <= 360  # back to 60% of the budget
        previous = sent
        assert len(plain({"messages": messages})["llm_input_messages"]) >= len(sent)
    assert 3 <= cuts <= 15


def test_the_hook_keeps_the_system_message_and_starts_on_a_user_message() -> None:
    hook = trim_hook(60)
    messages = memci.formats.to_langchain(
        [{"role": "system", "content": "Be brief."}]
        + [
            m
            for i in range(10)
            for m in ({"role": "user", "content": f"q{i} " * 8}, {"role": "assistant", "content": f"a{i}"})
        ]
    )
    for i, m in enumerate(messages):
        m.id = f"m{i}"
    sent = hook({"messages": messages})["llm_input_messages"]
    assert sent[0].content == "Be brief."
    assert sent[1].type == "human"
    assert [m.id for m in sent[1:]] == [m.id for m in messages[len(messages) - len(sent) + 1 :]]
    assert memci.tokens.count_messages(as_dicts(sent)) <= 60
    longer = hook({"messages": [*messages, *memci.formats.to_langchain([{"role": "user", "content": "again"}])]})
    assert longer["llm_input_messages"][-1].content == "again"  # the mirror grew with the thread


def test_the_hook_refuses_bad_options() -> None:
    with pytest.raises(memci.InvalidOperationError, match="max_tokens"):
        trim_hook(-1)
    with pytest.raises(memci.InvalidOperationError, match="p50k"):
        trim_hook(10, encoding="p50k_base")


# ---- the context system in graph state ----------------------------------------------------------


def checkpoint_bytes(saver: InMemorySaver, thread: str) -> int:
    checkpoint = saver.get_tuple({"configurable": {"thread_id": thread}})
    assert checkpoint is not None
    return len(json.dumps(checkpoint.checkpoint["channel_values"], default=str))


def test_the_context_hook_keeps_checkpoints_small_and_the_archive_in_the_store() -> None:
    hook = ContextHook(active_pages=2)
    store, saver = InMemoryStore(), InMemorySaver()
    fake = model([AIMessage(content=f"Noted fact {i}. " * 20) for i in range(40)])
    agent = create_react_agent(
        fake, [weather, *hook.tools()], pre_model_hook=hook, state_schema=ContextState, checkpointer=saver, store=store
    )
    plain_saver = InMemorySaver()
    plain = create_react_agent(
        model([AIMessage(content=f"Noted fact {i}. " * 20) for i in range(40)]), [weather], checkpointer=plain_saver
    )
    sizes, plain_sizes = [], []
    for i in range(30):
        question = {"messages": [("user", f"Remember fact {i}: " + "detail " * 30)]}
        agent.invoke(question, {"configurable": {"thread_id": "ctx"}})
        plain.invoke(question, {"configurable": {"thread_id": "plain"}})
        sizes.append(checkpoint_bytes(saver, "ctx"))
        plain_sizes.append(checkpoint_bytes(plain_saver, "plain"))
    assert plain_sizes[-1] > 4 * plain_sizes[4]  # the whole history, growing with the thread
    # The window, the contents page (capped) and a few counts per archived page: once the contents
    # page is full, a turn adds a fifth of what it adds to the whole history, on these short turns.
    assert (sizes[-1] - sizes[-11]) * 5 < plain_sizes[-1] - plain_sizes[-11]
    assert sizes[-1] < plain_sizes[-1]
    storage = LangGraphStorage(store, ("memci", "ctx"))
    assert len(storage.page_indices()) >= 25  # archived turns live in the graph's store
    window = [str(m.content) for m in fake.sent[-1]]
    assert any("[page 27] Remember fact 26" in text for text in window)  # a recent page, listed
    assert not any(text.startswith("Remember fact 26") for text in window)  # and out of the window
    state = agent.get_state({"configurable": {"thread_id": "ctx"}}).values
    assert hook.context(state, store, "ctx").search("fact 0")[0].page_index == 1  # the oldest, found


def test_the_agent_recalls_a_page_and_a_resumed_thread_continues() -> None:
    hook = ContextHook(active_pages=1)
    store, saver = InMemoryStore(), InMemorySaver()
    recall = AIMessage(content="", tool_calls=[{"name": "recall_page", "args": {"page_index": 1}, "id": "r1"}])
    steps = [
        AIMessage(content="Noted alpha."),
        AIMessage(content="Noted beta."),
        recall,
        AIMessage(content="It was alpha."),
    ]
    fake = model(steps)
    agent = create_react_agent(
        fake, hook.tools(), pre_model_hook=hook, state_schema=ContextState, checkpointer=saver, store=store
    )
    config = {"configurable": {"thread_id": "r"}}
    agent.invoke({"messages": [("user", "The code word is alpha.")]}, config)
    agent.invoke({"messages": [("user", "The next one is beta.")]}, config)
    # A new agent on the same checkpointer and store: the thread resumes where it was.
    again = create_react_agent(
        fake, hook.tools(), pre_model_hook=hook, state_schema=ContextState, checkpointer=saver, store=store
    )
    result = again.invoke({"messages": [("user", "What was the first code word?")]}, config)
    assert result["messages"][-1].content == "It was alpha."
    answer = fake.sent[-1][-1]
    assert answer.type == "tool"
    assert "The code word is alpha." in str(answer.content)
    ctx = hook.context(result, store, "r")
    assert ctx.search("alpha")[0].page_index == 1


def test_the_agent_searches_the_archive() -> None:
    hook = ContextHook(active_pages=1)
    assert [tool.name for tool in hook.tools()] == ["recall_page", "list_pages", "search_pages"]
    store, saver = InMemoryStore(), InMemorySaver()
    search = AIMessage(content="", tool_calls=[{"name": "search_pages", "args": {"query": "code word"}, "id": "s1"}])
    fake = model([AIMessage(content="Noted alpha."), AIMessage(content="Noted beta."), search, AIMessage("alpha")])
    agent = create_react_agent(
        fake, hook.tools(), pre_model_hook=hook, state_schema=ContextState, checkpointer=saver, store=store
    )
    config = {"configurable": {"thread_id": "s"}}
    for text in ["The code word is alpha.", "The weather is fine.", "What was the code word?"]:
        result = agent.invoke({"messages": [("user", text)]}, config)
    answer = fake.sent[-1][-1]
    assert answer.type == "tool"
    assert str(answer.content).startswith("[page 1] The code word is alpha.")
    ctx = hook.context(result, store, "s")
    assert [(e.index, e.recall_count) for e in ctx.contents if e.index == 1] == [(1, 1)], "the search was saved"


# ---- threads kept apart, any thread id ----------------------------------------------------------

THREAD_IDS = ["alice", "alice@example.com", "a.b.c", "ünï.cødé 漢字", "%2E", ".", "x\x00y", ""]


def test_thread_labels_are_valid_and_one_to_one() -> None:
    from memci.integrations.langgraph import thread_label

    labels = [thread_label(t) for t in THREAD_IDS]
    assert len(set(labels)) == len(labels)
    assert all(label and "." not in label and "\x00" not in label for label in labels)
    assert thread_label("alice") == "alice"  # ids without those characters keep their label


def test_the_context_hook_keeps_interleaved_threads_apart_whatever_their_ids() -> None:
    hook = ContextHook(active_pages=1)
    store, saver = InMemoryStore(), InMemorySaver()
    fake = model([AIMessage(content=f"Noted {i}.") for i in range(3 * len(THREAD_IDS))])
    agent = create_react_agent(
        fake, hook.tools(), pre_model_hook=hook, state_schema=ContextState, checkpointer=saver, store=store
    )
    order = [t for _ in range(3) for t in THREAD_IDS]
    for turn, thread in enumerate(order):
        agent.invoke({"messages": [("user", f"<{thread}> secret {turn}")]}, {"configurable": {"thread_id": thread}})
    for sent, thread in zip(fake.sent, order, strict=True):
        text = " ".join(str(m.content) for m in sent)
        assert f"<{thread}>" in text
        assert all(f"<{other}>" not in text for other in THREAD_IDS if other != thread)


def test_the_trim_hook_keeps_concurrent_threads_apart() -> None:
    from langchain_core.runnables import RunnableLambda

    hook = RunnableLambda(trim_hook(50))

    def run(thread: int) -> None:
        for turn in range(30):
            # Every thread uses the same message ids, with its own texts.
            texts = [f"t{thread} " * (thread + 1) * (i + 1) for i in range(turn + 1)]
            messages = memci.formats.to_langchain(
                [{"role": "user", "content": text, "id": f"m{i}"} for i, text in enumerate(texts)]
            )
            sent = hook.invoke({"messages": messages}, {"configurable": {"thread_id": f"t{thread}"}})
            kept = sent["llm_input_messages"]
            assert kept == messages[len(messages) - len(kept) :]
            assert memci.tokens.count_messages(as_dicts(kept)) <= 50 or len(kept) == 1

    run_together(*(functools.partial(run, t) for t in range(4)))


def test_the_context_hook_keeps_concurrent_threads_apart() -> None:
    from fake_chat import RecordingModel
    from langchain_core.outputs import ChatGeneration, ChatResult

    class Echo(RecordingModel):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            self.sent.append(list(messages))
            answer = AIMessage("heard " + str(messages[-1].content))
            return ChatResult(generations=[ChatGeneration(message=answer)])

    hook = ContextHook(active_pages=2)
    fake = Echo(messages=iter([]), sent=[])
    agent = create_react_agent(
        fake,
        hook.tools(),
        pre_model_hook=hook,
        state_schema=ContextState,
        checkpointer=InMemorySaver(),
        store=InMemoryStore(),
    )

    def talk(user: int) -> None:
        for turn in range(6):
            config = {"configurable": {"thread_id": f"user{user}@example.com"}}
            agent.invoke({"messages": [("user", f"<user{user}> turn {turn}")]}, config)

    run_together(*(functools.partial(talk, u) for u in range(4)))
    assert len(fake.sent) == 24
    for sent in fake.sent:
        owner = str(sent[-1].content).split()[0]
        text = " ".join(str(m.content) for m in sent)
        assert all(f"<user{u}>" not in text for u in range(4) if f"<user{u}>" != owner), text


# ---- Pydantic states, a missing schema, recall counts -------------------------------------------


def test_the_hooks_take_a_pydantic_state() -> None:
    class State(BaseModel):
        messages: Annotated[list[BaseMessage], add_messages]
        remaining_steps: RemainingSteps = 25
        memci: Annotated[dict[str, Any] | None, newest_state] = None

    fake = model(list(script(4)))
    agent = create_react_agent(
        fake, [weather], pre_model_hook=trim_hook(60), state_schema=State, checkpointer=InMemorySaver()
    )
    for i in range(4):
        state = agent.invoke({"messages": [("user", f"Question {i}")]}, {"configurable": {"thread_id": "p"}})
    assert len(state["messages"]) == 4 * 2 + 2 * 2
    assert all(memci.validate_messages(as_dicts(sent)).valid for sent in fake.sent)

    hook = ContextHook(active_pages=1)
    recall = AIMessage(content="", tool_calls=[{"name": "recall_page", "args": {"page_index": 1}, "id": "r1"}])
    fake = model([AIMessage("a"), recall, AIMessage("It was alpha.")])
    agent = create_react_agent(
        fake, hook.tools(), pre_model_hook=hook, state_schema=State, checkpointer=InMemorySaver(), store=InMemoryStore()
    )
    config = {"configurable": {"thread_id": "p"}}
    agent.invoke({"messages": [("user", "alpha")]}, config)
    result = agent.invoke({"messages": [("user", "which first?")]}, config)
    assert result["messages"][-1].content == "It was alpha."
    assert "alpha" in str(fake.sent[-1][-1].content)

    class NoKey(BaseModel):
        messages: Annotated[list[BaseMessage], add_messages]
        remaining_steps: RemainingSteps = 25

    with pytest.raises(memci.InvalidOperationError, match="NoKey has no 'memci' field"):
        hook(NoKey(messages=[]))


def test_a_missing_state_schema_gets_an_error_naming_the_fix() -> None:
    hook = ContextHook()
    agent = create_react_agent(
        model([AIMessage("a"), AIMessage("b")]),
        hook.tools(),
        pre_model_hook=hook,
        checkpointer=InMemorySaver(),
        store=InMemoryStore(),
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [("user", "one")]}, config)
    with pytest.raises(memci.InvalidOperationError, match="state_schema=ContextState"):
        agent.invoke({"messages": [("user", "two")]}, config)


def test_a_recall_runs_on_the_threads_system_and_its_count_is_saved() -> None:
    hook = ContextHook(active_pages=1)
    store, saver = InMemoryStore(), InMemorySaver()
    recall = [
        AIMessage(
            content="",
            tool_calls=[
                {"name": "recall_page", "args": {"page_index": 1}, "id": "r1"},
                {"name": "recall_page", "args": {"page_index": 1}, "id": "r2"},
            ],
        )
    ]
    fake = model([AIMessage("a"), AIMessage("b"), *recall, AIMessage("done")])
    agent = create_react_agent(
        fake, hook.tools(), pre_model_hook=hook, state_schema=ContextState, checkpointer=saver, store=store
    )
    config = {"configurable": {"thread_id": "alice@example.com"}}
    for text in ["alpha", "beta", "recall twice"]:
        state = agent.invoke({"messages": [("user", text)]}, config)
    assert state["messages"][-1].content == "done"
    counts = {e.index: e.recall_count for e in ContextHook().context(state, store, "alice@example.com").contents}
    assert counts[1] == 2  # both recalls, in parallel, saved in the state and the store
    stored = LangGraphStorage(store, ("memci", "alice@example%2Ecom")).load_state()
    assert stored is not None
    assert stored["revision"] == state["memci"]["revision"]
