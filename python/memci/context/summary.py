"""Summaries of the pages the context system archives.

A :class:`Summarizer` takes a :class:`~memci.Page` and returns a :class:`PageSummary`: one line for
the page and one per entry (message), which the contents page shows the model as anchors to recall
by. The default, :class:`ExtractiveSummarizer`, is offline and deterministic: each entry becomes
its role and its first sentence (or first characters), cut on character boundaries. To have a
model write the summaries, wrap any ``str -> str`` function in :class:`CallableSummarizer` (or pass
the function itself as ``summarizer=``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from memci import _core
from memci.context.page import Page
from memci.errors import SummaryError, repr_of

__all__ = [
    "CallableSummarizer",
    "ExtractiveSummarizer",
    "PageSummary",
    "Summarizer",
    "as_summarizer",
    "cut",
    "entry_text",
    "said_and_calls",
]

Message = dict[str, Any]

ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class PageSummary:
    """What a summarizer says about one page: ``summary`` (one line) and ``entry_summaries``, one
    per entry, in the page's order."""

    summary: str
    entry_summaries: tuple[str, ...]


@runtime_checkable
class Summarizer(Protocol):
    """Anything with ``summarize(page) -> PageSummary``."""

    def summarize(self, page: Page) -> PageSummary:
        """Summarise ``page``: one line for the page, one per entry."""
        ...


# ---- text ---------------------------------------------------------------------------------------

_ZWJ = "\u200d"


def _continues(text: str, i: int) -> bool:
    """True when ``text[i]`` belongs to the character before it: a combining mark, a variation
    selector, an emoji skin tone, or anything after a zero-width joiner."""
    c = text[i]
    o = ord(c)
    return (
        unicodedata.category(c) in ("Mn", "Mc", "Me")
        or c == _ZWJ
        or text[i - 1] == _ZWJ
        or 0xFE00 <= o <= 0xFE0F
        or 0xE0100 <= o <= 0xE01EF
        or 0x1F3FB <= o <= 0x1F3FF
    )


