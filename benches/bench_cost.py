"""What a window costs to send: prefix reuse and the modelled input bill of a 60-round agent.

The agent (``agent_round``, deterministic): a system prompt, one tool of its own, and 60 rounds of a
user request (~60 tokens), a tool call (~40) and its result (~110), and a reply (~90). It sends two
requests a round, each ~150 tokens longer than the one before: after the user message (with the
previous reply) and after the tool result. Every peer is given the same messages and decides what
each request holds; :func:`memci.cost.measure` reads the requests (prefix reuse, cache breaks,
Anthropic's prices: read 0.1x, write 1.25x). Reported over rounds 10-59, as ``extra_info`` of
``test_cost[peer]`` and by ``python benches/bench_cost.py`` as a table:

- ``memci-budget``: ``ContextSystem(system, max_context_tokens=6000)`` as it comes (cache-stable);
- ``memci-stable-pages``: ``ContextSystem(system, cache_stable=True)`` (page counts, n = 5);
- ``memci-seed-pages``: ``ContextSystem(system)``, the seed's per-round page rules;
- ``memci-budget-edits``: ``memci-budget`` with ``context_edits=[ClearToolUses(keep=3)]`` (the
  cleared tool uses move only at the cuts);
- ``memci-stable-pages-edits``: ``memci-stable-pages`` with the same edit;
- ``trim_to_tokens``: ``MessageArray.trim_to_tokens(6000)`` before every request (sliding);
- ``lc-trim``: LangChain's ``trim_messages(max_tokens=6000, strategy="last")`` before every request;
- ``lc-summarization``: LangChain's ``SummarizationMiddleware`` (trigger 6,000 tokens, keep 20
  messages) on a fake model;
- ``lc-context-editing``: LangChain's ``ContextEditingMiddleware`` (``ClearToolUsesEdit``, trigger
  6,000, keep 3);
- ``anthropic-clear``: Anthropic's server-side ``clear_tool_uses_20250919`` simulated from its
  documented rules (trigger 6,000 input tokens, keep 3 tool uses, clear_at_least 0): the client
  sends the whole history and the server clears, per request, every tool result but the last 3.

Budgets count the tool definitions as a request does. Figures and methods: docs/benchmarks.md.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import memci
import pytest
from memci import cost, ops, tokens

ROUNDS = 60
FIRST_MEASURED = 10
BUDGET = 6000
SYSTEM = (
    "You are a careful research agent. Answer the user's questions about the project's code and data. "
    "Use the search tool when you need facts; cite what it returns; say so when it returns nothing. "
) * 4
TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the project's documents; returns the best passages.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
VOCABULARY = (
    "cache window token page budget request agent tool result archive contents prefix model user reply "
    "search query index store round cut water mark bill price read write system message trim summary"
)
WORDS = VOCABULARY.split()

Message = dict[str, Any]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "."


@cache
def agent_rounds() -> tuple[tuple[Message, ...], ...]:
    """Each round's messages: user, tool call, tool result, reply (seeded: the same every run)."""
    rng = random.Random(24)
    rounds = []
    for r in range(ROUNDS):
        call_id = f"call_{r}"
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": "search", "arguments": json.dumps({"query": _text(rng, 6)})},
        }
        rounds.append(
            (
                {"role": "user", "content": f"Question {r}: {_text(rng, 55)}"},
                {"role": "assistant", "content": _text(rng, 12), "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call_id, "content": _text(rng, 105)},
                {"role": "assistant", "content": _text(rng, 85)},
            )
        )
    return tuple(rounds)


def _steps() -> Iterator[tuple[list[Message], bool]]:
    """The messages added before each request, and whether a round ends first."""
    rounds = agent_rounds()
    for r, (user, call, result, _) in enumerate(rounds):
        yield ([user] if r == 0 else [rounds[r - 1][3], user]), r > 0  # the previous reply, then the question
        yield [call, result], False


#: A peer: a function from (messages added, round ended) to the request sent, and its tool tokens.
Peer = tuple[Callable[[list[Message], bool], list[Message]], int]
TOOL_TOKENS = tokens.count(json.dumps([TOOL]))


def _context_system(**options: Any) -> Peer:
    ctx = memci.ContextSystem(SYSTEM, agent_tools=[TOOL], **options)

    def send(added: list[Message], ended: bool) -> list[Message]:
        if ended:
            ctx.end_round()
        ctx.extend(added)
        return list(ctx.build_messages())

    return send, ctx.tool_tokens()


def _trim_to_tokens() -> Peer:
    arr = memci.MessageArray([{"role": "system", "content": SYSTEM}])

    def send(added: list[Message], _: bool) -> list[Message]:
        arr.append(added)
        arr.trim_to_tokens(BUDGET - TOOL_TOKENS)
        return arr.messages()

    return send, TOOL_TOKENS


def _history() -> Callable[[list[Message]], list[Message]]:
    history: list[Message] = [{"role": "system", "content": SYSTEM}]

    def grow(added: list[Message]) -> list[Message]:
        history.extend(added)
        return history

    return grow


def _lc_counter() -> Callable[[Any], int]:
    from memci.formats import from_langchain

    return lambda messages: tokens.count_messages(from_langchain(list(messages)))


def _lc_trim() -> Peer:
    from langchain_core.messages import trim_messages
    from memci.formats import from_langchain, to_langchain

    grow, counter = _history(), _lc_counter()

    def send(added: list[Message], _: bool) -> list[Message]:
        kept = trim_messages(
            to_langchain(grow(added)),
            max_tokens=BUDGET - TOOL_TOKENS,
            strategy="last",
            token_counter=counter,
            include_system=True,
            start_on="human",
        )
        return list(from_langchain(kept))

    return send, TOOL_TOKENS


def _lc_state_peer(middleware: Any, hook: str) -> Peer:
    """A LangChain middleware driven as an agent drives it: ``before_model`` updates the state
    (the summarizer replaces messages); ``wrap_model_call`` edits the request only."""
    from langchain.agents.middleware import ModelRequest
    from langchain_core.messages import RemoveMessage
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from memci.formats import from_langchain, to_langchain

    state: list[Any] = to_langchain([{"role": "system", "content": SYSTEM}])

    def send(added: list[Message], _: bool) -> list[Message]:
        state.extend(to_langchain(added))
        if hook == "before_model":
            update = middleware.before_model({"messages": list(state)}, None)
            if update:
                kept = update["messages"]
                assert isinstance(kept[0], RemoveMessage)
                assert kept[0].id == REMOVE_ALL_MESSAGES
                state[:] = kept[1:]
            return list(from_langchain(state))
        sent: list[Any] = []

        def handler(request: Any) -> Any:
            sent.extend(request.messages)
            return None

        request = ModelRequest(
            model=_fake_model(),
            messages=list(state[1:]),
            system_prompt=SYSTEM,
            tools=[],
            state={"messages": state},
            runtime=None,
        )  # type: ignore[arg-type]
        middleware.wrap_model_call(request, handler)
        return [{"role": "system", "content": SYSTEM}, *from_langchain(sent)]

    return send, TOOL_TOKENS


@cache
def _fake_model() -> Any:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    return FakeListChatModel(
        responses=["A summary of the conversation so far: questions on the cache and the window."] * 1000
    )


def _lc_summarization() -> Peer:
    from langchain.agents.middleware import SummarizationMiddleware

    middleware = SummarizationMiddleware(
        model=_fake_model(),
        trigger=("tokens", BUDGET - TOOL_TOKENS),
        keep=("messages", 20),
        token_counter=_lc_counter(),
    )
    return _lc_state_peer(middleware, "before_model")


def _lc_context_editing() -> Peer:
    from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware

    middleware = ContextEditingMiddleware(
        edits=[ClearToolUsesEdit(trigger=BUDGET - TOOL_TOKENS, keep=3)], token_counter=_lc_counter()
    )
    return _lc_state_peer(middleware, "wrap_model_call")


def anthropic_clear_tool_uses(
    history: list[Message], trigger: int, keep: int = 3, clear_at_least: int = 0, placeholder: str = "[cleared]"
) -> list[Message]:
    """Anthropic's ``clear_tool_uses_20250919`` as its documentation states it, applied by the
    server to each request's whole history: when the input is over ``trigger`` tokens, the results
    of every tool use but the last ``keep`` are cleared (oldest first), if that clears at least
    ``clear_at_least`` tokens; the tool calls stay (``clear_tool_inputs`` false)."""
    total = tokens.count_messages(history) + TOOL_TOKENS
    if total <= trigger:
        return history
    results = [i for i, m in enumerate(history) if m["role"] == "tool"]
    clear = set(results[: max(0, len(results) - keep)])
    cleared = sum(
        tokens.count_message(history[i]) - tokens.count_message({**history[i], "content": placeholder}) for i in clear
    )
    if cleared < clear_at_least:
        return history
    return [{**m, "content": placeholder} if i in clear else m for i, m in enumerate(history)]


def _anthropic_clear() -> Peer:
    grow = _history()

    def send(added: list[Message], _: bool) -> list[Message]:
        return anthropic_clear_tool_uses(list(grow(added)), BUDGET)

    return send, TOOL_TOKENS


PEERS: dict[str, Callable[[], Peer]] = {
    "memci-budget": lambda: _context_system(max_context_tokens=BUDGET),
    "memci-stable-pages": lambda: _context_system(cache_stable=True),
    "memci-seed-pages": _context_system,
    "memci-budget-edits": lambda: _context_system(max_context_tokens=BUDGET, context_edits=[ops.ClearToolUses(keep=3)]),
    "memci-stable-pages-edits": lambda: _context_system(cache_stable=True, context_edits=[ops.ClearToolUses(keep=3)]),
    "trim_to_tokens": _trim_to_tokens,
    "lc-trim": _lc_trim,
    "lc-summarization": _lc_summarization,
    "lc-context-editing": _lc_context_editing,
    "anthropic-clear": _anthropic_clear,
}
LANGCHAIN = ("lc-trim", "lc-summarization", "lc-context-editing")


def run(peer: str) -> tuple[cost.CostReport, int]:
    """The peer's requests over the 60 rounds, measured over rounds 10-59, and the most tokens
    any request held (tool definitions included)."""
    send, tool_tokens = PEERS[peer]()
    requests = [send(added, ended) for added, ended in _steps()]
    report = cost.measure(requests, tool_tokens=tool_tokens)
    return report.between(2 * FIRST_MEASURED, 2 * ROUNDS), max(r.tokens for r in report.requests)


@pytest.mark.parametrize("peer", list(PEERS))
def test_cost(benchmark: Any, peer: str) -> None:
    if peer in LANGCHAIN:
        pytest.importorskip("langchain")
    benchmark.group = "cost-60-rounds"
    report, most = benchmark.pedantic(run, args=(peer,), rounds=1, iterations=1)
    benchmark.extra_info.update(
        workload="cost",
        peer=peer,
        reuse=round(report.reuse, 3),
        bill=round(report.bill_ratio, 3),
        breaks=report.breaks,
        max_tokens=most,
    )
    assert 0 <= report.reuse <= 1
    if peer.startswith("memci-budget"):
        assert most <= BUDGET


def table() -> str:
    """The figures of every peer in one run, as a Markdown table."""
    lines = [
        "| window | prefix reuse | bill (x uncached) | cache breaks / 50 rounds | largest request |",
        "| --- | --- | --- | --- | --- |",
    ]
    for peer in PEERS:
        report, most = run(peer)
        lines.append(f"| {peer} | {report.reuse:.2f} | {report.bill_ratio:.2f}x | {report.breaks} | {most} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
