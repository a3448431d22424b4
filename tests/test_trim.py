"""MessageArray.trim_to_tokens: the budget holds, tool calls and their results are never split,
the result is a new batch, and on histories without tool calls the result is LangChain's
``trim_messages`` result for the same counter (hypothesis over random histories and budgets)."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest
from factories import assistant, call, calling, contents, dialogue, system, tool, user
from hypothesis import given
from hypothesis import strategies as st
from memci import InvalidOperationError, MemciError, MessageArray, tokens

Message = dict[str, Any]


def roles(messages: list[Message]) -> list[str]:
    return [m["role"] for m in messages]


# ---- examples -----------------------------------------------------------------------------------


def test_keeps_the_system_prompt_and_the_newest_messages_that_fit() -> None:
    history = [system("Be brief."), *[m for i in range(6) for m in (user(f"question {i}"), assistant(f"answer {i}"))]]
    arr = MessageArray(history)
    per = [tokens.count_message(m) for m in history]
    # The system prompt, the last two messages and the priming: exactly the budget.
    budget = per[0] + per[-2] + per[-1] + tokens.reply_priming()
    result = arr.trim_to_tokens(budget)
    assert result.operation == "trim_to_tokens"
    assert result.affected_batch_index == 1
    assert contents(arr.messages()) == ["Be brief.", "question 5", "answer 5"]
    assert arr.token_count() == budget
    arr.rollback(0)
    arr.trim_to_tokens(budget - 1)  # one token short: "question 5" goes, and "answer 5" cannot start
    assert contents(arr.messages()) == ["Be brief."]


def test_a_tool_call_and_its_results_are_kept_or_dropped_together() -> None:
    history = [
        system(),
        user("weather?"),
        calling(call("c1", "weather", '{"city": "Paris"}'), call("c2", "weather", '{"city": "東京"}')),
        tool("c1", "sunny"),
        tool("c2", "rain"),
        assistant("Paris is sunny, Tokyo rainy."),
    ]
    per = [tokens.count_message(m) for m in history]
    arr = MessageArray(history)
    for budget in range(sum(per) + 4):
        arr.rollback(0)
        arr.trim_to_tokens(budget, start_on=None)
        kept = arr.messages()
        has_call = any(m.get("tool_calls") for m in kept)
        results = [m for m in kept if m["role"] == "tool"]
        assert len(results) == (2 if has_call else 0), (budget, roles(kept))
        assert arr.token_count() <= max(budget, per[0] + 3)


def test_anthropic_tool_use_and_tool_result_blocks_stay_together() -> None:
    history = [
        user("look it up"),
        assistant([{"type": "text", "text": "Searching."}, {"type": "tool_use", "id": "t1", "name": "s", "input": {}}]),
        user([{"type": "tool_result", "tool_use_id": "t1", "content": "found it"}]),
        assistant("Here it is."),
    ]
    per = [tokens.count_message(m) for m in history]
    arr = MessageArray(history)
    arr.trim_to_tokens(per[3] + per[2] + 3, start_on=None)  # the result fits, its call does not
    assert contents(arr.messages()) == ["Here it is."]
    arr.rollback(0)
    arr.trim_to_tokens(per[3] + per[2] + per[1] + 3, start_on=None)
    assert roles(arr.messages()) == ["assistant", "user", "assistant"]


def test_first_keeps_the_oldest_messages_and_end_on_applies() -> None:
    arr = MessageArray(dialogue(3))  # system, then (user, call, result, answer) x 3
    arr.trim_to_tokens(10**6, strategy="first", end_on="user")
    assert roles(arr.messages())[-1] == "user"
    assert len(arr) == len(dialogue(3)) - 3
    arr.rollback(0)
    arr.trim_to_tokens(tokens.count_messages(dialogue(1)), strategy="first")
    assert arr.messages() == dialogue(1)


def test_start_on_and_end_on_take_roles_and_langchain_type_names() -> None:
    history = [system(), user("q1"), assistant("a1"), user("q2"), assistant("a2")]
    for start_on, first in (("user", "q1"), ("human", "q1"), ("assistant", "a1"), ("ai", "a1"), (None, "q1")):
        arr = MessageArray(history)
        arr.trim_to_tokens(10**6, start_on=start_on, end_on=["user"])
        assert contents(arr.messages())[1] == first
        assert contents(arr.messages())[-1] == "q2"


def test_allow_partial_keeps_the_last_lines_that_fit() -> None:
    long = "\n".join(f"line {i}" for i in range(20))
    arr = MessageArray([user("old question"), assistant(long)])
    budget = tokens.count_messages([assistant("line 18\nline 19")])
    arr.trim_to_tokens(budget, allow_partial=True, start_on=None)
    assert arr.messages() == [assistant("line 18\nline 19")]
    assert arr.token_count() <= budget
    assert assistant(long) in arr.all_messages()  # the original is still stored
    arr.rollback(0)
    arr.trim_to_tokens(budget, allow_partial=True, strategy="first", keep_system=False, start_on=None)
    assert arr.messages() == [user("old question")]


def test_counts_are_cached_and_survive_rollback() -> None:
    arr = MessageArray(dialogue(20))
    budget = arr.token_count() // 3
    arr.trim_to_tokens(budget)
    first = arr.messages()
    arr.rollback(0)
    arr.trim_to_tokens(budget, encoding="gpt-4o")
    assert arr.messages() == first
    assert arr.token_count() <= budget


def test_a_python_counter_may_use_the_array_itself() -> None:
    arr = MessageArray(dialogue(3))
    seen: list[int] = []

    def counter(message: Message) -> int:
        seen.append(arr.token_count())  # reads the array while it is being trimmed
        if len(seen) == 2:
            arr.append(user("appended by the counter"))  # the trim notices and starts over
        return len(json.dumps(message))

    arr.trim_to_tokens(400, counter=counter)
    kept = arr.messages()
    assert kept[-1] == user("appended by the counter")
    assert sum(len(json.dumps(m)) for m in kept) <= 400


def test_concurrent_appends_do_not_break_a_trim() -> None:
    arr = MessageArray(dialogue(50))
    stop = threading.Event()

    def appender() -> None:
        while not stop.is_set():
            arr.append(user("x"))

    worker = threading.Thread(target=appender)
    worker.start()
    try:
        for _ in range(20):
            arr.trim_to_tokens(200, counter=tokens.approximate)
            arr.trim_to_tokens(200)
    finally:
        stop.set()
        worker.join()
    # The cached counts stayed exact while messages arrived between trims.
    assert arr.token_count() == tokens.count_messages(arr.messages())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tokens": -1}, "max_tokens"),
        ({"max_tokens": 1.5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": 10, "strategy": "middle"}, "strategy"),
        ({"max_tokens": 10, "start_on": "robot"}, "robot"),
        ({"max_tokens": 10, "end_on": ["user", 3]}, r"end_on\[1\]"),
        ({"max_tokens": 10, "keep_system": 1}, "keep_system"),
        ({"max_tokens": 10, "allow_partial": "yes"}, "allow_partial"),
        ({"max_tokens": 10, "encoding": "p50k_base"}, "p50k_base"),
        ({"max_tokens": 10, "counter": "len"}, "callable"),
        ({"max_tokens": 10, "counter": lambda m: -3}, "int >= 0"),
        ({"max_tokens": 10, "counter": lambda m: "7"}, "int >= 0"),
    ],
)
def test_bad_arguments_raise_and_change_nothing(kwargs: dict[str, Any], match: str) -> None:
    arr = MessageArray(dialogue(2))
    before = arr.messages()
    with pytest.raises(MemciError, match=match):
        arr.trim_to_tokens(**kwargs)
    assert arr.messages() == before
    assert arr.batch_index == 0


def test_huge_budgets_keep_everything() -> None:
    arr = MessageArray(dialogue(2))
    arr.trim_to_tokens(10**30)
    assert arr.messages() == dialogue(2)
    assert arr.batch_index == 1
    with pytest.raises(InvalidOperationError):
        arr.trim_to_tokens(-(10**30))


# ---- properties over random histories with tool calls -----------------------------------------

words = st.lists(st.sampled_from(["alpha", "beta", "天气", "🙂", "call", "x" * 40]), min_size=1, max_size=5).map(
    " ".join
)


@st.composite
def agent_histories(draw: st.DrawFn) -> list[Message]:
    """A system prompt, then turns of a user message, tool rounds (1-2 calls each, every call
    answered) and an answer."""
    history: list[Message] = [system(draw(words))] if draw(st.booleans()) else []
    n = 0
    for _ in range(draw(st.integers(0, 5))):
        history.append(user(draw(words)))
        for _ in range(draw(st.integers(0, 2))):
            ids = [f"c{n + k}" for k in range(draw(st.integers(1, 2)))]
            n += len(ids)
            history.append(calling(*(call(i, "f", json.dumps({"q": draw(words)})) for i in ids)))
            history.extend(tool(i, draw(words)) for i in ids)
        history.append(assistant(draw(words)))
    return history


def units_intact(kept: list[Message]) -> bool:
    """Every kept call has all its results right after it, and every kept result its call."""
    for i, m in enumerate(kept):
        if m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            following = [r.get("tool_call_id") for r in kept[i + 1 : i + 1 + len(ids)]]
            if following != ids:
                return False
        if m["role"] == "tool" and not any(
            m["tool_call_id"] in [c["id"] for c in p.get("tool_calls") or ()] for p in kept[:i]
        ):
            return False
    return True


@given(
    history=agent_histories(),
    budget=st.integers(0, 400),
    strategy=st.sampled_from(["last", "first"]),
    start_on=st.sampled_from([None, "user", "assistant"]),
    end_on=st.sampled_from([None, "assistant", "tool"]),
    allow_partial=st.booleans(),
    encoding=st.sampled_from(["o200k_base", "cl100k_base", "approximate"]),
)
def test_the_budget_holds_and_tool_calls_are_never_split(
    *,
    history: list[Message],
    budget: int,
    strategy: str,
    start_on: str | None,
    end_on: str | None,
    allow_partial: bool,
    encoding: str,
) -> None:
    arr = MessageArray(history)
    arr.trim_to_tokens(
        budget, strategy=strategy, start_on=start_on, end_on=end_on, allow_partial=allow_partial, encoding=encoding
    )
    kept = arr.messages()
    assert units_intact(kept)
    system_cost = tokens.count_messages([m for m in history[:1] if m["role"] == "system"], encoding)
    assert arr.token_count(encoding) <= max(budget, system_cost)
    originals = [m for m in kept if m in history]
    assert len(originals) >= len(kept) - 1  # at most one message was cut
    rest = iter(history)
    assert all(any(h == m for h in rest) for m in originals)  # in their original order
    if strategy == "last" and start_on and kept and kept[0]["role"] != "system":
        assert kept[0]["role"] == start_on
    if end_on and kept and not (len(kept) == 1 and kept[0]["role"] == "system"):
        assert kept[-1]["role"] == end_on
    arr.rollback(0)
    assert arr.messages() == history


# ---- the same results as LangChain's trim_messages -------------------------------------------------

lines = st.lists(
    st.sampled_from(["alpha", "beta gamma delta", "天气很好", "🙂🙂", "", "x" * 30]), min_size=1, max_size=4
)
plain_contents = st.one_of(
    lines.map("\n".join),
    st.lists(lines.map(lambda t: {"type": "text", "text": "\n".join(t)}), min_size=1, max_size=3),
)


@st.composite
def plain_histories(draw: st.DrawFn) -> list[Message]:
    """Messages without tool calls. A system message may lead, and appear later, but never two in
    a row at the start (memci keeps the whole leading run, LangChain only the first)."""
    history: list[Message] = []
    for _ in range(draw(st.integers(0, 10))):
        leading_system = len(history) == 1 and history[0]["role"] == "system"
        role = draw(st.sampled_from(["user", "assistant"] if leading_system else ["user", "assistant", "system"]))
        history.append({"role": role, "content": draw(plain_contents)})
    return history


LC_TYPES = {"user": "human", "assistant": "ai", "system": "system"}


def langchain_trim(history: list[Message], budget: int, counter: Any, **kwargs: Any) -> list[tuple[str, Any]]:
    lc = pytest.importorskip("langchain_core.messages")
    for key in ("start_on", "end_on"):
        if kwargs.get(key) is not None:
            kwargs[key] = LC_TYPES[kwargs[key]]
    kept = lc.trim_messages(lc.convert_to_messages(history), max_tokens=budget, token_counter=counter, **kwargs)
    return [({v: k for k, v in LC_TYPES.items()}[m.type], m.content) for m in kept]


def exact_counter(messages: list[Any]) -> int:
    from langchain_core.messages import convert_to_openai_messages

    # Blocks stay blocks (a text block costs what its text does; joining them would not).
    return sum(tokens.count_message(m) for m in convert_to_openai_messages(messages, text_format="block"))


@given(
    history=plain_histories(),
    budget=st.integers(0, 120),
    strategy=st.sampled_from(["last", "first"]),
    keep_system=st.booleans(),
    start_on=st.sampled_from([None, "user", "assistant", "system"]),
    end_on=st.sampled_from([None, "user", "assistant"]),
    allow_partial=st.booleans(),
    exact=st.booleans(),
)
def test_same_result_as_langchain_trim_messages(
    *,
    history: list[Message],
    budget: int,
    strategy: str,
    keep_system: bool,
    start_on: str | None,
    end_on: str | None,
    allow_partial: bool,
    exact: bool,
) -> None:
    lc = pytest.importorskip("langchain_core.messages")
    last = strategy == "last"
    # With an exact counter, LangChain counts the kept lines in reverse order while it searches
    # (docs/tokens.md); an order-blind counter (characters) is used for partial cuts.
    exact = exact and not allow_partial
    lc_counter = exact_counter if exact else lc.utils.count_tokens_approximately
    expected = langchain_trim(
        history,
        budget,
        lc_counter,
        strategy=strategy,
        allow_partial=allow_partial,
        end_on=end_on,
        **({"include_system": keep_system, "start_on": start_on} if last else {}),
    )
    arr = MessageArray(history)
    arr.trim_to_tokens(
        budget,
        strategy=strategy,
        keep_system=keep_system and last,
        start_on=start_on if last else None,
        end_on=end_on,
        allow_partial=allow_partial,
        counter=tokens.count_message if exact else tokens.approximate,
    )
    assert [(m["role"], m["content"]) for m in arr.messages()] == expected


# ---- hysteresis (low_water) ---------------------------------------------------------------------


def plain_trim(messages: list[Message], encoding: str, start_on: str | None) -> Any:
    """``budget -> messages`` of a plain trim of ``messages`` on a fresh array."""

    def trim(budget: int) -> list[Message]:
        arr = MessageArray(messages)
        arr.trim_to_tokens(budget, start_on=start_on, encoding=encoding)
        return arr.messages()

    return trim


def leading_system(messages: list[Message]) -> int:
    return next((i for i, m in enumerate(messages) if m["role"] not in ("system", "developer")), len(messages))


@given(
    history=agent_histories(),
    chunks=st.lists(st.integers(1, 6), min_size=1, max_size=8),
    budget=st.integers(0, 300),
    low_water=st.sampled_from([0.1, 0.5, 0.6, 1.0]),
    start_on=st.sampled_from([None, "user"]),
    encoding=st.sampled_from(["o200k_base", "approximate"]),
)
def test_low_water_follows_the_reference_rule_and_only_grows_between_cuts(
    *,
    history: list[Message],
    chunks: list[int],
    budget: int,
    low_water: float,
    start_on: str | None,
    encoding: str,
) -> None:
    """An agent loop: messages arrive in chunks and the array is trimmed after each. Each trim is
    the reference rule's result for the messages it saw; the budget holds; no tool group is split;
    and between cuts (trims the budget decided) the kept messages are the last ones with the new
    ones after them."""
    from reference import trimmed_with_low_water

    arr = MessageArray()
    sent: list[Message] = []
    at = 0
    for size in [*chunks, len(history)]:
        new = history[at : at + size]
        at += len(new)
        arr.append(new)
        seen = arr.messages()
        system = leading_system(seen)
        expected = trimmed_with_low_water(plain_trim(seen, encoding, start_on), budget, low_water, system)
        at_max = plain_trim(seen, encoding, start_on)(budget)
        arr.trim_to_tokens(budget, start_on=start_on, encoding=encoding, low_water=low_water)
        kept = arr.messages()
        assert kept == expected
        assert units_intact(kept) or not units_intact(seen)  # a chunk may end between a call and its result
        assert arr.token_count(encoding) <= max(budget, tokens.count_messages(seen[:system], encoding))
        if at_max == plain_trim(seen, encoding, start_on)(10**18) and sent and seen[: len(sent)] == sent:
            assert kept[: len(sent)] == sent  # no cut: the window grew at its end only
        sent = kept


def test_low_water_cuts_back_in_one_step_and_then_grows_append_only() -> None:
    arr = MessageArray([system("s")])
    windows = []
    for turn in range(40):
        arr.append([user(f"question {turn} " + "word " * 20), assistant(f"answer {turn} " + "word " * 20)])
        arr.trim_to_tokens(400, low_water=0.5)
        windows.append(arr.messages())
    cuts = [i for i in range(1, 40) if windows[i][: len(windows[i - 1])] != windows[i - 1]]
    assert 3 <= len(cuts) < 20, cuts  # a cut every few turns, not every turn
    for i in cuts:
        assert tokens.count_messages(windows[i]) <= 200  # cut back to the low-water mark
        assert windows[i][0] == system("s")
    assert arr.token_count() <= 400


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"low_water": 0}, "low_water must be"),
        ({"low_water": 1.5}, "low_water must be"),
        ({"low_water": True}, "low_water must be"),
        ({"low_water": "0.6"}, "low_water must be"),
        ({"low_water": 0.6, "strategy": "first"}, "strategy='last'"),
        ({"low_water": 0.6, "allow_partial": True}, "allow_partial=False"),
    ],
)
def test_bad_low_water_raises_and_changes_nothing(kwargs: dict[str, Any], match: str) -> None:
    arr = MessageArray(dialogue(3))
    with pytest.raises(InvalidOperationError, match=match):
        arr.trim_to_tokens(10, **kwargs)
    assert arr.messages() == dialogue(3)
    assert arr.batch_index == 0


# ---- allow_partial with a text splitter ----------------------------------------------------------

SPLITTERS: dict[str, Any] = {
    "characters": list,
    "words": lambda text: re.split(r"(?<= )", text),
    "lines": lambda text: text.splitlines(keepends=True) or [text],
}


def characters(message: Message) -> int:
    """A counter of the characters of a message's string content: monotone in the text kept."""
    content = message["content"]
    return len(content) if isinstance(content, str) else 0


