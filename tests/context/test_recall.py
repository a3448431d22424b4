"""Recall: the API, the tool definitions in three formats, and the model's calls in each format.

Includes the regression for the Go project's last bug: recall put nothing back in the window.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

import memci
import pytest
from context_helpers import FixedSummarizer, interaction, make, run_rounds, user
from hypothesis import given, settings
from hypothesis import strategies as st
from memci.context import recall
from memci.context.page import ArchivedPage


def archived(**kwargs: Any) -> memci.ContextSystem:
    """Pages 1..3 archived and saved (rounds 1..5 run with two active pages)."""
    ctx = make(active_pages=2, summarizer=FixedSummarizer(), **kwargs)
    run_rounds(ctx, 1, 5)
    ctx.save()
    return ctx


def openai_call(name: str, arguments: str, call_id: str = "call_r") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def attp(code: str, status: str = "success") -> str:
    """A model's ATTP answer whose tool_call runs ``code``."""
    return (
        'thought = """I need an earlier page."""\n\n'
        f'[tool_call]\nstatus = "{status}"\ntarget = "recall"\n'
        f"code = '''\n{code}\n'''\n"
    )


def attp_result(message: dict[str, Any]) -> dict[str, Any]:
    assert message["role"] == "user"
    assert message["content"].startswith(recall.ATTP_RESULT_HEADER)
    table: dict[str, Any] = tomllib.loads(message["content"])["tool_result"]
    return table


# ---- the API ------------------------------------------------------------------------------------


def test_recall_returns_the_page_and_counts_the_recall():
    ctx = archived()
    page = ctx.recall(2)
    assert page.index == 2
    assert page.messages() == interaction(2)
    assert [e.role for e in page.entries] == ["user", "assistant", "tool", "assistant"]
    entry = next(e for e in ctx.contents if e.index == 2)
    assert (entry.recall_count, entry.last_recall_round) == (1, 5)
    ctx.end_round()
    ctx.recall(2)
    entry = next(e for e in ctx.contents if e.index == 2)
    assert (entry.recall_count, entry.last_recall_round) == (2, 6)


def test_recalling_an_active_page_returns_it_without_counting():
    ctx = archived()
    assert ctx.recall(5).messages() == interaction(5)
    assert all(e.recall_count == 0 for e in ctx.contents)


@pytest.mark.parametrize("bad", [0, -1, 7, 10**30])
def test_recalling_a_page_that_does_not_exist_is_a_page_error(bad: int):
    ctx = archived()
    with pytest.raises(memci.PageError, match=f"page {bad} does not exist \\(pages are 1 to 5\\)"):
        ctx.recall(bad)


@pytest.mark.parametrize("bad", ["1", 1.0, True, None])
def test_a_page_index_must_be_an_int(bad: object):
    with pytest.raises(memci.PageError, match="page_index must be an int"):
        archived().recall(bad)  # type: ignore[arg-type]


def test_a_page_lost_by_the_storage_is_named():
    ctx = archived()
    del ctx.storage.pages[1]  # type: ignore[attr-defined]
    with pytest.raises(memci.PageError, match="page 1 was archived but the storage does not hold it"):
        ctx.recall(1)


# ---- definitions --------------------------------------------------------------------------------


def test_openai_definitions_are_function_tools_with_json_schemas():
    tools = make().tool_definitions("openai")
    assert [t["function"]["name"] for t in tools] == ["recall_page", "list_pages", "search_pages"]
    recall_page = tools[0]
    assert recall_page["type"] == "function"
    params = recall_page["function"]["parameters"]
    assert params["required"] == ["page_index"]
    assert params["properties"]["page_index"]["type"] == "integer"
    assert params["additionalProperties"] is False
    assert tools[1]["function"]["parameters"]["required"] == []
    search = tools[2]["function"]["parameters"]
    assert search["required"] == ["query"]
    assert search["properties"]["query"]["type"] == "string"
    assert search["properties"]["k"] == {
        "type": "integer",
        "minimum": 1,
        "description": "How many pages to return (at most 20).",
    }
    assert make().tool_definitions() == tools


def test_anthropic_definitions_carry_an_input_schema():
    tools = make().tool_definitions("anthropic")
    assert [t["name"] for t in tools] == ["recall_page", "list_pages", "search_pages"]
    assert tools[0]["input_schema"]["required"] == ["page_index"]
    assert all(set(t) == {"name", "description", "input_schema"} for t in tools)


