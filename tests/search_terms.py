"""The search terms of memci's BM25, in plain Python, for the pure-Python references (the tests'
``context/search_reference.py`` and the benches' ``bm25_python.py``): words stemmed by NLTK's
Porter stemmer (Martin Porter's own version of the algorithm, an implementation apart from
memci's ``rust/src/core/stem.rs``), and the query's English stop words."""

from __future__ import annotations

import re

from nltk.stem.porter import PorterStemmer

_PORTER = PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS)
_STEMMABLE = re.compile("[a-z]{3,}")
_STEMS: dict[str, str] = {}
STOP_WORDS = frozenset(
    "a about am an and are as at be been being but by can could did do does for from has have he her his how "  # noqa: SIM905
    "i if in into is it its just me my no not of on or our she should so than that the their them then there "
    "these they this to too very was we were what when where which who whom why will with would yes you your".split()
)


def term(token: str) -> str:
    """A token as the index holds it: stemmed if it is a lowercase ASCII word of 3 letters or more
    (a dict caches the stems)."""
    found = _STEMS.get(token)
    if found is None:
        found = _STEMS[token] = _PORTER.stem(token) if _STEMMABLE.fullmatch(token) else token
    return found


def query_terms(tokens: list[str]) -> list[str]:
    """A query's terms from its tokens: its stop words left out when it holds any other word."""
    content = any(t not in STOP_WORDS for t in tokens)
    return [term(t) for t in tokens if not (content and t in STOP_WORDS)]
