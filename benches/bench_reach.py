"""Reach on LoCoMo: can the model get to the page holding a question's answer in one tool step?

Each LoCoMo conversation is fed into a default ``ContextSystem(max_context_tokens=7000)``
(``locomo.py``: a user turn opens a page, a round ends before each), then each answerable question
(categories 1-4 with evidence turns) is asked of it. Workloads:

- ``locomo_reach`` (untimed; figures in ``extra_info`` and printed): per question category, the
  share of questions whose evidence page is in the window, on the contents page, or in the top 5 of
  the ``search_pages`` tool called with the question (one step of the model), and the share reached
  by any of the three; page-level R@1/5/10 of the tool (``k=10``) over the archive, and of each
  peer over every page's text: ``memci`` (``PageSearch``), ``bm25s`` and ``rank_bm25`` (their own
  tokenizers, English stop words for bm25s as its README does). A question counts as found at k
  when any of its evidence pages is in the top k.
- ``search_10k``: 100 LoCoMo questions searched (k=5) over 10,000 pages (LoCoMo's pages, cycled).
  Peers: ``memci`` (``PageSearch``, snippets included), ``bm25s`` (``retrieve``, scores only),
  ``rank_bm25`` (``BM25Okapi.get_scores`` and a top-5 pick).

Needs ``MEMCI_LOCOMO`` (see ``locomo.py``); skipped without it. ``python benches/bench_reach.py``
prints the reach table.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import harness
import locomo
import memci
import pytest

#: Pages in the timed search.
SEARCH_PAGES = 10_000
#: Questions per timed round.
QUERIES = 100
_PAGE_LINE = re.compile(r"^\[page (\d+)\]", re.MULTILINE)
_WORDS = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def _tool_ranks(ctx: memci.ContextSystem, question: str, k: int) -> list[int]:
    """The pages ``search_pages`` answers with, best first (the call counts their recalls)."""
    text = ctx.run_tool("search_pages", {"query": question, "k": k})
    return [int(n) for n in _PAGE_LINE.findall(text)]


Ranker = Callable[[Sequence[str], int], list[list[int]]]


def _memci_ranker(pages: dict[int, str]) -> Ranker:
    index = memci.PageSearch()
    index.extend(list(pages.items()))
    return lambda queries, k: [[hit.page_index for hit in index.search(q, k)] for q in queries]


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
    "bm25s": _bm25s_ranker,
    "rank_bm25": _rank_bm25_ranker,
}


def _hit(ranks: Sequence[int], evidence: frozenset[int], k: int) -> bool:
    return any(p in evidence for p in ranks[:k])


@cache
def reach() -> dict[str, dict[str, float]]:
    """The reach table: one row per category and one for all, each column a share of questions."""
    rows: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    peers = {name: make for name, make in RANKERS.items() if name == "memci" or _installed(name)}
    for conv in locomo.feed_all():
        ctx = conv.ctx
        window = {p.index for p in ctx.pages}
        contents = {e.index for e in ctx.contents}  # both read before any search counts a recall
        questions = [q.text for q in conv.questions]
        ranked = {name: make(conv.page_texts)(questions, 10) for name, make in peers.items()}
        for i, q in enumerate(conv.questions):
            tool = _tool_ranks(ctx, q.text, 10)
            marks = {
                "window": bool(window & q.evidence),
                "contents": bool(contents & q.evidence),
                "search_pages@5": _hit(tool, q.evidence, 5),
            }
            marks["reach"] = any(marks.values())
            marks |= {f"tool R@{k}": _hit(tool, q.evidence, k) for k in (1, 5, 10)}
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


def table(rows: dict[str, dict[str, float]]) -> str:
    columns = list(rows["all"])
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
