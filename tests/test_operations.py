"""What each operation does to the visible messages (docs/message-array.md, "Operations")."""

from __future__ import annotations

from typing import Any

import pytest
from factories import (
    assistant,
    call,
    calling,
    contents,
    developer,
    dialogue,
    numbered,
    system,
    tool,
    user,
)
from hypothesis import given
from hypothesis import strategies as st
from memci import BatchError, InvalidOperationError, MessageArray, OperationResult, PositionError, Stats, ops


def unchanged_on_error(arr: MessageArray, error: type[Exception], action: Any) -> None:
    before = arr.to_json()
    with pytest.raises(error):
        action()
    assert arr.to_json() == before


# ---- APPEND -------------------------------------------------------------------------------------


def test_append_adds_at_the_end_and_opens_no_batch() -> None:
    arr = MessageArray(numbered(2))
    arr.append(user("2"))
    result = arr.execute(ops.Append([user("3"), user("4")]))
    assert contents(arr.messages()) == ["0", "1", "2", "3", "4"]
    assert arr.batch_index == 0
    assert result == OperationResult("append", 0, 5, Stats(5, 5, 1, 0))


# ---- INSERT -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("position", "expected"), [(0, "x01"), (1, "0x1"), (2, "01x")])
def test_insert_puts_messages_before_position_including_at_len(position: int, expected: str) -> None:
    arr = MessageArray(numbered(2))
    arr.insert(position, user("x"))
    assert "".join(contents(arr.messages())) == expected
    assert arr.batch_index == 1


def test_insert_of_a_list_keeps_its_order_and_stores_it_after_everything_else() -> None:
    arr = MessageArray(numbered(3))
    arr.insert(1, [user("a"), user("b")])
    assert contents(arr.messages()) == ["0", "a", "b", "1", "2"]
    assert contents(arr.all_messages()) == ["0", "1", "2", "a", "b"]


@pytest.mark.parametrize("position", [-1, 3, 100])
def test_insert_outside_0_to_len_is_an_invalid_operation(position: int) -> None:
    arr = MessageArray(numbered(2))
    unchanged_on_error(arr, InvalidOperationError, lambda: arr.insert(position, user()))


def test_insert_of_an_empty_list_still_opens_a_batch() -> None:
    arr = MessageArray(numbered(2))
    result = arr.insert(1, [])
    assert result.affected_batch_index == 1
    assert contents(arr.messages()) == ["0", "1"]


# ---- REPLACE ------------------------------------------------------------------------------------


def test_replace_swaps_the_visible_message_and_keeps_the_old_one_stored() -> None:
    arr = MessageArray(numbered(3))
    result = arr.replace(1, assistant("new"))
    assert contents(arr.messages()) == ["0", "new", "2"]
    assert contents(arr.all_messages()) == ["0", "1", "2", "new"]
    assert result.operation == "replace"
    assert result.affected_batch_index == 1
    assert arr.count("assistant") == 1
    assert arr.count("user") == 2


def test_replace_counts_negative_indices_from_the_end() -> None:
    arr = MessageArray(numbered(3))
    arr.replace(-1, user("last"))
    assert contents(arr.messages()) == ["0", "1", "last"]


@pytest.mark.parametrize("index", [3, -4, 100])
def test_replace_out_of_range_is_a_position_error(index: int) -> None:
    arr = MessageArray(numbered(3))
    unchanged_on_error(arr, PositionError, lambda: arr.replace(index, user()))
    unchanged_on_error(arr, IndexError, lambda: arr.replace(index, user()))


def test_marks_of_a_replaced_message_do_not_carry_over() -> None:
    arr = MessageArray(numbered(2))
    arr.mark(0, "pin")
    arr.replace(0, user("new"))
    assert arr.marked("pin") == []
    arr.rollback(0)
    assert contents(arr.marked("pin")) == ["0"]


