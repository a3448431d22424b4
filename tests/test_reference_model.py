"""MessageArray behaves like the reference model (tests/reference.py) under random operation
sequences: after every step both hold the same visible and stored messages, batches, marks and
query answers, and a call that fails on one fails on the other with the same error class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from factories import INVALID, ROLES, WORDS, assert_same, dialogue, numbered, valid_messages
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from memci import InvalidMessageError, MemciError, MessageArray, Stats, ops
from reference import ReferenceArray, text_of

TOOL_DESCRIPTIONS: list[str | dict[str, Any]] = [
    "Tools: search(q), weather(city)",
    {"role": "developer", "content": "工具: 天气(city)"},
    {"role": "system", "content": [{"type": "text", "text": "Tools: alpha"}], "name": "tools"},
]
TAGS = ("keep", "pin")
# Time bounds far from now, so that messages stamped at append time are on a known side of them.
BOUNDS = (None, 0, 500, 1000.5, 1.5e8, 2e8)
KEYWORDS = (*WORDS, "天", "a", "\n", "")


def described(make: Callable[[], ops.Operation]) -> str:
    """The batch description of a config, or a placeholder when the config is invalid (the
    reference then raises on its own before it would store it)."""
    try:
        return make().describe()
    except MemciError:
        return "(invalid)"


def same_outcome(ref_call: Callable[[], Any], real_call: Callable[[], Any]) -> tuple[Any, Any]:
    """Run both calls; they must both succeed or both raise the same MemciError subclass."""
    outcomes = []
    for call in (ref_call, real_call):
        try:
            outcomes.append((call(), None))
        except MemciError as exc:
            outcomes.append((None, type(exc)))
    (ref_result, ref_error), (real_result, real_error) = outcomes
    assert real_error is ref_error, f"reference raised {ref_error}, MessageArray raised {real_error}"
    return ref_result, real_result


def positions(size: int) -> st.SearchStrategy[int]:
    """Indices around the valid ones: one past each end included."""
    return st.integers(-size - 1, size)


class ArrayVersusReference(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.real: MessageArray | None = None
        self.ref = ReferenceArray()

    @property
    def arr(self) -> MessageArray:
        assert self.real is not None
        return self.real

    @initialize(
        messages=st.lists(valid_messages(), max_size=8),
        tool_description=st.none() | st.sampled_from(TOOL_DESCRIPTIONS),
    )
    def build(self, messages: list[dict[str, Any]], tool_description: str | dict[str, Any] | None) -> None:
        self.real = MessageArray(messages, tool_description=tool_description)
        as_message = {"role": "system", "content": tool_description} if isinstance(tool_description, str) else None
        self.ref = ReferenceArray.build(messages, as_message or tool_description)

    # ---- operations ------------------------------------------------------------------------------

    @rule(message=valid_messages())
    def append_one(self, message: dict[str, Any]) -> None:
        same_outcome(lambda: self.ref.append([message]), lambda: self.arr.append(message))

    @rule(messages=st.lists(valid_messages(), max_size=4))
    def append_list(self, messages: list[dict[str, Any]]) -> None:
        same_outcome(lambda: self.ref.append(messages), lambda: self.arr.append(messages))

    @rule(data=st.data(), messages=st.lists(valid_messages(), max_size=3))
    def insert(self, data: st.DataObject, messages: list[dict[str, Any]]) -> None:
        position = data.draw(st.integers(-1, len(self.ref.visible) + 1), label="position")
        description = described(lambda: ops.Insert(position, messages))
        same_outcome(
            lambda: self.ref.insert(position, messages, description), lambda: self.arr.insert(position, messages)
        )

    @rule(data=st.data(), message=valid_messages())
    def replace(self, data: st.DataObject, message: dict[str, Any]) -> None:
        index = data.draw(positions(len(self.ref.visible)), label="index")
        description = described(lambda: ops.Replace(index, message))
        same_outcome(lambda: self.ref.replace(index, message, description), lambda: self.arr.replace(index, message))

    @rule(
        data=st.data(),
        cuts=st.fixed_dictionaries(
            {
                name: st.none() | st.integers(-1, 10)
                for name in ("keep_first", "keep_last", "remove_first", "remove_last")
            }
        ),
        role=st.none() | st.sampled_from(ROLES),
    )
    def truncate(self, data: st.DataObject, cuts: dict[str, int | None], role: str | None) -> None:
        bounds = data.draw(st.none() | st.tuples(st.integers(-1, 10), st.integers(-1, 10)), label="range")
        form = data.draw(st.sampled_from([tuple, list, lambda b: {"start": b[0], "end": b[1]}]), label="range form")
        given = None if bounds is None else form(bounds)
        description = described(lambda: ops.Truncate(**cuts, range=given, role=role))
        same_outcome(
            lambda: self.ref.truncate(description, **cuts, range=bounds, role=role),
            lambda: self.arr.truncate(**cuts, range=given, role=role),
        )

    @rule(keep_system=st.booleans())
    def clear(self, keep_system: bool) -> None:
        description = ops.Clear(keep_system).describe()
        same_outcome(lambda: self.ref.clear(description, keep_system), lambda: self.arr.clear(keep_system))

    @rule(
        roles=st.none() | st.lists(st.sampled_from(ROLES), max_size=3),
        contains=st.none() | st.lists(st.sampled_from(KEYWORDS), max_size=2),
        excludes=st.none() | st.lists(st.sampled_from(KEYWORDS), max_size=2),
    )
    def filter(self, roles: list[str] | None, contains: list[str] | None, excludes: list[str] | None) -> None:
        description = ops.Filter(roles, contains, excludes).describe()
        same_outcome(
            lambda: self.ref.filter(description, roles or [], contains or [], excludes or []),
            lambda: self.arr.filter(roles, contains, excludes),
        )

    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        batch = data.draw(st.integers(-1, self.ref.batch_index + 1), label="batch")
        same_outcome(lambda: self.ref.rollback(batch), lambda: self.arr.rollback(batch))

    @rule(description=st.none() | st.text(max_size=10))
    def checkpoint(self, description: str | None) -> None:
        text = ops.Checkpoint(description).describe()
        want, got = same_outcome(lambda: self.ref.checkpoint(text), lambda: self.arr.checkpoint(description))
        assert got == want

    @rule(data=st.data(), tag=st.sampled_from(TAGS))
    def mark(self, data: st.DataObject, tag: str) -> None:
        index = data.draw(positions(len(self.ref.visible)), label="index")
        same_outcome(lambda: self.ref.mark(index, tag), lambda: self.arr.mark(index, tag))

    @rule(data=st.data(), valid=st.lists(valid_messages(), max_size=3), invalid=st.sampled_from(INVALID))
    def append_invalid(self, data: st.DataObject, valid: list[dict[str, Any]], invalid: tuple[Any, str, str]) -> None:
        message, place, _ = invalid
        at = data.draw(st.integers(0, len(valid)), label="at")
        with pytest.raises(InvalidMessageError) as caught:
            self.arr.append([*valid[:at], message, *valid[at:]])
        assert (caught.value.path or "").startswith(f"messages[{at}]{place}")

    @rule(invalid=st.sampled_from(INVALID))
    def insert_invalid(self, invalid: tuple[Any, str, str]) -> None:
        with pytest.raises(InvalidMessageError):
            self.arr.insert(0, [invalid[0]])

    @precondition(lambda self: len(self.ref.visible) > 0)
    @rule(invalid=st.sampled_from(INVALID))
    def replace_invalid(self, invalid: tuple[Any, str, str]) -> None:
        with pytest.raises(InvalidMessageError):
            self.arr.replace(0, invalid[0])

    # ---- after every step ------------------------------------------------------------------------

    @precondition(lambda self: self.real is not None)
    @invariant()
    def same_state(self) -> None:
        arr, ref = self.arr, self.ref
        visible = ref.messages()
        assert_same(arr.messages(), visible)
        assert_same(arr.all_messages(), ref.all_messages())
        assert_same(arr.tool_description, ref.tool_description())
        assert len(arr) == len(visible)
        assert arr.batch_index == ref.batch_index
        assert arr.stats() == Stats(*ref.stats())
        assert_same(list(arr), visible)
        assert_same(arr[::2], visible[::2])
        assert_same(arr[::-1], visible[::-1])
        assert_same(arr[1:-1], visible[1:-1])
        for b in range(ref.batch_index + 1):
            snap = arr.snapshot(b)
            assert_same((snap.batch_index, snap.messages, snap.message_count, snap.description), ref.snapshot(b))

    @precondition(lambda self: self.real is not None)
    @invariant()
    def same_answers(self) -> None:
        arr, ref = self.arr, self.ref
        assert arr.indices().tolist() == ref.indices()
        for role in ROLES:
            assert_same(arr.by_role(role), ref.by_role(role))
            assert arr.count(role) == ref.count(role)
            assert arr.indices(role).tolist() == ref.indices(role)
            for n in (0, 1, 3):
                assert_same(arr.recent(n, role=role), ref.recent(n, [role]))
            assert_same(arr.role_range(role, 1, 3), ref.role_range(role, 1, 3))
            assert_same(arr.role_range(role, -2), ref.role_range(role, -2, None))
        assert_same(arr.recent(2), ref.recent(2))
        assert_same(arr.recent(3, roles=["user", "tool"]), ref.recent(3, ["user", "tool"]))
        assert_same(arr.recent(4, roles=["tool", "system", "tool"]), ref.recent(4, ["tool", "system", "tool"]))
        for tag in TAGS:
            assert_same(arr.marked(tag), ref.marked(tag))
            assert_same(arr.marked(tag, role="user"), ref.marked(tag, role="user"))
        for start in BOUNDS:
            for end in BOUNDS:
                assert_same(arr.between(start, end), ref.between(start, end))
        assert_same(arr.between(0, 1000.5, role="assistant"), ref.between(0, 1000.5, role="assistant"))


TestArrayVersusReference = ArrayVersusReference.TestCase


# ---- the reference model against the examples of docs/message-array.md --------------------------


def test_reference_truncate_applies_the_cuts_in_order_like_slices() -> None:
    ref = ReferenceArray.build(numbered(10), None)
    ref.truncate("t", keep_first=8, keep_last=3)
    assert [m["content"] for m in ref.messages()] == ["5", "6", "7"]


def test_reference_keep_last_zero_keeps_nothing() -> None:
    ref = ReferenceArray.build(numbered(4), None)
    ref.truncate("t", keep_last=0)
    assert ref.messages() == []


def test_reference_rollback_restores_the_ended_batch_and_discards_later_ones() -> None:
    ref = ReferenceArray.build(dialogue(2), None)
    first = ref.checkpoint("cp")
    ref.clear("clear", keep_system=True)
    ref.truncate("t", keep_last=1)
    ref.rollback(first)
    assert ref.messages() == dialogue(2)
    assert ref.batch_index == first
    assert len(ref.all_messages()) == len(dialogue(2))


def test_reference_text_of_blocks_joins_their_text_pieces_with_newlines() -> None:
    message = {
        "role": "user",
        "content": [
            "plain",
            {"type": "text", "text": "hello"},
            {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "inner"}]},
            {"type": "tool_use", "id": "t", "name": "f", "input": {"a": "x", "b": ["y", {"c": "z"}], "n": 1}},
            {"type": "image", "source": {"type": "url", "url": "u"}},
        ],
    }
    assert text_of(message) == "plain\nhello\ninner\nf\nx\ny\nz"
