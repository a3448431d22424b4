"""memci.tokens: exact counts that agree with tiktoken (loaded offline from the ranks memci ships),
the chat-format message rules against a small pure-Python reference, the approximate counter against
LangChain's, and MessageArray.token_count under random operations."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pickle
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from factories import assistant, call, calling, contents, dialogue, system, tool, user, valid_messages
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from memci import ContextSystem, InvalidMessageError, InvalidOperationError, MemciError, MessageArray, tokens

ENCODINGS = ("o200k_base", "cl100k_base")
BLOB = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
#: The sha256 of the files OpenAI publishes (tiktoken refuses a cached file that differs).
PUBLISHED_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

CORPUS = [
    "",
    "hello world",
    "tiktoken is great!",
    "天气很好\uff0c我们去公园散步吧。東京の天気は晴れです。날씨가 좋아요.",
    "emoji: 🙂👍🏽🇯🇵 👨‍👩‍👧‍👦 and ZWJ sequences",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n\n\tif x >= 10_000: raise ValueError(x)\n",
    'fn main() { println!("{}", 1_000_000u64.pow(2)); }',
    " " * 1000,
    "\n\n\n   \t\t  \r\n  x   \n" * 20,
    "trailing spaces   ",
    "<|endoftext|>",
    "<|im_start|>user<|im_sep|>hi<|im_end|><|endofprompt|><|fim_prefix|>",
    "text before <|endoftext|> and after",
    "numbers 1234567890 3.14159 -0.5e-10 0xFF",
    "URLs https://example.com/a/b?c=d&e=f#g and paths /usr/local/bin",
    "I'm sure they'll've done it; it's THEIR'S, WE'RE sure.",
    "Ünïcödé çömbïnïng: e\u0301 a\u0308 ﬁ ligature",
    "a" * 5000,
    json.dumps({"query": "天气", "n": 3, "nested": {"list": [1, None, True]}}),
]


# ---- tiktoken, offline ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tiktoken_offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """tiktoken with its cache directory holding the ranks memci ships, under the names it
    expects (the sha1 of each file's URL), so it loads without a network."""
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is not installed (it is in the `dev` extra)")
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name in ENCODINGS:
        data = tokens.ranks_file(name).encode()
        assert hashlib.sha256(data).hexdigest() == PUBLISHED_SHA256[name]
        (cache / hashlib.sha1(BLOB.format(name).encode()).hexdigest()).write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        yield tiktoken


@pytest.fixture(scope="session", params=ENCODINGS)
def encoding_pair(request: pytest.FixtureRequest, tiktoken_offline: Any) -> tuple[str, Any]:
    name = request.param
    assert os.environ["TIKTOKEN_CACHE_DIR"]
    return name, tiktoken_offline.get_encoding(name)


def test_tiktoken_agrees_on_a_varied_corpus(encoding_pair: tuple[str, Any]) -> None:
    name, enc = encoding_pair
    for text in CORPUS:
        assert tokens.count(text, name) == len(enc.encode_ordinary(text)), text[:40]
    assert tokens.count_batch(CORPUS, name) == [len(t) for t in enc.encode_ordinary_batch(CORPUS)]


@given(text=st.text(max_size=300))
def test_tiktoken_agrees_on_any_text(encoding_pair: tuple[str, Any], text: str) -> None:
    name, enc = encoding_pair
    assert tokens.count(text, name) == len(enc.encode_ordinary(text))


def test_special_token_lookalikes_are_plain_text(encoding_pair: tuple[str, Any]) -> None:
    name, enc = encoding_pair
    text = "<|endoftext|>"
    # tiktoken's encode() refuses the text unless told to treat it as plain text; memci always does.
    assert tokens.count(text, name) == len(enc.encode(text, disallowed_special=())) > 1


def test_message_counts_follow_the_cookbook_formula(encoding_pair: tuple[str, Any]) -> None:
    """3 per message, every string value of role/content/name, 1 more per name, 3 for the reply."""
    name, enc = encoding_pair
    messages = [system("Be brief."), user("你好", name="ana"), assistant("Hi! 🙂")]
    expected = 3
    for m in messages:
        expected += 3 + sum(len(enc.encode_ordinary(v)) for v in m.values()) + ("name" in m)
    assert tokens.count_messages(messages, name) == expected


# ---- known counts -------------------------------------------------------------------------------

#: The OpenAI cookbook's example ("How to count tokens with tiktoken"): 129 prompt tokens on GPT-4
#: and GPT-3.5-turbo, 124 on GPT-4o, as the API reported.
COOKBOOK = [
    system("You are a helpful, pattern-following assistant that translates corporate jargon into plain English."),
    system("New synergies will help drive top-line growth.", name="example_user"),
    system("Things working well together will increase revenue.", name="example_assistant"),
    system(
        "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
        name="example_user",
    ),
    system("Let's talk later when we're less busy about how to do better.", name="example_assistant"),
    user("This late pivot means we don't have time to boil the ocean for the client deliverable."),
]


def test_known_counts() -> None:
    assert tokens.count("hello world") == 2
    assert tokens.count("hello world", "cl100k_base") == 2
    assert tokens.count("tiktoken is great!", "cl100k_base") == 6
    assert tokens.count("") == 0
    assert tokens.count_messages(COOKBOOK, "cl100k_base") == 129
    assert tokens.count_messages(COOKBOOK, "gpt-4") == 129
    assert tokens.count_messages(COOKBOOK, "gpt-4o") == 124
    assert tokens.count_messages([user("hello world")]) == 3 + 1 + 2 + 3


def test_model_names_map_to_their_encodings() -> None:
    assert tokens.encoding_for_model("gpt-4o") == "o200k_base"
    assert tokens.encoding_for_model("gpt-4o-mini-2024-07-18") == "o200k_base"
    assert tokens.encoding_for_model("o3-mini") == "o200k_base"
    assert tokens.encoding_for_model("gpt-4-turbo") == "cl100k_base"
    assert tokens.encoding_for_model("gpt-3.5-turbo-0125") == "cl100k_base"
    assert tokens.encoding_for_model("cl100k_base") == "cl100k_base"
    assert tokens.count("hello", "gpt-4o") == tokens.count("hello", "o200k_base")


@pytest.mark.parametrize("name", ["p50k_base", "gpt2", "", "O200K_BASE", "claude-3-opus"])
def test_unknown_encodings_are_refused_by_name(name: str) -> None:
    with pytest.raises(InvalidOperationError, match=f'unknown encoding "{name}"'):
        tokens.count("x", name)
    with pytest.raises(MemciError):
        MessageArray([user()]).token_count(name)


@pytest.mark.parametrize(
    ("call_", "match"),
    [
        (lambda: tokens.count(b"bytes"), "text must be a str"),  # type: ignore[arg-type]
        (lambda: tokens.count("x", encoding=5), "encoding must be a str"),  # type: ignore[arg-type]
        (lambda: tokens.count_batch("abc"), "not a str"),
        (lambda: tokens.count_batch(["a", 1]), r"texts\[1\]"),  # type: ignore[list-item]
        (lambda: tokens.count_message("hello"), "must be a dict"),  # type: ignore[arg-type]
        (lambda: tokens.count_messages([user(), 5]), r"messages\[1\]"),  # type: ignore[list-item]
        (lambda: tokens.count_message(user(metadata={"x": object()})), r"message\.metadata\.x"),
        (lambda: tokens.count_message(user(), counter=lambda m: -1), "int >= 0"),
        (lambda: tokens.count_messages([user()], counter=lambda m: 1.5), "int >= 0"),  # type: ignore[arg-type, return-value]
        (lambda: tokens.count_message(user(), counter="len"), "callable"),  # type: ignore[arg-type]
        (lambda: tokens.ranks_file("approximate"), "no ranks"),
    ],
)
def test_bad_arguments_raise_memci_errors_naming_them(call_: Callable[[], Any], match: str) -> None:
    with pytest.raises(MemciError, match=match):
        call_()


def test_count_batch_keeps_order_and_handles_many_texts() -> None:
    texts = [f"text number {i} " * (i % 7) for i in range(2000)]
    assert tokens.count_batch(texts) == [tokens.count(t) for t in texts]
    assert tokens.count_batch([]) == []
    assert tokens.count_batch(iter(["a", "b"]), "cl100k_base") == [1, 1]


# ---- the message rules, against a pure-Python reference ----------------------------------------


def reference_count(message: dict[str, Any], text: Callable[[str], int]) -> int:
    """docs/tokens.md, written out: 3 per message; role, content, refusal; a name and 1; per tool
    call its name, arguments and 1; blocks: text, images 85 (low) or 765, tool_use name + JSON
    input + 1, tool_result content, thinking; anything else nothing."""

    def content(value: Any) -> int:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, list):
            return sum(block(b) for b in value)
        return 0

    def block(b: Any) -> int:
        if isinstance(b, str):
            return text(b)
        if not isinstance(b, dict):
            return 0
        kind = b.get("type")
        if kind in ("image_url", "image", "input_image"):
            url = b.get("image_url")
            detail = url.get("detail") if isinstance(url, dict) else b.get("detail")
            return 85 if detail == "low" else 765
        if kind == "tool_use":
            compact = json.dumps(b.get("input"), ensure_ascii=False, separators=(",", ":"))
            return text(b.get("name", "")) + (text(compact) if "input" in b else 0) + 1
        if kind == "tool_result":
            return content(b.get("content"))
        if kind == "thinking":
            return text(b.get("thinking", ""))
        return text(b["text"]) if isinstance(b.get("text"), str) else 0

    total = 3 + content(message.get("content"))
    for key in ("role", "refusal"):
        if isinstance(message.get(key), str):
            total += text(message[key])
    if isinstance(message.get("name"), str):
        total += text(message["name"]) + 1
    for c in message.get("tool_calls") or ():
        total += text(c["function"]["name"]) + text(c["function"]["arguments"]) + 1
    return total