# ---- TRUNCATE -----------------------------------------------------------------------------------

TEN = [str(i) for i in range(10)]


@pytest.mark.parametrize(
    ("cuts", "expected"),
    [
        ({"keep_first": 3}, TEN[:3]),
        ({"keep_last": 3}, TEN[7:]),
        ({"remove_first": 3}, TEN[3:]),
        ({"remove_last": 3}, TEN[:7]),
        ({"range": (2, 5)}, TEN[2:5]),
        ({"range": [2, 5]}, TEN[2:5]),
        ({"range": {"start": 2, "end": 5}}, TEN[2:5]),
        ({"range": (5, 2)}, []),
        ({"range": (8, 100)}, TEN[8:]),
        ({"keep_last": 0}, []),
        ({"keep_first": 0}, []),
        ({"remove_first": 0}, TEN),
        ({"remove_last": 0}, TEN),
        ({"keep_first": 100}, TEN),
        ({"keep_last": 100}, TEN),
        ({"remove_first": 100}, []),
        ({"remove_last": 100}, []),
        ({"keep_first": 8, "keep_last": 3}, TEN[5:8]),
        ({"keep_last": 8, "keep_first": 3}, TEN[:3]),  # the order is the fields', not the arguments'
        ({"keep_first": 8, "remove_first": 2, "remove_last": 1}, TEN[2:7]),
        ({"keep_last": 6, "range": (1, 3)}, TEN[5:7]),
        ({"remove_first": 1, "remove_last": 1, "range": (0, 2)}, TEN[1:3]),
    ],
)
def test_truncate_applies_its_cuts_in_order_like_slices(cuts: dict[str, Any], expected: list[str]) -> None:
    arr = MessageArray(numbered(10))
    result = arr.truncate(**cuts)
    assert contents(arr.messages()) == expected
    assert result.message_count == len(expected)
    assert arr.batch_index == 1
    assert contents(arr.all_messages()) == TEN


