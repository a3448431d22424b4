"""Context edits (``clear_tool_uses``, ``clear_thinking``) on ``MessageArray``, in the three formats,
against the pure-Python model in ``reference_edits.py``: after every step of a generated edit
sequence the visible messages equal the model's, the history is valid for the APIs, the reported
cleared tokens equal a recount, and rollback restores. ``make test-edits`` runs 10,000 sequences per
format (the ``edits`` hypothesis profile); the suite runs the default profile's count."""

from __future__ import annotations

import json
from typing import Any

import memci
import pytest
import reference_edits as ref
from hypothesis import given
from hypothesis import strategies as st
from memci import ops, tokens
from memci.errors import InvalidOperationError

Message = dict[str, Any]
FORMATS = ("openai", "anthropic", "responses")
NAMES = ("search", "fetch", "keep_me")
OUTPUTS = ("ok", "short result", "a long result " * 12, "line\n" * 30)


def calls(fmt: str, ids: list[str], names: list[str], thinking: bool) -> list[Message]:
    """One turn of calls (with thinking when asked) in ``fmt``."""
    args = [json.dumps({"q": i * 3}) for i in ids]
    if fmt == "openai":
        return [
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "plan it", "signature": "s"}] if thinking else None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in zip(ids, names, args, strict=True)
                ],
            }
        ]
    if fmt == "anthropic":
        blocks: list[Message] = [{"type": "thinking", "thinking": "plan it", "signature": "s"}] if thinking else []
        blocks += [
            {"type": "tool_use", "id": i, "name": n, "input": {"q": i * 3}} for i, n in zip(ids, names, strict=True)
        ]
        return [{"role": "assistant", "content": blocks}]
    out: list[Message] = [{"type": "reasoning", "id": f"rs_{ids[0]}", "summary": []}] if thinking else []
    return out + [
        {"type": "function_call", "call_id": i, "name": n, "arguments": a}
        for i, n, a in zip(ids, names, args, strict=True)
    ]


def results(fmt: str, ids: list[str], outputs: list[str]) -> list[Message]:
    if fmt == "openai":
        return [{"role": "tool", "tool_call_id": i, "content": o} for i, o in zip(ids, outputs, strict=True)]
    if fmt == "anthropic":
        blocks = [{"type": "tool_result", "tool_use_id": i, "content": o} for i, o in zip(ids, outputs, strict=True)]
        return [{"role": "user", "content": blocks}]
    return [{"type": "function_call_output", "call_id": i, "output": o} for i, o in zip(ids, outputs, strict=True)]


def reply(fmt: str, thinking: bool) -> Message:
    if thinking and fmt != "responses":
        return {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "so", "signature": "s"}, {"type": "text", "text": "done"}],
        }
    return {"role": "assistant", "content": "done"}


@st.composite
def steps(draw: st.DrawFn, fmt: str) -> list[Message]:
    """Some messages that keep a history valid: a user turn, a reply, or a group of calls and results."""
    kind = draw(st.sampled_from(["user", "user", "reply", "group", "group", "group"]))
    if kind == "user":
        return [{"role": "user", "content": draw(st.sampled_from(["hi", "more please"]))}]
    if kind == "reply":
        return [reply(fmt, draw(st.booleans()))]
    ids = draw(st.lists(st.sampled_from(("call_a", "call_b", "call_c", "call_d")), min_size=1, max_size=3, unique=True))
    names = [draw(st.sampled_from(NAMES)) for _ in ids]
    outputs = [draw(st.sampled_from(OUTPUTS)) for _ in ids]
    return calls(fmt, ids, names, draw(st.booleans())) + results(fmt, list(draw(st.permutations(ids))), outputs)


clear_tool_uses_args = st.fixed_dictionaries(
    {},
    optional={
        "keep": st.integers(0, 4),
        "clear_at_least": st.sampled_from([None, 0, 10, 80, 400]),
        "exclude_tools": st.sampled_from([(), ("keep_me",), ("search", "fetch")]),
        "clear_tool_inputs": st.booleans(),
        "placeholder": st.sampled_from([None, "[cleared {name} {id}]", "gone"]),
    },
)

#: A few settings used again and again, as an agent does: the store reads only what is new then.
REPEATED = (
    {"keep": 1},
    {"keep": 2, "clear_tool_inputs": True},
    {"keep": 0, "exclude_tools": ("keep_me",), "placeholder": "[cleared {name} {id}]"},
)

edits = st.one_of(
    st.tuples(st.just("append"), st.none()),
    st.tuples(st.just("append"), st.none()),
    st.tuples(st.just("clear_tool_uses"), clear_tool_uses_args),
    st.tuples(st.just("clear_tool_uses"), st.sampled_from(REPEATED)),
    st.tuples(st.just("clear_tool_uses"), st.sampled_from(REPEATED)),
    st.tuples(st.just("clear_thinking"), st.integers(1, 2)),
    st.tuples(st.just("rollback"), st.integers(0, 6)),
)