RULE_EXAMPLES = [
    user("plain"),
    user("named", name="ana"),
    calling(call("c1", "search", '{"q": "天气"}'), call("c2", "fetch", "{}")),
    calling(call(), content="Let me look."),
    tool("c1", "result text"),
    user([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]),
    user([{"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}]),
    user([{"type": "input_image", "image_url": "https://x/y.png", "detail": "low"}, "a bare string block"]),
    assistant([{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t", "name": "s", "input": {"q": "x"}}]),
    user([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "found"}]}]),
    assistant([{"type": "thinking", "thinking": "hmm", "signature": "sig"}, {"type": "text", "text": "done"}]),
    assistant("no", refusal="I can't help with that."),
    user("metadata and ids are not read by the model", metadata={"k": "v" * 100}, id="msg_123"),
    {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": '{"a": 1}'}},
]


@pytest.mark.parametrize("message", RULE_EXAMPLES, ids=range(len(RULE_EXAMPLES)))
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_message_rules_match_the_documented_reference(message: dict[str, Any], encoding: str) -> None:
    expected = reference_count(message, lambda s: tokens.count(s, encoding))
    if "function_call" in message:
        f = message["function_call"]
        expected += tokens.count(f["name"], encoding) + tokens.count(f["arguments"], encoding) + 1
    assert tokens.count_message(message, encoding) == expected


@given(messages=st.lists(valid_messages(), max_size=6))
def test_random_messages_match_the_reference(messages: list[dict[str, Any]]) -> None:
    per = [reference_count(m, tokens.count) for m in messages]
    assert [tokens.count_message(m) for m in messages] == per
    assert tokens.count_messages(messages) == sum(per) + (3 if messages else 0)
    assert tokens.count_messages(messages, counter=len) == sum(len(m) for m in messages)


def test_a_tool_call_costs_its_name_arguments_and_one_token() -> None:
    bare = calling(call("c1", "search", "{}"))
    two = calling(call("c1", "search", "{}"), call("c2", "search", '{"q": "weather in Paris"}'))
    extra = tokens.count("search") + tokens.count('{"q": "weather in Paris"}') + 1
    assert tokens.count_message(two) - tokens.count_message(bare) == extra


# ---- the approximate counter ------------------------------------------------------------------


def test_approximate_counts_characters_over_four_plus_three() -> None:
    assert tokens.approximate(user("abcdefgh")) == 3 + 3  # ceil((4 + 8) / 4) + 3
    assert tokens.approximate(user("abcdefghi")) == 4 + 3  # rounded up
    assert tokens.approximate(user("你好")) == 2 + 3  # characters, not bytes: ceil(6 / 4)
    assert tokens.approximate(tool("id", "x")) == 2 + 3  # the call id counts: ceil((4 + 1 + 2) / 4)
    assert tokens.approximate(user([{"type": "image_url", "image_url": {"url": "u"}}])) == 85 + 1 + 3
    assert tokens.count_message(user("abcdefgh"), counter=tokens.approximate) == 6
    assert tokens.count_messages([user("abcdefgh")] * 2, counter=tokens.approximate) == 12


@given(messages=st.lists(valid_messages(roles=("system", "user", "assistant", "tool")), max_size=6))
def test_approximate_agrees_with_langchain_without_tool_calls(messages: list[dict[str, Any]]) -> None:
    lc = pytest.importorskip("langchain_core.messages")
    plain = [
        {k: v for k, v in m.items() if k in ("role", "content", "name", "tool_call_id")}
        for m in messages
        if not m.get("tool_calls") and not _has_tool_blocks(m)
    ]
    expected = lc.utils.count_tokens_approximately(plain)
    assert tokens.count_messages(plain, counter=tokens.approximate) == expected
    assert sum(tokens.approximate(m) for m in plain) == expected


def _has_tool_blocks(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "image") for b in content
    )


# ---- MessageArray.token_count -------------------------------------------------------------------


def test_token_count_is_the_count_of_the_visible_messages() -> None:
    arr = MessageArray(dialogue(3))
    for encoding in (*ENCODINGS, "gpt-4o"):
        assert arr.token_count(encoding) == tokens.count_messages(arr.messages(), encoding)
    assert arr.token_count() == arr.token_count("o200k_base")
    assert MessageArray().token_count() == 0
    assert arr.token_count(counter=len) == sum(len(m) for m in arr.messages())
    assert arr.token_count(counter=tokens.approximate) == tokens.count_messages(
        arr.messages(), counter=tokens.approximate
    )


def test_counts_survive_snapshots_and_rollback() -> None:
    arr = MessageArray(dialogue(5))
    full = arr.token_count()
    cp = arr.checkpoint()
    arr.truncate(keep_last=2)
    short = arr.token_count()
    assert short == tokens.count_messages(arr.messages()) < full
    arr.append(user("more words here"))
    assert arr.token_count() == tokens.count_messages(arr.messages())
    arr.rollback(cp)
    assert arr.token_count() == full
    assert contents(arr.messages()) == contents(dialogue(5))


class TokenCountVersusRecount(RuleBasedStateMachine):
    """After any sequence of operations, the cached total equals a fresh count of messages()."""

    def __init__(self) -> None:
        super().__init__()
        self.arr = MessageArray()

    @initialize(messages=st.lists(valid_messages(), max_size=6))
    def build(self, messages: list[dict[str, Any]]) -> None:
        self.arr = MessageArray(messages)

    @rule(messages=st.lists(valid_messages(), max_size=3))
    def append(self, messages: list[dict[str, Any]]) -> None:
        self.arr.append(messages)

    @rule(position=st.integers(0, 8), message=valid_messages())
    def insert(self, position: int, message: dict[str, Any]) -> None:
        self.arr.insert(min(position, len(self.arr)), [message])

    @rule(index=st.integers(-3, 3), message=valid_messages())
    def replace(self, index: int, message: dict[str, Any]) -> None:
        if -len(self.arr) <= index < len(self.arr):
            self.arr.replace(index, message)

    @rule(n=st.integers(0, 6))
    def truncate(self, n: int) -> None:
        self.arr.truncate(keep_last=n)

    @rule(roles=st.lists(st.sampled_from(["user", "assistant", "tool"]), min_size=1, max_size=2))
    def filter(self, roles: list[str]) -> None:
        self.arr.filter(roles=roles)

    @rule()
    def clear(self) -> None:
        self.arr.clear()

    @rule(back=st.integers(0, 5))
    def rollback(self, back: int) -> None:
        self.arr.rollback(max(0, self.arr.batch_index - back))

    @rule(encoding=st.sampled_from([*ENCODINGS, "approximate"]))
    def count(self, encoding: str) -> None:
        self.arr.token_count(encoding)

    @invariant()
    def cached_total_is_exact(self) -> None:
        for encoding in (*ENCODINGS, "approximate"):
            assert self.arr.token_count(encoding) == tokens.count_messages(self.arr.messages(), encoding)


TestTokenCountVersusRecount = TokenCountVersusRecount.TestCase


def test_invalid_message_in_count_messages_names_its_path() -> None:
    with pytest.raises(InvalidMessageError) as info:
        tokens.count_messages([user(), user(content=["ok", {"type": "text", "text": {1, 2}}])])
    assert info.value.path == "messages[1].content[1].text"


# ---- model names, as tiktoken's table maps them ------------------------------------------------

#: Names OpenAI serves, and names in the shapes its models take: dotted versions, -codex, -pro,
#: -mini, -nano, dated snapshots, the o-series, Azure's deployment names.
CURRENT_MODELS = [
    "gpt-5", "gpt-5.1", "gpt-5.2-codex", "gpt-5.4-pro", "gpt-5.5", "gpt-5-mini", "gpt-5-nano",
    "gpt-5.1-codex-mini", "gpt-5-2025-08-07", "gpt-5-chat-latest", "gpt-4.1", "gpt-4.1-mini",
    "gpt-4.1-nano-2025-04-14", "gpt-4o", "gpt-4o-mini-2024-07-18", "chatgpt-4o-latest",
    "gpt-4.5-preview", "o1", "o1-pro", "o3", "o3-mini", "o3-deep-research", "o4-mini",
    "o4-mini-2025-04-16", "gpt-4-turbo", "gpt-4-0613", "gpt-3.5-turbo-0125", "gpt-35-turbo-16k",
    "text-embedding-3-small", "davinci-002", "gpt-oss-120b", "text-davinci-003", "gpt2",
]  # fmt: skip
#: Names tiktoken refuses: memci refuses them too.
UNKNOWN_MODELS = ["gpt-4.5", "o5", "GPT-4O", "claude-sonnet-4-5", "gemini-2.5-pro", "gpt", "4o", "o4", ""]
#: Fine-tuned models, ``ft:<base>:<org>:<name>:<id>``.
FINE_TUNED = [
    "ft:gpt-4o-mini-2024-07-18:acme::9aBc",
    "ft:gpt-4o-2024-08-06:acme:support:9aBc",
    "ft:gpt-3.5-turbo-0125:acme::9aBc",
    "ft:gpt-4-0613:acme::9aBc",
    "ft:davinci-002:acme::9aBc",
    "ft:babbage-002:acme::9aBc",
    "ft:gpt-4.1-2025-04-14:acme::9aBc",
    "ft:gpt-4.1-mini-2025-04-14:acme::9aBc",
    "ft:o4-mini-2025-04-16:acme::9aBc",
]


@pytest.fixture(scope="module")
def tiktoken_model() -> Any:
    return pytest.importorskip("tiktoken.model")


def tiktoken_says(model_table: Any, name: str) -> str | None:
    """The encoding tiktoken names for ``name``, or None when it refuses it."""
    try:
        return str(model_table.encoding_name_for_model(name))
    except KeyError:
        return None


def memci_says(name: str) -> str | None:
    """memci's encoding for ``name`` when it ships it; None when it refuses the name."""
    try:
        return tokens.encoding_for_model(name)
    except InvalidOperationError:
        return None


def expected_of(model_table: Any, name: str) -> str | None:
    """What memci must answer: tiktoken's encoding when memci ships it, else a refusal. A
    fine-tuned model is read as its base model (tiktoken's ``ft:gpt-4`` prefix also catches
    ``ft:gpt-4.1-...``, which uses o200k_base like gpt-4.1)."""
    if name.startswith("ft:"):
        return expected_of(model_table, name[3:].split(":", maxsplit=1)[0])
    answer = tiktoken_says(model_table, name)
    return answer if answer in ENCODINGS else None


def test_every_name_in_tiktokens_tables_resolves_as_tiktoken_resolves_it(tiktoken_model: Any) -> None:
    names = [*tiktoken_model.MODEL_TO_ENCODING, *tiktoken_model.MODEL_PREFIX_TO_ENCODING]
    assert len(names) > 60
    for name in names:
        answer = tiktoken_says(tiktoken_model, name)
        assert memci_says(name) == (answer if answer in ENCODINGS else None), name
    # Whole names that tiktoken maps to an encoding memci does not ship are refused by that name.
    with pytest.raises(InvalidOperationError, match="the model uses p50k_base, which memci does not ship"):
        tokens.encoding_for_model("text-davinci-003")


@pytest.mark.parametrize("name", CURRENT_MODELS + UNKNOWN_MODELS + FINE_TUNED)
def test_current_model_names_resolve_as_tiktoken_resolves_them(tiktoken_model: Any, name: str) -> None:
    expected = expected_of(tiktoken_model, name)
    if expected is not None:
        assert tokens.encoding_for_model(name) == expected
        return
    refusal = f"encoding_for_model: encoding: unknown encoding {json.dumps(name)}"
    with pytest.raises(InvalidOperationError, match=re.escape(refusal)):
        tokens.encoding_for_model(name)


def test_the_names_of_the_issue_are_o200k_base() -> None:
    for name in ("gpt-5.1", "gpt-5.2-codex", "gpt-5.4-pro", "gpt-5.5", "ft:gpt-4.1-mini-2025-04-14:acme::x"):
        assert tokens.encoding_for_model(name) == "o200k_base"
    assert tokens.count_messages([user("hi")], "gpt-5.5") == tokens.count_messages([user("hi")], "o200k_base")


def test_fine_tuned_names_differ_from_tiktoken_only_where_it_misreads_the_base(tiktoken_model: Any) -> None:
    differing = {n for n in FINE_TUNED if memci_says(n) != tiktoken_says(tiktoken_model, n)}
    assert differing == {n for n in FINE_TUNED if n.startswith(("ft:gpt-4.1", "ft:o4-mini"))}


#: Pieces model names are made of, for generated names.
NAME_PIECES = st.sampled_from(
    ["gpt", "-", "5", ".", "1", "4", "o", "3", "mini", "nano", "pro", "codex", "turbo", "35", "3.5", "2024-08-06",
     "chatgpt", "ft:", ":", "davinci", "002", "text-embedding", "large", "oss", "preview", "latest", "x"]
)  # fmt: skip


@given(pieces=st.lists(NAME_PIECES, min_size=1, max_size=6))
def test_generated_names_resolve_as_tiktoken_resolves_them(tiktoken_model: Any, pieces: list[str]) -> None:
    name = "".join(pieces)
    assert memci_says(name) == expected_of(tiktoken_model, name)


# ---- the thinking of earlier turns -------------------------------------------------------------


def thinking(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": "c2ln"}


def redacted(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def tool_use(i: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i}", "name": "search", "input": {"q": f"query {i}"}}


def tool_result(i: int, text: str) -> dict[str, Any]:
    return user([{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": text}])


def opens_a_turn(message: dict[str, Any]) -> bool:
    """The rule of docs/tokens.md, written out: a user message that is not only tool results."""
    if message.get("role") != "user" or message.get("type", "message") != "message":
        return False
    content = message.get("content")
    only_results = (
        isinstance(content, list)
        and content
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )
    return not only_results


def reference_sent(messages: list[dict[str, Any]], rule: str) -> list[dict[str, Any]]:
    """The messages as the provider reads them: before the last message that opens a user turn,
    no thinking block and no reasoning item (with ``"drop_earlier"``)."""
    if rule == "count":
        return messages
    turn = max((i for i, m in enumerate(messages) if opens_a_turn(m)), default=0)
    sent = []
    for i, m in enumerate(messages):
        if i < turn and m.get("type") == "reasoning":
            continue
        content = m.get("content")
        if i < turn and isinstance(content, list):
            sent.append({**m, "content": [b for b in content if not (isinstance(b, dict) and "thinking" in b["type"])]})
        else:
            sent.append(m)
    return sent


def reference_total(messages: list[dict[str, Any]], rule: str, encoding: str = "o200k_base") -> int:
    """The request's tokens by the reference: its messages as sent, each by the documented rules
    (a redacted thinking block: a quarter of its data's characters), plus 3."""

    def full(m: dict[str, Any]) -> int:
        blocks = m["content"] if isinstance(m.get("content"), list) else []
        data = sum(-(-len(b["data"]) // 4) for b in blocks if isinstance(b, dict) and b["type"] == "redacted_thinking")
        return reference_count(m, lambda s: tokens.count(s, encoding)) + data

    sent = reference_sent(messages, rule)
    return sum(full(m) for m in sent) + (3 if sent else 0)


#: Two user turns of an agent with extended thinking: the first turn's thinking (a long plan, and
#: a redacted block) is dropped once the second turn opens; the second turn's thinking, sent back
#: with its tool results, counts.
PLAN = "Let me think about how to find the forecast, step by step, checking every source. " * 8
CLAUDE_HISTORY = [
    user("What is the weather in Paris?"),
    assistant([thinking(PLAN), redacted("RW5jcnlwdGVkIHRoaW5raW5n" * 10), tool_use(1)]),
    tool_result(1, "sunny, 21 degrees"),
    assistant([thinking("The tool answered."), {"type": "text", "text": "Sunny and 21."}]),
    user("And tomorrow?"),
    assistant([thinking("I should look it up again for tomorrow."), tool_use(2)]),
    tool_result(2, "rain, 15 degrees"),
]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_earlier_turns_thinking_is_dropped_by_default_and_counted_when_asked(encoding: str) -> None:
    dropped = tokens.count_messages(CLAUDE_HISTORY, encoding)
    counted = tokens.count_messages(CLAUDE_HISTORY, encoding, thinking="count")
    first_turn_thinking = (
        tokens.count(PLAN, encoding)
        + tokens.count("The tool answered.", encoding)
        + len("RW5jcnlwdGVkIHRoaW5raW5n") * 10 // 4
    )
    assert counted - dropped == first_turn_thinking
    assert dropped == reference_total(CLAUDE_HISTORY, "drop_earlier", encoding)
    assert counted == reference_total(CLAUDE_HISTORY, "count", encoding)
    # Within one turn (tool results are not a new turn) nothing is dropped.
    first_turn = CLAUDE_HISTORY[:4]
    assert tokens.count_messages(first_turn, encoding) == tokens.count_messages(first_turn, encoding, thinking="count")


def test_openai_reasoning_items_of_earlier_turns_are_dropped() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": PLAN}]}
    items = [
        {"role": "user", "content": "weather?"},
        reasoning,
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "tomorrow?"}]},
        {**reasoning, "id": "rs_2"},
    ]
    dropped, counted = tokens.count_messages(items), tokens.count_messages(items, thinking="count")
    assert counted - dropped == tokens.count_message(reasoning)  # the earlier item, overhead and all
    assert tokens.count_messages(items[:5]) == tokens.count_messages(items[:5], thinking="count")


@pytest.mark.parametrize("rule", ["drop_earlier", "count"])
def test_a_counter_is_given_the_messages_as_sent(rule: str) -> None:
    seen: list[dict[str, Any]] = []

    def counter(m: dict[str, Any]) -> int:
        seen.append(m)
        return 1

    assert tokens.count_messages(CLAUDE_HISTORY, counter=counter, thinking=rule) == len(CLAUDE_HISTORY)
    assert seen == reference_sent(CLAUDE_HISTORY, rule)
    assert CLAUDE_HISTORY[1]["content"][0]["type"] == "thinking"  # the caller's messages are not changed
    assert tokens.as_sent(CLAUDE_HISTORY, rule) == reference_sent(CLAUDE_HISTORY, rule)


@pytest.mark.parametrize(
    "call_",
    [
        lambda: tokens.count_messages([user()], thinking="drop"),
        lambda: MessageArray([user()]).token_count(thinking="all"),
        lambda: MessageArray([user()]).trim_to_tokens(10, thinking=None),  # type: ignore[arg-type]
        lambda: tokens.as_sent([user()], "keep"),
    ],
)
def test_an_unknown_thinking_rule_is_refused_by_name(call_: Callable[[], Any]) -> None:
    with pytest.raises(InvalidOperationError, match="thinking must be 'drop_earlier' or 'count'"):
        call_()


def test_array_counts_and_trims_by_the_rule_in_both_directions() -> None:
    arr = MessageArray(CLAUDE_HISTORY)
    dropped, counted = arr.token_count(), arr.token_count(thinking="count")
    assert (dropped, counted) == (
        tokens.count_messages(CLAUDE_HISTORY),
        tokens.count_messages(CLAUDE_HISTORY, thinking="count"),
    )
    assert counted > dropped
    # A budget between the two: the history fits as Anthropic counts it, so nothing is cut; it
    # does not fit when every thinking block counts, so the old turn goes.
    budget = (dropped + counted) // 2
    kept = copy.copy(arr)
    kept.trim_to_tokens(budget)
    assert kept.messages() == CLAUDE_HISTORY
    cut = copy.copy(arr)
    cut.trim_to_tokens(budget, thinking="count")
    assert cut.messages() == CLAUDE_HISTORY[4:]
    assert cut.token_count(thinking="count") <= budget
    # A Python counter is given each message as sent: the same plans.
    exact = tokens.count_message
    by_counter = copy.copy(arr)
    by_counter.trim_to_tokens(budget - 3, counter=exact)
    assert by_counter.messages() == CLAUDE_HISTORY
    by_counter.trim_to_tokens(budget - 3, counter=exact, thinking="count")
    assert by_counter.messages() == CLAUDE_HISTORY[4:]


def test_the_cached_count_follows_the_turns() -> None:
    arr = MessageArray(CLAUDE_HISTORY[:4])
    within_turn = arr.token_count()
    assert within_turn == arr.token_count(thinking="count")  # one turn: all of its thinking counts
    before = arr.checkpoint()
    arr.append(CLAUDE_HISTORY[4:])
    assert arr.token_count() == tokens.count_messages(CLAUDE_HISTORY)  # the first turn's now dropped
    arr.rollback(before)
    assert arr.token_count() == within_turn
    arr.truncate(keep_last=3)
    assert arr.token_count() == tokens.count_messages(arr.messages())


@st.composite
def thinking_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Anthropic-shaped agent histories: user turns of assistant steps with thinking, redacted
    thinking, text and tool uses, each tool use answered by a user message of its result."""
    words = st.text(alphabet="ab cd,\n.xy", max_size=40)
    messages: list[dict[str, Any]] = []
    uses = 0
    for _ in range(draw(st.integers(0, 4))):
        messages.append(user(draw(words) or "?"))
        for _ in range(draw(st.integers(0, 3))):
            blocks: list[dict[str, Any]] = []
            if draw(st.booleans()):
                blocks.append(thinking(draw(words)))
            if draw(st.booleans()):
                blocks.append(redacted(draw(st.text(alphabet="ABCxyz019+/", max_size=30))))
            if draw(st.booleans()):
                blocks.append({"type": "text", "text": draw(words) or "."})
            calls = draw(st.booleans())
            if calls:
                uses += 1
                blocks.append(tool_use(uses))
            messages.append(assistant(blocks or [{"type": "text", "text": "."}]))
            if calls:
                messages.append(tool_result(uses, draw(words) or "-"))
    return messages


@given(messages=thinking_histories(), budget=st.integers(0, 400), rule=st.sampled_from(["drop_earlier", "count"]))
def test_counts_and_trims_agree_with_the_reference_for_any_history(
    messages: list[dict[str, Any]], budget: int, rule: str
) -> None:
    expected = reference_total(messages, rule)
    assert tokens.count_messages(messages, thinking=rule) == expected
    arr = MessageArray(messages)
    assert arr.token_count(thinking=rule) == expected
    arr.append(user("next"))
    assert arr.token_count(thinking=rule) == reference_total([*messages, user("next")], rule)
    arr.trim_to_tokens(budget, thinking=rule, start_on=None)
    assert arr.token_count(thinking=rule) <= budget
    assert arr.token_count(thinking=rule) == reference_total(arr.messages(), rule)


@pytest.mark.parametrize("rule", ["drop_earlier", "count"])
def test_the_context_systems_budget_counts_by_its_rule(rule: str) -> None:
    ctx = ContextSystem("You are a weather bot.", thinking=rule)
    for message in CLAUDE_HISTORY:
        ctx.add(message)
    window = ctx.build_messages(sanitize=False)
    assert ctx.token_count() == tokens.count_messages(window, thinking=rule)
    assert copy.copy(ctx).token_count() == ctx.token_count()  # a copy keeps the rule
    assert pickle.loads(pickle.dumps(ctx)).token_count() == ctx.token_count()


def test_the_context_system_archives_for_earlier_thinking_only_when_it_counts() -> None:
    probe = ContextSystem("You are a weather bot.")
    for message in CLAUDE_HISTORY:
        probe.add(message)
    dropped = probe.token_count() + probe.tool_tokens()
    kept_pages = {}
    for how in ("drop_earlier", "count"):
        ctx = ContextSystem("You are a weather bot.", max_context_tokens=dropped + 20, thinking=how)
        for message in CLAUDE_HISTORY:
            ctx.add(message)
        ctx.build_messages()
        kept_pages[how] = [page.index for page in ctx.pages]
    assert kept_pages == {"drop_earlier": [1, 2], "count": [2]}