@given(
    cuts=st.fixed_dictionaries(
        {}, optional={k: st.integers(0, 12) for k in ("keep_first", "keep_last", "remove_first", "remove_last")}
    ),
    bounds=st.none() | st.tuples(st.integers(0, 12), st.integers(0, 12)),
    size=st.integers(0, 10),
)
def test_truncate_equals_the_same_slices_done_by_hand(
    cuts: dict[str, int], bounds: tuple[int, int] | None, size: int
) -> None:
    if not cuts and bounds is None:
        cuts = {"keep_last": size // 2}
    expected = [str(i) for i in range(size)]
    if "keep_first" in cuts:
        expected = expected[: cuts["keep_first"]]
    if "keep_last" in cuts:
        expected = expected[len(expected) - min(cuts["keep_last"], len(expected)) :]
    if "remove_first" in cuts:
        expected = expected[cuts["remove_first"] :]
    if "remove_last" in cuts:
        expected = expected[: max(len(expected) - cuts["remove_last"], 0)]
    if bounds is not None:
        expected = expected[bounds[0] : bounds[1]]
    arr = MessageArray(numbered(size))
    arr.truncate(**cuts, range=bounds)
    assert contents(arr.messages()) == expected


def test_truncate_with_a_role_keeps_only_that_roles_messages() -> None:
    arr = MessageArray(dialogue(4))
    arr.truncate(keep_last=2, role="user")
    assert arr.messages() == [user("q2"), user("q3")]


def test_truncate_with_only_a_role_keeps_every_message_of_that_role() -> None:
    arr = MessageArray(dialogue(3))
    arr.truncate(role="tool")
    assert contents(arr.messages()) == ["r0", "r1", "r2"]


def test_truncate_with_a_role_cuts_within_that_role() -> None:
    arr = MessageArray(dialogue(5))
    arr.truncate(remove_first=1, range=(1, 3), role="assistant")
    # The assistant messages alternate tool calls and answers; skip one, then take [1:3].
    kept = arr.messages()
    assert [m["content"] for m in kept] == [None, "a1"]
    assert kept[0]["tool_calls"][0]["id"] == "call_1"


def test_truncate_with_a_role_that_is_not_visible_keeps_nothing() -> None:
    arr = MessageArray(numbered(3))
    arr.truncate(keep_last=5, role="developer")
    assert arr.messages() == []
    assert arr.batch_index == 1


@pytest.mark.parametrize(
    ("cuts", "field"),
    [
        ({"keep_first": -1}, "keep_first"),
        ({"keep_last": -1}, "keep_last"),
        ({"remove_first": -2}, "remove_first"),
        ({"remove_last": -3}, "remove_last"),
        ({"range": (-1, 3)}, "range.start"),
        ({"range": (1, -3)}, "range.end"),
        ({"keep_last": True}, "keep_last"),
        ({"keep_last": 2.0}, "keep_last"),
        ({"keep_last": "2"}, "keep_last"),
        ({"range": (1, 2, 3)}, "range"),
        ({"range": {"start": 1}}, "range"),
        ({"range": 5}, "range"),
        ({"role": "robot"}, "role"),
        ({"role": 5}, "role"),
        ({}, "at least one"),
        ({"keep_last": None}, "at least one"),
    ],
)
def test_invalid_truncate_arguments_are_refused_naming_the_field(cuts: dict[str, Any], field: str) -> None:
    arr = MessageArray(numbered(3))
    before = arr.to_json()
    with pytest.raises(InvalidOperationError, match=f"^truncate: .*{field}"):
        arr.truncate(**cuts)
    assert arr.to_json() == before


def test_truncate_arguments_are_keyword_only() -> None:
    arr = MessageArray(numbered(3))
    with pytest.raises(TypeError):
        arr.truncate(1)  # type: ignore[misc]
    assert len(arr) == 3


# ---- CLEAR --------------------------------------------------------------------------------------


def test_clear_keeps_the_visible_system_and_developer_messages_in_order() -> None:
    arr = MessageArray([system("s1"), user(), developer("d"), assistant(), system("s2"), tool()])
    result = arr.clear()
    assert arr.messages() == [system("s1"), developer("d"), system("s2")]
    assert result.operation == "clear"
    assert result.affected_batch_index == 1


def test_clear_without_keep_system_leaves_nothing() -> None:
    arr = MessageArray([system(), user(), assistant()])
    arr.clear(keep_system=False)
    assert arr.messages() == []
    assert len(arr.all_messages()) == 3


def test_clear_keeps_only_visible_system_messages() -> None:
    arr = MessageArray([system("hidden"), user("u"), system("shown")])
    arr.truncate(remove_first=1)
    arr.clear()
    assert arr.messages() == [system("shown")]


def test_clear_keeps_a_visible_tool_description_once_where_it_is() -> None:
    arr = MessageArray([system("prompt"), user()], tool_description="Tools: f")
    arr.clear()
    assert arr.messages() == [system("prompt"), system("Tools: f")]


def test_clear_re_adds_a_hidden_tool_description_at_the_end_of_what_is_kept() -> None:
    arr = MessageArray([developer("d"), user()], tool_description="Tools: f")
    arr.filter(roles=["developer", "user"])
    assert system("Tools: f") not in arr.messages()
    arr.clear()
    assert arr.messages() == [developer("d"), system("Tools: f")]
    assert len(arr.all_messages()) == 3, "the tool description is stored once, never again"


def test_clear_without_keep_system_leaves_only_the_tool_description() -> None:
    arr = MessageArray([system("prompt"), user(), assistant()], tool_description=developer("Tools: f"))
    arr.clear(keep_system=False)
    assert arr.messages() == [developer("Tools: f")]


def test_clear_re_adds_the_tool_description_after_it_was_replaced() -> None:
    arr = MessageArray([user()], tool_description="Tools: f")
    assert arr[0] == system("Tools: f")
    arr.replace(0, system("other"))
    arr.clear()
    assert arr.messages() == [system("other"), system("Tools: f")]


@pytest.mark.parametrize("keep_system", [1, "yes", None])
def test_clear_needs_a_bool(keep_system: Any) -> None:
    arr = MessageArray([system(), user()])
    unchanged_on_error(arr, InvalidOperationError, lambda: arr.clear(keep_system))


# ---- FILTER -------------------------------------------------------------------------------------


def test_filter_by_roles() -> None:
    arr = MessageArray(dialogue(2))
    arr.filter(roles=["user", "tool"])
    assert contents(arr.messages()) == ["q0", "r0", "q1", "r1"]


def test_filter_keeps_a_message_containing_any_keyword() -> None:
    arr = MessageArray([user("apple pie"), user("banana"), user("cherry"), user("Apple")])
    arr.filter(content_contains=["apple", "cherry"])
    assert contents(arr.messages()) == ["apple pie", "cherry"]


def test_filter_drops_a_message_containing_any_excluded_keyword() -> None:
    arr = MessageArray([user("apple pie"), user("banana"), user("cherry")])
    arr.filter(content_excludes=["pie", "cherry"])
    assert contents(arr.messages()) == ["banana"]


def test_filter_conditions_all_apply() -> None:
    arr = MessageArray([user("ok apple"), assistant("ok apple"), user("ok pear"), user("apple bad")])
    arr.filter(roles=["user"], content_contains=["apple", "pear"], content_excludes=["bad"])
    assert contents(arr.messages()) == ["ok apple", "ok pear"]


@pytest.mark.parametrize("empty", [None, []])
def test_filter_with_nothing_given_keeps_everything_and_opens_a_batch(empty: list[str] | None) -> None:
    arr = MessageArray(dialogue(1))
    result = arr.filter(roles=empty, content_contains=empty, content_excludes=empty)
    assert arr.messages() == dialogue(1)
    assert result.affected_batch_index == 1


def test_filter_matching_is_case_sensitive_and_works_on_cjk_and_emoji() -> None:
    arr = MessageArray([user("北京天气晴"), user("東京"), user("Error"), user("🙂 fine")])
    arr.filter(content_contains=["天气", "🙂", "error"])
    assert contents(arr.messages()) == ["北京天气晴", "🙂 fine"]


def test_filter_searches_the_text_of_content_blocks() -> None:
    text_block = user([{"type": "text", "text": "needle in text"}])
    string_block = user(["needle as a string block"])
    result_string = user([{"type": "tool_result", "tool_use_id": "t", "content": "needle in result"}])
    result_blocks = user(
        [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "a needle"}]}]
    )
    tool_use = assistant([{"type": "tool_use", "id": "t", "name": "f", "input": {"q": {"deep": ["the needle"]}}}])
    image = user([{"type": "image", "source": {"type": "url", "url": "https://needle.example/x.png"}}])
    arr = MessageArray([text_block, string_block, result_string, result_blocks, tool_use, image])
    arr.filter(content_contains=["needle"])
    assert arr.messages() == [text_block, string_block, result_string, result_blocks, tool_use]


