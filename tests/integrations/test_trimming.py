"""memci.integrations.trimming: the one trim every adapter shares. A call converts only the
messages that arrived since the last one; the result is the history's own objects (its leading
system messages, then its newest messages); between cuts it grows only at its end; the budget
holds; a history that changed behind the mirror's back is mirrored again; threads are kept apart."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from factories import assistant, call, calling, system, tool, user
from hypothesis import given
from hypothesis import strategies as st
from memci import InvalidOperationError, MessageArray, tokens
from memci.integrations.trimming import Conversations, HistoryTrimmer

Message = dict[str, Any]


class Spy:
    """A converter that records how many messages it was given."""

    def __init__(self) -> None:
        self.converted = 0

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        self.converted += len(messages)
        return [dict(m) for m in messages]


def turn(i: int, words: int = 20, calls: bool = False) -> list[Message]:
    out = [user(f"question {i} " + "word " * words)]
    if calls:
        out += [calling(call(f"c{i}", "f", json.dumps({"q": i}))), tool(f"c{i}", "result " * words)]
    return [*out, assistant(f"answer {i} " + "word " * words)]


def test_a_call_converts_only_the_new_messages_and_returns_the_histories_objects() -> None:
    spy = Spy()
    trimmer = HistoryTrimmer(spy, low_water=0.5)
    history: list[Message] = [system("s")]
    for i in range(30):
        history += turn(i, calls=i % 3 == 0)
        kept = trimmer.trim(history, 500)
        assert kept is not None
        assert spy.converted == len(history)  # every message converted once, never again
        assert kept[0] is history[0]
        n = len(kept) - 1
        assert all(a is b for a, b in zip(kept[1:], history[len(history) - n :], strict=True))
        assert tokens.count_messages(kept) <= 500


@given(
    sizes=st.lists(st.integers(1, 3), min_size=1, max_size=25),
    budget=st.integers(60, 600),
    low_water=st.sampled_from([0.3, 0.6, 1.0]),
    lead=st.booleans(),
)
def test_between_cuts_the_window_grows_at_its_end_and_the_budget_holds(
    sizes: list[int], budget: int, low_water: float, lead: bool
) -> None:
    turns = [turn(i, words=i % 7 * 5, calls=i % 2 == 1) for i in range(80)]
    history: list[Message] = [system("be brief")] if lead else []
    trimmer = HistoryTrimmer(Spy(), low_water=low_water)
    sent: list[Message] | None = None
    at = 0
    for size in sizes:
        history += [m for t in turns[at : at + size] for m in t]  # whole turns arrive
        at += size
        kept = trimmer.trim(history, budget)
        if kept is None:
            continue
        arr = MessageArray(kept)
        assert arr.validate().valid
        system_tokens = tokens.count_messages(history[:1]) if lead else 0
        if len(kept) > int(lead):
            assert tokens.count_messages(kept) <= max(budget, system_tokens)
        if sent is not None and kept[: len(sent)] != sent:
            # A cut keeps at most the low-water mark, unless nothing fits it but the budget does.
            low_room = int((budget - system_tokens) * low_water)
            plain = HistoryTrimmer(Spy(), low_water=None).trim(history, budget)
            assert tokens.count_messages(kept) - system_tokens <= max(low_room, 0) + tokens.reply_priming() or (
                kept == plain
            )
        sent = kept


def test_the_same_history_gives_the_same_window_as_the_plain_trim_until_the_first_cut() -> None:
    history: list[Message] = [system("s")]
    hysteresis, plain = HistoryTrimmer(Spy()), HistoryTrimmer(Spy(), low_water=None)
    for i in range(4):  # everything fits: both send it all
        history += turn(i)
        assert hysteresis.trim(history, 2_000) == plain.trim(history, 2_000) == history


def test_a_history_changed_behind_its_back_is_mirrored_again() -> None:
    spy = Spy()
    trimmer = HistoryTrimmer(spy)
    history = [m for i in range(5) for m in turn(i)]
    assert trimmer.trim(history, 10_000) == history
    shorter = history[2:]  # the oldest turn removed (a summarising node, RemoveMessage)
    assert trimmer.trim(shorter, 10_000) == shorter
    assert spy.converted == len(history) + len(shorter)
    replaced = [*history[:-1], assistant("another answer")]  # the last one replaced, same length
    assert trimmer.trim(replaced, 10_000) == replaced
    assert trimmer.trim([], 10_000) == []


def test_nothing_fitting_returns_none_or_the_relaxed_result() -> None:
    history = [user("q " * 400), calling(call("c1")), tool("c1", "r")]
    assert HistoryTrimmer(Spy()).trim(history, 30) is None
    relaxed = HistoryTrimmer(Spy(), relaxed=[{"start_on": None}]).trim(history, 30)
    assert relaxed == history[1:]
    with_system = [system("s " * 50), *history[1:]]
    no_system = HistoryTrimmer(Spy(), start_on=None, relaxed=[{"keep_system": False}]).trim(with_system, 30)
    assert no_system == with_system[1:]


def test_bad_low_water_is_refused() -> None:
    for bad in (0, 1.5, True, "0.5"):
        with pytest.raises(InvalidOperationError, match="low_water"):
            HistoryTrimmer(Spy(), low_water=bad)  # type: ignore[arg-type]


def test_conversations_keep_the_most_recent() -> None:
    made: list[int] = []
    conversations: Conversations[str, list[int]] = Conversations(lambda: made.append(1) or [], 2)
    a = conversations["a"]
    conversations["b"]
    assert conversations["a"] is a
    conversations["c"]  # b is the least recently used
    assert len(conversations) == 2
    assert conversations["a"] is a
    conversations["b"]
    assert len(made) == 4
