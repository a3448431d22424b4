"""Properties of the sanitizer on random histories with random damage, in the three formats (OpenAI
chat, Anthropic, Responses items) and mixed: the output
validates, is a subsequence of the input, keeps every complete call/result group, and sanitizing
again changes nothing; valid input comes back untouched; the Rust scan agrees with the pure-Python
reference in ``tool_histories.py``, and ``MessageArray.sanitize`` with ``sanitize_messages``."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from memci import MessageArray, sanitize_messages, validate_messages
from tool_histories import damaged, facts, formats, histories, reference_removals, role_of

Message = dict[str, Any]


def is_subsequence(sub: list[Message], full: list[Message]) -> bool:
    """Whether ``sub`` is ``full`` with some items left out, by object identity."""
    it = iter(full)
    return all(any(m is f for f in it) for m in sub)


def complete_groups(messages: list[Message]) -> list[list[int]]:
    """The complete groups, written from the APIs' rules directly: an assistant message whose call
    ids are distinct and non-empty, and each answered right after it (the run of tool messages, or
    a user message of results that answers nothing else and nothing twice). Each group: the
    assistant's index, then the first result of each call."""
    groups = []
    for i, m in enumerate(messages):
        kind, calls = facts(m)
        if kind != "calls" or None in calls or len(set(calls)) < len(calls):
            continue
        run = []
        j = i + 1
        while j < len(messages) and messages[j]["role"] == "tool":
            run.append(j)
            j += 1
        if run:
            firsts = {}
            for t in run:
                firsts.setdefault(facts(messages[t])[1][0], t)
            if set(calls) <= firsts.keys():
                groups.append([i, *(firsts[c] for c in calls)])
        elif j < len(messages) and facts(messages[j])[0] == "blocks":  # not "late": refused as sent
            answers = facts(messages[j])[1]
            if sorted(answers, key=str) == sorted(calls, key=str):
                groups.append([i, j])
    return groups + complete_item_pairs(messages)


def complete_item_pairs(messages: list[Message]) -> list[list[int]]:
    """Responses items, from the API's rule directly: a call item with a call_id, and the first
    output item after it with that call_id, when no other call with that id comes between them."""
    pairs = []
    for i, m in enumerate(messages):
        kind, ids = facts(m)
        if kind != "item_call" or ids[0] is None:
            continue
        for j in range(i + 1, len(messages)):
            if facts(messages[j]) == ("item_call", ids):
                break
            if facts(messages[j]) == ("item_output", ids):
                pairs.append([i, j])
                break
    return pairs


@given(formats.flatmap(damaged))
def test_the_output_validates_is_a_subsequence_and_keeps_complete_groups(history: list[Message]) -> None:
    result = sanitize_messages(history)
    assert validate_messages(result.messages).valid
    assert is_subsequence(result.messages, history)
    assert len(result.messages) + result.removed_count == len(history)
    removed = {r.index for r in result.removed_messages}
    for group in complete_groups(history):
        assert not removed & set(group), group
    assert [r.role for r in result.removed_messages] == [role_of(history[r.index]) for r in result.removed_messages]


@given(formats.flatmap(damaged))
def test_sanitizing_twice_changes_nothing_more(history: list[Message]) -> None:
    once = sanitize_messages(history)
    twice = sanitize_messages(once.messages)
    assert not twice.sanitized
    assert all(a is b for a, b in zip(twice.messages, once.messages, strict=True))


@given(formats.flatmap(histories))
def test_a_valid_history_comes_back_untouched(history: list[Message]) -> None:
    result = sanitize_messages(history)
    assert not result.sanitized
    assert all(a is b for a, b in zip(result.messages, history, strict=True))
    assert len(result.messages) == len(history)
    assert validate_messages(history).valid


#: Words the reason for each code of the reference contains.
REASON_WORDS = {
    "unanswered": "missing tool results for",
    "call_without_id": "has no id",
    "repeated_call_id": "two tool calls with the id",
    "results_removed": "were removed, so its calls are unanswered",
    "incomplete": "associated with the incomplete assistant message",
    "orphan": "orphan tool result for",
    "no_id": "without a tool_",
    "duplicate": "duplicate tool result for|holds two tool_result blocks for",
    "results_not_first": "tool_result blocks must come first",
    "unanswered_call": "no output item answers the call",
    "call_item_without_id": "call item with an empty call_id",
    "orphan_output": "orphan output for",
    "duplicate_output": "duplicate output for",
    "output_without_id": "output item with an empty call_id",
    "reasoning_of_removed": "reasoning item before the removed call",
}


@given(
    st.one_of(formats.flatmap(damaged), st.lists(formats.flatmap(damaged)).map(lambda hs: list(itertools.chain(*hs))))
)
def test_the_scan_agrees_with_the_reference(history: list[Message]) -> None:
    found = sanitize_messages(history).removed_messages
    expected = reference_removals(history)
    assert [r.index for r in found] == [i for i, _ in expected]
    for record, (_, code) in zip(found, expected, strict=True):
        assert any(words in record.reason for words in REASON_WORDS[code].split("|")), (code, record.reason)
    validation = validate_messages(history)
    assert validation.valid == (not expected)
    assert len(validation.errors) == len(expected)


@given(formats.flatmap(damaged))
def test_the_array_sanitizes_like_the_function(history: list[Message]) -> None:
    arr = MessageArray(history)
    assert arr.validate() == validate_messages(history)
    from_list = sanitize_messages(history)
    from_array = arr.sanitize()
    assert from_array.removed_messages == from_list.removed_messages
    assert arr.messages() == from_list.messages
    assert from_array.messages == from_list.messages
    assert arr.batch_index == int(from_list.sanitized)
