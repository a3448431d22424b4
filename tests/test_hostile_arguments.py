"""Every public entry raises only the ``memci.MemciError`` family for bad arguments, and a call that
raises changes nothing (docs/errors.md): each public method of ``MessageArray``, ``ContextSystem``
and the stores, and each public function of ``memci.tokens``, ``memci.sanitize`` and
``memci.formats``, called with hostile arguments (ints of any size, NaN, lone surrogates, bytes,
wrong types, None, nested junk, a megabyte of text) mixed with good ones.

The methods are found by introspection: a new public method, or a new parameter, fails
``test_every_public_entry_is_listed`` until it is listed below with the kinds of its arguments."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import memci
import pytest
from factories import assistant, call, calling, free_port, numbered, tool, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memci import (
    ArchivePolicy,
    ContextSystem,
    DirectoryStorage,
    ExtractiveSummarizer,
    MemoryStorage,
    MessageArray,
    Page,
    PageSearch,
    SqliteStorage,
    TokenUsage,
    Usage,
    cost,
    formats,
    ops,
    sanitize,
    tokens,
)

# ---- arguments ---------------------------------------------------------------------------------


class Huge:
    """Stands for an int too long to print (over 4,300 digits) until :func:`_real` makes it: drawn
    values are printed when a property fails, and such an int cannot be."""

    def __init__(self, sign: int) -> None:
        self.sign = sign

    def __repr__(self) -> str:
        return f"{'-' if self.sign < 0 else ''}10**5000"


def _real(value: Any) -> Any:
    """``value`` with each :class:`Huge` made the int it stands for (in lists, tuples and dicts too)."""
    if isinstance(value, Huge):
        return value.sign * 10**5000
    if type(value) is list:
        return [_real(v) for v in value]
    if type(value) is tuple:
        return tuple(_real(v) for v in value)
    if type(value) is dict:
        return {k: _real(v) for k, v in value.items()}
    return value


#: Ints that overflow every fixed width, or print to more than 4,300 digits.
HUGE_INTS = st.sampled_from([Huge(1), Huge(-1), 2**63, 2**64, -(2**63) - 1, 2**64 + 1, -1, 2**31])
LONE_SURROGATES = st.sampled_from(["\ud800", "a\udfffb", "\udc00" * 3, "user\ud800"])
ODD_OBJECTS = st.sampled_from([object(), 1j, ..., b"user", bytearray(b"x"), frozenset({1}), {1, 2}, type, print])
SCALAR_JUNK = st.one_of(
    HUGE_INTS,
    st.integers(),
    st.floats(),  # nan and infinities included
    LONE_SURROGATES,
    st.text(max_size=8),
    st.just("x" * (1 << 20)),
    st.none(),
    st.booleans(),
    st.binary(max_size=4),
    ODD_OBJECTS,
)
JUNK = st.recursive(
    SCALAR_JUNK,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.sampled_from(["role", "content", "\ud800", "x"]) | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)

MESSAGES = [
    user("hello"),
    assistant("hi"),
    calling(call("call_9")),
    tool("call_9"),
    {"role": "system", "content": "be brief"},
]


def _message_like(junk: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A message, a message with a hostile field, or junk."""
    good = st.sampled_from(MESSAGES)
    poisoned = st.builds(lambda m, k, v: {**m, k: v}, good, st.sampled_from(["content", "role", "name", "x"]), junk)
    return good | poisoned | junk


def one_token(message: object) -> int:
    """A counter that reads nothing (so junk it is given cannot make it raise)."""
    return 1


def _saved_storage() -> MemoryStorage:
    """A store holding a saved context system."""
    store = MemoryStorage()
    ctx = ContextSystem("You are terse.", active_pages=1, storage=store)
    ctx.add(user("q1"))
    ctx.add(user("q2"))
    ctx.save()
    return store


