"""Responses API items (docs/message-array.md "Messages", docs/sanitizer.md): stored and indexed,
sanitized, counted and trimmed as a format of their own; ``formats.to_responses`` / ``from_responses``
checked against the ``openai`` SDK's ``ResponseInputItemParam`` and round-tripped with hypothesis; SDK
objects taken as their ``model_dump``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memci import InvalidMessageError, MessageArray, sanitize_messages, tokens, validate_messages
from memci.formats import from_responses, to_anthropic, to_openai, to_responses
from test_formats import _check, assert_anthropic_request, assert_openai_messages
from tool_histories import OPENAI, RESPONSES, histories

Message = dict[str, Any]


def assert_responses_input(items: list[Any]) -> None:
    """Each item validates against ``openai``'s ``ResponseInputItemParam`` (extra keys refused)."""
    from openai.types.responses import ResponseInputItemParam

    for item in items:
        _check(ResponseInputItemParam, item)


def call(call_id: str, name: str = "search", arguments: str = '{"q": "x"}') -> Message:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output(call_id: str, text: str = "found") -> Message:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


REASONING: Message = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Search."}]}


def test_the_sdk_check_catches_wrong_items() -> None:
    with pytest.raises(ValueError, match="call_id"):
        assert_responses_input([{"type": "function_call", "name": "f", "arguments": "{}"}])


# ---- the store ---------------------------------------------------------------------------------------


def test_items_are_stored_as_they_came_and_indexed_under_a_role() -> None:
    history = [
        {"role": "user", "content": [{"type": "input_text", "text": "weather?"}], "type": "message"},
        REASONING,
        call("c1"),
        output("c1"),
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
        {"role": "assistant", "content": "Sunny."},
    ]
    arr = MessageArray(history)
    assert arr.messages() == history
    assert [list(m) for m in arr.messages()] == [list(m) for m in history]
    assert arr.count("assistant") == 4
    assert arr.by_role("tool") == [output("c1")]
    assert arr.recent(1, role="tool") == [output("c1")]
    assert MessageArray.from_json(arr.to_json()).messages() == history


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({"type": "function_call", "call_id": "c", "name": "f"}, "messages[1].arguments"),
        ({"type": "function_call_output", "call_id": "c"}, "messages[1].output"),
        ({"type": "reasoning", "id": "rs_1"}, "messages[1].summary"),
        ({"type": "message", "content": "hi"}, "messages[1].role"),
        ({"content": "hi"}, "messages[1].role"),
    ],
)
def test_what_the_api_refuses_is_refused_with_its_place(item: Message, path: str) -> None:
    arr = MessageArray([{"role": "user", "content": "hi"}])
    with pytest.raises(InvalidMessageError) as raised:
        arr.append([{"role": "user", "content": "ok"}, item])
    assert raised.value.path == path
    assert len(arr) == 1


def test_chat_messages_are_taken_as_the_chat_api_takes_them() -> None:
    tool_call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    custom_call = {"id": "d", "type": "custom", "custom": {"name": "g", "input": "raw text"}}
    accepted = [
        {"role": "assistant", "tool_calls": [tool_call, custom_call]},  # model_dump(exclude_none=True)
        {"role": "tool", "tool_call_id": "c", "content": "1"},
        {"role": "tool", "tool_call_id": "d", "content": "2"},
        {"role": "assistant", "refusal": "I can't help with that."},
        {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
    ]
    arr = MessageArray(accepted)
    assert arr.messages() == accepted
    assert arr.validate().valid
    assert_openai_messages(accepted)
    with pytest.raises(InvalidMessageError) as raised:
        arr.append({"role": "assistant", "refusal": None})
    assert raised.value.path == "message.content"
    with pytest.raises(InvalidMessageError) as raised:
        arr.append({"role": "assistant", "tool_calls": [{"id": "e", "type": "custom", "custom": {"name": "g"}}]})
    assert raised.value.path == "message.tool_calls[0].custom.input"


def test_sdk_objects_are_taken_as_their_dump() -> None:
    from openai.types.chat import ChatCompletionMessage
    from openai.types.responses import ResponseFunctionToolCall, ResponseReasoningItem

    reply = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        }
    )
    arr = MessageArray([{"role": "user", "content": "hi"}])
    arr.append(reply)  # a single object, not iterated as fields
    arr.append([reply.model_copy(), {"role": "tool", "tool_call_id": "c", "content": "done"}][1:])
    assert arr[1] == reply.model_dump(mode="json", exclude_unset=True)
    assert arr.validate().valid
    function_call = ResponseFunctionToolCall.model_validate(call("c2") | {"id": "fc_1", "status": "completed"})
    reasoning = ResponseReasoningItem.model_validate(REASONING)
    items = [reasoning, function_call, output("c2")]
    arr.append(items)
    assert arr[-2] == call("c2") | {"id": "fc_1", "status": "completed"}
    assert sanitize_messages(items).messages == items  # the input's own objects
    assert [r.index for r in sanitize_messages(items[:2]).removed_messages] == [0, 1]
    assert tokens.count_message(function_call) == tokens.count_message(function_call.model_dump())
    assert to_responses([reasoning, function_call]) == [REASONING, call("c2") | {"id": "fc_1", "status": "completed"}]


