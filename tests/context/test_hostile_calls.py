"""What a model writes never makes the recall tools raise (docs/context-system.md, "The recall
tools"): every call, in any of the three formats, gets an answer the context system accepts, in
bounded time, and a refused or failed call changes nothing."""

from __future__ import annotations

import json
from typing import Any

import memci
import pytest
from context_helpers import FixedSummarizer, make, run_rounds
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
    if "Refused" in text:
        assert ctx.state()["contents"] == before["contents"], "a refused call changes nothing"
    return text


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


# ---- fuzzing ------------------------------------------------------------------------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
NAMES = st.sampled_from(["recall_page", "list_pages", "other"]) | st.text(max_size=12) | JSONISH
CODE = st.lists(
    st.sampled_from(
        [
            "__result__ = ",
            "a = ",
            "recall_page(",
            "list_pages(",
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
