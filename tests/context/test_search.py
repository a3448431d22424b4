"""PageSearch (docs/storage.md, "Search"): BM25 ranking, checked against a pure-Python reference,
the CJK tokenizer, replacement, snippets, and refusals."""

from __future__ import annotations

import memci
import pytest
import search_reference as ref
from factories import run_together
from hypothesis import given
from hypothesis import strategies as st
from memci import InvalidOperationError, MemciError, PageSearch, SearchHit
from memci.context.search import message_texts, page_text

#: Words and characters chosen so that both tokenizers agree on them (Python's isalnum and Rust's
#: is_alphanumeric differ on a few rare characters), CJK included.
WORDS = ("alpha", "Beta", "GAMMA", "delta", "x2", "数据", "数据库", "东京", "天气", "カタ", "한국", "élan", "Σοφία")
#: Forms of a few stems, and stop words: stemming and the query's stop words are the reference's.
WORDS += ("baking", "baked", "Bakes", "relational", "relate", "ponies", "pony", "hopping", "the", "What", "is")
SEPARATORS = (" ", "  ", "\n", ", ", ". ", "_", "🙂", "", "。")

texts = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=30).map(
    lambda parts: "".join(w + s for w, s in parts)
)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)


def hits(index: PageSearch, query: str, k: int = 10) -> list[tuple[int, float]]:
    return [(h.page_index, h.score) for h in index.search(query, k)]


# ---- ranking ------------------------------------------------------------------------------------


@given(
    adds=st.lists(st.tuples(st.integers(1, 12), texts), max_size=25),
    query=queries,
    k=st.integers(0, 8),
)
def test_ranking_matches_the_reference_bm25(adds: list[tuple[int, str]], query: str, k: int) -> None:
    index = PageSearch()
    pages: dict[int, str] = {}
    for page, text in adds:
        index.add(page, text)
        pages[page] = text
    assert len(index) == len(pages)
    assert hits(index, query, k) == ref.search(pages, query, k)


@given(
    adds=st.lists(st.tuples(st.integers(1, 12), texts), max_size=25),
    query=queries,
    k=st.integers(0, 8),
    weight=st.sampled_from([0.3, 0.7, 0.99]),
)
def test_neighbour_context_matches_the_reference(
    adds: list[tuple[int, str]], query: str, k: int, weight: float
) -> None:
    index = PageSearch(neighbour_weight=weight)
    pages: dict[int, str] = {}
    for page, text in adds:
        index.add(page, text)
        pages[page] = text
    assert index.neighbour_weight == weight
    assert repr(index) == f"PageSearch(<{len(pages)} pages>, neighbour_weight={weight})"
    assert hits(index, query, k) == ref.search(pages, query, k, weight)
    assert hits(index, query, 1) == ref.search(pages, query, 1), "the best page stays first"


@given(adds=st.lists(st.tuples(st.integers(1, 12), texts), max_size=25), query=queries)
def test_extend_is_add_in_order(adds: list[tuple[int, str]], query: str) -> None:
    one, many = PageSearch(), PageSearch()
    for page, text in adds:
        one.add(page, text)
    many.extend(adds)
    assert many.search(query, 10) == one.search(query, 10)


def test_many_replacements_keep_the_ranking_exact() -> None:
    index = PageSearch()
    pages: dict[int, str] = {}
    for round_ in range(6):
        for page in range(1, 60):
            text = f"page{page} round{round_} " + "common " * (page % 5) + ("数据库" if page % 7 == 0 else "")
            index.add(page, text)
            pages[page] = text
    for query in ("common", "round5 page3", "round0", "数据", "common page10 数据库"):
        assert hits(index, query, 20) == ref.search(pages, query, 20)


def test_a_rarer_term_weighs_more_and_repetition_saturates() -> None:
    index = PageSearch()
    index.add(1, "error " * 50)
    index.add(2, "error timeout")
    index.add(3, "error")
    best = index.search("error timeout", 3)
    assert [h.page_index for h in best] == [2, 1, 3]
    assert best[0].score > 2 * best[1].score  # the rare term
    assert best[1].score < 2 * best[2].score  # 50 times the term, not 50 times the score


