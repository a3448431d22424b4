"""A seeded generator of agent conversations for the benches: a system prompt, user turns,
assistant replies (some with tool calls), tool results; 20-2000 characters, some CJK."""

from __future__ import annotations

import json
import random
from typing import Any

WORDS = [
    *["the", "agent", "reads", "files", "runs", "tests", "and", "reports"],
    *["what", "it", "found", "in", "the", "repository", "today"],
]
CJK = "上下文窗口管理消息数组批次快照回滚工具调用结果"
KEYWORDS = ["secret", "error", "deprecated"]


def _text(rng: random.Random, lo: int = 20, hi: int = 2000) -> str:
    n = min(hi, max(lo, int(rng.expovariate(1 / 420))))
    if rng.random() < 0.1:
        return "".join(rng.choice(CJK) for _ in range(n // 3 + 1))
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(KEYWORDS) if rng.random() < 0.01 else rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def conversation(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent. " + _text(rng, 200, 400)}
    ]
    call = 0
    while len(out) < n:
        out.append({"role": "user", "content": _text(rng)})
        for _ in range(rng.choice([0, 0, 1, 2])):
            calls = []
            for _ in range(rng.choice([1, 1, 2, 3])):
                calls.append(
                    {
                        "id": f"call_{call}",
                        "type": "function",
                        "function": {"name": "run", "arguments": json.dumps({"cmd": _text(rng, 20, 80)})},
                    }
                )
                call += 1
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            out.extend({"role": "tool", "tool_call_id": c["id"], "content": _text(rng)} for c in calls)
        out.append({"role": "assistant", "content": _text(rng)})
    return out[:n]
