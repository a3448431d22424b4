"""The runtime loop end to end: a fake model that reads each request and answers with the SDK's
own objects drives a ContextSystem in each wire format (Chat Completions, Anthropic Messages,
Responses items), sync and async, on SQLite and on Redis. The model calls the agent's tool, recalls
archived pages through the recall tool, and every request the loop builds validates against the
SDK's request types (extra keys refused). After the last turn the conversation is opened again
from its store, continues, and search agrees with recall."""

from __future__ import annotations

import inspect
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import memci
import pytest
from factories import anthropic_message
from memci import formats
from test_formats import _check, assert_anthropic_request, assert_openai_messages
from test_responses import assert_responses_input

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("aiosqlite", reason="the aiosqlite package is not installed (pip install 'memci[async]')")

Message = dict[str, Any]
PROMPT = "You are a weather agent. Use the tools."
TURNS = 7
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
#: The agent's own tool, as each API takes it.
WEATHER_TOOL = {
    "chat": {"type": "function", "function": {"name": "weather", "description": "Weather now", "parameters": SCHEMA}},
    "anthropic": {"name": "weather", "description": "Weather now", "input_schema": SCHEMA},
    "responses": {"type": "function", "name": "weather", "description": "Weather now", "parameters": SCHEMA},
}
TOOLS_FORMAT = {"chat": "openai", "anthropic": "anthropic", "responses": "responses"}


def city(n: int) -> str:
    return f"Harbourtown{n}"


def question(turn: int) -> str:
    return f"What is the weather in {city(turn)} today?"


def weather(name: str) -> str:
    return f"{name}: {len(name) + 10} degrees and windy"


# ---- the fake model: reads the request, answers as the SDK returns ------------------------------


def plan(text: str, turn: int) -> tuple[str, Any]:
    """What the model does next, read from the request's text: call ``weather`` for this turn's city
    until it has its answer, then (from turn 4) recall the page of turn ``turn - 3`` once, found on
    the contents page, then answer."""
    this_turn = text[text.rfind(question(turn)) :]
    if weather(city(turn)) not in this_turn:
        return "weather", {"city": city(turn)}
    if turn >= 4 and "recall_page" not in this_turn:
        match = re.search(rf"\[page (\d+)\] What is the weather in {city(turn - 3)}\b", text)
        assert match, f"the contents page lists the page of turn {turn - 3}"
        return "recall_page", {"page_index": int(match.group(1))}
    return "answer", f"In {city(turn)} it is {weather(city(turn))}."


def chat_reply(request: list[Message], turn: int, step: int) -> Any:
    from openai.types.chat import ChatCompletionMessage

    action, arg = plan(json.dumps(request), turn)
    if action == "answer":
        return ChatCompletionMessage.model_validate({"role": "assistant", "content": arg})
    call = {"id": f"call_{turn}_{step}", "type": "function", "function": {"name": action, "arguments": json.dumps(arg)}}
    return ChatCompletionMessage.model_validate({"role": "assistant", "content": None, "tool_calls": [call]})


def anthropic_reply(request: dict[str, Any], turn: int, step: int) -> Any:
    action, arg = plan(json.dumps(request), turn)
    if action == "answer":
        content: list[Message] = [{"type": "text", "text": arg}]
    else:
        content = [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": f"toolu_{turn}_{step}", "name": action, "input": arg},
        ]
    return anthropic_message(content, message_id=f"msg_{turn}_{step}", calls_tools=action != "answer")


def responses_reply(request: list[Message], turn: int, step: int) -> list[Any]:
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseReasoningItem

    action, arg = plan(json.dumps(request), turn)
    reasoning = ResponseReasoningItem.model_validate({"type": "reasoning", "id": f"rs_{turn}_{step}", "summary": []})
    if action == "answer":
        text = {"type": "output_text", "text": arg, "annotations": []}
        message = {
            "type": "message",
            "id": f"msg_{turn}",
            "role": "assistant",
            "status": "completed",
            "content": [text],
        }
        return [reasoning, ResponseOutputMessage.model_validate(message)]
    call = {
        "type": "function_call",
        "id": f"fc_{turn}_{step}",
        "call_id": f"call_{turn}_{step}",
        "name": action,
        "arguments": json.dumps(arg),
        "status": "completed",
    }
    return [reasoning, ResponseFunctionToolCall.model_validate(call)]


# ---- one request, validated; one model step, applied ----------------------------------------------


