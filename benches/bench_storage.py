"""The context system's stores and its search, on archived pages of generated conversations.

A page is what the context system archives: one user message and the assistant and tool messages
after it (``generator.conversation``, grouped), with a short extractive summary per entry. Sizes
count pages: 1k and 10k (about 5 and 50 thousand messages).

Workloads (``<workload>-<size>`` groups):

- ``put_page``: 100 new pages written, one call each, into a store already holding n. Peers:
  ``memci`` (``SqliteStorage``, synchronous=FULL: durable against power loss, one fsync a write),
  ``memci-normal`` (the same with synchronous=NORMAL: durable against a killed process only),
  ``directory`` (``DirectoryStorage``: file + fsync + rename + folder fsync), ``memory``
  (``MemoryStorage``), and ``sqlite-raw`` (stdlib ``sqlite3``: ``json.dumps`` and one INSERT, WAL,
  FULL; no checks, no write-once): what memci's checks cost.
- ``get_page``: 1,000 reads of random pages from a store of n. Same peers (less ``memci-normal``).
- ``page_bytes``: bytes on disk per archived page (in ``extra_info``; the time means nothing):
  ``memci`` (the SQLite file after a checkpoint), ``directory`` (the files' sizes and their disk
  blocks) and ``json`` (the pages' compact UTF-8 JSON, what both hold).
- ``search``: 100 queries (1-3 words, some CJK), k=5, snippets included, over n pages. Peers:
  ``memci`` (``PageSearch``), ``python`` (the same BM25 in pure Python, ``bm25_python.py``: same
  pages and scores, checked) and ``fts5`` (SQLite FTS5, ``bm25()`` and ``snippet()``; its own
  tokenizer, so its hits differ for CJK).
- ``search_build``: indexing the n page texts. Peers: ``memci`` (``PageSearch.extend``: parallel
  tokenizing), ``memci-add`` (one ``add`` a page), ``python`` and ``fts5``.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import generator
import harness
import memci
import pytest
from bm25_python import PyPageSearch
from bm25_python import tokens as py_tokens
from memci import _core
from memci.context.search import page_text

SIZES = ("1k", "10k")
PUTS = 100
GETS = 1000
QUERIES = 100
K = 5
#: Messages generated to cut the pages from (about 5 messages a page): 10k pages, then enough
#: fresh ones for every timed round of ``put_page``.
MESSAGES = 90_000

Page = dict[str, Any]


# ---- inputs -------------------------------------------------------------------------------------


def _summary(message: dict[str, Any], text: str) -> str:
    return f"{message['role']}: {' '.join(text.split())[:80]}"


@cache
def all_pages() -> tuple[Page, ...]:
    """Every page of the generated conversation, numbered from 1, in order."""
    return tuple(_page(i, list(messages)) for i, messages in enumerate(generator.interactions(MESSAGES), 1))


def _page(index: int, messages: list[dict[str, Any]]) -> Page:
    summaries = [_summary(m, t) for m, t in zip(messages, _core.message_texts(messages), strict=True)]
    return {
        "index": index,
        "messages": messages,
        "summary": summaries[0],
        "entry_summaries": summaries,
        "archived_round": index,
    }


def pages(size: str) -> tuple[Page, ...]:
    n = generator.SIZES[size]
    assert len(all_pages()) >= n + (harness.MAX_ROUNDS + 1) * PUTS, "generate more messages"
    return all_pages()[:n]


@cache
def texts(size: str) -> tuple[tuple[int, str], ...]:
    return tuple((p["index"], page_text(p["summary"], _core.message_texts(p["messages"]))) for p in pages(size))


@cache
def queries() -> tuple[str, ...]:
    rng = random.Random(11)
    latin = ("cache", "index", "merge", "thread", "memory", "config", "token", "schema", *generator.KEYWORDS)
    cjk = ("上下", "窗口", "管理", "消息", "工具", "结果")
    out = []
    for _ in range(QUERIES):
        words = rng.sample(latin, rng.randint(1, 3))
        if rng.random() < 0.15:
            words[0] = rng.choice(cjk)
        out.append(" ".join(words))
    return tuple(out)


# ---- the peers that are not memci ---------------------------------------------------------------


class RawSqlite:
    """The least a SQLite page store does: ``json.dumps`` and one INSERT (WAL, FULL)."""

    def __init__(self, path: Path, synchronous: str = "FULL") -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.conn.execute("CREATE TABLE IF NOT EXISTS pages (page_index INTEGER PRIMARY KEY, body TEXT NOT NULL)")

    def put_page(self, index: int, page: Page) -> None:
        self.conn.execute("INSERT INTO pages VALUES (?, ?)", (index, json.dumps(page, ensure_ascii=False)))

    def get_page(self, index: int) -> Page | None:
        row = self.conn.execute("SELECT body FROM pages WHERE page_index = ?", (index,)).fetchone()
        return None if row is None else json.loads(row[0])

    def close(self) -> None:
        self.conn.close()


class Fts5:
    """SQLite FTS5 (unicode61 tokenizer) ranked by its ``bm25()``, with ``snippet()``."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE docs USING fts5(body)")

    def extend(self, items: tuple[tuple[int, str], ...]) -> None:
        with self.conn:
            self.conn.executemany("INSERT INTO docs (rowid, body) VALUES (?, ?)", items)

    def search(self, query: str, k: int) -> list[tuple[int, float, str]]:
        terms = " OR ".join(f'"{t}"' for t in dict.fromkeys(py_tokens(query)))
        return self.conn.execute(
            "SELECT rowid, -bm25(docs), snippet(docs, 0, '', '', '…', 24) FROM docs WHERE docs MATCH ? "
            "ORDER BY bm25(docs), rowid LIMIT ?",
            (terms, k),
        ).fetchall()


