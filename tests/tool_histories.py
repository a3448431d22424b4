"""Tool-call histories in the three formats (OpenAI chat, Anthropic, OpenAI Responses items), for the
sanitizer and format tests: builders, hypothesis strategies that make histories and damage them, and a
small pure-Python reference of the pair rules (docs/sanitizer.md) that the Rust scan is checked
against."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

Message = dict[str, Any]


# ---- builders: one logical history, rendered in either format -------------------------------------


@dataclass(frozen=True)
class Format:
    """Builds messages in one format. ``results(*ids)`` answers calls: OpenAI, one tool message per
    id; Anthropic, one user message of ``tool_result`` blocks; Responses, one ``function_call_output``
    item per id. ``turn(*ids)`` makes the calls: one assistant message, or (Responses) a reasoning
    item, the text and one ``function_call`` item per id."""

    name: str

    def system(self, text: str = "You are terse.") -> Message:
        return {"role": "system", "content": text}

    def user(self, text: str = "hello") -> Message:
        return {"role": "user", "content": text}

    def reply(self, text: str = "done") -> Message:
        return {"role": "assistant", "content": text}

    def turn(self, *ids: str, text: str | None = None, reasoning: bool = False) -> list[Message]:
        if self.name != "responses":
            return [self.calls(*ids, text=text)]
        out: list[Message] = []
        if reasoning:
            out.append({"type": "reasoning", "id": f"rs_{ids[0] if ids else ''}", "summary": []})
        if text:
            out.append({"role": "assistant", "content": text})
        out += [
            {"type": "function_call", "call_id": i, "name": "search", "arguments": json.dumps({"q": i})} for i in ids
        ]
        return out

    def calls(self, *ids: str, text: str | None = None) -> Message:
        if self.name == "openai":
            return {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": "search", "arguments": json.dumps({"q": i})}}
                    for i in ids
                ],
            }
        blocks: list[Message] = [{"type": "text", "text": text}] if text else []
        blocks += [{"type": "tool_use", "id": i, "name": "search", "input": {"q": i}} for i in ids]
        return {"role": "assistant", "content": blocks}

    def results(self, *ids: str) -> list[Message]:
        if self.name == "responses":
            return [{"type": "function_call_output", "call_id": i, "output": f"result of {i}"} for i in ids]
        if self.name == "openai":
            return [{"role": "tool", "tool_call_id": i, "content": f"result of {i}"} for i in ids]
        return [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": i, "content": f"result of {i}"} for i in ids],
            }
        ]


OPENAI = Format("openai")
ANTHROPIC = Format("anthropic")
RESPONSES = Format("responses")
#: The two message formats (calls in one message).
FORMATS = (OPENAI, ANTHROPIC)
ALL_FORMATS = (OPENAI, ANTHROPIC, RESPONSES)


# ---- the reference: the pair rules, written for clarity ---------------------------------------------


def _id(value: Any) -> str | None:
    return value if type(value) is str and value else None


def _is(block: Any, kind: str) -> bool:
    return type(block) is dict and block.get("type") == kind


def _blocks(content: Any, kind: str, key: str) -> list[str | None]:
    if type(content) is not list:
        return []
    return [_id(b.get(key)) for b in content if _is(b, kind)]


def _late(content: Any) -> bool:
    """Whether a tool_result block comes after a block of another type."""
    kinds = [_is(b, "tool_result") for b in content] if type(content) is list else []
    return any(kinds[k] and not all(kinds[:k]) for k in range(len(kinds)))


#: The Responses API item types that call a tool the caller runs.
CALL_TYPES = ("function_call", "custom_tool_call", "computer_call", "shell_call", "apply_patch_call")


def item_type(message: Message) -> str | None:
    """The type of a Responses API item other than a message, else None."""
    kind = message.get("type")
    return kind if type(kind) is str and kind != "message" else None


def role_of(message: Message) -> str:
    """The role a message is reported and indexed under (an item without one: ``tool`` for an
    output, ``assistant`` for anything else)."""
    kind = item_type(message)
    if kind is not None and type(message.get("role")) is not str:
        return "tool" if kind.endswith("_output") else "assistant"
    return str(message["role"])


def facts(message: Message) -> tuple[str, list[str | None]]:
    """(kind, ids): ``calls`` (an assistant message's call ids), ``tool`` (a tool message's id),
    ``blocks`` (a user message's tool_result ids; ``late`` when one follows another block),
    ``item_call`` / ``item_output`` (a Responses item's call_id), ``reasoning`` or ``other``."""
    kind = item_type(message)
    if kind is not None:
        call_id = message.get("call_id")
        if kind in CALL_TYPES:
            return "item_call", [_id(call_id)]
        if kind.removesuffix("_output") in CALL_TYPES and kind.endswith("_output") and call_id is not None:
            return "item_output", [_id(call_id)]
        return ("reasoning" if kind == "reasoning" else "other"), []
    role = message["role"]
    if role == "assistant":
        calls = message.get("tool_calls")
        ids: list[str | None] = []
        if type(calls) is list:
            ids = [_id(c.get("id")) if type(c) is dict else None for c in calls]
        elif calls is not None:
            ids = [None]
        ids += _blocks(message.get("content"), "tool_use", "id")
        return ("calls", ids) if ids else ("other", [])
    if role == "tool":
        return "tool", [_id(message.get("tool_call_id"))]
    if role == "user":
        ids = _blocks(message.get("content"), "tool_result", "tool_use_id")
        kind = "late" if _late(message.get("content")) else "blocks"
        return (kind, ids) if ids else ("other", [])
    return "other", []


def reference_removals(messages: list[Message]) -> list[tuple[int, str]]:
    """(index, reason code) of each message to remove, in order."""
    kinds = [facts(m) for m in messages]
    out: dict[int, str] = {}
    _reference_items(kinds, out)
    i = 0
    while i < len(messages):
        kind, ids = kinds[i]
        if kind == "calls":
            i = _reference_group(kinds, i, out)
            continue
        if kind == "tool":
            out[i] = "orphan" if ids[0] else "no_id"
        elif kind in ("blocks", "late"):
            out[i] = "orphan" if all(ids) else "no_id"
        i += 1
    return sorted(out.items())


def _reference_group(kinds: list[tuple[str, list[str | None]]], i: int, out: dict[int, str]) -> int:
    """Judge the group of the assistant message at ``i`` into ``out``; return where the next starts."""
    calls = kinds[i][1]
    run = []
    j = i + 1
    while j < len(kinds) and kinds[j][0] == "tool":
        run.append(j)
        j += 1
    block_message = None
    if not run and j < len(kinds) and kinds[j][0] in ("blocks", "late"):
        block_message = j
        j += 1
    answered: dict[str, int] = {}
    for t in run:
        rid = kinds[t][1][0]
        if rid is None:
            out[t] = "no_id"
        elif rid not in calls:
            out[t] = "orphan"
        elif rid in answered:
            out[t] = "duplicate"
        else:
            answered[rid] = t
    if block_message is not None:
        seen: set[str] = set()
        problem = None
        for rid in kinds[block_message][1]:
            code = "no_id" if rid is None else "orphan" if rid not in calls else "duplicate" if rid in seen else None
            problem = problem or code
            if rid is not None:
                seen.add(rid)
        if kinds[block_message][0] == "late":
            problem = problem or "results_not_first"
        if problem:
            out[block_message] = problem
        else:
            answered = dict.fromkeys(seen, block_message)
    if None in calls:
        assistant = "call_without_id"
    elif len(set(calls)) < len(calls):
        assistant = "repeated_call_id"
    elif block_message in out:
        assistant = "results_removed"
    elif set(calls) - answered.keys():
        assistant = "unanswered"
    else:
        return j
    out[i] = assistant
    for t in set(answered.values()):
        out.setdefault(t, "incomplete")
    return j


def _reference_items(kinds: list[tuple[str, list[str | None]]], out: dict[int, str]) -> None:
    """The Responses item rules: an output answers the latest call with its call_id before it."""
    answered: dict[int, int] = {}  # call index -> its first output
    for j, (kind, ids) in enumerate(kinds):
        if kind != "item_output":
            continue
        if ids[0] is None:
            out[j] = "output_without_id"
            continue
        calls = [c for c in range(j) if kinds[c] == ("item_call", ids)]
        if not calls:
            out[j] = "orphan_output"
        elif calls[-1] in answered:
            out[j] = "duplicate_output"
        else:
            answered[calls[-1]] = j
    for c, (kind, ids) in enumerate(kinds):
        if kind == "item_call" and c not in answered:
            out[c] = "call_item_without_id" if ids[0] is None else "unanswered_call"
    run: list[int] = []
    for k, (kind, _) in enumerate([*kinds, ("other", [])]):
        if kind in ("reasoning", "item_call"):
            run.append(k)
            continue
        calls = [c for c in run if kinds[c][0] == "item_call"]
        if calls and all(c in out for c in calls):
            out.update((r, "reasoning_of_removed") for r in run if kinds[r][0] == "reasoning")
        run = []


# ---- strategies ------------------------------------------------------------------------------------

#: A small pool, so ids are reused across turns (as real transcripts do).
IDS = ("call_a", "call_b", "call_c", "call_d")


@st.composite
def histories(draw: st.DrawFn, fmt: Format) -> list[Message]:
    """A valid history: a system prompt, then user messages, replies and complete call groups
    (1-3 parallel calls, answered in any order)."""
    out = [fmt.system()]
    for step in draw(st.lists(st.sampled_from(["user", "reply", "group", "group"]), max_size=10)):
        if step == "user":
            out.append(fmt.user(draw(st.sampled_from(["hi", "more", "why?"]))))
        elif step == "reply":
            out.append(fmt.reply())
        else:
            ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True))
            text = draw(st.sampled_from([None, "Let me look."]))
            out.extend(fmt.turn(*ids, text=text, reasoning=draw(st.booleans())))
            out.extend(fmt.results(*draw(st.permutations(ids))))
    return out