def test_ties_go_to_the_lower_page_index() -> None:
    index = PageSearch()
    for page in (30, 4, 17):
        index.add(page, "the same text")
    assert [h.page_index for h in index.search("same", 5)] == [4, 17, 30]


def test_pages_sharing_no_term_are_not_hits() -> None:
    index = PageSearch()
    index.add(1, "alpha")
    assert index.search("beta", 5) == []
    assert index.search("   ...", 5) == []
    assert index.search("alpha", 0) == []
    assert PageSearch().search("alpha") == []


def test_re_adding_a_page_replaces_its_text() -> None:
    index = PageSearch()
    index.add(1, "about weather")
    index.add(1, "about databases")
    assert len(index) == 1
    assert index.search("weather") == []
    assert [h.page_index for h in index.search("databases")] == [1]


# ---- the tokenizer, through search --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("用户询问如何优化数据库查询", "数据库"),
        ("用户询问如何优化数据库查询", "查询"),
        ("東京の天気は晴れ", "天気"),
        ("한국어 검색", "한국어"),
        ("Read_File returned OK", "read file"),
        ("ΣΟΦΊΑ and Élan", "σοφία élan"),
        ("Python和Rust", "rust"),
    ],
)
def test_case_and_script_rules(text: str, query: str) -> None:
    index = PageSearch()
    index.add(1, text)
    index.add(2, "unrelated words only")
    assert [h.page_index for h in index.search(query)] == [1]


def test_a_cjk_bigram_beats_its_characters_apart() -> None:
    index = PageSearch()
    index.add(1, "数字和据点")  # 数 and 据, never 数据
    index.add(2, "讨论数据")
    index.add(3, "别的内容")
    assert [h.page_index for h in index.search("数据")] == [2, 1]


# ---- snippets -----------------------------------------------------------------------------------


def _squeeze(text: str) -> str:
    return " ".join(text.split())


@given(text=texts, query=queries, width=st.integers(1, 60))
def test_a_snippet_is_a_cut_of_the_text_around_a_match(text: str, query: str, width: int) -> None:
    index = PageSearch(snippet_chars=width)
    index.add(1, text)
    for hit in index.search(query, 1):
        body = hit.snippet.removeprefix("…").removesuffix("…")
        assert body in _squeeze(text)
        assert len(body) <= width
        wanted = set(ref.query_terms(query))
        matching = [t for t in ref.tokens(text) if ref.term(t) in wanted]  # the words a snippet may show
        assert set(ref.terms(body)) & wanted or width < max(map(len, matching))


def test_the_snippet_shows_the_best_passage_with_ellipses() -> None:
    filler = "nothing to see here. " * 30
    text = f"{filler}The flaky test fails because the cache index is stale.\n\n{filler}"
    index = PageSearch(snippet_chars=80)
    index.add(1, text)
    (hit,) = index.search("cache index stale")
    assert hit.snippet.startswith("…")
    assert hit.snippet.endswith("…")
    assert "the cache index is stale" in hit.snippet
    whole = PageSearch()
    whole.add(1, "short\n\ttext")
    assert whole.search("text")[0].snippet == "short text"


# ---- page_text ----------------------------------------------------------------------------------


