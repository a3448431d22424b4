"""``MemciContextEditingMiddleware`` on a real ``create_agent`` with a fake model, offline: each
model call is sent the history with old tool results cleared (their ids kept), the agent's state
keeps every result, and the reply reports exact counts."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain")
import memci
from fake_chat import model
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from memci import ops
from memci.errors import InvalidOperationError
from memci.formats import from_langchain
from memci.integrations.context_editing import MemciContextEditingMiddleware


@tool
def lookup(n: int) -> str:
    """Look a number up."""
    return f"record {n}: " + "details " * 80


def script(calls: int) -> list[AIMessage]:
    out = [
        AIMessage("", tool_calls=[{"id": f"c{i}", "name": "lookup", "args": {"n": i}, "type": "tool_call"}])
        for i in range(calls)
    ]
    return [*out, AIMessage("done")]


def test_old_results_are_cleared_in_each_call_and_the_state_keeps_them() -> None:
    fake = model(script(6))
    edit = ops.ClearToolUses(keep=2)
    agent = create_agent(fake, [lookup], middleware=[MemciContextEditingMiddleware([edit])])
    state = agent.invoke({"messages": [HumanMessage("go")]})
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 6
    assert all(m.content.startswith("record") for m in results), "the state keeps every result"
    last = fake.sent[-1]
    sent = [m for m in last if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in sent] == [f"c{i}" for i in range(6)]
    assert ["cleared" in str(m.content) for m in sent] == [True] * 4 + [False] * 2
    assert memci.validate_messages(from_langchain(last)).valid
    # The reply reports exactly what the edit saved on the messages it was sent.
    uncleared = memci.MessageArray(from_langchain(list(state["messages"][: len(last)])))
    expected = uncleared.clear_tool_uses(keep=2)
    report = state["messages"][-1].response_metadata["context_management"]["applied_edits"]
    assert report == [
        {
            "type": "clear_tool_uses_20250919",
            "cleared_tool_uses": expected.cleared_tool_uses,
            "cleared_input_tokens": expected.cleared_input_tokens,
        }
    ]
    assert expected.cleared_tool_uses == 4


async def test_the_middleware_runs_async_and_the_default_trigger_waits() -> None:
    fake = model(script(3))
    agent = create_agent(fake, [lookup], middleware=[MemciContextEditingMiddleware()])
    state = await agent.ainvoke({"messages": [HumanMessage("go")]})
    assert "context_management" not in state["messages"][-1].response_metadata, "under 100k tokens: nothing cleared"
    assert all("cleared" not in str(m.content) for m in fake.sent[-1])


def test_bad_edits_are_refused() -> None:
    bad: Any = [{"type": "clear_tool_uses_20250919"}]
    with pytest.raises(InvalidOperationError, match=r"edits\[0\] must be memci\.ops\.ClearToolUses"):
        MemciContextEditingMiddleware(bad)
