"""``memci inspect DB``: what a store holds, as readable tables (rich).

``DB`` is a :class:`~memci.SqliteStorage` file or a :class:`~memci.DirectoryStorage` folder; it is
opened read-only, so inspecting a store an agent is writing is safe. Shown: the saved state's
version, round and counts; its contents entries, dropped entries and active pages when it has them;
then the stored (archived) pages, the most recent ``limit`` of them. ``--page N`` shows one stored
page whole: each message with its entry summary. Stored text is shown, never acted on: control
characters (ESC, BEL, ...) and bidirectional overrides are printed as escapes (``\x1b``), so a
stored message cannot retitle the terminal, clear it or hide text.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from memci import _core
from memci.context.state import dropped_records
from memci.context.summary import cut, said_and_calls
from memci.errors import StorageError
from memci.storage.directory import DirectoryStorage
from memci.storage.json_store import JsonStore
from memci.storage.sqlite import SqliteStorage

__all__ = ["inspect_store", "open_read_only"]

#: Characters of a text shown in a table cell before it is cut.
CELL_CHARS = 100
#: The same for ``--page``, which shows messages whole but for very long ones.
PAGE_CELL_CHARS = 4000


#: Characters a terminal acts on rather than shows: the C0 and C1 controls and DEL (ESC starts an
#: escape sequence, BEL rings, CR rewrites the line) and the overrides that reorder text.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character and direction override written as its escape."""
    return _CONTROLS.sub(_escape_char, text)


def open_read_only(path: str | os.PathLike[str]) -> JsonStore:
    """The store at ``path``, read-only: a folder is a DirectoryStorage, a file a SqliteStorage."""
    where = Path(path)
    if where.is_dir():
        return DirectoryStorage(where, read_only=True)
    if where.is_file():
        return SqliteStorage(where, read_only=True)
    raise StorageError(f"{where}: no such file or folder", str(where))


def _cut(text: Any, limit: int = CELL_CHARS) -> str:
    """One line of at most ``limit`` characters (cut on a character, never inside one), control
    characters escaped."""
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False)
    return cut(printable(" ".join(text.split())), limit)


def _roles(messages: Iterable[Any]) -> str:
    counts = Counter(m.get("role", "?") for m in messages if isinstance(m, Mapping))
    return ", ".join(f"{role} {n}" for role, n in counts.items())


Column = tuple[str, Callable[[Mapping[str, Any]], Any]]


def _field(name: str) -> Column:
    """A column showing the row's value at ``name``."""
    return name.replace("_", " "), lambda row: row.get(name, "")


def _table(
    title: str,
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[Column],
    *,
    lines: bool = False,
    cell_chars: int = CELL_CHARS,
) -> Table:
    # Stored text is shown as it is: Text, never rich markup (a page may hold "[/]" or "[link=...]").
    table = Table(title=Text(printable(title)), title_justify="left", show_lines=lines)
    for header, _ in columns:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(Text(_cut(get(row), cell_chars)) for _, get in columns))
    return table


def _records(value: Any) -> list[dict[str, Any]]:
    return [item for item in value or () if isinstance(item, dict)] if isinstance(value, list) else []


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    """What each message says, then the tools it calls (the core's text rule)."""
    return [said_and_calls(said, calls) for said, calls in _core.entry_texts(messages)]


def _state_tables(state: Mapping[str, Any]) -> list[Table]:
    overview = Table(title="State", title_justify="left", show_header=False)
    overview.add_column("key", style="bold")
    overview.add_column("value", overflow="fold")
    for key, value in state.items():
        shown = _count(len(value), "entry", "entries") if isinstance(value, list) else _cut(value)
        overview.add_row(Text(_cut(key)), Text(shown))
    out = [overview]
    contents = _records(state.get("contents"))
    if contents:
        columns = [_field(f) for f in ("index", "summary", "recall_count", "last_recall_round", "archived_round")]
        columns.append(("entry summaries", lambda e: " | ".join(map(str, e.get("entry_summaries") or ()))))
        out.append(_table(f"Contents page: {_count(len(contents), 'entry', 'entries')}", contents, columns))
    raw_dropped = state.get("dropped")
    dropped = dropped_records(raw_dropped) if isinstance(raw_dropped, str) else _records(raw_dropped)
    if dropped:
        fields = ("index", "rule", "dropped_round", "recall_count", "last_recall_round", "archived_round")
        out.append(_table(f"Dropped from the contents page: {len(dropped)}", dropped, [_field(f) for f in fields]))
    active = _records(state.get("pages"))
    if active:
        columns = [
            _field("index"),
            ("messages", lambda p: _roles(_records(p.get("messages")))),
            ("first message", lambda p: "".join(_texts(_records(p.get("messages"))[:1]))),
        ]
        out.append(_table(f"Active pages: {len(active)}", active, columns))
    return out


def _pages_table(store: JsonStore, indices: list[int], limit: int) -> Table:
    shown = indices[-limit:] if limit else []
    title = f"Stored pages: {len(indices)}"
    if len(shown) < len(indices):
        title += f" (the last {len(shown)}; --limit to see more)"
    columns = [
        _field("index"),
        _field("archived_round"),
        ("messages", lambda p: _roles(_records(p.get("messages")))),
        _field("summary"),
    ]
    return _table(title, (store.get_page(i) or {"index": i} for i in shown), columns)


def _page_table(index: int, page: Mapping[str, Any]) -> Table:
    # A store keeps any JSON page naming its index: a page of another writer shows what it has.
    summaries = page.get("entry_summaries")
    summaries = summaries if isinstance(summaries, list) else []
    messages = _records(page.get("messages"))
    rows = [
        {"#": i, "role": m.get("role", "?"), "text": text, "entry summary": "".join(map(_cut, summaries[i : i + 1]))}
        for i, (m, text) in enumerate(zip(messages, _texts(messages), strict=True))
    ]
    title = f"Page {index}, archived in round {page.get('archived_round')}: {_cut(page.get('summary', ''))}"
    columns = [_field("#"), _field("role"), ("message", lambda r: r["text"]), _field("entry summary")]
    return _table(title, rows, columns, lines=True, cell_chars=PAGE_CELL_CHARS)


def inspect_store(
    path: str | os.PathLike[str], *, page: int | None = None, limit: int = 20, console: Console | None = None
) -> int:
    """Print what the store at ``path`` holds (or one page of it); return the exit status (0, or 1
    when the page asked for is not there). :class:`StorageError` if it is not a readable store."""
    out = console or Console()
    with open_read_only(path) as store:
        indices = store.page_indices()
        if page is not None:
            stored = store.get_page(page)
            if stored is None:
                out.print(Text(printable(f"{path}: no stored page {page} (stored: {_span(indices)})")))
                return 1
            out.print(_page_table(page, stored))
            return 0
        out.print(f"[bold]{escape(printable(repr(store)))}[/bold]: {len(indices)} stored pages ({_span(indices)})")
        state = store.load_state()
        if state is None:
            out.print("No saved state.")
        else:
            for table in _state_tables(state):
                out.print(table)
        out.print(_pages_table(store, indices, limit))
    return 0


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _span(indices: list[int]) -> str:
    if not indices:
        return "none"
    return f"{indices[0]}" if len(indices) == 1 else f"{indices[0]}..{indices[-1]}"