def test_attp_definitions_are_python_signatures_with_docstrings():
    text = make().tool_definitions("attp")
    assert "def recall_page(page_index: int) -> dict:" in text
    assert "def list_pages(limit: int = 10) -> list[dict]:" in text
    assert ">>> __result__ = recall_page(3)" in text
    assert "def search_pages(query: str, k: int = 5) -> list[str]:" in text


def test_unknown_definition_format_is_an_error():
    with pytest.raises(memci.InvalidOperationError, match="format must be one of openai, anthropic, responses, attp"):
        make().tool_definitions("xml")  # type: ignore[call-overload]


def test_the_system_segment_describes_the_recall_tools_in_the_chosen_protocol():
    native = make().build_messages(sanitize=False)
    assert "call the recall_page tool" in native[1]["content"]
    attp_system = make(tools="attp").build_messages(sanitize=False)
    assert "def recall_page(page_index: int)" in attp_system[1]["content"]
    assert "[tool_call]" in attp_system[1]["content"]


# ---- OpenAI tool calls --------------------------------------------------------------------------


def test_an_openai_recall_call_returns_the_page_as_a_tool_message():
    ctx = archived()
    result = ctx.handle_tool_call(openai_call("recall_page", '{"page_index": 1}'))
    assert result["role"] == "tool"
    assert result["tool_call_id"] == "call_r"
    assert json.loads(result["content"]) == {"page": 1, "messages": interaction(1)}
    assert next(e for e in ctx.contents if e.index == 1).recall_count == 1


def test_an_openai_list_pages_call_lists_the_contents():
    ctx = archived()
    result = ctx.handle_tool_call(openai_call("list_pages", '{"limit": 2}'))
    listed = json.loads(result["content"])
    assert [p["index"] for p in listed] == [3, 2]
    assert set(listed[0]) == {"index", "summary", "recall_count", "rounds_since_recall"}
    assert json.loads(ctx.handle_tool_call(openai_call("list_pages", ""))["content"])[0]["index"] == 3


def test_sdk_objects_with_model_dump_are_accepted():
    class SdkCall:
        def model_dump(self) -> dict[str, Any]:
            return openai_call("recall_page", '{"page_index": 2}', "sdk")

    result = archived().handle_tool_call(SdkCall())
    assert result["tool_call_id"] == "sdk"
    assert json.loads(result["content"])["page"] == 2


@pytest.mark.parametrize(
    ("name", "arguments", "reason"),
    [
        ("get_weather", "{}", "'get_weather' is not a recall tool"),
        ("recall_page", "{not json", "not valid JSON"),
        ("recall_page", "[3]", "must be a JSON object"),
        ("recall_page", "{}", "missing argument 'page_index'"),
        ("recall_page", '{"page_index": 0}', "page_index must be an integer >= 1"),
        ("recall_page", '{"page_index": "two"}', "page_index must be an integer >= 1"),
        ("recall_page", '{"page_index": true}', "page_index must be an integer >= 1"),
        ("recall_page", '{"page_index": 1, "x": 2}', "unknown argument 'x'"),
        ("list_pages", '{"limit": -1}', "limit must be an integer >= 0"),
    ],
)
def test_bad_openai_calls_are_refused_in_the_result(name: str, arguments: str, reason: str):
    ctx = archived()
    before = ctx.state()
    result = ctx.handle_tool_call(openai_call(name, arguments))
    assert result["role"] == "tool"
    assert result["content"].startswith("Refused: ")
    assert reason in result["content"]
    assert ctx.state() == before


def test_a_missing_page_is_an_error_result_not_an_exception():
    result = archived().handle_tool_call(openai_call("recall_page", '{"page_index": 99}'))
    assert result["content"] == "Error: recall: page 99 does not exist (pages are 1 to 5)"


def test_an_active_page_is_not_sent_twice():
    result = archived().handle_tool_call(openai_call("recall_page", '{"page_index": 5}'))
    assert json.loads(result["content"])["in_window"] is True


def test_a_digit_string_page_index_is_taken_as_the_number():
    result = archived().handle_tool_call(openai_call("recall_page", '{"page_index": "3"}'))
    assert json.loads(result["content"])["page"] == 3


def test_what_is_not_a_tool_call_at_all_raises():
    ctx = archived()
    with pytest.raises(memci.InvalidOperationError, match="expected an OpenAI tool call"):
        ctx.handle_tool_call(42)
    with pytest.raises(memci.InvalidOperationError, match="needs a string 'id'"):
        ctx.handle_tool_call({"type": "function", "function": {"name": "recall_page", "arguments": "{}"}})


# ---- Anthropic tool_use blocks ------------------------------------------------------------------


