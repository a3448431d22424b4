"""The saved state of a context system: :class:`SavedState`, what ``ContextSystem.save`` writes
and ``ContextSystem.load`` reads, as a JSON-able dict with a version and a kind.

Reading checks the whole dict's shape, field by field, before anything is built: every fault is
a :class:`~memci.StateError` naming the part (``state['pages'][1]['index']``). What only building
can check (a message the core refuses, settings the system refuses) is checked by the system
as it builds itself from the :class:`SavedState`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from memci.context.contents import RULES, ArchivePolicy, ContentsEntry, DroppedEntries, DroppedEntry, Rule
from memci.context.cuts import DEFAULT_LOW_WATER, checked_low_water
from memci.context.edits import Edit, edits_from_state, edits_to_state
from memci.context.page import ArchivedPage, Message
from memci.errors import InvalidOperationError, PageError, StateError, shown
from memci.storage.log import LOG_VERSION, Head

__all__ = [
    "DROPPED_FIELDS",
    "STATE_KIND",
    "STATE_VERSION",
    "UNSAVED_PAGES",
    "SavedState",
    "dropped_records",
    "dropped_text",
]

STATE_VERSION = LOG_VERSION
STATE_KIND = "memci.ContextSystem"
#: The key of a state from ``to_state`` that carries the pages archived since the last save.
UNSAVED_PAGES = "unsaved_pages"
#: The fields of a dropped entry, in the order ``state['dropped']`` writes them (see :func:`dropped_text`).
DROPPED_FIELDS = ("index", "recall_count", "last_recall_round", "archived_round", "dropped_round", "rule")
#: Digits a count or round may have in ``state['dropped']`` (the core keeps them in 64 bits).
_MAX_DIGITS = 19


@dataclass(frozen=True, slots=True)
class SavedState:
    """A context system's whole state: its settings, round, active pages (``(index, messages)``,
    oldest first, the last one open) and its contents and dropped entries, and the ``revision`` it
    was loaded from or saved as (0: never saved). Archived pages are in the storage, not here.
    ``system_prompt`` is None for a system without one; ``agent_tools`` are the agent's own tool
    definitions; pages up to ``forgotten_through`` were forgotten (``clear(forget=True)``).
    ``cache_stable`` and ``low_water`` are the cut settings (None: the default for the limit, as
    in a state saved before they existed); ``stable_contents`` is the contents page as written at
    the last cut (``""``: none; None: not saved, taken from the entries). ``context_edits`` are the
    edits applied to each window built, ``cleared_through`` the boundary of the pages their
    ``ClearToolUses`` clear and, in a cache-stable window, ``thinking_through`` the last page a
    ``ClearThinking`` applies to (each written only when set: a state without them has none)."""

    round: int
    next_index: int
    system_prompt: Message | None
    tools: str
    active_pages: int
    encoding: str
    max_context_tokens: int | None
    policy: ArchivePolicy
    pages: tuple[tuple[int, list[Message]], ...]
    contents: tuple[ContentsEntry, ...]
    dropped: tuple[DroppedEntry, ...]
    revision: int = 0
    agent_tools: tuple[dict[str, Any], ...] = ()
    forgotten_through: int = 0
    #: Pages archived since the last save (only in a state from ``to_state``): the next save writes them.
    unsaved: tuple[ArchivedPage, ...] = ()
    cache_stable: bool | None = None
    low_water: float = DEFAULT_LOW_WATER
    stable_contents: str | None = None
    context_edits: tuple[Edit, ...] = ()
    cleared_through: int = 0
    thinking_through: int = 0
    #: ``dropped``'s rows joined (:func:`dropped_text`) when the maker has them (a system keeps
    #: them; a state read back is the text it was read from), else joined when written.
    dropped_rows: str | None = field(default=None, compare=False, repr=False)

    @property
    def pages_through(self) -> int:
        """The highest archived page index: pages leave the window oldest first, so every page
        before the first active one (every page, when none is active)."""
        return min((index for index, _ in self.pages), default=self.next_index) - 1

    @property
    def head(self) -> Head:
        """The head the state is written with: its revision and live range."""
        return Head(STATE_KIND, self.revision, self.pages_through, self.forgotten_through)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able dict that is saved: the :attr:`head` (``revision`` absent before the first
        save), the :meth:`body`, and the unsaved pages when there are any. O(state)."""
        state = self.head.state(self.body())
        if self.unsaved:
            state[UNSAVED_PAGES] = [page.to_dict() for page in self.unsaved]
        return state

    def body(self) -> dict[str, Any]:
        """The state's own keys, after the head's. O(state)."""
        return {
            "round": self.round,
            "next_index": self.next_index,
            "system_prompt": self.system_prompt,
            "tools": self.tools,
            "agent_tools": list(self.agent_tools),
            "active_pages": self.active_pages,
            "encoding": self.encoding,
            "max_context_tokens": self.max_context_tokens,
            "policy": self.policy.to_dict(),
            "pages": [{"index": index, "messages": messages} for index, messages in self.pages],
            "contents": [e.to_dict() for e in self.contents],
            "dropped": dropped_text(self.dropped) if self.dropped_rows is None else self.dropped_rows,
            **self._cut_keys(),
            **self._edit_keys(),
        }

    def _cut_keys(self) -> dict[str, Any]:
        """The cut settings that differ from what a state without them means (so a state of the
        defaults is written as it was before they existed)."""
        keys: dict[str, Any] = {}
        if self.cache_stable is not None and self.cache_stable != (self.max_context_tokens is not None):
            keys["cache_stable"] = self.cache_stable
        if self.low_water != DEFAULT_LOW_WATER:
            keys["low_water"] = self.low_water
        if self.stable_contents is not None:
            keys["stable_contents"] = self.stable_contents
        return keys

    def _edit_keys(self) -> dict[str, Any]:
        """The context edits and their boundary, when there are any (a state of a system without
        edits is written as it was before they were saved)."""
        keys: dict[str, Any] = {}
        if self.context_edits:
            keys["context_edits"] = edits_to_state(self.context_edits)
        for key in ("cleared_through", "thinking_through"):
            if getattr(self, key):
                keys[key] = getattr(self, key)
        return keys

    @classmethod
    def from_dict(cls, state: object) -> SavedState:
        """The state :meth:`to_dict` wrote, its shape checked part by part (in that order);
        :class:`~memci.StateError` names the first part that is wrong. O(state)."""
        head = Head.of(state, STATE_KIND)
        assert isinstance(state, dict)
        prompt = state.get("system_prompt")
        system_prompt = None if prompt is None else _field(state, "system_prompt", dict)
        tools = _field(state, "tools", str)
        agent_tools = state.get("agent_tools", [])
        if not isinstance(agent_tools, list) or not all(isinstance(t, dict) for t in agent_tools):
            raise StateError(f"load: state['agent_tools'] is {shown(agent_tools)}, expected a list of dicts")
        active_pages = _field(state, "active_pages", int)
        try:
            policy = ArchivePolicy.from_dict(_field(state, "policy", dict))
        except (InvalidOperationError, TypeError) as e:
            raise StateError(f"load: {e}") from None
        encoding = _field(state, "encoding", str)
        limit = state.get("max_context_tokens")
        max_context_tokens = None if limit is None else _field(state, "max_context_tokens", int)
        round_ = _field(state, "round", int)
        pages = []
        for i, page in enumerate(_field(state, "pages", list)):
            where = f"state['pages'][{i}]"
            pages.append((_field(page, "index", int, where), _field(page, "messages", list, where)))
        next_index = _field(state, "next_index", int)
        contents = [_entry(raw, f"state['contents'][{i}]") for i, raw in enumerate(_field(state, "contents", list))]
        raw_dropped = state.get("dropped")
        dropped_rows = raw_dropped if isinstance(raw_dropped, str) and _CANONICAL_ROWS.fullmatch(raw_dropped) else None
        if isinstance(raw_dropped, str):
            dropped = _dropped_rows(raw_dropped, checked=dropped_rows is not None)
        else:
            dropped = [_dropped(raw, f"state['dropped'][{i}]") for i, raw in enumerate(_field(state, "dropped", list))]
        saved = cls(
            round_,
            next_index,
            system_prompt,
            tools,
            active_pages,
            encoding,
            max_context_tokens,
            policy,
            tuple(pages),
            tuple(contents),
            tuple(dropped),
            head.revision,
            tuple(agent_tools),
            head.forgotten_through,
            _unsaved(state.get(UNSAVED_PAGES, [])),
            *_cut_settings(state),
            edits_from_state(state.get("context_edits", [])),
            _field(state, "cleared_through", int) if "cleared_through" in state else 0,
            _field(state, "thinking_through", int) if "thinking_through" in state else 0,
            dropped_rows,
        )
        if state.get("pages_through", saved.pages_through) != saved.pages_through:
            raise StateError(
                f"load: state['pages_through'] is {shown(state.get('pages_through'))}, but the active pages make it "
                f"{saved.pages_through}"
            )
        saved.check_consistent()
        return saved

    def check_consistent(self) -> None:
        """:class:`~memci.StateError` naming the first part that contradicts another: counts and
        rounds out of range, active pages that are not the consecutive run ending at
        ``next_index - 1``, contents or dropped entries of pages that were never archived, named
        twice, or of rounds still to come. O(state)."""
        for key, value, least in (("round", self.round, 0), ("next_index", self.next_index, 1)):
            _bounded(value, f"state[{key!r}]", least)
        _bounded(self.revision, "state['revision']", 0)
        pages_through = self.pages_through
        _bounded(self.forgotten_through, "state['forgotten_through']", 0, pages_through)
        for key in ("cleared_through", "thinking_through"):
            _bounded(getattr(self, key), f"state[{key!r}]", 0, max(0, self.next_index - 2))
        indices = [index for index, _ in self.pages]
        if indices:
            _bounded(indices[0], "state['pages'][0]['index']", 1)
        for i, index in enumerate(indices):
            if index != indices[0] + i:
                raise StateError(
                    f"load: state['pages'][{i}]['index'] is {index}, but active pages are consecutive "
                    f"(it follows page {indices[i - 1]})"
                )
        if indices and indices[-1] != self.next_index - 1:
            raise StateError(
                f"load: state['next_index'] is {self.next_index}, but the active pages end at page {indices[-1]}"
            )
        seen: dict[int, str] = {}
        archived: tuple[tuple[str, Sequence[ContentsEntry | DroppedEntry]], ...] = (
            ("contents", self.contents),
            ("dropped", self.dropped),
        )
        for kind, entries in archived:
            for i, entry in enumerate(entries):
                where = f"state[{kind!r}][{i}]"
                _bounded(entry.index, f"{where}['index']", self.forgotten_through + 1, pages_through)
                if entry.index in seen:
                    raise StateError(f"load: {where}: page {entry.index} is listed twice (also in {seen[entry.index]})")
                seen[entry.index] = where
                _bounded(entry.recall_count, f"{where}['recall_count']", 0)
                for name in ("archived_round", "last_recall_round", "dropped_round"):
                    if hasattr(entry, name):
                        _bounded(getattr(entry, name), f"{where}[{name!r}]", 0, self.round)
        for i, page in enumerate(self.unsaved):
            where = f"state[{UNSAVED_PAGES!r}][{i}]"
            _bounded(page.index, f"{where}['index']", self.forgotten_through + 1, pages_through)
            _bounded(page.archived_round, f"{where}['archived_round']", 0, self.round)


