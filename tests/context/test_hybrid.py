"""Hybrid search (docs/storage.md, "Hybrid search"): the Rust fusion checked against a pure-Python
reference, PageSearch(embedder=) and ContextSystem(embedder=): each page embedded once, batched,
its vector stored with the page; async embedders; bad embedder outputs refused, changing nothing."""

from __future__ import annotations

import asyncio
import copy
import pickle
from typing import Any

import hybrid_reference as ref
import memci
import numpy as np
import pytest
from fake_embedder import AsyncHashingEmbedder, HashingEmbedder
from hypothesis import given
from hypothesis import strategies as st
from memci import EmbeddingError, InvalidOperationError, PageSearch
from memci._core import VectorIndex, fuse_ranks

# ---- the fusion, against the reference ------------------------------------------------------------

scores = st.floats(-50, 50, allow_nan=False, allow_subnormal=False)


def ranked(pages: list[int], values: list[float]) -> list[tuple[int, float]]:
    return sorted(zip(pages, values, strict=False), key=lambda h: (-h[1], h[0]))


@st.composite
def ranked_lists(draw: st.DrawFn) -> list[tuple[int, float]]:
    pages = draw(st.lists(st.integers(1, 30), unique=True, max_size=20))
    return ranked(pages, draw(st.lists(scores, min_size=len(pages), max_size=len(pages))))


@given(
    lexical=ranked_lists(),
    dense=ranked_lists(),
    method=st.sampled_from(["rrf", "convex"]),
    weight=st.sampled_from([0.0, 0.25, 0.5, 0.7, 1.0]) | st.floats(0, 1),
    k=st.integers(0, 40),
)
def test_fusion_matches_the_reference(
    lexical: list[tuple[int, float]], dense: list[tuple[int, float]], method: str, weight: float, k: int
) -> None:
    assert fuse_ranks(lexical, dense, method, weight, k) == ref.fuse(lexical, dense, method, weight, k)


@given(
    vectors=st.dictionaries(
        st.integers(1, 40), st.lists(st.integers(-4, 4).map(float), min_size=3, max_size=3), max_size=25
    ),
    query=st.lists(st.integers(-4, 4).map(float), min_size=3, max_size=3),
    k=st.integers(0, 30),
)
def test_cosine_ranking_matches_the_reference(vectors: dict[int, list[float]], query: list[float], k: int) -> None:
    index = VectorIndex()
    if vectors:
        index.add_many(list(vectors), np.array(list(vectors.values()), dtype="<f4").tobytes(), 3)
    got = index.nearest(np.array(query, dtype="<f4").tobytes(), k)
    want = ref.cosine_ranking(vectors, query, k)
    assert len(got) == len(want)
    for (page, score), (want_page, want_score) in zip(got, want, strict=True):
        assert score == pytest.approx(want_score, abs=1e-5)
        # Near-ties may order differently in float32: the page at each rank scores the same.
        assert page == want_page or ref.cosine_ranking({page: vectors[page]}, query, 1)[0][1] == pytest.approx(
            want_score, abs=1e-5
        )


def test_fusion_refuses_an_unknown_method_or_a_weight_outside_0_to_1() -> None:
    with pytest.raises(InvalidOperationError, match="'rrf' or 'convex'"):
        fuse_ranks([(1, 1.0)], [], "max", 0.5, 3)
    with pytest.raises(InvalidOperationError, match="between 0 and 1"):
        fuse_ranks([(1, 1.0)], [], "rrf", 1.5, 3)


# ---- PageSearch(embedder=) ------------------------------------------------------------------------

DOCS = {
    1: "the database query was slow until we added an index",
    2: "we chose GraphQL over REST for the public API",
    3: "holiday plans: a week in Kyoto in April",
    4: "the cat sat on the mat",
}


def test_a_paraphrase_bm25_misses_is_found_by_the_vectors() -> None:
    class Synonyms(HashingEmbedder):
        def vector(self, text: str) -> Any:
            return super().vector(text.replace("vacation", "holiday").replace("japan", "kyoto"))

    plain, hybrid = PageSearch(), PageSearch(embedder=Synonyms())
    for index in (plain, hybrid):
        index.extend(DOCS.items())
    assert plain.search("vacation japan") == []
    assert [h.page_index for h in hybrid.search("vacation japan", 1)] == [3]
    assert hybrid.search("vacation japan", 1)[0].snippet.startswith("holiday plans")


def test_pages_are_embedded_once_in_one_batch_at_the_first_search() -> None:
    embedder = HashingEmbedder()
    index = PageSearch(embedder=embedder)
    index.extend(DOCS.items())
    index.add(5, "another page")
    assert embedder.calls == []
    index.search("database")
    assert embedder.calls == [[*DOCS.values(), "another page"], ["database"]]
    index.search("cat")
    assert embedder.calls[2:] == [["cat"]]


