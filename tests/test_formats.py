"""``memci.formats``: OpenAI <-> Anthropic <-> LangChain (docs/sanitizer.md, "Formats"). Shapes are
checked against the ``openai`` and ``anthropic`` SDKs' own request types; round trips with hypothesis."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memci import InvalidMessageError, MessageArray, sanitize_messages, validate_messages
from memci.formats import from_langchain, to_anthropic, to_langchain, to_openai
from pydantic import ConfigDict, TypeAdapter
from tool_histories import ANTHROPIC, OPENAI, histories

Message = dict[str, Any]

PNG = "iVBORw0KGgo="


def call(call_id: str, name: str = "search", **arguments: Any) -> Message:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


# ---- the SDKs' request types -------------------------------------------------------------------------

STRICT = ConfigDict(extra="forbid")


def _materialise(value: Any) -> Any:
    """Run pydantic's deferred validation of ``Iterable`` fields (it validates them lazily)."""
    if isinstance(value, dict):
        return {k: _materialise(v) for k, v in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Iterable):
        return [_materialise(v) for v in value]
    return value


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    # Kept alive: pydantic's deferred iterators need their adapter after validate_python returns.
    return TypeAdapter(list[kind], config=STRICT)


def _check(kind: Any, value: Any) -> None:
    """Validate ``value`` as ``kind`` with extra keys refused at every level (pydantic takes a
    config only around a TypedDict, hence the list of one)."""
    _materialise(_adapter(kind).validate_python([value]))


def assert_anthropic_request(request: dict[str, Any]) -> None:
    """The request validates against ``anthropic``'s ``MessageParam`` and, block by block, against
    the param type of each block (extra keys refused), and ``system`` against its declared type."""
    import anthropic.types as at
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    assert set(request) <= {"system", "messages"}
    full = {"model": "claude-x", "max_tokens": 16, **request}
    _check(MessageCreateParamsNonStreaming, full)
    blocks = {
        "text": at.TextBlockParam,
        "image": at.ImageBlockParam,
        "tool_use": at.ToolUseBlockParam,
        "tool_result": at.ToolResultBlockParam,
    }
    for message in request["messages"]:
        _check(at.MessageParam, message)
        assert message["role"] in ("user", "assistant")
        assert set(message) == {"role", "content"}
        for block in message["content"] if isinstance(message["content"], list) else ():
            _check(blocks[block["type"]], block)
    for block in request.get("system") or () if not isinstance(request.get("system"), str) else ():
        _check(at.TextBlockParam, block)


def assert_openai_messages(messages: list[Message]) -> None:
    """Each message validates against ``openai``'s ``ChatCompletionMessageParam`` (extra keys refused)."""
    from openai.types.chat import ChatCompletionMessageParam

    for message in messages:
        _check(ChatCompletionMessageParam, message)


def test_the_sdk_checks_catch_wrong_shapes() -> None:
    with pytest.raises(ValueError, match="extra"):
        assert_anthropic_request({"messages": [{"role": "user", "content": "hi", "name": "ana"}]})
    with pytest.raises(ValueError, match="tool_use_id"):
        assert_anthropic_request({"messages": [{"role": "user", "content": [{"type": "tool_result", "id": "x"}]}]})
    with pytest.raises(ValueError, match="type"):
        assert_openai_messages([{"role": "tool", "content": "x"}])


# ---- to_anthropic --------------------------------------------------------------------------------------


def test_the_system_prompt_is_lifted_out() -> None:
    request = to_anthropic([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}])
    assert request == {"system": "Be terse.", "messages": [{"role": "user", "content": "hi"}]}
    assert_anthropic_request(dict(request))


def test_several_system_and_developer_messages_become_text_blocks_in_order() -> None:
    request = to_anthropic(
        [
            {"role": "system", "content": "one"},
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": [{"type": "text", "text": "two"}]},
        ]
    )
    assert request["system"] == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    assert request["messages"] == [{"role": "user", "content": "hi"}]
    assert_anthropic_request(dict(request))


def test_no_system_key_without_a_system_message() -> None:
    assert to_anthropic([{"role": "user", "content": "hi"}]) == {"messages": [{"role": "user", "content": "hi"}]}
    assert to_anthropic([]) == {"messages": []}


def test_tool_calls_become_tool_use_blocks_and_tool_runs_one_user_message() -> None:
    history = [
        {"role": "user", "content": "weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [call("c1", city="Paris"), call("c2", "forecast", city="Oslo", days=2)],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "rain"}]},
        {"role": "assistant", "content": "Paris sunny, Oslo rain."},
    ]
    request = to_anthropic(history)
    assert request["messages"] == [
        {"role": "user", "content": "weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "c1", "name": "search", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "c2", "name": "forecast", "input": {"city": "Oslo", "days": 2}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "c2", "content": [{"type": "text", "text": "rain"}]},
            ],
        },
        {"role": "assistant", "content": "Paris sunny, Oslo rain."},
    ]
    assert_anthropic_request(dict(request))


