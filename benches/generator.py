"""Seeded agent conversations for the benches.

``conversation(n, seed)`` returns ``n`` OpenAI chat-format dicts shaped like a coding agent's
history: one system prompt, then turns of a user message, zero to three tool rounds (an assistant
message with 1-3 ``tool_calls`` followed by one ``tool`` result per call) and an assistant reply.
Text lengths run from 20 to 2000 characters, skewed to the short end (about 470 characters of text
per message on average, tool-call arguments included); about 10% of the texts are CJK; a few
keywords (:data:`KEYWORDS`) are sprinkled in so that FILTER has something to find. The same
``(n, seed)`` always gives the same messages, and ``conversation(n)`` is a prefix of
``conversation(m)`` for ``n <= m``.

Texts are slices of a seeded word corpus (one ``random.choices`` call), so generating 100k messages
takes well under a second; every message still owns its own string objects.
"""

from __future__ import annotations

import json
import os
import random
from functools import lru_cache
from typing import Any

Message = dict[str, Any]

#: Sizes the benches run at, with their labels.
SIZES = {"1k": 1_000, "10k": 10_000, "100k": 100_000}


def _selected_sizes() -> frozenset[str]:
    """The labels of the sizes ``MEMCI_BENCH_SIZES`` names (message counts, comma-separated, e.g.
    ``1000,10000``); every size when it is unset."""
    raw = os.environ.get("MEMCI_BENCH_SIZES", "").strip()
    if not raw:
        return frozenset(SIZES)
    by_count = {n: label for label, n in SIZES.items()}
    try:
        counts = {int(part) for part in raw.split(",") if part.strip()}
    except ValueError:
        raise SystemExit(f"MEMCI_BENCH_SIZES must be counts like 1000,10000; got {raw!r}") from None
    unknown = sorted(counts - by_count.keys())
    if unknown:
        raise SystemExit(f"MEMCI_BENCH_SIZES: no bench size {unknown}; the sizes are {sorted(by_count)}")
    return frozenset(by_count[n] for n in counts)


#: The sizes this run measures (``harness.cases`` leaves the others out).
SELECTED = _selected_sizes()

#: Each is inserted into about 3% of the texts and appears nowhere else.
KEYWORDS = ("deprecated", "FIXME", "password")

MIN_CHARS = 20
MAX_CHARS = 2000
#: Mean of the exponential the lengths are drawn from, before clipping to [MIN_CHARS, MAX_CHARS].
MEAN_CHARS = 650
CJK_SHARE = 0.13
KEYWORD_SHARE = 0.03

_WORDS_TEXT = (
    "the agent reads file files runs test tests and reports what it found in repository module function "
    "class returns value error handler request response cache index query build step check result output "
    "input config parse fails passes because when then after before while with without from into over "
    "under line column path branch commit diff patch merge review user message context window token tool "
    "call argument schema json string number list map set type async await lock thread process memory "
    "rust python crate package import export version release install update remove rename move copy"
)
_WORDS = _WORDS_TEXT.split()
_CJK = (
    "上下文窗口管理消息数组批次快照回滚工具调用结果的是在了不和有大这主中人上为们地个用工时要动国产以我到他会作来分生对于学下级就年阶义发成部民可出能"
    "方进同行面说种过命度革而多子后自社加小机也经力线本电高量长党得实家定深法表着水理化争现所二起政三好十战无农使性前等反体合斗路图把结第里正新开论之物从"
    "当两些还天资事队批如应形想制心样干都向变关点育重其思与间内去因件日利相由压员气业代全组数果期导平各基或月毛然问比展那它最及外没看治提五解系林者米群头"
)
_SYSTEM = "You are a careful coding agent working in a git repository. Use the tools; never guess."
_TOOLS = ("read_file", "run_tests", "search_code", "write_file", "list_dir", "git_diff")
_ARG_KEYS = {
    "read_file": "path",
    "run_tests": "selector",
    "search_code": "query",
    "write_file": "path",
    "list_dir": "path",
    "git_diff": "ref",
}
_PREAMBLES = ("Let me check.", "Looking at the tests first.", "I will search the code.", "")