def test_a_page_given_its_vector_is_not_embedded() -> None:
    embedder = HashingEmbedder()
    index = PageSearch(embedder=embedder)
    index.add(1, DOCS[1], embedder.vector(DOCS[1]).astype("<f4").tobytes())
    embedder.calls.clear()
    assert [h.page_index for h in index.search("slow database")] == [1]
    assert embedder.calls == [["slow database"]]


def test_an_async_embedder_is_awaited() -> None:
    embedder = AsyncHashingEmbedder()
    index = PageSearch(embedder=embedder)
    index.extend(DOCS.items())
    assert [h.page_index for h in index.search("kyoto", 1)] == [3]
    assert len(embedder.calls) == 2


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        (lambda texts: None, "returned NoneType"),
        (lambda texts: "vectors", "returned str"),
        (lambda texts: [[1.0, 2.0]] * (len(texts) + 1), "vectors, expected one per text"),
        (lambda texts: [[1.0, 2.0], [1.0]][: len(texts)] + [[1.0]] * (len(texts) - 2), "one length|shape"),
        (lambda texts: [["a", "b"]] * len(texts), "not real numbers"),
        (lambda texts: [[True, False]] * len(texts), "not real numbers"),
        (lambda texts: [[]] * len(texts), "0 dimensions"),
        (lambda texts: [1.0] * len(texts), r"shape \(\d+,\)"),
        (lambda texts: [[1.0, float("nan")]] * len(texts), r"NaN.*\[0\]\[1\]"),
        (lambda texts: [[1.0, 1e300]] * len(texts), "overflowing"),
    ],
)
def test_bad_embedder_outputs_are_named_and_change_nothing(answer: Any, match: str) -> None:
    index = PageSearch(embedder=answer)
    index.extend(DOCS.items())
    with pytest.raises(EmbeddingError, match=match):
        index.search("database")
    assert len(index) == 4
    # The pages are still pending: a good embedder later embeds them all, once.
    good = HashingEmbedder()
    index._embedder = good
    assert [h.page_index for h in index.search("database", 1)] == [1]
    assert good.calls[0] == list(DOCS.values())


def test_vectors_of_another_dimension_later_are_refused() -> None:
    dims = iter([4, 4, 5])
    index = PageSearch(embedder=lambda texts: np.ones((len(texts), next(dims))))
    index.extend(DOCS.items())
    index.search("x")
    with pytest.raises(EmbeddingError, match="5 dimensions, but the vectors it made before have 4"):
        index.search("x")


def test_page_search_refuses_bad_settings() -> None:
    with pytest.raises(InvalidOperationError, match="embedder must be a callable"):
        PageSearch(embedder="openai")  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="fusion must be"):
        PageSearch(fusion="max")  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="weight must be"):
        PageSearch(weight=2)
    with pytest.raises(EmbeddingError, match="no embedder"):
        PageSearch().embed(["x"])


@pytest.mark.parametrize("fusion", ["rrf", "convex"])
def test_weight_0_is_bm25_order_and_weight_1_cosine_order(fusion: Any) -> None:
    embedder = HashingEmbedder()
    lexical, dense = (
        PageSearch(embedder=embedder, fusion=fusion, weight=0),
        PageSearch(embedder=embedder, fusion=fusion, weight=1),
    )
    plain = PageSearch()
    for index in (lexical, dense, plain):
        index.extend(DOCS.items())
    query = "the slow cat"
    bm25 = [h.page_index for h in plain.search(query, 10)]
    assert [h.page_index for h in lexical.search(query, 10)][: len(bm25)] == bm25
    vectors = {p: embedder.vector(t).tolist() for p, t in DOCS.items()}
    cosine = [p for p, _ in ref.cosine_ranking(vectors, embedder.vector(query).tolist(), 10)]
    assert [h.page_index for h in dense.search(query, 10)] == cosine


# ---- ContextSystem(embedder=) --------------------------------------------------------------------


def converse(ctx: memci.ContextSystem, turns: int) -> None:
    for n in range(1, turns + 1):
        ctx.add({"role": "user", "content": f"question {n} about topic{n}"})
        ctx.add({"role": "assistant", "content": f"answer {n} mentions word{n}"})
        ctx.end_round()


def test_each_archived_page_is_embedded_once_and_stored_with_its_vector() -> None:
    embedder = HashingEmbedder()
    store = memci.MemoryStorage()
    ctx = memci.ContextSystem("sys", active_pages=2, storage=store, embedder=embedder)
    converse(ctx, 6)
    assert embedder.texts == 4  # pages 1 to 4 archived, one call each (one page leaves per add)
    ctx.save()
    for index in store.page_indices():
        page = store.get_page(index)
        assert page is not None
        vector = np.frombuffer(memci.context.page.ArchivedPage.from_dict(page, index).vector or b"", "<f4")
        text = embedder.calls[index - 1][0]
        assert np.array_equal(vector, embedder.vector(text))
    assert [h.page_index for h in ctx.search("topic3", 1)] == [3]