def reference_cut(text: str, split: Any, room: int, count: Any, last: bool) -> str | None:
    """The splitter cut by hand: the most whole pieces from the near end whose text fits ``room``."""
    pieces = split(text)[::-1] if last else split(text)

    def joined(k: int) -> str:
        return "".join(reversed(pieces[:k])) if last else "".join(pieces[:k])

    k = 0
    while k < len(pieces) and count(joined(k + 1)) <= room:
        k += 1
    return joined(k) if k else None


texts = st.lists(st.sampled_from(["alpha", "beta", "天气", "🙂", " ", "\n", "x" * 12]), min_size=1, max_size=30).map(
    "".join
)
#: One long message to cut: its text, the strategy and the splitter's name in SPLITTERS.
cuts = {"text": texts, "strategy": st.sampled_from(["last", "first"]), "splitter": st.sampled_from(sorted(SPLITTERS))}


@given(budget=st.integers(0, 200), **cuts)
def test_a_text_splitter_keeps_the_most_pieces_that_fit_from_the_near_end(
    text: str, budget: int, strategy: str, splitter: str
) -> None:
    split = SPLITTERS[splitter]
    arr = MessageArray([user(text)])
    arr.trim_to_tokens(
        budget, strategy=strategy, start_on=None, allow_partial=True, counter=characters, text_splitter=split
    )
    expected = text if len(text) <= budget else reference_cut(text, split, budget, len, strategy == "last")
    assert arr.messages() == ([] if expected is None else [user(expected)])


