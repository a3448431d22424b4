"""What a ContextSystem builds validates, at run time, against the model SDKs' own request types
(extra keys refused): ``build_messages()`` and ``tool_definitions()`` for Chat Completions, through
``to_anthropic`` for Anthropic's Messages and ``to_responses`` for the Responses API. Their types,
under ``mypy --strict``, are ``tests/test_typing.py``'s."""

from __future__ import annotations

import json
from typing import Any

import memci
import pytest
from context_helpers import calling, run_rounds, tool, user
from memci import formats
from test_formats import _check, assert_anthropic_request, assert_openai_messages
from test_responses import assert_responses_input

pytest.importorskip("openai")
pytest.importorskip("anthropic")

PNG_URL = "data:image/png;base64,iVBORw0KGgo="


@pytest.fixture
def ctx() -> memci.ContextSystem:
    """Five rounds with tool calls (three archived), an image-only request, a recall of page 1 by
    the model and its answer: the contents page, tool calls and a recalled page in one window."""
    system = memci.ContextSystem("You are a careful agent.", active_pages=2)
    run_rounds(system, 1, 5)
    system.add({"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG_URL}}]})
    recall = calling("r1", "recall_page", json.dumps({"page_index": 1}))
    system.add(recall)
    system.add(system.handle_tool_call(recall["tool_calls"][0]))
    system.add({"role": "assistant", "content": "Page 1 says item 1 is fine; the picture is blank."})
    return system


def test_the_window_holds_what_it_should(ctx: memci.ContextSystem) -> None:
    messages = ctx.build_messages()
    assert [e.index for e in ctx.contents] == [1, 2, 3, 4]
    assert messages[2]["role"] == "system"
    assert "[page 1] Question 1: what about item 1?" in str(messages[2]["content"])
    assert messages[-2]["role"] == "tool"
    assert json.loads(str(messages[-2]["content"]))["page"] == 1


def test_chat_completions_requests_validate(ctx: memci.ContextSystem) -> None:
    from openai.types.chat import ChatCompletionToolParam
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    messages: list[Any] = ctx.build_messages()
    tools: list[Any] = ctx.tool_definitions()
    assert_openai_messages(messages)
    for definition in tools:
        _check(ChatCompletionToolParam, definition)
    _check(CompletionCreateParamsNonStreaming, {"model": "gpt-4o", "messages": messages, "tools": tools})


def test_anthropic_requests_validate(ctx: memci.ContextSystem) -> None:
    import anthropic.types as at
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    request: dict[str, Any] = dict(formats.to_anthropic(ctx.build_messages()))
    tools: list[Any] = ctx.tool_definitions("anthropic")
    assert_anthropic_request(request)
    for definition in tools:
        _check(at.ToolParam, definition)
    _check(MessageCreateParamsNonStreaming, {"model": "claude-x", "max_tokens": 64, "tools": tools, **request})
    assert request["system"][0]["text"] == "You are a careful agent."


def test_responses_requests_validate(ctx: memci.ContextSystem) -> None:
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

    items: list[Any] = formats.to_responses(ctx.build_messages())
    assert_responses_input(items)
    _check(ResponseCreateParamsNonStreaming, {"model": "gpt-4o", "input": items})
    assert {"function_call", "function_call_output"} <= {item.get("type") for item in items}


def test_the_checks_would_catch_a_wrong_request(ctx: memci.ContextSystem) -> None:
    from openai.types.chat import ChatCompletionToolParam

    with pytest.raises(ValueError, match="function"):
        _check(ChatCompletionToolParam, ctx.tool_definitions("anthropic")[0])
    messages: list[Any] = ctx.build_messages()
    with pytest.raises(ValueError, match="extra"):
        assert_openai_messages([*messages, {**user("hi"), "page": 3}])
    with pytest.raises(ValueError, match="tool_call_id"):
        assert_openai_messages([{k: v for k, v in tool("x").items() if k != "tool_call_id"}])
