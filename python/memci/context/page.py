"""A page of the context system: one user interaction, as :class:`Page` and its :class:`Entry` list.

The lowest module of the context wing: the summarizers, the recall tools and the system all read
pages, and this module imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Entry", "Message", "Page", "role_of"]

Message = dict[str, Any]


def role_of(message: Message) -> str:
    """A message's role; for a Responses item without one (``function_call``,
    ``function_call_output``, ``reasoning``...), its ``type``; ``""`` if it has neither."""
    role = message.get("role")
    if isinstance(role, str):
        return role
    kind = message.get("type")
    return kind if isinstance(kind, str) else ""


@dataclass(frozen=True, slots=True)
class Entry:
    """One message of a page: its role (for a Responses item without a role, its ``type``:
    ``function_call``, ``function_call_output``, ``reasoning``) and the message (a dict of its
    own)."""

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
        return cls(index, tuple(Entry(role_of(m), m) for m in messages))

    def messages(self) -> list[Message]:
        """The entries' messages, in order."""
        return [e.message for e in self.entries]
