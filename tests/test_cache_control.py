"""``to_anthropic(..., cache_control=True)``: prompt-cache breakpoints at the end of the stable
prefix (the last system block) and at the end of the request (the last message's last block)."""

from __future__ import annotations

from typing import Any

import memci
from memci.formats import to_anthropic

BREAKPOINT = {"type": "ephemeral"}


def _breakpoints(request: Any) -> list[str]:
    """Where the request carries breakpoints: ``system[i]`` and ``messages[i].content[j]``."""
    found = [
        f"system[{i}]"
        for i, b in enumerate(request.get("system") or [])
        if isinstance(b, dict) and b.get("cache_control")
    ]
    for i, m in enumerate(request["messages"]):
        if isinstance(m["content"], list):
            found += [f"messages[{i}].content[{j}]" for j, b in enumerate(m["content"]) if b.get("cache_control")]
    return found


def test_a_context_systems_window_gets_breakpoints_after_the_system_and_on_the_last_message():
    ctx = memci.ContextSystem("Be brief.", cache_stable=True, active_pages=1)
    for n in range(4):
        ctx.extend([{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}])
    ctx.add({"role": "user", "content": "last"})
    plain = to_anthropic(ctx.build_messages())
    marked = to_anthropic(ctx.build_messages(), cache_control=True)
    last = len(marked["messages"]) - 1
    assert _breakpoints(marked) == [f"system[{len(marked['system']) - 1}]", f"messages[{last}].content[0]"]
    assert marked["system"][-1]["cache_control"] == BREAKPOINT
    assert marked["messages"][-1]["content"] == [{"type": "text", "text": "last", "cache_control": BREAKPOINT}]
    assert _breakpoints(plain) == []
    # the same request apart from the marks
    texts = [b["text"] for b in marked["system"]]
    assert "\n".join(texts).startswith("Be brief.")
    assert [m["role"] for m in marked["messages"]] == [m["role"] for m in plain["messages"]]


def test_tool_results_take_the_mark_on_their_last_block_and_thinking_never_does():
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
    ]
    marked = to_anthropic(messages, cache_control=True)
    results = marked["messages"][-1]["content"]
    assert [b.get("cache_control") for b in results] == [None, BREAKPOINT]
    thinking = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "t"}, {"type": "thinking", "thinking": "hm", "signature": "s"}],
        },
    ]
    blocks = to_anthropic(thinking, cache_control=True)["messages"][-1]["content"]
    assert [b.get("cache_control") for b in blocks] == [BREAKPOINT, None]


def test_marking_does_not_change_the_messages_given():
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    to_anthropic(messages, cache_control=True)
    assert messages[1]["content"] == [{"type": "text", "text": "hi"}]