#: Counts and rounds beyond this are refused: the core keeps them in 64 bits.
_MAX = 2**62


def _bounded(value: int, where: str, least: int, most: int = _MAX) -> None:
    if not least <= value <= most:
        raise StateError(f"load: {where} is {shown(value)}, expected {least} to {most}")


def _field(state: object, key: str, kind: type | tuple[type, ...], where: str = "state") -> Any:
    value = state.get(key) if isinstance(state, dict) else None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise StateError(f"load: {where}[{key!r}] is {shown(value)}, expected {getattr(kind, '__name__', kind)}")
    return value


def _cut_settings(state: dict[str, Any]) -> tuple[bool | None, float, str | None]:
    """``cache_stable``, ``low_water`` and ``stable_contents``, each optional (a state saved before
    they existed has none of them)."""
    stable = state.get("cache_stable")
    cache_stable = None if stable is None else _field(state, "cache_stable", bool)
    low = state.get("low_water", DEFAULT_LOW_WATER)
    try:
        low_water = checked_low_water(low)
    except InvalidOperationError:
        raise StateError(f"load: state['low_water'] is {shown(low)}, expected a number in (0, 1)") from None
    text = state.get("stable_contents")
    return cache_stable, low_water, None if text is None else _field(state, "stable_contents", str)