def test_an_anthropic_tool_use_returns_a_tool_result_block():
    ctx = archived()
    block = {"type": "tool_use", "id": "toolu_1", "name": "recall_page", "input": {"page_index": 3}}
    result = ctx.handle_tool_call(block)
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_1"
    assert "is_error" not in result
    assert json.loads(result["content"])["messages"] == interaction(3)


def test_a_refused_anthropic_call_is_marked_as_an_error():
    result = archived().handle_tool_call({"type": "tool_use", "id": "t", "name": "rm_rf", "input": {}})
    assert result["is_error"] is True
    assert result["content"].startswith("Refused: ")


# ---- ATTP ------------------------------------------------------------------------------------------


def test_an_attp_recall_runs_and_answers_with_a_toml_result():
    ctx = archived()
    table = attp_result(ctx.handle_tool_call(attp("__result__ = recall_page(2)")))
    assert table["status"] == "success"
    assert json.loads(table["result"]) == {"page": 2, "messages": interaction(2)}
    assert next(e for e in ctx.contents if e.index == 2).recall_count == 1


def test_attp_code_may_name_results_and_combine_them():
    ctx = archived()
    code = "first = recall_page(page_index=1)\nlisting = list_pages(2)\n__result__ = {'a': first, 'b': [listing, 3]}"
    result = json.loads(attp_result(ctx.handle_tool_call(attp(code)))["result"])
    assert result["a"]["page"] == 1
    assert [p["index"] for p in result["b"][0]] == [3, 2]
    assert result["b"][1] == 3


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("import os\n__result__ = 1", "Import is not allowed"),
        ("__result__ = __import__('os').system('true')", "only recall_page, list_pages and search_pages can be called"),
        ("__result__ = open('/etc/passwd').read()", "only recall_page, list_pages and search_pages can be called"),
        ("__result__ = exec('x = 1')", "only recall_page, list_pages and search_pages can be called"),
        ("__result__ = eval('1')", "only recall_page, list_pages and search_pages can be called"),
        ("__result__ = recall_page.__globals__", "is not a literal"),
        ("__result__ = recall_page(len('ab'))", "is not a literal"),
        ("n = 2\n__result__ = recall_page(n)", "is not a literal"),
        ("__result__ = recall_page(*[1])", "is not a literal"),
        ("__result__ = [recall_page(i) for i in range(3)]", "is not a literal"),
        ("for i in [1]:\n    __result__ = recall_page(i)", "For is not allowed"),
        ("def f():\n    pass\n__result__ = 1", "FunctionDef is not allowed"),
        ("x = recall_page(1)", "must assign its result to __result__"),
        ("__result__ = y", "'y' is not defined"),
        ("__result__ = recall_page(1", "not valid Python"),
        ("__result__ = get_weather('Paris')", "only recall_page, list_pages and search_pages can be called"),
        ("__result__ = recall_page(1, 2)", "takes at most 1 argument"),
        ("__result__ = recall_page(page=1)", "unknown argument 'page'"),
        ("__result__ = list_pages(limit=-3)", "limit must be an integer >= 0"),
        ("\n".join(f"a{i} = list_pages()" for i in range(9)) + "\n__result__ = 1", "at most 8 tool calls"),
        ("__result__ = 1\n" + "#" * 20_001, "at most 20000"),
    ],
)
def test_attp_code_that_is_not_a_plain_recall_is_refused_and_nothing_runs(code: str, reason: str):
    ctx = archived()
    before = ctx.state()
    table = attp_result(ctx.handle_tool_call(attp("first = recall_page(1)\n" + code)))
    assert table["status"] == "refused"
    assert reason in table["message"]
    assert ctx.state() == before, "not even the valid call before the refused one ran"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("this is not toml [", "not valid TOML"),
        ('thought = "hm"', "no [tool_call] table"),
        ('[tool_call]\nstatus = "maybe"', 'status must be "success" or "fail"'),
        ('[tool_call]\nstatus = "success"', "no code string"),
    ],
)
def test_malformed_attp_is_refused(text: str, reason: str):
    table = attp_result(archived().handle_tool_call(text))
    assert table["status"] == "refused"
    assert reason in table["message"]


def test_an_attp_fail_status_runs_nothing():
    table = attp_result(archived().handle_tool_call('[tool_call]\nstatus = "fail"\nmessage = "cannot"'))
    assert table["status"] == "skipped"


def test_an_attp_recall_of_a_missing_page_is_an_error_result():
    table = attp_result(archived().handle_tool_call(attp("__result__ = recall_page(40)")))
    assert table["status"] == "error"
    assert "page 40 does not exist" in table["message"]