def _rename(message: Message, new_id: str) -> Message:
    """The message with its first id replaced (``""``: no id); other messages unchanged."""
    m = json.loads(json.dumps(message))
    if facts(m)[0] in ("item_call", "item_output"):
        m["call_id"] = new_id
    elif item_type(m) is not None:
        pass
    elif m["role"] == "tool":
        m["tool_call_id"] = new_id
    elif m.get("tool_calls"):
        m["tool_calls"][0]["id"] = new_id
    elif type(m.get("content")) is list:
        for block in m["content"]:
            if block.get("type") in ("tool_use", "tool_result"):
                block["id" if block["type"] == "tool_use" else "tool_use_id"] = new_id
                break
    return m


@st.composite
def damaged(draw: st.DrawFn, fmt: Format) -> list[Message]:
    """A valid history, then random damage: messages deleted, copied elsewhere, swapped, their
    first id changed or emptied, or a text block put first in a message of blocks. Every message
    stays storable in a ``MessageArray``."""
    out = draw(histories(fmt))
    for _ in range(draw(st.integers(0, 4))):
        if not out:
            break
        i = draw(st.integers(0, len(out) - 1))
        action = draw(st.sampled_from(["delete", "copy", "swap", "rename", "text_first"]))
        if action == "delete":
            del out[i]
        elif action == "copy":
            out.insert(draw(st.integers(0, len(out))), out[i])
        elif action == "swap" and i + 1 < len(out):
            out[i], out[i + 1] = out[i + 1], out[i]
        elif action == "rename":
            out[i] = _rename(out[i], draw(st.sampled_from((*IDS, "call_z", ""))))
        elif action == "text_first" and type(out[i].get("content")) is list:
            out[i] = {**out[i], "content": [{"type": "text", "text": "note"}, *out[i]["content"]]}
    return out


formats = st.sampled_from(ALL_FORMATS)