def cut(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters; otherwise its start and ``…``, ``limit``
    characters in all, cut on a character boundary: never inside a UTF-8 sequence (Python strings
    are code points), and never between a letter and its combining marks or inside an emoji
    sequence joined by zero-width joiners. O(limit)."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    end = limit - 1
    while end > 0 and _continues(text, end):
        end -= 1
    return text[:end].rstrip() + ELLIPSIS


#: ``.``, ``!`` or ``?`` before a space or the end; the ideographic full stop and full-width ``!`` ``?``
#: anywhere (CJK text puts no space after them).
_SENTENCE_END = re.compile("[.!?](?=\\s|$)|[\u3002\uff01\uff1f]")


def first_sentence(text: str, within: int | None = None) -> str:
    """The first line of ``text`` up to its first sentence end (``.``, ``!``, ``?`` followed by a
    space, or the CJK full stop, exclamation and question marks), whitespace collapsed. With
    ``within``, only the first ``within`` characters are looked at (enough for a summary cut
    shorter than that; a long message then costs no more than a short one)."""
    text = text.lstrip()
    if within is not None:
        text = text[:within]
    line = " ".join(text.split("\n", 1)[0].split())
    found = _SENTENCE_END.search(line)
    return line if found is None else line[: found.end()]


_RECALL_RESULT = re.compile(r'^\{"page": (\d+), "messages": \[')


def _recalled_page(text: str) -> str | None:
    """``"recalled page N"`` for the result of a ``recall_page`` call: a summary of the JSON would
    only repeat the start of a page the contents page already lists."""
    match = _RECALL_RESULT.match(text)
    return None if match is None else f"recalled page {match.group(1)}"


def entry_text(message: Message, *, short: int | None = None) -> str:
    """The text a summary of ``message`` starts from: what it says (with ``short``, only its first
    sentence, looked for in that many characters), then the tools it calls as
    ``→ name(arguments)``. Both come from the core's text rule (``memci._core.entry_texts``)."""
    ((said, calls),) = _core.entry_texts([message])
    return _entry_line(said, calls, short)


def _entry_line(said: str, calls: str, short: int | None) -> str:
    recalled = _recalled_page(said)
    if recalled is not None:
        return recalled
    if short is not None:
        said = first_sentence(said, short)
    return said_and_calls(said, calls)


def said_and_calls(said: str, calls: str) -> str:
    """What a message says, then ``→`` and the tools it calls (``memci._core.entry_texts``);
    either alone when the other is empty."""
    if calls:
        return f"{said.strip()} → {calls}" if said.strip() else f"→ {calls}"
    return said


# ---- summarizers --------------------------------------------------------------------------------


class ExtractiveSummarizer:
    """The default summarizer: offline, deterministic, and cheap (O(page text)).

    An entry's summary is ``"{role}: {first sentence}"`` (a tool call reads ``assistant: → name(args)``),
    cut to ``entry_chars`` characters; the page's summary is the first sentence of its first user
    entry (of its first entry if it has none), cut to ``page_chars``.
    """

    __slots__ = ("entry_chars", "page_chars")

    def __init__(self, entry_chars: int = 100, page_chars: int = 80) -> None:
        for name, value in (("entry_chars", entry_chars), ("page_chars", page_chars)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SummaryError(f"ExtractiveSummarizer: {name} must be an int >= 1, got {repr_of(value)}")
        self.entry_chars = entry_chars
        self.page_chars = page_chars

    def summarize(self, page: Page) -> PageSummary:
        messages = _page_messages("ExtractiveSummarizer", page)
        # Twice the longest cut, and some: whitespace collapses, so a little more may be needed.
        within = 2 * max(self.entry_chars, self.page_chars) + 16
        lines = [_entry_line(said, calls, within) for said, calls in _core.entry_texts(messages)]
        entries = tuple(cut(f"{m['role']}: {line}", self.entry_chars) for m, line in zip(messages, lines, strict=True))
        first = next((i for i, m in enumerate(messages) if m["role"] == "user"), 0)
        summary = cut(lines[first], self.page_chars) if lines else ""
        return PageSummary(summary, entries)

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(entry_chars={self.entry_chars}, page_chars={self.page_chars})"


class CallableSummarizer:
    """Adapts any ``fn(text) -> str`` (a call to a model, say) into a :class:`Summarizer`.

    ``fn`` is called once per entry, with ``"{role}: {text}"``, and once for the page, with the
    entries' texts one per line. What it returns is cut to ``max_chars`` characters (on character
    boundaries) when ``max_chars`` is given.
    """

    __slots__ = ("fn", "max_chars")

    def __init__(self, fn: Callable[[str], str], *, max_chars: int | None = None) -> None:
        if not callable(fn):
            raise SummaryError(f"CallableSummarizer: fn must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.max_chars = max_chars

    def _call(self, text: str) -> str:
        out = self.fn(text)
        if not isinstance(out, str):
            raise SummaryError(f"summarizer function returned {type(out).__name__}, expected str")
        return out if self.max_chars is None else cut(out, self.max_chars)

    def summarize(self, page: Page) -> PageSummary:
        messages = _page_messages("CallableSummarizer", page)
        texts = _core.entry_texts(messages)
        tagged = [f"{m['role']}: {_entry_line(*text, None)}" for m, text in zip(messages, texts, strict=True)]
        entries = tuple(self._call(t) for t in tagged)
        return PageSummary(self._call("\n".join(tagged)), entries)

    def __repr__(self) -> str:
        return f"CallableSummarizer({self.fn!r})"


def _page_messages(where: str, page: object) -> list[dict[str, Any]]:
    """The messages of ``page``, which must be a :class:`Page`."""
    if not isinstance(page, Page):
        raise SummaryError(f"{where}.summarize: page must be a memci.Page, got {type(page).__name__}")
    return page.messages()


def as_summarizer(value: Summarizer | Callable[[str], str] | None) -> Summarizer:
    """``None``: the default :class:`ExtractiveSummarizer`; a :class:`Summarizer` as is; any other
    callable wrapped in :class:`CallableSummarizer`."""
    if value is None:
        return ExtractiveSummarizer()
    if isinstance(value, Summarizer):
        return value
    if callable(value):
        return CallableSummarizer(value)
    raise SummaryError(f"summarizer must be a Summarizer, a str -> str callable or None, got {type(value).__name__}")


def checked(summary: object, page: Page) -> PageSummary:
    """``summary`` if it is a :class:`PageSummary` (or a ``(summary, entry_summaries)`` pair) that
    fits ``page``: a str and one str per entry. Otherwise :class:`SummaryError` naming the fault."""
    if isinstance(summary, tuple) and len(summary) == 2 and not isinstance(summary, PageSummary):
        summary = PageSummary(summary[0], tuple(summary[1]) if isinstance(summary[1], list | tuple) else summary[1])
    if not isinstance(summary, PageSummary):
        raise SummaryError(f"page {page.index}: the summarizer returned {type(summary).__name__}, not a PageSummary")
    if not isinstance(summary.summary, str):
        raise SummaryError(f"page {page.index}: summary must be a str, got {type(summary.summary).__name__}")
    entries = summary.entry_summaries
    if not isinstance(entries, tuple | list) or not all(isinstance(e, str) for e in entries):
        raise SummaryError(f"page {page.index}: entry_summaries must be a sequence of str")
    if len(entries) != len(page.entries):
        raise SummaryError(
            f"page {page.index}: {len(entries)} entry summaries for {len(page.entries)} entries (one per entry)"
        )
    return PageSummary(summary.summary, tuple(entries))