def has_fts5() -> bool:
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    return True


# ---- filled stores, shared by the cases of a session --------------------------------------------

STORE_PEERS = ("memci", "memci-normal", "directory", "memory", "sqlite-raw")


def _open(peer: str, path: Path, *, filling: bool) -> Any:
    if peer in ("memci", "memci-normal"):
        fast = filling or peer == "memci-normal"
        return memci.SqliteStorage(path / "memci.db", synchronous="NORMAL" if fast else "FULL")
    if peer == "directory":
        return memci.DirectoryStorage(path / "store", fsync=not filling)
    return RawSqlite(path / "raw.db", "NORMAL" if filling else "FULL")


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str, str], Any]]:
    """``filled(peer, size)``: the peer's store holding the first n pages (filled without fsyncs,
    then opened as the peer runs)."""
    opened: dict[tuple[str, str], Any] = {}

    def get(peer: str, size: str) -> Any:
        key = (peer, size)
        if key not in opened:
            if peer == "memory":
                store: Any = memci.MemoryStorage()
                for page in pages(size):
                    store.put_page(page["index"], page)
            else:
                path = tmp_path_factory.mktemp(f"{peer}-{size}")
                filler = _open(peer, path, filling=True)
                for page in pages(size):
                    filler.put_page(page["index"], page)
                if not isinstance(filler, memci.DirectoryStorage):
                    filler.close()
                store = _open(peer, path, filling=False)
            opened[key] = store
        return opened[key]

    yield get
    for store in opened.values():
        if hasattr(store, "close"):
            store.close()


# ---- put_page, get_page, page_bytes -------------------------------------------------------------


#: Filling these stores with 10k pages, or writing them, takes seconds: `make bench` only.
SLOW_STORES = ("directory-10k", "sqlite-raw-10k", "memci-normal-10k")


@pytest.mark.parametrize(("peer", "size"), harness.cases(STORE_PEERS, SIZES, slow=SLOW_STORES))
def test_put_page(benchmark: Any, filled: Callable[[str, str], Any], peer: str, size: str) -> None:
    harness.label(benchmark, "put_page", peer, size, puts=PUTS)
    store = filled(peer, size)
    fresh = iter(all_pages()[generator.SIZES[size] :])

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (store, [next(fresh) for _ in range(PUTS)]), {}

    def put(target: Any, batch: list[Page]) -> Page:
        for page in batch:
            target.put_page(page["index"], page)
        return batch[-1]

    last = harness.measure(benchmark, put, setup)
    assert store.get_page(last["index"]) == last


@pytest.mark.parametrize(
    ("peer", "size"), harness.cases(("memci", "directory", "memory", "sqlite-raw"), SIZES, slow=SLOW_STORES)
)
def test_get_page(benchmark: Any, filled: Callable[[str, str], Any], peer: str, size: str) -> None:
    harness.label(benchmark, "get_page", peer, size, gets=GETS)
    store = filled(peer, size)
    n = generator.SIZES[size]
    wanted = random.Random(6).choices(range(1, n + 1), k=GETS)

    def get(target: Any) -> list[Page]:
        return [target.get_page(i) for i in wanted]

    got = harness.measure(benchmark, get, lambda: ((store,), {}))
    source = pages(size)
    assert got[:50] == [source[i - 1] for i in wanted[:50]]