def test_pages_archived_together_are_embedded_in_one_call() -> None:
    embedder = HashingEmbedder()
    ctx = memci.ContextSystem("sys", active_pages=10, embedder=embedder)
    converse(ctx, 5)
    ctx.clear()
    assert len(embedder.calls) == 1
    assert len(embedder.calls[0]) == 5


def test_without_an_embedder_pages_are_stored_as_before() -> None:
    store = memci.MemoryStorage()
    ctx = memci.ContextSystem("sys", active_pages=1, storage=store)
    converse(ctx, 3)
    ctx.save()
    assert all("vector" not in (store.get_page(i) or {}) for i in store.page_indices())


def test_a_reload_embeds_only_queries() -> None:
    store = memci.MemoryStorage()
    ctx = memci.ContextSystem("sys", active_pages=1, storage=store, embedder=HashingEmbedder())
    converse(ctx, 5)
    ctx.save()
    again = HashingEmbedder()
    loaded = memci.ContextSystem.load(store, embedder=again)
    assert [h.page_index for h in loaded.search("word2", 1)] == [2]
    assert again.calls == [["word2"]]


def test_an_old_store_is_embedded_lazily_once() -> None:
    store = memci.MemoryStorage()
    ctx = memci.ContextSystem("sys", active_pages=1, storage=store)
    converse(ctx, 5)
    ctx.save()
    embedder = HashingEmbedder()
    loaded = memci.ContextSystem.load(store, embedder=embedder)
    assert embedder.calls == []
    loaded.search("topic2")
    loaded.search("topic3")
    assert [len(call) for call in embedder.calls] == [4, 1, 1]
    converse(loaded, 1)  # archives page 5: its own vector, at once
    loaded.save()
    assert "vector" in (store.get_page(5) or {})


def test_a_failing_embedder_leaves_the_system_as_it_was() -> None:
    answers: list[Any] = []

    def flaky(texts: list[str]) -> Any:
        return answers.pop(0) if answers else HashingEmbedder()(texts)

    ctx = memci.ContextSystem("sys", active_pages=1, embedder=flaky)
    ctx.add({"role": "user", "content": "q1"})
    ctx.add({"role": "assistant", "content": "a1"})
    before = ctx.to_state()
    answers.append([[float("inf")]])
    with pytest.raises(EmbeddingError, match="infinite"):
        ctx.add({"role": "user", "content": "q2"})
    assert ctx.to_state() == before
    answers.append([[1.0], [2.0]])
    with pytest.raises(EmbeddingError, match="2 vectors, expected one per text"):
        ctx.extend([{"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}])
    assert ctx.to_state() == before
    ctx.add({"role": "user", "content": "q2"})
    assert [h.page_index for h in ctx.search("a1", 1)] == [1]


def test_copies_pickles_and_unsaved_state_keep_the_embedder_and_vectors(tmp_path: Any) -> None:
    embedder = HashingEmbedder()
    ctx = memci.ContextSystem("sys", active_pages=1, storage=memci.SqliteStorage(tmp_path / "s.db"), embedder=embedder)
    converse(ctx, 3)
    state = ctx.to_state()
    assert all("vector" in page for page in state["unsaved_pages"])
    calls = len(embedder.calls)
    twin = copy.copy(ctx)
    assert [h.page_index for h in twin.search("topic1", 1)] == [1]
    assert embedder.calls[calls:] == [["topic1"]]
    revived = pickle.loads(pickle.dumps(ctx))
    assert revived.search("topic2", 1)[0].page_index == 2
    ctx.clear(forget=True)
    converse(ctx, 2)
    assert ctx.search("topic1", 1)[0].page_index > 3


def test_the_sync_system_awaits_an_async_embedder_outside_a_loop() -> None:
    embedder = AsyncHashingEmbedder()
    ctx = memci.ContextSystem("sys", active_pages=1, embedder=embedder)
    converse(ctx, 3)
    assert ctx.search("topic1", 1)[0].page_index == 1


def test_the_async_system_awaits_an_async_embedder_on_its_loop() -> None:
    async def main() -> None:
        embedder = AsyncHashingEmbedder()
        store = memci.MemoryStorage()
        ctx = memci.AsyncContextSystem("sys", active_pages=1, storage=store, embedder=embedder)
        for n in range(1, 4):
            await ctx.add({"role": "user", "content": f"question {n} about topic{n}"})
            await ctx.end_round()
        assert [h.page_index for h in await ctx.search("topic2", 1)] == [2]
        await ctx.save()
        again = AsyncHashingEmbedder()
        loaded = await memci.AsyncContextSystem.load(store, embedder=again)
        assert [h.page_index for h in await loaded.search("topic1", 1)] == [1]
        assert again.calls == [["topic1"]]

    asyncio.run(main())


def test_context_system_refuses_an_embedder_that_is_not_callable() -> None:
    with pytest.raises(InvalidOperationError, match="ContextSystem: embedder must be a callable"):
        memci.ContextSystem(embedder=3)  # type: ignore[arg-type]