def test_sdk_objects_inside_a_message_are_taken_as_their_dump() -> None:
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    tool_call = ChatCompletionMessageFunctionToolCall.model_validate(
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    )
    arr = MessageArray([{"role": "assistant", "content": None, "tool_calls": (tool_call,)}])
    assert arr[0]["tool_calls"] == [tool_call.model_dump(mode="json", exclude_unset=True)]
    assert MessageArray.from_json(arr.to_json()).messages() == arr.messages()
    assert not arr.validate().valid  # unanswered: the dump is read like any call


# ---- sanitizer, tokens, trims -------------------------------------------------------------------------


def test_the_sanitizer_removes_unanswered_calls_with_their_reasoning_and_orphan_outputs() -> None:
    history = [
        {"role": "user", "content": "go"},
        REASONING,
        call("a"),
        call("b"),
        output("b"),
        {"role": "user", "content": "again"},
        REASONING,
        call("c"),
        output("z"),
        output("b"),
    ]
    for result in (sanitize_messages(history), MessageArray(history).sanitize()):
        assert [(r.index, r.role) for r in result.removed_messages] == [
            (2, "assistant"),
            (6, "assistant"),
            (7, "assistant"),
            (8, "tool"),
            (9, "tool"),
        ]
        reasons = [r.reason for r in result.removed_messages]
        assert "no output item answers the call a" in reasons[0]
        assert "reasoning item before the removed call at index 7" in reasons[1]
        assert reasons[3].startswith("orphan output for z")
        assert reasons[4].startswith("duplicate output for b (the first is at index 4)")
        assert validate_messages(result.messages).valid


def test_an_output_may_come_anywhere_after_its_call() -> None:
    history = [{"role": "user", "content": "go"}, call("a"), {"role": "assistant", "content": "working"}, output("a")]
    assert validate_messages(history).valid
    assert not validate_messages([output("a"), call("a")]).valid


def test_an_item_counts_every_text_it_carries() -> None:
    text = "The forecast for Paris: sunny, 21 degrees, light wind from the west. " * 60
    big = output("c", text)
    assert tokens.count_message(big) == tokens.count(text) + 3
    assert tokens.count_message(big) > 800
    function_call = call("c", "weather", '{"city": "Paris"}')
    assert tokens.count_message(function_call) == tokens.count("weather") + tokens.count('{"city": "Paris"}') + 4
    arr = MessageArray([{"role": "user", "content": "weather?"}, function_call, big])
    assert arr.token_count() == tokens.count_messages(arr.messages())


@given(histories(RESPONSES), st.integers(0, 400))
def test_a_trimmed_valid_item_history_stays_valid(history: list[Message], budget: int) -> None:
    arr = MessageArray(history)
    arr.trim_to_tokens(budget)
    kept = arr.messages()
    assert validate_messages(kept).valid
    calls = [m["call_id"] for m in kept if m.get("type") == "function_call"]
    outputs = [m["call_id"] for m in kept if m.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs)


# ---- formats --------------------------------------------------------------------------------------------


def merged(history: list[Message]) -> list[Message]:
    """The history with each assistant message that only calls tools joined to an assistant text
    message right before it: items cannot tell the two apart, and ``from_responses`` joins them."""
    out: list[Message] = []
    for m in history:
        previous = out[-1] if out else {}
        joins = m.get("tool_calls") and m["content"] is None and previous.get("role") == "assistant"
        if joins and "tool_calls" not in previous:
            out[-1] = {**previous, "tool_calls": m["tool_calls"]}
            continue
        out.append(m)
    return out


@given(histories(OPENAI))
def test_chat_to_items_and_back_is_the_same_history(history: list[Message]) -> None:
    items = to_responses(history)
    assert_responses_input(list(items))
    assert validate_messages(list(items)).valid
    assert from_responses(items) == merged(history)


@given(histories(RESPONSES))
def test_items_to_chat_and_back_is_the_same_history_without_reasoning(items: list[Message]) -> None:
    assert_responses_input(items)
    chat = from_responses(items)
    assert_openai_messages(list(chat))
    assert to_responses(chat) == [m for m in items if m.get("type") != "reasoning"]


@given(histories(OPENAI))
def test_anthropic_requests_and_items_convert_both_ways(history: list[Message]) -> None:
    request = to_anthropic(to_responses(history))
    assert request == to_anthropic(merged(history))
    assert_anthropic_request(dict(request))
    assert to_responses(request) == to_responses(to_openai(request))


def test_parts_become_input_parts_and_back() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}
    history = [{"role": "user", "content": [{"type": "text", "text": "see"}, image]}]
    items = to_responses(history)
    assert items == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"},
            ],
        }
    ]
    assert_responses_input(list(items))
    assert from_responses(items) == history


def test_a_response_output_becomes_chat_messages() -> None:
    output_message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
    }
    chat = from_responses([REASONING, output_message, call("a"), call("b"), output("a"), output("b")])
    assert chat == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}},
                {"id": "b", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "found"},
        {"role": "tool", "tool_call_id": "b", "content": "found"},
    ]
    assert json.loads(chat[0]["tool_calls"][0]["function"]["arguments"]) == {"q": "x"}  # type: ignore[typeddict-item]


def test_items_with_no_chat_equivalent_are_refused_with_their_place() -> None:
    with pytest.raises(InvalidMessageError) as raised:
        from_responses(
            [{"role": "user", "content": "hi"}, {"type": "web_search_call", "id": "ws", "status": "completed"}]
        )
    assert raised.value.path == "messages[1].type"
    with pytest.raises(InvalidMessageError) as raised:
        to_responses([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}])
    assert raised.value.path == "messages[0].content[0]"
