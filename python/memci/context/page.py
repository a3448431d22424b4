"""A page of the context system: one user interaction, as :class:`Page` and its :class:`Entry` list,
and :class:`ArchivedPage`, the record a page is stored as.

The lowest module of the context wing: the summarizers, the recall tools and the system all read
pages, and this module imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memci.context.embedding import decode_vector, encode_vector
from memci.errors import PageError

__all__ = ["ArchivedPage", "Entry", "Message", "Page", "role_of"]

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


#: The fields of a stored page, with their types (the order they are written in).
_FIELDS: dict[str, type] = {
    "index": int,
    "messages": list,
    "summary": str,
    "entry_summaries": list,
    "archived_round": int,
}


@dataclass(frozen=True, slots=True)
class ArchivedPage:
    """A page as it is stored: its index, its messages, its summary and one per entry, and the
    round it was archived in, and its vector when the system has an embedder (little-endian float32
    bytes; stored as base64 under ``"vector"``, absent without one, so a page written without
    an embedder is stored byte for byte as before). The context system writes one for each page it archives; the chat
    histories and the Agents SDK session write their pages as this record too, with no summary.
    The storage knows nothing of these fields: the record is checked here, once, when it is read
    back (:meth:`from_dict`)."""

    index: int
    messages: tuple[Message, ...]
    summary: str = ""
    entry_summaries: tuple[str, ...] = ()
    archived_round: int = 0
    vector: bytes | None = None

    def to_dict(self) -> dict[str, Any]:
        """The page dict that is stored (without a vector, its bytes are the same as every memci
        release wrote)."""
        page = {
            "index": self.index,
            "messages": list(self.messages),
            "summary": self.summary,
            "entry_summaries": list(self.entry_summaries),
            "archived_round": self.archived_round,
        }
        if self.vector is not None:
            page["vector"] = encode_vector(self.vector)
        return page

    @classmethod
    def from_dict(cls, page: object, index: int) -> ArchivedPage:
        """The record stored under ``index``; :class:`~memci.PageError` naming what is wrong when
        ``page`` is not one. Other keys are ignored. O(page)."""
        problem = _problem(page, index)
        if problem is not None:
            raise PageError(f"page {index} in the storage is not an archived page: {problem}")
        assert isinstance(page, dict)
        return cls(
            index,
            tuple(page["messages"]),
            page["summary"],
            tuple(page["entry_summaries"]),
            page["archived_round"],
            decode_vector(page["vector"]) if "vector" in page else None,
        )


def _problem(page: object, index: int) -> str | None:
    """What is wrong with ``page`` as the record stored under ``index``, or None."""
    if type(page) is not dict:
        return f"it is a {type(page).__name__}, not a dict"
    for field, kind in _FIELDS.items():
        if field not in page:
            return f"it has no {field!r}"
        if type(page[field]) is not kind:
            return f"its {field!r} is a {type(page[field]).__name__}, not a {kind.__name__}"
    if page["index"] != index:
        return f"it says index {page['index']}"
    if page["archived_round"] < 0:
        return f"its archived_round is {page['archived_round']}"
    for i, message in enumerate(page["messages"]):
        if type(message) is not dict or not role_of(message):
            return f"messages[{i}] is not a message dict with a role or type"
    if "vector" in page and decode_vector(page["vector"]) is None:
        return "its 'vector' is not base64 of finite float32 values"
    for i, summary in enumerate(page["entry_summaries"]):
        if type(summary) is not str:
            return f"entry_summaries[{i}] is a {type(summary).__name__}, not a str"
    return None
