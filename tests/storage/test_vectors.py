"""Page vectors in every store (docs/storage.md, "Hybrid search"): a page's vector is stored in
the page's own record, so it survives a reload on every store, sync and async, and a writer killed
with SIGKILL mid-archive leaves every stored page with the vector of its own text; a store written
without vectors loads, is embedded lazily, and its next save writes the vectors back: once, ever."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import memci
import numpy as np
import pytest
from fake_embedder import AsyncHashingEmbedder, HashingEmbedder
from memci.context.page import ArchivedPage
from memci.context.search import message_texts, page_text
from memci.storage import AsyncSqliteStorage, ThreadedStorage
from memci.storage.json_store import JsonStore

Opener = Any


def converse(ctx: memci.ContextSystem, first: int, last: int) -> None:
    for n in range(first, last + 1):
        ctx.add({"role": "user", "content": f"question {n} about topic{n}"})
        ctx.add({"role": "assistant", "content": f"answer {n} mentions word{n}"})
        ctx.end_round()


def stored_text(page: dict[str, Any]) -> str:
    """The searchable text the system embedded for a stored page."""
    return page_text(page["summary"], message_texts(page["messages"]))


def assert_vectors_are_their_pages(store: Any, embedder: HashingEmbedder) -> int:
    """Every stored page holds the vector of its own text; the number of pages checked."""
    indices = store.page_indices()
    for index in indices:
        page = store.get_page(index)
        vector = ArchivedPage.from_dict(page, index).vector
        assert vector is not None, f"page {index} has no vector"
        assert np.array_equal(np.frombuffer(vector, "<f4"), embedder.vector(stored_text(page))), index
    return len(indices)


def assert_a_second_load_embeds_only_queries(store: Any, pages: int) -> None:
    """Each of the ``pages`` stored pages holds its vector, and a load that searches and saves
    calls the embedder for the query only."""
    assert assert_vectors_are_their_pages(store, HashingEmbedder()) == pages
    second = HashingEmbedder()
    again = memci.ContextSystem.load(store, embedder=second)
    assert [h.page_index for h in again.search("word2", 1)] == [2]
    again.save()
    assert second.calls == [["word2"]], "the second load embeds nothing but the query"


def test_vectors_survive_a_reload_on_every_store(opener: Opener, kind: str) -> None:
    store: JsonStore = opener()
    ctx = memci.ContextSystem("sys", active_pages=2, storage=store, embedder=HashingEmbedder())
    converse(ctx, 1, 6)
    ctx.save()
    if kind != "memory":  # a closed memory store is gone: the reload is from the same object
        store.close()
    again = opener()
    try:
        embedder = HashingEmbedder()
        assert assert_vectors_are_their_pages(again, embedder) == 4
        loaded = memci.ContextSystem.load(again, embedder=embedder)
        assert [h.page_index for h in loaded.search("word3", 1)] == [3]
        assert embedder.calls == [["word3"]], "a reload embeds nothing but the query"
    finally:
        again.close()


def test_a_store_written_without_vectors_is_embedded_once_ever(opener: Opener, kind: str) -> None:
    store: JsonStore = opener()
    ctx = memci.ContextSystem("sys", active_pages=2, storage=store)
    converse(ctx, 1, 5)
    ctx.save()
    assert all("vector" not in store.get_page(i) for i in store.page_indices())  # type: ignore[operator]
    embedder = HashingEmbedder()
    loaded = memci.ContextSystem.load(store, embedder=embedder)
    assert embedder.calls == [], "loading embeds nothing"
    for query in ("topic1", "word2", "topic3"):
        loaded.search(query)
    assert [len(call) for call in embedder.calls] == [3, 1, 1, 1], "the old pages once, then each query"
    converse(loaded, 6, 6)
    loaded.save()  # page 4 archived with its vector; pages 1-3 get theirs written back
    if kind != "memory":
        store.close()
        store = opener()
    try:
        assert_a_second_load_embeds_only_queries(store, 4)
    finally:
        store.close()


def test_vectors_made_for_unsaved_pages_go_out_with_them(tmp_path: Path) -> None:
    store = memci.SqliteStorage(tmp_path / "s.db")
    ctx = memci.ContextSystem("sys", active_pages=2, storage=store)
    converse(ctx, 1, 4)  # pages 1 and 2 archived, never saved: they travel in the state
    embedder = HashingEmbedder()
    taken = memci.ContextSystem.from_state(ctx.to_state(), store, embedder=embedder)
    taken.search("topic1")
    taken.save()
    assert assert_vectors_are_their_pages(store, HashingEmbedder()) == 2
    second = HashingEmbedder()
    memci.ContextSystem.load(store, embedder=second).search("topic2")
    assert second.calls == [["topic2"]]
    store.close()


KEY = bytes(range(32))


def test_an_encrypted_store_written_without_vectors_is_embedded_once_ever(opener: Opener, kind: str) -> None:
    pytest.importorskip("cryptography")
    beneath = opener()
    store = memci.EncryptedStorage(beneath, KEY)
    ctx = memci.ContextSystem("sys", active_pages=2, storage=store)
    converse(ctx, 1, 4)
    ctx.save()
    sealed_before = {i: beneath.get_page(i) for i in beneath.page_indices()}
    loaded = memci.ContextSystem.load(store, embedder=HashingEmbedder())
    loaded.search("topic1")
    converse(loaded, 5, 5)
    loaded.save()  # page 3 archived with its vector sealed in; pages 1-2 gain theirs sealed beside
    if kind != "memory":
        store.close()
        beneath = opener()
        store = memci.EncryptedStorage(beneath, KEY)
    try:
        for index, record in sealed_before.items():
            now = beneath.get_page(index)
            assert {**record, "vector": now["vector"]} == now, "the sealed page is kept, one key added"
            assert set(now["vector"]) == {"key", "data"}, "the vector is sealed, not in the clear"
        assert_a_second_load_embeds_only_queries(store, 3)
    finally:
        store.close()


def test_a_vector_sealed_beside_a_page_opens_with_that_page_only(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    beneath = memci.SqliteStorage(tmp_path / "s.db")
    store = memci.EncryptedStorage(beneath, KEY)
    ctx = memci.ContextSystem("sys", active_pages=2, storage=store)
    converse(ctx, 1, 5)
    ctx.save()
    loaded = memci.ContextSystem.load(store, embedder=HashingEmbedder())
    loaded.search("topic1")
    loaded.save()
    records = {i: beneath.get_page(i) for i in (1, 2, 3)}
    moved = memci.MemoryStorage()
    moved.put_page(1, records[1])
    moved.put_page(2, {**records[2], "vector": records[1]["vector"]})
    assert "vector" in memci.EncryptedStorage(moved, KEY).get_page(1)  # type: ignore[operator]
    with pytest.raises(memci.StorageError, match="page 2's vector: cannot be opened"):
        memci.EncryptedStorage(moved, KEY).get_page(2)
    other_key = memci.EncryptedStorage(beneath, bytes(32), key_id="2", old_keys={"1": KEY})
    assert other_key.get_page(1) == store.get_page(1), "the vector's key id is stored beside it"
    store.close()


def test_a_rotated_key_seals_the_vector_of_a_page_sealed_with_an_old_key(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    beneath = memci.SqliteStorage(tmp_path / "s.db")
    ctx = memci.ContextSystem("sys", active_pages=2, storage=memci.EncryptedStorage(beneath, KEY))
    converse(ctx, 1, 4)
    ctx.save()
    rotated = memci.EncryptedStorage(beneath, bytes(32), key_id="2", old_keys={"1": KEY})
    loaded = memci.ContextSystem.load(rotated, embedder=HashingEmbedder())
    loaded.search("topic1")
    loaded.save()
    assert beneath.get_page(1)["sealed"]["key"] == "1"
    assert beneath.get_page(1)["vector"]["key"] == "2"
    assert assert_vectors_are_their_pages(rotated, HashingEmbedder()) == 2
    with pytest.raises(memci.StorageError, match="sealed with key '2'"):
        memci.EncryptedStorage(beneath, KEY).get_page(1)
    beneath.close()


def open_async_store(kind: str, tmp_path: Path) -> Any:
    """An async store of ``kind`` over the files in ``tmp_path`` (the same files each time)."""
    if kind == "sqlite":
        return AsyncSqliteStorage(tmp_path / "a.db")
    if kind == "encrypted-sqlite":
        pytest.importorskip("cryptography")
        return memci.AsyncEncryptedStorage(AsyncSqliteStorage(tmp_path / "a.db"), KEY)
    return ThreadedStorage(memci.DirectoryStorage(tmp_path / "dir"))


@pytest.mark.parametrize("kind", ["sqlite", "threaded-directory"])
def test_vectors_survive_a_reload_on_the_async_stores(kind: str, tmp_path: Path) -> None:
    def open_store() -> Any:
        return open_async_store(kind, tmp_path)

    async def main() -> None:
        store = open_store()
        ctx = memci.AsyncContextSystem("sys", active_pages=1, storage=store, embedder=AsyncHashingEmbedder())
        for n in range(1, 5):
            await ctx.add({"role": "user", "content": f"question {n} about topic{n}"})
            await ctx.end_round()
        await ctx.save()
        await store.close()
        again = open_store()
        embedder = AsyncHashingEmbedder()
        loaded = await memci.AsyncContextSystem.load(again, embedder=embedder)
        assert [h.page_index for h in await loaded.search("topic2", 1)] == [2]
        assert embedder.calls == [["topic2"]]
        await again.close()

    asyncio.run(main())
    sync = memci.SqliteStorage(tmp_path / "a.db") if kind == "sqlite" else memci.DirectoryStorage(tmp_path / "dir")
    with sync:
        assert assert_vectors_are_their_pages(sync, HashingEmbedder()) == 3


@pytest.mark.parametrize("kind", ["sqlite", "threaded-directory", "encrypted-sqlite"])
def test_an_old_async_store_is_embedded_once_ever(kind: str, tmp_path: Path) -> None:
    def open_store() -> Any:
        return open_async_store(kind, tmp_path)

    async def load_and_search(query: str) -> list[list[str]]:
        store = open_store()
        embedder = AsyncHashingEmbedder()
        loaded = await memci.AsyncContextSystem.load(store, embedder=embedder)
        await loaded.search(query)
        await loaded.save()
        await store.close()
        return embedder.calls

    async def main() -> None:
        store = open_store()
        ctx = memci.AsyncContextSystem("sys", active_pages=1, storage=store)  # written without vectors
        for n in range(1, 5):
            await ctx.add({"role": "user", "content": f"question {n} about topic{n}"})
            await ctx.end_round()
        await ctx.save()
        await store.close()
        assert [len(call) for call in await load_and_search("topic1")] == [3, 1]
        assert await load_and_search("topic2") == [["topic2"]]

    asyncio.run(main())


AGENT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    import memci
    from fake_embedder import HashingEmbedder

    store = memci.SqliteStorage(sys.argv[1], synchronous="NORMAL")
    embedder = HashingEmbedder()
    if store.load_state() is None:
        ctx = memci.ContextSystem("sys", active_pages=3, storage=store, embedder=embedder, max_context_tokens=800)
    else:
        ctx = memci.ContextSystem.load(store, embedder=embedder)
    print("loaded", ctx.round, flush=True)
    while True:
        n = ctx.round + 1
        ctx.add({"role": "user", "content": f"question {n} on topic{n % 7} " + "words " * (n % 13)})
        ctx.add({"role": "assistant", "content": f"answer {n} " + "data " * (n * 37 % 200)})
        ctx.build_messages()  # over max_context_tokens in some rounds: archives more pages at once
        ctx.end_round()
        if n % 2 == 0:
            ctx.save()
            print("saved", n, flush=True)
    """
)


def test_a_writer_killed_mid_archive_leaves_every_page_with_its_own_vector(tmp_path: Path) -> None:
    where, tests = str(tmp_path / "agent.db"), str(Path(__file__).parent.parent)
    rng = random.Random("vectors-kill")
    for _ in range(8):
        agent = subprocess.Popen(
            [sys.executable, "-c", AGENT, where, tests], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert agent.stdout is not None
        assert agent.stdout.readline().startswith("loaded"), agent.stderr.read() if agent.stderr else ""
        for _ in range(rng.randrange(1, 30)):
            if not agent.stdout.readline():
                break
        agent.send_signal(signal.SIGKILL)
        _, err = agent.communicate(timeout=60)
        assert agent.returncode == -signal.SIGKILL, err
        with memci.SqliteStorage(where) as store:
            embedder = HashingEmbedder()
            assert_vectors_are_their_pages(store, embedder)
            loaded = memci.ContextSystem.load(store, embedder=embedder)
            hits = loaded.search("question topic3", 3)
            assert embedder.calls == [["question topic3"]], "no stored page lacked its vector"
            for hit in hits:
                loaded.recall(hit.page_index)
    with memci.SqliteStorage(where) as store:
        assert len(store.page_indices()) > 10, "the campaign archived pages"