def _unsaved(raw: object) -> tuple[ArchivedPage, ...]:
    """The pages a state from ``to_state`` carries, each checked as the record it must be."""
    if not isinstance(raw, list):
        raise StateError(f"load: state[{UNSAVED_PAGES!r}] is {shown(raw)}, expected a list of pages")
    pages = []
    for i, page in enumerate(raw):
        index = page.get("index") if isinstance(page, dict) else None
        try:
            pages.append(ArchivedPage.from_dict(page, index if type(index) is int else 0))
        except PageError as e:
            raise StateError(f"load: state[{UNSAVED_PAGES!r}][{i}]: {e}") from None
    return tuple(pages)


def _entry(raw: object, where: str) -> ContentsEntry:
    if not isinstance(raw, dict):
        raise StateError(f"load: {where} is not a dict")
    try:
        return ContentsEntry(
            _field(raw, "index", int, where),
            _field(raw, "summary", str, where),
            tuple(_field(raw, "entry_summaries", list, where)),
            _field(raw, "recall_count", int, where),
            _field(raw, "last_recall_round", int, where),
            _field(raw, "archived_round", int, where),
        )
    except TypeError as e:
        raise StateError(f"load: {where}: {e}") from None


def dropped_text(dropped: Sequence[DroppedEntry]) -> str:
    """``state['dropped']`` as written: one row per entry, its :data:`DROPPED_FIELDS` joined by
    ``,``, the rows joined by ``;`` (``""``: none). Dropped entries are most of a long
    conversation's state, and one string is checked and encoded by a save in one step rather than
    six values an entry (a state saved before wrote a list of dicts, which still loads). O(entries)."""
    return DroppedEntries(dropped).text()


