"""Reach on LoCoMo: can the model get to the page holding a question's answer in one tool step?

Each LoCoMo conversation is fed into a default ``ContextSystem(max_context_tokens=7000)``
(``locomo.py``: a user turn opens a page, a round ends before each), then each answerable question
(categories 1-4 with evidence turns) is asked of it. Workloads:

- ``locomo_reach`` (untimed; figures in ``extra_info`` and printed): per question category, the
  share of questions whose evidence page is in the window, on the contents page, or in the top 5 of
  the ``search_pages`` tool called with the question (one step of the model), and the share reached
  by any of the three; page-level R@1/5/10 of the tool (``k=10``) over the archive, and of each
  peer over every page's text: ``memci`` (``PageSearch``, plain BM25), ``memci-context`` (with the
  neighbour context the context system searches with), ``bm25s`` and ``rank_bm25`` (their own
  tokenizers, English stop words for bm25s as its README does). A question counts as found at k
  when any of its evidence pages is in the top k. The ``hybrid`` columns are the same for a
  ``ContextSystem(embedder=StaticEmbedder.wordllama())`` fed the same way, in the same run (its
  fusion the default); without the ``wordllama`` package they are left out.
- ``fusion_sweep`` (untimed): the hybrid system's archive (each page's searchable text and the
  vector the system stored for it) searched by BM25 alone at each neighbour weight in
  ``NEIGHBOUR_SWEEP``, by ``PageSearch(embedder=..., fusion=..., weight=...)`` with the context
  system's neighbour context for each fusion and weight in ``SWEEP``, by the former default
  (convex, ``w`` = 0.3, no neighbour context) and by cosine alone: R@1/5/10 and one-step reach
  (window, contents page, or the top 5) over every question.
- ``search_10k``: 100 LoCoMo questions searched (k=5) over 10,000 pages (LoCoMo's pages, cycled).
  Peers: ``memci`` (``PageSearch``, snippets included), ``memci-context`` (the same with neighbour
  context), ``bm25s`` (``retrieve``, scores only),
  ``rank_bm25`` (``BM25Okapi.get_scores`` and a top-5 pick).

Needs ``MEMCI_LOCOMO`` (see ``locomo.py``); skipped without it (``fusion_sweep`` also without
``wordllama``). ``python benches/bench_reach.py`` prints the reach table and the sweep.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import harness
import locomo
import memci
import numpy as np
import pytest
from memci.context.embedding import Embedder, Vectors, row_bytes
from memci.context.search import CONVERSATION_NEIGHBOUR_WEIGHT, DEFAULT_FUSION, DEFAULT_WEIGHT, Fusion

#: Pages in the timed search.
SEARCH_PAGES = 10_000
#: Questions per timed round.
QUERIES = 100
#: The fusions swept (``fusion_sweep``): the rule and its weight on the vector side.
SWEEP: list[tuple[Fusion, float]] = [
    *(("convex", w) for w in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)),
    *(("rrf", w) for w in (0.1, 0.2, 0.3, 0.4, 0.5)),
]
#: The neighbour context's weights swept with BM25 alone (``fusion_sweep``).
NEIGHBOUR_SWEEP = (0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
_PAGE_LINE = re.compile(r"^\[page (\d+)\]", re.MULTILINE)
_WORDS = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def _tool_ranks(ctx: memci.ContextSystem, question: str, k: int) -> list[int]:
    """The pages ``search_pages`` answers with, best first (the call counts their recalls)."""
    text = ctx.run_tool("search_pages", {"query": question, "k": k})
    return [int(n) for n in _PAGE_LINE.findall(text)]


Ranker = Callable[[Sequence[str], int], list[list[int]]]


def _memci_ranker(pages: dict[int, str], neighbour_weight: float = 0.0) -> Ranker:
    index = memci.PageSearch(neighbour_weight=neighbour_weight)
    index.extend(list(pages.items()))
    return lambda queries, k: [[hit.page_index for hit in index.search(q, k)] for q in queries]


def _memci_context_ranker(pages: dict[int, str]) -> Ranker:
    """``PageSearch`` as a context system searches its archive: with neighbour context."""
    return _memci_ranker(pages, CONVERSATION_NEIGHBOUR_WEIGHT)


def _bm25s_ranker(pages: dict[int, str]) -> Ranker:
    bm25s = pytest.importorskip("bm25s")
    numbers = list(pages)
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(pages.values()), stopwords="en", show_progress=False), show_progress=False)

    def rank(queries: Sequence[str], k: int) -> list[list[int]]:
        tokens = bm25s.tokenize(list(queries), stopwords="en", show_progress=False)
        found, _ = retriever.retrieve(tokens, k=min(k, len(numbers)), show_progress=False)
        return [[numbers[i] for i in row] for row in found.tolist()]

    return rank


def _rank_bm25_ranker(pages: dict[int, str]) -> Ranker:
    rank_bm25 = pytest.importorskip("rank_bm25")
    numbers = list(pages)
    index = rank_bm25.BM25Okapi([_words(t) for t in pages.values()])

    def rank(queries: Sequence[str], k: int) -> list[list[int]]:
        out = []
        for q in queries:
            scores = index.get_scores(_words(q))
            best = scores.argsort()[::-1][:k]
            out.append([numbers[i] for i in best if scores[i] > 0])
        return out

    return rank


RANKERS: dict[str, Callable[[dict[int, str]], Ranker]] = {
    "memci": _memci_ranker,
    "memci-context": _memci_context_ranker,
    "bm25s": _bm25s_ranker,
    "rank_bm25": _rank_bm25_ranker,
}


def _hit(ranks: Sequence[int], evidence: frozenset[int], k: int) -> bool:
    return any(p in evidence for p in ranks[:k])


@cache
def _wordllama() -> Embedder | None:
    """The small local model of the hybrid rows, or None without the ``wordllama`` package."""
    if not _installed("wordllama"):
        return None
    from memci.embedders import StaticEmbedder

    return StaticEmbedder.wordllama()


class _Recorder:
    """An embedder that keeps each text it was given and its vector, in order."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.texts: list[str] = []
        self.vectors: list[bytes] = []

    def __call__(self, texts: list[str]) -> Vectors:
        vectors = np.asarray(self.embedder(texts), dtype=np.float32)
        self.texts += texts
        self.vectors += row_bytes(vectors)
        return vectors


