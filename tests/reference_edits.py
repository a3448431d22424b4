"""A pure-Python model of the context edits (``docs/context-edits.md``), written to be obviously
right, not fast: ``clear_tool_uses`` and ``clear_thinking`` on a plain list of messages in any of
the three formats. ``test_edits.py`` runs it beside ``MessageArray`` on generated histories. Token
counts come from :func:`memci.tokens.count_message` (tested against tiktoken on its own)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from memci import tokens

Message = dict[str, Any]

CALL_TYPES = ("function_call", "custom_tool_call", "computer_call", "shell_call", "apply_patch_call")
DEFAULT_PLACEHOLDER = (
    "[tool result cleared to save context: the output of {name} (call {id}) is kept outside the window; "
    "call {name} again if you need it]"
)


@dataclass
class Use:
    call: tuple[int, str, int]  # (position, site kind, index)
    id: str
    name: str
    result: tuple[int, str, int] | None = None


def _item_type(m: Message) -> str | None:
    t = m.get("type")
    return t if isinstance(t, str) and t != "message" else None


def _role(m: Message) -> str:
    t = _item_type(m)
    if t is not None and not isinstance(m.get("role"), str):
        return "tool" if t.endswith("_output") else "assistant"
    return str(m["role"])


def _str(d: Any, key: str) -> str | None:
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, str) else None


def tool_uses(messages: list[Message]) -> list[Use]:
    """Every call with an id, in order; a result answers the latest unanswered call with its id."""
    uses: list[Use] = []
    latest: dict[str, int] = {}

    def call(pos: int, kind: str, i: int, call_id: str | None, name: str | None) -> None:
        if call_id:
            latest[call_id] = len(uses)
            uses.append(Use((pos, kind, i), call_id, name or ""))

    for pos, m in enumerate(messages):
        answers: list[tuple[str, int, str]] = []
        t = _item_type(m)
        if t in CALL_TYPES:
            call(pos, "item", 0, _str(m, "call_id"), _str(m, "name"))
        elif t is not None and t.endswith("_output") and t[: -len("_output")] in CALL_TYPES:
            if (cid := _str(m, "call_id")) is not None:
                answers.append(("output", 0, cid))
        elif t is None:
            role = _role(m)
            content = m.get("content")
            if role == "assistant":
                for i, c in enumerate(m.get("tool_calls") or []):
                    fn = c.get("function") if "function" in c else c.get("custom")
                    call(pos, "chat", i, _str(c, "id"), _str(fn, "name"))
                if isinstance(content, list):
                    for i, b in enumerate(content):
                        if isinstance(b, dict) and b.get("type") == "tool_use":
                            call(pos, "use", i, _str(b, "id"), _str(b, "name"))
            elif role == "tool":
                if (cid := _str(m, "tool_call_id")) is not None:
                    answers.append(("tool", 0, cid))
            elif role == "user" and isinstance(content, list):
                for i, b in enumerate(content):
                    if isinstance(b, dict) and b.get("type") == "tool_result" and (cid := _str(b, "tool_use_id")):
                        answers.append(("block", i, cid))
        for kind, i, cid in answers:
            if cid in latest:
                uses[latest.pop(cid)].result = (pos, kind, i)
    return uses


def _empty_input(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() in ("", "{}")) or value == {}


def _output(m: Message, kind: str, i: int) -> Any:
    if kind == "tool":
        return m.get("content")
    if kind == "output":
        return m.get("output")
    return m["content"][i].get("content")


def _set_output(m: Message, kind: str, i: int, text: str) -> None:
    if kind == "tool":
        m["content"] = text
    elif kind == "output":
        m["output"] = text
    else:
        m["content"][i]["content"] = text


def _input_holder(m: Message, kind: str, i: int) -> tuple[dict[str, Any], str, Any]:
    """(the dict holding the input, its key, the empty value)."""
    if kind == "chat":
        c = m["tool_calls"][i]
        if "function" not in c and "custom" in c:
            return c["custom"], "input", ""
        return c["function"], "arguments", "{}"
    if kind == "use":
        return m["content"][i], "input", {}
    if "arguments" not in m and "input" in m:
        return m, "input", ""
    return m, "arguments", "{}"


def cost(m: Message, encoding: str) -> int:
    return tokens.count_message(m, encoding)


def clear_tool_uses(
    messages: list[Message],
    *,
    keep: int = 3,
    clear_at_least: int | None = None,
    exclude_tools: tuple[str, ...] = (),
    clear_tool_inputs: bool = False,
    placeholder: str | None = None,
    encoding: str = tokens.DEFAULT_ENCODING,
) -> tuple[list[Message], int, int]:
    """(the messages after the edit, cleared tool uses, cleared tokens); the trigger is the caller's."""
    template = DEFAULT_PLACEHOLDER if placeholder is None else placeholder
    uses = tool_uses(messages)
    old = uses[: max(len(uses) - keep, 0)]
    wanted: dict[int, list[tuple[int, str]]] = {}  # position -> [(use number, "result" | "input")]
    for k, u in enumerate(old):
        if u.name in exclude_tools:
            continue
        text = template.replace("{name}", u.name).replace("{id}", u.id)
        if u.result is not None and _output(messages[u.result[0]], u.result[1], u.result[2]) != text:
            wanted.setdefault(u.result[0], []).append((k, "result"))
        if clear_tool_inputs:
            holder, key, _ = _input_holder(messages[u.call[0]], u.call[1], u.call[2])
            if not _empty_input(holder.get(key)):
                wanted.setdefault(u.call[0], []).append((k, "input"))
    out = list(messages)
    cleared: set[int] = set()
    saved = 0
    for pos, parts in wanted.items():
        m = copy.deepcopy(messages[pos])
        for k, part in parts:
            u = old[k]
            if part == "result":
                assert u.result is not None
                text = template.replace("{name}", u.name).replace("{id}", u.id)
                _set_output(m, u.result[1], u.result[2], text)
            else:
                holder, key, empty = _input_holder(m, u.call[1], u.call[2])
                holder[key] = empty
        before, after = cost(messages[pos], encoding), cost(m, encoding)
        if after < before:
            out[pos] = m
            saved += before - after
            cleared.update(k for k, _ in parts)
    if saved < (clear_at_least or 0):
        return list(messages), 0, 0
    return out, len(cleared), saved


