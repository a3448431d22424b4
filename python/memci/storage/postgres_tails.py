"""The long texts of a PostgreSQL state that only grow, written as appended rows.

A context system's state holds one value that grows with the conversation: its dropped contents
entries, one string of rows (``state['dropped']``, 330 kB at 10k turns) that a save mostly extends
at its end. Rewriting it in the state row at every save made the row, and the WAL a save writes,
grow with the conversation. So a top-level string of the state of at least :data:`TAIL_MIN_CHARS`
characters is a **tail**: the state row holds ``""`` in its place and ``memci_state_tails`` holds its
text, in parts (``start``: where in the text each begins). A save that extends the value the store
last read or wrote appends the new end as one part; any other change (or the first save, or more
than :data:`MAX_PARTS` parts) rewrites it as one part. Loading joins the parts back, in the same
query as the state row. Nothing of this is visible through the store's protocol: a state comes back
as it was saved.

An append is valid only over the very state the store's copy came from: the commit function checks
that the stored state is that one (its commit id, ``after``) and otherwise answers ``stale``, and
the save is made again with every tail rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memci.errors import StorageError, is_unicode
from memci.storage.json_store import COMMIT_KEY

__all__ = ["MAX_PARTS", "TAIL_MIN_CHARS", "TailPlan", "Tails"]

#: A top-level string of the state at least this long is written as a tail (shorter ones cost
#: less in the state row than as rows of their own).
TAIL_MIN_CHARS = 4096
#: A tail of this many parts is rewritten as one at its next change, so loading joins few rows.
MAX_PARTS = 256


@dataclass(frozen=True, slots=True)
class TailPlan:
    """What one save writes: ``state`` with each tail's value replaced by ``""`` (what the state row
    holds), the tail ``keys`` (the stored tails of any other key are deleted), and ``writes``:
    ``(key, start, text)``, an append when ``start`` > 0 (over the state whose commit id is
    ``after``), a rewrite when 0. ``values``: each tail's whole text."""

    state: Any
    keys: tuple[str, ...] = ()
    writes: tuple[tuple[str, int, str], ...] = ()
    after: str = ""
    values: dict[str, str] = field(default_factory=dict)

    def params(self) -> dict[str, Any]:
        """The commit function's tail arguments."""
        return {
            "tail_keys": list(self.keys),
            "tail_after": self.after,
            "write_keys": [key for key, _, _ in self.writes],
            "write_starts": [start for _, start, _ in self.writes],
            "write_texts": [text for _, _, text in self.writes],
        }

    def rewritten(self) -> TailPlan:
        """This plan with every tail rewritten whole (after a ``stale`` answer)."""
        writes = tuple((key, 0, self.values[key]) for key in self.keys)
        return TailPlan(self.state, self.keys, writes, "", self.values)


class Tails:
    """A store's copy of the tails of the state it last read or wrote (their texts and part counts),
    and the commit id of that state. Used under the store's lock."""

    __slots__ = ("_after", "_parts", "_values")

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._parts: dict[str, int] = {}
        self._after = ""

    def plan(self, state: Any) -> TailPlan:
        """What a save of ``state`` writes (a state that is not a dict is left to the store's check
        to refuse). :class:`~memci.StorageError` if a tail's new text is not Unicode. O(new text)."""
        if type(state) is not dict:
            return TailPlan(state)
        keys = tuple(
            key
            for key, value in state.items()
            if type(value) is str and len(value) >= TAIL_MIN_CHARS and key != COMMIT_KEY
        )
        if not keys:
            return TailPlan(state)
        # An unversioned save replaces whatever is stored: nothing to append to.
        after = self._after if type(state.get("revision")) is int else ""
        writes = []
        for key in keys:
            value: str = state[key]
            old = self._values.get(key)
            if after and old is not None and value.startswith(old) and self._parts.get(key, 0) < MAX_PARTS:
                if len(value) > len(old):
                    writes.append((key, len(old), value[len(old) :]))
            else:
                writes.append((key, 0, value))
        for key, _, text in writes:
            if not is_unicode(text):
                raise StorageError(f"state: {key} holds a lone surrogate, which is not Unicode", "state")
        values = {key: state[key] for key in keys}
        return TailPlan({**state, **dict.fromkeys(keys, "")}, keys, tuple(writes), after, values)

    def written(self, plan: TailPlan, commit_id: str) -> None:
        """Take the tails of the state just saved by ``plan`` (as commit ``commit_id``)."""
        parts = {key: self._parts.get(key, 0) if key in self._values else 0 for key in plan.keys}
        for key, start, _ in plan.writes:
            parts[key] = 1 if start == 0 else parts[key] + 1
        self._values, self._parts, self._after = plan.values, parts, commit_id

    def loaded(self, state: dict[str, Any], tails: list[tuple[str, str, int]], trail: tuple[str, ...]) -> None:
        """Put the stored ``tails`` (key, text, parts) back into ``state`` (read with them) and take
        them, with the commit id of that state (the first of its ``trail``).
        :class:`~memci.StorageError` if the state row does not hold ``""`` in a tail's place."""
        for key, text, _ in tails:
            if state.get(key) != "":
                raise StorageError(f"state: corrupt: the stored tail {key!r} has no place in the state", "state")
            state[key] = text
        self._values = {key: text for key, text, _ in tails}
        self._parts = {key: parts for key, _, parts in tails}
        self._after = trail[0] if trail else ""
