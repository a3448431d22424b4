"""Messages for the tests: small factories, a few invalid messages, and hypothesis strategies."""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hypothesis import strategies as st

Message = dict[str, Any]

ROLES = ("system", "developer", "user", "assistant", "tool")


# ---- factories ----------------------------------------------------------------------------------


def anthropic_message(content: list[Message], *, message_id: str, calls_tools: bool) -> Any:
    """The ``anthropic`` SDK's ``Message`` for an assistant reply of ``content`` blocks, as the API
    returns it (``stop_reason`` ``tool_use`` when it calls tools)."""
    from anthropic.types import Message as AnthropicMessage

    return AnthropicMessage.model_validate(
        {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": content,
            "stop_reason": "tool_use" if calls_tools else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )


def system(content: Any = "You are terse.", **extra: Any) -> Message:
    return {"role": "system", "content": content, **extra}


def developer(content: Any = "Answer in English.", **extra: Any) -> Message:
    return {"role": "developer", "content": content, **extra}


def user(content: Any = "hello", **extra: Any) -> Message:
    return {"role": "user", "content": content, **extra}


def assistant(content: Any = "ok", **extra: Any) -> Message:
    return {"role": "assistant", "content": content, **extra}


def call(call_id: str = "call_1", name: str = "search", arguments: str = '{"q": "x"}') -> Message:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def calling(*calls: Message, content: Any = None, **extra: Any) -> Message:
    """An assistant message that calls tools (``content`` None, as the APIs send it)."""
    return {"role": "assistant", "content": content, "tool_calls": list(calls) or [call()], **extra}


def tool(call_id: str = "call_1", content: Any = "result", **extra: Any) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content, **extra}


def numbered(n: int, role: str = "user") -> list[Message]:
    """``n`` messages of one role whose content is their number: ``"0"``, ``"1"``, ..."""
    return [{"role": role, "content": str(i)} for i in range(n)]


def contents(messages: list[Message]) -> list[Any]:
    return [m["content"] for m in messages]


def dialogue(turns: int) -> list[Message]:
    """A system prompt, then per turn: a user question, a tool call, its result, an answer."""
    messages = [system()]
    for t in range(turns):
        messages += [
            user(f"q{t}"),
            calling(call(f"call_{t}")),
            tool(f"call_{t}", f"r{t}"),
            assistant(f"a{t}"),
        ]
    return messages


def exact(value: Any) -> str:
    """A text that differs whenever two values differ in key order or type (``1`` vs ``1.0`` vs ``True``)."""
    return json.dumps(value, ensure_ascii=False)


def assert_same(got: Any, want: Any) -> None:
    """Equal, and equal key order and types too."""
    assert got == want
    assert exact(got) == exact(want)


# ---- invalid messages: (message, the start of the path, the word that names the problem) -------

INVALID: list[tuple[Any, str, str]] = [
    ("hello", "", "dict"),
    (["role", "user"], "", "dict"),
    (None, "", "dict"),
    ({"content": "x"}, "", "role"),
    ({"role": "robot", "content": "x"}, ".role", "robot"),
    ({"role": 5, "content": "x"}, ".role", "role"),
    ({"role": "user"}, "", "content"),
    ({"role": "user", "content": None}, "", "content"),
    ({"role": "user", "content": 5}, ".content", "content"),
    ({"role": "assistant", "content": None}, "", "content"),
    ({"role": "assistant", "content": None, "tool_calls": []}, "", "content"),
    ({"role": "tool", "content": "x"}, "", "tool_call_id"),
    ({"role": "tool", "content": "x", "tool_call_id": 5}, ".tool_call_id", "tool_call_id"),
    ({"role": "assistant", "content": "x", "tool_calls": "nope"}, ".tool_calls", "tool_calls"),
    ({"role": "assistant", "content": "x", "tool_calls": ["nope"]}, ".tool_calls[0]", "tool_calls"),
    (
        {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": call()["function"]}]},
        ".tool_calls[0]",
        "id",
    ),
    (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}],
        },
        ".tool_calls[0].function",
        "arguments",
    ),
    (
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": ""}}]},
        ".tool_calls[0]",
        "type",
    ),
    ({"role": "Developer", "content": "x"}, ".role", "Developer"),
    ({"role": "user", "content": None, "tool_calls": [call()]}, "", "content"),
    ({"role": "assistant", "content": None, "tool_calls": None}, "", "content"),
    ({"role": "tool", "content": "x", "tool_call_id": None}, ".tool_call_id", "tool_call_id"),
    (
        {"role": "assistant", "content": None, "tool_calls": [{**call(), "function": "f"}]},
        ".tool_calls[0].function",
        "function",
    ),
    (
        {"role": "assistant", "content": None, "tool_calls": [{**call(), "function": {"name": 1, "arguments": ""}}]},
        ".tool_calls[0].function",
        "name",
    ),
    (
        {"role": "assistant", "content": None, "tool_calls": [{**call(), "function": {"name": "f", "arguments": {}}}]},
        ".tool_calls[0].function",
        "arguments",
    ),
    ({"role": "user", "content": "x", "metadata": {"when": object()}}, ".metadata.when", "metadata.when"),
    ({"role": "user", "content": "x", "metadata": {1: "one"}}, ".metadata", "key"),
    ({"role": "user", "content": "x", "score": math.nan}, ".score", "score"),
    ({"role": "user", "content": "x", "score": -math.inf}, ".score", "score"),
    ({"role": "user", "content": "x", "tags": {"a", "b"}}, ".tags", "tags"),
    ({"role": "user", "content": b"bytes"}, ".content", "content"),
    ({"role": "user", "content": ["ok", {"type": "text", "text": object()}]}, ".content[1].text", "content[1].text"),
]


