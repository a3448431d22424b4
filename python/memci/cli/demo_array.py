"""A short tour of :class:`memci.MessageArray` on a generated agent conversation.

Run it with ``python -m memci demo`` (or ``make demo``). The conversation is generated here from a
seeded random, so every run prints the same thing but for the timestamps.
"""

from __future__ import annotations

import json
import random
from typing import Any

from memci.array import MessageArray

Message = dict[str, Any]

_TOPICS = [
    ("weather", "What's the weather in {city} tomorrow?", "get_weather", "Tomorrow in {city}: {n}°C, light wind."),
    ("weather-zh", "{city}明天天气怎么样?", "get_weather", "{city}明天{n}°C,多云。"),
    ("search", "Find recent papers on context windows.", "search_papers", "Found {n} papers; the newest is from May."),
    ("calc", "What is {n} squared?", "calculator", "{n} squared is {sq}."),
    ("files", "List the files in /srv/{city}.", "list_files", "{n} files: notes.md, plan.txt, 日志.log"),
]
_CITIES = ["Paris", "東京", "北京", "Lagos", "Lima"]


def conversation(turns: int = 12, seed: int = 7) -> list[Message]:
    """A system prompt, then ``turns`` user questions, each answered with a tool call, its result
    and a final assistant reply (OpenAI chat format)."""
    rng = random.Random(seed)
    messages: list[Message] = [{"role": "system", "content": "You are a helpful agent. Use tools when useful."}]
    for turn in range(turns):
        _topic, question, tool, answer = rng.choice(_TOPICS)
        n = rng.randint(2, 40)
        facts = {"city": rng.choice(_CITIES), "n": n, "sq": n * n}
        call_id = f"call_{turn}"
        arguments = json.dumps(facts, ensure_ascii=False)
        messages += [
            {"role": "user", "content": question.format(**facts)},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}],
            },
            {"role": "tool", "tool_call_id": call_id, "content": answer.format(**facts)},
            {"role": "assistant", "content": answer.format(**facts) + " 🙂"},
        ]
    return messages


def _line(message: Message, width: int = 60) -> str:
    content = message.get("content")
    if content is None and message.get("tool_calls"):
        calls = ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in message["tool_calls"])
        text = f"-> {calls}"
    else:
        text = str(content)
    text = text if len(text) <= width else text[: width - 1] + "…"
    return f"  {message['role']:<9} {text}"


def _show(title: str, messages: list[Message]) -> None:
    print(f"{title} ({len(messages)})")
    for message in messages:
        print(_line(message))
    print()


def main() -> None:
    arr = MessageArray(conversation(), tool_description="Tools: get_weather, search_papers, calculator, list_files.")
    print(repr(arr), "\n")
    print("counts by role:", {role: arr.count(role) for role in ("system", "user", "assistant", "tool")}, "\n")
    _show("the last 3 user messages", arr.recent(3, role="user"))
    _show("the user messages 2..4", arr.role_range("user", 2, 4))
    print("positions of the tool results:", arr.indices("tool")[:8].tolist(), "...\n")

    before = arr.checkpoint("before trimming")
    arr.mark(int(arr.indices("user")[0]), "first-question")
    result = arr.truncate(keep_last=6)
    print(f"truncate(keep_last=6): batch {result.affected_batch_index}, {result.message_count} visible")
    _show("what the model sees now", arr.messages())

    arr.filter(content_contains=["天气", "°C"])
    _show("filter(content_contains=['天气', '°C'])", arr.messages())

    arr.clear()
    _show("clear(): visible system messages stay, the tool description comes back", arr.messages())

    print("the batches so far:")
    for b in range(arr.batch_index + 1):
        snap = arr.snapshot(b)
        ended = "(current)" if snap.description is None else f"ended by {snap.description}"
        print(f"  batch {snap.batch_index}: {snap.message_count:3} messages, {ended}")
    arr.rollback(before)
    print(f"\nrollback({before}): {len(arr)} visible again; all {len(arr.all_messages())} stored are kept")
    print("marked 'first-question':", [m["content"] for m in arr.marked("first-question")])
    print("stats:", arr.stats())
