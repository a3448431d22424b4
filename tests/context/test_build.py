"""``build_messages``: the system segment, the contents page, the active pages, the sanitizer, and
archiving under ``max_context_tokens``."""

from __future__ import annotations

import memci
import pytest
from context_helpers import (
    FixedSummarizer,
    calling,
    interaction,
    make,
    run_rounds,
    user,
    words,
)


def test_a_new_system_sends_only_its_system_segment():
    ctx = make()
    sent = ctx.build_messages(sanitize=False)
    assert sent[0] == {"role": "system", "content": "You are a careful agent."}
    assert sent[1]["role"] == "system"
    assert "recall_page" in sent[1]["content"]
    assert len(sent) == 2


def test_a_system_prompt_message_is_kept_as_given():
    prompt = {"role": "developer", "content": "Be brief.", "name": "ops"}
    ctx = memci.ContextSystem(prompt, storage=make().storage, counter=words)
    assert ctx.build_messages(sanitize=False)[0] == prompt


def test_layout_is_system_segment_then_contents_page_then_active_pages():
    ctx = make(active_pages=2, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 4)
    sent = ctx.build_messages(sanitize=False)
    assert [m["role"] for m in sent[:3]] == ["system", "system", "system"]
    assert sent[3:] == interaction(3) + interaction(4)
    assert sent[2]["content"] == ctx.contents_text()


def test_the_contents_page_lists_every_entry_with_its_summaries_and_says_how_to_recall():
    ctx = make(active_pages=1, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 3)
    ctx.recall(2)
    text = ctx.contents_text()
    assert text is not None
    lines = text.split("\n")
    assert "recall_page(page_index=N)" in lines[0]
    assert lines[1:] == [
        "[page 1] p1",
        "  - p1.0",
        "  - p1.1",
        "  - p1.2",
        "  - p1.3",
        "[page 2] p2 (recalled 1x)",
        "  - p2.0",
        "  - p2.1",
        "  - p2.2",
        "  - p2.3",
    ]


def test_the_attp_contents_page_says_how_to_recall_in_attp():
    ctx = make(active_pages=1, tools="attp")
    run_rounds(ctx, 1, 2)
    text = ctx.contents_text()
    assert text is not None
    assert "__result__ = recall_page(N)" in text.split("\n")[0]


def test_build_messages_returns_fresh_dicts():
    ctx = make()
    ctx.add(user("hello"))
    ctx.build_messages(sanitize=False)[-1]["content"] = "changed"
    assert ctx.build_messages(sanitize=False)[-1]["content"] == "hello"


def test_token_count_counts_what_build_messages_sends():
    ctx = make(active_pages=1)
    run_rounds(ctx, 1, 3)
    assert ctx.token_count() == sum(map(words, ctx.build_messages(sanitize=False)))


def test_tokens_are_exact_o200k_base_by_default():
    ctx = memci.ContextSystem("You are terse.", storage=memci.MemoryStorage())
    ctx.add(user("How many tokens is this?"))
    assert ctx.token_count() == memci.tokens.count_messages(ctx.build_messages(sanitize=False))
    assert ctx.encoding == "o200k_base"
    with pytest.raises(memci.InvalidOperationError):
        memci.ContextSystem("x", encoding="no-such-encoding")


# ---- max_context_tokens --------------------------------------------------------------------------


def test_max_context_tokens_archives_the_oldest_pages_until_the_window_fits():
    # The limit is what the window holds with pages 1 and 2 archived: archiving page 1 alone
    # is not enough, so exactly two go.
    reference = make(active_pages=3, summarizer=FixedSummarizer())
    run_rounds(reference, 1, 5)
    limit = reference.token_count() + reference.tool_tokens()
    # The seed's exact fit (a cache-stable system cuts deeper: tests/context/test_cuts.py).
    ctx = make(active_pages=5, summarizer=FixedSummarizer(), max_context_tokens=limit, cache_stable=False)
    run_rounds(ctx, 1, 5)
    assert [p.index for p in ctx.pages] == [1, 2, 3, 4, 5]
    assert ctx.token_count() + ctx.tool_tokens() > limit
    sent = ctx.build_messages(sanitize=False)
    assert ctx.token_count() + ctx.tool_tokens() <= limit
    assert [p.index for p in ctx.pages] == [3, 4, 5]
    assert [(e.index, e.archived_round) for e in ctx.contents] == [(1, 5), (2, 5)]
    assert sent == reference.build_messages(sanitize=False)


def test_max_context_tokens_never_archives_the_open_page():
    reference = make(active_pages=1, summarizer=FixedSummarizer())
    run_rounds(reference, 1, 2)
    reference.add(user("short"))
    limit = reference.token_count() + reference.tool_tokens()
    ctx = make(active_pages=5, max_context_tokens=limit, summarizer=FixedSummarizer())
    run_rounds(ctx, 1, 2)
    ctx.add(user("short"))
    ctx.build_messages(sanitize=False)
    assert [p.index for p in ctx.pages] == [3]


def test_a_window_that_cannot_fit_raises_and_changes_nothing():
    ctx = make(active_pages=5, max_context_tokens=60 + make().tool_tokens())
    run_rounds(ctx, 1, 3)
    ctx.add(user("word " * 200))
    before = ctx.state()
    with pytest.raises(memci.ContextOverflowError, match="page 4"):
        ctx.build_messages(sanitize=False)
    assert ctx.state() == before


def test_a_system_prompt_over_the_limit_is_an_overflow_too():
    ctx = make(max_context_tokens=10)
    with pytest.raises(memci.ContextOverflowError, match="the system segment alone needs"):
        ctx.build_messages()


def test_a_window_that_fits_is_left_alone():
    ctx = make(active_pages=5, max_context_tokens=10_000)
    run_rounds(ctx, 1, 5)
    ctx.build_messages(sanitize=False)
    assert len(ctx.pages) == 5
    assert ctx.contents == []


# ---- the sanitizer -------------------------------------------------------------------------------


def test_build_messages_sanitizes_what_it_sends():
    ctx = make()
    ctx.add(user("go"))
    ctx.add(calling("dangling"))  # a tool call whose result has not come (yet)
    sent = ctx.build_messages()
    assert all(m.get("tool_calls") is None for m in sent)
    assert ctx.build_messages(sanitize=False)[-1] == calling("dangling")


def test_what_build_messages_sends_validates_for_both_apis():
    ctx = make(active_pages=2)
    run_rounds(ctx, 1, 6)
    ctx.add(user("What did I ask first?"))
    call = {"id": "r", "type": "function", "function": {"name": "recall_page", "arguments": '{"page_index": 1}'}}
    ctx.add({"role": "assistant", "content": None, "tool_calls": [call]})
    ctx.add(ctx.handle_tool_call(call))
    sent = ctx.build_messages()
    assert memci.validate_messages(sent).valid
    anthropic = memci.formats.to_anthropic(sent)
    assert "Contents of archived pages" in str(anthropic["system"]), "the contents page goes to system"
    assert anthropic["messages"][0]["role"] == "user"
    assert memci.validate_messages(anthropic["messages"]).valid