# ---- strategies ---------------------------------------------------------------------------------

#: Words the texts are made of, so that FILTER keywords often match; CJK and emoji included.
WORDS = ("alpha", "beta", "gamma", "天气", "错误", "東京", "🙂", "ok")

texts = st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join)

blocks = st.one_of(
    texts,
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(
        lambda t, inner: {"type": "tool_result", "tool_use_id": "tu_1", "content": t if inner is None else inner},
        texts,
        st.none() | st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts), max_size=2),
    ),
    st.builds(
        lambda q, more: {"type": "tool_use", "id": "tu_1", "name": "search", "input": {"q": q, "more": more, "n": 3}},
        texts,
        st.lists(texts, max_size=2),
    ),
    st.just({"type": "image", "source": {"type": "url", "url": "https://example.com/天气.png"}}),
)

contents_st = st.one_of(texts, st.lists(blocks, max_size=3))

#: Explicit timestamps: small epoch seconds (int or float) or milliseconds (above 1e11).
timestamps = st.one_of(st.integers(0, 1000), st.floats(0, 1000, allow_nan=False), st.integers(10**11 + 1, 2 * 10**11))

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _with_extras(message: Message, extras: dict[str, Any]) -> Message:
    return {**message, **extras}


@st.composite
def valid_messages(draw: st.DrawFn, roles: tuple[str, ...] = ROLES) -> Message:
    """A valid message of one of ``roles``, sometimes with a name, a timestamp or metadata, in a
    random key order."""
    role = draw(st.sampled_from(roles))
    if role == "tool":
        message: Message = {"role": "tool", "tool_call_id": f"call_{draw(st.integers(0, 3))}", "content": draw(texts)}
    elif role == "assistant" and draw(st.booleans()):
        arguments = json.dumps({"q": draw(texts)}, ensure_ascii=False)
        message = calling(call(f"call_{draw(st.integers(0, 3))}", arguments=arguments), content=draw(st.none() | texts))
    else:
        message = {"role": role, "content": draw(contents_st)}
    extras = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["ana", "бот", "エージェント"]),
                "timestamp": timestamps,
                "metadata": json_values,
            },
        )
    )
    items = list(_with_extras(message, extras).items())
    return dict(draw(st.permutations(items)))


def run_together(*workers: Callable[[], None]) -> None:
    """Start the workers at the same moment; re-raise the first exception any of them raised."""
    start = threading.Barrier(len(workers))

    def go(worker: Callable[[], None]) -> None:
        start.wait()
        worker()

    with ThreadPoolExecutor(len(workers)) as pool:
        for future in [pool.submit(go, w) for w in workers]:
            future.result()


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stored_page(index: int, text: str = "q") -> dict[str, Any]:
    """An archived page as the context system writes it to a store (a user question and its answer)."""
    return {
        "index": index,
        "messages": [user(f"{text} {index} 東京 🙂"), assistant("ok")],
        "summary": f"{text} {index}",
        "entry_summaries": [f"user: {text}", "assistant: ok"],
        "archived_round": index,
    }


def saved_state(revision: int, pages_through: int = 0, **extra: Any) -> dict[str, Any]:
    """A state a store saves over revision ``revision - 1``, naming pages up to ``pages_through``."""
    return {"version": 1, "revision": revision, "pages_through": pages_through, **extra}
