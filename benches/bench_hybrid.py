"""Hybrid search: BM25 fused with cosine similarity over n archived pages (docs/storage.md,
"Hybrid search"), the embedder's own time excluded (each query's vector is made before the timed
run and looked up by the embedder).

- ``hybrid_search``: 100 searches (the queries of ``bench_storage``), k=5 with snippets, over n
  pages with 384-dimension vectors (random unit vectors: all-MiniLM-L6-v2's size; the cost does not
  depend on what they mean). Peers: ``memci-bm25`` (``PageSearch()``, BM25 alone), ``memci-convex``
  and ``memci-rrf`` (``PageSearch(embedder=...)`` with each fusion), ``memci-context`` (the
  default convex fusion with the neighbour context a context system searches with), ``numpy`` (the same
  hybrid written with numpy: memci's BM25 top 100, a float32 matrix product for the cosines,
  ``argpartition`` for their top 100, the convex fusion in Python).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import harness
import memci
import numpy as np
import numpy.typing as npt
import pytest
from bench_storage import K, queries, texts
from generator import SIZES
from memci.context.search import CONVERSATION_NEIGHBOUR_WEIGHT

DIM = 384
DEPTH = 100
PEERS = ("memci-bm25", "memci-convex", "memci-rrf", "memci-context", "numpy")


@cache
def vectors(size: str) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((SIZES[size], DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@cache
def query_vectors() -> dict[str, npt.NDArray[np.float32]]:
    rng = np.random.default_rng(6)
    return {q: rng.standard_normal(DIM).astype(np.float32) for q in queries()}


def lookup(texts: list[str]) -> npt.NDArray[np.float32]:
    """The embedder: each query's vector, made before the timed run."""
    made = query_vectors()
    return np.stack([made[t] for t in texts])


class NumpyHybrid:
    """The numpy peer: memci's BM25 top ``DEPTH``, numpy cosines, the convex fusion in Python."""

    def __init__(self, size: str) -> None:
        self.bm25 = memci.PageSearch()
        self.bm25.extend(texts(size))
        self.pages = np.array([page for page, _ in texts(size)])
        self.matrix = vectors(size)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        lexical = [(h.page_index, h.score) for h in self.bm25.search(query, DEPTH)]
        q = lookup([query])[0]
        cos = self.matrix @ (q / np.linalg.norm(q))
        top = np.argpartition(-cos, DEPTH)[:DEPTH]
        dense = [(int(self.pages[i]), float(cos[i])) for i in top]
        fused: dict[int, float] = {}
        for side, weight in ((dense, 0.3), (lexical, 0.7)):
            lo, hi = min(s for _, s in side), max(s for _, s in side)
            for page, s in side:
                fused[page] = fused.get(page, 0.0) + weight * ((s - lo) / (hi - lo) if hi > lo else 1.0)
        return sorted(fused.items(), key=lambda h: (-h[1], h[0]))[:k]


@cache
def index(peer: str, size: str) -> Any:
    if peer == "numpy":
        return NumpyHybrid(size)
    if peer == "memci-bm25":
        built = memci.PageSearch()
        built.extend(texts(size))
        return built
    if peer == "memci-context":
        built = memci.PageSearch(embedder=lookup, neighbour_weight=CONVERSATION_NEIGHBOUR_WEIGHT)
    else:
        built = memci.PageSearch(embedder=lookup, fusion=peer.removeprefix("memci-"), weight=0.3)
    rows = vectors(size)
    built.extend([(page, text, rows[i].tobytes()) for i, (page, text) in enumerate(texts(size))])
    return built


@pytest.mark.parametrize(("peer", "size"), harness.cases(PEERS, ("1k", "10k")))
def test_hybrid_search(benchmark: Any, peer: str, size: str) -> None:
    harness.label(benchmark, "hybrid_search", peer, size, queries=len(queries()), k=K, dim=DIM)
    built = index(peer, size)

    def run(target: Any) -> list[Any]:
        return [target.search(query, K) for query in queries()]

    got = harness.measure(benchmark, run, lambda: ((built,), {}))
    assert all(len(hits) == K for hits in got[:10] if peer != "memci-bm25")
    if peer == "memci-convex":  # the same pages as the numpy peer
        numpy_hits = [[page for page, _ in index("numpy", size).search(q, K)] for q in queries()]
        assert [[h.page_index for h in hits] for hits in got] == numpy_hits
