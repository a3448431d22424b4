"""Summaries of the pages the context system archives.

A :class:`Summarizer` takes a :class:`~memci.Page` and returns a :class:`PageSummary`: one line for
the page and one per entry (message), which the contents page shows the model as anchors to recall
by. The default, :class:`ExtractiveSummarizer`, is offline and deterministic: each entry becomes
its role and its first sentence (or first characters), cut on character boundaries. To have a
model write the summaries, wrap any ``str -> str`` function in :class:`CallableSummarizer` (or pass
the function itself as ``summarizer=``).
"""

from __future__ import annotations

import inspect
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

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
    "entry_lines",
    "entry_text",
    "holds",
    "is_coroutine_callable",
    "said_and_calls",
    "summarize_read",
]

Message = dict[str, Any]
#: What each message of a page says and the tools it calls, in order, as ``memci._core.entry_texts``
#: gives them (and ``PageWindow.page_texts`` with the page it reads).
EntryTexts = Sequence[tuple[str, str]]

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


#: Content part and block types that carry no text, by what a summary calls them: the chat
#: completions', Anthropic's and the Responses API's.
_ATTACHMENTS = {
    "image_url": "image",
    "image": "image",
    "input_image": "image",
    "file": "file",
    "input_file": "file",
    "document": "file",
    "input_audio": "audio clip",
}


def _count_attachments(parts: object, counts: dict[str, int]) -> None:
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        kind = _ATTACHMENTS.get(str(part.get("type")))
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
        elif part.get("type") == "tool_result":  # an Anthropic tool result may hold images
            _count_attachments(part.get("content"), counts)


def holds(message: Message) -> str:
    """What ``message`` holds besides text, as a summary says it: ``"an image"``, ``"2 images and a
    file"``; ``""`` when it holds nothing else. Images, files (documents) and audio, in any of the
    three formats; an assistant's ``audio`` counts as an audio clip. O(parts)."""
    counts: dict[str, int] = {}
    _count_attachments(message.get("content"), counts)
    _count_attachments(message.get("output"), counts)  # a Responses tool output item
    if isinstance(message.get("audio"), dict):
        counts["audio clip"] = counts.get("audio clip", 0) + 1
    said = [f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}" if n == 1 else f"{n} {kind}s" for kind, n in counts.items()]
    if len(said) <= 1:
        return "".join(said)
    return ", ".join(said[:-1]) + " and " + said[-1]


def _no_text_line(message: Message) -> str:
    """``"sent an image"`` (``"returned ..."`` for a tool result) for a message with no text;
    ``""`` when it holds nothing at all."""
    what = holds(message)
    if not what:
        return ""
    answers = message.get("role") == "tool" or str(message.get("type", "")).endswith("_output")
    return f"{'returned' if answers else 'sent'} {what}"


def entry_lines(messages: list[Message], short: int | None = None, texts: EntryTexts | None = None) -> list[str]:
    """:func:`entry_text` of each message, in one call of the core (none when ``texts``, the
    messages' entry texts, were read with them); a message with no text says what it holds instead
    (``"sent an image"``), so an image-only request is not summarised as nothing."""
    return [line for line, _ in _lines(messages, short, texts)]


def _lines(messages: list[Message], short: int | None, texts: EntryTexts | None = None) -> list[tuple[str, bool]]:
    """Each message's line, and whether it says what a message with no text holds."""
    out: list[tuple[str, bool]] = []
    for m, (said, calls) in zip(messages, _core.entry_texts(messages) if texts is None else texts, strict=True):
        line = _entry_line(said, calls, short)
        holding = "" if line.strip() else _no_text_line(m)
        out.append((holding, True) if holding else (line, False))
    return out


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
        return self._summarize(page, None)

    def _summarize(self, page: Page, texts: EntryTexts | None) -> PageSummary:
        messages = _page_messages("ExtractiveSummarizer", page)
        roles = [e.role for e in page.entries]
        # Twice the longest cut, and some: whitespace collapses, so a little more may be needed.
        within = 2 * max(self.entry_chars, self.page_chars) + 16
        lines = _lines(messages, within, texts)
        entries = tuple(cut(f"{role}: {line}", self.entry_chars) for role, (line, _) in zip(roles, lines, strict=True))
        first = next((i for i, role in enumerate(roles) if role == "user"), 0)
        summary = ""
        if lines:
            line, holding = lines[first]  # a request with no text reads "user sent an image"
            summary = cut(f"{roles[first]} {line}" if holding else line, self.page_chars)
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
        return self._summarize(page, None)

    def _summarize(self, page: Page, texts: EntryTexts | None) -> PageSummary:
        messages = _page_messages("CallableSummarizer", page)
        roles = [e.role for e in page.entries]
        tagged = [f"{role}: {line}" for role, line in zip(roles, entry_lines(messages, texts=texts), strict=True)]
        entries = tuple(self._call(t) for t in tagged)
        return PageSummary(self._call("\n".join(tagged)), entries)

    def __repr__(self) -> str:
        return f"CallableSummarizer({self.fn!r})"


def summarize_read(summarizer: Summarizer, page: Page, texts: EntryTexts) -> PageSummary:
    """``summarizer.summarize(page)``, where ``texts`` are the page's entry texts, read by the core
    with the page: memci's own summarizers start from them instead of sending the page back to the
    core to read them again (a subclass, or any other summarizer, is called as it is). O(page)."""
    if type(summarizer) in (ExtractiveSummarizer, CallableSummarizer):
        return cast("ExtractiveSummarizer | CallableSummarizer", summarizer)._summarize(page, texts)
    return summarizer.summarize(page)


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
    if _is_async(value):
        raise SummaryError(
            f"summarizer {shown_name(value)} is async (async def): the sync ContextSystem cannot await it; "
            "use memci.AsyncContextSystem, or a sync summarizer"
        )
    if isinstance(value, Summarizer):
        return value
    if callable(value):
        return CallableSummarizer(value)
    raise SummaryError(f"summarizer must be a Summarizer, a str -> str callable or None, got {type(value).__name__}")


def shown_name(value: object) -> str:
    """A summarizer's name for messages: a function's name, else its type's."""
    return str(getattr(value, "__name__", type(value).__name__))


def is_coroutine_callable(value: object) -> bool:
    """Whether calling ``value`` makes a coroutine: an ``async def`` function, or an object whose
    ``__call__`` is one."""
    call = type(value).__call__ if callable(value) and not inspect.isroutine(value) else None
    return inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(call)


def _is_async(value: object) -> bool:
    """An ``async def`` callable, or an object with ``asummarize`` and no ``summarize``."""
    if is_coroutine_callable(value):
        return True
    return callable(getattr(value, "asummarize", None)) and not callable(getattr(value, "summarize", None))


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
