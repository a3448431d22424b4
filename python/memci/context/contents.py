"""The archive chapter of the context system: its contents page and the policies that prune it.

Every archived page gets a :class:`ContentsEntry` (its index, summaries, recall count and rounds).
The contents page is one system message listing the visible entries, oldest first. At the end of
each round the :class:`ArchivePolicy` rules drop entries from it, in this order:

- ``m`` (``unrecalled_rounds``): never recalled and ``round - last_recall_round >= m``;
- ``p`` (``unchanged_rounds``): ``round - last_recall_round >= p`` (its count has not changed);
- LRU: while the contents page is over ``lru_trigger * contents_max_tokens`` tokens, the least
  recently recalled entries go (lower index first on ties) until it is at most
  ``lru_floor * contents_max_tokens``.

A dropped entry's page stays in storage (and in search); recalling it brings the entry back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from memci.errors import InvalidOperationError, repr_of

__all__ = [
    "ArchiveChapter",
    "ArchivePolicy",
    "ContentsEntry",
    "DroppedEntries",
    "DroppedEntry",
    "PageListing",
    "RoundResult",
]

#: Why an entry left the contents page: ``"unrecalled"`` (m), ``"unchanged"`` (p), ``"lru"`` (the
#: contents cap, or ``max_context_tokens``), or ``"cleared"`` (``ContextSystem.clear()``).
Rule = Literal["unrecalled", "unchanged", "lru", "cleared"]
RULES: tuple[Rule, ...] = ("unrecalled", "unchanged", "lru", "cleared")


def _count_arg(owner: str, name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOperationError(f"{owner}: {name} must be an int >= {minimum}, got {repr_of(value)}")
    return value


@dataclass(frozen=True, slots=True)
class ArchivePolicy:
    """When contents entries leave the contents page (the design's defaults: docs/context-system.md).

    ``unrecalled_rounds`` (m): drop an entry never recalled for m rounds; ``unchanged_rounds`` (p):
    drop one whose recall count has not changed for p rounds; ``contents_max_tokens``: the cap on
    the contents page; over ``lru_trigger * cap`` tokens, the least recently recalled entries are
    dropped until it is at most ``lru_floor * cap``.
    """

    unrecalled_rounds: int = 10
    unchanged_rounds: int = 20
    contents_max_tokens: int = 2000
    lru_trigger: float = 0.9
    lru_floor: float = 0.8

    def __post_init__(self) -> None:
        _count_arg("ArchivePolicy", "unrecalled_rounds", self.unrecalled_rounds, 1)
        _count_arg("ArchivePolicy", "unchanged_rounds", self.unchanged_rounds, 1)
        _count_arg("ArchivePolicy", "contents_max_tokens", self.contents_max_tokens, 1)
        for name in ("lru_trigger", "lru_floor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
                raise InvalidOperationError(f"ArchivePolicy: {name} must be a number in (0, 1], got {repr_of(value)}")
        if self.lru_floor > self.lru_trigger:
            raise InvalidOperationError(
                f"ArchivePolicy: lru_floor ({self.lru_floor}) must not be above lru_trigger ({self.lru_trigger})"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArchivePolicy:
        """The policy :meth:`to_dict` wrote; unknown keys are an error that names them."""
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise InvalidOperationError(f"ArchivePolicy: unknown keys {sorted(unknown)}")
        return cls(**data)


@dataclass(frozen=True, slots=True)
class ContentsEntry:
    """One archived page as the contents page lists it."""

    index: int
    summary: str
    entry_summaries: tuple[str, ...]
    recall_count: int
    last_recall_round: int
    archived_round: int

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not dataclasses.asdict: a save writes every entry, and asdict's deep copy
        # made that most of a save's time.
        return {
            "index": self.index,
            "summary": self.summary,
            "entry_summaries": list(self.entry_summaries),
            "recall_count": self.recall_count,
            "last_recall_round": self.last_recall_round,
            "archived_round": self.archived_round,
        }


@dataclass(frozen=True, slots=True)
class DroppedEntry:
    """A contents entry a rule dropped: its counts, when, and by which rule. The summaries stay
    with the page in storage."""

    index: int
    recall_count: int
    last_recall_round: int
    archived_round: int
    dropped_round: int
    rule: Rule
    #: The entry as a row of ``state['dropped']`` (its fields joined by ``,``), made once: a save
    #: joins the rows of every dropped entry, 10k of them in a long conversation.
    row: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        row = (
            f"{self.index},{self.recall_count},{self.last_recall_round},{self.archived_round},"
            f"{self.dropped_round},{self.rule}"
        )
        object.__setattr__(self, "row", row)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "recall_count": self.recall_count,
            "last_recall_round": self.last_recall_round,
            "archived_round": self.archived_round,
            "dropped_round": self.dropped_round,
            "rule": self.rule,
        }


@dataclass(frozen=True, slots=True)
class PageListing:
    """A line of ``list_pages``: an archived page's index, summary, recall count and the rounds
    since it was last recalled (or archived, if it never was)."""

    index: int
    summary: str
    recall_count: int
    rounds_since_recall: int


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What :meth:`~memci.ContextSystem.end_round` did: the round that began, the entries each
    rule dropped (in the order they went), and the contents page's tokens afterwards."""

    round: int
    dropped: tuple[DroppedEntry, ...] = field(default=())
    contents_tokens: int = 0

    def by_rule(self, rule: Rule) -> list[int]:
        """The indices the rule ``rule`` dropped this round."""
        return [d.index for d in self.dropped if d.rule == rule]


class DroppedEntries:
    """The dropped entries by page index, in the order they were dropped, with their rows joined
    as ``state['dropped']`` writes them (:meth:`text`) kept from save to save: a long
    conversation's state is mostly these rows (10k of them at 10k turns), and a save then costs
    the rows dropped since the last one and one copy of the text, not a join of every row again.
    Taking an entry out (a recall brings it back) joins them all again at the next save."""

    __slots__ = ("_by_index", "_new", "_text")

    def __init__(self, entries: Iterable[DroppedEntry] = (), text: str | None = None) -> None:
        """``entries`` in the order they were dropped; ``text``: their rows joined, when the
        caller has it (a state read back), else they are joined at the first :meth:`text`."""
        self._by_index = {entry.index: entry for entry in entries}
        #: The rows joined, but for :attr:`_new` (None: join them all at the next :meth:`text`).
        self._text: str | None = text if self._by_index else ""
        #: The rows of entries added since :attr:`_text` was joined.
        self._new: list[str] = []

    def __len__(self) -> int:
        return len(self._by_index)

    def __contains__(self, index: object) -> bool:
        return index in self._by_index

    def get(self, index: int) -> DroppedEntry | None:
        return self._by_index.get(index)

    def values(self) -> Iterable[DroppedEntry]:
        """The entries, in the order they were dropped."""
        return self._by_index.values()

    def add(self, entry: DroppedEntry) -> None:
        """Keep ``entry`` (dropped last; an entry of a page already here replaces it in place)."""
        if entry.index in self._by_index:
            self._text = None
        elif self._text is not None:
            self._new.append(entry.row)
        self._by_index[entry.index] = entry

    def pop(self, index: int) -> DroppedEntry | None:
        """Take page ``index``'s entry out (None if it has none)."""
        gone = self._by_index.pop(index, None)
        if gone is not None:
            self._text, self._new = None, []
        return gone

    def copy(self) -> DroppedEntries:
        other = DroppedEntries()
        other._by_index, other._text, other._new = dict(self._by_index), self._text, list(self._new)
        return other

    def text(self) -> str:
        """``state['dropped']``: each entry's row (its fields joined by ``,``), the rows joined by
        ``;`` (``""``: none). O(rows added since the last call + the text's length) while entries
        were only added, O(entries) after one was taken out. (A state saved before wrote a list of
        dicts, which still loads.)"""
        if self._text is None:
            self._text, self._new = ";".join(entry.row for entry in self._by_index.values()), []
        elif self._new:
            self._text = ";".join([self._text, *self._new] if self._text else self._new)
            self._new = []
        return self._text


class ArchiveChapter:
    """The contents entries (visible and dropped), the contents page's text and tokens, and the
    rules. Pure Python; the pages themselves are in storage. Not thread-safe on its own (the
    context system holds its lock around every call)."""

    __slots__ = (
        "_count",
        "_count_lines",
        "_entry_text",
        "_entry_tokens",
        "_header",
        "_text",
        "_tokens",
        "dropped",
        "entries",
        "policy",
    )

    def __init__(
        self, policy: ArchivePolicy, count: Callable[[str], int], count_lines: Callable[[str], int], header: str
    ) -> None:
        """``count(text)``: the tokens of the contents page holding ``text``; ``count_lines(text)``:
        what ``text`` adds to it (one entry's lines, for LRU's estimate)."""
        self.policy = policy
        self._count = count
        self._count_lines = count_lines
        self._header = header
        #: Visible entries by index, in ascending index order.
        self.entries: dict[int, ContentsEntry] = {}
        self.dropped = DroppedEntries()
        self._entry_tokens: dict[int, int] = {}
        self._entry_text: dict[int, str] = {}
        self._text: str | None = None
        self._tokens: int | None = None

    # ---- the contents page -----------------------------------------------------------------------

    @staticmethod
    def render_entry(entry: ContentsEntry) -> str:
        """One entry's lines: ``[page 3] summary (recalled 2 times)``, then an indented line per
        entry summary."""
        recalled = "" if entry.recall_count == 0 else f" (recalled {entry.recall_count}x)"
        lines = [f"[page {entry.index}] {entry.summary}{recalled}"]
        lines.extend(f"  - {s}" for s in entry.entry_summaries)
        return "\n".join(lines)

    def render(self, extra: Iterable[ContentsEntry] = ()) -> str | None:
        """The contents page's text, or None when it has no entry; ``extra`` entries are shown as
        if they had been added (for planning, without changing anything)."""
        extra = list(extra)
        if not extra and self._text is not None:
            return self._text or None
        entries = sorted([*self.entries.values(), *extra], key=lambda e: e.index)
        text = "\n".join([self._header, *map(self._rendered, entries)]) if entries else ""
        if not extra:
            self._text = text
        return text or None

    def tokens(self) -> int:
        """Tokens of the contents page's text (0 when it is empty). Cached until it changes."""
        if self._tokens is None:
            text = self.render()
            self._tokens = 0 if text is None else self._count(text)
        return self._tokens

    def _rendered(self, entry: ContentsEntry) -> str:
        """An entry's lines, cached for visible entries (a page's lines only change on recall)."""
        if self.entries.get(entry.index) is not entry:
            return self.render_entry(entry)
        text = self._entry_text.get(entry.index)
        if text is None:
            text = self._entry_text[entry.index] = self.render_entry(entry)
        return text

    def _entry_cost(self, entry: ContentsEntry) -> int:
        cost = self._entry_tokens.get(entry.index)
        if cost is None:
            cost = self._entry_tokens[entry.index] = self._count_lines(self._rendered(entry))
        return cost

    def _changed(self, index: int) -> None:
        self._text = None
        self._tokens = None
        self._entry_tokens.pop(index, None)
        self._entry_text.pop(index, None)

    # ---- changes -----------------------------------------------------------------------------------

    def add(self, entry: ContentsEntry) -> None:
        """A newly archived page's entry (or a restored one)."""
        self.dropped.pop(entry.index)
        # Replacing an entry keeps its place; only a new one below the highest index needs a sort.
        in_order = entry.index in self.entries or not self.entries or entry.index >= next(reversed(self.entries))
        self.entries[entry.index] = entry
        if not in_order:
            self.entries = dict(sorted(self.entries.items()))
        self._changed(entry.index)

    def recall(self, index: int, round_: int, restore: Callable[[], tuple[str, tuple[str, ...], int]]) -> ContentsEntry:
        """Count a recall of page ``index`` in round ``round_``. A dropped entry comes back, its
        summaries read through ``restore() -> (summary, entry_summaries, archived_round)``."""
        entry = self.entries.get(index)
        if entry is None:
            gone = self.dropped.get(index)
            summary, entry_summaries, archived_round = restore()
            entry = ContentsEntry(
                index,
                summary,
                entry_summaries,
                0 if gone is None else gone.recall_count,
                round_,
                archived_round if gone is None else gone.archived_round,
            )
        entry = replace(entry, recall_count=entry.recall_count + 1, last_recall_round=round_)
        self.add(entry)
        return entry

    def copy(self) -> ArchiveChapter:
        """A chapter holding the same entries (and caches), to plan changes on: changing the copy
        changes nothing here. O(entries)."""
        other = ArchiveChapter(self.policy, self._count, self._count_lines, self._header)
        other.entries = dict(self.entries)
        other.dropped = self.dropped.copy()
        other._entry_tokens = dict(self._entry_tokens)
        other._entry_text = dict(self._entry_text)
        other._text, other._tokens = self._text, self._tokens
        return other

    def clear(self, round_: int) -> list[DroppedEntry]:
        """Drop every visible entry (rule ``"cleared"``), lowest index first."""
        return [self._drop(entry, round_, "cleared") for entry in list(self.entries.values())]

    def forget(self) -> None:
        """Forget every entry, visible and dropped."""
        self.entries, self.dropped = {}, DroppedEntries()
        self._entry_tokens, self._entry_text = {}, {}
        self._text, self._tokens = None, None

    def drop(self, index: int, round_: int, rule: Rule) -> DroppedEntry:
        """Drop visible entry ``index`` by ``rule`` (a plan made on a :meth:`copy`, carried out)."""
        return self._drop(self.entries[index], round_, rule)

    def drop_least_recent(self, round_: int, tokens: int) -> list[DroppedEntry]:
        """Drop the least recently recalled visible entries (lower index first on ties) by the LRU
        rule until the entries dropped cost at least ``tokens`` by their cached counts (or none is
        left); what was dropped, in order. O(entries log entries)."""
        order = sorted(self.entries.values(), key=lambda e: (e.last_recall_round, e.index))
        dropped: list[DroppedEntry] = []
        for entry in order:
            if tokens <= 0:
                break
            tokens -= self._entry_cost(entry)
            dropped.append(self._drop(entry, round_, "lru"))
        return dropped

    def _drop(self, entry: ContentsEntry, round_: int, rule: Rule) -> DroppedEntry:
        del self.entries[entry.index]
        self._changed(entry.index)
        gone = DroppedEntry(
            entry.index, entry.recall_count, entry.last_recall_round, entry.archived_round, round_, rule
        )
        self.dropped.add(gone)
        return gone

    def end_round(self, round_: int) -> list[DroppedEntry]:
        """Apply the m rule, the p rule, then LRU, for the round that has just begun. O(entries)
        plus, when LRU runs, a sort and a few recounts of the contents page."""
        policy = self.policy
        dropped: list[DroppedEntry] = []
        for entry in list(self.entries.values()):
            idle = round_ - entry.last_recall_round
            if entry.recall_count == 0 and idle >= policy.unrecalled_rounds:
                dropped.append(self._drop(entry, round_, "unrecalled"))
        for entry in list(self.entries.values()):
            if round_ - entry.last_recall_round >= policy.unchanged_rounds:
                dropped.append(self._drop(entry, round_, "unchanged"))
        dropped.extend(self.apply_cap(round_))
        return dropped

    def apply_cap(self, round_: int) -> list[DroppedEntry]:
        """LRU under the contents cap: while the contents page is over ``lru_trigger *
        contents_max_tokens`` tokens, drop the least recently recalled entries until it is at most
        ``lru_floor * contents_max_tokens``. What it dropped, in order."""
        policy = self.policy
        dropped: list[DroppedEntry] = []
        cap = policy.contents_max_tokens
        if self.tokens() > policy.lru_trigger * cap:
            floor = policy.lru_floor * cap
            order = sorted(self.entries.values(), key=lambda e: (e.last_recall_round, e.index))
            # Drop by the cached cost of each entry, then check the real count (tokens across an
            # entry's boundary may merge) and go on one at a time while it is still over.
            estimate = self.tokens()
            at = 0
            while at < len(order) and estimate > floor:
                estimate -= self._entry_cost(order[at])
                dropped.append(self._drop(order[at], round_, "lru"))
                at += 1
            while at < len(order) and self.tokens() > floor:
                dropped.append(self._drop(order[at], round_, "lru"))
                at += 1
        return dropped

    # ---- reading ---------------------------------------------------------------------------------

    def listing(self, round_: int, limit: int) -> list[PageListing]:
        """The ``limit`` most recently archived visible entries, newest first."""
        newest = sorted(self.entries, reverse=True)[:limit]
        return [
            PageListing(
                i, self.entries[i].summary, self.entries[i].recall_count, round_ - self.entries[i].last_recall_round
            )
            for i in newest
        ]
