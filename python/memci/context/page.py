"""A page of the context system: one user interaction, as :class:`Page` and its :class:`Entry` list.

The lowest module of the context wing: the summarizers, the recall tools and the system all read
pages, and this module imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Entry", "Message", "Page"]

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Entry:
    """One message of a page: its role and the message (a dict of its own)."""

    role: str
    message: Message


@dataclass(frozen=True, slots=True)
class Page:
    """One user interaction: its index (from 1) and its entries, in order. A snapshot taken when
    it was read; the dicts are the caller's to keep."""

    index: int
    entries: tuple[Entry, ...]

    @classmethod
    def of(cls, index: int, messages: Sequence[Message]) -> Page:
        return cls(index, tuple(Entry(m["role"], m) for m in messages))

    def messages(self) -> list[Message]:
        """The entries' messages, in order."""
        return [e.message for e in self.entries]
