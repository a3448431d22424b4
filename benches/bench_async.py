"""``AsyncContextSystem`` against ``ContextSystem``: what driving the context system from an event
loop costs (docs/context-system.md, "Async").

One workload, ``async_round``: a round of agent conversation on a system that has archived 1k pages
(the user message, which archives the oldest page; the assistant's tool calls and their results;
the answer; ``end_round``; ``build_messages``; ``save``), on SQLite with ``synchronous="NORMAL"``:

- ``memci``: ``ContextSystem`` on ``SqliteStorage``, called directly;
- ``memci-async``: ``AsyncContextSystem`` on ``AsyncSqliteStorage`` (``aiosqlite``), every call
  awaited: each runs in a worker thread, and the store's I/O is awaited back on the loop.

Both start from the same file (built once by the sync system, then loaded by each), so they do the
same work; the ratio is the price of the worker threads and the hops to and from the loop.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import generator
import harness
import memci
import pytest
from bench_context import ACTIVE_PAGES, PAGES, interactions

PEERS = ("memci", "memci-async")
CASES = harness.cases(PEERS, sizes=("1k",))

Message = dict[str, Any]


@cache
def _built(size: str) -> Path:
    """A SQLite file holding a conversation that has archived ``PAGES[size]`` pages."""
    path = harness.temp_dir("memci-bench-") / "built.db"
    with memci.SqliteStorage(path, synchronous="NORMAL") as store:
        ctx = memci.ContextSystem(generator.conversation(1)[0]["content"], active_pages=ACTIVE_PAGES, storage=store)
        for interaction in interactions()[: PAGES[size] + ACTIVE_PAGES]:
            ctx.extend(list(interaction))
            ctx.end_round()
        ctx.save()
    return path


def _copy(size: str, name: str) -> Path:
    target = _built(size).with_name(f"{name}.db")
    shutil.copyfile(_built(size), target)
    return target


class _Sync:
    def __init__(self, size: str) -> None:
        self.store = memci.SqliteStorage(_copy(size, "sync"), synchronous="NORMAL")
        self.ctx = memci.ContextSystem.load(self.store)
        self.next = PAGES[size] + ACTIVE_PAGES

    def round(self) -> list[Message]:
        ctx = self.ctx
        for message in interactions()[self.next]:
            ctx.add(message)
        self.next += 1
        ctx.end_round()
        sent = ctx.build_messages()
        ctx.save()
        return sent

    def close(self) -> None:
        self.store.close()


class _Async:
    def __init__(self, size: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = memci.AsyncSqliteStorage(_copy(size, "async"), synchronous="NORMAL")
        self.ctx = self.loop.run_until_complete(memci.AsyncContextSystem.load(self.store))
        self.next = PAGES[size] + ACTIVE_PAGES

    async def _round(self) -> list[Message]:
        ctx = self.ctx
        for message in interactions()[self.next]:
            await ctx.add(message)
        self.next += 1
        await ctx.end_round()
        sent = await ctx.build_messages()
        await ctx.save()
        return sent

    def round(self) -> list[Message]:
        return self.loop.run_until_complete(self._round())

    def close(self) -> None:
        self.loop.run_until_complete(self.store.close())
        self.loop.close()


@pytest.fixture(scope="module")
def systems() -> Iterator[dict[str, _Sync | _Async]]:
    """The systems of this module's cases, by ``peer-size``; closed at the end."""
    made: dict[str, _Sync | _Async] = {}
    yield made
    for system in made.values():
        system.close()


@pytest.mark.parametrize(("peer", "size"), CASES)
def test_async_round(benchmark: Any, systems: dict[str, _Sync | _Async], peer: str, size: str) -> None:
    key = f"{peer}-{size}"
    if key not in systems:
        systems[key] = _Async(size) if peer == "memci-async" else _Sync(size)
    system = systems[key]
    before = system.next
    harness.label(benchmark, "async_round", peer, size)
    sent = harness.measure(benchmark, system.round)
    assert system.next > before
    assert sent[0]["role"] == "system"
    assert sent[-1] == interactions()[system.next - 1][-1]
