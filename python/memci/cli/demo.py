"""``memci demo``: a long scripted conversation through a :class:`~memci.ContextSystem` on a
:class:`~memci.SqliteStorage`, shown with ``rich``.

It shows pages being archived, the contents page the model sees, recalls (by the contents page and,
for dropped entries, by search), the entries each rule drops, the tokens of the window round by
round against the whole history's, and a final summary; then it loads the system back from the
SQLite file and checks that the state is identical. ``memci demo --array`` runs the short
:class:`~memci.MessageArray` tour instead; ``--rounds N`` and ``--db PATH`` change the run (keep the
file with ``--db`` and look inside with ``memci inspect PATH``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from memci.cli.demo_conversation import Agent, Event, ScriptedUser
from memci.context.contents import ArchivePolicy, RoundResult, Rule
from memci.context.summary import cut
from memci.context.system import ContextSystem
from memci.storage import SqliteStorage

Message = dict[str, Any]

SYSTEM_PROMPT = "You are a helpful agent with tools for weather, sums, papers and files. Be brief."
#: The contents cap is lowered from 2000 so that LRU has work to do in a few hundred rounds.
POLICY = ArchivePolicy(unrecalled_rounds=10, unchanged_rounds=20, contents_max_tokens=1000)
ACTIVE_PAGES = 5
#: The window is shown as the model gets it after this round.
SHOW_WINDOW_AT = 40


def _short(text: str, width: int) -> str:
    return cut(" ".join(text.split()), width)


def _message_line(message: Mapping[str, Any], width: int) -> str:
    content = message.get("content")
    if content is None:
        calls = message.get("tool_calls") or []
        content = "→ " + ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in calls)
    return f"{message['role']:<10} {_short(str(content), width)}"


# ---- panels ---------------------------------------------------------------------------------------


#: Each archive rule's colour and short name in the rounds table.
_RULES: tuple[tuple[Rule, str, str], ...] = (
    ("unrecalled", "yellow", "m"),
    ("unchanged", "magenta", "p"),
    ("lru", "red", "lru"),
)


def _dropped_cell(result: RoundResult) -> Text:
    out = Text()
    for rule, style, tag in _RULES:
        indices = result.by_rule(rule)
        if indices:
            out.append(f"{tag}:{','.join(map(str, indices))} ", style=style)
    return out


def _window_panel(ctx: ContextSystem, round_: int) -> Panel:
    """The window as the model gets it, segment by segment."""
    messages = ctx.build_messages(sanitize=False)
    lines = Text()
    lines.append("system segment\n", style="bold cyan")
    for m in messages[:2]:
        lines.append(f"  {_message_line(m, 96)}\n")
    rest = messages[2:]
    contents = ctx.contents_text()
    if contents is not None:
        rest = rest[1:]
        body = contents.split("\n")
        lines.append(f"contents page: one system message, {ctx.contents_tokens()} tokens\n", style="bold cyan")
        for line in body[:14]:
            lines.append(f"  {_short(line, 104)}\n", style="green" if line.startswith("[page") else "")
        if len(body) > 14:
            lines.append(f"  … {len(body) - 14} more lines\n", style="dim")
    lines.append(f"active pages {[p.index for p in ctx.pages]}\n", style="bold cyan")
    for m in rest:
        lines.append(f"  {_message_line(m, 96)}\n")
    return Panel(lines, title=f"What the model is sent after round {round_}", border_style="cyan")


def _recall_panel(event: Event, count: int) -> Panel:
    lines = Text()
    lines.append(f"user       {event.request}\n")
    arguments = event.tool_call["function"]["arguments"] if event.tool_call else ""
    lines.append(f"assistant  → recall_page({arguments})\n", style="bold")
    how = (
        "it was listed on the contents page"
        if event.found_by == "contents"
        else "its entry had been dropped, so the agent asked search (the memory system)"
    )
    lines.append(f"           ({how})\n", style="dim")
    result = json.loads(event.tool_result["content"]) if event.tool_result else {}
    messages = result.get("messages", [])
    lines.append(f"tool       page {result.get('page')}: its {len(messages)} messages come back:\n")
    for m in messages:
        lines.append(f"             {_message_line(m, 80)}\n", style="green")
    lines.append(f"recall count of page {event.recalled} is now {count}; ", style="bold")
    lines.append("the result joins the open page, so the history stays valid for the model APIs\n")
    return Panel(lines, title=f"Round {event.round}: a recall", border_style="green")


def _attp_panel(ctx: ContextSystem) -> Panel:
    ok = ctx.handle_tool_call('[tool_call]\nstatus = "success"\ncode = """\n__result__ = list_pages(2)\n"""')
    bad = ctx.handle_tool_call(
        '[tool_call]\nstatus = "success"\ncode = """\nimport os\n__result__ = os.listdir("/")\n"""'
    )
    lines = Text()
    lines.append("model: __result__ = list_pages(2)\n", style="bold")
    for line in ok["content"].split("\n")[:4]:
        lines.append(f"  {_short(line, 100)}\n", style="green")
    lines.append('model: import os; __result__ = os.listdir("/")\n', style="bold")
    for line in bad["content"].split("\n")[:4]:
        lines.append(f"  {_short(line, 100)}\n", style="red")
    lines.append("ATTP code is parsed (TOML, then ast), never executed: only recall calls with literal arguments run.")
    return Panel(lines, title="The same tools in ATTP (TOML tool calls)", border_style="blue")


SPARKS = "▁▂▃▄▅▆▇█"


def _spark(values: Sequence[int], width: int = 72) -> str:
    """``values`` as one line of bars, each the highest of its group of rounds, scaled to the max."""
    step = max(1, -(-len(values) // width))
    cols = [max(values[i : i + step]) for i in range(0, len(values), step)]
    peak = max(*cols, 1)
    return "".join(SPARKS[min(len(SPARKS) - 1, c * len(SPARKS) // (peak + 1))] for c in cols)


def _tokens_panel(window: Sequence[int], history: Sequence[int]) -> Panel:
    lines = Text()
    for name, values in (("sent to the model", window), ("whole history", history)):
        lines.append(f"{name:<18}", style="bold")
        lines.append(_spark(values), style="cyan")
        lines.append(f"  max {max(values)}, last {values[-1]}\n")
    lines.append(
        f"{'':<18}round 1 → round {len(window)}; each line is scaled to its own max. The window stays flat "
        "while the history grows: old pages wait in SQLite, summarised on the contents page.",
        style="dim",
    )
    return Panel(lines, title="Tokens per round", border_style="cyan")


# ---- the run --------------------------------------------------------------------------------------


class _Tally:
    """Tokens of the whole conversation if nothing were paged: the system segment, every archived
    page (counted once, from storage, when it is archived) and the active pages."""

    def __init__(self, ctx: ContextSystem) -> None:
        self.ctx = ctx
        system: list[Any] = ctx.build_messages(sanitize=False)[:2]  # typed as the SDK's; dicts here
        self.system = ctx.count_tokens(system)
        self.archived = 0

    def archive(self, indices: list[int]) -> None:
        """Count the pages ``indices``, archived and saved since the last call."""
        for index in indices:
            page = self.ctx.storage.get_page(index)
            if page is None:
                raise RuntimeError(f"demo: archived page {index} is not in storage")
            self.archived += self.ctx.count_tokens(page["messages"])

    def total(self) -> int:
        active = [m for p in self.ctx.pages for m in p.messages()]
        return self.system + self.archived + self.ctx.count_tokens(active)


@dataclass
class _Run:
    """What the run gathered for the display."""

    rounds: int
    table: Table
    window_tokens: list[int] = field(default_factory=list)
    history_tokens: list[int] = field(default_factory=list)
    spotlights: list[Panel] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=lambda: {"unrecalled": 0, "unchanged": 0, "lru": 0})
    recalls: dict[str, int] = field(default_factory=lambda: {"contents": 0, "search": 0})
    folded: int = 0
    elapsed: float = 0.0

    def row(self, event: Event, result: RoundResult) -> None:
        loud = event.recalled is not None or any(d.rule != "unrecalled" for d in result.dropped)
        if not (event.round <= 7 or loud or event.round % 50 == 0 or event.round == self.rounds):
            self.folded += 1
            return
        if self.folded:
            self.table.add_row("", Text(f"… {self.folded} quiet rounds", style="dim"), "", "", "", "")
            self.folded = 0
        agent = Text(event.action, style="green bold" if event.recalled is not None else "")
        if event.recalled is not None:
            agent = Text(f"recall {event.recalled}", style="green bold")
            agent.append(f" via {event.found_by}", style="green")
        self.table.add_row(
            str(event.round),
            event.request,
            agent,
            _dropped_cell(result),
            str(self.window_tokens[-1]),
            str(result.contents_tokens),
        )


#: (header, justify, width): the user and agent columns are cut with an ellipsis, the rest never.
_COLUMNS = (
    ("round", "right", 5),
    ("user", "left", 30),
    ("agent", "left", 23),
    ("dropped (m/p/lru)", "left", 17),
    ("window", "right", 6),
    ("contents", "right", 8),
)


def _table() -> Table:
    table = Table(
        title="Rounds, quiet ones folded. From round 6 each new page archives the oldest. Tokens: of the "
        "window sent, and of its contents page.",
        header_style="bold",
    )
    for name, justify, width in _COLUMNS:
        fixed = name not in ("user", "agent")
        table.add_column(
            name,
            justify=justify,  # type: ignore[arg-type]  # one of rich's justify literals
            no_wrap=True,
            overflow="ellipsis",
            min_width=width if fixed else None,
            max_width=width,
        )
    return table


def _recall_count(ctx: ContextSystem, index: int) -> int:
    for entry in ctx.contents:
        if entry.index == index:
            return entry.recall_count
    return next((d.recall_count for d in ctx.dropped if d.index == index), 0)


def _converse(ctx: ContextSystem, rounds: int) -> _Run:
    agent = Agent(ctx, ScriptedUser())
    tally = _Tally(ctx)
    run = _Run(rounds, _table())
    started = time.perf_counter()
    for round_ in range(1, rounds + 1):
        before = [p.index for p in ctx.pages]
        event = agent.run_round(round_)
        after = {p.index for p in ctx.pages}
        archived = [i for i in before if i not in after]
        if event.recalled is not None:
            run.recalls[event.found_by] += 1
            if run.recalls[event.found_by] == 1:
                run.spotlights.append(_recall_panel(event, _recall_count(ctx, event.recalled)))
        result = ctx.end_round()
        for d in result.dropped:
            run.dropped[d.rule] += 1
        run.window_tokens.append(ctx.token_count())
        ctx.save()  # writes the pages archived this round: only then can the tally read them
        tally.archive(archived)
        run.history_tokens.append(tally.total())
        run.row(event, result)
        if round_ == SHOW_WINDOW_AT:
            run.spotlights.insert(0, _window_panel(ctx, round_))
    run.elapsed = time.perf_counter() - started
    return run


def run(rounds: int, db: Path, console: Console) -> None:
    """Run the scripted conversation on a new SQLite file at ``db`` and show it."""
    ctx = ContextSystem(SYSTEM_PROMPT, active_pages=ACTIVE_PAGES, storage=SqliteStorage(str(db)), policy=POLICY)
    console.print(
        Panel(
            f"{rounds} rounds of a scripted agent conversation (tool calls, some Chinese and Japanese) "
            f"through a ContextSystem on SqliteStorage({str(db)!r}).\n"
            f"active_pages={ACTIVE_PAGES}; policy: m={POLICY.unrecalled_rounds}, p={POLICY.unchanged_rounds}, "
            f"contents cap {POLICY.contents_max_tokens} tokens (LRU over {POLICY.lru_trigger:.0%}, down to "
            f"{POLICY.lru_floor:.0%}); tokens: {ctx.encoding}, counted exactly.",
            title="memci demo: the paged context system",
            border_style="bold",
        )
    )
    result = _converse(ctx, rounds)
    console.print(result.table)
    for panel in result.spotlights:
        console.print(panel)
    console.print(_attp_panel(ctx))
    console.print(_tokens_panel(result.window_tokens, result.history_tokens))
    console.print(_summary(ctx, db, result))


def _summary(ctx: ContextSystem, db: Path, run: _Run) -> Panel:
    pages = len(ctx.storage.page_indices())
    ctx.storage.close()
    files = (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"))
    size = sum(p.stat().st_size for p in files if p.exists())
    reopened = SqliteStorage(str(db))
    same = ContextSystem.load(reopened).state() == ctx.state()
    reopened.close()
    window, history = run.window_tokens[-1], run.history_tokens[-1]
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    per_round = run.elapsed * 1000 / run.rounds
    table.add_row("rounds", f"{run.rounds} ({per_round:.2f} ms a round, saving the state to SQLite each round)")
    table.add_row("pages", f"{ctx.pages[-1].index} opened; {pages} archived to SQLite; {len(ctx.pages)} active")
    d = run.dropped
    table.add_row(
        "contents page",
        f"{len(ctx.contents)} entries visible ({ctx.contents_tokens()} tokens), {len(ctx.dropped)} dropped; "
        f"drops over the run: {d['unrecalled']} by m, {d['unchanged']} by p, {d['lru']} by LRU "
        "(a recalled entry comes back and can be dropped again)",
    )
    table.add_row("recalls", f"{run.recalls['contents']} found on the contents page, {run.recalls['search']} by search")
    table.add_row(
        "window tokens",
        f"last {window}, max {max(run.window_tokens)}; the whole history would be {history} "
        f"({history / max(window, 1):.0f}x the last window)",
    )
    table.add_row("SQLite file", f"{size / 1024:.0f} KiB, {size / max(pages, 1):.0f} bytes per archived page")
    verdict = "ContextSystem.load(SqliteStorage(path)): identical state ✓" if same else "the loaded state differs ✗"
    table.add_row("load", Text(verdict, style="green" if same else "red bold"))
    return Panel(table, title="Summary", border_style="bold")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memci demo", description="The paged context system, end to end.")
    parser.add_argument("--array", action="store_true", help="run the short MessageArray tour instead")
    parser.add_argument("--rounds", type=int, default=300, help="rounds of conversation (default 300)")
    parser.add_argument("--db", type=Path, help="the SQLite file to create (default: a temporary one)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.array:
        from memci.cli.demo_array import main as tour

        tour()
        return 0
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    console = Console()
    if args.db is not None:
        if args.db.exists():
            parser.error(f"--db {args.db} exists: give a new file")
        run(args.rounds, args.db, console)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        run(args.rounds, Path(tmp) / "memci-demo.db", console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
