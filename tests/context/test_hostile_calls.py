"""What a model writes never makes the recall tools raise (docs/context-system.md, "The recall
tools"): every call, in any of the three formats, gets an answer the context system accepts, in
bounded time, and a refused or failed call changes nothing."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import memci
import pytest
from context_helpers import FixedSummarizer, assistant, make, run_rounds, user
from hypothesis import given
from hypothesis import strategies as st


def archived() -> memci.ContextSystem:
    """Pages 1..3 archived (rounds 1..5 run with two active pages)."""
    ctx = make(active_pages=2, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 5)
    return ctx


def openai(arguments: Any, name: Any = "recall_page") -> dict[str, Any]:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}


def anthropic(arguments: Any, name: Any = "recall_page") -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments}


def attp(code: str) -> str:
    return f"[tool_call]\nstatus = \"success\"\ncode = '''\n{code}\n'''\n"


def answered(ctx: memci.ContextSystem, call: object) -> str:
    """The text of the answer to ``call``, after checking it is a message the system accepts."""
    before = ctx.state()
    answer = ctx.handle_tool_call(call)
    if answer.get("type") == "tool_result":
        ctx.add({"role": "user", "content": [answer]})
        text = answer["content"]
    else:
        ctx.add(answer)
        text = answer["content"]
    assert isinstance(text, str)
    assert len(text) <= memci.context.attp.MAX_RESULT_CHARS + 100, "an answer stays within its bound"
    if "Refused" in text:  # for what the call asks or for the size of its answer
        assert ctx.state()["contents"] == before["contents"], "a refused call changes nothing"
    return text


#: The words of a refusal for the answer's size, found once the pages were read: the answer is
#: built before any recall counts, so no recall counts then.
OVER_BUDGET = "tokens an answer may hold"


HOSTILE = [
    pytest.param(attp("__result__ = 0x" + "f" * 4000), "beyond", id="attp-huge-hex-int"),
    pytest.param(attp("__result__ = " + "9" * 5000), "not valid Python", id="attp-huge-decimal-int"),
    pytest.param(openai('{"page_index": ' + "9" * 5000 + "}"), "too large", id="openai-huge-int"),
    pytest.param(anthropic({"page_index": 10**5000}), "at most 2**63", id="anthropic-huge-int"),
    pytest.param(attp("__result__ = recall_page('²')"), "integer >= 1", id="attp-superscript-digit"),
    pytest.param(openai('{"page_index": "²"}'), "integer >= 1", id="openai-superscript-digit"),
    pytest.param(attp("__result__ = b'x'"), "bytes", id="attp-bytes"),
    pytest.param(attp("__result__ = {1, 2}"), "is a set", id="attp-set"),
    pytest.param(attp("__result__ = 1j"), "complex", id="attp-complex"),
    pytest.param(attp("__result__ = ..."), "ellipsis", id="attp-ellipsis"),
    pytest.param(attp("__result__ = " + "-" * 9000 + "1"), "too deeply nested", id="attp-deep-unary"),
    pytest.param(attp("__result__ = " + "not " * 4000 + "x"), "too deeply nested", id="attp-deep-not"),
    pytest.param("[tool_call]\nx = " + "[" * 100_000, "too", id="toml-deep"),
    pytest.param(openai("[" * 100_000), "characters long", id="openai-deep-arguments"),
    pytest.param(openai("[" * 10_000), "nesting too deep", id="openai-deep-short-arguments"),
    pytest.param(attp('__result__ = "\\ud800"'), "lone surrogate", id="attp-lone-surrogate"),
    pytest.param(openai('{"page_index": "\\ud800"}'), "integer >= 1", id="openai-lone-surrogate"),
    pytest.param(openai("{}", name=["recall_page"]), "tool name must be a string", id="openai-list-name"),
    pytest.param(anthropic({}, name={"a": 1}), "tool name must be a string", id="anthropic-dict-name"),
    pytest.param("x" * 200_000, "characters long", id="attp-huge-text"),
    pytest.param(openai('{"query": "\\ud800"}', "search_pages"), "lone surrogate", id="search-lone-surrogate"),
    pytest.param(anthropic({"query": "x" * 5000}, "search_pages"), "characters long", id="search-huge-query"),
    pytest.param(anthropic({"query": ["page"]}, "search_pages"), "must be a string", id="search-list-query"),
    pytest.param(openai('{"query": "page", "k": -1}', "search_pages"), "integer >= 1", id="search-negative-k"),
    pytest.param(openai("{}", "search_pages"), "missing argument 'query'", id="search-no-query"),
    pytest.param(attp("__result__ = search_pages(query=1)"), "must be a string", id="attp-search-int-query"),
    pytest.param('[tool_call]\nstatus = "success"\ncode = ' + "9" * 5000, "not valid TOML", id="toml-huge-int"),
    pytest.param(attp("__result__ = 1") + "a" + ".a" * 49_000 + " = 1", "not valid TOML", id="toml-deep-dotted-key"),
]


@pytest.mark.parametrize(("call", "words"), HOSTILE)
def test_regression_hostile_calls_get_a_refusal_the_system_accepts(call: object, words: str) -> None:
    ctx = archived()
    text = answered(ctx, call)
    assert words in text
    assert all(e.recall_count == 0 for e in ctx.contents)


@pytest.mark.parametrize("name", [["recall_page"], {"x": 1}, 7, None])
def test_regression_is_recall_call_takes_any_tool_name(name: object) -> None:
    ctx = archived()
    assert ctx.is_recall_call(openai("{}", name=name)) is False
    assert ctx.is_recall_call(anthropic({}, name=name)) is False


def test_regression_an_attp_program_is_all_or_nothing() -> None:
    """A failing call after a good one counted the good one's recall."""
    ctx = archived()
    text = answered(ctx, attp("a = recall_page(1)\n__result__ = recall_page(99)"))
    assert 'status = "error"' in text
    assert "page 99 does not exist" in text
    assert all(e.recall_count == 0 for e in ctx.contents)
    text = answered(ctx, attp("a = recall_page(1)\n__result__ = [a, list_pages(3)]"))
    result = json.loads(text.split("result = ", 1)[1].strip().strip("'").strip())
    assert result[0]["page"] == 1
    assert {p["index"]: p["recall_count"] for p in result[1]}[1] == 1, "the listing runs after the recall"


