"""Pure-Python hybrid ranking, the specification ``memci._core.fuse_ranks`` and the cosine side of
:class:`memci.PageSearch` are tested against (docs/storage.md, "Hybrid search")."""

from __future__ import annotations

import math

RRF_C = 60.0


def cosine_ranking(vectors: dict[int, list[float]], query: list[float], k: int) -> list[tuple[int, float]]:
    """The ``k`` pages nearest ``query`` by cosine similarity (a zero vector: 0), best first, ties
    to the lower page."""

    def cos(v: list[float]) -> float:
        nv, nq = math.sqrt(sum(x * x for x in v)), math.sqrt(sum(x * x for x in query))
        return 0.0 if nv == 0 or nq == 0 else sum(a * b for a, b in zip(v, query, strict=True)) / (nv * nq)

    scored = [(page, cos(v)) for page, v in vectors.items()]
    return sorted(scored, key=lambda h: (-h[1], h[0]))[:k]


def fuse(
    lexical: list[tuple[int, float]], dense: list[tuple[int, float]], method: str, weight: float, k: int
) -> list[tuple[int, float]]:
    """``lexical`` and ``dense`` (best first) fused: reciprocal ranks or min-max normalised scores,
    ``weight`` on the dense side; the ``k`` best, ties to the lower page."""
    fused: dict[int, float] = {}

    def add(page: int, score: float) -> None:
        fused[page] = fused.get(page, 0.0) + score

    if method == "rrf":
        for rank, (page, _) in enumerate(dense, 1):
            add(page, weight * (1.0 / (RRF_C + rank)))
        for rank, (page, _) in enumerate(lexical, 1):
            add(page, (1.0 - weight) * (1.0 / (RRF_C + rank)))
    else:
        for side, w in ((dense, weight), (lexical, 1.0 - weight)):
            if not side:
                continue
            lo, hi = min(s for _, s in side), max(s for _, s in side)
            for page, s in side:
                add(page, w * ((s - lo) / (hi - lo) if hi > lo else 1.0))
    return sorted(fused.items(), key=lambda h: (-h[1], h[0]))[:k]
