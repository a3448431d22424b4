"""The ``search_pages`` recall tool (docs/context-system.md, "The recall tools"): the archived pages
that best match a query, one line each beginning ``[page N]``, in every tool format; a page it
returns counts as recalled, so a dropped entry comes back onto the contents page."""

from __future__ import annotations

import json
import re
from typing import Any

import memci
import pytest
from context_helpers import FixedSummarizer, assistant, make, user

TOPICS = ["sourdough bread baking", "hiking the Alps in July", "tax return deadline", "puppy named Coco"]


def archived(**kwargs: Any) -> memci.ContextSystem:
    """Pages 1..4 (one topic each) archived behind two active pages, a round ending after each."""
    ctx = make(active_pages=2, summarizer=FixedSummarizer(), **kwargs)
    for n, topic in enumerate([*TOPICS, "weather today", "lunch plans"], start=1):
        ctx.extend([user(f"Tell me about {topic}."), assistant(f"Here is what I know about {topic}, round {n}.")])
        ctx.end_round()
    return ctx


def pages_in(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"^\[page (\d+)\]", text, re.MULTILINE)]


def test_search_pages_answers_one_line_per_page_with_summary_and_snippet() -> None:
    ctx = archived()
    answer = ctx.handle_tool_call(
        {"id": "c1", "type": "function", "function": {"name": "search_pages", "arguments": '{"query": "Coco puppy"}'}}
    )
    assert answer["role"] == "tool"
    assert answer["tool_call_id"] == "c1"
    lines = answer["content"].splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[page 4] p4 — ")
    assert "puppy named Coco" in lines[0]
    assert lines[1].startswith("[page 3] p3 — "), "the page before it, by neighbour context (page 5 is active)"
    assert [hit.page_index for hit in ctx.search("Coco puppy")] == [4, 3], "the tool ranks as search does"


def test_search_pages_in_every_format() -> None:
    query = {"query": "bread", "k": 3}
    calls: list[object] = [
        {"id": "c", "type": "function", "function": {"name": "search_pages", "arguments": json.dumps(query)}},
        {"type": "tool_use", "id": "t", "name": "search_pages", "input": query},
        {"type": "function_call", "call_id": "r", "name": "search_pages", "arguments": json.dumps(query)},
    ]
    for call in calls:
        answer = archived().handle_tool_call(call)
        text = answer.get("content", answer.get("output"))
        assert isinstance(text, str)
        assert pages_in(text) == [1, 2], call
        assert "is_error" not in answer
    attp = archived(tools="attp").handle_tool_call(
        "[tool_call]\nstatus = \"success\"\ncode = '''\n__result__ = search_pages('bread', k=3)\n'''\n"
    )
    assert 'status = "success"' in attp["content"]
    assert "[page 1] p1" in attp["content"]


def test_a_found_page_counts_as_recalled_and_a_dropped_entry_comes_back() -> None:
    ctx = archived(policy=memci.ArchivePolicy(unrecalled_rounds=2))
    assert 1 not in {e.index for e in ctx.contents}, "page 1's entry was dropped by the m rule"
    text = ctx.run_tool("search_pages", {"query": "sourdough"})
    assert pages_in(text) == [1, 2]
    entry = next(e for e in ctx.contents if e.index == 1)
    assert (entry.recall_count, entry.last_recall_round, entry.summary) == (1, ctx.round, "p1")


