"""Summaries: the default extractive summarizer, cutting on character boundaries, and the adapter
over any ``str -> str`` callable."""

from __future__ import annotations

import unicodedata

import memci
import pytest
from context_helpers import assistant, calling, interaction, make, tool, user
from hypothesis import given
from hypothesis import strategies as st
from memci.context.summary import (
    ELLIPSIS,
    CallableSummarizer,
    ExtractiveSummarizer,
    PageSummary,
    as_summarizer,
    cut,
    first_sentence,
    summarize_read,
)


def page_of(*messages: dict[str, object]) -> memci.Page:
    return memci.Page.of(7, list(messages))  # type: ignore[arg-type]


# ---- cutting -----------------------------------------------------------------------------------


def test_short_text_is_left_alone():
    assert cut("hello", 5) == "hello"
    assert cut("", 3) == ""


def test_long_text_is_cut_with_an_ellipsis_within_the_limit():
    assert cut("abcdefghij", 5) == "abcd" + ELLIPSIS
    assert cut("hello world, again", 7) == "hello" + ELLIPSIS  # the space before the cut goes


def test_cjk_is_cut_by_characters_not_bytes():
    text = "数据库查询优化的建议很多"
    assert cut(text, 6) == "数据库查询" + ELLIPSIS


def test_a_letter_keeps_its_combining_marks():
    text = "cafe\u0301 au lait"  # "café" with a combining acute accent
    assert cut(text, 5) == "caf" + ELLIPSIS  # not "cafe" without its accent
    assert cut(text, 6) == "cafe\u0301" + ELLIPSIS


def test_an_emoji_sequence_is_never_split():
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # man ZWJ woman ZWJ girl
    text = "ok " + family + " done"
    for limit in range(4, 9):
        out = cut(text, limit)
        assert out in ("ok" + ELLIPSIS, "ok " + family + ELLIPSIS), out
    thumbs = "\U0001f44d\U0001f3fd"  # thumbs up, medium skin tone
    assert cut("a" + thumbs + "bc", 3) == "a" + ELLIPSIS


@given(st.text(), st.integers(min_value=1, max_value=40))
def test_a_cut_never_exceeds_its_limit_and_keeps_a_prefix(text: str, limit: int):
    out = cut(text, limit)
    assert len(out) <= max(limit, 0)
    if out.endswith(ELLIPSIS) and out != text:
        kept = out[: -len(ELLIPSIS)]
        assert text.startswith(kept)
        rest = text[len(kept.rstrip()) :] if kept else text
        if kept and rest:
            assert unicodedata.category(rest[0]) not in ("Mn", "Mc", "Me")


# ---- sentences -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Hello there. How are you?", "Hello there."),
        ("Version 3.11 is out! Great.", "Version 3.11 is out!"),
        ("你好。今天怎么样\uff1f", "你好。"),
        ("line one\nline two. more", "line one"),
        ("  spaced   out  words  ", "spaced out words"),
        ("no end", "no end"),
    ],
)
def test_first_sentence(text: str, first: str):
    assert first_sentence(text) == first


# ---- the extractive summarizer --------------------------------------------------------------------


def test_entries_are_role_tagged_first_sentences():
    summary = ExtractiveSummarizer().summarize(page_of(*interaction(4)))
    assert summary.summary == "Question 4: what about item 4?"
    assert summary.entry_summaries == (
        "user: Question 4: what about item 4?",
        'assistant: → lookup({"q": "x"})',
        "tool: item 4 is fine",
        "assistant: Answer 4: item 4 is fine.",
    )


def test_long_entries_are_cut_to_the_limits():
    long = "word " * 100
    summary = ExtractiveSummarizer(entry_chars=20, page_chars=10).summarize(page_of(user(long)))
    assert len(summary.entry_summaries[0]) == 20
    assert summary.entry_summaries[0].endswith(ELLIPSIS)
    assert len(summary.summary) == 10


