"""ATTP (python/memci/context/attp.py): answers parsed and checked, never run; results written as
TOML the model and ``tomllib`` read back."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memci.context import attp

TOOLS = ("recall_page", "list_pages")


def answer(code: str, status: str = "success") -> str:
    return f"[tool_call]\nstatus = \"{status}\"\ncode = '''\n{code}\n'''\n"


def program(code: str) -> attp.Program:
    parsed = attp.parse(answer(code), TOOLS)
    assert parsed is not None
    return parsed


def test_a_fail_status_is_nothing_to_run() -> None:
    assert attp.parse(answer("__result__ = recall_page(1)", status="fail"), TOOLS) is None


def test_the_calls_are_listed_in_the_order_the_code_makes_them_with_their_literal_arguments() -> None:
    code = (
        "a = [recall_page(1), [recall_page(2), {'k': list_pages(limit=3)}], recall_page(4)]\n"
        "list_pages()\n"
        "__result__ = (a, recall_page(page_index=5))"
    )
    assert program(code).calls == [
        ("recall_page", [1], {}),
        ("recall_page", [2], {}),
        ("list_pages", [], {"limit": 3}),
        ("recall_page", [4], {}),
        ("list_pages", [], {}),
        ("recall_page", [], {"page_index": 5}),
    ]


def test_the_result_is_built_from_each_calls_value_in_order() -> None:
    checked = program("a = recall_page(1)\nb = {'x': [a, list_pages(2)], 'n': -1}\n__result__ = [b, a, recall_page(3)]")
    assert len(checked.calls) == 3
    assert checked.result(["one", "two", "three"]) == [{"x": ["one", "two"], "n": -1}, "one", "three"]


def test_a_result_needs_one_value_per_call() -> None:
    with pytest.raises(ValueError, match="2 calls but 1 values"):
        program("__result__ = [recall_page(1), recall_page(2)]").result(["one"])


def test_code_without_calls_has_a_result_too() -> None:
    checked = program("x = {'a': (1, 2)}\n__result__ = [x, 'done']")
    assert checked.calls == []
    assert checked.result([]) == [{"a": [1, 2]}, "done"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[tool_call", "not valid TOML"),
        ("x = 1", "no [tool_call] table"),
        ('[tool_call]\nstatus = "ok"', 'status must be "success" or "fail"'),
        ('[tool_call]\nstatus = "success"\ncode = 3', "no code string"),
        (answer("__result__ = 1\n" + "#" * attp.MAX_CODE), f"at most {attp.MAX_CODE}"),
        (answer("__result__ = search('x')"), "only recall_page and list_pages can be called"),
        (answer("__result__ = recall_page(**{'page_index': 1})"), "* and ** arguments are not allowed"),
        (answer("__result__ = {**{}}"), "** in a dict is not allowed"),
        (answer("x = 1"), "must assign its result to __result__"),
        (answer("while True:\n    pass\n__result__ = 1"), "While is not allowed"),
        (answer("__result__ = [list_pages() for _ in range(2)]"), "is not a literal"),
        (answer("\n".join(["list_pages()"] * (attp.MAX_CALLS + 1)) + "\n__result__ = 1"), "at most 8 tool calls"),
    ],
)
def test_what_is_not_accepted_is_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(attp.RefusedError) as refused:
        attp.parse(text, TOOLS)
    assert reason in str(refused.value)


def test_only_the_named_tools_may_be_called() -> None:
    assert attp.parse(answer("__result__ = search('x')"), ("search",)) is not None
    with pytest.raises(attp.RefusedError, match="only search can be called"):
        attp.parse(answer("__result__ = recall_page(1)"), ("search",))


@given(st.text())
def test_a_result_field_reads_back_as_the_text_it_was_given(text: str) -> None:
    written = attp.result_text("success", result=text, message="done")
    assert written.startswith(attp.RESULT_HEADER + "\n")
    assert tomllib.loads(written) == {"tool_result": {"status": "success", "result": text, "message": "done"}}
