"""``ContextSystem(context_edits=[...])``: edits applied to each window built, in blocks, never to
the pages stored; ``recall_page`` returns every page's messages as they were added, after a SIGKILL
and reload too (docs/context-edits.md)."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import memci
import pytest
from memci import ops
from memci.errors import InvalidOperationError

Message = dict[str, Any]


def page_messages(n: int) -> list[Message]:
    """Round ``n`` of a tool-using agent: a question, a call, its (long) result, an answer."""
    call = {"id": f"c{n}", "type": "function", "function": {"name": "look", "arguments": json.dumps({"n": n})}}
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n}: " + "data " * (50 + n % 7 * 30)},
        {"role": "assistant", "content": f"answer {n}"},
    ]


def run_agent(ctx: memci.ContextSystem, rounds: int) -> list[list[Message]]:
    windows = []
    for n in range(1, rounds + 1):
        for m in page_messages(n):
            ctx.add(m)
        windows.append(ctx.build_messages())
        ctx.end_round()
    return windows


def test_tool_uses_are_cleared_in_blocks_and_the_pages_stay_as_added() -> None:
    edit = ops.ClearToolUses(trigger=2000, keep=2)
    ctx = memci.ContextSystem("Be brief.", active_pages=12, context_edits=[edit])
    windows = run_agent(ctx, 30)
    for window in windows:
        assert memci.validate_messages(window).valid
    cleared = [sum("recall_page(" in str(m.get("content")) for m in w) for w in windows]
    assert max(cleared) > 0, "the trigger was passed and results were cleared"
    # A block: the cleared prefix moves only when the trigger is passed, not every round.
    moves = sum(1 for a, b in itertools.pairwise(windows) if _cleared_ids(a) != _cleared_ids(b))
    assert 0 < moves < 20
    for window in windows:
        for m in window:
            if m.get("role") == "tool" and "recall_page(" in m["content"]:
                page = int(m["content"].rsplit("recall_page(", 1)[1].split(")")[0])
                assert ctx.recall(page).messages()[2]["tool_call_id"] == m["tool_call_id"]
    for page in ctx.pages:
        assert page.messages() == page_messages(page.index)


def _cleared_ids(window: list[Message]) -> set[str]:
    return {m["tool_call_id"] for m in window if m.get("role") == "tool" and "recall_page(" in m["content"]}


def test_the_window_with_edits_costs_less_and_keeps_the_last_tool_uses() -> None:
    plain = memci.ContextSystem("Be brief.", active_pages=8)
    edited = memci.ContextSystem("Be brief.", active_pages=8, context_edits=[ops.ClearToolUses(keep=3)])
    for ctx in (plain, edited):
        run_agent(ctx, 8)
    window = edited.build_messages()
    assert edited.count_tokens(window) < plain.count_tokens(plain.build_messages())
    results = [m for m in window if m.get("role") == "tool"]
    assert [("recall_page(" in m["content"]) for m in results] == [True] * 5 + [False] * 3


def test_context_edits_are_checked_and_can_be_set_after_load(tmp_path: Path) -> None:
    with pytest.raises(InvalidOperationError, match=r"context_edits\[0\] must be"):
        memci.ContextSystem("s", context_edits=[{"type": "clear_tool_uses_20250919"}])
    store = memci.SqliteStorage(tmp_path / "c.db")
    ctx = memci.ContextSystem("s", storage=store, context_edits=[ops.ClearToolUses(keep=0)])
    run_agent(ctx, 3)
    ctx.save()
    loaded = memci.ContextSystem.load(store)
    assert loaded.context_edits == ()
    loaded.context_edits = [ops.ClearToolUses(keep=0)]
    assert loaded.build_messages() == ctx.build_messages()
    store.close()


AGENT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    import memci
    from memci import ops
    from test_context_edits import page_messages

    store = memci.SqliteStorage(sys.argv[1])
    edits = [ops.ClearToolUses(trigger=1500, keep=2, clear_tool_inputs=True), ops.ClearThinking()]
    ctx = memci.ContextSystem("Be brief.", active_pages=3, storage=store, context_edits=edits)
    n = 0
    while True:
        n += 1
        for m in page_messages(n):
            ctx.add(m)
        ctx.build_messages()
        ctx.end_round()
        ctx.save()
        print(n, flush=True)
    """
)


def test_recall_page_returns_every_page_as_added_after_a_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with subprocess.Popen(
        [sys.executable, "-c", AGENT, str(db), str(Path(__file__).parent)], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            if int(line) >= 25:
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    with memci.SqliteStorage(db) as store:
        ctx = memci.ContextSystem.load(store)
        last = max(p.index for p in ctx.pages)
        assert last >= 25
        active = {p.index for p in ctx.pages}
        assert min(active) > 1, "older pages are archived"
        for index in range(1, last + 1):
            got = ctx.recall(index).messages()
            assert json.dumps(got) == json.dumps(page_messages(index)), index