#: Good values of each kind of argument, mixed with junk by ``argument``.
GOOD: dict[str, st.SearchStrategy[Any]] = {
    "count": st.integers(0, 6),
    "optional_count": st.none()
    | st.integers(0, 6)
    | st.builds(lambda n: {"type": "input_tokens", "value": n}, st.integers(0, 6)),
    "context_edits": st.none() | st.just([ops.ClearToolUses(keep=1)]) | st.just([ops.ClearThinking()]),
    "index": st.integers(-6, 6),
    "page_index": st.integers(1, 4),
    "page_indices": st.lists(st.integers(1, 4), max_size=4),
    "role": st.sampled_from(ops.ROLES),
    "roles": st.lists(st.sampled_from(ops.ROLES), max_size=2) | st.sampled_from(ops.ROLES),
    "text": st.text(max_size=6),
    "optional_text": st.none() | st.text(max_size=6),
    "encoding": st.sampled_from(["o200k_base", "cl100k_base", "gpt-4o", "approximate"]),
    "strategy": st.sampled_from(["first", "last"]),
    "thinking": st.sampled_from(["drop_earlier", "count"]),
    "low_water": st.none() | st.floats(0.05, 1.0),
    "flag": st.booleans(),
    "fraction": st.floats() | st.integers(-2, 2),
    "requests": st.lists(st.lists(st.sampled_from(MESSAGES), max_size=3), max_size=3),
    "prices": st.sampled_from([cost.ANTHROPIC, cost.Prices(read=0.5, write=1.0)]),
    "time": st.none() | st.floats(allow_nan=False, allow_infinity=False),
    "message": st.sampled_from(MESSAGES),
    "messages": st.lists(st.sampled_from(MESSAGES), max_size=3),
    "counter": st.sampled_from([None, tokens.approximate, one_token]),
    "text_splitter": st.sampled_from([None, list, str.splitlines]),
    "range": st.sampled_from([(0, 1), [1, 3], {"start": 0, "end": 2}]),
    "op": st.sampled_from([ops.Truncate(keep_last=2), {"operation": "clear"}, {"operation": "CHECKPOINT"}]),
    "key": st.integers(-6, 6) | st.builds(slice, st.integers(-6, 6) | st.none(), st.integers(-6, 6) | st.none()),
    "state_text": st.just(MessageArray(numbered(2)).to_json()),
    "tool_call": st.sampled_from(
        [
            {"id": "c", "type": "function", "function": {"name": "recall_page", "arguments": '{"page_index": 1}'}},
            {"type": "tool_use", "id": "t", "name": "list_pages", "input": {}},
        ]
    ),
    "format": st.sampled_from(["openai", "anthropic", "responses", "attp"]),
    "tool_name": st.sampled_from(["recall_page", "list_pages", "search_pages"]),
    "tool_arguments": st.none()
    | st.just('{"page_index": 1}')
    | st.builds(lambda i: {"page_index": i}, st.integers(1, 4))
    | st.just({"limit": 3})
    | st.just({"query": "page", "k": 2}),
    "agent_tools": st.none()
    | st.just([{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}])
    | st.just([{"name": "weather", "input_schema": {"type": "object"}}]),
    "context_state": st.builds(lambda: _saved_storage().load_state()),
    "page": st.builds(
        lambda i: {"index": i, "messages": [user("q")], "summary": "s", "entry_summaries": [], "archived_round": 0},
        st.integers(1, 4),
    ),
    "state": st.builds(lambda r: {"version": 1, "revision": r}, st.integers(1, 3)),
    "pages": st.lists(
        st.builds(
            lambda i: {"index": i, "messages": [], "summary": "s", "entry_summaries": [], "archived_round": 0},
            st.integers(1, 3),
        ),
        max_size=2,
    ),
    "anthropic_system": st.none() | st.text(max_size=6),
    "storage": st.builds(MemoryStorage) | st.builds(_saved_storage),
    "summarizer": st.sampled_from([None, str.upper]),
    "policy": st.builds(ArchivePolicy),
    "search_items": st.lists(st.tuples(st.integers(1, 4), st.text(max_size=6)), max_size=3),
    "embedder": st.none() | st.just(lambda texts: [[1.0, float(len(t))] for t in texts]),
    "fusion": st.sampled_from(["rrf", "convex"]),
    "vector": st.none() | st.just(b"\x00\x00\x80\x3f\x00\x00\x00\x00"),
    "texts": st.lists(st.text(max_size=6), max_size=3),
    "batch": st.sampled_from([None, lambda: 0]),
    "usage": st.sampled_from(
        [
            {"prompt_tokens": 3, "completion_tokens": 1},
            {"input_tokens": 2, "output_tokens": 1, "cache_read_input_tokens": 1},
        ]
    ),
    "page_object": st.builds(lambda: Page.of(1, [user("q"), assistant("a")])),
}


def argument(kind: str) -> st.SearchStrategy[Any]:
    """A good value of ``kind`` or a hostile one."""
    good = GOOD[kind]
    if kind in ("message", "page", "tool_call"):
        return _message_like(JUNK) | good
    if kind == "messages":
        return st.lists(_message_like(JUNK), max_size=3) | good | JUNK
    return good | JUNK


# ---- the entries and their arguments ------------------------------------------------------------

#: The parameters a method and its operation config share.
TRIM_KINDS = {
    "max_tokens": "count",
    "strategy": "strategy",
    "keep_system": "flag",
    "start_on": "roles",
    "end_on": "roles",
    "allow_partial": "flag",
    "encoding": "encoding",
    "thinking": "thinking",
    "low_water": "low_water",
}
EDIT_KINDS = {
    "trigger": "optional_count",
    "keep": "count",
    "clear_at_least": "optional_count",
    "exclude_tools": "roles",
    "clear_tool_inputs": "flag",
    "placeholder": "optional_text",
    "encoding": "encoding",
    "thinking": "thinking",
}
THINKING_EDIT_KINDS = {"keep_turns": "count", "encoding": "encoding", "thinking": "thinking"}
TRUNCATE_KINDS = {
    "keep_first": "count",
    "keep_last": "count",
    "remove_first": "count",
    "remove_last": "count",
    "range": "range",
    "role": "role",
}

