"""A small pure-Python reference of the context system's rules (docs/design.md and docs/context-system.md), for
the stateful test: lists and dicts, no summaries, and a contents page that costs ``tokens_per_entry``
tokens per entry (what ``context_helpers.pages_counter`` makes the real one cost)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]


@dataclass
class Counts:
    recall_count: int
    last_recall_round: int
    archived_round: int


@dataclass
class ReferenceContext:
    active_pages: int
    unrecalled_rounds: int
    unchanged_rounds: int
    contents_max_tokens: int
    lru_trigger: float
    lru_floor: float
    tokens_per_entry: int = 10
    round: int = 0
    next_index: int = 1
    #: (index, messages), oldest first; the last is open.
    active: list[tuple[int, list[Message]]] = field(default_factory=list)
    entries: dict[int, Counts] = field(default_factory=dict)
    #: index -> (counts, dropped_round, rule)
    dropped: dict[int, tuple[Counts, int, str]] = field(default_factory=dict)
    stored: dict[int, list[Message]] = field(default_factory=dict)

    def add(self, message: Message) -> int:
        if self.active and message["role"] != "user":
            self.active[-1][1].append(message)
            return self.active[-1][0]
        index = self.next_index
        self.next_index += 1
        self.active.append((index, [message]))
        while len(self.active) > self.active_pages:
            old, messages = self.active.pop(0)
            self.stored[old] = messages
            self.entries[old] = Counts(0, self.round, self.round)
        return index

    def _drop(self, index: int, rule: str) -> None:
        self.dropped[index] = (self.entries.pop(index), self.round, rule)

    def end_round(self) -> list[tuple[int, str]]:
        self.round += 1
        out: list[tuple[int, str]] = []
        for index, c in sorted(self.entries.items()):
            if c.recall_count == 0 and self.round - c.last_recall_round >= self.unrecalled_rounds:
                self._drop(index, "unrecalled")
                out.append((index, "unrecalled"))
        for index, c in sorted(self.entries.items()):
            if self.round - c.last_recall_round >= self.unchanged_rounds:
                self._drop(index, "unchanged")
                out.append((index, "unchanged"))
        cap = self.contents_max_tokens
        if self.tokens_per_entry * len(self.entries) > self.lru_trigger * cap:
            order = sorted(self.entries, key=lambda i: (self.entries[i].last_recall_round, i))
            for index in order:
                if self.tokens_per_entry * len(self.entries) <= self.lru_floor * cap:
                    break
                self._drop(index, "lru")
                out.append((index, "lru"))
        return out

    def recall(self, index: int) -> list[Message] | None:
        """The page's messages, or None when no such page exists."""
        if not 1 <= index < self.next_index:
            return None
        for active_index, messages in self.active:
            if active_index == index:
                return messages
        counts = self.entries.get(index)
        if counts is None:
            counts = self.dropped.pop(index)[0]
            self.entries[index] = counts
        counts.recall_count += 1
        counts.last_recall_round = self.round
        return self.stored[index]

    def window(self) -> list[Message]:
        return [m for _, messages in self.active for m in messages]
