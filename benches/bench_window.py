"""``ContextSystem.build_messages`` under ``max_context_tokens`` against the same call without one.

A budget makes ``build_messages`` plan what to archive: it needs the window's tokens with any
number of its oldest pages left out. The window keeps each message's count (counted once, when
first needed), so that plan is additions over held counts. Peers, one ``ContextSystem`` holding the
same window of n messages (``generator.interactions``, every page active):

- ``no-budget``: ``build_messages()`` with no ``max_context_tokens``: the floor.
- ``budget``: with ``max_context_tokens`` far above the window: planned, nothing archived. The
  target is at most 1.2x ``no-budget``.
- ``recount``: what planning cost before the window kept its counts: ``build_messages()`` and a
  fresh ``memci.tokens.count_messages`` of what it built (the old plan counted the assembled
  window again on every call).
- ``budget-archive``: with ``max_context_tokens`` one token under the window and its tool
  definitions, with the seed's exact fit (``cache_stable=False``; a cache-stable cut archives
  down to its low-water mark in one step, ``bench_cost.py``): each call archives the oldest pages
  that make it fit (one or two: the page's contents entry costs tokens too; summary, contents
  entry, search index, O(1) unlink) and builds the rest. Setup (untimed) makes a fresh system for
  each call, its counts taken.

The sanitizer runs in every case, as ``build_messages`` runs it by default. Each system has built
its messages once before it is timed: an agent builds every turn, so the window's counts are held
(each message is counted once, on the first build after it is added).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import generator
import harness
import memci
import pytest

PEERS = ("no-budget", "budget", "recount", "budget-archive")
CASES = harness.cases(PEERS, sizes=("1k", "10k"))

Message = dict[str, Any]


@cache
def _messages(size: str) -> tuple[Message, ...]:
    """The interactions of a conversation of about ``n`` messages, whole pages only."""
    return tuple(m for page in generator.interactions(generator.SIZES[size] + 50) for m in page)[
        : generator.SIZES[size]
    ]


def _system(size: str, max_context_tokens: int | None = None, cache_stable: bool | None = None) -> memci.ContextSystem:
    ctx = memci.ContextSystem(
        "You are a careful coding agent.",
        active_pages=10**6,
        max_context_tokens=max_context_tokens,
        cache_stable=cache_stable,
    )
    ctx.extend(_messages(size))
    return ctx


def _warm(ctx: memci.ContextSystem) -> memci.ContextSystem:
    """``ctx`` after one ``token_count``: its messages counted, as after an agent's last turn."""
    ctx.token_count()
    return ctx


@cache
def _window_tokens(size: str) -> int:
    """The window's tokens with its tool definitions: the budget it needs."""
    ctx = _system(size)
    return ctx.token_count() + ctx.tool_tokens()


@pytest.mark.parametrize(("peer", "size"), CASES)
def test_window_budget(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "window_budget", peer, size)
    tokens = _window_tokens(size)
    if peer == "budget-archive":
        pages = len(_system(size).pages)
        sent = harness.measure(
            benchmark,
            lambda ctx: (ctx.build_messages(), ctx),
            lambda: ((_warm(_system(size, tokens - 1, cache_stable=False)),), {}),
        )
        _, ctx = sent
        assert 1 <= pages - len(ctx.pages) <= 2, "the oldest page (and at most one more) archived"
        benchmark.extra_info["archived_pages"] = pages - len(ctx.pages)
        assert ctx.token_count() + ctx.tool_tokens() <= tokens - 1
        return
    ctx = _system(size, None if peer == "no-budget" else 10**9)
    ctx.build_messages()
    expected = _system(size).build_messages()
    if peer == "recount":

        def build_and_recount() -> list[Message]:
            messages = ctx.build_messages()
            memci.tokens.count_messages(messages)
            return list(messages)

        sent = harness.measure(benchmark, build_and_recount)
    else:
        sent = harness.measure(benchmark, ctx.build_messages)
    assert sent == expected
    assert ctx.token_count() + ctx.tool_tokens() == tokens