#: Public method -> the kind of each parameter, in order (``self`` left out).
ARRAY_METHODS: dict[str, dict[str, str]] = {
    "__init__": {"messages": "messages", "tool_description": "optional_text"},
    "__getitem__": {"key": "key"},
    "all_messages": {},
    "append": {"messages": "messages"},
    "between": {"start": "time", "end": "time", "role": "role"},
    "by_role": {"role": "role"},
    "checkpoint": {"description": "optional_text"},
    "clear": {"keep_system": "flag"},
    "clear_thinking": THINKING_EDIT_KINDS,
    "clear_tool_uses": EDIT_KINDS,
    "count": {"role": "role"},
    "execute": {"op": "op"},
    "filter": {"roles": "roles", "content_contains": "roles", "content_excludes": "roles"},
    "from_json": {"text": "state_text"},
    "indices": {"role": "role"},
    "insert": {"position": "count", "messages": "messages"},
    "mark": {"index": "index", "tag": "text"},
    "marked": {"tag": "text", "role": "role"},
    "messages": {},
    "recent": {"n": "count", "role": "role", "roles": "roles"},
    "replace": {"index": "index", "message": "message"},
    "role_range": {"role": "role", "start": "index", "end": "index"},
    "rollback": {"batch_index": "count"},
    "sanitize": {},
    "snapshot": {"batch_index": "count"},
    "stats": {},
    "to_json": {},
    "token_count": {"encoding": "encoding", "counter": "counter", "thinking": "thinking"},
    "trim_to_tokens": {**TRIM_KINDS, "counter": "counter", "text_splitter": "text_splitter"},
    "truncate": TRUNCATE_KINDS,
    "validate": {},
}

CONTEXT_METHODS: dict[str, dict[str, str]] = {
    "add": {"message": "message"},
    "build_messages": {"sanitize": "flag"},
    "clear": {"forget": "flag"},
    "contents_text": {},
    "contents_tokens": {},
    "count_tokens": {"messages": "messages"},
    "end_round": {},
    "extend": {"messages": "messages"},
    "feed": {"messages": "messages"},
    "handle_tool_call": {"call": "tool_call"},
    "is_active": {"page_index": "page_index"},
    "is_recall_call": {"call": "tool_call"},
    "list_pages": {"limit": "count"},
    "pop": {},
    "recall": {"page_index": "page_index"},
    "run_tool": {"name": "tool_name", "arguments": "tool_arguments"},
    "save": {},
    "search": {"query": "text", "k": "count"},
    "state": {},
    "to_state": {},
    "token_count": {},
    "tool_definitions": {"format": "format"},
    "tool_tokens": {},
}

STORE_METHODS: dict[str, dict[str, str]] = {
    "get_page": {"index": "page_index"},
    "get_pages": {"indices": "page_indices"},
    "load_state": {},
    "page_indices": {},
    "put_page": {"index": "page_index", "page": "page"},
    "save_state": {"state": "state", "pages": "pages"},
}
SQLITE_METHODS = {**STORE_METHODS, "checkpoint": {}, "file_bytes": {}}

FUNCTIONS: dict[str, dict[str, str]] = {
    "tokens.approximate": {"message": "message"},
    "tokens.count": {"text": "text", "encoding": "encoding"},
    "tokens.count_batch": {"texts": "roles", "encoding": "encoding"},
    "tokens.count_message": {"message": "message", "encoding": "encoding", "counter": "counter"},
    "tokens.as_sent": {"messages": "messages", "thinking": "thinking"},
    "tokens.count_messages": {
        "messages": "messages",
        "encoding": "encoding",
        "counter": "counter",
        "thinking": "thinking",
    },
    "tokens.encoding_for_model": {"model": "encoding"},
    "tokens.ranks_file": {"encoding": "encoding"},
    "tokens.reply_priming": {"encoding": "encoding"},
    "sanitize.sanitize_messages": {"messages": "messages"},
    "sanitize.validate_messages": {"messages": "messages"},
    "cost.measure": {
        "requests": "requests",
        "prices": "prices",
        "tool_tokens": "count",
        "min_cached": "count",
        "encoding": "encoding",
        "counter": "counter",
    },
    "formats.dumped": {"message": "message"},
    "formats.from_langchain": {"messages": "messages"},
    "formats.from_responses": {"items": "messages"},
    "formats.to_anthropic": {"messages": "messages", "cache_control": "flag"},
    "formats.to_langchain": {"messages": "messages"},
    "formats.to_openai": {"messages": "messages", "system": "anthropic_system"},
    "formats.to_responses": {"messages": "messages"},
}
FUNCTIONS.update(
    {
        "ops.Append": {"messages": "messages"},
        "ops.Checkpoint": {"description": "optional_text"},
        "ops.Clear": {"keep_system": "flag"},
        "ops.ClearThinking": THINKING_EDIT_KINDS,
        "ops.ClearToolUses": EDIT_KINDS,
        "ops.Filter": {"roles": "roles", "content_contains": "roles", "content_excludes": "roles"},
        "ops.Insert": {"position": "count", "messages": "messages"},
        "ops.Replace": {"index": "index", "message": "message"},
        "ops.Rollback": {"batch_index": "count"},
        "ops.Sanitize": {},
        "ops.TrimToTokens": TRIM_KINDS,
        "ops.Truncate": TRUNCATE_KINDS,
        "ops.parse": {"op": "op"},
    }
)
MODULES: dict[str, ModuleType] = {"tokens": tokens, "sanitize": sanitize, "formats": formats, "ops": ops, "cost": cost}

