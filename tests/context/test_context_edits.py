"""``ContextSystem(context_edits=[...])``: edits applied to each window built, in blocks, never to
the pages stored; ``recall_page`` returns every page's messages as they were added, after a SIGKILL
and reload too (docs/context-edits.md)."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import pickle
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import memci
import pytest
from context_helpers import DictStorage
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


def test_context_edits_are_checked() -> None:
    with pytest.raises(InvalidOperationError, match=r"context_edits\[0\] must be"):
        memci.ContextSystem("s", context_edits=[{"type": "clear_tool_uses_20250919"}])
    with pytest.raises(InvalidOperationError, match=r"context_edits\[1\]: encoding: unknown encoding"):
        memci.ContextSystem("s", context_edits=[ops.ClearThinking(), ops.ClearToolUses(encoding="nope")])


EDITS = (ops.ClearToolUses(trigger=800, keep=2, exclude_tools=["never"]), ops.ClearThinking(keep_turns=2))


def _edited_system(store: memci.Storage | None = None, *, stable: bool = False) -> memci.ContextSystem:
    """A system with edits whose boundaries have moved, mid-conversation (with ``stable``, at the
    cuts of a cache-stable window)."""
    options: dict[str, Any] = {"cache_stable": True, "active_pages": 6} if stable else {"active_pages": 8}
    ctx = memci.ContextSystem("s", storage=store, context_edits=EDITS, **options)
    run_agent(ctx, 13 if stable else 9)  # with stable, one cut: at page 13 (12 is the high-water count)
    state = ctx.state()
    assert state["cleared_through"] > 0
    assert ("thinking_through" in state) == stable
    return ctx


def _same_from_now_on(a: memci.ContextSystem, b: memci.ContextSystem) -> None:
    """``a`` and ``b`` send the same windows, now and over the next rounds."""
    assert a.context_edits == b.context_edits == EDITS
    assert a.build_messages() == b.build_messages()
    for n in range(14, 18):
        for ctx in (a, b):
            for m in page_messages(n):
                ctx.add(m)
        assert a.build_messages() == b.build_messages()
        a.end_round()
        b.end_round()


@pytest.mark.parametrize("stable", [False, True], ids=["seed-rules", "cache-stable"])
@pytest.mark.parametrize("way", ["load", "from_state", "open", "copy", "deepcopy", "pickle"])
def test_context_edits_and_their_boundary_are_carried_like_every_setting(
    way: str, stable: bool, tmp_path: Path
) -> None:
    store = memci.SqliteStorage(tmp_path / "c.db")
    ctx = _edited_system(store, stable=stable)
    ctx.save()
    state = ctx.state()
    assert state["context_edits"][0] == {
        "operation": "clear_tool_uses",
        "trigger": 800,
        "keep": 2,
        "clear_at_least": None,
        "exclude_tools": ["never"],
        "clear_tool_inputs": False,
        "placeholder": None,
        "encoding": "o200k_base",
        "thinking": "drop_earlier",
    }
    again = {
        "load": lambda: memci.ContextSystem.load(store),
        "from_state": lambda: memci.ContextSystem.from_state(state, store),
        "open": lambda: memci.ContextSystem.open(store),
        "copy": lambda: copy.copy(ctx),
        "deepcopy": lambda: copy.deepcopy(ctx),
        "pickle": lambda: pickle.loads(pickle.dumps(ctx)),
    }[way]()
    assert again.state() == state
    _same_from_now_on(ctx, again)
    store.close()


def test_a_state_without_context_edits_is_written_as_before_and_loads_with_none() -> None:
    ctx = memci.ContextSystem("s", active_pages=3)
    run_agent(ctx, 5)
    state = ctx.state()
    assert "context_edits" not in state
    assert "cleared_through" not in state
    assert memci.ContextSystem.from_state(state, ctx.storage).context_edits == ()


def test_open_replaces_the_saved_edits_only_when_given() -> None:
    store = memci.MemoryStorage()
    ctx = _edited_system(store)
    ctx.save()
    through = ctx.state()["cleared_through"]
    assert memci.ContextSystem.open(store).state()["cleared_through"] == through
    assert memci.ContextSystem.open(store, context_edits=list(EDITS)).state()["cleared_through"] == through
    other = memci.ContextSystem.open(store, context_edits=[ops.ClearToolUses(keep=5)])
    assert other.context_edits == (ops.ClearToolUses(keep=5),)
    assert "cleared_through" not in other.state(), "new edits start their boundary again"
    none = memci.ContextSystem.open(store, context_edits=[])
    assert none.context_edits == ()
    assert "context_edits" not in none.state()
    sent = [m for m in none.build_messages() if m["role"] == "tool"]
    assert sent == [m for p in none.pages for m in p.messages() if m["role"] == "tool"], "nothing is cleared"


def test_setting_new_edits_starts_their_boundary_again() -> None:
    ctx = _edited_system()
    ctx.context_edits = [ops.ClearToolUses(trigger=10**6)]
    assert "cleared_through" not in ctx.state()
    assert not _cleared_ids(ctx.build_messages())


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("context_edits", "clear", "state['context_edits'] is 'clear', expected a list of edits"),
        ("context_edits", [7], "state['context_edits'][0]: an operation must be a dict"),
        ("context_edits", [{"operation": "truncate", "keepLast": 1}], "state['context_edits'][0]"),
        ("context_edits", [{"operation": "clear_tool_uses", "keep": -1}], "state['context_edits'][0]: clear_tool_uses"),
        ("context_edits", [{"operation": "clear_thinking", "surprise": 1}], "unknown key 'surprise'"),
        ("context_edits", [{"operation": "clear_tool_uses", "encoding": "nope"}], "unknown encoding"),
        ("cleared_through", "3", "state['cleared_through'] is '3', expected int"),
        ("cleared_through", -1, "state['cleared_through'] is -1"),
        ("cleared_through", 10**6, "state['cleared_through'] is 1000000"),
        ("thinking_through", 13, "state['thinking_through'] is 13, expected 0 to 12"),
        ("thinking_through", None, "state['thinking_through'] is None, expected int"),
    ],
)
def test_a_bad_saved_edit_is_a_state_error_naming_it(key: str, value: object, named: str) -> None:
    ctx = _edited_system(DictStorage(), stable=True)
    ctx.save()
    before = ctx.storage.load_state()
    assert before is not None
    state = {**copy.deepcopy(before), key: value}
    with pytest.raises(memci.StateError) as caught:
        memci.ContextSystem.from_state(state, ctx.storage)
    assert named in str(caught.value)
    ctx.storage.save_state(state)
    with pytest.raises(memci.StateError, match=re.escape(named)):
        memci.ContextSystem.load(ctx.storage)
    ctx.storage.save_state(before)
    assert memci.ContextSystem.load(ctx.storage).state() == ctx.state()


def test_the_async_system_carries_its_edits() -> None:
    async def main() -> None:
        store = memci.MemoryStorage()
        ctx = memci.AsyncContextSystem("s", storage=store, active_pages=8, context_edits=EDITS)
        for n in range(1, 10):
            for m in page_messages(n):
                await ctx.add(m)
            await ctx.build_messages()
            await ctx.end_round()
        await ctx.save()
        again = await memci.AsyncContextSystem.load(store)
        assert again.context_edits == EDITS
        assert await again.build_messages() == await ctx.build_messages()
        opened = await memci.AsyncContextSystem.open(store, context_edits=[])
        assert opened.context_edits == ()

    asyncio.run(main())


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


# ---- the edits move with the cuts, and the fit is planned on the window as sent ----------------


def _requests(ctx: memci.ContextSystem, rounds: int) -> tuple[list[list[Message]], list[bool]]:
    """Two requests a round (after the tool result, after the answer) and, for each, whether a cut
    (pages archived) came before it since the previous request."""
    requests: list[list[Message]] = []
    cuts: list[bool] = []
    for n in range(1, rounds + 1):
        for part in (page_messages(n)[:3], page_messages(n)[3:]):
            first = ctx.pages[0].index if ctx.pages else 0
            for m in part:
                ctx.add(m)
            requests.append(ctx.build_messages())
            cuts.append(ctx.pages[0].index != first)
        ctx.end_round()
    return requests, cuts


@pytest.mark.parametrize(
    "options",
    [{"max_context_tokens": 6000}, {"cache_stable": True, "active_pages": 6}],
    ids=["budget", "pages"],
)
def test_with_cache_stable_the_cleared_tool_uses_change_only_at_a_cut(options: dict[str, Any]) -> None:
    edit = ops.ClearToolUses(trigger=1200, keep=2)
    ctx = memci.ContextSystem("Be brief.", context_edits=[edit], **options)
    requests, cuts = _requests(ctx, 60)
    report = memci.cost.measure(requests)
    for i in range(1, len(requests)):
        if not cuts[i]:
            assert report.requests[i].reused == report.requests[i - 1].tokens, f"request {i} breaks the cache"
    moves = [i for i in range(1, len(requests)) if _cleared_ids(requests[i]) != _cleared_ids(requests[i - 1])]
    assert len(moves) >= 2, "the edits cleared, more than once"
    assert all(cuts[i] for i in moves), "the cleared set moved only at a cut"
    assert report.breaks <= sum(cuts)
    for window in requests:
        assert memci.validate_messages(window).valid
    if "max_context_tokens" in options:
        assert max(ctx.count_tokens(r) for r in requests) + ctx.tool_tokens() <= 6000


def test_without_cache_stable_the_cleared_tool_uses_move_when_the_trigger_is_passed() -> None:
    ctx = memci.ContextSystem("Be brief.", active_pages=12, context_edits=[ops.ClearToolUses(trigger=1200, keep=2)])
    requests, cuts = _requests(ctx, 30)
    moves = [i for i in range(1, len(requests)) if _cleared_ids(requests[i]) != _cleared_ids(requests[i - 1])]
    assert any(not cuts[i] for i in moves), "the seed's rules: a move does not wait for a cut"


@pytest.mark.parametrize("cache_stable", [True, False])
def test_the_fit_is_planned_on_the_edited_window_and_never_over_the_budget(cache_stable: bool) -> None:
    limit = 4000
    kept = []
    for edits in ([], [ops.ClearToolUses(keep=2)]):
        # With the seed's rules the page count must not bind: the budget alone archives.
        active = 5 if cache_stable else 40
        ctx = memci.ContextSystem(
            "Be brief.", max_context_tokens=limit, cache_stable=cache_stable, active_pages=active, context_edits=edits
        )
        for window in _requests(ctx, 40)[0]:
            assert ctx.count_tokens(window) + ctx.tool_tokens() <= limit
        sent = ctx.build_messages(sanitize=False)
        assert ctx.token_count() == ctx.count_tokens(sent), "token_count is what is sent"
        if cache_stable:  # the pages the first cut left whole
            ctx = memci.ContextSystem("Be brief.", max_context_tokens=limit, context_edits=edits)
            for n in itertools.count(1):
                for m in page_messages(n):
                    ctx.add(m)
                ctx.build_messages()
                if ctx.pages[0].index > 1:
                    break
        kept.append(len(ctx.pages))
    # Planned by what is sent, the edited window keeps more pages whole under the same budget.
    assert kept[1] > kept[0] + 5


def _thinking_turn(n: int) -> list[Message]:
    """Round ``n`` of an Anthropic agent that thinks before it answers."""
    thought = {"type": "thinking", "thinking": f"thinking about {n}: " + "hmm " * 60, "signature": f"s{n}"}
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "content": [thought, {"type": "text", "text": f"answer {n}"}]},
    ]


def _thinking_pages(window: list[Message]) -> set[str]:
    return {
        m["content"][1]["text"]
        for m in window
        if m["role"] == "assistant" and isinstance(m["content"], list) and m["content"][0]["type"] == "thinking"
    }


@pytest.mark.parametrize("stable", [True, False])
def test_cleared_thinking_moves_with_the_cuts_in_a_cache_stable_window(stable: bool) -> None:
    ctx = memci.ContextSystem("s", active_pages=3, cache_stable=stable, context_edits=[ops.ClearThinking()])
    requests, cuts = [], []
    for n in range(1, 30):
        first = ctx.pages[0].index if ctx.pages else 0
        for m in _thinking_turn(n):
            ctx.add(m)
        requests.append(ctx.build_messages(sanitize=False))
        cuts.append(ctx.pages[0].index != first)
        ctx.end_round()
        assert f"answer {n}" in _thinking_pages(requests[-1]), "the current turn keeps its thinking"
    changed = [
        i for i in range(1, len(requests)) if not _thinking_pages(requests[i - 1]) <= _thinking_pages(requests[i])
    ]
    report = memci.cost.measure(requests)
    if stable:
        assert changed, "thinking is cleared"
        assert all(cuts[i] for i in changed), "only at a cut"
        assert all(report.requests[i].reused == report.requests[i - 1].tokens for i in range(1, 29) if not cuts[i])
    else:
        assert len(changed) == len(requests) - 1, "the seed's rules: each new turn clears the one before"
