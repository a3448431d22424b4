"""A small pure-Python BM25, the specification :class:`memci.PageSearch` is tested against.

Written for clarity, not speed: every search recounts every page. Tokenizer: lowercase runs of
alphanumeric characters; each CJK character is a token, and with the CJK character right before
it a bigram too. Terms: lowercase ASCII words of three letters or more are stemmed, and a query's
English stop words are left out when it holds any other word (``tests/search_terms.py``). Scores:
Okapi BM25, k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5)), summed over the query's
distinct terms in query order; ties go to the lower page index. Neighbour context (weight ``w``):
a page scores the most of its own score and ``w`` times each neighbour's (page index - 1, + 1).
"""

from __future__ import annotations

import math
from collections import Counter

from search_terms import query_terms as terms_of_query
from search_terms import term

K1 = 1.2
B = 0.75
CJK_RANGES = (
    (0x3040, 0x30FF),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0x1100, 0x11FF),
    (0x3130, 0x318F),
    (0xAC00, 0xD7AF),
    (0x20000, 0x3134F),
)


def is_cjk(c: str) -> bool:
    return any(lo <= ord(c) <= hi for lo, hi in CJK_RANGES)


def tokens(text: str) -> list[str]:
    out: list[str] = []
    word: list[str] = []
    previous_cjk: str | None = None
    for c in text:
        if is_cjk(c):
            if word:
                out.append("".join(word).lower())
                word = []
            out.append(c)
            if previous_cjk is not None:
                out.append(previous_cjk + c)
            previous_cjk = c
        elif c.isalnum():
            previous_cjk = None
            word.append(c)
        else:
            previous_cjk = None
            if word:
                out.append("".join(word).lower())
                word = []
    if word:
        out.append("".join(word).lower())
    return out


def terms(text: str) -> list[str]:
    return [term(t) for t in tokens(text)]


def query_terms(query: str) -> list[str]:
    """The query's terms: its stop words left out when it holds any other word."""
    return terms_of_query(tokens(query))


def search(pages: dict[int, str], query: str, k: int, neighbour_weight: float = 0.0) -> list[tuple[int, float]]:
    """``(page, score)`` of the ``k`` best pages, best first."""
    counts = {page: Counter(terms(text)) for page, text in pages.items()}
    lengths = {page: sum(c.values()) for page, c in counts.items()}
    n = len(pages)
    if n == 0 or k == 0:
        return []
    avglen = sum(lengths.values()) / n
    scores: dict[int, float] = {}
    for wanted in dict.fromkeys(query_terms(query)):
        df = sum(1 for c in counts.values() if wanted in c)
        if df == 0:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for page, c in counts.items():
            tf = c.get(wanted, 0)
            if tf:
                norm = K1 * (1.0 - B + B * lengths[page] / avglen)
                scores[page] = scores.get(page, 0.0) + idf * (tf * (K1 + 1.0)) / (tf + norm)
    if neighbour_weight:
        own = dict(scores)
        for page in pages:
            context = [neighbour_weight * own[p] for p in (page - 1, page + 1) if p in own]
            if context:
                scores[page] = max([own.get(page, 0.0), *context])
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:k]