#: Entries that must not raise at all (handle_tool_call may refuse what is not a tool call).
NEVER_RAISE = {"is_recall_call", "run_tool"}

#: Known faults, each pinned by a strict regression test in test_argument_faults.py; here they are
#: only found at random, so the property may pass (not strict).
KNOWN: dict[tuple[str, str], str] = {}


def _public_methods(cls: type, *, init: bool = True) -> dict[str, list[str]]:
    """Each public method of ``cls`` (and its ``__getitem__``, and ``__init__`` with ``init``) ->
    its parameter names. A store's constructor takes where it lives, not tested here."""
    dunders = ("__init__", "__getitem__") if init else ("__getitem__",)
    found = {}
    for name, member in inspect.getmembers(cls):
        if (name.startswith("_") and name not in dunders) or not callable(member):
            continue
        params = list(inspect.signature(member).parameters)
        found[name] = [p for p in params if p not in ("self", "cls")]
    return found


def _public_functions(module: ModuleType) -> dict[str, list[str]]:
    """Each public function of ``module`` (and of ``memci.ops`` each config, built from arguments)
    -> its parameter names."""
    return {
        f"{module.__name__.removeprefix('memci.')}.{name}": list(inspect.signature(fn).parameters)
        for name in module.__all__
        if inspect.isfunction(fn := getattr(module, name)) or (module is ops and isinstance(fn, type))
    }


def _page_search() -> PageSearch:
    index = PageSearch()
    index.extend([(1, "a question about tides"), (2, "an answer about the moon")])
    return index


def _usage() -> TokenUsage:
    usage = TokenUsage(limit=100)
    usage.record({"prompt_tokens": 10, "completion_tokens": 2}, model="m")
    return usage


#: Other public classes: how to make one, its methods, and what its state is.
OBJECTS: dict[str, tuple[Callable[[], Any], dict[str, dict[str, str]], Callable[[Any], Any]]] = {
    "PageSearch": (
        _page_search,
        {
            "__init__": {
                "snippet_chars": "count",
                "embedder": "embedder",
                "fusion": "fusion",
                "weight": "fraction",
                "neighbour_weight": "fraction",
            },
            "add": {"page_index": "page_index", "text": "text", "vector": "vector"},
            "embed": {"texts": "texts"},
            "embed_pending": {},
            "late_vectors": {},
            "drop_late_vectors": {"pages": "page_indices"},
            "extend": {"items": "search_items"},
            "search": {"query": "text", "k": "count"},
            "stored_vectors": {"texts": "texts"},
        },
        lambda index: (len(index), [(h.page_index, h.score) for h in index.search("tides question", 10)]),
    ),
    "TokenUsage": (
        _usage,
        {
            "__init__": {"limit": "count", "batch": "batch", "count": "batch"},
            "per_batch": {},
            "per_model": {},
            "record": {"usage": "usage", "model": "optional_text", "batch_index": "count", "counted": "count"},
            "records": {},
            "reset": {},
        },
        lambda usage: [(r.usage, r.batch_index, r.model) for r in usage.records()],
    ),
    "ExtractiveSummarizer": (
        ExtractiveSummarizer,
        {"__init__": {"entry_chars": "page_index", "page_chars": "page_index"}, "summarize": {"page": "page_object"}},
        repr,
    ),
    "Usage": (Usage, {"of": {"usage": "usage"}}, repr),
}


@pytest.mark.parametrize(
    ("found", "listed"),
    [
        *(
            (lambda cls=cls: _public_methods(cls, init=cls is not Usage), methods)
            for cls, (_, methods, _) in zip(
                (PageSearch, TokenUsage, ExtractiveSummarizer, Usage), OBJECTS.values(), strict=True
            )
        ),
        (lambda: _public_methods(MessageArray), ARRAY_METHODS),
        (
            lambda: {k: v for k, v in _public_methods(ContextSystem).items() if k not in CONSTRUCTORS},
            CONTEXT_METHODS,
        ),
        (lambda: _public_methods(MemoryStorage, init=False), {**STORE_METHODS, "close": {}}),
        (lambda: _public_methods(DirectoryStorage, init=False), {**STORE_METHODS, "close": {}}),
        (lambda: _public_methods(SqliteStorage, init=False), {**SQLITE_METHODS, "close": {}}),
        (lambda: {k: v for m in MODULES.values() for k, v in _public_functions(m).items()}, FUNCTIONS),
    ],
    ids=[*OBJECTS, "MessageArray", "ContextSystem", "MemoryStorage", "DirectoryStorage", "SqliteStorage", "functions"],
)
def test_every_public_entry_is_listed(
    found: Callable[[], dict[str, list[str]]], listed: dict[str, dict[str, str]]
) -> None:
    assert {name: list(params) for name, params in listed.items()} == found()