def test_blocks_and_tool_uses_are_summarised_from_their_text():
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check. One moment."},
            {"type": "tool_use", "id": "t", "name": "weather", "input": {"city": "東京"}},
        ],
    }
    summary = ExtractiveSummarizer().summarize(page_of(user("天气\uff1f"), message))
    assert summary.entry_summaries[1] == 'assistant: Let me check. → weather({"city": "東京"})'
    assert summary.summary == "天气\uff1f"


def test_a_page_without_a_user_message_is_named_by_its_first_entry():
    summary = ExtractiveSummarizer().summarize(page_of({"role": "assistant", "content": "Welcome back."}))
    assert summary.summary == "Welcome back."


PNG_URL = "data:image/png;base64,iVBORw0KGgo="


@pytest.mark.parametrize(
    ("content", "holding"),
    [
        ([{"type": "image_url", "image_url": {"url": PNG_URL}}], "an image"),  # chat completions
        ([{"type": "image", "source": {"type": "url", "url": "https://x/a.png"}}], "an image"),  # Anthropic
        ([{"type": "input_image", "image_url": PNG_URL}, {"type": "input_image", "image_url": PNG_URL}], "2 images"),
        ([{"type": "file", "file": {"file_id": "file-1"}}], "a file"),
        ([{"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}}], "a file"),
        ([{"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}}], "an audio clip"),
        (
            [
                {"type": "input_file", "file_id": "file-1"},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
                {"type": "text", "text": "  "},
                {"type": "input_file", "file_id": "file-2"},
                {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
            ],
            "2 files, an image and an audio clip",
        ),
    ],
)
def test_a_request_with_no_text_is_summarised_by_what_it_holds(content: list[dict[str, object]], holding: str):
    summary = ExtractiveSummarizer().summarize(page_of({"role": "user", "content": content}, assistant("Got it.")))
    assert summary.summary == f"user sent {holding}"
    assert summary.entry_summaries == (f"user: sent {holding}", "assistant: Got it.")


def test_text_beside_an_image_is_what_the_summary_says_and_empty_messages_stay_empty():
    content = [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": PNG_URL}}]
    summary = ExtractiveSummarizer().summarize(page_of({"role": "user", "content": content}, assistant("")))
    assert summary == PageSummary("What is this?", ("user: What is this?", "assistant: "))


def test_tool_results_that_are_images_say_they_returned_one():
    anthropic_result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image", "source": {}}]}],
    }
    chat_result = {"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}
    summary = ExtractiveSummarizer().summarize(page_of(user("Plot it."), calling("c"), chat_result, anthropic_result))
    assert summary.entry_summaries[2:] == ("tool: returned an image", "user: sent an image")


def test_an_assistants_audio_reply_is_an_audio_clip():
    message = {"role": "assistant", "content": None, "audio": {"id": "audio_1"}}
    assert ExtractiveSummarizer().summarize(page_of(user("Sing."), message)).entry_summaries[1] == (
        "assistant: sent an audio clip"
    )


def test_the_callable_adapter_is_told_what_a_message_without_text_holds():
    seen: list[str] = []
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG_URL}}]}
    CallableSummarizer(lambda text: seen.append(text) or "s").summarize(page_of(image))
    assert seen == ["user: sent an image", "user: sent an image"]


def test_bad_limits_are_refused():
    with pytest.raises(memci.SummaryError, match="entry_chars"):
        ExtractiveSummarizer(entry_chars=0)


# ---- the callable adapter -------------------------------------------------------------------------


def test_a_callable_is_called_per_entry_and_for_the_page():
    seen: list[str] = []

    def fn(text: str) -> str:
        seen.append(text)
        return f"<{len(seen)}>"

    summary = CallableSummarizer(fn).summarize(page_of(user("hi"), calling("c"), tool("c", "42")))
    assert summary.entry_summaries == ("<1>", "<2>", "<3>")
    assert summary.summary == "<4>"
    assert seen[:3] == ["user: hi", 'assistant: → lookup({"q": "x"})', "tool: 42"]
    assert seen[3] == "\n".join(seen[:3])


def test_the_adapter_cuts_what_the_callable_returns():
    summary = CallableSummarizer(lambda t: "x" * 50, max_chars=10).summarize(page_of(user("hi")))
    assert summary.entry_summaries == ("x" * 9 + ELLIPSIS,)


def test_a_callable_returning_no_string_is_a_summary_error():
    with pytest.raises(memci.SummaryError, match="returned int"):
        CallableSummarizer(lambda t: 3).summarize(page_of(user("hi")))  # type: ignore[arg-type,return-value]


def test_as_summarizer_takes_none_a_summarizer_or_a_callable():
    assert isinstance(as_summarizer(None), ExtractiveSummarizer)
    own = ExtractiveSummarizer(entry_chars=5)
    assert as_summarizer(own) is own
    assert isinstance(as_summarizer(str.upper), CallableSummarizer)
    with pytest.raises(memci.SummaryError, match="summarizer must be"):
        as_summarizer(42)  # type: ignore[arg-type]


def test_a_plain_function_summarizes_archived_pages():
    ctx = make(active_pages=1, summarizer=lambda text: text.split(":")[0].upper())
    ctx.extend(interaction(1))
    ctx.add(user("next"))
    (entry,) = ctx.contents
    assert entry.entry_summaries == ("USER", "ASSISTANT", "TOOL", "ASSISTANT")


def test_a_summarizer_may_return_a_pair():
    class Pair:
        def summarize(self, page: memci.Page) -> memci.PageSummary:
            return ("pair", ["e"] * len(page.entries))  # type: ignore[return-value]

    ctx = make(active_pages=1, summarizer=Pair())
    ctx.add(user("a"))
    ctx.add(user("b"))
    assert (ctx.contents[0].summary, ctx.contents[0].entry_summaries) == ("pair", ("e",))


def test_a_recall_result_is_summarised_as_the_page_it_brought_back():
    ctx = make(active_pages=1)
    ctx.extend(interaction(1))
    ctx.add(user("again?"))
    call = {"id": "r", "type": "function", "function": {"name": "recall_page", "arguments": '{"page_index": 1}'}}
    ctx.add({"role": "assistant", "content": None, "tool_calls": [call]})
    ctx.add(ctx.handle_tool_call(call))
    ctx.add(user("next"))
    assert ctx.contents[-1].entry_summaries[2] == "tool: recalled page 1"


_said = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
_messages = st.lists(
    st.one_of(
        st.builds(user, _said),
        st.builds(assistant, _said),
        st.builds(calling, st.from_regex(r"c[0-9]{1,3}", fullmatch=True)),
        st.builds(tool, st.just("c1"), _said),
        st.builds(lambda text: {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image"}]}, _said),
    ),
    min_size=1,
    max_size=6,
)


@given(_messages)
def test_summaries_from_the_entry_texts_read_with_the_page_are_what_summarize_gives(messages: list[dict[str, object]]):
    page = page_of(*messages)
    lines = memci._core.entry_texts(messages)
    for summarizer in (ExtractiveSummarizer(entry_chars=30), CallableSummarizer(lambda text: text[::-1])):
        assert summarize_read(summarizer, page, lines) == summarizer.summarize(page)


def test_archiving_reads_each_page_from_the_core_once(monkeypatch: pytest.MonkeyPatch):
    ctx = make(active_pages=1)
    ctx.extend(interaction(1))

    def refused(messages: object) -> object:
        raise AssertionError("the page's entry texts were read again")

    monkeypatch.setattr(memci.context.summary._core, "entry_texts", refused)
    ctx.extend(interaction(2))  # archives page 1: its lines come with its one read
    ctx.add(user("and now?"))
    assert [e.index for e in ctx.contents] == [1, 2]
    assert ctx.contents[0].entry_summaries[0] == "user: Question 1: what about item 1?"