def dropped_records(text: str) -> list[dict[str, str]]:
    """The rows of a ``state['dropped']`` string (:func:`dropped_text`) as dicts of its
    :data:`DROPPED_FIELDS`, unchecked (a row with too few fields lacks the last ones)."""
    return [dict(zip(DROPPED_FIELDS, row.split(","), strict=False)) for row in text.split(";")] if text else []


#: One row of ``state['dropped']`` as a save writes it: five ints without leading zeros (at most
#: :data:`_MAX_DIGITS` digits), then a rule.
_CANONICAL_ROW = f"(?:(?:0|[1-9][0-9]{{0,{_MAX_DIGITS - 1}}}),){{5}}(?:{'|'.join(map(re.escape, RULES))})"
_CANONICAL_ROWS = re.compile(rf"(?:{_CANONICAL_ROW}(?:;{_CANONICAL_ROW})*)?")


def _dropped_rows(text: str, *, checked: bool) -> list[DroppedEntry]:
    """The entries of a ``state['dropped']`` string, each field checked (a count or round of
    digits, a rule of :data:`~memci.context.contents.RULES`) unless the whole text was
    (``checked``: :data:`_CANONICAL_ROWS` matched it in one pass, so each row is only split)."""
    entries = []
    for i, row in enumerate(text.split(";") if text else ()):
        fields = row.split(",")
        if checked:
            entries.append(
                DroppedEntry(
                    int(fields[0]),
                    int(fields[1]),
                    int(fields[2]),
                    int(fields[3]),
                    int(fields[4]),
                    cast("Rule", fields[5]),
                )
            )
            continue
        where = f"state['dropped'][{i}]"
        if len(fields) != len(DROPPED_FIELDS):
            raise StateError(f"load: {where} is {shown(row)}, expected {','.join(DROPPED_FIELDS)}")
        *numbers, rule = fields
        for name, number in zip(DROPPED_FIELDS, numbers, strict=False):
            if not (number.isascii() and number.isdigit() and len(number) <= _MAX_DIGITS):
                raise StateError(f"load: {where}[{name!r}] is {shown(number)}, expected an int >= 0")
        index, recall_count, last_recall_round, archived_round, dropped_round = map(int, numbers)
        entries.append(
            DroppedEntry(index, recall_count, last_recall_round, archived_round, dropped_round, _rule(rule, where))
        )
    return entries


def _rule(rule: str, where: str) -> Rule:
    if rule not in RULES:
        raise StateError(f"load: {where}['rule'] is {rule!r}, expected one of {', '.join(RULES)}")
    return rule


def _dropped(raw: object, where: str) -> DroppedEntry:
    if not isinstance(raw, dict):
        raise StateError(f"load: {where} is not a dict")
    rule = _rule(_field(raw, "rule", str, where), where)
    return DroppedEntry(
        _field(raw, "index", int, where),
        _field(raw, "recall_count", int, where),
        _field(raw, "last_recall_round", int, where),
        _field(raw, "archived_round", int, where),
        _field(raw, "dropped_round", int, where),
        rule,
    )
