"""Batches: which operations open one, what a snapshot holds, and how rollback and checkpoint
restore a past state (docs/message-array.md, "Batches")."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from factories import assistant, contents, dialogue, numbered, system, user
from memci import (
    BatchError,
    BatchSnapshot,
    InvalidMessageError,
    InvalidOperationError,
    MessageArray,
    PositionError,
    Stats,
)

OPENS_A_BATCH: dict[str, Callable[[MessageArray], object]] = {
    "insert": lambda a: a.insert(1, user("x")),
    "replace": lambda a: a.replace(0, user("x")),
    "truncate": lambda a: a.truncate(keep_last=2),
    "clear": lambda a: a.clear(),
    "filter": lambda a: a.filter(roles=["user"]),
    "checkpoint": lambda a: a.checkpoint(),
}
OPENS_NO_BATCH: dict[str, Callable[[MessageArray], object]] = {
    "append": lambda a: a.append(user("x")),
    "append a list": lambda a: a.append([user("x"), user("y")]),
    "rollback to the current batch": lambda a: a.rollback(a.batch_index),
}
DESCRIPTIONS: dict[str, tuple[Callable[[MessageArray], object], str]] = {
    "insert": (lambda a: a.insert(1, [user("x"), user("y")]), "insert(position=1, count=2)"),
    "replace": (lambda a: a.replace(-1, user("x")), "replace(index=-1)"),
    "truncate": (lambda a: a.truncate(keep_last=5), "truncate(keep_last=5)"),
    "truncate by role": (
        lambda a: a.truncate(keep_first=1, range=[0, 2], role="user"),
        "truncate(keep_first=1, range=(0, 2), role='user')",
    ),
    "clear": (lambda a: a.clear(keep_system=False), "clear(keep_system=False)"),
    "filter": (
        lambda a: a.filter(roles=["user"], content_excludes=["天气"]),
        "filter(roles=['user'], content_excludes=['天气'])",
    ),
    "checkpoint": (lambda a: a.checkpoint("before the summary"), "before the summary"),
    "checkpoint without a description": (lambda a: a.checkpoint(), "checkpoint()"),
}


def test_a_new_array_is_batch_0() -> None:
    arr = MessageArray(numbered(2))
    assert arr.batch_index == 0
    assert arr.stats() == Stats(total_messages=2, current_batch_messages=2, total_batches=1, current_batch_index=0)


@pytest.mark.parametrize("name", OPENS_A_BATCH)
def test_these_operations_open_a_new_batch(name: str) -> None:
    arr = MessageArray(numbered(3))
    OPENS_A_BATCH[name](arr)
    assert arr.batch_index == 1
    assert arr.stats().total_batches == 2


@pytest.mark.parametrize("name", OPENS_NO_BATCH)
def test_these_operations_open_no_batch(name: str) -> None:
    arr = MessageArray(numbered(3))
    OPENS_NO_BATCH[name](arr)
    assert arr.batch_index == 0


def test_a_failed_operation_opens_no_batch() -> None:
    arr = MessageArray(numbered(3))
    with pytest.raises(InvalidOperationError):
        arr.insert(9, user())
    with pytest.raises(PositionError):
        arr.replace(9, user())
    with pytest.raises(InvalidOperationError):
        arr.truncate(keep_last=-1)
    with pytest.raises(InvalidMessageError):
        arr.insert(0, {"role": "user"})
    assert arr.batch_index == 0
    assert arr.stats().total_batches == 1


@pytest.mark.parametrize("name", DESCRIPTIONS)
def test_a_snapshot_describes_what_ended_its_batch(name: str) -> None:
    arr = MessageArray(dialogue(2))
    action, description = DESCRIPTIONS[name]
    action(arr)
    assert arr.snapshot(0).description == description


def test_a_snapshot_holds_the_state_when_its_batch_ended() -> None:
    arr = MessageArray(numbered(4))
    start = time.time()
    arr.truncate(keep_last=2)
    end = time.time()
    arr.append(user("later"))
    snap = arr.snapshot(0)
    assert snap == BatchSnapshot(0, snap.timestamp, [user(str(i)) for i in range(4)], 4, "truncate(keep_last=2)")
    assert start <= snap.timestamp <= end


def test_the_current_batch_snapshot_is_the_current_state_without_description() -> None:
    arr = MessageArray(numbered(4))
    arr.truncate(keep_last=2)
    arr.append(user("later"))
    start = time.time()
    snap = arr.snapshot(1)
    assert snap.batch_index == 1
    assert contents(snap.messages) == ["2", "3", "later"]
    assert snap.message_count == 3
    assert snap.description is None
    assert snap.timestamp >= start


def test_later_appends_do_not_change_an_ended_batch() -> None:
    arr = MessageArray(numbered(2))
    arr.checkpoint()
    arr.append([user("a"), user("b")])
    assert contents(arr.snapshot(0).messages) == ["0", "1"]


@pytest.mark.parametrize("index", [2, 3, -1])
def test_a_snapshot_of_a_batch_that_does_not_exist_is_a_batch_error(index: int) -> None:
    arr = MessageArray(numbered(2))
    arr.checkpoint()
    with pytest.raises(BatchError):
        arr.snapshot(index)


def test_rollback_restores_the_batch_as_it_ended_and_discards_later_ones() -> None:
    arr = MessageArray(dialogue(2))
    arr.truncate(keep_last=3)
    arr.append(user("in batch 1"))
    arr.filter(roles=["user"])
    arr.clear()
    assert arr.batch_index == 3
    arr.rollback(1)
    assert contents(arr.messages()) == [None, "r1", "a1", "in batch 1"]
    assert arr.batch_index == 1
    assert arr.stats().total_batches == 2
    with pytest.raises(BatchError):
        arr.snapshot(2)


def test_rollback_loses_no_stored_message() -> None:
    arr = MessageArray(numbered(3))
    arr.replace(0, user("new"))
    arr.insert(0, user("inserted"))
    stored = arr.all_messages()
    arr.rollback(0)
    assert arr.all_messages() == stored
    assert contents(arr.messages()) == ["0", "1", "2"]


def test_rollback_to_the_current_batch_changes_nothing() -> None:
    arr = MessageArray(numbered(3))
    arr.truncate(keep_last=2)
    arr.append(user("x"))
    before = arr.to_json()
    result = arr.rollback(1)
    assert arr.to_json() == before
    assert result.affected_batch_index == 1


def test_appends_after_a_rollback_join_the_restored_batch() -> None:
    arr = MessageArray(numbered(2))
    arr.truncate(keep_last=1)
    arr.rollback(0)
    arr.append(user("x"))
    assert arr.batch_index == 0
    arr.clear(keep_system=False)
    assert contents(arr.snapshot(0).messages) == ["0", "1", "x"]
    assert arr.snapshot(0).description == "clear(keep_system=False)"


def test_rollback_twice_to_the_same_batch_restores_the_same_state() -> None:
    arr = MessageArray(numbered(3))
    arr.truncate(keep_first=1)
    arr.truncate(keep_first=0)
    arr.rollback(1)
    arr.filter(roles=["assistant"])
    arr.rollback(1)
    assert contents(arr.messages()) == ["0"]


def test_rollback_beyond_the_current_batch_is_a_batch_error() -> None:
    arr = MessageArray(numbered(2))
    arr.checkpoint()
    with pytest.raises(BatchError, match="rollback"):
        arr.rollback(2)
    assert arr.batch_index == 1


@pytest.mark.parametrize("index", [True, 1.0, "0"])
def test_rollback_needs_an_int(index: object) -> None:
    arr = MessageArray(numbered(2))
    arr.checkpoint()
    with pytest.raises(InvalidOperationError, match="batch_index"):
        arr.rollback(index)  # type: ignore[arg-type]
    assert arr.batch_index == 1


def test_a_negative_batch_index_is_a_batch_that_does_not_exist_for_rollback_and_snapshot() -> None:
    arr = MessageArray(numbered(2))
    arr.checkpoint()
    for read in (arr.rollback, arr.snapshot):
        with pytest.raises(BatchError, match="batch -1 does not exist"):
            read(-1)
    assert arr.batch_index == 1


def test_checkpoint_returns_the_batch_that_rollback_comes_back_to() -> None:
    arr = MessageArray([system(), user("q")])
    cp = arr.checkpoint("before the tool loop")
    assert cp == 0
    assert arr.batch_index == 1
    arr.append([assistant("a"), user("q2")])
    arr.truncate(keep_last=1)
    arr.filter(content_contains=["zzz"])
    arr.rollback(cp)
    assert arr.messages() == [system(), user("q")]
    assert arr.batch_index == cp


def test_checkpoints_nest() -> None:
    arr = MessageArray(numbered(1))
    first = arr.checkpoint("one")
    arr.append(user("1"))
    second = arr.checkpoint("two")
    arr.append(user("2"))
    assert (first, second) == (0, 1)
    arr.rollback(second)
    assert contents(arr.messages()) == ["0", "1"]
    arr.rollback(first)
    assert contents(arr.messages()) == ["0"]


def test_checkpoint_description_must_be_a_string() -> None:
    arr = MessageArray()
    with pytest.raises(InvalidOperationError, match="description"):
        arr.checkpoint(5)  # type: ignore[arg-type]
    assert arr.batch_index == 0


def test_many_batches_of_a_large_array_each_keep_their_own_state() -> None:
    arr = MessageArray(numbered(1000))
    for keep in range(999, 989, -1):
        arr.truncate(keep_last=keep)
    for batch in range(10):
        assert arr.snapshot(batch).message_count == 1000 - batch
    arr.rollback(3)
    assert contents(arr.messages())[0] == "3"