@dataclass(frozen=True, slots=True)
class _Hybrid:
    """A conversation fed into a system with an embedder: what the window and the contents page
    showed once it was fed, and each archived page as the system indexed it (text and vector)."""

    fed: locomo.Conversation
    shown: dict[str, frozenset[int]]
    archived: list[tuple[int, str, bytes]]


def _shown(ctx: memci.ContextSystem) -> dict[str, frozenset[int]]:
    """The pages in the window and on the contents page (read before any search counts a recall)."""
    return {"window": frozenset(p.index for p in ctx.pages), "contents": frozenset(e.index for e in ctx.contents)}


@cache
def hybrid_feed() -> tuple[_Hybrid, ...]:
    """Every LoCoMo conversation fed into ``ContextSystem(embedder=StaticEmbedder.wordllama())``."""
    embedder = _wordllama()
    if embedder is None:
        pytest.skip("the hybrid rows need the wordllama package (extra static)")
    out = []
    for conversation, qa in locomo.samples():
        recorder = _Recorder(embedder)
        fed = locomo.feed(conversation, qa, embedder=recorder)
        shown = _shown(fed.ctx)
        # The fits archive the oldest pages first and embed them in that order, nothing else is embedded
        # while feeding: the recorded texts are the archived pages', by ascending index.
        archived = sorted(set(fed.page_texts) - shown["window"])
        assert len(archived) == len(recorder.texts)
        out.append(_Hybrid(fed, shown, list(zip(archived, recorder.texts, recorder.vectors, strict=True))))
    return tuple(out)