# ---- the oracle ----------------------------------------------------------------------------------


def _called(fn: Callable[..., Any], kwargs: dict[str, Any], never_raise: bool = False) -> BaseException | None:
    """Call ``fn``; the exception it raised, after checking it is a MemciError with a printable,
    bounded message."""
    raised: BaseException | None = None
    try:
        fn(**kwargs)
    except BaseException as e:  # a PanicException is a BaseException: caught to be reported
        raised = e
    if raised is None:
        return None
    assert not never_raise, f"raised {type(raised).__name__}: {raised}"
    assert isinstance(raised, memci.MemciError), f"{type(raised).__name__} escaped: {raised!s:.300}"
    text = str(raised)
    text.encode("utf-8")  # no lone surrogate in the message itself
    assert len(text) < 4000, f"a message of {len(text)} characters"
    return raised


def _kwargs(data: st.DataObject, fn: Callable[..., Any], params: dict[str, str]) -> dict[str, Any]:
    """Every parameter given (hostile or good), or left to its default at random when it has one."""
    signature = inspect.signature(fn)
    out = {}
    for name, kind in params.items():
        required = signature.parameters[name].default is inspect.Parameter.empty
        if required or data.draw(st.booleans(), label=f"give {name}"):
            out[name] = _real(data.draw(argument(kind), label=name))
    return out


SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _marks(target: str, name: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.xfail(strict=False, reason=KNOWN[target, name])] if (target, name) in KNOWN else []


def _cases(methods: dict[str, dict[str, str]], target: str) -> Iterator[Any]:
    for name in methods:
        yield pytest.param(name, id=name, marks=_marks(target, name))


# ---- MessageArray ---------------------------------------------------------------------------------


def _array() -> MessageArray:
    arr = MessageArray([*numbered(3), assistant("a"), calling(call("c1")), tool("c1")], tool_description="tools")
    arr.mark(0, "first")
    arr.checkpoint("start")
    arr.truncate(keep_last=5)
    return arr


@pytest.mark.parametrize("name", list(_cases(ARRAY_METHODS, "MessageArray")))
@SETTINGS
@given(data=st.data())
def test_message_array_methods_raise_memci_errors_and_change_nothing(name: str, data: st.DataObject) -> None:
    arr = _array()
    before = arr.to_json()
    if name == "__init__":
        _called(MessageArray, _kwargs(data, MessageArray, ARRAY_METHODS[name]))
        return
    method = getattr(MessageArray, name) if name == "from_json" else getattr(arr, name)
    if _called(method, _kwargs(data, method, ARRAY_METHODS[name])) is not None:
        assert arr.to_json() == before


# ---- ContextSystem --------------------------------------------------------------------------------


def _context() -> ContextSystem:
    ctx = ContextSystem("You are terse.", active_pages=2, summarizer=lambda text: text[:40])
    for i in range(4):
        ctx.add(user(f"question {i} about tides"))
        ctx.add(assistant(f"answer {i}"))
        ctx.end_round()
    return ctx


@pytest.mark.parametrize("name", list(_cases(CONTEXT_METHODS, "ContextSystem")))
@SETTINGS
@given(data=st.data())
def test_context_system_methods_raise_memci_errors_and_change_nothing(name: str, data: st.DataObject) -> None:
    ctx = _context()
    before = json.dumps(ctx.state())
    method = getattr(ctx, name)
    if _called(method, _kwargs(data, method, CONTEXT_METHODS[name]), never_raise=name in NEVER_RAISE):
        assert json.dumps(ctx.state()) == before


CONSTRUCTION = {
    "system_prompt": "anthropic_system",
    "tools": "format",
    "agent_tools": "agent_tools",
    "active_pages": "page_index",
    "storage": "storage",
    "summarizer": "summarizer",
    "policy": "policy",
    "encoding": "encoding",
    "max_context_tokens": "count",
    "counter": "counter",
    "thinking": "thinking",
    "cache_stable": "flag",
    "low_water": "fraction",
    "embedder": "embedder",
    "context_edits": "context_edits",
}
LOADING = {
    "storage": "storage",
    "summarizer": "summarizer",
    "counter": "counter",
    "thinking": "thinking",
    "embedder": "embedder",
}
#: The ways to make a ContextSystem, and the kinds of their arguments.
CONSTRUCTORS: dict[str, dict[str, str]] = {
    "__init__": CONSTRUCTION,
    "load": LOADING,
    "open": CONSTRUCTION,
    "from_state": {"state": "context_state", **LOADING},
}


