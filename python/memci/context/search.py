"""Ranked search over archived pages: :class:`PageSearch`, BM25 in Rust.

The ranking is Okapi BM25 (k1 = 1.2, b = 0.75, Lucene's non-negative idf) over an inverted index;
text is split into lowercase word tokens for alphabetic scripts and into character unigrams and
bigrams for CJK, so ``"数据库"`` finds pages about ``数据`` and ``数据库``. Details and the exact
formula: ``docs/storage.md`` ("Search").

>>> index = PageSearch()
>>> index.add(1, "The user asked how to speed up a slow database query.")
>>> index.add(2, "We discussed REST versus GraphQL for the public API.")
>>> [hit.page_index for hit in index.search("database query")]
[1]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memci import _core
from memci.errors import InvalidOperationError

__all__ = ["PageSearch", "SearchHit", "message_text", "page_text"]

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
        raise InvalidOperationError(f"page_index must be a positive int below 2**64, got {page_index!r}")
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
            raise InvalidOperationError(f"snippet_chars must be a positive int, got {snippet_chars!r}")
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
        checked = []
        for i, item in enumerate(items):
            if not isinstance(item, tuple) or len(item) != 2:
                raise InvalidOperationError(f"items[{i}] must be a (page_index, text) tuple, got {item!r}")
            checked.append((_check_page_index(item[0]), _check_text(item[1], f"items[{i}] text")))
        self._index.add_many(checked)

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The ``k`` best pages for ``query``, best first (ties: lower index first). Pages that
        share no term with the query are not returned. O(postings of the query's terms + k log k)."""
        _check_text(query, "query")
        if type(k) is not int or k < 0:
            raise InvalidOperationError(f"k must be an int >= 0, got {k!r}")
        return [SearchHit(page, score, snippet) for page, score, snippet in self._index.search(query, k)]


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, Mapping):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        return _content_text(block.get("content"))
    if kind == "tool_use":
        return json.dumps(block.get("input"), ensure_ascii=False)
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(filter(None, (_block_text(b) for b in content)))
    return ""


def message_text(message: Mapping[str, Any]) -> str:
    """A message's searchable text: its string content, or the text of its blocks (text, tool
    results, tool-use inputs), then each tool call's name and arguments, one per line."""
    parts = [_content_text(message.get("content"))]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    return "\n".join(p for p in parts if p)


def page_text(page: Mapping[str, Any]) -> str:
    """The searchable text of a stored page: its summary, then :func:`message_text` of each
    message, one per line."""
    parts = [str(page.get("summary") or "")]
    parts += [message_text(m) for m in page.get("messages") or () if isinstance(m, Mapping)]
    return "\n".join(p for p in parts if p)