class _Texts:
    """Texts of a chosen length cut from seeded corpora, with keywords spliced in."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.latin = " ".join(rng.choices(_WORDS, k=120_000))
        self.cjk = "".join(rng.choices(_CJK, k=60_000))

    def length(self, mean: int = MEAN_CHARS, lo: int = MIN_CHARS, hi: int = MAX_CHARS) -> int:
        return min(hi, max(lo, int(self.rng.expovariate(1 / mean))))

    def text(self, n: int | None = None) -> str:
        rng = self.rng
        n = self.length() if n is None else n
        if rng.random() < CJK_SHARE:
            corpus = self.cjk
            start = rng.randrange(len(corpus) - n)
            # A CJK character is 3 UTF-8 bytes: a third as many characters carry as many bytes.
            out = corpus[start : start + max(MIN_CHARS, n // 3)]
        else:
            corpus = self.latin
            start = corpus.find(" ", rng.randrange(len(corpus) - n - 20)) + 1
            out = corpus[start : start + n].rstrip()
        if rng.random() < KEYWORD_SHARE * len(KEYWORDS):
            at = rng.randrange(len(out) + 1)
            out = f"{out[:at]} {rng.choice(KEYWORDS)} {out[at:]}"
        return out


def _tool_call(texts: _Texts, call_id: int) -> Message:
    name = texts.rng.choice(_TOOLS)
    arguments = {_ARG_KEYS[name]: texts.text(texts.length(60, 20, 200))}
    return {
        "id": f"call_{call_id:06d}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def _generate(n: int, seed: int) -> list[Message]:
    rng = random.Random(seed)
    texts = _Texts(rng)
    out: list[Message] = [{"role": "system", "content": f"{_SYSTEM} {texts.text(texts.length(600, 200, 1200))}"}]
    call_id = 0
    while len(out) < n:
        out.append({"role": "user", "content": texts.text()})
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
            calls = []
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                calls.append(_tool_call(texts, call_id))
                call_id += 1
            preamble = rng.choice(_PREAMBLES)
            out.append({"role": "assistant", "content": preamble or None, "tool_calls": calls})
            out.extend({"role": "tool", "tool_call_id": c["id"], "content": texts.text()} for c in calls)
        out.append({"role": "assistant", "content": texts.text()})
    return out[:n]


@lru_cache(maxsize=8)
def _cached(n: int, seed: int) -> tuple[Message, ...]:
    return tuple(_generate(n, seed))


def conversation(n: int, seed: int = 7) -> list[Message]:
    """``n`` messages, the same for the same ``(n, seed)``. Cached: do not mutate the dicts
    (every store under test copies them, which is the point)."""
    return list(_cached(n, seed))


#: The share of tool-call groups :func:`broken_conversation` damages.
BROKEN_SHARE = 0.01


@lru_cache(maxsize=8)
def _broken(n: int, seed: int, share: float) -> tuple[Message, ...]:
    rng = random.Random(seed * 7919 + n)
    messages = list(_cached(n, seed))
    groups = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    chosen = sorted(rng.sample(groups, max(1, round(share * len(groups)))), reverse=True)
    for k, i in enumerate(chosen):
        calls = messages[i]["tool_calls"]
        results = range(i + 1, i + 1 + len(calls))
        damage = k % 4
        if damage == 0:  # the last result lost: a partly answered group
            del messages[results[-1]]
        elif damage == 1:  # every result lost: an unanswered call (a cut in the middle of a turn)
            del messages[results.start : results.stop]
        elif damage == 2:  # a result sent twice
            messages.insert(results.stop, dict(messages[results.start]))
        else:  # a result whose call was cut away: an orphan
            messages.insert(results.stop, {"role": "tool", "tool_call_id": f"lost_{k}", "content": "stale result"})
    return tuple(messages)


def broken_conversation(n: int, seed: int = 7, share: float = BROKEN_SHARE) -> list[Message]:
    """:func:`conversation` with ``share`` of its tool-call groups damaged, in turn: the last result
    lost, every result lost, a result sent twice, an orphan result added (so its length is about
    ``n``). Cached like :func:`conversation`: do not mutate the dicts."""
    return list(_broken(n, seed, share))


def fresh(n: int, seed: int = 7) -> list[Message]:
    """Like :func:`conversation`, but newly generated: no object is shared with any other call."""
    return _generate(n, seed)


def describe(messages: list[Message]) -> dict[str, float]:
    """Counts and sizes, to check the generator does what its docstring says."""
    n = len(messages)
    chars = [
        len(m["content"] or "") + sum(len(c["function"]["arguments"]) for c in m.get("tool_calls") or ())
        for m in messages
    ]
    roles: dict[str, int] = {}
    for m in messages:
        roles[m["role"]] = roles.get(m["role"], 0) + 1
    cjk = sum(1 for m in messages if m["content"] and "\u4e00" <= m["content"][0] <= "\u9fff")
    keyword = {k: sum(1 for m in messages if k in (m["content"] or "")) / n for k in KEYWORDS}
    return {
        "n": n,
        "mean_chars": sum(chars) / n,
        "mean_utf8_bytes": sum(len((m["content"] or "").encode()) for m in messages) / n,
        "cjk_share": cjk / n,
        **{f"share_{r}": c / n for r, c in sorted(roles.items())},
        **{f"keyword_{k}": v for k, v in keyword.items()},
    }


if __name__ == "__main__":
    import time

    t = time.perf_counter()
    msgs = fresh(100_000)
    print(f"generated 100k in {time.perf_counter() - t:.2f}s")
    for key, value in describe(msgs).items():
        print(f"{key:>24} {value:.3f}")


@lru_cache(maxsize=4)
def interactions(n: int) -> tuple[tuple[Message, ...], ...]:
    """``conversation(n)`` without its system prompt, cut into user interactions (a user message
    and what follows it, the context system's pages); the last one, which may be cut short, is
    left out."""
    out: list[list[Message]] = []
    for m in conversation(n)[1:]:
        if m["role"] == "user" or not out:
            out.append([])
        out[-1].append(m)
    return tuple(tuple(i) for i in out[:-1])