@pytest.mark.parametrize(
    ("name", "params"),
    [pytest.param(name, params, id=name, marks=_marks("ContextSystem", name)) for name, params in CONSTRUCTORS.items()],
)
@SETTINGS
@given(data=st.data())
def test_context_system_construction_raises_memci_errors(
    name: str, params: dict[str, str], data: st.DataObject
) -> None:
    make = ContextSystem if name == "__init__" else getattr(ContextSystem, name)
    _called(make, _kwargs(data, make, params))


def test_every_way_to_make_a_context_system_is_listed() -> None:
    for name, params in CONSTRUCTORS.items():
        signature = inspect.signature(ContextSystem if name == "__init__" else getattr(ContextSystem, name))
        assert sorted(params) == sorted(signature.parameters), name


# ---- stores ---------------------------------------------------------------------------------------


def _store_state(store: Any) -> str:
    pages = {i: store.get_page(i) for i in store.page_indices()}
    return json.dumps([pages, store.load_state()], sort_keys=True)


STORES: dict[str, tuple[Callable[[Path], Any], dict[str, dict[str, str]]]] = {
    "MemoryStorage": (lambda _: MemoryStorage(), STORE_METHODS),
    "DirectoryStorage": (lambda path: DirectoryStorage(path / "pages"), STORE_METHODS),
    "SqliteStorage": (lambda path: SqliteStorage(path / "store.db"), SQLITE_METHODS),
}

#: Each store's constructor and the kinds of its arguments (run in a temporary working folder: a
#: relative path lands there). Redis and PostgreSQL are given servers that refuse at once.
STORE_CONSTRUCTORS: dict[str, dict[str, str]] = {
    "SqliteStorage": {
        "path": "store_path",
        "namespace": "text",
        "read_only": "flag",
        "synchronous": "synchronous",
        "timeout": "seconds",
    },
    "AsyncSqliteStorage": {
        "path": "store_path",
        "namespace": "text",
        "read_only": "flag",
        "synchronous": "synchronous",
        "timeout": "seconds",
    },
    "DirectoryStorage": {"path": "store_path", "read_only": "flag", "fsync": "flag"},
    "RedisStorage": {"target": "redis_url", "prefix": "text"},
    "AsyncRedisStorage": {"target": "redis_url", "prefix": "text"},
    "PostgresStorage": {
        "target": "dsn",
        "namespace": "text",
        "ttl": "seconds",
        "timeout": "seconds",
        "pool_size": "page_index",
    },
    "AsyncPostgresStorage": {
        "target": "dsn",
        "namespace": "text",
        "ttl": "seconds",
        "timeout": "seconds",
        "pool_size": "page_index",
    },
    "EncryptedStorage": {"store": "storage", "key": "key_bytes", "key_id": "text", "old_keys": "old_keys"},
}
GOOD.update(
    {
        "store_path": st.sampled_from(["store.db", "sub/store", Path("store.db")]),
        "synchronous": st.sampled_from(["FULL", "NORMAL"]),
        "seconds": st.floats(0.5, 5) | st.integers(1, 5),
        "redis_url": st.builds(lambda: f"redis://127.0.0.1:{free_port()}/0"),
        "dsn": st.builds(lambda: f"host=127.0.0.1 port={free_port()} dbname=x user=x"),
        "key_bytes": st.sampled_from([bytes(32), bytes(16)]),
        "old_keys": st.none() | st.just({"old": bytes(32)}),
    }
)


def _contained(value: Any) -> Any:
    """A drawn path kept inside the working folder: no root, no way up."""
    return value.lstrip("/").replace("..", "__") if isinstance(value, str) else value