def _opens_turn(m: Message) -> bool:
    if _item_type(m) is not None or m.get("role") != "user":
        return False
    content = m.get("content")
    if isinstance(content, list):
        return not content or any(not (isinstance(b, dict) and b.get("type") == "tool_result") for b in content)
    return True


def _is_thinking(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking")


def _thought(m: Message) -> str | None:
    if m.get("type") == "reasoning":
        return "item"
    if _role(m) == "assistant" and isinstance(m.get("content"), list) and any(map(_is_thinking, m["content"])):
        return "blocks"
    return None


def clear_thinking(messages: list[Message], keep_turns: int = 1) -> tuple[list[Message], int]:
    """(the messages after the edit, cleared thinking turns)."""
    turn = 0
    found: list[tuple[int, int]] = []
    for pos, m in enumerate(messages):
        if _opens_turn(m):
            turn += 1
        if _thought(m) is not None:
            found.append((pos, turn))
    turns = sorted({t for _, t in found})
    if len(turns) <= keep_turns:
        return list(messages), 0
    first_kept = turns[len(turns) - keep_turns]
    hidden: set[int] = set()
    out = list(messages)
    cleared_turns: set[int] = set()
    for pos, t in found:
        if t >= first_kept:
            continue
        m = messages[pos]
        if _thought(m) == "item":
            hidden.add(pos)
            cleared_turns.add(t)
            continue
        rest = [b for b in m["content"] if not _is_thinking(b)]
        if rest:
            out[pos] = {**m, "content": rest}
            cleared_turns.add(t)
    return [m for pos, m in enumerate(out) if pos not in hidden], len(cleared_turns)
