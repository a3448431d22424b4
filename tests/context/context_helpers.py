"""What the context-system tests share: a storage that keeps JSON copies (so anything that is not
JSON fails loudly), deterministic token counters, and message builders for scripted rounds."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import memci
from memci.context.summary import PageSummary

Message = dict[str, Any]


class DictStorage:
    """The storage protocol over dicts; every value goes through JSON text, as a real store's would."""

    def __init__(self) -> None:
        self.pages: dict[int, str] = {}
        self.state: str | None = None
        self.puts: list[int] = []

    def put_page(self, index: int, page: dict[str, Any]) -> None:
        self.pages[index] = json.dumps(page)
        self.puts.append(index)

    def get_page(self, index: int) -> dict[str, Any] | None:
        text = self.pages.get(index)
        return None if text is None else json.loads(text)

    def page_indices(self) -> list[int]:
        return sorted(self.pages)

    def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        for page in pages:
            self.put_page(page["index"], page)
        self.state = json.dumps(state)

    def load_state(self) -> dict[str, Any] | None:
        return None if self.state is None else json.loads(self.state)

    def close(self) -> None:
        pass


class FailingStorage(DictStorage):
    """Refuses every save while ``failing`` is set, writing nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        if self.failing:
            raise OSError("disk full")
        super().save_state(state, pages)


def _text(message: Message) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""
    calls = " ".join(c["function"]["name"] + " " + c["function"]["arguments"] for c in message.get("tool_calls") or ())
    return f"{text} {calls}"


def words(message: Message) -> int:
    """A deterministic message counter: 4 for the message, plus its whitespace-separated words."""
    return 4 + len(_text(message).split())


def pages_counter(message: Message) -> int:
    """Ten tokens per contents entry (``[page N]`` tag), nothing else: policy arithmetic made plain."""
    return 10 * _text(message).count("[page ")


class FixedSummarizer:
    """Summaries that name the page and each entry's position: ``p3``, ``p3.0``, ``p3.1``..."""

    def summarize(self, page: memci.Page) -> PageSummary:
        return PageSummary(f"p{page.index}", tuple(f"p{page.index}.{i}" for i in range(len(page.entries))))


def make(**kwargs: Any) -> memci.ContextSystem:
    """A context system on a :class:`DictStorage`, counting words, unless told otherwise."""
    kwargs.setdefault("storage", DictStorage())
    kwargs.setdefault("counter", words)
    return memci.ContextSystem("You are a careful agent.", **kwargs)


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": text}


def calling(call_id: str, name: str = "lookup", arguments: str = '{"q": "x"}') -> Message:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def tool(call_id: str, text: str = "result") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def interaction(n: int, *, with_tool: bool = True) -> list[Message]:
    """Round ``n``: a question, (a tool call and its result,) and an answer."""
    out = [user(f"Question {n}: what about item {n}?")]
    if with_tool:
        out += [calling(f"call_{n}"), tool(f"call_{n}", f"item {n} is fine")]
    out.append(assistant(f"Answer {n}: item {n} is fine."))
    return out


def run_rounds(ctx: memci.ContextSystem, first: int, last: int, *, with_tool: bool = True) -> None:
    """Add rounds ``first..=last`` (one interaction each) and end each round."""
    for n in range(first, last + 1):
        ctx.extend(interaction(n, with_tool=with_tool))
        ctx.end_round()