def test_filter_sees_the_tools_a_message_calls() -> None:
    """A tool call's name and its arguments are text, whatever the format: an OpenAI tool call's
    function name and arguments string, an Anthropic tool_use block's name and input strings."""
    by_arguments = calling(call("c1", "search", '{"q": "needle"}'))
    by_name = calling(call("c2", "needle_finder", "{}"))
    by_tool_use = assistant([{"type": "tool_use", "id": "t", "name": "needle_finder", "input": {}}])
    neither = calling(call("c3", "search", '{"q": "hay"}'), content="a haystack")
    history = [user("find it"), by_arguments, by_name, by_tool_use, neither]
    kept = MessageArray(history)
    kept.filter(content_contains="needle")
    assert kept.messages() == [by_arguments, by_name, by_tool_use]
    dropped = MessageArray(history)
    dropped.filter(content_excludes=["needle"])
    assert dropped.messages() == [user("find it"), neither]
    # Where the text is in a key or the call id only, it is not text: a key is never searched.
    keys = MessageArray([calling(call("needle_id", "search", '{"q": "x"}'))])
    keys.filter(content_contains=["needle", "function"])
    assert keys.messages() == []


def test_filter_joins_block_texts_with_a_newline() -> None:
    arr = MessageArray([user([{"type": "text", "text": "ab"}, {"type": "text", "text": "cd"}])])
    arr.filter(content_contains=["bc"])
    assert arr.messages() == []
    arr.rollback(0)
    arr.filter(content_contains=["b\nc"])
    assert len(arr) == 1