@pytest.mark.parametrize(
    ("store_name", "name"),
    [
        *(
            pytest.param(store_name, name, id=f"{store_name}.{name}")
            for store_name, (_, methods) in STORES.items()
            for name in methods
        ),
        *(pytest.param(store_name, "__init__", id=f"{store_name}.__init__") for store_name in STORE_CONSTRUCTORS),
    ],
)
@SETTINGS
@given(data=st.data())
def test_store_methods_raise_memci_errors_and_change_nothing(
    store_name: str, name: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if name == "__init__":
        cls = getattr(memci.storage, store_name)
        kwargs = {key: _contained(value) for key, value in _kwargs(data, cls, STORE_CONSTRUCTORS[store_name]).items()}
        here = os.getcwd()
        os.chdir(tmp_path_factory.mktemp("cwd"))
        try:
            made: Any = None
            if not _called(lambda: _keep(cls(**kwargs)), {}):
                made = _made.pop()
        finally:
            os.chdir(here)
        if made is not None:
            closing = made.close()
            if inspect.isawaitable(closing):
                asyncio.run(closing)
        return
    make, methods = STORES[store_name]
    store = make(tmp_path_factory.mktemp("store"))
    try:
        store.save_state(
            {"version": 1, "revision": 1, "pages_through": 1},
            [{"index": 1, "messages": [user("q")], "summary": "s", "entry_summaries": [], "archived_round": 0}],
        )
        before = _store_state(store)
        method = getattr(store, name)
        if _called(method, _kwargs(data, method, methods[name])):
            assert _store_state(store) == before
    finally:
        store.close()


#: The store a constructor call made, for the test to close.
_made: list[Any] = []


def _keep(store: Any) -> None:
    _made.append(store)


def test_every_store_constructor_is_listed() -> None:
    for store_name, params in STORE_CONSTRUCTORS.items():
        assert sorted(params) == sorted(inspect.signature(getattr(memci.storage, store_name)).parameters), store_name


# ---- module functions -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(_cases(FUNCTIONS, "functions")))
@SETTINGS
@given(data=st.data())
def test_module_functions_raise_memci_errors(name: str, data: st.DataObject) -> None:
    module, function = name.split(".")
    fn = getattr(MODULES[module], function)
    _called(fn, _kwargs(data, fn, FUNCTIONS[name]))


# ---- other public classes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls_name", "name"),
    [pytest.param(c, n, id=f"{c}.{n}") for c, (_, methods, _) in OBJECTS.items() for n in methods],
)
@SETTINGS
@given(data=st.data())
def test_other_public_methods_raise_memci_errors_and_change_nothing(
    cls_name: str, name: str, data: st.DataObject
) -> None:
    make, methods, state = OBJECTS[cls_name]
    if name == "__init__":
        cls = {"PageSearch": PageSearch, "TokenUsage": TokenUsage, "ExtractiveSummarizer": ExtractiveSummarizer}[
            cls_name
        ]
        _called(cls, _kwargs(data, cls, methods[name]))
        return
    obj = make()
    before = state(obj)
    method = getattr(obj, name)
    if _called(method, _kwargs(data, method, methods[name])):
        assert state(obj) == before


# ---- memci.batch ----------------------------------------------------------------------------------
# The pipeline, its steps and the Arrow functions, with hostile arguments. A run over an iterable
# is consumed (its records are read lazily). File arguments are good files in a folder of the
# test's own (the run's working folder too), or junk that is not a usable path: a path that names
# nothing is an OSError by the contract, not an argument fault.

from memci import batch  # noqa: E402
from memci.batch import arrow as batch_arrow  # noqa: E402

_BATCH_RECORD = json.dumps([user("q"), tool("gone"), assistant("a")])
#: Placeholders for the files of a run, made real by ``_batch_files``.
_IN, _OUT, _ERRORS = "<in.jsonl>", "<out.jsonl>", "<errors.jsonl>"
_NOT_CALLABLE = JUNK.filter(lambda value: not callable(value))
_NOT_A_PATH = (
    JUNK.filter(lambda value: not isinstance(value, str | bytes))
    | LONE_SURROGATES
    | st.sampled_from(["", "a\0b", b"\0"])
)


def _arrow_table() -> Any:
    import pyarrow as pa

    return pa.table({"messages": [_BATCH_RECORD, "{bad"], "id": [1, 2]})


_BATCH_GOOD: dict[str, st.SearchStrategy[Any]] = {
    "steps": st.lists(
        st.sampled_from(
            [batch.sanitize(), batch.truncate(keep_last=2), {"operation": "count_tokens"}, {"operation": "clear"}]
        ),
        max_size=3,
    ),
    "batch_format": st.sampled_from(["chat", "openai", "anthropic", "responses"]),
    "workers": st.none() | st.integers(1, 2),
    "conversations": st.lists(st.lists(st.sampled_from(MESSAGES), max_size=3), max_size=3),
    "records": st.lists(st.sampled_from([_BATCH_RECORD, _BATCH_RECORD.encode(), "{bad", ""]), max_size=3),
    "progress": st.sampled_from([None, lambda read, total, records: None]),
    "in_file": st.just(_IN),
    "out_file": st.just(_OUT),
    "errors_file": st.sampled_from([None, _ERRORS]),
    "pipeline": st.builds(lambda: batch.Pipeline([batch.sanitize()], workers=1)),
    "table": st.builds(_arrow_table),
    "column": st.just("messages"),
}


def _batch_argument(kind: str) -> st.SearchStrategy[Any]:
    """A good value of ``kind`` or a hostile one (a callable that raises is the caller's own)."""
    if kind in ("in_file", "out_file", "errors_file"):
        return _BATCH_GOOD[kind] | _NOT_A_PATH
    if kind == "progress":
        return _BATCH_GOOD[kind] | _NOT_CALLABLE
    if kind in _BATCH_GOOD:
        return _BATCH_GOOD[kind] | JUNK
    return argument(kind)


