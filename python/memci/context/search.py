"""Ranked search over archived pages: :class:`PageSearch`, BM25 in Rust, fused with the cosine
similarity of page vectors when an embedder is given (hybrid search).

The ranking is Okapi BM25 (k1 = 1.2, b = 0.75, Lucene's non-negative idf) over an inverted index;
text is split into lowercase word tokens for alphabetic scripts (English words indexed by their
Porter stem, so ``"baking"`` finds ``"baked"``; a query's stop words left out when it has other
words) and into character unigrams and bigrams for CJK, so ``"数据库"`` finds pages about ``数据``
and ``数据库``. Details, the exact formula and what was measured: ``docs/storage.md`` ("Search").
With ``embedder=`` (:mod:`memci.context.embedding`) each page's text is embedded too, and a query
ranks pages by BM25 and by cosine similarity, the two lists fused in Rust (``docs/storage.md``,
"Hybrid search").

>>> index = PageSearch()
>>> index.add(1, "The user asked how to speed up a slow database query.")
>>> index.add(2, "We discussed REST versus GraphQL for the public API.")
>>> [hit.page_index for hit in index.search("database query")]
[1]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memci import _core
from memci.context.embedding import Embedder, checked_embedder, embed, row_bytes
from memci.errors import EmbeddingError, InvalidOperationError, repr_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CONVERSATION_NEIGHBOUR_WEIGHT",
    "DEFAULT_FUSION",
    "DEFAULT_WEIGHT",
    "Fusion",
    "PageSearch",
    "SearchHit",
    "message_texts",
    "page_text",
]

_MAX_INDEX = 2**64 - 1

#: The fusion rules: reciprocal-rank fusion, or a convex combination of min-max normalised scores.
Fusion = Literal["rrf", "convex"]
#: The default fusion and its weight on the vector side (measured: ``docs/storage.md``, "Hybrid search").
DEFAULT_FUSION: Fusion = "convex"
DEFAULT_WEIGHT = 0.2
#: How many of the best pages by BM25 and by cosine are fused (each side), at least ``k``.
FUSION_DEPTH = 100
#: The neighbour context a context system searches its archive with: consecutive pages of a
#: conversation share a topic (measured: ``docs/storage.md``, "Neighbour context").
CONVERSATION_NEIGHBOUR_WEIGHT = 0.7


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: the page, its score (higher is better: BM25, or the fused score of a
    hybrid search) and a snippet of the page's text around its best match."""

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
    """A BM25 index of page texts, by page index, with page vectors when an ``embedder`` is given.
    Thread-safe; the GIL is released while it works.

    ``snippet_chars`` is the length a snippet aims at (at least 1). ``neighbour_weight`` (at least 0,
    below 1; 0, plain BM25, by default): a page scores at least that share of its better neighbour's
    (``page_index`` - 1 and + 1) own BM25 score, so the page after (or before) the one that names
    the query's words is found too, and no page passes one whose own score beats its own best (the
    best page stays first). ``embedder``: a callable from a
    list of texts to one vector per text, sync or async (:mod:`memci.context.embedding`); then
    :meth:`search` fuses BM25 with cosine similarity by ``fusion`` (``"rrf"``: reciprocal-rank
    fusion; ``"convex"``: a convex combination of min-max normalised scores) with ``weight`` on the
    vector side (0 to 1). A page added without its vector is embedded at the next search, with
    every other such page, in one call.
    """

    __slots__ = ("_embedder", "_fusion", "_index", "_late", "_pending", "_vectors", "_weight")

    _index: _core.SearchIndex

    def __init__(
        self,
        *,
        snippet_chars: int = 160,
        embedder: Embedder | None = None,
        fusion: Fusion = DEFAULT_FUSION,
        weight: float = DEFAULT_WEIGHT,
        neighbour_weight: float = 0.0,
    ) -> None:
        if type(snippet_chars) is not int or snippet_chars < 1:
            raise InvalidOperationError(f"snippet_chars must be a positive int, got {repr_of(snippet_chars)}")
        if type(neighbour_weight) not in (int, float) or not 0 <= neighbour_weight < 1:
            raise InvalidOperationError(
                f"PageSearch: neighbour_weight must be a number from 0 to below 1, got {repr_of(neighbour_weight)}"
            )
        if fusion not in ("rrf", "convex"):
            raise InvalidOperationError(f"PageSearch: fusion must be 'rrf' or 'convex', got {repr_of(fusion)}")
        if type(weight) not in (int, float) or not 0 <= weight <= 1:
            raise InvalidOperationError(f"PageSearch: weight must be a number from 0 to 1, got {repr_of(weight)}")
        self._embedder = checked_embedder(embedder, "PageSearch")
        self._fusion: Fusion = fusion
        self._weight = float(weight)
        self._index = _core.SearchIndex(snippet_chars, float(neighbour_weight))
        self._vectors = _core.VectorIndex()
        #: Pages indexed without their vector, by index: their texts, embedded at the next search.
        self._pending: dict[int, str] = {}
        #: The vectors made for pages indexed without one, by index, until the owner has stored them.
        self._late: dict[int, bytes] = {}

    def __len__(self) -> int:
        """The number of pages indexed."""
        return len(self._index)

    def __repr__(self) -> str:
        hybrid = f", {len(self._vectors)} vectors" if self._embedder is not None else ""
        context = f", neighbour_weight={self.neighbour_weight}" if self.neighbour_weight else ""
        return f"PageSearch(<{len(self)} pages{hybrid}>{context})"

    @property
    def embedder(self) -> Embedder | None:
        """The embedder, or None (BM25 alone)."""
        return self._embedder

    @property
    def neighbour_weight(self) -> float:
        """The share of its better neighbour's score a page scores at least (0: none)."""
        return self._index.neighbour_weight

    def add(self, page_index: int, text: str, vector: bytes | None = None) -> None:
        """Index ``text`` as page ``page_index`` (a positive int); re-adding an index replaces
        what it held. ``vector``: the page's vector (little-endian float32 bytes, as
        :meth:`embed` makes), else it is embedded at the next search. O(tokens of the text)."""
        self.extend([(page_index, text, vector)])

    def extend(self, items: Iterable[tuple[int, str] | tuple[int, str, bytes | None]]) -> None:
        """:meth:`add` each ``(page_index, text)`` or ``(page_index, text, vector)`` in order
        (all-or-nothing: every item is checked first); the texts are tokenized in parallel."""
        if isinstance(items, str | bytes | dict) or not isinstance(items, Iterable):
            raise InvalidOperationError(
                f"items must be a list of (page_index, text) tuples, got {type(items).__name__}"
            )
        checked: list[tuple[int, str]] = []
        vectors: dict[int, bytes] = {}
        for i, item in enumerate(items):
            if not isinstance(item, tuple) or len(item) not in (2, 3):
                raise InvalidOperationError(f"items[{i}] must be a (page_index, text) tuple, got {repr_of(item)}")
            page = _check_page_index(item[0])
            checked.append((page, _check_text(item[1], f"items[{i}] text")))
            vector = item[2] if len(item) == 3 else None
            if vector is not None:
                if not isinstance(vector, bytes) or not vector or len(vector) % 4:
                    raise InvalidOperationError(f"items[{i}] vector must be float32 bytes, got {repr_of(vector)}")
                vectors[page] = vector
            else:
                vectors.pop(page, None)
        if self._embedder is not None and vectors:
            self._add_vectors(vectors)
        self._index.add_many(checked)
        if self._embedder is not None:
            for page, text in checked:
                self._late.pop(page, None)
                if page in vectors:
                    self._pending.pop(page, None)
                else:
                    self._pending[page] = text

    def _add_vectors(self, vectors: dict[int, bytes]) -> None:
        """Store the vectors of pages of the index's dimension (the first vector's while it has
        none); a vector of another dimension (written by another embedder) is dropped from
        ``vectors``, so its page is embedded again."""
        dim = self._vectors.dim or len(next(iter(vectors.values()))) // 4
        for page in [page for page, vector in vectors.items() if len(vector) != dim * 4]:
            del vectors[page]
        self._vectors.add_many(list(vectors), b"".join(vectors.values()), dim)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """The embedder's vectors of ``texts``, checked (:func:`memci.context.embedding.embed`), as
        a float32 array of one row per text; :class:`~memci.EmbeddingError` if it has none."""
        if self._embedder is None:
            raise EmbeddingError("PageSearch.embed: this index has no embedder")
        return embed(self._embedder, _texts("embed", texts), self._vectors.dim)

    def stored_vectors(self, texts: list[str]) -> list[bytes | None]:
        """Each text's vector as a page stores it (one call of the embedder for them all), or None
        each without an embedder. :class:`~memci.EmbeddingError` when the embedder's answer is bad."""
        texts = _texts("stored_vectors", texts)
        if self._embedder is None or not texts:
            return [None] * len(texts)
        return list(row_bytes(self.embed(texts)))

    def embed_pending(self) -> int:
        """Embed every page indexed without its vector, in one call of the embedder; the number of
        pages embedded. If the embedder fails, they stay pending and the error propagates."""
        if not self._pending:
            return 0
        pages = list(self._pending)
        vectors = self.embed(list(self._pending.values()))
        self._vectors.add_many(pages, vectors.astype("<f4", copy=False).tobytes(), vectors.shape[1])
        self._late.update(zip(pages, row_bytes(vectors), strict=True))
        self._pending.clear()
        return len(pages)

    def late_vectors(self) -> dict[int, bytes]:
        """The vectors :meth:`embed_pending` made (pages indexed without one), by page index, that
        :meth:`drop_late_vectors` has not dropped: what an owner that stores pages writes back, so
        that they are embedded once. A copy; O(those pages)."""
        return dict(self._late)

    def drop_late_vectors(self, pages: Iterable[int]) -> None:
        """Forget that the vectors of ``pages`` (page indices) were made late: their owner stored
        them. All-or-nothing: every index is checked first."""
        if isinstance(pages, str | bytes | dict) or not isinstance(pages, Iterable):
            raise InvalidOperationError(f"pages must be a list of page indices, got {type(pages).__name__}")
        for page in [_check_page_index(page) for page in pages]:
            self._late.pop(page, None)

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The ``k`` best pages for ``query``, best first (ties: lower index first). BM25 alone:
        pages that share no term with the query are not returned (but for the neighbours of hits,
        with a ``neighbour_weight``); O(postings of the query's terms + k log k). Hybrid: the
        query is embedded (one call), pages still without a vector first (one more); the best by
        BM25 and by cosine similarity are fused; O(postings + pages * dim)."""
        _check_text(query, "query")
        if type(k) is not int or k < 0:
            raise InvalidOperationError(f"k must be an int >= 0, got {repr_of(k)}")
        if self._embedder is None or k == 0 or not len(self):
            return [SearchHit(page, score, snippet) for page, score, snippet in self._index.search(query, k)]
        self.embed_pending()
        query_vector = self.embed([query])[0].astype("<f4", copy=False).tobytes()
        found = _core.hybrid_search(
            self._index, self._vectors, query, query_vector, k, self._fusion, self._weight, FUSION_DEPTH
        )
        return [SearchHit(page, score, snippet) for page, score, snippet in found]


def message_texts(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The searchable text of each message, by the core's one rule (the text FILTER matches; see
    ``docs/message-array.md``, "Text"): what it says, then the tools it calls, one piece per line.
    O(total size)."""
    return _core.message_texts(messages) if messages else []


def page_text(summary: str, texts: Sequence[str]) -> str:
    """The searchable text of an archived page: its summary, then the searchable text of each of
    its messages (the core's rule: ``memci._core.message_texts``), one per line."""
    return "\n".join(p for p in (summary, *texts) if p)


def _texts(method: str, texts: object) -> list[str]:
    """``texts`` if it is a list of strings, else :class:`~memci.InvalidOperationError`."""
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise InvalidOperationError(f"PageSearch.{method}: texts must be a list of str, got {repr_of(texts)}")
    return texts