def _disk(path: Path) -> tuple[int, int]:
    """(bytes of the files, bytes of their disk blocks) under ``path``."""
    size = blocks = 0
    for root, _, files in os.walk(path):
        for name in files:
            st = os.stat(os.path.join(root, name))
            size += st.st_size
            blocks += st.st_blocks * 512
    return size, blocks


@pytest.mark.parametrize(("peer", "size"), harness.cases(("memci", "directory", "json"), SIZES, slow=SLOW_STORES))
def test_page_bytes(benchmark: Any, tmp_path: Path, peer: str, size: str) -> None:
    harness.label(benchmark, "page_bytes", peer, size)
    source = pages(size)
    encoded = [json.dumps(p, ensure_ascii=False, separators=(",", ":")).encode() for p in source]

    def fill() -> tuple[int, int]:
        if peer == "json":
            total = sum(map(len, encoded))
            return total, total
        store = _open(peer, tmp_path, filling=True)
        for page in source:
            store.put_page(page["index"], page)
        if peer == "memci":
            store.checkpoint()
            store.close()
            return _disk(tmp_path)
        store.close()
        return _disk(tmp_path / "store" / "pages")

    total, blocks = benchmark.pedantic(fill, rounds=1, iterations=1)
    n = len(source)
    benchmark.extra_info.update(bytes_per_page=total / n, disk_bytes_per_page=blocks / n, pages=n)
    assert total >= sum(map(len, encoded))  # every store holds at least the pages' JSON


# ---- search -------------------------------------------------------------------------------------

SEARCH_PEERS = ("memci", "python", "fts5")
SEARCH_MISSING = () if has_fts5() else tuple(f"fts5-{s}" for s in SIZES)
#: Indexing 10k pages in pure Python takes seconds: `make bench` only.
SLOW_SEARCH = ("python-10k",)


def _build(target: Any, size: str, *, batch: bool) -> Any:
    """``target`` holding the page texts: given at once (``extend``) or one ``add`` a page."""
    if batch:
        target.extend(texts(size))
    else:
        for page, text in texts(size):
            target.add(page, text)
    return target


@cache
def index(peer: str, size: str) -> Any:
    make = {"memci": memci.PageSearch, "python": PyPageSearch, "fts5": Fts5}[peer]
    return _build(make(), size, batch=peer != "python")


def _scored(hits: list[Any]) -> list[tuple[int, float]]:
    """(page, score) of memci's hits or a peer's tuples, scores rounded to compare across peers."""
    pairs = ((h.page_index, h.score) if isinstance(h, memci.SearchHit) else (h[0], h[1]) for h in hits)
    return [(page, round(score, 9)) for page, score in pairs]


@pytest.mark.parametrize(("peer", "size"), harness.cases(SEARCH_PEERS, SIZES, slow=SLOW_SEARCH, missing=SEARCH_MISSING))
def test_search(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "search", peer, size, queries=QUERIES, k=K)
    built = index(peer, size)

    def run(target: Any) -> list[list[Any]]:
        return [target.search(query, K) for query in queries()]

    got = [_scored(hits) for hits in harness.measure(benchmark, run, lambda: ((built,), {}))]
    assert sum(1 for hits in got if len(hits) == K) > QUERIES // 2
    # The same BM25 as the pure-Python peer: the same pages and scores (at 10k only under `make bench`,
    # where the peer's index is built anyway).
    if peer not in ("fts5", "python") and (size == "1k" or benchmark.enabled):
        assert got == [_scored(index("python", size).search(q, K)) for q in queries()]


@pytest.mark.parametrize(
    ("peer", "size"),
    harness.cases(("memci", "memci-add", "python", "fts5"), SIZES, slow=SLOW_SEARCH, missing=SEARCH_MISSING),
)
def test_search_build(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "search_build", peer, size)
    make = {"memci": memci.PageSearch, "memci-add": memci.PageSearch, "python": PyPageSearch, "fts5": Fts5}[peer]
    built = harness.measure(benchmark, lambda: _build(make(), size, batch=peer in ("memci", "fts5")))
    if peer != "fts5":
        assert len(built) == generator.SIZES[size]
    assert built.search("cache", 1)
