"""ATTP (python/memci/context/attp.py): answers parsed and checked, never run; results written as
TOML the model and ``tomllib`` read back."""

from __future__ import annotations

import json
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memci import _core
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
        ("[tool_call]\nstatus = 3", "got a TOML integer"),
        ('[tool_call]\nstatus = "success"\ncode = """x\n', "not valid TOML"),
        ('[tool_call]\nstatus = "success"\nstatus = "fail"', "at line 3, column 1"),
        ('[tool_call]\nstatus = "\ud800"', "not valid Unicode"),
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


# ---- the TOML reader (rust/src/core/attp.rs) --------------------------------------------------------


@given(st.text(), st.sampled_from(["success", "fail"]))
def test_the_reader_reads_the_code_tomllib_reads(code: str, status: str) -> None:
    """Any code, written as a TOML basic or literal string, reads back as the code tomllib reads."""
    for written in (attp._toml_str(code), attp._toml_text(code)):
        text = f'[tool_call]\nstatus = "{status}"\ncode = {written}\n'
        assert tomllib.loads(text)["tool_call"]["code"] == code
        expected = (code, None) if status == "success" else (None, None)
        assert _core.read_attp_call(text) == expected


def test_regression_an_integer_of_over_4300_digits_is_refused_not_a_value_error() -> None:
    text = answer("__result__ = 1") + "n = " + "9" * 5000 + "\n"
    with pytest.raises(ValueError, match="Exceeds the limit"):
        tomllib.loads(text)  # what the reader it replaces did
    with pytest.raises(attp.RefusedError, match=r"not valid TOML \(integer number overflowed, at line 6, column 5\)"):
        attp.parse(text, TOOLS)


def test_regression_a_dotted_key_of_49000_parts_is_refused() -> None:
    """98 KB, under the length cap: tomllib took 85 s over it (quadratic in the key's parts); the
    core reads it in one pass and refuses nesting over 80 levels."""
    text = answer("__result__ = 1") + "a" + ".a" * 49_000 + " = 1\n"
    assert len(text) < attp.MAX_TEXT
    with pytest.raises(attp.RefusedError, match="not valid TOML"):
        attp.parse(text, TOOLS)
    assert attp.parse(answer("__result__ = 1") + "a" + ".a" * 60 + " = 1\n", TOOLS) is not None


# ---- the size of __result__ ----------------------------------------------------------------------


def nested(levels: int, width: int = 10, leaf: str = "'" + "x" * 1000 + "'") -> str:
    """Code whose __result__ is ``width`` copies of the name of the level below, ``levels`` deep."""
    lines = [f"v0 = {leaf}"]
    lines += [f"v{i} = [{', '.join([f'v{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join([*lines, f"__result__ = v{levels}"])


def test_regression_a_short_program_cannot_build_a_huge_result() -> None:
    """1,273 characters of code built a 100 MB result (five levels of ten copies of 1,000
    characters): refused when checked, by the size it would have, before anything runs."""
    code = nested(5)
    assert len(code) < 1_300
    with pytest.raises(attp.RefusedError) as refused:
        attp.parse(answer(code), TOOLS)
    assert f"at least {attp.MAX_RESULT_CHARS + 1} characters" in str(refused.value)
    assert "use each value once" in str(refused.value)


def test_aliases_are_counted_each_time_they_are_used() -> None:
    checked = program(nested(3, width=4, leaf="'abc'"))
    assert checked.result_chars([]) == len(attp.json_text(checked.result([]))) == 4**3 * 5 + 2 * (4 + 4**2 + 4**3)


def test_a_calls_value_is_counted_each_time_the_code_uses_it() -> None:
    checked = program("p = recall_page(1)\nq = [p, p, {'k': p}]\nlist_pages()\n__result__ = [q, q]")
    values = [{"page": 1, "messages": ["hello"]}, []]
    sizes = [len(attp.json_text(v)) for v in values]
    assert checked.result_chars(sizes) == len(attp.json_text(checked.result(values)))
    assert checked.size.uses == {0: 6}, "list_pages' value is not in the result"


def test_a_result_of_a_million_uses_of_one_call_is_refused_whatever_the_call_returns() -> None:
    code = nested(6, leaf="recall_page(1)")
    with pytest.raises(attp.RefusedError, match="at least"):
        attp.parse(answer(code), TOOLS)


def test_names_may_nest_lists_at_most_100_deep() -> None:
    deep = "\n".join(["v0 = 1", *(f"v{i} = [v{i - 1}]" for i in range(1, attp.MAX_DEPTH + 2))])
    with pytest.raises(attp.RefusedError, match="nest more than 100 deep"):
        attp.parse(answer(deep + "\n__result__ = 1"), TOOLS)
    fits = "\n".join(["v0 = 1", *(f"v{i} = [v{i - 1}]" for i in range(1, attp.MAX_DEPTH + 1))])
    value = json.loads(attp.json_text(program(fits + f"\n__result__ = v{attp.MAX_DEPTH}").result([])))
    for _ in range(attp.MAX_DEPTH):
        (value,) = value
    assert value == 1


LEAF = st.one_of(
    st.sampled_from(["1", "-2.5", "None", "True", "'x'", "'é\\n'", "recall_page(1)", "list_pages(2)"]),
    st.text(max_size=8).map(repr),
)


@st.composite
def aliasing_programs(draw: st.DrawFn) -> str:
    """Code whose names hold lists, tuples and dicts of literals, calls and earlier names."""
    lines: list[str] = []
    for i in range(draw(st.integers(1, 6))):
        names = [f"v{j}" for j in range(i)]
        item = st.sampled_from(names) | LEAF if names else LEAF
        items = draw(st.lists(item, max_size=4))
        shape = draw(st.sampled_from(["list", "tuple", "dict", "one"]))
        if shape == "dict":
            value = "{" + ", ".join(f"'k{n}': {v}" for n, v in enumerate(items)) + "}"
        elif shape == "tuple":
            value = "(" + "".join(f"{v}, " for v in items) + ")"
        elif shape == "one" and items:
            value = items[0]
        else:
            value = "[" + ", ".join(items) + "]"
        lines.append(f"v{i} = {value}")
    lines.append(f"__result__ = v{len(lines) - 1}")
    return "\n".join(lines)


@given(code=aliasing_programs(), data=st.data())
def test_result_chars_is_the_length_of_the_json_of_the_result(code: str, data: st.DataObject) -> None:
    parsed = attp.parse(answer(code), TOOLS)
    assert parsed is not None
    values = [data.draw(st.lists(st.text(max_size=5), max_size=3)) for _ in parsed.calls]
    sizes = [len(attp.json_text(v)) for v in values]
    assert parsed.result_chars(sizes) == len(attp.json_text(parsed.result(values)))
