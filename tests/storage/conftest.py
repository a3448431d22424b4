"""Fixtures of the storage tests: every store, opened at one place."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from memci import DirectoryStorage, MemoryStorage, PostgresStorage, RedisStorage, SqliteStorage
from memci.storage.json_store import JsonStore

Opener = Callable[[], JsonStore]


@pytest.fixture(params=["memory", "sqlite", "directory", "redis", "postgres", "langgraph"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def opener(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Opener:
    """Opens the store of ``kind`` at one place; for memory, always the same object (reopening a
    memory store cannot find anything); for Redis, a prefix of this test's own; for PostgreSQL, a
    namespace of this test's own."""
    if kind == "memory":
        only = MemoryStorage()
        return lambda: only
    if kind == "sqlite":
        return lambda: SqliteStorage(tmp_path / "memci.db")
    if kind == "redis":
        url, prefix = request.getfixturevalue("redis_url"), f"test-{uuid.uuid4().hex}:"
        return lambda: RedisStorage(url, prefix=prefix)
    if kind == "postgres":
        dsn, namespace = request.getfixturevalue("postgres_dsn"), f"test-{uuid.uuid4().hex}"
        return lambda: PostgresStorage(dsn, namespace=namespace, pool_size=2)
    if kind == "langgraph":  # memci.integrations.langgraph over LangGraph's InMemoryStore
        pytest.importorskip("langgraph", reason="the langgraph extra is not installed")
        from langgraph.store.memory import InMemoryStore
        from memci.integrations.langgraph import LangGraphStorage

        graph_store = InMemoryStore()
        return lambda: LangGraphStorage(graph_store, ("memci", "test"))
    return lambda: DirectoryStorage(tmp_path / "store")


@pytest.fixture
def store(opener: Opener) -> Iterator[JsonStore]:
    s = opener()
    yield s
    s.close()
