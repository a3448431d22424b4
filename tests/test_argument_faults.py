"""One fault, one wording: every public method that takes a role, an encoding or a strategy refuses
a bad one with the same words, prefixed by where it was given (``"recent: role"``), and changes
nothing (docs/message-array.md, "Errors")."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from typing import Any

import pytest
from factories import numbered, user
from memci import (
    BatchError,
    ContextSystem,
    DirectoryStorage,
    InvalidMessageError,
    InvalidOperationError,
    MemciError,
    MemoryStorage,
    MessageArray,
    PositionError,
    SqliteStorage,
    StateError,
    StorageError,
    formats,
    ops,
    sanitize_messages,
    tokens,
)

ROLE_FAULT = "unknown role 'bogus'; expected one of system, developer, user, assistant, tool"
ENCODING_FAULT = (
    'unknown encoding "nope": expected o200k_base, cl100k_base, approximate or an OpenAI model name such as gpt-4o'
)

Call = Callable[[MessageArray], Any]

#: (place, a call giving it the role "bogus"), one per public way of naming a role.
ROLE_PLACES: list[tuple[str, Call]] = [
    ("by_role: role", lambda a: a.by_role("bogus")),
    ("count: role", lambda a: a.count("bogus")),
    ("indices: role", lambda a: a.indices("bogus")),
    ("role_range: role", lambda a: a.role_range("bogus", 0, 1)),
    ("recent: role", lambda a: a.recent(1, role="bogus")),
    ("recent: roles[1]", lambda a: a.recent(1, roles=["user", "bogus"])),
    ("between: role", lambda a: a.between(None, None, role="bogus")),
    ("marked: role", lambda a: a.marked("tag", role="bogus")),
    ("truncate: role", lambda a: a.truncate(role="bogus")),
    ("truncate: role", lambda a: a.execute({"operation": "TRUNCATE", "role": "bogus"})),
    ("filter: roles[0]", lambda a: a.filter(roles="bogus")),
    ("filter: roles[1]", lambda a: a.filter(roles=["user", "bogus"])),
    ("filter: roles[0]", lambda a: a.execute(ops.Filter(roles=("bogus",)))),
    ("trim_to_tokens: start_on[0]", lambda a: a.trim_to_tokens(5, start_on="bogus")),
    ("trim_to_tokens: end_on[1]", lambda a: a.trim_to_tokens(5, end_on=["human", "bogus"])),
    (
        "trim_to_tokens: start_on[0]",
        lambda a: a.execute({"operation": "trim_to_tokens", "maxTokens": 5, "startOn": "bogus"}),
    ),
]


def _same_everywhere(place: str, fault: str) -> str:
    return f"^{re.escape(f'{place}: {fault}')}$"


@pytest.mark.parametrize(("place", "call"), ROLE_PLACES)
def test_an_unknown_role_is_worded_the_same_everywhere(place: str, call: Call) -> None:
    arr = MessageArray(numbered(4))
    before = arr.to_json()
    with pytest.raises(InvalidOperationError, match=_same_everywhere(place, ROLE_FAULT)):
        call(arr)
    assert arr.to_json() == before


#: A role that is not a str, for the places that take one role.
NOT_A_STR_PLACES: list[tuple[str, Call]] = [
    ("by_role: role", lambda a: a.by_role(5)),  # type: ignore[arg-type]
    ("count: role", lambda a: a.count(5)),  # type: ignore[arg-type]
    ("recent: role", lambda a: a.recent(1, role=5)),  # type: ignore[arg-type]
    ("marked: role", lambda a: a.marked("tag", role=5)),  # type: ignore[arg-type]
    ("truncate: role", lambda a: a.truncate(role=5)),  # type: ignore[arg-type]
    ("filter: roles[0]", lambda a: a.filter(roles=[5])),  # type: ignore[list-item]
    ("trim_to_tokens: start_on[0]", lambda a: a.trim_to_tokens(5, start_on=[5])),  # type: ignore[list-item]
]


@pytest.mark.parametrize(("place", "call"), NOT_A_STR_PLACES)
def test_a_role_that_is_not_a_str_is_worded_the_same_everywhere(place: str, call: Call) -> None:
    with pytest.raises(InvalidOperationError, match=f"^{re.escape(place)} must be a str, got 5$"):
        call(MessageArray(numbered(2)))


#: (place, a call giving it the encoding "nope" or 5).
ENCODING_PLACES: list[tuple[str, Callable[[Any], Any]]] = [
    ("token_count: encoding", lambda e: MessageArray(numbered(2)).token_count(e)),
    ("trim_to_tokens: encoding", lambda e: MessageArray(numbered(2)).trim_to_tokens(5, encoding=e)),
    (
        "trim_to_tokens: encoding",
        lambda e: MessageArray(numbered(2)).execute({"operation": "trim_to_tokens", "maxTokens": 5, "encoding": e}),
    ),
    ("count: encoding", lambda e: tokens.count("x", e)),
    ("count_batch: encoding", lambda e: tokens.count_batch(["x"], e)),
    ("count_message: encoding", lambda e: tokens.count_message(user("x"), e)),
    ("count_messages: encoding", lambda e: tokens.count_messages([user("x")], e)),
    ("encoding_for_model: encoding", tokens.encoding_for_model),
    ("reply_priming: encoding", tokens.reply_priming),
    ("ranks_file: encoding", tokens.ranks_file),
    ("ContextSystem: encoding", lambda e: ContextSystem("You are terse.", encoding=e)),
]


@pytest.mark.parametrize(("place", "call"), ENCODING_PLACES)
def test_an_unknown_encoding_is_worded_the_same_everywhere(place: str, call: Callable[[Any], Any]) -> None:
    with pytest.raises(InvalidOperationError, match=_same_everywhere(place, ENCODING_FAULT)):
        call("nope")
    with pytest.raises(InvalidOperationError, match=f"^{re.escape(place)} must be a str, got 5$"):
        call(5)


@pytest.mark.parametrize(
    "call",
    [
        lambda a, s: a.trim_to_tokens(5, strategy=s),
        lambda a, s: a.execute(ops.TrimToTokens(5, strategy=s)),
        lambda a, s: a.execute({"operation": "trim_to_tokens", "maxTokens": 5, "strategy": s}),
    ],
    ids=["method", "config", "dict"],
)
def test_a_bad_strategy_is_worded_the_same_everywhere(call: Callable[[MessageArray, Any], Any]) -> None:
    arr = MessageArray(numbered(4))
    for bad, shown in (("middle", "'middle'"), (None, "None"), ("Last", "'Last'")):
        with pytest.raises(
            InvalidOperationError, match=f"^trim_to_tokens: strategy must be 'first' or 'last', got {shown}$"
        ):
            call(arr, bad)
    assert arr.batch_index == 0


def test_langchain_message_types_name_roles_where_a_trim_starts_and_ends() -> None:
    by_alias, by_role = MessageArray(numbered(6)), MessageArray(numbered(6))
    by_alias.trim_to_tokens(30, start_on="human", end_on=["ai", "human"])
    by_role.trim_to_tokens(30, start_on="user", end_on=["assistant", "user"])
    assert by_alias.messages() == by_role.messages()
    with pytest.raises(
        InvalidOperationError,
        match=_same_everywhere(
            "by_role: role", "unknown role 'human'; expected one of system, developer, user, assistant, tool"
        ),
    ):
        by_alias.by_role("human")


class Named(enum.StrEnum):
    USER = "user"
    BOGUS = "bogus"


#: A StrEnum member is its value, in a query (Rust reads it) and in a config (memci.ops reads it).
STR_ENUM_PLACES: list[tuple[str, Call]] = [
    ("by_role: role", lambda a: a.by_role(Named.BOGUS)),
    ("count: role", lambda a: a.count(Named.BOGUS)),
    ("recent: role", lambda a: a.recent(1, role=Named.BOGUS)),
    ("truncate: role", lambda a: a.truncate(role=Named.BOGUS)),
    ("filter: roles[0]", lambda a: a.filter(roles=[Named.BOGUS])),
    ("trim_to_tokens: start_on[0]", lambda a: a.trim_to_tokens(5, start_on=[Named.BOGUS])),
]


@pytest.mark.parametrize(("place", "call"), STR_ENUM_PLACES)
def test_a_str_enum_role_is_read_and_shown_as_its_value(place: str, call: Call) -> None:
    arr = MessageArray(numbered(2))
    assert arr.by_role(Named.USER) == numbered(2)
    assert arr.recent(5, roles=[Named.USER]) == numbered(2)
    with pytest.raises(InvalidOperationError, match=_same_everywhere(place, ROLE_FAULT)):
        call(arr)


# ---- regressions: arguments PyO3 or Python refused outside the MemciError family ------------------

HUGE = 10**5000  # too many digits for Python to print
BITS = "an integer of 16610 bits"

#: (call, the error, its words), each once a bare ValueError, OverflowError or UnicodeEncodeError.
HOSTILE_ARGUMENTS: list[tuple[Call, type[Exception], str]] = [
    (
        lambda a: a.truncate(keep_last=-HUGE),
        InvalidOperationError,
        "truncate: keep_last must be a non-negative int, got a negative integer of 16610 bits",
    ),
    (lambda a: a.rollback(HUGE), BatchError, f"rollback: batch_index: {BITS} is out of range"),
    (lambda a: a.rollback(-HUGE), BatchError, "rollback: batch a negative integer of 16610 bits does not exist"),
    (lambda a: a.snapshot(-HUGE), BatchError, "snapshot: batch a negative integer of 16610 bits does not exist"),
    (lambda a: a.snapshot(2**63), BatchError, "snapshot: batch_index: 9223372036854775808 is out of range"),
    (lambda a: a[HUGE], PositionError, f"getitem: index: {BITS} is out of range"),
    (lambda a: a.mark(-(2**63) - 1, "t"), PositionError, "mark: index: -9223372036854775809 is out of range"),
    (
        lambda a: a.insert(-HUGE, user("x")),
        InvalidOperationError,
        "insert: position must be a non-negative int, got a negative integer of 16610 bits",
    ),
    (
        lambda a: a.between(float("nan")),
        InvalidOperationError,
        "between: start must be a number of seconds or None, got nan",
    ),
    (
        lambda a: a.checkpoint("a\ud800"),
        InvalidOperationError,
        "checkpoint: description is not valid Unicode: it holds a lone surrogate at index 1",
    ),
    (
        lambda a: a.mark(0, "\ud800"),
        InvalidOperationError,
        "mark: tag is not valid Unicode: it holds a lone surrogate at index 0",
    ),
    (lambda a: a.marked("\ud800"), InvalidOperationError, "marked: tag is not valid Unicode"),
    (
        lambda a: a.filter(content_contains=["ok", "\udfff"]),
        InvalidOperationError,
        "filter: content_contains[1] is not valid Unicode",
    ),
    (lambda a: a.by_role("\ud800"), InvalidOperationError, "by_role: role is not valid Unicode"),
    (lambda a: a.token_count("\ud800"), InvalidOperationError, "token_count: encoding is not valid Unicode"),
    (
        lambda a: a.execute({"operation": "truncate", "keepFirst": -HUGE}),
        InvalidOperationError,
        "got a negative integer of 16610 bits",
    ),
]


@pytest.mark.parametrize(("call", "error", "words"), HOSTILE_ARGUMENTS)
def test_regression_hostile_arguments_raise_a_memci_error_and_change_nothing(
    call: Call, error: type[Exception], words: str
) -> None:
    arr = MessageArray(numbered(4))
    before = arr.to_json()
    with pytest.raises(error, match=re.escape(words)):
        call(arr)
    assert arr.to_json() == before


def test_regression_huge_ints_saturate_where_they_mean_more_than_everything() -> None:
    arr = MessageArray(numbered(4))
    assert arr.between(-HUGE, HUGE) == numbered(4)
    assert arr.between(HUGE) == []
    assert arr.recent(HUGE) == numbered(4)
    arr.truncate(keep_last=HUGE)
    assert arr.messages() == numbered(4)
    assert arr.snapshot(arr.batch_index - 1).description == f"truncate(keep_last={BITS})"


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: tokens.count("\ud800"), InvalidOperationError, "count: text is not valid Unicode"),
        (lambda: tokens.count("x", "\ud800"), InvalidOperationError, "count: encoding is not valid Unicode"),
        (
            lambda: tokens.count_batch(["x", "\ud800"]),
            InvalidOperationError,
            "count_batch: texts[1] is not valid Unicode",
        ),
        (
            lambda: tokens.count_batch(5),
            InvalidOperationError,
            "count_batch: texts must be an iterable of str, got int",
        ),
        (lambda: tokens.count_messages(5), InvalidOperationError, "count_messages: messages must be a list"),
        (
            lambda: tokens.encoding_for_model("gpt\ud800"),
            InvalidOperationError,
            "encoding_for_model: encoding is not valid Unicode",
        ),
        (lambda: MessageArray.from_json("\ud800"), StateError, "from_json: text is not valid Unicode"),
        (
            lambda: sanitize_messages([{"role": "\ud800", "content": "x"}]),
            InvalidMessageError,
            "messages[0].role: str is not valid Unicode (it holds a lone surrogate)",
        ),
        (
            lambda: MessageArray([{"role": "x" * 100_000, "content": "x"}]),
            InvalidMessageError,
            f'messages[0].role: unknown role "{"x" * 80}"…: expected',
        ),
        (
            lambda: tokens.count("x", "gpt" * 100_000),
            InvalidOperationError,
            f'count: encoding: unknown encoding "{("gpt" * 27)[:80]}"…: expected',
        ),
        (
            lambda: formats.from_langchain([{"role": "user", "content": ({}, {})}]),
            InvalidMessageError,
            "messages: LangChain cannot read them: KeyError: 'type'",
        ),
    ],
)
def test_regression_module_functions_refuse_hostile_arguments(
    call: Callable[[], Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=re.escape(words)):
        call()


def test_regression_context_system_arguments() -> None:
    ctx = ContextSystem("You are terse.", active_pages=1)
    ctx.add(user("q1"))
    ctx.add(user("q2"))  # archives page 1
    before = ctx.state()
    with pytest.raises(
        InvalidOperationError, match="count_messages: messages must be a list of message dicts, got int"
    ):
        ctx.count_tokens(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="search: query is not valid Unicode"):
        ctx.search("\ud800")
    assert ctx.search("q1", k=2**64)[0].page_index == 1
    assert ctx.state() == before


@pytest.mark.parametrize("make_store", ["memory", "sqlite", "directory"])
def test_regression_stores_refuse_hostile_arguments(make_store: str, tmp_path: Any) -> None:
    store = {
        "memory": MemoryStorage,
        "sqlite": lambda: SqliteStorage(tmp_path / "a.db"),
        "directory": lambda: DirectoryStorage(tmp_path / "pages"),
    }[make_store]()
    page = {"index": 1, "messages": [], "summary": "s", "entry_summaries": [], "archived_round": 0}
    with pytest.raises(StorageError, match=re.escape("from 1 to 2**63 - 1, got 9223372036854775808")):
        store.get_page(2**63)
    with pytest.raises(StorageError, match=re.escape(f"got {BITS}")):
        store.put_page(HUGE, page)
    with pytest.raises(StorageError, match="page 1: summary holds a lone surrogate"):
        store.put_page(1, {**page, "summary": "\ud800"})
    with pytest.raises(StorageError, match=re.escape("page 1: \\ud800 (a key) holds a lone surrogate")):
        store.put_page(1, {**page, "\ud800": 1})
    with pytest.raises(StorageError, match=re.escape("state: x[0] holds a lone surrogate")):
        store.save_state({"version": 1, "x": ["\ud800"]})
    with pytest.raises(StorageError, match="pages must be a list of pages, got int"):
        store.save_state({"version": 1}, 5)  # type: ignore[arg-type]
    assert store.page_indices() == []
    assert store.load_state() is None
    store.close()


# ---- the context system ------------------------------------------------------------------------


def test_list_pages_refuses_a_huge_negative_limit_as_a_memci_error() -> None:
    with pytest.raises(InvalidOperationError, match="list_pages: limit"):
        ContextSystem("You are terse.").list_pages(-HUGE)


def test_context_system_refuses_a_huge_negative_active_pages_as_a_memci_error() -> None:
    with pytest.raises(InvalidOperationError, match="active_pages"):
        ContextSystem("You are terse.", active_pages=-HUGE)


def test_context_system_refuses_a_storage_that_is_not_one() -> None:
    with pytest.raises(MemciError, match="storage"):
        ContextSystem("You are terse.", storage=5)  # type: ignore[arg-type]


def test_load_refuses_a_storage_that_is_not_one() -> None:
    with pytest.raises(MemciError, match="storage"):
        ContextSystem.load(5)  # type: ignore[arg-type]