def test_the_page_next_to_the_one_naming_the_words_is_found_below_it() -> None:
    ctx = make(active_pages=1, summarizer=FixedSummarizer())
    turns = [
        ("Any plans for the weekend?", "A quiet one."),
        ("I renewed my passport today.", "Good, travel is easier now."),
        ("How long is it good for?", "Ten years, until 2036."),
        ("What should I cook tonight?", "Try a risotto."),
        ("Thanks!", "Any time."),
    ]
    for question, reply in turns:
        ctx.extend([user(question), assistant(reply)])
        ctx.end_round()
    found = ctx.search("passport", 5)
    assert [hit.page_index for hit in found] == [2, 1, 3], "page 2 names it; its neighbours follow, ties to the lower"
    weight = memci.context.search.CONVERSATION_NEIGHBOUR_WEIGHT
    assert found[1].score == found[2].score == weight * found[0].score
    assert "Ten years" in ctx.run_tool("recall_page", {"page_index": 3}), "the answer is on the page after"
    plain = memci.PageSearch()
    plain.extend([(page, text) for page, text in enumerate(["x", "I renewed my passport today.", "Ten years."], 1)])
    assert [hit.page_index for hit in plain.search("passport")] == [2], "a bare PageSearch is plain BM25"


def test_no_match_is_said_and_changes_nothing() -> None:
    ctx = archived()
    before = ctx.state()
    text = ctx.run_tool("search_pages", {"query": "quantum chromodynamics"})
    assert text == "No archived page matches 'quantum chromodynamics'."
    assert ctx.state() == before
    assert ctx.run_tool("search_pages", {"query": ""}).startswith("No archived page matches")


def test_only_archived_pages_are_searched_and_k_cuts() -> None:
    ctx = archived()
    found = pages_in(ctx.run_tool("search_pages", {"query": "tell me about", "k": 20}))
    assert sorted(found) == [1, 2, 3, 4], "pages 5 and 6 are in the window"
    assert len(pages_in(ctx.run_tool("search_pages", {"query": "tell me about", "k": 2}))) == 2
    assert len(pages_in(ctx.run_tool("search_pages", '{"query": "tell me about", "k": "3"}'))) == 3


def test_k_above_the_cap_is_cut_to_it() -> None:
    ctx = make(active_pages=1, summarizer=FixedSummarizer())
    for n in range(30):
        ctx.extend([user(f"common word {n}"), assistant("ok")])
    assert len(pages_in(ctx.run_tool("search_pages", {"query": "common", "k": 500}))) == memci.context.recall.MAX_SEARCH


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({}, "missing argument 'query'"),
        ({"query": 3}, "query must be a string"),
        ({"query": "x", "k": 0}, "k must be an integer >= 1"),
        ({"query": "x", "other": 1}, "unknown argument"),
        ({"query": "x" * 2001}, "2001 characters long (at most 2000)"),
    ],
)
def test_bad_arguments_are_refused_in_the_answer(arguments: dict[str, Any], words: str) -> None:
    ctx = archived()
    before = ctx.state()
    text = ctx.run_tool("search_pages", arguments)
    assert text.startswith("Refused: ")
    assert words in text
    assert ctx.state() == before


def test_a_page_found_but_no_longer_stored_is_an_error_and_counts_nothing() -> None:
    ctx = archived(policy=memci.ArchivePolicy(unrecalled_rounds=2))
    ctx.save()
    del ctx.storage.pages[1]  # type: ignore[attr-defined]
    before = ctx.state()
    text = ctx.run_tool("search_pages", {"query": "sourdough"})
    assert text == "Error: recall: page 1 was archived but the storage does not hold it"
    assert ctx.state() == before


def test_agent_tools_may_not_take_its_name() -> None:
    with pytest.raises(memci.InvalidOperationError, match="'search_pages', the name of a recall tool"):
        memci.ContextSystem(agent_tools=[{"name": "search_pages", "input_schema": {"type": "object"}}])


def test_the_token_budget_counts_its_definition() -> None:
    ctx = memci.ContextSystem("You are a careful agent.")
    definitions = ctx.tool_definitions("openai")
    assert definitions[2]["function"]["name"] == "search_pages"
    assert ctx.tool_tokens() == memci.tokens.count(json.dumps(definitions, ensure_ascii=False))
    assert ctx.tool_tokens() > memci.tokens.count(json.dumps(definitions[:2], ensure_ascii=False))