def run_sequence(data: st.DataObject, fmt: str) -> None:
    """Build a history, then run a sequence of edits on the array and on the model side by side."""
    history: list[Message] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"}]
    for _ in range(data.draw(st.integers(0, 12))):
        history += data.draw(steps(fmt))
    arr = memci.MessageArray(history)
    model = list(history)
    batches = [list(model)]  # the model's state at the end of each batch
    for kind, arg in data.draw(st.lists(edits, max_size=12)):
        before = arr.token_count()
        if kind == "append":
            more = data.draw(steps(fmt))
            arr.append(more)
            model += more
            batches[-1] = list(model)
            continue
        if kind == "rollback":
            b = min(arg, arr.batch_index)
            arr.rollback(b)
            del batches[b + 1 :]
            model = list(batches[b])
            continue
        if kind == "clear_tool_uses":
            result = arr.clear_tool_uses(**arg)
            model, uses, saved = ref.clear_tool_uses(model, **arg)
            assert (result.cleared_tool_uses, result.cleared_input_tokens) == (uses, saved)
        else:
            result = arr.clear_thinking(arg)
            model, turns = ref.clear_thinking(model, arg)
            assert result.cleared_thinking_turns == turns
        after = arr.token_count()
        assert result.cleared_input_tokens == before - after, "the reported tokens are a recount"
        assert after == tokens.count_messages(model)
        changed = result.cleared_tool_uses + result.cleared_thinking_turns > 0
        assert arr.batch_index == len(batches) - 1 + changed, "a batch opens only when something is cleared"
        if changed:
            batches.append(list(model))
        assert arr.messages() == model
        assert arr.validate().valid, arr.validate().errors
        assert memci.validate_messages(model).valid


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_edit_sequences_match_the_model_and_stay_valid(fmt: str, data: st.DataObject) -> None:
    run_sequence(data, fmt)


def agent(n: int) -> list[Message]:
    out: list[Message] = [{"role": "user", "content": "go"}]
    for i in range(n):
        out += calls("openai", [f"c{i}"], ["search"], False) + results("openai", [f"c{i}"], ["result " * 50])
    return out


def test_a_cleared_result_keeps_its_pair_and_the_original_stays_stored() -> None:
    arr = memci.MessageArray(agent(5))
    start = arr.batch_index
    result = arr.clear_tool_uses(keep=2)
    assert result.cleared_tool_uses == 3
    cleared = arr[2]
    assert cleared["tool_call_id"] == "c0"
    assert "search" in cleared["content"]
    assert "c0" in cleared["content"]
    assert agent(5)[2] in arr.all_messages()
    arr.rollback(start)
    assert arr.messages() == agent(5)


def test_the_trigger_is_input_tokens_and_an_untriggered_edit_changes_nothing() -> None:
    arr = memci.MessageArray(agent(5))
    total = arr.token_count()
    result = arr.clear_tool_uses(trigger=total, keep=0)
    assert (result.cleared_tool_uses, arr.batch_index) == (0, 0)
    assert arr.clear_tool_uses(trigger=total - 1, keep=0).cleared_tool_uses == 5


def test_execute_and_parse_take_anthropics_forms() -> None:
    arr = memci.MessageArray(agent(4))
    op = ops.parse(
        {
            "operation": "clear_tool_uses",
            "trigger": {"type": "input_tokens", "value": 10},
            "keep": {"type": "tool_uses", "value": 1},
            "clearToolInputs": True,
        }
    )
    assert op == ops.ClearToolUses(trigger=10, keep=1, clear_tool_inputs=True)
    result = arr.execute(op)
    assert isinstance(result, memci.EditResult)
    assert result.cleared_tool_uses == 3
    assert (
        arr.snapshot(0).description
        == "clear_tool_uses(trigger=10, keep=1, clear_tool_inputs=True, encoding='o200k_base', thinking='drop_earlier')"
    )


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: ops.ClearToolUses(keep=-1), "keep must be a non-negative int"),
        (lambda: ops.ClearToolUses(trigger={"type": "tool_uses", "value": 3}), "trigger as a dict must be"),
        (lambda: ops.ClearToolUses(exclude_tools=[1]), "exclude_tools[0] must be a str"),
        (lambda: ops.ClearToolUses(placeholder=3), "placeholder must be a str or None"),
        (lambda: ops.ClearToolUses(clear_tool_inputs="yes"), "clear_tool_inputs must be a bool"),
        (lambda: ops.ClearThinking(keep_turns=0), "keep_turns must be at least 1"),
        (lambda: ops.ClearThinking(thinking="all"), "thinking must be"),
    ],
)
def test_bad_arguments_name_the_field(make: Any, text: str) -> None:
    with pytest.raises(InvalidOperationError, match=None) as info:
        make()
    assert text in str(info.value)


def test_a_bad_encoding_leaves_the_array_as_it_was() -> None:
    arr = memci.MessageArray(agent(3))
    with pytest.raises(InvalidOperationError, match="encoding"):
        arr.clear_tool_uses(keep=0, encoding="nope")
    assert (arr.batch_index, arr.messages()) == (0, agent(3))