@cache
def reach() -> dict[str, dict[str, float]]:
    """The reach table: one row per category and one for all, each column a share of questions."""
    rows: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    peers = {name: make for name, make in RANKERS.items() if name.startswith("memci") or _installed(name)}
    hybrid = hybrid_feed() if _wordllama() is not None else ()
    for n, conv in enumerate(locomo.feed_all()):
        systems = {"": (conv.ctx, _shown(conv.ctx))}
        if hybrid:
            systems["hybrid "] = (hybrid[n].fed.ctx, hybrid[n].shown)
        questions = [q.text for q in conv.questions]
        ranked = {name: make(conv.page_texts)(questions, 10) for name, make in peers.items()}
        for i, q in enumerate(conv.questions):
            marks: dict[str, bool] = {}
            for prefix, (ctx, shown) in systems.items():
                tool = _tool_ranks(ctx, q.text, 10)
                seen = {column: bool(pages & q.evidence) for column, pages in shown.items()}
                if not prefix:  # the hybrid system's window and contents page are the same pages
                    marks |= seen
                marks[f"{prefix}search_pages@5"] = _hit(tool, q.evidence, 5)
                marks[f"{prefix}reach"] = any(seen.values()) or marks[f"{prefix}search_pages@5"]
                marks |= {f"{prefix}tool R@{k}": _hit(tool, q.evidence, k) for k in (1, 5, 10)}
            for name, ranks in ranked.items():
                marks |= {f"{name} R@{k}": _hit(ranks[i], q.evidence, k) for k in (1, 5, 10)}
            for row in (locomo.CATEGORIES[q.category], "all"):
                for column, mark in marks.items():
                    rows[row][column].append(mark)
    order = [*locomo.CATEGORIES.values(), "all"]
    return {
        row: {"questions": float(len(rows[row]["reach"]))} | {c: sum(m) / len(m) for c, m in rows[row].items()}
        for row in order
        if row in rows
    }


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@cache
def fusion_sweep() -> dict[str, dict[str, float]]:
    """The sweep table: one row per ranking of the hybrid system's archive, over every question."""
    embedder = _wordllama()
    context = CONVERSATION_NEIGHBOUR_WEIGHT
    rankings: dict[str, Callable[[], memci.PageSearch]] = {
        f"BM25 alone, neighbours {w}": lambda w=w: memci.PageSearch(neighbour_weight=w) for w in NEIGHBOUR_SWEEP
    }
    for fusion, weight in SWEEP:
        rankings[f"{fusion} w={weight}"] = lambda f=fusion, w=weight: memci.PageSearch(
            embedder=embedder, fusion=f, weight=w, neighbour_weight=context
        )
    rankings["convex w=0.3, no neighbours"] = lambda: memci.PageSearch(embedder=embedder, fusion="convex", weight=0.3)
    rankings["cosine alone"] = lambda: memci.PageSearch(embedder=embedder, fusion="convex", weight=1.0)
    rows: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for conv in hybrid_feed():
        shown = conv.shown["window"] | conv.shown["contents"]
        for name, make in rankings.items():
            index = make()
            index.extend(conv.archived)
            for q in conv.fed.questions:
                ranks = [hit.page_index for hit in index.search(q.text, 10)]
                for k in (1, 5, 10):
                    rows[name][f"R@{k}"].append(_hit(ranks, q.evidence, k))
                rows[name]["reach"].append(bool(shown & q.evidence) or _hit(ranks, q.evidence, 5))
    return {name: {c: sum(m) / len(m) for c, m in columns.items()} for name, columns in rows.items()}


def table(rows: dict[str, dict[str, float]]) -> str:
    columns = list(next(iter(rows.values())))
    lines = [" | ".join(["category", *columns]), " | ".join(["---"] * (len(columns) + 1))]
    for row, values in rows.items():
        lines.append(
            " | ".join([row, *(f"{values[c]:.0f}" if c == "questions" else f"{values[c]:.3f}" for c in columns)])
        )
    return "\n".join(lines)


def test_locomo_reach(benchmark: Any) -> None:
    locomo.require()
    rows = benchmark.pedantic(reach, rounds=1, iterations=1)
    benchmark.extra_info.update(workload="locomo_reach", peer="memci", size="locomo", n=rows["all"]["questions"])
    benchmark.extra_info["reach"] = rows
    print("\n" + table(rows))
    assert rows["all"]["questions"] > 0
    assert rows["all"]["reach"] >= rows["all"]["search_pages@5"]


def test_fusion_sweep(benchmark: Any) -> None:
    locomo.require()
    rows = benchmark.pedantic(fusion_sweep, rounds=1, iterations=1)
    benchmark.extra_info.update(workload="fusion_sweep", peer="memci", size="locomo", n=len(rows))
    benchmark.extra_info["sweep"] = rows
    print("\n" + table(rows))
    # The sweep ranks the archive as the system's own search_pages does at the default fusion.
    assert rows[f"{DEFAULT_FUSION} w={DEFAULT_WEIGHT}"]["R@5"] == reach()["all"]["hybrid tool R@5"]


@cache
def _corpus() -> tuple[dict[int, str], list[str]]:
    """10,000 page texts (LoCoMo's pages, cycled) and 100 of its questions."""
    texts = [t for conv in locomo.feed_all() for t in conv.page_texts.values()]
    questions = [q.text for conv in locomo.feed_all() for q in conv.questions][:QUERIES]
    return {i + 1: texts[i % len(texts)] for i in range(SEARCH_PAGES)}, questions


@pytest.mark.parametrize("peer", list(RANKERS))
def test_search_10k(benchmark: Any, peer: str) -> None:
    locomo.require()
    pages, questions = _corpus()
    rank = RANKERS[peer](pages)
    benchmark.group = "search_10k"
    benchmark.extra_info.update(workload="search_10k", peer=peer, size="10k", n=len(questions))
    found = harness.measure(benchmark, lambda: rank(questions, 5))
    assert len(found) == len(questions)
    assert sum(bool(r) for r in found) > len(questions) // 2


if __name__ == "__main__":
    print(table(reach()))
    if _wordllama() is not None:
        print("\n" + table(fusion_sweep()))
