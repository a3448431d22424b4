"""The scripted conversation of ``memci demo``: a user with a seeded random stream of requests
(weather, sums, papers, files, small talk; some in Chinese and Japanese), and an agent that answers
with tool calls and, when the user asks about something from long ago, recalls the page it is on.

The agent plays a model's part without a model: it reads the contents page the context system
sends (``[page N]`` lines) to pick the page to recall, and when the entry has been dropped from
the contents page it asks the memory system (``ContextSystem.search``) instead, as the paged design
describes. Everything it adds goes through the public API, so what the demo shows is what an agent
loop would do.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from memci.context.system import ContextSystem

__all__ = ["Agent", "Event", "Fact", "ScriptedUser"]

Message = dict[str, Any]

CITIES = ["Paris", "東京", "北京", "Lagos", "Lima", "Oslo", "上海", "Cairo", "Quito", "大阪"]
SKIES = ["sunny", "light rain", "cloudy", "windy", "clear"]
SKIES_ZH = ["晴", "小雨", "多云", "有风", "晴朗"]
SUBJECTS = ["context windows", "vector search", "tokenizers", "Rust FFI", "B-trees", "CRDTs", "BM25"]
PROJECTS = ["atlas", "borealis", "cygnus", "draco", "eridanus"]


@dataclass(frozen=True)
class Fact:
    """Something the agent said that the user may ask about later: the key to look for and the
    page the answer was on."""

    key: str
    page: int


@dataclass
class Event:
    """What happened in one round, for the display."""

    round: int
    page: int
    request: str
    action: str = ""
    recalled: int | None = None
    found_by: str = ""  # "contents" or "search"
    tool_call: Message | None = None
    tool_result: Message | None = None


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> Message:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


class ScriptedUser:
    """A seeded stream of requests; every ``ask_back_every`` rounds (after a warm-up) a question
    about an answer from at least ``min_age`` rounds before."""

    def __init__(self, seed: int = 7, ask_back_every: int = 9, min_age: int = 12) -> None:
        self.rng = random.Random(seed)
        self.ask_back_every = ask_back_every
        self.min_age = min_age
        self.facts: list[tuple[int, Fact]] = []  # (round, fact)

    def remember(self, round_: int, fact: Fact) -> None:
        self.facts.append((round_, fact))

    def ask_back(self, round_: int) -> Fact | None:
        if round_ < 2 * self.min_age or round_ % self.ask_back_every:
            return None
        old = [f for r, f in self.facts if round_ - r >= self.min_age]
        if not old:
            return None
        # Mostly something fairly recent, sometimes something very old (likely dropped by now).
        return old[-self.rng.randint(1, min(6, len(old)))] if self.rng.random() < 0.6 else self.rng.choice(old)

    def request(self) -> tuple[str, str, str, dict[str, Any], str, str]:
        """(kind, question, tool name or "", tool arguments, tool result, answer)."""
        rng = self.rng
        kind = rng.choice(["weather", "weather", "weather-zh", "calc", "papers", "files", "chat"])
        city, n = rng.choice(CITIES), rng.randint(-5, 35)
        if kind == "weather":
            sky = rng.choice(SKIES)
            result = f"Tomorrow in {city}: {n}°C, {sky}."
            return (
                kind,
                f"What's the weather in {city} tomorrow?",
                "get_weather",
                {"city": city},
                result,
                (f"Tomorrow in {city} it will be {n}°C and {sky}."),
            )
        if kind == "weather-zh":
            sky = rng.choice(SKIES_ZH)
            result = f"{city}明天{n}°C\uff0c{sky}。"
            return (
                kind,
                f"{city}明天天气怎么样\uff1f",
                "get_weather",
                {"city": city, "lang": "zh"},
                result,
                (f"{city}明天{n}°C\uff0c天气{sky}。"),
            )
        if kind == "calc":
            a, b = rng.randint(12, 999), rng.randint(12, 999)
            return (
                kind,
                f"What is {a} times {b}?",
                "calculator",
                {"expression": f"{a}*{b}"},
                str(a * b),
                (f"{a} times {b} is {a * b}."),
            )
        if kind == "papers":
            subject = rng.choice(SUBJECTS)
            title = f"On {subject.title()} at Scale ({rng.randint(2019, 2026)})"
            result = f"Found {rng.randint(3, 40)} papers on {subject}; the newest is '{title}'."
            return (
                kind,
                f"Find recent papers on {subject}.",
                "search_papers",
                {"query": subject},
                result,
                (f"The most recent paper on {subject} is '{title}'."),
            )
        if kind == "files":
            project = rng.choice(PROJECTS)
            result = f"{rng.randint(3, 30)} files in /srv/{project}: notes.md, plan.txt, 日志.log"
            return (
                kind,
                f"List the files in /srv/{project}.",
                "list_files",
                {"path": f"/srv/{project}"},
                result,
                (f"/srv/{project} holds notes.md, plan.txt and 日志.log, among others."),
            )
        subject = rng.choice(SUBJECTS)
        return (
            kind,
            f"Thanks! Any quick tip about {subject}?",
            "",
            {},
            "",
            (f"Measure before you optimise {subject}; the bottleneck is rarely where you expect."),
        )


_PAGE_LINE = re.compile(r"^\[page (\d+)\]")


def pages_mentioning(contents: str | None, key: str) -> list[int]:
    """Page indices whose contents entry mentions ``key`` (what a model reading the contents page
    would pick), newest first."""
    if not contents:
        return []
    found: list[int] = []
    current: int | None = None
    for line in contents.split("\n"):
        match = _PAGE_LINE.match(line)
        if match:
            current = int(match.group(1))
        if current is not None and key in line and current not in found:
            found.append(current)
    return sorted(found, reverse=True)


class Agent:
    """Plays the model: answers each request through the context system's public API."""

    def __init__(self, ctx: ContextSystem, user: ScriptedUser) -> None:
        self.ctx = ctx
        self.user = user
        self.calls = 0

    def _id(self) -> str:
        self.calls += 1
        return f"call_{self.calls}"

    def run_round(self, round_: int) -> Event:
        """One round: the user's message, the agent's tool calls and answer. The round is not
        ended here (the caller does, to show what the rules drop)."""
        ctx = self.ctx
        fact = self.user.ask_back(round_)
        if fact is not None:
            return self._recall_round(round_, fact)
        _kind, question, tool, arguments, result, answer = self.user.request()
        page = ctx.add({"role": "user", "content": question})
        event = Event(round_, page, question, action=tool or "answer")
        if tool:
            call = _call(self._id(), tool, arguments)
            ctx.add({"role": "assistant", "content": None, "tool_calls": [call]})
            ctx.add({"role": "tool", "tool_call_id": call["id"], "content": result})
        ctx.add({"role": "assistant", "content": answer})
        key = arguments.get("city") or arguments.get("query") or arguments.get("path") or ""
        if key:  # a chat request has no arguments, so no key
            self.user.remember(round_, Fact(str(key), page))
        return event

    def _recall_round(self, round_: int, fact: Fact) -> Event:
        ctx = self.ctx
        question = f"What did you tell me about {fact.key}?"
        page = ctx.add({"role": "user", "content": question})
        event = Event(round_, page, question)
        # What a model would do: look for the key on the contents page it was sent...
        candidates = pages_mentioning(ctx.contents_text(), fact.key)
        event.found_by = "contents"
        if not candidates:
            # ...and when the entry has been dropped, ask the memory system.
            hits = ctx.search(fact.key, k=3)
            candidates = [h.page_index for h in hits]
            event.found_by = "search"
        target = fact.page if fact.page in candidates else (candidates[0] if candidates else fact.page)
        call = _call(self._id(), "recall_page", {"page_index": target})
        ctx.add({"role": "assistant", "content": None, "tool_calls": [call]})
        result = ctx.handle_tool_call(call)
        ctx.add(result)
        event.action = f"recall_page({target})"
        event.recalled = target
        event.tool_call = call
        event.tool_result = result
        recalled = json.loads(result["content"])
        said = next(
            (m["content"] for m in reversed(recalled.get("messages", [])) if m["role"] == "assistant" and m["content"]),
            None,
        )
        reply = f"On page {target} I said: {said}" if said else f"I could not find it (page {target})."
        ctx.add({"role": "assistant", "content": reply})
        return event