def test_regression_a_huge_page_index_through_the_api_is_a_page_error() -> None:
    ctx = archived()
    with pytest.raises(memci.PageError, match="an integer of 16610 bits does not exist"):
        ctx.recall(10**5000)


def nested(levels: int, leaf: str, width: int = 10) -> str:
    """Code whose __result__ is ``width`` copies of the name of the level below, ``levels`` deep."""
    lines = [f"v0 = {leaf}"]
    lines += [f"v{i} = [{', '.join([f'v{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join([*lines, f"__result__ = v{levels}"])


def peak_bytes(ctx: memci.ContextSystem, call: object) -> tuple[str, int]:
    """The answer to ``call`` and the most memory Python held while writing it."""
    tracemalloc.start()
    try:
        text = answered(ctx, call)
        return text, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_regression_a_short_answer_cannot_build_a_huge_result() -> None:
    """1,273 characters of ATTP built a 100 MB answer (a 1,000-character string, ten copies a
    level, five levels): refused by the size it would have, before it is built or anything runs."""
    ctx = archived()
    code = nested(5, "'" + "x" * 1000 + "'")
    text, peak = peak_bytes(ctx, attp(code))
    assert len(attp(code)) <= 1_300
    assert 'status = "refused"' in text
    assert "use each value once" in text
    assert peak < 2_000_000


def test_regression_a_page_shared_a_hundred_thousand_times_is_refused_unbuilt() -> None:
    """The same with a recalled page: its size is known only once it is read, and is checked
    before the result is built (100,000 copies of page 1 would be some 30 MB)."""
    ctx = archived()
    text, peak = peak_bytes(ctx, attp(nested(5, "recall_page(1)")))
    assert 'status = "refused"' in text
    assert OVER_BUDGET in text
    assert "characters long" in text
    assert peak < 2_000_000


def big_pages(*words: int) -> memci.ContextSystem:
    """Archived pages 1, 2... whose answers hold ``words`` words each (a token a word), then one
    active page."""
    ctx = make(active_pages=1, summarizer=FixedSummarizer())
    for n, count in enumerate(words, 1):
        ctx.extend([user(f"Question {n}"), assistant(" ".join(["word"] * count))])
        ctx.end_round()
    ctx.add(user("Now"))
    return ctx


def test_a_page_over_the_token_budget_is_refused_and_says_how_to_ask_for_less() -> None:
    budget = memci.context.recall.ANSWER_MAX_TOKENS
    ctx = big_pages(budget + 1000, budget // 2 - 2000)
    for call in (openai('{"page_index": 1}'), anthropic({"page_index": 1})):
        text = answered(ctx, call)
        assert text.startswith("Refused: the answer would be ")
        assert int(text.split()[5]) > budget, "the refusal says how large the answer would be"
        assert "page 1 alone is too long to recall whole; its summary is in the contents page" in text
    assert json.loads(answered(ctx, openai('{"page_index": 2}')))["page"] == 2
    text = answered(ctx, attp("__result__ = [recall_page(2), recall_page(2)]"))
    assert 'status = "success"' in text, "half the budget twice fits"
    text = answered(ctx, attp("a = recall_page(2)\n__result__ = [a, a, a, a, a]"))
    assert OVER_BUDGET in text
    assert "each value used once" in text


def test_a_page_over_the_character_bound_is_refused_before_its_tokens_are_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx = make(active_pages=1, summarizer=FixedSummarizer())
    ctx.extend([user("Question"), assistant("a " * 300_000)])
    ctx.end_round()
    ctx.add(user("Now"))
    counted: list[int] = []
    count = memci.tokens.count
    monkeypatch.setattr(memci.tokens, "count", lambda text, *a: counted.append(len(text)) or count(text, *a))
    for call in (openai('{"page_index": 1}'), attp("__result__ = recall_page(1)")):
        text = answered(ctx, call)
        assert "Refused: the answer would be " in text
        assert " characters long, over the 32000 tokens" in text
        assert int(text.split("would be ")[1].split()[0]) > memci.context.attp.MAX_RESULT_CHARS
        assert "page 1 alone is too long" in text
    assert counted == [], "the page's tokens were never counted"
    answered(ctx, openai('{"limit": 3}', name="list_pages"))
    assert len(counted) == 1, "an answer within the bound is counted"


@pytest.mark.parametrize(
    "call",
    [
        {
            "id": "call_\ud800",
            "type": "function",
            "function": {"name": "recall_page", "arguments": '{"page_index": 1}'},
        },
        {"type": "tool_use", "id": "toolu_\ud800", "name": "recall_page", "input": {"page_index": 1}},
        {"type": "function_call", "call_id": "call_\ud800", "name": "recall_page", "arguments": '{"page_index": 1}'},
    ],
    ids=["openai", "anthropic", "responses"],
)
def test_regression_a_call_id_with_a_lone_surrogate_gets_an_answer_add_accepts(call: dict[str, Any]) -> None:
    """The answer echoed the id as it was, and ``add`` refused the answer."""
    ctx = archived()
    answer = ctx.handle_tool_call(call)
    if answer.get("type") == "tool_result":
        ctx.add({"role": "user", "content": [answer]})
        reply_to, text = answer["tool_use_id"], answer["content"]
    elif answer.get("type") == "function_call_output":
        ctx.add(answer)
        reply_to, text = answer["call_id"], answer["output"]
    else:
        ctx.add(answer)
        reply_to, text = answer["tool_call_id"], answer["content"]
    assert reply_to.endswith("_\\ud800"), "escaped, so the loop can still tell which call it was"
    assert "holds a lone surrogate" in text
    assert all(e.recall_count == 0 for e in ctx.contents), "the call did not run"


# ---- fuzzing ------------------------------------------------------------------------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
NAMES = st.sampled_from(["recall_page", "list_pages", "search_pages", "other"]) | st.text(max_size=12) | JSONISH
CODE = st.lists(
    st.sampled_from(
        [
            "__result__ = ",
            "a = ",
            "recall_page(",
            "list_pages(",
            "search_pages(",
            "query=",
            "k=",
            "'page'",
            "limit=",
            "page_index=",
            ")",
            "(",
            "[",
            "]",
            "{",
            "}",
            ", ",
            ":",
            "1",
            "2",
            "99",
            "-3",
            "'x'",
            '"\\ud800"',
            "0x" + "f" * 40,
            "a",
            "\n",
            "import os",
            "lambda: 1",
            "b'x'",
            "1j",
            "...",
            "not ",
            "__import__('os')",
        ]
    ),
    max_size=25,
).map("".join)


@given(arguments=JSONISH | st.text(max_size=40), name=NAMES)
def test_native_calls_never_raise(arguments: Any, name: Any) -> None:
    ctx = archived()
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    answered(ctx, openai(raw, name))
    if not isinstance(arguments, str):
        answered(ctx, anthropic(arguments, name))


@given(code=CODE | st.text(max_size=60))
def test_attp_code_never_raises(code: str) -> None:
    ctx = archived()
    answered(ctx, attp(code))


@given(text=st.text(max_size=200))
def test_any_attp_text_never_raises(text: str) -> None:
    ctx = archived()
    answered(ctx, text)


LITERALS = st.sampled_from(["1", "'x'", "'" + "y" * 1000 + "'", "None", "[]", "{'k': -2.5}"])
CALLS = st.sampled_from(["recall_page(1)", "recall_page(2)", "list_pages(3)"])


@st.composite
def aliased_programs(draw: st.DrawFn) -> str:
    """Code whose names hold lists and dicts (nested a level or two) of literals, a few calls and
    earlier names, each name maybe used many times: results from a few characters to far beyond
    any budget (a dozen copies a level, eight levels)."""
    lines: list[str] = []
    for i in range(draw(st.integers(1, 8))):
        earlier = st.sampled_from([f"v{j}" for j in range(i)]) if i else LITERALS
        items = draw(st.lists(earlier | LITERALS, min_size=1, max_size=4))
        items += [draw(earlier)] * draw(st.integers(0, 12))  # one value shared, maybe many times
        if draw(st.booleans()):
            items.insert(draw(st.integers(0, len(items))), draw(CALLS))
        if len(items) > 1 and draw(st.booleans()):  # nest the second half a level deeper
            half = len(items) // 2
            items = [*items[:half], "[" + ", ".join(items[half:]) + "]"]
        shape = draw(st.sampled_from(["list", "tuple", "dict"]))
        if shape == "dict":
            value = "{" + ", ".join(f"'k{n}': {v}" for n, v in enumerate(items)) + "}"
        elif shape == "tuple":
            value = "(" + "".join(f"{v}, " for v in items) + ")"
        else:
            value = "[" + ", ".join(items) + "]"
        lines.append(f"v{i} = {value}")
    lines.append(f"__result__ = v{len(lines) - 1}")
    return "\n".join(lines)


@given(code=aliased_programs())
def test_nested_and_aliased_results_are_answered_within_the_budget(code: str) -> None:
    ctx = archived()
    text = answered(ctx, attp(code))
    assert 'status = "success"' in text or 'status = "refused"' in text or 'status = "error"' in text
