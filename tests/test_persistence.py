"""Saving and copying carry the whole state, exactly (docs/message-array.md, "Saving, copying")."""

from __future__ import annotations

import copy
import io
import json
import pickle
import re
from collections.abc import Callable
from typing import Any

import pytest
from factories import assert_same, contents, dialogue, system, user, valid_messages
from hypothesis import given
from hypothesis import strategies as st
from memci import InvalidMessageError, MemciError, MessageArray, StateError

Restore = Callable[[MessageArray], MessageArray]

WAYS: dict[str, Restore] = {
    "json": lambda a: type(a).from_json(a.to_json()),
    "pickle": lambda a: pickle.loads(pickle.dumps(a)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}


def worked(tool_description: Any = "Tools: f") -> MessageArray:
    """An array with history: batches, a replaced message, marks, explicit and append timestamps."""
    arr = MessageArray(
        [*dialogue(3), user("stamped", timestamp=1234.5, meta={"天": [1, 2.5, None, True, 10**30]})],
        tool_description=tool_description,
    )
    arr.mark(2, "pin")
    arr.mark(-1, "stamped")
    arr.truncate(keep_last=6)
    arr.replace(0, user("replacement"))
    arr.checkpoint("cp")
    arr.filter(roles=["user", "assistant"])
    return arr


def assert_same_state(got: MessageArray, want: MessageArray) -> None:
    assert_same(got.messages(), want.messages())
    assert_same(got.all_messages(), want.all_messages())
    assert got.stats() == want.stats()
    assert got.tool_description == want.tool_description
    for b in range(want.batch_index):
        assert got.snapshot(b) == want.snapshot(b)
    for tag in ("pin", "stamped"):
        assert got.marked(tag) == want.marked(tag)
    assert got.between(1234, 1235) == want.between(1234, 1235)
    assert got.between(None, 10**10) == want.between(None, 10**10)


@pytest.mark.parametrize("way", WAYS)
def test_the_whole_state_survives(way: str) -> None:
    arr = worked()
    assert_same_state(WAYS[way](arr), arr)


@pytest.mark.parametrize("way", WAYS)
def test_the_restored_array_behaves_the_same_afterwards(way: str) -> None:
    arr = worked()
    restored = WAYS[way](arr)
    for each in (arr, restored):
        each.clear()
        each.append(user("after"))
        each.rollback(1)
    assert_same_state(restored, arr)
    restored.clear(keep_system=False)
    assert restored.messages() == [system("Tools: f")], "the tool description is still known"


@pytest.mark.parametrize("way", WAYS)
def test_a_restored_array_is_independent(way: str) -> None:
    arr = worked()
    restored = WAYS[way](arr)
    restored.append(user("only in the copy"))
    restored.rollback(0)
    restored.mark(0, "copy")
    assert arr.batch_index == 4
    assert user("only in the copy") not in arr.all_messages()
    assert arr.marked("copy") == []


@pytest.mark.parametrize("way", WAYS)
def test_an_empty_array_survives(way: str) -> None:
    restored = WAYS[way](MessageArray())
    assert restored.messages() == []
    assert restored.batch_index == 0
    assert restored.tool_description is None


@given(messages=st.lists(valid_messages(), max_size=5), cut=st.integers(0, 5))
def test_json_round_trip_of_generated_conversations(messages: list[dict[str, Any]], cut: int) -> None:
    arr = MessageArray(messages)
    arr.truncate(keep_last=cut)
    restored = MessageArray.from_json(arr.to_json())
    assert_same(restored.all_messages(), messages)
    assert_same(restored.snapshot(0).messages, messages)
    assert_same(restored.messages(), arr.messages())


def test_to_json_is_json_text() -> None:
    text = worked().to_json()
    assert isinstance(json.loads(text), dict | list)
    assert MessageArray.from_json(MessageArray.from_json(text).to_json()).to_json() == text


class OnlyMemci(pickle.Unpickler):
    """Refuses to load any global but the two memci names that restore an array."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in {("memci.array", "_restore"), ("memci.array", "MessageArray")}:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed")


def test_pickle_carries_json_text_and_no_other_python_object() -> None:
    arr = worked()
    data = pickle.dumps(arr)
    restored = OnlyMemci(io.BytesIO(data)).load()
    assert_same_state(restored, arr)
    assert arr.to_json().encode() in data, "the state travels as the to_json() text"


class Sub(MessageArray):
    __slots__ = ()


def test_subclasses_restore_as_themselves() -> None:
    arr = Sub([user()])
    for way in WAYS.values():
        assert type(way(arr)) is Sub


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"version": 999}', "null", "{}"])
def test_from_json_refuses_what_to_json_did_not_write(text: str) -> None:
    with pytest.raises(StateError):
        MessageArray.from_json(text)


def _tampered(change: Callable[[dict[str, Any]], object]) -> str:
    state = json.loads(worked().to_json())
    change(state)
    return json.dumps(state)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.update(visible=[10**6]),
        lambda s: s.update(visible=[-1]),
        lambda s: s.update(visible=[0, 0]),
        lambda s: s.update(timestamps=s["timestamps"][:1]),
        lambda s: s.update(tool_description=10**6),
        lambda s: s["batches"][0].update(visible=[10**6]),
        lambda s: s["marks"].update(pin=[10**6]),
    ],
    ids=["unknown id", "negative id", "repeated id", "timestamps", "tool description", "batch", "mark"],
)
def test_from_json_refuses_an_inconsistent_state(change: Callable[[dict[str, Any]], object]) -> None:
    with pytest.raises(StateError):
        MessageArray.from_json(_tampered(change))


def test_from_json_checks_every_stored_message() -> None:
    with pytest.raises(InvalidMessageError):
        MessageArray.from_json(_tampered(lambda s: s["messages"][0].pop("role")))


def test_from_json_needs_a_string() -> None:
    with pytest.raises(MemciError):
        MessageArray.from_json(b"{}")  # type: ignore[arg-type]


def test_round_trip_keeps_marks_on_hidden_messages() -> None:
    arr = MessageArray([user("a"), user("b")])
    arr.mark(0, "pin")
    arr.truncate(keep_last=1)
    restored = MessageArray.from_json(arr.to_json())
    restored.rollback(0)
    assert contents(restored.marked("pin")) == ["a"]


@pytest.mark.parametrize(
    ("number", "words"),
    [
        ("1e400", "is not a finite float"),
        ("9" * 5000, "an integer of 5000 digits"),
        ("-1E999", "is not a finite float"),
    ],
    ids=["float overflow", "5000-digit int", "negative overflow"],
)
def test_regression_from_json_refuses_numbers_append_refuses(number: str, words: str) -> None:
    """from_json took 1e400 (stored as infinity, written back as null) and 5,000-digit ints (after
    which every read raised)."""
    text = json.loads(worked().to_json())
    text["messages"][0]["metadata"] = {"n": 0}
    raw = json.dumps(text).replace('"metadata": {"n": 0}', '"metadata": {"n": ' + number + "}")
    with pytest.raises(InvalidMessageError, match=re.escape(words)) as caught:
        MessageArray.from_json(raw)
    assert "messages[0].metadata.n" in str(caught.value)


def test_regression_an_int_subclass_is_stored_as_the_plain_int() -> None:
    """An int subclass with its own __str__ made to_json write invalid JSON."""

    class Odd(int):
        def __str__(self) -> str:
            return "not a number"

    big = Odd(10**30)
    arr = MessageArray([{"role": "user", "content": "x", "n": big, "m": Odd(3)}])
    text = arr.to_json()
    assert json.loads(text)["messages"][0]["n"] == 10**30
    restored = MessageArray.from_json(text)
    assert restored[0] == {"role": "user", "content": "x", "n": 10**30, "m": 3}
    assert type(restored[0]["n"]) is int