def test_a_tool_call_without_content_has_its_name_and_arguments_as_text() -> None:
    arr = MessageArray([calling(), user("y")])  # calls search({"q": "x"})
    arr.filter(content_excludes=["x"])
    assert arr.messages() == [user("y")]
    arr.rollback(0)
    arr.filter(content_contains=["search"])
    assert arr.messages() == [calling()]


def test_filter_takes_a_bare_string_as_a_list_of_one() -> None:
    arr = MessageArray([user("error here"), user("fine"), assistant("error")])
    arr.filter(roles="user", content_contains="error")  # type: ignore[arg-type]
    assert contents(arr.messages()) == ["error here"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"roles": ["robot"]},
        {"roles": [5]},
        {"content_contains": [5]},
        {"content_excludes": [None]},
        {"content_contains": {"a": 1}},
        {"roles": 5},
    ],
)
def test_filter_refuses_unknown_roles_and_non_string_keywords(kwargs: dict[str, Any]) -> None:
    arr = MessageArray(dialogue(1))
    unchanged_on_error(arr, InvalidOperationError, lambda: arr.filter(**kwargs))


# ---- ROLLBACK (more in test_batches.py) -----------------------------------------------------------


def test_rollback_result_names_the_restored_batch() -> None:
    arr = MessageArray(numbered(3))
    arr.truncate(keep_last=1)
    result = arr.rollback(0)
    assert result == OperationResult("rollback", 0, 3, Stats(3, 3, 1, 0))


def test_rollback_to_a_batch_that_does_not_exist_is_a_batch_error() -> None:
    arr = MessageArray(numbered(3))
    unchanged_on_error(arr, BatchError, lambda: arr.rollback(1))
    unchanged_on_error(arr, LookupError, lambda: arr.rollback(1))


# ---- ints of any size -----------------------------------------------------------------------------

HUGE = 10**30


def test_a_count_larger_than_any_array_acts_like_a_large_count() -> None:
    arr = MessageArray(numbered(3))
    arr.truncate(keep_last=HUGE, range=(0, HUGE))
    assert contents(arr.messages()) == ["0", "1", "2"]
    assert len(arr.recent(HUGE)) == 3
    assert len(arr.role_range("user", 0, HUGE)) == 3


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (lambda a: a[HUGE], PositionError),
        (lambda a: a[-HUGE], PositionError),
        (lambda a: a.replace(HUGE, user()), PositionError),
        (lambda a: a.mark(-HUGE, "t"), PositionError),
        (lambda a: a.insert(HUGE, user()), InvalidOperationError),
        (lambda a: a.rollback(HUGE), BatchError),
        (lambda a: a.snapshot(HUGE), BatchError),
    ],
    ids=["getitem", "getitem-negative", "replace", "mark", "insert", "rollback", "snapshot"],
)
def test_an_index_beyond_any_array_is_out_of_range(action: Any, error: type[Exception]) -> None:
    arr = MessageArray(numbered(3))
    unchanged_on_error(arr, error, lambda: action(arr))
