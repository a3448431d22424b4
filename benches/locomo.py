"""LoCoMo (snap-research/locomo: 10 long conversations between two people, questions with the turns
that hold their answer) read from a local copy, and fed into a context system as an agent would be.

No package registry ships LoCoMo, and nothing may download while a bench runs, so the data comes
from ``MEMCI_LOCOMO``: the path of ``locomo10.json`` (a list of samples, each with its
``conversation`` and ``qa``) or of a directory of one JSON file per conversation (the repository's
``locomo10_v2`` layout: the conversation's keys and ``qa`` in one object). Without it the benches
that need it skip, saying so.

Feeding: the first speaker's turns are user messages and the second's assistant messages, each
``"Name: text"`` (an image shared adds ``[shares a photo of …]``, its caption); a user turn opens a
page, and a round ends (``end_round`` then ``build_messages``, as before each model request) before
every user turn but the first. A question's evidence pages are the pages its evidence turns were
added to.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import memci
import pytest

ENV = "MEMCI_LOCOMO"
#: The answerable question categories (5 is adversarial: no answer in the conversation).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SYSTEM_PROMPT = "You are a helpful assistant talking with a friend."


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    category: int
    evidence: frozenset[int]  # the pages holding its evidence turns


@dataclass(slots=True)
class Conversation:
    """One conversation fed into a context system: the system, every page's text, the questions."""

    ctx: memci.ContextSystem
    page_texts: dict[int, str] = field(default_factory=dict)
    questions: list[Question] = field(default_factory=list)


def path() -> Path | None:
    """The LoCoMo copy ``MEMCI_LOCOMO`` names, or None."""
    given = os.environ.get(ENV)
    return Path(given) if given else None


def require() -> Path:
    """The LoCoMo copy, or skip the calling bench saying how to get one."""
    found = path()
    if found is None or not found.exists():
        pytest.skip(
            f"LoCoMo is not on any package registry and nothing downloads at run time: set {ENV} to a "
            "copy of locomo10.json (github.com/snap-research/locomo) to run this bench"
        )
    return found


def _samples(source: Path) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """``(conversation, qa)`` of each sample, in either layout."""
    if source.is_dir():
        for file in sorted(source.glob("*.json"), key=lambda p: (len(p.stem), p.stem)):
            data = json.loads(file.read_text(encoding="utf-8"))
            yield data, data["qa"]
        return
    for sample in json.loads(source.read_text(encoding="utf-8")):
        yield sample["conversation"], sample["qa"]


def _sessions(conversation: dict[str, Any]) -> list[list[dict[str, Any]]]:
    numbers = sorted(int(m[1]) for key in conversation if (m := re.fullmatch(r"session_(\d+)", key)))
    return [conversation[f"session_{n}"] for n in numbers]


def _text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    return f"{text} [shares {caption}]" if caption else text


def feed(conversation: dict[str, Any], qa: list[dict[str, Any]], **options: Any) -> Conversation:
    """A default context system (``ContextSystem(max_context_tokens=7000)`` unless ``options`` say
    otherwise) fed the conversation, and its answerable questions with their evidence pages."""
    ctx = memci.ContextSystem(SYSTEM_PROMPT, **({"max_context_tokens": 7000} | options))
    fed = Conversation(ctx)
    first = conversation["speaker_a"]
    page_of: dict[str, int] = {}
    for session in _sessions(conversation):
        for turn in session:
            user = turn["speaker"] == first
            if user and fed.page_texts:
                ctx.end_round()
                ctx.build_messages()
            page = ctx.add({"role": "user" if user else "assistant", "content": _text(turn)})
            page_of[turn["dia_id"]] = page
            fed.page_texts[page] = f"{fed.page_texts.get(page, '')}\n{_text(turn)}".lstrip("\n")
    ctx.end_round()
    ctx.build_messages()
    for item in qa:
        category = item.get("category")
        pages = frozenset(page_of[e] for e in item.get("evidence", ()) if e in page_of)
        if category in CATEGORIES and pages:
            fed.questions.append(Question(item["question"], category, pages))
    return fed


@cache
def samples() -> tuple[tuple[dict[str, Any], list[dict[str, Any]]], ...]:
    """``(conversation, qa)`` of every LoCoMo sample (read once per run), or skip."""
    return tuple(_samples(require()))


@cache
def feed_all() -> tuple[Conversation, ...]:
    """Every LoCoMo conversation fed (once per run), or skip."""
    return tuple(feed(conversation, qa) for conversation, qa in samples())