async def call(obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``obj.name(...)``, awaited when the system is async: one loop for both."""
    result = getattr(obj, name)(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


async def request_of(ctx: Any, wire: str) -> Any:
    """The request the agent sends, checked against the SDK's request types."""
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

    messages: list[Any] = await call(ctx, "build_messages")
    tools: list[Any] = ctx.tool_definitions(TOOLS_FORMAT[wire])
    assert [t.get("name") or t["function"]["name"] for t in tools][:1] == ["weather"], "the agent's tool comes first"
    if wire == "chat":
        assert_openai_messages(messages)
        _check(CompletionCreateParamsNonStreaming, {"model": "gpt-4o", "messages": messages, "tools": tools})
        return messages
    if wire == "anthropic":
        request: dict[str, Any] = dict(formats.to_anthropic(messages))
        assert_anthropic_request(request)
        _check(MessageCreateParamsNonStreaming, {"model": "claude-x", "max_tokens": 64, "tools": tools, **request})
        return request
    items: list[Any] = formats.to_responses(messages)
    assert_responses_input(items)
    _check(ResponseCreateParamsNonStreaming, {"model": "gpt-4o", "input": items, "tools": tools})
    return items


async def answer_tool(ctx: Any, wire: str, tool_call: Any) -> tuple[Message, bool]:
    """The answer to one of the model's tool calls, and whether it was a recall."""
    if ctx.is_recall_call(tool_call):
        return await call(ctx, "handle_tool_call", tool_call), True
    if wire == "chat":
        args = json.loads(tool_call.function.arguments)
        return {"role": "tool", "tool_call_id": tool_call.id, "content": weather(args["city"])}, False
    if wire == "anthropic":
        result = {"type": "tool_result", "tool_use_id": tool_call.id, "content": weather(tool_call.input["city"])}
        return result, False
    args = json.loads(tool_call.arguments)
    return {"type": "function_call_output", "call_id": tool_call.call_id, "output": weather(args["city"])}, False


async def run_turn(ctx: Any, wire: str, turn: int) -> int:
    """One user turn to the model's answer; the number of recalls the model made."""
    question = f"What is the weather in {city(turn)} today?"
    if wire == "responses":
        await call(
            ctx, "add", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]}
        )
    else:
        await call(ctx, "add", {"role": "user", "content": question})
    recalls = 0
    for step in range(6):
        request = await request_of(ctx, wire)
        if wire == "chat":
            reply = chat_reply(request, turn, step)
            await call(ctx, "add", reply)  # an SDK object: memci takes its model_dump()
            calls = list(reply.tool_calls or [])
        elif wire == "anthropic":
            reply = anthropic_reply(request, turn, step)
            await call(
                ctx, "add", {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
            )
            calls = [b for b in reply.content if b.type == "tool_use"]
        else:
            output = responses_reply(request, turn, step)
            await call(ctx, "extend", output)
            calls = [item for item in output if item.type == "function_call"]
        if not calls:
            return recalls
        for tool_call in calls:
            result, recalled = await answer_tool(ctx, wire, tool_call)
            recalls += recalled
            if recalled:
                assert city(turn - 3) in json.dumps(result), "the recalled page comes back in full"
            await call(ctx, "add", {"role": "user", "content": [result]} if wire == "anthropic" else result)
    raise AssertionError(f"turn {turn}: the model never answered")


# ---- the matrix ---------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "redis"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[bool], Any]:
    """A new store object on one place each call; ``asynchronous`` picks the async store."""
    if request.param == "sqlite":
        path = tmp_path / "agent.db"
        return lambda asynchronous: (memci.AsyncSqliteStorage if asynchronous else memci.SqliteStorage)(path)
    url, prefix = request.getfixturevalue("redis_url"), f"loop-{uuid.uuid4().hex}:"
    return lambda asynchronous: (memci.AsyncRedisStorage if asynchronous else memci.RedisStorage)(url, prefix=prefix)


async def close(store: Any) -> None:
    await call(store, "close")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("wire", ["chat", "anthropic", "responses"])
async def test_the_agent_loop_runs_end_to_end(wire: str, mode: str, open_store: Callable[[bool], Any]) -> None:
    asynchronous = mode == "async"
    system = memci.AsyncContextSystem if asynchronous else memci.ContextSystem
    options = {"tools": TOOLS_FORMAT[wire], "agent_tools": [WEATHER_TOOL[wire]], "active_pages": 2}
    store = open_store(asynchronous)
    ctx = await call(system, "open", store, PROMPT, **options)
    recalls = 0
    for turn in range(1, TURNS + 1):
        recalls += await run_turn(ctx, wire, turn)
        await call(ctx, "end_round")
        await call(ctx, "save")
    assert recalls == TURNS - 3, "from turn 4 on, the model recalled one archived page a turn"
    last = await call(ctx, "build_messages")
    await close(store)

    # Opened again from the store: the same window, and the conversation goes on.
    store = open_store(asynchronous)
    again = await call(system, "open", store, PROMPT, **options)
    assert await call(again, "build_messages") == last
    assert await run_turn(again, wire, TURNS + 1) == 1
    hits = await call(again, "search", city(2))
    assert hits, "search finds an archived page"
    page = await call(again, "recall", hits[0].page_index)
    assert city(2) in json.dumps(page.messages()), "search agrees with recall"
    await close(store)
