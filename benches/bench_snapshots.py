"""Snapshots and rollback on a history of n messages.

``snapshots`` (an agent session): 100 times, append 1% of n new messages and take a snapshot; then
roll back to the 50th snapshot and read the state there. The history is built before the timed
region; the appends are timed (they are what happens between snapshots).

- ``memci``: ``append(list)`` + ``checkpoint()``, then ``rollback(cp_50)``: copy-on-write, a
  snapshot copies no message.
- ``python``: the pure-Python peer with shallow snapshots (a copy of the list of references per
  snapshot: O(n) pointer copies, correct because stored dicts are never mutated).
- ``python-deep``: the same with a deep-copy snapshot, a copy of every visible message
  (what ``JSON.parse(JSON.stringify(messages))`` does in JavaScript).
- ``langgraph``: a one-node ``StateGraph`` whose state is ``messages: Annotated[list, add_messages]``
  over an ``InMemorySaver``; each batch of new messages is one ``invoke`` with
  ``durability="exit"`` (exactly one checkpoint per invoke, the cheapest setting), then
  ``get_state`` of the 50th checkpoint reads the messages back. Messages are converted to LangChain
  objects before the timed region. The checkpoint ids are read from the saver's storage dict, which
  is cheaper than ``get_state`` (that would deserialize the whole history each time).

``checkpoint`` (the snapshot cost alone): 100 snapshots of an unchanging history of n messages,
then a rollback to the 50th. Peers: ``memci``, ``python`` (shallow), ``python-deep``.

Targets (docs/design.md): snapshots and rollback at least 100x the best peer at 100k. For ``snapshots``
the peers that target names are the deep copy and LangGraph; the
shallow-copy peer is shown too, but there the 100 appends of 1% (the same work for every store)
dominate. ``checkpoint`` isolates the snapshots and is held to the target against every peer.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import generator
import harness
import memci
import pytest
from pure_python import PyMessageArray

SNAPSHOTS = 100
ROLLBACK_TO = 50  # the 50th snapshot, index 49

SNAPSHOT_PEERS = ("memci", "python", "python-deep", "langgraph")
SNAPSHOT_CASES = harness.cases(
    SNAPSHOT_PEERS,
    # Seconds a round: the deep copies from 10k, LangGraph from 1k (it deserializes and
    # re-serializes the whole history on every invoke: ~5 s at 1k, ~30-50 s at 10k).
    slow=("python-deep-10k", "python-deep-100k", "langgraph-1k", "langgraph-10k"),
    # Extrapolated from 10k: ten minutes or more a round.
    very_slow=("langgraph-100k",),
)
CHECKPOINT_PEERS = ("memci", "python", "python-deep")
CHECKPOINT_CASES = harness.cases(CHECKPOINT_PEERS, slow=("python-deep-10k", "python-deep-100k"))


def _inputs(size: str) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """The history and the 100 batches of 1% appended after it (the conversation continued)."""
    n = generator.SIZES[size]
    step = n // SNAPSHOTS
    both = generator.conversation(n + SNAPSHOTS * step)
    return both[:n], [both[n + i * step : n + (i + 1) * step] for i in range(SNAPSHOTS)]


def _expected(history: list[dict[str, Any]], batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return history + [m for batch in batches[:ROLLBACK_TO] for m in batch]


# ---- memci and the pure-Python peer ----------------------------------------------------------------


def _snapshots(arr: memci.MessageArray | PyMessageArray, batches: list[list[dict[str, Any]]]) -> list[int]:
    """memci and the pure-Python peer alike: ``append(list)`` then ``checkpoint()``, 100 times."""
    checkpoints = []
    for batch in batches:
        arr.append(batch)
        checkpoints.append(arr.checkpoint())
    arr.rollback(checkpoints[ROLLBACK_TO - 1])
    return checkpoints


def _array(history: list[dict[str, Any]], peer: str) -> memci.MessageArray | PyMessageArray:
    """A memci array or a pure-Python peer (shallow or deep snapshots) holding the history."""
    if peer == "memci":
        return memci.MessageArray(history)
    arr = PyMessageArray(snapshots="deep" if peer == "python-deep" else "shallow")
    arr.extend(history)
    return arr


# ---- LangGraph ------------------------------------------------------------------------------------


class _Graph:
    """A compiled one-node graph over ``add_messages`` with its ``InMemorySaver``, already holding
    the history (one invoke, untimed), and the batches converted to LangChain messages."""

    THREAD = "bench"

    def __init__(self, history: list[dict[str, Any]], batches: list[list[dict[str, Any]]]) -> None:
        from langchain_core.messages import convert_to_messages
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import END, START, StateGraph
        from langgraph.graph.message import add_messages

        # The functional form evaluates the annotation now (a class body's would stay a string
        # under `from __future__ import annotations`, naming a local LangGraph cannot resolve).
        state = TypedDict("state", {"messages": Annotated[list[Any], add_messages]})  # noqa: UP013

        builder = StateGraph(state)
        builder.add_node("agent", lambda state: {})  # the new messages come in through the input
        builder.add_edge(START, "agent")
        builder.add_edge("agent", END)
        self.saver = InMemorySaver()
        self.graph = builder.compile(checkpointer=self.saver)
        self.config = {"configurable": {"thread_id": self.THREAD}}
        self.graph.invoke({"messages": convert_to_messages(history)}, self.config, durability="exit")
        # Fresh objects per round: add_messages assigns ids to the messages it is given.
        self.batches = [convert_to_messages(batch) for batch in batches]

    def latest_checkpoint(self) -> str:
        storage = getattr(self.saver, "storage", None)
        if storage is not None:
            return max(storage[self.THREAD][""])  # ids are time-ordered (uuid6)
        return self.graph.get_state(self.config).config["configurable"]["checkpoint_id"]

    def state_at(self, checkpoint_id: str) -> list[Any]:
        config = {"configurable": {"thread_id": self.THREAD, "checkpoint_id": checkpoint_id}}
        return self.graph.get_state(config).values["messages"]


def _langgraph_snapshots(graph: _Graph) -> list[Any]:
    checkpoints = []
    for batch in graph.batches:
        graph.graph.invoke({"messages": batch}, graph.config, durability="exit")
        checkpoints.append(graph.latest_checkpoint())
    return graph.state_at(checkpoints[ROLLBACK_TO - 1])


# ---- the benches -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("peer", "size"), SNAPSHOT_CASES)
def test_snapshots(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    harness.importorskip_peer(peer)
    history, batches = _inputs(size)
    harness.label(benchmark, "snapshots", peer, size, snapshots=SNAPSHOTS, appended=len(batches[0]))
    expected = _expected(history, batches)
    slow = harness.is_slow(request)

    if peer == "langgraph":
        got = harness.measure(benchmark, _langgraph_snapshots, lambda: ((_Graph(history, batches),), {}), slow=slow)
        assert len(got) == len(expected)
        assert [m.content for m in got] == [m["content"] or "" for m in expected]
        return
    holder: list[Any] = []

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        holder[:] = [_array(history, peer)]
        return (holder[0], batches), {}

    checkpoints = harness.measure(benchmark, _snapshots, setup, slow=slow)
    arr = holder[0]
    assert arr.batch_index == checkpoints[ROLLBACK_TO - 1]
    assert arr.messages() == expected
    if peer == "memci":
        assert len(arr.all_messages()) == len(history) + sum(map(len, batches))  # nothing lost


def _checkpoints(arr: memci.MessageArray | PyMessageArray) -> list[int]:
    checkpoints = [arr.checkpoint() for _ in range(SNAPSHOTS)]
    arr.rollback(checkpoints[ROLLBACK_TO - 1])
    return checkpoints


@pytest.mark.parametrize(("peer", "size"), CHECKPOINT_CASES)
def test_checkpoint(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    history = generator.conversation(generator.SIZES[size])
    harness.label(benchmark, "checkpoint", peer, size, snapshots=SNAPSHOTS)
    slow = harness.is_slow(request)
    subject = _array(history, peer)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        subject.rollback(0)
        return (subject,), {}

    checkpoints = harness.measure(benchmark, _checkpoints, setup, slow=slow)
    assert checkpoints == list(range(SNAPSHOTS))
    assert subject.batch_index == ROLLBACK_TO - 1
    assert subject.messages() == history
