"""PostgreSQL stores against their peers on the same server: a turn saved, a conversation loaded,
and the bytes a turn adds to the database.

The server is started by the bench (``tests/postgres_server.py``, durable: fsync on) and every
peer writes into it; the bench skips when no server can be run. A turn is one page of a generated
conversation (a user message and the assistant and tool messages after it, ``bench_storage``).

Workloads (``<workload>-<size>`` groups; sizes count turns already stored):

- ``pg_save``: one turn saved. ``memci``: ``ContextSystem.save()`` on ``PostgresStorage`` (the
  turn's page and the system state, one transaction); ``memci-store``: ``save_state`` of the turn's
  page and a small state (the store alone, without the context system's state); ``langgraph``:
  ``PostgresSaver.put`` of the checkpoint whose ``messages`` channel holds the conversation (what a
  graph with ``add_messages`` writes each step); ``agents``: ``SQLAlchemySession.add_items`` of the
  turn's items (the Agents SDK's session over SQLAlchemy and psycopg); ``floor``: one durable
  COMMIT of a one-row UPDATE, the least a durable save costs on this server.
- ``pg_load``: the whole conversation read back. ``memci``: ``load_state()`` and ``get_pages`` of
  every page (one query); ``memci-context``: ``ContextSystem.load`` and ``build_messages`` (the
  state: no archived page is read until one is recalled or searched); ``memci-search``: that and
  the first search, which reads every page (one query) and builds the search index;
  ``langgraph``: ``get_tuple``; ``agents``: ``get_items``; ``floor``: the pages' bodies in one
  query and ``json.loads`` of each, unchecked, kept (with the cyclic GC paused while they are
  decoded, as memci's ``get_pages`` does).
- ``pg_turn_bytes``: live bytes 50 more turns add to the peer's tables (``pg_total_relation_size``:
  heap, TOAST and indexes, after ``VACUUM FULL``), per turn, beside the turn's messages as compact
  JSON (in ``extra_info``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import generator
import harness
import memci
import pytest
from bench_storage import all_pages

pytest.importorskip("psycopg")

SIZES = ("1k", "10k")
PEERS = ("memci", "langgraph", "agents")
#: Turns written to measure the bytes of one.
BYTES_TURNS = 50
#: Filling a conversation of 10k turns takes seconds (a LangGraph checkpoint rewrites all of it at
#: every save): `make bench` only.
SLOW = tuple(f"{peer}-10k" for peer in (*PEERS, "memci-context", "memci-search"))

Page = dict[str, Any]


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    from postgres_server import running_postgres

    with ExitStack() as stack:
        try:
            yield stack.enter_context(running_postgres(durable=True))
        except RuntimeError as e:
            pytest.skip(str(e))


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    runner = asyncio.new_event_loop()
    yield runner
    runner.close()


def turns(n: int) -> list[Page]:
    return list(all_pages()[:n])


def _json_bytes(page: Page) -> int:
    return len(json.dumps(page["messages"], ensure_ascii=False, separators=(",", ":")).encode())


class Peer:
    """One peer's conversation in the database: ``fill`` with n turns, ``save`` the next one,
    ``load`` it all, and the tables it writes."""

    tables: tuple[str, ...] = ()

    def fill(self, pages: list[Page]) -> None:
        raise NotImplementedError

    def add(self, page: Page) -> None:
        """Take the next turn in (untimed)."""

    def save(self, page: Page) -> None:
        """Store the turn taken in last."""
        raise NotImplementedError

    def load(self) -> int:
        """Read the conversation back; the number of messages read."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class Memci(Peer):
    tables = ("memci_pages", "memci_state", "memci_expiry")

    def __init__(self, dsn: str, *, load_as: str = "memci") -> None:
        self.store = memci.PostgresStorage(dsn, namespace=uuid.uuid4().hex)
        self.ctx = memci.ContextSystem("You are an agent.", storage=self.store)
        #: What ``load`` does: ``memci`` (the store's reads), ``memci-context`` or ``memci-search``.
        self.load_as = load_as

    def fill(self, pages: list[Page]) -> None:
        for page in pages:
            self.add(page)
        self.ctx.save()

    def add(self, page: Page) -> None:
        for message in page["messages"]:
            self.ctx.add(message)
        self.ctx.end_round()

    def save(self, page: Page) -> None:
        self.ctx.save()

    def load(self) -> int:
        if self.load_as == "memci-context":
            return len(memci.ContextSystem.load(self.store).build_messages())
        if self.load_as == "memci-search":
            return len(memci.ContextSystem.load(self.store).search("why did the query slow down", 5))
        state = self.store.load_state()
        assert state is not None
        got = self.store.get_pages(range(1, state["pages_through"] + 1))
        return sum(len(page["messages"]) for page in got.values())

    def close(self) -> None:
        self.store.close()


