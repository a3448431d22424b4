"""Messages go in and come out exactly, are never aliased, and bad ones are refused with the
place named and the array left as it was (docs/message-array.md, "Messages")."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from factories import (
    INVALID,
    assert_same,
    assistant,
    call,
    calling,
    developer,
    exact,
    json_values,
    system,
    tool,
    user,
    valid_messages,
)
from hypothesis import given
from hypothesis import strategies as st
from memci import InvalidMessageError, MemciError, MessageArray


class Role(enum.StrEnum):
    USER = "user"


class Level(enum.IntEnum):
    HIGH = 3


# ---- round trip ---------------------------------------------------------------------------------


def test_a_message_comes_back_with_the_same_keys_in_the_same_order() -> None:
    message = {"content": "hi", "name": "ana", "role": "user", "zeta": 1, "alpha": {"b": 2, "a": 1}}
    arr = MessageArray([message])
    assert list(arr[0]) == ["content", "name", "role", "zeta", "alpha"]
    assert list(arr[0]["alpha"]) == ["b", "a"]
    assert_same(arr.messages(), [message])


def test_nested_values_unicode_big_ints_and_floats_come_back_exactly() -> None:
    message = user(
        [{"type": "text", "text": "天气 東京 🙂 naïve \u0000 \U0001f680"}],
        metadata={
            "big": 10**40,
            "negative_big": -(10**30),
            "floats": [0.1, 1e308, -0.0, 5e-324, 1.0],
            "flags": [True, False, None],
            "nested": {"list": [[], {}, [1, [2, [3]]]], "empty": ""},
            "名前": "キー",
        },
    )
    arr = MessageArray([message])
    assert_same(arr[0], message)
    assert arr[0]["metadata"]["floats"][0] == 0.1
    assert math.copysign(1.0, arr[0]["metadata"]["floats"][2]) == -1.0
    assert type(arr[0]["metadata"]["floats"][4]) is float
    assert arr[0]["metadata"]["flags"][0] is True


@given(value=json_values)
def test_any_json_value_inside_a_message_round_trips(value: Any) -> None:
    message = user("x", metadata=value)
    arr = MessageArray([message])
    assert_same(arr[0], message)
    assert_same(arr.all_messages(), [message])


@given(messages=st.lists(valid_messages(), max_size=6))
def test_generated_messages_round_trip_through_every_read(messages: list[dict[str, Any]]) -> None:
    arr = MessageArray(messages)
    assert_same(arr.messages(), messages)
    assert_same(arr.all_messages(), messages)
    assert_same(list(arr), messages)
    assert_same(arr[:], messages)


def test_tuples_come_back_as_lists() -> None:
    arr = MessageArray([user(("a", "b"), metadata={"pair": (1, (2, 3))})])
    assert arr[0]["content"] == ["a", "b"]
    assert arr[0]["metadata"]["pair"] == [1, [2, 3]]
    assert type(arr[0]["metadata"]["pair"][1]) is list


def test_subclasses_of_json_types_come_back_as_the_base_type() -> None:
    arr = MessageArray(
        [{"role": Role.USER, "content": "x", "level": Level.HIGH, "extra": OrderedDict(a=1), Role.USER: 1}]
    )
    message = arr[0]
    assert all(type(key) is str for key in message)
    assert type(message["role"]) is str
    assert message["role"] == "user"
    assert type(message["level"]) is int
    assert message["level"] == 3
    assert type(message["extra"]) is dict
    assert arr.count("user") == 1


def test_model_dump_style_messages_with_none_fields_are_accepted_as_they_are() -> None:
    # What openai's ChatCompletionMessage.model_dump() produces.
    dumped_call = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": [{"id": "call_1", "function": {"arguments": '{"q": "x"}', "name": "search"}, "type": "function"}],
    }
    dumped_text = {**dumped_call, "content": "done", "tool_calls": None}
    arr = MessageArray([user(), dumped_call, tool("call_1"), dumped_text])
    assert_same(arr[1], dumped_call)
    assert_same(arr[3], dumped_text)


def test_tool_calls_may_carry_extra_keys() -> None:
    extra_call = {**call(), "index": 0, "function": {"name": "f", "arguments": "{}", "strict": None}}
    arr = MessageArray([calling(extra_call)])
    assert_same(arr[0]["tool_calls"], [extra_call])


def test_every_role_is_accepted() -> None:
    messages = [system(), developer(), user(), calling(), tool(), assistant()]
    assert_same(MessageArray(messages).messages(), messages)


def test_anthropic_blocks_are_accepted() -> None:
    messages = [
        assistant(
            [{"type": "text", "text": "let me look"}, {"type": "tool_use", "id": "tu_1", "name": "f", "input": {}}]
        ),
        user([{"type": "tool_result", "tool_use_id": "tu_1", "content": [{"type": "text", "text": "42"}]}]),
        user([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]),
    ]
    assert_same(MessageArray(messages).messages(), messages)


# ---- no aliasing --------------------------------------------------------------------------------


def test_changing_the_given_dict_afterwards_changes_nothing_stored() -> None:
    message = user("before", metadata={"tags": ["a"]})
    arr = MessageArray()
    arr.append(message)
    message["content"] = "after"
    message["metadata"]["tags"].append("b")
    message["new"] = 1
    assert arr[0] == user("before", metadata={"tags": ["a"]})


def test_changing_a_returned_dict_changes_nothing_stored() -> None:
    arr = MessageArray([user("x", metadata={"tags": ["a"]})])
    for got in (arr[0], arr.messages()[0], arr.all_messages()[0], arr.by_role("user")[0], arr.snapshot(0).messages[0]):
        got["content"] = "changed"
        got["metadata"]["tags"].clear()
    assert arr[0] == user("x", metadata={"tags": ["a"]})


def test_reading_the_same_message_again_after_changing_it_gives_the_stored_one() -> None:
    # Small reads go through a cache of decoded messages: what it hands out must be a fresh copy,
    # nested lists and dicts included, however often the same message is read.
    tool_call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    stored = [user("q", metadata={"tags": ["a"]}), assistant(None, tool_calls=[tool_call])]
    arr = MessageArray(stored)
    for _ in range(3):
        for got in (arr[0], arr.recent(1, role="user")[0], arr[:1][0]):
            got["content"] = "changed"
            got["metadata"]["tags"].append("b")
        for got in (arr[1], arr.recent(1, role="assistant")[0], arr.recent(2)[1]):
            got["tool_calls"][0]["function"]["name"] = "g"
            got["tool_calls"].append({})
    assert arr.messages() == stored
    assert arr.recent(2) == stored
    assert arr[0]["metadata"] is not arr[0]["metadata"]
    assert arr[1]["tool_calls"][0] is not arr[1]["tool_calls"][0]


def test_many_distinct_small_reads_stay_exact() -> None:
    # More distinct messages than the decoded cache keeps, read in small and large reads mixed.
    stored = [user(f"m{i}", n=i) if i % 2 else assistant(f"a{i}", parts=[i, {"k": i}]) for i in range(300)]
    arr = MessageArray(stored)
    for i in range(0, 300, 7):
        assert arr[i] == stored[i]
        assert arr.recent(3) == stored[-3:]
        assert arr[i : i + 5] == stored[i : i + 5]
    assert arr.messages() == stored


def test_each_read_returns_a_fresh_dict() -> None:
    arr = MessageArray([user()])
    assert arr[0] is not arr[0]
    assert arr.messages()[0] is not arr.messages()[0]


# ---- timestamps ---------------------------------------------------------------------------------


def test_the_time_of_append_is_recorded_beside_the_message_not_in_it() -> None:
    arr = MessageArray([user()])
    assert "timestamp" not in arr[0]
    assert arr.between(None, None) == [user()]


def test_a_numeric_timestamp_key_wins_and_milliseconds_are_converted() -> None:
    seconds, millis = user("s", timestamp=100), user("ms", timestamp=200_000_000_000)
    arr = MessageArray([seconds, millis, user("float", timestamp=150.5), user("bool", timestamp=True)])
    assert arr.between(99, 101) == [seconds]
    assert arr.between(199_999_999, 200_000_001) == [millis]
    assert [m["content"] for m in arr.between(150, 151)] == ["float"]
    assert arr[1]["timestamp"] == 200_000_000_000  # the message itself is unchanged


def test_a_timestamp_of_any_int_size_is_numeric() -> None:
    huge, negative = user("huge", timestamp=10**30), user("negative", timestamp=-(10**30))
    beyond_i64 = user("2**63 ms", timestamp=2**63)
    arr = MessageArray([huge, negative, beyond_i64])
    assert arr.between(1e26, None) == [huge]  # 10**30 ms is 1e27 s
    assert arr.between(None, -1e29) == [negative]  # negative: not above 1e11, so seconds
    assert arr.between(9e15, 1e16) == [beyond_i64]  # 2**63 ms is about 9.2e15 s
    assert arr.between(0, 1e10) == []


def test_a_non_numeric_timestamp_is_only_data() -> None:
    message = user(timestamp="2026-11-22T10:00:00Z")
    arr = MessageArray([message])
    assert arr[0] == message
    assert arr.between(0, 10**6) == []


# ---- rejection ----------------------------------------------------------------------------------


def _refused(arr: MessageArray, action: Any) -> InvalidMessageError:
    before = arr.to_json()
    with pytest.raises(InvalidMessageError) as caught:
        action()
    assert arr.to_json() == before, "a refused call must leave the array as it was"
    return caught.value


@pytest.mark.parametrize(("message", "place", "word"), INVALID, ids=[str(i) for i in range(len(INVALID))])
def test_an_invalid_message_in_a_list_is_refused_with_its_index_and_field_named(
    message: Any, place: str, word: str
) -> None:
    arr = MessageArray([system(), user()])
    error = _refused(arr, lambda: arr.append([user("a"), assistant("b"), message, user("c")]))
    assert error.path is not None
    assert error.path.startswith(f"messages[2]{place}")
    assert error.path in str(error)
    assert word in error.path or word in str(error)
    assert len(arr.all_messages()) == 2


@pytest.mark.parametrize(("message", "place", "word"), INVALID, ids=[str(i) for i in range(len(INVALID))])
def test_an_invalid_message_is_refused_by_every_entry_point(message: Any, place: str, word: str) -> None:
    arr = MessageArray([system(), user()])
    _refused(arr, lambda: arr.insert(1, [message]))
    _refused(arr, lambda: arr.replace(1, message))
    with pytest.raises(InvalidMessageError):
        MessageArray([user(), message])
    assert arr.batch_index == 0


def test_a_single_invalid_message_is_named_as_message() -> None:
    arr = MessageArray()
    error = _refused(arr, lambda: arr.append({"role": "user"}))
    assert error.path is not None
    assert "content" in error.path


def test_a_list_append_is_all_or_nothing() -> None:
    arr = MessageArray([user("kept")])
    _refused(arr, lambda: arr.append([user(str(i)) for i in range(100)] + [{"role": "user"}]))
    assert arr.all_messages() == [user("kept")]


def test_a_lone_surrogate_is_not_a_storable_string() -> None:
    arr = MessageArray()
    error = _refused(arr, lambda: arr.append([user("\ud800")]))
    assert error.path == "messages[0].content"


def test_a_non_list_container_of_messages_is_refused() -> None:
    arr = MessageArray()
    for bad in ("user: hi", 5, b"x", None):
        _refused(arr, lambda bad=bad: arr.append(bad))


def test_any_iterable_of_messages_is_taken_as_a_list() -> None:
    arr = MessageArray(m for m in [user("a"), user("b")])
    arr.append(m for m in [user("c")])
    assert [m["content"] for m in arr] == ["a", "b", "c"]


def test_an_empty_list_appends_nothing() -> None:
    arr = MessageArray([user()])
    before = arr.to_json()
    assert arr.append([]) is None
    assert arr.to_json() == before
    assert len(arr) == 1


def test_invalid_input_errors_are_memci_errors_and_value_errors() -> None:
    with pytest.raises(MemciError):
        MessageArray([{"role": "nobody", "content": ""}])
    with pytest.raises(ValueError, match=r"messages\[0\]\.role"):
        MessageArray([{"role": "nobody", "content": ""}])


def test_a_tool_description_must_be_a_string_or_a_system_message() -> None:
    assert MessageArray(tool_description="Tools: f").tool_description == system("Tools: f")
    assert MessageArray(tool_description=developer("Tools: f")).tool_description == developer("Tools: f")
    with pytest.raises(InvalidMessageError) as caught:
        MessageArray(tool_description=user("Tools: f"))
    assert caught.value.path == "tool_description.role"
    with pytest.raises(InvalidMessageError):
        MessageArray(tool_description=["Tools: f"])  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError):
        MessageArray(tool_description={"role": "system"})


def test_exact_tells_apart_what_equality_does_not() -> None:
    # The helper every round-trip test relies on.
    assert {"a": 1, "b": 2} == {"b": 2, "a": 1}
    assert exact({"a": 1, "b": 2}) != exact({"b": 2, "a": 1})
    assert exact([1]) != exact([1.0]) != exact([True])
    assert json.loads(exact({"k": "天"})) == {"k": "天"}