RUN_FILES = {"input": "in_file", "output": "out_file", "errors": "errors_file"}
PIPELINE_METHODS: dict[str, dict[str, str]] = {
    "__init__": {"steps": "steps", "format": "batch_format", "workers": "workers"},
    "apply": {"messages": "messages"},
    "run": {"conversations": "conversations", "chunk_size": "count"},
    "run_records": {"records": "records", "chunk_size": "count"},
    "run_jsonl": {**RUN_FILES, "progress": "progress", "chunk_bytes": "count"},
}
BATCH_FUNCTIONS: dict[str, dict[str, str]] = {
    "batch.clear": {"keep_system": "flag"},
    "batch.clear_tool_uses": {name: kind for name, kind in EDIT_KINDS.items() if name != "thinking"},
    "batch.count_tokens": {"encoding": "encoding"},
    "batch.filter": {"roles": "roles", "content_contains": "roles", "content_excludes": "roles"},
    "batch.sanitize": {},
    # A batch trim counts thinking in full: it takes no ``thinking`` (docs/tokens.md).
    "batch.trim_to_tokens": {name: kind for name, kind in TRIM_KINDS.items() if name != "low_water"},
    "batch.truncate": TRUNCATE_KINDS,
    "batch.arrow.run_table": {"pipeline": "pipeline", "table": "table", "column": "column", "first_row": "count"},
    "batch.arrow.run_parquet": {
        "pipeline": "pipeline",
        "input": "in_file",
        "output": "out_file",
        "column": "column",
        "errors": "errors_file",
        "progress": "progress",
        "batch_rows": "count",
    },
}
BATCH_MODULES: dict[str, ModuleType] = {"batch": batch, "batch.arrow": batch_arrow}


def test_every_batch_entry_is_listed() -> None:
    found = {k: v for m in BATCH_MODULES.values() for k, v in _public_functions(m).items()}
    assert {name: list(params) for name, params in BATCH_FUNCTIONS.items()} == found
    listed = {name: list(params) for name, params in PIPELINE_METHODS.items()}
    assert listed == _public_methods(batch.Pipeline)


def _batch_kwargs(data: st.DataObject, fn: Callable[..., Any], params: dict[str, str]) -> dict[str, Any]:
    """As :func:`_kwargs`, with this section's kinds of arguments."""
    signature = inspect.signature(fn)
    return {
        name: _real(data.draw(_batch_argument(kind), label=name))
        for name, kind in params.items()
        if signature.parameters[name].default is inspect.Parameter.empty
        or data.draw(st.booleans(), label=f"give {name}")
    }


def _batch_files(folder: Path, kwargs: dict[str, Any], parquet: bool) -> dict[str, Any]:
    """``kwargs`` with the file placeholders made files of ``folder`` (the input written)."""
    source = folder / ("in.parquet" if parquet else "in.jsonl")
    if parquet:
        import pyarrow.parquet as pq

        pq.write_table(_arrow_table(), source)
    else:
        source.write_text(f"{_BATCH_RECORD}\n{{bad\n\n", encoding="utf-8")
    places = {_IN: source, _OUT: folder / source.name.replace("in", "out"), _ERRORS: folder / "errors.jsonl"}
    return {k: places.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}


def _batch_call(fn: Callable[..., Any], lazy: bool) -> Callable[..., Any]:
    """``fn``, its lazy results read to the end."""
    return (lambda **kwargs: list(fn(**kwargs))) if lazy else fn


def _checked_batch(fn: Callable[..., Any], kwargs: dict[str, Any], folder: Path) -> None:
    """Call in ``folder``; a refusal is a MemciError whose text is short (values cut to 80
    characters) and leaves no file behind but the input."""
    before = sorted(p.name for p in folder.iterdir())
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        raised = _called(fn, kwargs)
    finally:
        os.chdir(cwd)
    if raised is not None:
        assert len(str(raised)) < 600, f"a message of {len(str(raised))} characters"
        assert sorted(p.name for p in folder.iterdir()) == before


#: Every entry of this section: the pipeline's methods, then the module functions.
BATCH_ENTRIES = {**{f"Pipeline.{name}": params for name, params in PIPELINE_METHODS.items()}, **BATCH_FUNCTIONS}


def _batch_entry(name: str) -> Callable[..., Any]:
    owner, function = name.rsplit(".", 1)
    if owner == "Pipeline":
        if function == "__init__":
            return batch.Pipeline
        return getattr(batch.Pipeline([batch.sanitize(), batch.count_tokens()], workers=1), function)
    return getattr(BATCH_MODULES[owner], function)


@pytest.mark.parametrize("name", list(BATCH_ENTRIES))
@SETTINGS
@given(data=st.data())
def test_batch_entries_raise_memci_errors(
    name: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    fn = _batch_entry(name)
    kwargs = _batch_kwargs(data, fn, BATCH_ENTRIES[name])
    folder = tmp_path_factory.mktemp("batch")
    files = _batch_files(folder, kwargs, parquet=name == "batch.arrow.run_parquet")
    _checked_batch(_batch_call(fn, lazy=name in ("Pipeline.run", "Pipeline.run_records")), files, folder)
