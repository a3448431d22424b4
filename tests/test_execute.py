"""execute(): typed configs and the two operation-dict formats (docs/message-array.md, "execute")."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from factories import call, calling, contents, developer, dialogue, numbered, system, tool, user
from memci import BatchError, InvalidMessageError, InvalidOperationError, MessageArray, OperationResult, ops


@pytest.fixture
def arr() -> MessageArray:
    return MessageArray(numbered(10))


# ---- the flat and the nested format -----------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [
        {"operation": "TRUNCATE", "keepLast": 3},
        {"operation": "truncate", "truncate": {"keepLast": 3}},
        {"operation": "Truncate", "keep_last": 3},
        {"operation": "truncate", "truncate": {"keep_last": 3}},
        ops.Truncate(keep_last=3),
    ],
    ids=["flat", "nested", "snake-flat", "snake-nested", "typed"],
)
def test_both_dict_formats_and_typed_configs_do_the_same(arr: MessageArray, op: Any) -> None:
    result = arr.execute(op)
    assert contents(arr.messages()) == ["7", "8", "9"]
    assert result == OperationResult("truncate", 1, 3, arr.stats())
    assert arr.snapshot(0).description == "truncate(keep_last=3)"


def test_flat_format_truncate_with_a_role() -> None:
    arr = MessageArray(dialogue(3))
    arr.execute({"operation": "TRUNCATE", "keepLast": 2, "role": "user"})
    assert contents(arr.messages()) == ["q1", "q2"]


@pytest.mark.parametrize(
    "range_",
    [{"start": 2, "end": 4}, [2, 4], (2, 4)],
    ids=["dict", "list", "tuple"],
)
def test_a_range_in_any_of_its_forms(arr: MessageArray, range_: Any) -> None:
    arr.execute({"operation": "truncate", "truncate": {"range": range_}})
    assert contents(arr.messages()) == ["2", "3"]


def test_every_operation_through_the_flat_format() -> None:
    arr = MessageArray([system(), *numbered(3)])
    arr.execute({"operation": "APPEND", "messages": [user("a")]})
    arr.execute({"operation": "INSERT", "position": 1, "messages": [developer()]})
    arr.execute({"operation": "REPLACE", "index": -1, "message": user("b")})
    arr.execute({"operation": "FILTER", "roles": ["user", "system", "developer"], "contentExcludes": ["1"]})
    assert contents(arr.messages()) == ["You are terse.", "Answer in English.", "0", "2", "b"]
    arr.execute({"operation": "CLEAR", "keepSystemMessage": False})
    assert arr.messages() == []
    result = arr.execute({"operation": "ROLLBACK", "targetBatchIndex": 1})
    assert result.operation == "rollback"
    assert contents(arr.messages()) == ["You are terse.", "Answer in English.", "0", "1", "2", "a"]
    checkpoint = arr.execute({"operation": "CHECKPOINT", "description": "here"})
    assert checkpoint.affected_batch_index == 2
    assert arr.snapshot(1).description == "here"


def test_every_operation_through_the_nested_format() -> None:
    arr = MessageArray([system(), *numbered(3)])
    arr.execute({"operation": "append", "append": {"messages": [user("a")]}})
    arr.execute({"operation": "insert", "insert": {"position": 0, "messages": [developer()]}})
    arr.execute({"operation": "replace", "replace": {"index": 1, "message": system("S!")}})
    arr.execute({"operation": "filter", "filter": {"contentContains": ["S!", "a", "2"]}})
    assert contents(arr.messages()) == ["S!", "2", "a"]
    arr.execute({"operation": "clear", "clear": {"keepSystemMessage": True}})
    assert arr.messages() == [system("S!")]
    arr.execute({"operation": "rollback", "rollback": {"batchIndex": 0}})
    assert len(arr) == 5
    arr.execute({"operation": "checkpoint", "checkpoint": {}})
    assert arr.snapshot(0).description == "checkpoint()"


def test_typed_configs_for_every_operation() -> None:
    arr = MessageArray(numbered(3))
    results = [
        arr.execute(ops.Append([user("a")])),
        arr.execute(ops.Insert(0, user("b"))),
        arr.execute(ops.Replace(0, user("c"))),
        arr.execute(ops.Filter(content_excludes=["a"])),
        arr.execute(ops.Clear()),
        arr.execute(ops.Rollback(2)),
        arr.execute(ops.Checkpoint("cp")),
    ]
    assert [r.operation for r in results] == [
        "append",
        "insert",
        "replace",
        "filter",
        "clear",
        "rollback",
        "checkpoint",
    ]
    assert [r.affected_batch_index for r in results] == [0, 1, 2, 3, 4, 2, 3]
    assert [r.message_count for r in results] == [4, 5, 5, 4, 0, 5, 5]
    assert results[-1].stats == arr.stats()


# ---- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "named"),
    [
        ({"operation": "compress"}, "'compress'"),
        ({"operation": 5}, "5"),
        ({"keepLast": 5}, "'operation'"),
        ({"operation": "truncate", "keepLats": 5}, "'keepLats'"),
        ({"operation": "truncate", "truncate": {"keepLast": 5, "mode": "x"}}, "'mode'"),
        ({"operation": "truncate", "truncate": 5}, "'truncate'"),
        ({"operation": "truncate", "keepLast": 5, "keep_last": 4}, "keep_last"),
        ({"operation": "truncate", "keepLast": 5, "truncate": {"keepLast": 4}}, "keep_last"),
        ({"operation": "insert", "messages": []}, "'position'"),
        ({"operation": "rollback"}, "'batch_index'"),
        ({"operation": "clear", "keepSystem": "yes"}, "keep_system"),
        ({"operation": "append", "messages": [], "createNewBatch": True}, "'createNewBatch'"),
        ({"operation": "truncate", 5: 1}, "5"),
    ],
)
def test_unknown_operations_keys_and_bad_values_are_named(arr: MessageArray, op: Any, named: str) -> None:
    before = arr.to_json()
    with pytest.raises(InvalidOperationError) as caught:
        arr.execute(op)
    assert named in str(caught.value)
    assert arr.to_json() == before


@pytest.mark.parametrize("op", ["truncate", ["truncate"], None, 5])
def test_an_operation_must_be_a_dict_or_a_config(arr: MessageArray, op: Any) -> None:
    with pytest.raises(InvalidOperationError, match="operation"):
        arr.execute(op)


def test_a_parse_error_is_raised_before_anything_changes(arr: MessageArray) -> None:
    with pytest.raises(InvalidMessageError):
        arr.execute({"operation": "append", "messages": [user(), {"role": "user"}]})
    assert len(arr.all_messages()) == 10


# ---- the configs themselves -----------------------------------------------------------------------


def test_a_config_names_the_operation_and_the_field_it_refuses() -> None:
    with pytest.raises(InvalidOperationError, match=r"^truncate: keep_last must be a non-negative int, got -1$"):
        ops.Truncate(keep_last=-1)
    with pytest.raises(InvalidOperationError, match=r"^insert: position must be a non-negative int, got True$"):
        ops.Insert(True, [])
    with pytest.raises(InvalidOperationError, match=r"^replace: index must be an int, got '1'$"):
        ops.Replace("1", user())  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match=r"^rollback: batch_index must be an int"):
        ops.Rollback("0")  # type: ignore[arg-type]
    with pytest.raises(BatchError, match=r"^rollback: batch -1 does not exist"):
        ops.Rollback(-1)
    with pytest.raises(InvalidOperationError, match=r"^filter: roles\[1\]: unknown role 'bot'"):
        ops.Filter(roles=["user", "bot"])
    with pytest.raises(InvalidOperationError, match=r"^clear: keep_system must be a bool"):
        ops.Clear(0)  # type: ignore[arg-type]


def test_configs_normalise_their_fields() -> None:
    assert ops.Truncate(range=[1, 2]).range == (1, 2)
    assert ops.Truncate(range={"end": 2, "start": 1}).range == (1, 2)
    assert ops.Filter(roles=["user"], content_contains="x").roles == ("user",)
    assert ops.Filter(content_contains="x").content_contains == ("x",)
    assert ops.Filter(roles=[]).roles == ()
    assert type(ops.Rollback(__import__("numpy").int64(2)).batch_index) is int


def test_configs_are_frozen_and_comparable() -> None:
    config = ops.Truncate(keep_last=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.keep_last = 3  # type: ignore[misc]
    assert config == ops.Truncate(keep_last=5)
    assert ops.parse({"operation": "TRUNCATE", "keepLast": 5}) == config


@pytest.mark.parametrize(
    ("config", "description"),
    [
        (ops.Append([user(), user()]), "append(count=2)"),
        (ops.Append(user()), "append(count=1)"),
        (ops.Insert(3, [user()]), "insert(position=3, count=1)"),
        (ops.Replace(-1, user()), "replace(index=-1)"),
        (ops.Truncate(keep_last=5), "truncate(keep_last=5)"),
        (ops.Truncate(keep_first=2, remove_last=1, role="tool"), "truncate(keep_first=2, remove_last=1, role='tool')"),
        (ops.Truncate(range={"start": 1, "end": 4}), "truncate(range=(1, 4))"),
        (ops.Clear(), "clear(keep_system=True)"),
        (ops.Filter(), "filter()"),
        (ops.Filter(roles=["user"], content_contains=["天气"]), "filter(roles=['user'], content_contains=['天气'])"),
        (ops.Rollback(2), "rollback(batch_index=2)"),
        (ops.Checkpoint(), "checkpoint()"),
        (ops.Checkpoint("before summary"), "before summary"),
    ],
)
def test_describe_is_the_batch_description(config: ops.Operation, description: str) -> None:
    assert config.describe() == description


# ---- sanitize and trim_to_tokens, the batch operations beyond the original design-------------------------


def _broken_history() -> list[dict[str, Any]]:
    """A valid exchange, then an assistant message whose second call is never answered."""
    return [
        system(),
        user("q1"),
        calling(call("a")),
        tool("a", "r1"),
        user("q2"),
        calling(call("b"), call("c")),
        tool("b", "r2"),
    ]


@pytest.mark.parametrize(
    "op",
    [{"operation": "SANITIZE"}, {"operation": "sanitize", "sanitize": {}}, ops.Sanitize()],
    ids=["flat", "nested", "typed"],
)
def test_execute_sanitizes_like_the_method(op: Any) -> None:
    by_method, by_execute = MessageArray(_broken_history()), MessageArray(_broken_history())
    report = by_method.sanitize()
    result = by_execute.execute(op)
    assert by_execute.messages() == by_method.messages() == report.messages
    assert result == OperationResult("sanitize", 1, 5, by_execute.stats())
    assert by_execute.validate().valid
    by_execute.rollback(0)
    assert by_execute.messages() == _broken_history()


def test_execute_sanitize_of_a_valid_history_opens_no_batch() -> None:
    arr = MessageArray(_broken_history()[:4])
    assert arr.execute(ops.Sanitize()) == OperationResult("sanitize", 0, 4, arr.stats())


@pytest.mark.parametrize(
    "op",
    [
        {"operation": "TRIM_TO_TOKENS", "maxTokens": 40, "keepSystem": True, "startOn": "user"},
        {"operation": "trim_to_tokens", "trimToTokens": {"max_tokens": 40}},
        ops.TrimToTokens(40),
    ],
    ids=["flat", "nested", "typed"],
)
def test_execute_trims_like_the_method(op: Any) -> None:
    history = [system(), *(user(f"question {i} " * 3) if i % 2 else developer(f"note {i}") for i in range(12))]
    by_method, by_execute = MessageArray(history), MessageArray(history)
    by_method.trim_to_tokens(40)
    result = by_execute.execute(op)
    assert by_execute.messages() == by_method.messages()
    assert len(by_execute) < len(history)
    assert by_execute.token_count() <= 40
    assert result == OperationResult("trim_to_tokens", 1, len(by_execute), by_execute.stats())
    assert by_execute.snapshot(0).description == by_method.snapshot(0).description


@pytest.mark.parametrize(
    ("op", "named"),
    [
        ({"operation": "trim_to_tokens"}, "missing key 'max_tokens'"),
        ({"operation": "trim_to_tokens", "maxTokens": -1}, "max_tokens must be a non-negative int"),
        ({"operation": "trim_to_tokens", "maxTokens": 5, "strategy": "middle"}, "strategy must be 'first' or 'last'"),
        ({"operation": "trim_to_tokens", "maxTokens": 5, "allowPartial": "yes"}, "allow_partial must be a bool"),
        ({"operation": "trim_to_tokens", "maxTokens": 5, "counter": "len"}, "unknown key 'counter'"),
        ({"operation": "trim_to_tokens", "maxTokens": 5, "encoding": "nope"}, 'unknown encoding "nope"'),
        ({"operation": "trim_to_tokens", "maxTokens": 5, "startOn": "bot"}, "unknown role 'bot'"),
        ({"operation": "sanitize", "strict": True}, "unknown key 'strict'"),
    ],
)
def test_bad_sanitize_and_trim_configs_are_named_and_change_nothing(arr: MessageArray, op: Any, named: str) -> None:
    with pytest.raises(InvalidOperationError, match=named):
        arr.execute(op)
    assert arr.messages() == numbered(10)
    assert arr.batch_index == 0
