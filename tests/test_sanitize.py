"""The sanitizer (docs/sanitizer.md): the seven scenarios of the design, each rule in both formats,
the report, the log line, bad input, and ``MessageArray.sanitize`` / ``validate``."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import pytest
from factories import run_together
from memci import (
    InvalidMessageError,
    MessageArray,
    RemovedMessage,
    SanitizeResult,
    ValidationResult,
    sanitize_messages,
    validate_messages,
)
from tool_histories import ANTHROPIC, FORMATS, OPENAI, Format

Message = dict[str, Any]


@pytest.fixture(params=FORMATS, ids=lambda f: f.name)
def fmt(request: pytest.FixtureRequest) -> Format:
    return request.param  # type: ignore[no-any-return]


def kept(history: list[Message]) -> list[Message]:
    """Sanitize, check the result is consistent, and return what it kept."""
    result = sanitize_messages(history)
    assert result.removed_count == len(result.removed_messages) == len(history) - len(result.messages)
    assert result.sanitized == bool(result.removed_messages)
    assert validate_messages(result.messages).valid
    return result.messages


def removed(history: list[Message]) -> list[tuple[int, str]]:
    return [(r.index, r.role) for r in sanitize_messages(history).removed_messages]


# ---- the seven scenarios of the design------------------------------------------------------------------


def test_1_a_normal_history_comes_back_untouched(fmt: Format) -> None:
    history = [fmt.system(), fmt.user(), fmt.reply(), fmt.user("again"), fmt.reply("ok")]
    before = copy.deepcopy(history)
    result = sanitize_messages(history)
    assert not result.sanitized
    assert result.removed_count == 0
    assert result.removed_messages == []
    assert all(a is b for a, b in zip(result.messages, history, strict=True))
    assert result.messages is not history
    assert history == before


def test_2_an_empty_history_is_fine() -> None:
    result = sanitize_messages([])
    assert (result.messages, result.sanitized, result.removed_count) == ([], False, 0)
    assert validate_messages([]) == ValidationResult(True, [])


def test_3_a_complete_call_and_result_pair_stays(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("call_1"), *fmt.results("call_1"), fmt.reply()]
    assert kept(history) == history
    assert validate_messages(history).valid


def test_4_an_assistant_message_with_unanswered_calls_goes(fmt: Format) -> None:
    history = [fmt.system(), fmt.user(), fmt.calls("call_1")]
    assert kept(history) == history[:2]
    assert removed(history) == [(2, "assistant")]
    reason = sanitize_messages(history).removed_messages[0].reason
    assert "call_1" in reason
    assert "missing tool results" in reason


def test_5_partial_results_take_the_whole_group_with_them(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("call_1", "call_2"), *fmt.results("call_1"), fmt.user("next")]
    assert kept(history) == [history[0], history[-1]]
    report = sanitize_messages(history).removed_messages
    assert [(r.index, r.role) for r in report] == [(1, "assistant"), (2, history[2]["role"])]
    assert "call_2" in report[0].reason
    assert "call_1" not in report[0].reason
    assert "assistant message at index 1" in report[1].reason


def test_6_earlier_complete_pairs_stay_when_a_later_one_is_incomplete(fmt: Format) -> None:
    early = [fmt.user(), fmt.calls("call_1"), *fmt.results("call_1"), fmt.reply()]
    history = [*early, fmt.user("more"), fmt.calls("call_2", "call_3"), *fmt.results("call_3")]
    assert kept(history) == [*early, history[len(early)]]


def test_7_orphan_results_go(fmt: Format) -> None:
    history = [fmt.user(), *fmt.results("call_9"), fmt.reply()]
    assert kept(history) == [history[0], history[-1]]
    (report,) = sanitize_messages(history).removed_messages
    assert report.index == 1
    assert "orphan tool result for call_9" in report.reason
    assert "no assistant message with tool calls" in report.reason


# ---- each rule, in both formats --------------------------------------------------------------------


def test_parallel_calls_answered_in_any_order_are_complete(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a", "b", "c"), *fmt.results("c", "a", "b"), fmt.reply()]
    assert kept(history) == history


def test_parallel_calls_partly_answered_are_incomplete(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a", "b", "c"), *fmt.results("c", "a"), fmt.reply()]
    assert kept(history) == [history[0], history[-1]]
    assert "missing tool results for: b" in sanitize_messages(history).removed_messages[0].reason


def test_results_must_come_right_after_the_call(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a"), fmt.user("interrupt"), *fmt.results("a")]
    assert kept(history) == [history[0], history[2]]
    assert [r.index for r in sanitize_messages(history).removed_messages] == [1, 3]


def test_results_of_an_earlier_call_do_not_answer_a_later_one(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a"), *fmt.results("a"), fmt.calls("b"), *fmt.results("a")]
    assert kept(history) == history[:3]


def test_reused_ids_pair_by_position_never_across_turns(fmt: Format) -> None:
    turn = [fmt.user(), fmt.calls("call_1"), *fmt.results("call_1"), fmt.reply()]
    unanswered = [fmt.user("again"), fmt.calls("call_1"), fmt.reply("gave up")]
    history = [*turn, *unanswered, *turn]
    assert kept(history) == [*turn, unanswered[0], unanswered[2], *turn]


def test_a_call_without_an_id_cannot_be_answered(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a", ""), *fmt.results("a"), fmt.reply()]
    assert kept(history) == [history[0], history[-1]]
    assert "has no id" in sanitize_messages(history).removed_messages[0].reason


def test_two_calls_with_one_id_cannot_be_paired(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a", "a"), *fmt.results("a"), fmt.reply()]
    assert kept(history) == [history[0], history[-1]]
    assert "two tool calls with the id a" in sanitize_messages(history).removed_messages[0].reason


def test_consecutive_call_groups_are_each_checked(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a"), fmt.calls("b"), *fmt.results("b"), fmt.reply()]
    assert kept(history) == [history[0], *history[2:]]


# ---- rules where the formats differ ----------------------------------------------------------------


def test_openai_a_duplicate_result_goes_alone_and_the_first_answer_stays() -> None:
    history = [OPENAI.user(), OPENAI.calls("a"), *OPENAI.results("a", "a"), OPENAI.reply()]
    assert kept(history) == [*history[:3], history[-1]]
    (report,) = sanitize_messages(history).removed_messages
    assert (report.index, report.role) == (3, "tool")
    assert report.reason == "duplicate tool result for a (the first is at index 2)"


def test_openai_an_orphan_inside_a_complete_run_goes_alone() -> None:
    history = [OPENAI.user(), OPENAI.calls("a"), *OPENAI.results("z", "a"), OPENAI.reply()]
    assert kept(history) == [*history[:2], *history[3:]]
    assert "the assistant message at index 1 made no such call" in sanitize_messages(history).removed_messages[0].reason


def test_openai_a_tool_message_without_an_id_goes() -> None:
    history = [OPENAI.user(), OPENAI.calls("a"), *OPENAI.results("a"), {"role": "tool", "content": "x"}]
    assert kept(history) == history[:3]
    assert "without a tool_call_id" in sanitize_messages(history).removed_messages[0].reason


@pytest.mark.parametrize(
    ("blocks", "words"),
    [
        (["a", "a"], "holds two tool_result blocks for a"),
        (["a", "z"], "orphan tool result for z: the assistant message at index 1 made no such call"),
        (["a", None], "without a tool_use_id"),
    ],
)
def test_anthropic_one_bad_block_removes_the_result_message_and_its_group(blocks: list[str | None], words: str) -> None:
    results = {"role": "user", "content": [{"type": "tool_result", "content": "r"} for _ in blocks]}
    for block, rid in zip(results["content"], blocks, strict=True):
        if rid is not None:
            block["tool_use_id"] = rid
    history = [ANTHROPIC.user(), ANTHROPIC.calls("a"), results, ANTHROPIC.reply()]
    assert kept(history) == [history[0], history[-1]]
    report = sanitize_messages(history).removed_messages
    assert [(r.index, r.role) for r in report] == [(1, "assistant"), (2, "user")]
    assert report[0].reason == "its tool results (message 2) were removed, so its calls are unanswered"
    assert words in report[1].reason


def test_anthropic_text_beside_tool_results_goes_with_them() -> None:
    results = ANTHROPIC.results("a")[0]
    results["content"].append({"type": "text", "text": "and also this"})
    history = [ANTHROPIC.user(), ANTHROPIC.calls("a", "b"), results]
    assert kept(history) == [history[0]]


def test_anthropic_tool_results_must_come_first_in_their_message() -> None:
    results = ANTHROPIC.results("a")[0]
    results["content"].insert(0, {"type": "text", "text": "here you go"})
    history = [ANTHROPIC.user(), ANTHROPIC.calls("a"), results, ANTHROPIC.reply()]
    assert kept(history) == [history[0], history[-1]]
    report = sanitize_messages(history).removed_messages
    assert report[0].reason == "its tool results (message 2) were removed, so its calls are unanswered"
    assert report[1].reason == "its tool_result blocks must come first in the message, before any other block"


def test_anthropic_user_text_without_results_is_not_an_answer() -> None:
    history = [ANTHROPIC.user(), ANTHROPIC.calls("a"), ANTHROPIC.user("never mind")]
    assert kept(history) == [history[0], history[2]]


def test_the_formats_mix_in_one_history() -> None:
    history = [
        OPENAI.user(),
        OPENAI.calls("a"),
        *OPENAI.results("a"),
        ANTHROPIC.calls("b"),
        *ANTHROPIC.results("b"),
        ANTHROPIC.calls("c"),
    ]
    assert kept(history) == history[:-1]


# ---- the report, the input, the log ----------------------------------------------------------------


def test_every_removal_names_its_index_role_and_an_actionable_reason() -> None:
    history = [
        OPENAI.system(),
        OPENAI.calls("a", "b"),
        *OPENAI.results("a"),
        OPENAI.user(),
        *OPENAI.results("z"),
    ]
    assert sanitize_messages(history).removed_messages == [
        RemovedMessage(1, "assistant", "missing tool results for: b (each call must be answered right after it)"),
        RemovedMessage(2, "tool", "associated with the incomplete assistant message at index 1 (removed with it)"),
        RemovedMessage(
            4, "tool", "orphan tool result for z: no assistant message with tool calls comes right before it"
        ),
    ]


def test_the_input_is_never_mutated(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a", "b"), *fmt.results("a"), *fmt.results("z"), fmt.reply()]
    before = copy.deepcopy(history)
    objects = list(history)
    result = sanitize_messages(history)
    assert history == before
    assert all(a is b for a, b in zip(history, objects, strict=True))
    assert all(any(m is h for h in history) for m in result.messages)


def test_sanitizing_twice_changes_nothing_more(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a", "b"), *fmt.results("b"), *fmt.results("z"), fmt.reply()]
    once = sanitize_messages(history)
    twice = sanitize_messages(once.messages)
    assert once.sanitized
    assert not twice.sanitized
    assert twice.messages == once.messages


def test_one_warning_line_with_the_count_and_details(caplog: pytest.LogCaptureFixture, fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("call_1", "call_2"), *fmt.results("call_1")]
    with caplog.at_level(logging.WARNING, logger="memci"):
        sanitize_messages(history)
    (record,) = caplog.records
    assert record.name == "memci"
    assert record.levelno == logging.WARNING
    text = record.getMessage()
    assert "\n" not in text
    assert "removed 2" in text
    assert "[1] assistant: missing tool results for: call_2" in text
    assert f"[2] {history[2]['role']}: associated with the incomplete assistant message at index 1" in text


def test_nothing_is_logged_when_nothing_is_removed(caplog: pytest.LogCaptureFixture, fmt: Format) -> None:
    with caplog.at_level(logging.DEBUG, logger="memci"):
        sanitize_messages([fmt.user(), fmt.calls("a"), *fmt.results("a")])
        validate_messages([fmt.calls("a")])
    assert caplog.records == []


def test_validation_lists_what_sanitizing_would_remove(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("call_1"), fmt.reply(), *fmt.results("call_1")]
    result = validate_messages(history)
    assert not result.valid
    assert result.errors == [
        f"messages[{r.index}] ({r.role}): {r.reason}" for r in sanitize_messages(history).removed_messages
    ]
    assert result.errors[0].startswith("messages[1] (assistant): missing tool results for: call_1")


def test_any_iterable_of_messages_is_accepted() -> None:
    history = [OPENAI.user(), OPENAI.calls("a")]
    assert sanitize_messages(tuple(history)).messages == history[:1]
    assert sanitize_messages(m for m in history).messages == history[:1]
    assert not validate_messages(iter(history)).valid
    assert isinstance(sanitize_messages(tuple(history)).messages, list)


def test_a_result_compares_by_what_it_holds() -> None:
    history = [OPENAI.user(), OPENAI.calls("a")]
    assert sanitize_messages(history) == sanitize_messages(list(history))
    assert sanitize_messages(history) != sanitize_messages(history[:1])
    assert SanitizeResult(history[:1]) == sanitize_messages(history[:1])
    assert "sanitized=True" in repr(sanitize_messages(history))


# ---- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, 5, "user: hi", b"x", {"role": "user", "content": "hi"}])
def test_something_that_is_not_a_list_of_messages_is_refused(bad: Any) -> None:
    for check in (sanitize_messages, validate_messages):
        with pytest.raises(InvalidMessageError, match="expected a list of message dicts") as e:
            check(bad)
        assert e.value.path == "messages"


@pytest.mark.parametrize(
    ("item", "path", "words"),
    [
        ("hello", "messages[1]", "must be a dict, got str"),
        ({"content": "x"}, "messages[1].role", "missing"),
        ({"role": None, "content": "x"}, "messages[1].role", "must be a str, got NoneType"),
    ],
)
def test_an_item_that_is_not_a_message_is_refused_with_its_place(item: Any, path: str, words: str) -> None:
    for check in (sanitize_messages, validate_messages):
        with pytest.raises(InvalidMessageError, match=words) as e:
            check([OPENAI.user(), item])
        assert e.value.path == path


def test_malformed_calls_are_removed_not_refused() -> None:
    weird_calls: list[Message] = [
        {"role": "assistant", "content": None, "tool_calls": "call_1"},
        {"role": "assistant", "content": None, "tool_calls": ["call_1"]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": 7}]},
    ]
    for message in weird_calls:
        history = [OPENAI.user(), message, *OPENAI.results("call_1")]
        assert kept(history) == [history[0]]
    assert kept([OPENAI.user(), {"role": "assistant", "content": "x", "tool_calls": None}]) == [
        OPENAI.user(),
        {"role": "assistant", "content": "x", "tool_calls": None},
    ]


def test_unknown_roles_are_other_messages() -> None:
    history = [{"role": "function", "name": "f", "content": "x"}, OPENAI.calls("a"), *OPENAI.results("a")]
    assert kept(history) == history


# ---- MessageArray.sanitize and validate ----------------------------------------------------------------


def test_array_sanitize_removes_as_one_undoable_batch(fmt: Format) -> None:
    history = [fmt.system(), fmt.user(), fmt.calls("a", "b"), *fmt.results("a"), fmt.reply()]
    arr = MessageArray(history)
    before = arr.batch_index
    result = arr.sanitize()
    assert result.sanitized
    assert arr.batch_index == before + 1
    assert arr.messages() == [history[0], history[1], history[-1]]
    assert result.messages == arr.messages()
    assert result.removed_messages == sanitize_messages(history).removed_messages
    assert arr.snapshot(before).description == "sanitize()"
    arr.rollback(before)
    assert arr.messages() == history
    assert len(arr.all_messages()) == len(history)


def test_array_sanitize_opens_no_batch_when_nothing_is_removed(fmt: Format) -> None:
    arr = MessageArray([fmt.user(), fmt.calls("a"), *fmt.results("a")])
    before = arr.batch_index
    result = arr.sanitize()
    assert not result.sanitized
    assert arr.batch_index == before
    arr.rollback(before)
    assert result.messages == arr.messages()


def test_array_indices_are_visible_positions_before_the_call() -> None:
    arr = MessageArray([OPENAI.user("old"), OPENAI.reply("old"), OPENAI.user(), *OPENAI.results("z")])
    arr.truncate(remove_first=2)
    (report,) = arr.sanitize().removed_messages
    assert (report.index, report.role) == (1, "tool")
    assert arr.messages() == [OPENAI.user()]


def test_array_report_messages_are_the_state_right_after_the_call() -> None:
    arr = MessageArray([OPENAI.user(), OPENAI.calls("a")])
    result = arr.sanitize()
    arr.append(OPENAI.reply("later"))
    arr.clear(keep_system=False)
    assert result.messages == [OPENAI.user()]
    assert result.messages is result.messages
    assert "<1 messages>" in repr(result)


def test_array_validate_changes_nothing(fmt: Format) -> None:
    history = [fmt.user(), fmt.calls("a"), fmt.reply()]
    arr = MessageArray(history)
    result = arr.validate()
    assert result == validate_messages(history)
    assert not result.valid
    assert arr.batch_index == 0
    assert arr.messages() == history
    arr.sanitize()
    assert arr.validate() == ValidationResult(True, [])


def test_array_sanitize_logs_like_the_function(caplog: pytest.LogCaptureFixture) -> None:
    arr = MessageArray([OPENAI.user(), *OPENAI.results("z")])
    with caplog.at_level(logging.WARNING, logger="memci"):
        arr.sanitize()
        arr.sanitize()
    (record,) = caplog.records
    assert "removed 1: [1] tool: orphan tool result for z" in record.getMessage()


def test_array_scans_keep_up_with_every_change_between_them(fmt: Format) -> None:
    arr = MessageArray([fmt.user(), fmt.calls("a")])
    assert not arr.validate().valid
    arr.append(fmt.results("a"))
    assert arr.validate().valid
    arr.insert(1, [fmt.calls("b")])
    assert [e.split(":")[0] for e in arr.validate().errors] == ["messages[1] (assistant)"]
    arr.replace(1, fmt.reply())
    assert arr.validate().valid
    for copy_ in (copy.copy(arr), MessageArray.from_json(arr.to_json())):
        copy_.append(fmt.results("z"))
        assert copy_.sanitize().removed_count == 1
        assert arr.validate().valid


def test_array_scans_from_several_threads_see_whole_states() -> None:
    arr = MessageArray([OPENAI.user()])
    groups, rounds = 3, 150

    def writer(t: int) -> Callable[[], None]:
        def work() -> None:
            for i in range(rounds):
                call_id = f"call_{t}_{i}"
                arr.append([OPENAI.calls(call_id), *OPENAI.results(call_id)])  # a whole group at once
                if i % 10 == 0:
                    arr.append(OPENAI.results(f"lost_{t}_{i}"))

        return work

    def sanitizer() -> None:
        for _ in range(rounds // 3):
            assert validate_messages(arr.sanitize().messages).valid

    def validator() -> None:
        for _ in range(rounds // 3):
            assert all("orphan tool result for lost_" in e for e in arr.validate().errors)

    run_together(*(writer(t) for t in range(groups)), sanitizer, validator)
    arr.sanitize()
    assert arr.validate().valid
    assert arr.count("assistant") == arr.count("tool") == groups * rounds
