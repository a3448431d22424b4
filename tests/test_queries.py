"""Reading the visible messages: indexing, roles, recency, time, marks
(docs/message-array.md, "Queries")."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest
from factories import assistant, calling, contents, developer, dialogue, numbered, system, tool, user
from memci import InvalidOperationError, MessageArray, PositionError


@pytest.fixture
def talk() -> MessageArray:
    """system, developer, then 3 turns of user / tool call / tool result / answer (14 messages)."""
    return MessageArray([system(), developer(), *dialogue(3)[1:]])


# ---- len, [], iter ------------------------------------------------------------------------------


def test_len_counts_the_visible_messages() -> None:
    arr = MessageArray(numbered(5))
    arr.truncate(keep_last=2)
    assert len(arr) == 2
    assert len(MessageArray()) == 0


def test_an_empty_array_is_falsy() -> None:
    assert not MessageArray()
    assert MessageArray(numbered(1))


def test_indexing_counts_negatives_from_the_end() -> None:
    arr = MessageArray(numbered(5))
    assert arr[0] == user("0")
    assert arr[-1] == user("4")
    assert arr[np.int64(2)] == user("2")


@pytest.mark.parametrize("index", [5, -6, 10**20])
def test_indexing_out_of_range_is_a_position_error(index: int) -> None:
    arr = MessageArray(numbered(5))
    with pytest.raises(PositionError):
        arr[index]
    with pytest.raises(IndexError):
        arr[index]


@pytest.mark.parametrize("key", ["0", 1.0, None, True, slice("a", None), slice(0, 1, 0)])
def test_indexing_needs_an_int_or_a_slice_of_ints(key: Any) -> None:
    with pytest.raises(InvalidOperationError):
        MessageArray(numbered(2))[key]


@pytest.mark.parametrize(
    "key",
    [
        slice(None),
        slice(1, 4),
        slice(-3, None),
        slice(None, -2),
        slice(4, 1),
        slice(None, None, 2),
        slice(1, None, 3),
        slice(None, None, -1),
        slice(-2, 0, -2),
        slice(100, 200),
        slice(-100, 100),
    ],
)
def test_slicing_follows_list_slicing(key: slice) -> None:
    arr = MessageArray(numbered(7))
    assert arr[key] == numbered(7)[key]


def test_iteration_sees_the_messages_as_they_were_when_it_started() -> None:
    arr = MessageArray(numbered(3))
    seen = []
    for message in arr:
        seen.append(message["content"])
        arr.append(user("more"))
        arr.truncate(keep_last=1)
    assert seen == ["0", "1", "2"]


def test_repr_shows_the_counts() -> None:
    arr = MessageArray(numbered(3))
    arr.truncate(keep_last=1)
    assert repr(arr) == "<memci.MessageArray: 1 visible of 3 stored, batch 1>"


# ---- roles --------------------------------------------------------------------------------------


def test_by_role_keeps_system_and_developer_apart(talk: MessageArray) -> None:
    assert talk.by_role("system") == [system()]
    assert talk.by_role("developer") == [developer()]
    assert contents(talk.by_role("tool")) == ["r0", "r1", "r2"]
    assert contents(talk.by_role("user")) == ["q0", "q1", "q2"]


def test_recent_returns_the_last_n_oldest_first(talk: MessageArray) -> None:
    assert contents(talk.recent(2, role="user")) == ["q1", "q2"]
    assert talk.recent(2) == [tool("call_2", "r2"), assistant("a2")]
    assert contents(talk.recent(100, role="user")) == ["q0", "q1", "q2"]
    assert talk.recent(0) == []
    assert talk.recent(0, role="user") == []


def test_recent_of_several_roles(talk: MessageArray) -> None:
    assert contents(talk.recent(3, roles=["user", "tool"])) == ["r1", "q2", "r2"]
    assert talk.recent(3, roles=[]) == talk.recent(3)


def test_recent_returns_each_message_once_even_when_a_role_is_repeated(talk: MessageArray) -> None:
    assert contents(talk.recent(3, roles=["user", "user"])) == ["q0", "q1", "q2"]
    assert talk.recent(100, roles=["system", "tool", "system"]) == talk.by_role("system") + talk.by_role("tool")


def test_recent_after_cuts_sees_only_visible_messages(talk: MessageArray) -> None:
    talk.truncate(remove_last=4)
    assert contents(talk.recent(5, role="user")) == ["q0", "q1"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n": -1},
        {"n": True},
        {"n": 1, "role": "robot"},
        {"n": 1, "roles": ["user", "robot"]},
        {"n": 1, "role": "user", "roles": ["tool"]},
    ],
)
def test_recent_refuses_bad_arguments(talk: MessageArray, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidOperationError):
        talk.recent(**kwargs)


def test_role_range_is_a_slice_of_by_role(talk: MessageArray) -> None:
    users = talk.by_role("user")
    for start, end in [(0, 2), (1, 3), (-2, None), (0, -1), (-1, -2), (5, 9), (-9, 9), (2, 1)]:
        assert talk.role_range("user", start, end) == users[start:end]
    assert talk.role_range("user") == users


def test_count_by_role(talk: MessageArray) -> None:
    assert talk.count() == 14
    assert talk.count("assistant") == 6
    assert talk.count("developer") == 1


def test_indices_are_positions_in_the_visible_list(talk: MessageArray) -> None:
    positions = talk.indices("user")
    assert positions.dtype == np.int64
    assert positions.tolist() == [2, 6, 10]
    assert talk.indices().tolist() == list(range(14))
    positions[0] = 99
    assert positions.flags.writeable
    assert talk.indices("user").tolist() == [2, 6, 10]


def test_indices_follow_the_cuts(talk: MessageArray) -> None:
    talk.truncate(remove_first=2)
    assert talk.indices("user").tolist() == [0, 4, 8]
    talk.insert(0, user("new"))
    assert talk.indices("user").tolist() == [0, 1, 5, 9]
    assert MessageArray().indices("tool").tolist() == []


@pytest.mark.parametrize(
    "query",
    [
        lambda a: a.by_role("robot"),
        lambda a: a.count("robot"),
        lambda a: a.indices("robot"),
        lambda a: a.role_range("robot", 0, 1),
        lambda a: a.recent(1, role="robot"),
        lambda a: a.between(None, None, role="robot"),
        lambda a: a.marked("tag", role="robot"),
    ],
    ids=["by_role", "count", "indices", "role_range", "recent", "between", "marked"],
)
def test_an_unknown_role_in_a_query_is_an_invalid_operation(talk: MessageArray, query: Any) -> None:
    with pytest.raises(InvalidOperationError, match="robot"):
        query(talk)


# ---- time ---------------------------------------------------------------------------------------


def stamped() -> MessageArray:
    return MessageArray([user(str(t), timestamp=t) for t in (100, 200, 300)] + [assistant("a", timestamp=250)])


def test_between_is_half_open() -> None:
    arr = stamped()
    assert contents(arr.between(100, 300)) == ["100", "200", "a"]
    assert contents(arr.between(200, 250)) == ["200"]


def test_between_with_open_bounds_and_a_role() -> None:
    arr = stamped()
    assert contents(arr.between(None, 200)) == ["100"]
    assert contents(arr.between(250, None)) == ["300", "a"]
    assert contents(arr.between(None, None, role="user")) == ["100", "200", "300"]


def test_between_takes_datetimes_aware_and_naive() -> None:
    arr = stamped()
    aware = dt.datetime.fromtimestamp(150, tz=dt.UTC)
    naive = dt.datetime.fromtimestamp(250)  # local time, as datetime.timestamp() reads it
    assert contents(arr.between(aware, naive)) == ["200"]


def test_between_sees_append_time_for_messages_without_their_own() -> None:
    before = dt.datetime.now(tz=dt.UTC)
    arr = MessageArray([user("now")])
    assert arr.between(before, None) == [user("now")]
    assert arr.between(None, before) == []


def test_between_refuses_other_bounds() -> None:
    with pytest.raises(InvalidOperationError, match="start"):
        stamped().between("yesterday", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="end"):
        stamped().between(None, True)


# ---- marks --------------------------------------------------------------------------------------


def test_mark_tags_the_visible_message_and_marked_lists_them_in_order(talk: MessageArray) -> None:
    talk.mark(-1, "answer")
    talk.mark(2, "question")
    talk.mark(5, "answer")
    assert contents(talk.marked("answer")) == ["a0", "a2"]
    assert contents(talk.marked("answer", role="user")) == []
    assert talk.marked("nothing") == []


def test_a_mark_belongs_to_the_message_and_survives_rollback() -> None:
    arr = MessageArray(numbered(3))
    arr.truncate(keep_last=1)
    arr.mark(0, "pin")
    assert contents(arr.marked("pin")) == ["2"]
    arr.rollback(0)
    assert contents(arr.marked("pin")) == ["2"]
    arr.truncate(keep_first=1)
    assert arr.marked("pin") == []


def test_mark_out_of_range_is_a_position_error() -> None:
    arr = MessageArray(numbered(2))
    with pytest.raises(PositionError):
        arr.mark(2, "x")
    with pytest.raises(InvalidOperationError):
        arr.mark(0, 5)  # type: ignore[arg-type]
    assert arr.marked("x") == []


def test_a_message_may_carry_several_tags() -> None:
    arr = MessageArray([user(), calling(), system()])
    arr.mark(1, "a")
    arr.mark(1, "b")
    arr.mark(1, "a")
    assert arr.marked("a") == arr.marked("b") == [calling()]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([], ["Tools: f"]),
        ([user()], ["Tools: f", "hello"]),
        ([system("s"), developer("d"), user(), system("late")], ["s", "d", "Tools: f", "hello", "late"]),
    ],
)
def test_the_tool_description_goes_after_the_leading_system_and_developer_messages(
    messages: list[dict[str, Any]], expected: list[str]
) -> None:
    arr = MessageArray(messages, tool_description="Tools: f")
    assert contents(arr.messages()) == expected
    assert arr.batch_index == 0


def test_the_tool_description_is_readable() -> None:
    assert MessageArray().tool_description is None
    arr = MessageArray([system("prompt"), user()], tool_description="Tools: f")
    assert arr.tool_description == system("Tools: f")
    assert arr.messages() == [system("prompt"), system("Tools: f"), user()]
    assert contents(arr.all_messages()) == ["prompt", "hello", "Tools: f"]
