"""The Agents SDK's session against memci's: what a turn costs the session (docs/integrations/openai-agents.md).

One workload, ``session_turn``: what ``Runner.run`` asks of its session each turn, on a session
already holding n Responses items (``generator.conversation(n)`` as items, ``formats.to_responses``):
``get_items()`` (the history to send), then ``add_items`` of the turn (the user's message and the
assistant's answer). Each peer keeps its session in a SQLite file with its default settings:

- ``sqlite``: the SDK's ``SQLiteSession`` (one row per item; rollback journal, synchronous FULL);
- ``memci``: ``MemciSession``, full history (a write-once chunk a turn and a small state, WAL,
  synchronous FULL; the history held in a ``MessageArray``, checked against the stored revision at
  each call);
- ``memci-budget``: the same with ``max_tokens=32_000``: every turn also trims what it sends to the
  newest 100k tokens, never splitting a call from its output.

Both sessions are built once per size (untimed) and return the same items (checked); the rounds add
turns to them.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import generator
import harness
import pytest

pytest.importorskip("agents", reason="openai-agents is not installed (pip install 'memci[openai-agents]')")

from agents import SQLiteSession
from memci import formats
from memci.integrations.openai_agents import MemciSession

PEERS = ("sqlite", "memci", "memci-budget")
CASES = harness.cases(PEERS)
BUDGET = 32_000

Item = dict[str, Any]


@cache
def history(size: str) -> tuple[Item, ...]:
    """``conversation(n)`` as Responses items (its system prompt left out: an agent's instructions
    are not session items)."""
    return tuple(formats.to_responses(generator.conversation(generator.SIZES[size])[1:]))


def turn(number: int) -> list[Item]:
    return [
        {"role": "user", "content": f"Question {number}: what does the test suite report now?"},
        {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"Answer {number}: all tests pass.", "annotations": []}],
        },
    ]


class _Run:
    """A session of ``peer`` on a file holding ``history(size)``, driven on an event loop of its own."""

    def __init__(self, peer: str, size: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.folder = tempfile.TemporaryDirectory(prefix="memci-bench-")
        path = Path(self.folder.name) / "sessions.db"
        self.session: Any
        if peer == "sqlite":
            self.session = SQLiteSession("bench", path)
        else:
            self.session = MemciSession("bench", path, max_tokens=BUDGET if peer == "memci-budget" else None)
        self.loop.run_until_complete(self.session.add_items(list(history(size))))
        self.turns = 0

    def turn(self) -> list[Item]:
        async def work() -> list[Item]:
            sent: list[Item] = await self.session.get_items()
            self.turns += 1
            await self.session.add_items(turn(self.turns))
            return sent

        return self.loop.run_until_complete(work())

    def close(self) -> None:
        self.session.close()
        self.loop.close()
        self.folder.cleanup()


@pytest.fixture
def run(request: pytest.FixtureRequest) -> Iterator[_Run]:
    peer, size = request.node.callspec.params["peer"], request.node.callspec.params["size"]
    session = _Run(peer, size)
    yield session
    session.close()


@pytest.mark.parametrize(("peer", "size"), CASES)
def test_session_turn(benchmark: Any, run: _Run, peer: str, size: str) -> None:
    harness.label(benchmark, "session_turn", peer, size)
    before = run.turns
    sent = harness.measure(benchmark, run.turn)
    done = run.turns - before
    assert done >= 1
    full = [*history(size), *(item for number in range(1, run.turns) for item in turn(number))]
    if peer == "memci-budget":
        assert sent == full[len(full) - len(sent) :]  # the newest items, as they were
        assert 0 < len(sent) < len(full)
    else:
        assert sent == full