def test_attp_results_survive_awkward_text():
    ctx = make(active_pages=1)
    ctx.add(user("quotes ''' and \"\"\" and a DEL \x7f and a tab\t and 中文 and a trailing quote'"))
    ctx.add(user("next"))
    table = attp_result(ctx.handle_tool_call(attp("__result__ = recall_page(1)")))
    assert json.loads(table["result"])["messages"][0]["content"].startswith("quotes ''' and")


def test_is_recall_call_tells_recall_calls_from_the_apps_own():
    ctx = make()
    assert ctx.is_recall_call(openai_call("recall_page", "{}"))
    assert not ctx.is_recall_call(openai_call("get_weather", "{}"))
    assert ctx.is_recall_call({"type": "tool_use", "id": "t", "name": "list_pages", "input": {}})
    assert ctx.is_recall_call(attp("__result__ = recall_page(1)"))
    assert not ctx.is_recall_call(attp("__result__ = search_web('x')"))
    assert not ctx.is_recall_call(None)


# ---- the whole loop --------------------------------------------------------------------------------


def test_regression_recall_puts_the_page_back_in_the_window():
    """Go bug: recall put nothing back. The recalled entries come back as the tool result, which
    joins the open page, so the model sees them and the history stays valid."""
    ctx = archived()
    window = ctx.build_messages(sanitize=False)
    assert not any("Question 1:" in str(m.get("content")) for m in window if m["role"] != "system")
    ctx.add(user("What did I ask first?"))
    call = openai_call("recall_page", '{"page_index": 1}', "call_recall")
    ctx.add({"role": "assistant", "content": None, "tool_calls": [call]})
    ctx.add(ctx.handle_tool_call(call))
    ctx.add({"role": "assistant", "content": "You asked about item 1."})
    window = ctx.build_messages(sanitize=False)
    result = next(m for m in window if m.get("tool_call_id") == "call_recall")
    assert json.loads(result["content"])["messages"] == interaction(1)
    assert [m["role"] for m in window[-4:]] == ["user", "assistant", "tool", "assistant"]
    assert ctx.pages[-1].index == 6
    assert len(ctx.pages[-1].entries) == 4


def test_a_page_the_storage_holds_in_another_shape_is_named():
    ctx = archived()
    ctx.storage.pages[1] = json.dumps({"index": 1, "messages": "nope"})  # type: ignore[attr-defined]
    with pytest.raises(memci.PageError, match="page 1 in the storage is not an archived page"):
        ctx.recall(1)


# ---- run_tool: a tool called by name, as the frameworks call it ----------------------------------------


def test_run_tool_answers_as_handle_tool_call_does_and_counts_the_recall():
    ctx, twin = archived(), archived()
    text = ctx.run_tool("recall_page", {"page_index": 1})
    assert text == twin.handle_tool_call(openai_call("recall_page", '{"page_index": 1}'))["content"]
    assert json.loads(text)["messages"] == interaction(1)
    assert ctx.run_tool("recall_page", '{"page_index": 2}') == twin.run_tool("recall_page", {"page_index": 2})
    assert [e.recall_count for e in ctx.contents if e.index in (1, 2)] == [1, 1]
    assert [entry["index"] for entry in json.loads(ctx.run_tool("list_pages", None))] == [3, 2, 1]


@pytest.mark.parametrize(
    ("name", "arguments", "words"),
    [
        ("delete_everything", {}, "delete_everything"),
        ("recall_page", "{not json", "JSON"),
        ("recall_page", {"page_index": 99}, "page 99 does not exist"),
        ("recall_page", {"page_index": object()}, "recall_page"),
        ("list_pages", {"limit": "ten"}, "limit"),
    ],
)
def test_run_tool_answers_what_the_model_wrote_wrong_in_text(name: str, arguments: Any, words: str):
    ctx = archived()
    before = ctx.to_state()
    assert words in ctx.run_tool(name, arguments)
    assert ctx.to_state() == before  # a refusal changes nothing


_ARGUMENTS = st.one_of(st.none(), st.text(max_size=40), st.dictionaries(st.text(max_size=8), st.integers()))


@given(st.sampled_from(["recall_page", "list_pages", "", "other"]) | st.text(max_size=20), _ARGUMENTS)
@settings(max_examples=60, deadline=None)
def test_run_tool_never_raises_whatever_the_model_wrote(name: str, arguments: Any):
    assert isinstance(archived().run_tool(name, arguments), str)


def _record(**change: Any) -> dict[str, Any]:
    return {
        "index": 1,
        "messages": [{"role": "user", "content": "q"}, {"type": "function_call", "call_id": "c"}],
        "summary": "s",
        "entry_summaries": ["user: q"],
        "archived_round": 2,
        **change,
    }