@given(budget=st.integers(0, 60), **cuts)
def test_a_text_splitter_cut_counted_in_an_encoding_fits_and_one_more_piece_would_not(
    text: str, budget: int, strategy: str, splitter: str
) -> None:
    split = SPLITTERS[splitter]
    arr = MessageArray([user(text)])
    arr.trim_to_tokens(budget, strategy=strategy, start_on=None, allow_partial=True, text_splitter=split)
    kept = arr.messages()
    if kept == [user(text)]:
        return
    pieces = split(text)[::-1] if strategy == "last" else split(text)

    def joined(k: int) -> str:
        return "".join(pieces[:k][::-1] if strategy == "last" else pieces[:k])

    k = 0
    if kept:
        assert arr.token_count() <= budget
        # The cut is whole pieces from the near end (else StopIteration fails the test).
        k = next(k for k in range(1, len(pieces) + 1) if joined(k) == kept[0]["content"])
    if k < len(pieces):
        assert MessageArray([user(joined(k + 1))]).token_count() > budget


def test_langchains_splitter_tests_keep_what_langchain_keeps() -> None:
    text = "This is a funky text."
    arr = MessageArray([user(text)])
    arr.trim_to_tokens(2, strategy="first", allow_partial=True, counter=characters, text_splitter=list)
    assert contents(arr.messages()) == ["Th"]
    arr.rollback(0)
    arr.trim_to_tokens(2, start_on=None, allow_partial=True, counter=characters, text_splitter=list)
    assert contents(arr.messages()) == ["t."]