def test_an_assistant_message_with_only_calls_has_no_text_block() -> None:
    (message,) = to_anthropic([{"role": "assistant", "content": None, "tool_calls": [call("c1")]}])["messages"]
    assert [b["type"] for b in message["content"]] == ["tool_use"]
    (message,) = to_anthropic([{"role": "assistant", "content": "", "tool_calls": [call("c1")]}])["messages"]
    assert [b["type"] for b in message["content"]] == ["tool_use"]


def test_empty_text_parts_are_left_out() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "hi"}]}
    assert to_anthropic([message])["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_empty_arguments_are_an_empty_input() -> None:
    c = {"id": "c1", "type": "function", "function": {"name": "now", "arguments": ""}}
    (message,) = to_anthropic([{"role": "assistant", "content": None, "tool_calls": [c]}])["messages"]
    assert message["content"][0]["input"] == {}


def test_images_become_image_blocks() -> None:
    request = to_anthropic(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg", "detail": "low"}},
                ],
            }
        ]
    )
    assert request["messages"][0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
    ]
    assert_anthropic_request(dict(request))


def test_only_role_and_content_go_to_anthropic() -> None:
    request = to_anthropic([{"role": "user", "content": "hi", "name": "ana", "timestamp": 1.0, "metadata": {}}])
    assert request["messages"] == [{"role": "user", "content": "hi"}]


def test_anthropic_blocks_already_in_place_pass_through() -> None:
    history = [ANTHROPIC.user(), ANTHROPIC.calls("a", text="hm"), *ANTHROPIC.results("a")]
    assert to_anthropic(history)["messages"] == history


@pytest.mark.parametrize(
    ("message", "path", "words"),
    [
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{**call("c"), "function": {"name": "f", "arguments": "{"}}],
            },
            "messages[0].tool_calls[0].function.arguments",
            "not valid JSON",
        ),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{**call("c"), "function": {"name": "f", "arguments": "[1]"}}],
            },
            "messages[0].tool_calls[0].function.arguments",
            "JSON object",
        ),
        (
            {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
            "messages[0].content[0]",
            "input_audio",
        ),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,AA"}}]},
            "messages[0].content[0].image_url.url",
            "base64 data URLs",
        ),
        ({"role": "function", "content": "x", "name": "f"}, "messages[0].role", "unknown role"),
        ({"content": "x"}, "messages[0].role", "missing"),
        ("hello", "messages[0]", "must be a dict"),
    ],
)
def test_what_anthropic_cannot_take_is_refused_with_its_place(message: Any, path: str, words: str) -> None:
    with pytest.raises(InvalidMessageError, match=words) as e:
        to_anthropic([message])
    assert e.value.path == path


def test_conversion_never_changes_its_input() -> None:
    history = [OPENAI.system(), OPENAI.user(), OPENAI.calls("a", "b"), *OPENAI.results("a", "b")]
    before = copy.deepcopy(history)
    request = to_anthropic(history)
    assert history == before
    before = copy.deepcopy(request)
    to_openai(request)
    assert request == before


# ---- to_openai -----------------------------------------------------------------------------------------


def test_tool_results_become_tool_messages_before_the_rest_of_the_user_message() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "r1"},
                {
                    "type": "tool_result",
                    "tool_use_id": "b",
                    "content": [{"type": "text", "text": "r2"}],
                    "is_error": True,
                },
                {"type": "text", "text": "and now?"},
            ],
        }
    ]
    out = to_openai(messages)
    assert out == [
        {"role": "tool", "tool_call_id": "a", "content": "r1"},
        {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "r2"}]},
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
    ]
    assert_openai_messages(out)


def test_tool_use_blocks_become_tool_calls_and_thinking_is_dropped() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "東京"}},
        ],
    }
    (out,) = to_openai([message])
    assert out == {
        "role": "assistant",
        "content": "Looking.",
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "search", "arguments": '{"q": "東京"}'}}],
    }
    assert_openai_messages([out])


def test_several_text_blocks_stay_separate_parts() -> None:
    (out,) = to_openai(
        [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    )
    assert out["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert_openai_messages([out])


def test_the_system_argument_becomes_system_messages() -> None:
    assert to_openai([], system="s") == [{"role": "system", "content": "s"}]
    blocks = [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "b"}]
    assert to_openai({"system": blocks, "messages": []}) == [
        {"role": "system", "content": "a"},
        {"role": "system", "content": "b"},
    ]


def test_images_become_image_url_parts() -> None:
    out = to_openai(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
                ],
            }
        ]
    )
    assert out[0]["content"] == [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
    ]
    assert_openai_messages(out)


