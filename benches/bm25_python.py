"""The pure-Python peer of :class:`memci.PageSearch`: the same BM25 (k1 1.2, b 0.75, Lucene idf,
distinct query terms in query order, ties to the lower page) and the same terms
(``tests/search_terms.py``: words stemmed, a query's stop words left out), written to be fast in
Python: a regex finds the runs (CJK, or other alphanumerics), each distinct word is stemmed once (a
dict caches the stems), an inverted index of dicts holds term frequencies, ``heapq.nlargest`` picks
the top k, and a snippet is cut around the first match of the best term. Same pages and scores as
memci (checked by the benches).
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter

from search_terms import query_terms as terms_of_query
from search_terms import term

K1 = 1.2
B = 0.75
_CJK = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af\U00020000-\U0003134f"
)
_RUNS = re.compile(rf"([{_CJK}]+)|((?:(?![{_CJK}])[^\W_])+)")


def terms(text: str) -> list[str]:
    return [term(t) for t in tokens(text)]


def tokens(text: str) -> list[str]:
    out: list[str] = []
    for cjk, word in _RUNS.findall(text):
        if word:
            out.append(word.lower())
            continue
        previous = ""
        for c in cjk:
            out.append(c)
            if previous:
                out.append(previous + c)
            previous = c
    return out


class PyPageSearch:
    """An inverted index of page texts with BM25 ranking and snippets."""

    def __init__(self, snippet_chars: int = 160) -> None:
        self.snippet_chars = snippet_chars
        self.postings: dict[str, dict[int, int]] = {}
        self.lengths: dict[int, int] = {}
        self.texts: dict[int, str] = {}
        self.total = 0

    def __len__(self) -> int:
        return len(self.lengths)

    def add(self, page: int, text: str) -> None:
        if page in self.texts:
            for old in set(terms(self.texts[page])):
                del self.postings[old][page]
            self.total -= self.lengths[page]
        found = terms(text)
        for new, tf in Counter(found).items():
            self.postings.setdefault(new, {})[page] = tf
        self.lengths[page] = len(found)
        self.texts[page] = text
        self.total += len(found)

    def search(self, query: str, k: int = 5) -> list[tuple[int, float, str]]:
        n = len(self.lengths)
        if not n or not k:
            return []
        avglen = self.total / n
        lengths = self.lengths
        scores: dict[int, float] = {}
        best_term, best_idf = "", -1.0
        for wanted in dict.fromkeys(terms_of_query(tokens(query))):
            postings = self.postings.get(wanted)
            if not postings:
                continue
            df = len(postings)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            if idf > best_idf:
                best_term, best_idf = wanted, idf
            for page, tf in postings.items():
                norm = K1 * (1.0 - B + B * lengths[page] / avglen)
                scores[page] = scores.get(page, 0.0) + idf * (tf * (K1 + 1.0)) / (tf + norm)
        top = heapq.nlargest(k, scores.items(), key=lambda item: (item[1], -item[0]))
        return [(page, score, self.snippet(self.texts[page], best_term)) for page, score in top]

    def snippet(self, text: str, term: str) -> str:
        at = max(text.lower().find(term), 0)
        start = max(at - self.snippet_chars // 4, 0)
        return " ".join(text[start : start + self.snippet_chars].split())
