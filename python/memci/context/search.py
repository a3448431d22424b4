"""Ranked search over archived pages: :class:`PageSearch`, BM25 in Rust.

The ranking is Okapi BM25 (k1 = 1.2, b = 0.75, Lucene's non-negative idf) over an inverted index;
text is split into lowercase word tokens for alphabetic scripts (English words indexed by their
Porter stem, so ``"baking"`` finds ``"baked"``; a query's stop words left out when it has other
words) and into character unigrams and bigrams for CJK, so ``"数据库"`` finds pages about ``数据``
and ``数据库``. Details, the exact formula and what was measured: ``docs/storage.md`` ("Search").

>>> index = PageSearch()
>>> index.add(1, "The user asked how to speed up a slow database query.")
>>> index.add(2, "We discussed REST versus GraphQL for the public API.")
>>> [hit.page_index for hit in index.search("database query")]
[1]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memci import _core
from memci.errors import InvalidOperationError, repr_of

__all__ = ["PageSearch", "SearchHit", "message_texts", "page_text"]

_MAX_INDEX = 2**64 - 1


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: the page, its BM25 score (higher is better) and a snippet of the page's
    text around its best match."""

    page_index: int
    score: float
    snippet: str


def _check_page_index(page_index: object) -> int:
    if type(page_index) is not int or not 1 <= page_index <= _MAX_INDEX:
        raise InvalidOperationError(f"page_index must be a positive int below 2**64, got {repr_of(page_index)}")
    return page_index


def _check_text(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise InvalidOperationError(f"{what} must be a str, got {type(text).__name__}")
    return text


class PageSearch:
    """A BM25 index of page texts, by page index. Thread-safe; the GIL is released while it works.

    ``snippet_chars`` is the length a snippet aims at (at least 1).
    """

    __slots__ = ("_index",)

    _index: _core.SearchIndex

    def __init__(self, *, snippet_chars: int = 160) -> None:
        if type(snippet_chars) is not int or snippet_chars < 1:
            raise InvalidOperationError(f"snippet_chars must be a positive int, got {repr_of(snippet_chars)}")
        self._index = _core.SearchIndex(snippet_chars)

    def __len__(self) -> int:
        """The number of pages indexed."""
        return len(self._index)

    def __repr__(self) -> str:
        return f"PageSearch(<{len(self)} pages>)"

    def add(self, page_index: int, text: str) -> None:
        """Index ``text`` as page ``page_index`` (a positive int); re-adding an index replaces
        what it held. O(tokens of the text)."""
        self._index.add(_check_page_index(page_index), _check_text(text, "text"))

    def extend(self, items: Iterable[tuple[int, str]]) -> None:
        """:meth:`add` each ``(page_index, text)`` in order (all-or-nothing: every item is checked
        first); the texts are tokenized in parallel."""
        if isinstance(items, str | bytes | dict) or not isinstance(items, Iterable):
            raise InvalidOperationError(
                f"items must be a list of (page_index, text) tuples, got {type(items).__name__}"
            )
        checked = []
        for i, item in enumerate(items):
            if not isinstance(item, tuple) or len(item) != 2:
                raise InvalidOperationError(f"items[{i}] must be a (page_index, text) tuple, got {repr_of(item)}")
            checked.append((_check_page_index(item[0]), _check_text(item[1], f"items[{i}] text")))
        self._index.add_many(checked)

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The ``k`` best pages for ``query``, best first (ties: lower index first). Pages that
        share no term with the query are not returned. O(postings of the query's terms + k log k)."""
        _check_text(query, "query")
        if type(k) is not int or k < 0:
            raise InvalidOperationError(f"k must be an int >= 0, got {repr_of(k)}")
        return [SearchHit(page, score, snippet) for page, score, snippet in self._index.search(query, k)]


def message_texts(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The searchable text of each message, by the core's one rule (the text FILTER matches; see
    ``docs/message-array.md``, "Text"): what it says, then the tools it calls, one piece per line.
    O(total size)."""
    return _core.message_texts(messages) if messages else []


def page_text(summary: str, texts: Sequence[str]) -> str:
    """The searchable text of an archived page: its summary, then the searchable text of each of
    its messages (the core's rule: ``memci._core.message_texts``), one per line."""
    return "\n".join(p for p in (summary, *texts) if p)