def test_a_splitter_cut_is_one_batch_that_rollback_undoes() -> None:
    history = [system("be brief"), user("question"), assistant("one two three four five six")]
    arr = MessageArray(history)
    budget = tokens.count_messages([system("be brief"), assistant("five six")])
    arr.trim_to_tokens(budget, start_on=None, allow_partial=True, text_splitter=SPLITTERS["words"])
    assert arr.messages() == [system("be brief"), assistant("five six")]
    assert arr.batch_index == 1
    arr.rollback(0)
    assert arr.messages() == history


def test_a_splitter_may_read_the_array_it_cuts() -> None:
    arr = MessageArray([user("a b c d e f g h")])
    seen: list[int] = []

    def split(text: str) -> list[str]:
        seen.append(len(arr.messages()))
        return list(text)

    arr.trim_to_tokens(arr.token_count() - 2, start_on=None, allow_partial=True, text_splitter=split)
    assert seen == [1]
    assert contents(arr.messages())[0] != "a b c d e f g h"


@pytest.mark.parametrize("counter", [None, characters])
@pytest.mark.parametrize(
    ("splitter", "allow_partial", "match"),
    [
        (lambda text: text, True, "must return a list of str, got 'a b c"),
        (lambda text: [text, 3], True, "must return a list of str"),
        (lambda text: text.split(" "), True, "must join back to the text"),
        ("split", True, "text_splitter must be a function"),
        (list, False, "takes allow_partial=True"),
    ],
)
def test_a_bad_text_splitter_raises_and_changes_nothing(
    counter: Any, splitter: Any, allow_partial: bool, match: str
) -> None:
    history = [user("a b c d e f g h i j")]
    arr = MessageArray(history)
    with pytest.raises(InvalidOperationError, match=match):
        arr.trim_to_tokens(5, start_on=None, allow_partial=allow_partial, counter=counter, text_splitter=splitter)
    assert arr.messages() == history
    assert arr.batch_index == 0