def test_page_text_holds_the_summary_contents_blocks_and_tool_calls() -> None:
    messages = [
        {"role": "user", "content": "东京明天天气?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "21°C"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "sunny"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"q": "雨"}}]},
    ]
    text = page_text("weather question", message_texts(messages))
    for part in ("weather question", "东京明天天气", "get_weather", "21°C", "sunny", "雨"):
        assert part in text
    index = PageSearch()
    index.add(1, text)
    assert index.search("sunny get_weather")[0].page_index == 1


# ---- refusals and threads -----------------------------------------------------------------------


@pytest.mark.parametrize("page_index", [0, -1, True, 2**64, 1.0, "1", None])
def test_a_page_index_must_be_a_positive_int(page_index: object) -> None:
    index = PageSearch()
    with pytest.raises(InvalidOperationError, match="page_index"):
        index.add(page_index, "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="page_index"):
        index.extend([(1, "fine"), (page_index, "text")])  # type: ignore[list-item]
    assert len(index) == 0


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda ix: ix.add(1, b"bytes"), "text must be a str"),
        (lambda ix: ix.extend([(1, "a", None, "b")]), r"items\[0\] must be a \(page_index, text\)"),
        (lambda ix: ix.extend([(1, "a", "b")]), r"items\[0\] vector must be float32 bytes"),
        (lambda ix: ix.search(b"q"), "query must be a str"),
        (lambda ix: ix.search("q", -1), "k must be an int >= 0"),
        (lambda ix: ix.search("q", 2.0), "k must be an int"),
        (lambda ix: PageSearch(snippet_chars=0), "snippet_chars"),
        (lambda ix: PageSearch(neighbour_weight=1), "neighbour_weight must be a number from 0 to below 1"),
        (lambda ix: PageSearch(neighbour_weight=-0.1), "neighbour_weight"),
        (lambda ix: PageSearch(neighbour_weight=float("nan")), "neighbour_weight"),
        (lambda ix: PageSearch(neighbour_weight="0.5"), "neighbour_weight"),
        (lambda ix: PageSearch(neighbour_weight=True), "neighbour_weight"),
    ],
)
def test_bad_arguments_are_refused(call: object, words: str) -> None:
    index = PageSearch()
    with pytest.raises(InvalidOperationError, match=words) as info:
        call(index)  # type: ignore[operator]
    assert isinstance(info.value, MemciError)
    assert len(index) == 0


def test_a_hit_is_a_frozen_record() -> None:
    hit = SearchHit(page_index=1, score=2.0, snippet="s")
    with pytest.raises(AttributeError):
        hit.score = 3.0  # type: ignore[misc]


def test_threads_adding_and_searching_at_once() -> None:
    index = PageSearch()

    def writer(start: int) -> None:
        for page in range(start, 400, 4):
            index.add(page, f"page{page} shared text {'数据' if page % 2 else ''}")

    def reader() -> None:
        for _ in range(200):
            found = index.search("shared 数据", 5)
            assert all(h.score > 0 for h in found)

    run_together(*(lambda s=s: writer(s) for s in (1, 2, 3, 4)), reader, reader)
    assert len(index) == 399
    pages = {p: f"page{p} shared text {'数据' if p % 2 else ''}" for p in range(1, 400)}
    assert hits(index, "shared 数据 page7", 10) == ref.search(pages, "shared 数据 page7", 10)


# ---- the text rule (the core's, shared with FILTER) ----------------------------------------------


def test_every_format_gives_its_said_text_then_its_calls() -> None:
    texts = message_texts(
        [
            {"role": "assistant", "content": "checking", "tool_calls": [call_of("get_weather", '{"city": "Paris"}')]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "lookup", "input": {"q": "雨"}}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "sunny"}]},
            {"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
            {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "rain"}]},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/needle.png"}}]},
        ]
    )
    assert texts == [
        'checking\nget_weather\n{"city": "Paris"}',
        "lookup\n雨",
        "sunny",
        'get_weather\n{"city": "Oslo"}',
        "rain",
        "",
    ]


def test_search_finds_an_archived_page_by_the_tool_it_called() -> None:
    ctx = memci.ContextSystem("You are terse.", active_pages=1)
    ctx.add({"role": "user", "content": "what is the weather?"})
    ctx.add({"role": "assistant", "content": None, "tool_calls": [call_of("get_forecast", '{"city": "Reykjavik"}')]})
    ctx.add({"role": "tool", "tool_call_id": "c1", "content": "cold"})
    ctx.add({"role": "user", "content": "thanks"})  # page 1 is archived
    assert [hit.page_index for hit in ctx.search("get_forecast")] == [1]
    assert [hit.page_index for hit in ctx.search("Reykjavik")] == [1]


def call_of(name: str, arguments: str) -> dict[str, object]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