class MemciStore(Memci):
    """The store's own cost: each turn saved as its page and a small state (the revision and marks),
    without the context system's state."""

    def fill(self, pages: list[Page]) -> None:
        self.revision = 1
        self.store.save_state({"version": 1, "revision": 1, "pages_through": len(pages)}, pages)

    def add(self, page: Page) -> None:
        pass

    def save(self, page: Page) -> None:
        self.revision += 1
        state = {"version": 1, "revision": self.revision, "pages_through": page["index"], "round": page["index"]}
        self.store.save_state(state, [page])


class Floor(MemciStore):
    """What the server and the driver cost at least, measured in the same run: ``save`` is one
    durable COMMIT of a one-row UPDATE (a round trip and the WAL's fsync); ``load`` fetches the
    pages' bodies in one query and ``json.loads`` each, with no check, and keeps them (a load returns them)."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        super().__init__(dsn)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (k int PRIMARY KEY, v int)")
        self.conn.execute("INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING")

    def save(self, page: Page) -> None:
        self.conn.execute("UPDATE bench_floor SET v = v + 1 WHERE k = 1")

    def load(self) -> int:
        rows = self.conn.execute(
            "SELECT body FROM memci_pages WHERE namespace = %s", (self.store.namespace,)
        ).fetchall()
        # The pages are kept, as a load must return them, and decoded with the cyclic GC paused (as
        # memci does): what keeping millions of new objects costs at least.
        gc.disable()
        try:
            pages = [json.loads(body) for (body,) in rows]
        finally:
            gc.enable()
        return sum(len(page["messages"]) for page in pages)

    def close(self) -> None:
        self.conn.close()
        super().close()


class LangGraph(Peer):
    tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")

    def __init__(self, dsn: str) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver

        self._stack = ExitStack()
        self.saver = self._stack.enter_context(
            PostgresSaver.from_conn_string(f"postgresql://postgres@{_hostport(dsn)}")
        )
        self.saver.setup()
        self.config: Any = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
        self.messages: list[dict[str, Any]] = []
        self.step = 0

    def fill(self, pages: list[Page]) -> None:
        for page in pages:
            self.messages.extend(page["messages"])
        self._put()

    def add(self, page: Page) -> None:
        self.messages.extend(page["messages"])

    def _put(self) -> None:
        from langgraph.checkpoint.base import empty_checkpoint

        self.step += 1
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": self.messages}
        checkpoint["channel_versions"] = {"messages": self.step}
        self.config = self.saver.put(self.config, checkpoint, {"step": self.step}, {"messages": self.step})

    def save(self, page: Page) -> None:
        self._put()

    def load(self) -> int:
        found = self.saver.get_tuple(self.config)
        assert found is not None
        return len(found.checkpoint["channel_values"]["messages"])

    def close(self) -> None:
        self._stack.close()


class Agents(Peer):
    tables = ("agent_sessions", "agent_messages")

    def __init__(self, dsn: str, loop: asyncio.AbstractEventLoop) -> None:
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        self.loop = loop
        self.session = SQLAlchemySession.from_url(
            uuid.uuid4().hex, url=f"postgresql+psycopg://postgres@{_hostport(dsn)}", create_tables=True
        )

    def fill(self, pages: list[Page]) -> None:
        self.loop.run_until_complete(self.session.add_items([m for page in pages for m in page["messages"]]))

    def save(self, page: Page) -> None:
        self.loop.run_until_complete(self.session.add_items(list(page["messages"])))

    def load(self) -> int:
        return len(self.loop.run_until_complete(self.session.get_items()))

    def close(self) -> None:
        self.loop.run_until_complete(self.session.engine.dispose())


def _hostport(dsn: str) -> str:
    parts = dict(part.split("=", 1) for part in dsn.split())
    return f"{parts['host']}:{parts['port']}/{parts['dbname']}"


@pytest.fixture
def make(dsn: str, loop: asyncio.AbstractEventLoop) -> Iterator[Callable[[str, str], Peer]]:
    """Opens a peer holding a conversation of ``size`` turns (closed at the end of the test)."""
    made: list[Peer] = []

    def open_peer(peer: str, size: str) -> Peer:
        if peer == "memci-store":
            made.append(MemciStore(dsn))
        elif peer == "floor":
            made.append(Floor(dsn))
        elif peer.startswith("memci"):
            made.append(Memci(dsn, load_as=peer))
        elif peer == "langgraph":
            pytest.importorskip(
                "langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed"
            )
            made.append(LangGraph(dsn))
        else:
            pytest.importorskip("sqlalchemy")
            pytest.importorskip("agents")
            made.append(Agents(dsn, loop))
        made[-1].fill(turns(generator.SIZES[size]))
        return made[-1]

    yield open_peer
    for peer in made:
        peer.close()


@pytest.mark.parametrize(
    ("peer", "size"),
    harness.cases((*PEERS, "memci-store", "floor"), SIZES, slow=(*SLOW, "memci-store-10k", "floor-10k")),
)
def test_pg_save(
    benchmark: Any, make: Callable[[str, str], Peer], request: pytest.FixtureRequest, peer: str, size: str
) -> None:
    harness.label(benchmark, "pg_save", peer, size)
    target = make(peer, size)
    fresh = iter(all_pages()[generator.SIZES[size] :])

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        page = next(fresh)
        target.add(page)
        return (page,), {}

    # A round is one save at any size; only LangGraph's (a checkpoint of the whole conversation)
    # takes seconds at 10k. The 10k conversations are slow to fill, not to save into.
    harness.measure(benchmark, target.save, setup, slow=harness.is_slow(request) and peer == "langgraph")
    _record_p95(benchmark)
    assert target.load() > 0


@pytest.mark.parametrize(
    ("peer", "size"), harness.cases((*PEERS, "memci-context", "memci-search", "floor"), SIZES, slow=SLOW)
)
def test_pg_load(
    benchmark: Any, make: Callable[[str, str], Peer], request: pytest.FixtureRequest, peer: str, size: str
) -> None:
    harness.label(benchmark, "pg_load", peer, size)
    target = make(peer, size)
    read = harness.measure(benchmark, target.load, slow=harness.is_slow(request))
    _record_p95(benchmark)
    n = generator.SIZES[size]
    stored = turns(n)
    if isinstance(target, Memci):  # the archived pages: the last few stay in the state's window
        state = target.store.load_state()
        assert state is not None
        stored = stored[: state["pages_through"]]
        assert len(stored) >= n - 10
    if peer in ("memci-context", "memci-search"):
        assert read > 0  # the window's messages, or the pages found
    else:
        assert read == sum(len(page["messages"]) for page in stored)


def _record_p95(benchmark: Any) -> None:
    """The 95th percentile of the timed rounds, in ``extra_info`` (pytest-benchmark reports the
    median and quartiles, not it); nothing when untimed."""
    stats = getattr(benchmark.stats, "stats", None) if benchmark.enabled else None
    if stats is not None and stats.data:
        ordered = sorted(stats.data)
        benchmark.extra_info["p95_seconds"] = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def _table_bytes(dsn: str, tables: tuple[str, ...]) -> int:
    """The live bytes of ``tables`` (rewritten by VACUUM FULL first: dead row versions left by
    updates are not what a turn stores)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in tables:
            conn.execute(f"VACUUM FULL {table}")  # type: ignore[arg-type]  # our own table names
        rows = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "WHERE c.relname = ANY(%s) AND c.relkind = 'r'",
            (list(tables),),
        ).fetchone()
        return int(rows[0]) if rows else 0


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS, ("1k",)))
def test_pg_turn_bytes(benchmark: Any, make: Callable[[str, str], Peer], dsn: str, peer: str, size: str) -> None:
    harness.label(benchmark, "pg_turn_bytes", peer, size)
    n = generator.SIZES[size]
    target = make(peer, size)
    more = list(all_pages()[n : n + BYTES_TURNS])

    def write() -> int:
        before = _table_bytes(dsn, target.tables)
        for page in more:
            target.add(page)
            target.save(page)
        return _table_bytes(dsn, target.tables) - before

    grown = benchmark.pedantic(write, rounds=1, iterations=1)
    turn_json = sum(map(_json_bytes, more)) / len(more)
    benchmark.extra_info.update(bytes_per_turn=grown / len(more), turn_json_bytes=turn_json)
    assert grown >= 0
