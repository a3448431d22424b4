"""The context system on Responses API items: pages open on user message items, function calls,
their outputs and reasoning join the open page, summaries and search read items, and the recall
tools answer a ``function_call`` item with a ``function_call_output`` item."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import memci
import pytest

Item = dict[str, Any]


def user_item(text: str) -> Item:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def reply_item(text: str) -> Item:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def call_item(call_id: str, name: str, arguments: dict[str, Any]) -> Item:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}


def output_item(call_id: str, output: str) -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def reasoning_item(n: int) -> Item:
    return {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": "think"}]}


def turn(n: int) -> list[Item]:
    return [
        user_item(f"What is the weather in city {n}? Please check."),
        reasoning_item(n),
        call_item(f"w{n}", "get_weather", {"city": f"city {n}"}),
        output_item(f"w{n}", f"City {n}: {10 + n} degrees"),
        reply_item(f"It is {10 + n} degrees in city {n}."),
    ]


def test_user_message_items_open_pages_and_the_other_items_join_them():
    ctx = memci.ContextSystem(tools="responses")
    assert [ctx.add(item) for item in turn(1)] == [1, 1, 1, 1, 1]
    assert ctx.add({"role": "user", "content": "an easy input message"}) == 2
    assert ctx.add(output_item("late", "joins")) == 2
    page = ctx.pages[0]
    assert [e.role for e in page.entries] == ["user", "reasoning", "function_call", "function_call_output", "assistant"]
    assert page.messages() == turn(1)


def test_archived_items_are_summarised_and_searchable():
    ctx = memci.ContextSystem(tools="responses", active_pages=1)
    ctx.extend(turn(1))
    ctx.extend(turn(2))
    (entry,) = ctx.contents
    assert entry.summary == "What is the weather in city 1?"
    assert entry.entry_summaries[2:] == (
        'function_call: → get_weather({"city": "city 1"})',
        "function_call_output: City 1: 11 degrees",
        "assistant: It is 11 degrees in city 1.",
    )
    assert ctx.search("11 degrees")[0].page_index == 1


def test_a_function_call_item_of_a_recall_tool_is_answered_with_a_function_call_output_item():
    ctx = memci.ContextSystem(tools="responses", active_pages=1)
    ctx.extend(turn(1))
    ctx.extend(turn(2))
    call = call_item("r1", "recall_page", {"page_index": 1})
    assert ctx.is_recall_call(call)
    assert not ctx.is_recall_call(call_item("x", "get_weather", {}))
    answer = ctx.handle_tool_call(call)
    assert answer["type"] == "function_call_output"
    assert answer["call_id"] == "r1"
    assert json.loads(answer["output"]) == {"page": 1, "messages": turn(1)}
    refused = ctx.handle_tool_call(call_item("r2", "recall_page", {"page_index": "lots"}))
    assert refused["call_id"] == "r2"
    assert refused["output"].startswith("Refused: recall_page: page_index must be an integer")
    with pytest.raises(memci.InvalidOperationError, match="a function_call item needs a string 'call_id'"):
        ctx.handle_tool_call({"type": "function_call", "name": "recall_page", "arguments": "{}"})


class FakeModel:
    """Asks for the weather on every new question, and recalls page 1 when told "remember"."""

    def __init__(self) -> None:
        self.requests: list[list[Item]] = []

    def respond(self, items: list[Item], tools: list[Item]) -> list[Item]:
        self.requests.append(items)
        assert [t["name"] for t in tools][-3:] == ["recall_page", "list_pages", "search_pages"]
        last = items[-1]
        if last.get("type") == "function_call_output":
            return [reply_item(f"Done: {last['output'][:30]}")]
        text = last["content"][0]["text"] if isinstance(last["content"], list) else last["content"]
        n = len(self.requests)
        if "remember" in text:
            return [call_item(f"r{n}", "recall_page", {"page_index": 1})]
        return [reasoning_item(n), call_item(f"w{n}", "get_weather", {"city": text})]


def run_loop(ctx: memci.ContextSystem, model: FakeModel, questions: list[str]) -> None:
    for question in questions:
        ctx.add(user_item(question))
        while True:
            replies = model.respond(ctx.build_messages(), ctx.tool_definitions("responses"))
            ctx.extend(replies)
            calls = [item for item in replies if item.get("type") == "function_call"]
            if not calls:
                break
            for call in calls:
                if ctx.is_recall_call(call):
                    ctx.add(ctx.handle_tool_call(call))
                else:
                    ctx.add(output_item(call["call_id"], f"sunny in {json.loads(call['arguments'])['city']}"))
        ctx.end_round()
        ctx.save()


@pytest.fixture(params=["sqlite", "redis"])
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], memci.Storage]:
    """Opens one store again and again: a SQLite file, or a Redis prefix of this test's own."""
    if request.param == "sqlite":
        return lambda: memci.SqliteStorage(tmp_path / "items.db")
    url, prefix = request.getfixturevalue("redis_url"), f"items-{uuid.uuid4().hex}:"
    return lambda: memci.RedisStorage(url, prefix=prefix)


def test_a_scripted_agent_loop_on_items_archives_recalls_and_continues_after_a_reload(
    reopen: Callable[[], memci.Storage],
):
    ctx = memci.ContextSystem.open(reopen(), "You are a weather agent.", tools="responses", active_pages=2)
    model = FakeModel()
    run_loop(ctx, model, ["Paris", "Rome", "Oslo"])
    assert [p.index for p in ctx.pages] == [2, 3]
    assert [e.index for e in ctx.contents] == [1]
    again = memci.ContextSystem.open(reopen())
    assert again.state() == ctx.state()
    run_loop(again, model, ["please remember the first city"])
    assert again.contents[0].recall_count == 1
    recalled = again.pages[-1].messages()
    assert recalled[1]["type"] == "function_call"
    assert recalled[2]["type"] == "function_call_output"
    assert json.loads(recalled[2]["output"])["messages"][0] == user_item("Paris")
    # Every request the loop built pairs each function call with its output.
    for request in model.requests:
        calls = {i["call_id"] for i in request if i.get("type") == "function_call"}
        outputs = {i["call_id"] for i in request if i.get("type") == "function_call_output"}
        assert outputs <= calls
    assert memci.ContextSystem.load(reopen()).state() == again.state()