@pytest.mark.parametrize(
    ("message", "path"),
    [
        (
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "a",
                        "content": [{"type": "image", "source": {"type": "url", "url": "u"}}],
                    }
                ],
            },
            "messages[0].content[0].content[0]",
        ),
        ({"role": "user", "content": [{"type": "document", "source": {}}]}, "messages[0].content[0]"),
        ({"role": "assistant", "content": [{"type": "server_tool_use", "id": "s"}]}, "messages[0].content[0]"),
        ({"role": "robot", "content": "x"}, "messages[0].role"),
    ],
)
def test_what_openai_cannot_take_is_refused_with_its_place(message: Message, path: str) -> None:
    with pytest.raises(InvalidMessageError) as e:
        to_openai([message])
    assert e.value.path == path


def test_openai_shaped_messages_pass_through_to_openai() -> None:
    history = [OPENAI.system(), OPENAI.user(), OPENAI.calls("a", text="x"), *OPENAI.results("a")]
    assert to_openai(history) == history


# ---- round trips, validity, SDK shapes ------------------------------------------------------------------


def _with_images(history: list[Message]) -> list[Message]:
    image = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG}"}}
    return [*history, {"role": "user", "content": [{"type": "text", "text": "see"}, image]}]


@given(histories(OPENAI).map(_with_images))
def test_openai_to_anthropic_and_back_is_the_same_history(history: list[Message]) -> None:
    request = to_anthropic(history)
    assert_anthropic_request(dict(request))
    back = to_openai(request)
    assert back == history
    assert_openai_messages(back)


@given(histories(ANTHROPIC))
def test_anthropic_to_openai_and_back_is_the_same_history(history: list[Message]) -> None:
    system, rest = history[0]["content"], history[1:]
    openai_messages = to_openai(rest, system=system)
    assert_openai_messages(openai_messages)
    assert to_anthropic(openai_messages) == {"system": system, "messages": rest}


@given(st.sampled_from([OPENAI, ANTHROPIC]).flatmap(histories))
def test_a_valid_history_stays_valid_in_the_other_format(history: list[Message]) -> None:
    assert validate_messages(to_anthropic(history)["messages"]).valid
    assert validate_messages(to_openai(history)).valid


def test_a_sanitized_history_converts_and_validates() -> None:
    damaged = [OPENAI.user(), OPENAI.calls("a", "b"), *OPENAI.results("a"), OPENAI.reply(), *OPENAI.results("z")]
    request = to_anthropic(sanitize_messages(damaged).messages)
    assert validate_messages(request["messages"]).valid
    assert_anthropic_request(dict(request))


def test_a_message_array_converts_directly() -> None:
    arr = MessageArray([OPENAI.system(), OPENAI.user(), OPENAI.calls("a"), *OPENAI.results("a")])
    assert to_anthropic(arr) == to_anthropic(arr.messages())


# ---- LangChain -----------------------------------------------------------------------------------------


def test_langchain_objects_carry_the_roles_and_parsed_tool_calls() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    history = [OPENAI.system(), OPENAI.user(), OPENAI.calls("a"), *OPENAI.results("a"), OPENAI.reply()]
    lc = to_langchain(history)
    assert [type(m) for m in lc] == [SystemMessage, HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert lc[2].tool_calls == [{"name": "search", "args": {"q": "a"}, "id": "a", "type": "tool_call"}]
    assert lc[3].tool_call_id == "a"


@given(histories(OPENAI))
def test_langchain_round_trip_is_the_same_history(history: list[Message]) -> None:
    pytest.importorskip("langchain_core")
    assert from_langchain(to_langchain(history)) == history


def test_an_anthropic_history_reaches_langchain_through_to_openai() -> None:
    pytest.importorskip("langchain_core")
    history = [ANTHROPIC.user(), ANTHROPIC.calls("a"), *ANTHROPIC.results("a")]
    lc = to_langchain(to_openai(history))
    assert [m.type for m in lc] == ["human", "ai", "tool"]
    assert to_anthropic(from_langchain(lc))["messages"] == history


def test_langchain_ids_names_and_error_status_survive_the_round_trip() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    objects = [
        SystemMessage("Be terse.", id="s1"),
        HumanMessage("weather?", id="h1", name="ana"),
        AIMessage("", id="a1", name="bot", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("service down", tool_call_id="c1", status="error", id="t1", name="weather"),
        ToolMessage("sunny", tool_call_id="c2", id="t2"),
    ]
    dicts = from_langchain(objects)
    assert [m.get("id") for m in dicts] == ["s1", "h1", "a1", "t1", "t2"]
    assert [m.get("status") for m in dicts] == [None, None, None, "error", None]
    assert to_langchain(dicts) == objects
    assert to_langchain(MessageArray(dicts)) == objects  # stored as they came
    results = to_anthropic(dicts)["messages"][2]["content"]
    assert [block.get("is_error") for block in results] == [True, None]  # type: ignore[union-attr]
    assert all("id" not in m and "status" not in m for m in to_openai(dicts))