@pytest.mark.parametrize(
    ("page", "words"),
    [
        ("not a page", "it is a str, not a dict"),
        ({k: v for k, v in _record().items() if k != "summary"}, "it has no 'summary'"),
        (_record(index=2), "it says index 2"),
        (_record(summary=None), "its 'summary' is a NoneType, not a str"),
        (_record(messages="hello"), "its 'messages' is a str, not a list"),
        (_record(messages=["hello"]), r"messages\[0\] is not a message dict"),
        (_record(messages=[{"content": "no role"}]), r"messages\[0\] is not a message dict with a role"),
        (_record(entry_summaries=["ok", 3]), r"entry_summaries\[1\] is a int, not a str"),
        (_record(archived_round=-1), "its archived_round is -1"),
        (_record(archived_round=1.5), "its 'archived_round' is a float, not a int"),
        (_record(archived_round=True), "its 'archived_round' is a bool, not a int"),
    ],
)
def test_an_archived_page_record_is_checked_once_naming_what_is_wrong(page: Any, words: str):
    with pytest.raises(memci.PageError, match=r"page 1 in the storage is not an archived page: " + words):
        ArchivedPage.from_dict(page, 1)


def test_an_archived_page_record_round_trips_its_dict_and_ignores_other_keys():
    record = ArchivedPage.from_dict({**_record(), "note": 1}, 1)
    assert record.entry_summaries == ("user: q",)
    assert record.to_dict() == _record()
    assert list(record.to_dict()) == ["index", "messages", "summary", "entry_summaries", "archived_round"]


# ---- requests and answers, without a system ----------------------------------------------------------


def test_a_call_parses_into_the_checked_tool_calls_to_run():
    assert recall.parse_call(openai_call("recall_page", '{"page_index": "3"}')) == recall.Request(
        "openai", "call_r", (recall.RecallPage(3),)
    )
    block = {"type": "tool_use", "id": "t", "name": "list_pages", "input": {"limit": 500}}
    assert recall.parse_call(block).calls == (recall.ListPages(recall.MAX_LIST),)
    request = recall.parse_call(attp("a = list_pages()\n__result__ = [recall_page(2), a]"))
    assert (request.format, request.reply_to, request.refusal) == ("attp", None, None)
    assert request.calls == (recall.ListPages(10), recall.RecallPage(2))


def test_a_bad_call_parses_into_a_refusal_with_nothing_to_run():
    request = recall.parse_call(openai_call("recall_page", '{"page_index": 0}'))
    assert request.calls == ()
    assert request.refusal == "recall_page: page_index must be an integer >= 1, got 0"
    # One bad call refuses the whole ATTP block: its valid calls do not run either.
    request = recall.parse_call(attp("a = recall_page(1)\n__result__ = recall_page(page=2)"))
    assert (request.calls, request.refusal) == ((), "recall_page: unknown argument 'page' (expected page_index)")


def test_the_answer_is_written_from_the_results_in_the_calls_format():
    page = memci.Page.of(4, [user("hello")])
    listing = [memci.PageListing(4, "hello", 2, 1)]
    request = recall.parse_call(openai_call("recall_page", '{"page_index": 4}'))
    assert recall.answer(request, [page]) == {
        "role": "tool",
        "tool_call_id": "call_r",
        "content": json.dumps({"page": 4, "messages": [user("hello")]}),
    }
    block = recall.answer(recall.parse_call({"type": "tool_use", "id": "t", "name": "list_pages"}), [listing])
    assert json.loads(block["content"]) == [
        {"index": 4, "summary": "hello", "recall_count": 2, "rounds_since_recall": 1}
    ]
    assert "is_error" not in block
    request = recall.parse_call(attp("__result__ = {'in': recall_page(9), 'all': list_pages()}"))
    table = attp_result(recall.answer(request, [recall.InWindow(9), listing]))
    assert json.loads(table["result"])["in"] == {
        "page": 9,
        "in_window": True,
        "note": "page 9 is still in the conversation above",
    }


def test_a_failure_is_answered_as_an_error():
    request = recall.parse_call({"type": "tool_use", "id": "t", "name": "recall_page", "input": {"page_index": 9}})
    block = recall.answer(request, [], "recall: page 9 does not exist (pages are 1 to 5)")
    assert block["is_error"] is True
    assert block["content"] == "Error: recall: page 9 does not exist (pages are 1 to 5)"
    table = attp_result(recall.answer(recall.parse_call(attp("__result__ = recall_page(9)")), [], "no page 9"))
    assert (table["status"], table["message"]) == ("error", "no page 9")
