"""Exact, offline token counting for OpenAI's encodings, and the counters a token budget takes.

>>> from memci import tokens
>>> tokens.count("hello world")
2
>>> tokens.count_messages([{"role": "user", "content": "hello world"}])
9

``o200k_base`` (GPT-4o, GPT-4.1, GPT-5, o1, o3, o4-mini) and ``cl100k_base`` (GPT-4,
GPT-3.5-turbo, text-embedding-3) are exact: the same counts as tiktoken, computed in Rust from ranks
compiled into memci, so nothing is downloaded at run time. An ``encoding`` argument also takes a
model name (``"gpt-4o"``, ``"gpt-4-0613"``). Text that looks like a special token
(``"<|endoftext|>"``) is counted as the plain text it is.

A message costs its texts plus the chat format's overhead: 3 tokens per message, 1 more for a
``name``, 1 more per tool call; a list of messages costs 3 more once (the reply priming). A
Responses API item is counted the same way: 3, plus its name, arguments, input, output and summary
text, plus 1 for a call. SDK objects are counted as their ``model_dump``. The rules for content
blocks, tool calls, items and images are in ``docs/tokens.md``.

A list of messages is counted as one request: the thinking of earlier assistant turns
(``thinking`` and ``redacted_thinking`` blocks, and Responses ``reasoning`` items, before the last
message that opens a user turn) costs nothing, as Anthropic's and OpenAI's APIs drop it
(``thinking="drop_earlier"``, the default); ``thinking="count"`` counts it, for models that keep
it. The sources of the rule are in ``docs/tokens.md``.

Where a count is taken, ``counter=`` accepts any callable that takes a message dict and returns
its token count (an int >= 0), for models whose tokenizer memci does not ship;
:func:`approximate` is LangChain's ``count_tokens_approximately`` rule for one message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memci import _core
from memci.errors import InvalidOperationError, repr_of

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "THINKING",
    "Counter",
    "Message",
    "approximate",
    "as_sent",
    "count",
    "count_batch",
    "count_message",
    "count_messages",
    "encoding_for_model",
    "ranks_file",
    "reply_priming",
]

#: An OpenAI chat-format message dict.
Message = dict[str, Any]
#: A message counter: a message dict in, its token count (an int >= 0) out.
Counter = Callable[[Message], int]

DEFAULT_ENCODING = "o200k_base"
#: The exact encodings memci ships.
ENCODINGS = ("o200k_base", "cl100k_base")
#: The counting rule of :func:`approximate`, usable wherever an encoding name is.
APPROXIMATE = "approximate"
#: The rules for the thinking of earlier assistant turns: dropped (the providers' default) or counted.
THINKING = ("drop_earlier", "count")
DEFAULT_THINKING = "drop_earlier"
#: The content blocks that hold a model's thinking.
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def encoding_for_model(model: str) -> str:
    """The encoding a model name uses (``"gpt-4o"`` -> ``"o200k_base"``); an encoding's own name
    returns itself. Unknown names raise :class:`~memci.InvalidOperationError`."""
    return _core.encoding_name(model, "encoding_for_model")


def count(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """The tokens of ``text``. O(len(text)); the GIL is released for long texts."""
    if not isinstance(text, str):
        raise InvalidOperationError(f"count: text must be a str, got {type(text).__name__}")
    return _core.count_text(str.__str__(text), encoding)


def count_batch(texts: Iterable[str], encoding: str = DEFAULT_ENCODING) -> list[int]:
    """The tokens of each text, in order, counted on all cores with the GIL released."""
    if isinstance(texts, str):
        raise InvalidOperationError("count_batch: texts must be an iterable of str, not a str")
    if isinstance(texts, bytes | bytearray) or not isinstance(texts, Iterable):
        raise InvalidOperationError(f"count_batch: texts must be an iterable of str, got {type(texts).__name__}")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidOperationError(f"count_batch: texts[{i}] must be a str, got {type(text).__name__}")
    return _core.count_texts(items, encoding)


def counted(where: str, counter: Counter, message: Message) -> int:
    """``counter(message)``, checked to be an int >= 0."""
    value = counter(message)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidOperationError(f"{where}: the counter must return an int >= 0, got {repr_of(value)}")
    return int(value)


def callable_counter(where: str, counter: object) -> Counter:
    """``counter`` if it is callable; otherwise :class:`~memci.InvalidOperationError`."""
    if not callable(counter):
        raise InvalidOperationError(f"{where}: counter must be callable, got {type(counter).__name__}")
    return counter  # any callable: what it returns is checked per call


def resolve(where: str, encoding: str, counter: Counter | None) -> tuple[str, Counter | None]:
    """The encoding to count with in Rust (checked there, when it counts), or the callable to
    count with in Python. :func:`approximate` is recognised and counted in Rust (and cached)."""
    if counter is None:
        return encoding, None
    if counter is approximate:
        return APPROXIMATE, None
    return encoding, callable_counter(where, counter)


def count_message(message: Message, encoding: str = DEFAULT_ENCODING, *, counter: Counter | None = None) -> int:
    """The tokens one message costs in a chat request: its texts plus 3 (plus 1 for a ``name``,
    1 per tool call), without the reply priming. With ``counter``, ``counter(message)``."""
    name, fn = resolve("count_message", encoding, counter)
    if fn is not None:
        return counted("count_message", fn, message)
    return _core.count_message(message, name)


def count_messages(
    messages: Iterable[Mapping[str, Any]],
    encoding: str = DEFAULT_ENCODING,
    *,
    counter: Counter | None = None,
    thinking: str = DEFAULT_THINKING,
) -> int:
    """The tokens a list of messages costs as one request: each message, plus the reply priming
    (3) once when the list is not empty; the thinking of earlier turns dropped or counted by
    ``thinking`` (see the module docs). With ``counter``: the sum of ``counter(m)`` over
    :func:`as_sent`, nothing added. O(total text), on all cores with the GIL released."""
    name, fn = resolve("count_messages", encoding, counter)
    rule = thinking_rule("count_messages", thinking)
    items = _message_list("count_messages", messages)
    if fn is not None:
        return sum(counted(f"count_messages: messages[{i}]", fn, m) for i, m in enumerate(as_sent(items, rule)))
    counts = _core.count_message_list(items, name, rule)
    return sum(counts) + (_core.reply_priming(name) if counts else 0)


def thinking_rule(where: str, thinking: object) -> str:
    """``thinking`` if it is one of :data:`THINKING`; otherwise :class:`~memci.InvalidOperationError`."""
    if not isinstance(thinking, str) or thinking not in THINKING:
        raise InvalidOperationError(f"{where}: thinking must be 'drop_earlier' or 'count', got {repr_of(thinking)}")
    return str(thinking)


def as_sent(messages: Iterable[Mapping[str, Any]], thinking: str = DEFAULT_THINKING) -> list[Message]:
    """``messages`` as the model reads them in one request: with ``"drop_earlier"``, the messages
    before the last one that opens a user turn lose their ``thinking`` and ``redacted_thinking``
    blocks (copies; the originals are untouched), and their Responses ``reasoning`` items are
    left out. What a ``counter`` is given. O(n)."""
    items = _message_list("as_sent", messages)
    if thinking_rule("as_sent", thinking) == "count":
        return items
    turn = _core.current_turn_start(items)
    sent: list[Message] = []
    for i, message in enumerate(items):
        if i >= turn:
            sent.append(message)
            continue
        stripped = _without_thinking(message)
        if stripped is not None:
            sent.append(stripped)
    return sent


def _without_thinking(message: Any) -> Message | None:
    """``message`` without its thinking blocks (a copy when it had any); None for a reasoning item."""
    if not isinstance(message, Mapping) and callable(getattr(message, "model_dump", None)):
        message = message.model_dump()
    if not isinstance(message, Mapping):
        return message  # type: ignore[no-any-return]  # not a message: the counter judges it
    if message.get("type") == "reasoning":
        return None
    content = message.get("content")
    if not isinstance(content, list) or not any(_is_thinking(b) for b in content):
        return message  # type: ignore[return-value]  # unchanged, whatever mapping it is
    return {**message, "content": [b for b in content if not _is_thinking(b)]}


def _is_thinking(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("type") in THINKING_BLOCKS


def _message_list(where: str, messages: object) -> list[Message]:
    """``messages`` as a list: any iterable of messages but a single message, a str or bytes."""
    if isinstance(messages, str | bytes | bytearray | dict) or not isinstance(messages, Iterable):
        raise InvalidOperationError(f"{where}: messages must be a list of message dicts, got {type(messages).__name__}")
    return list(messages)


def approximate(message: Message) -> int:
    """LangChain's ``count_tokens_approximately`` for one message: its characters (content, role,
    name, a tool result's call id, tool-call names and arguments) divided by 4, rounded up, plus
    3; 85 per image. For models whose encoding is unknown. Pass it as ``counter=``; memci then
    counts in Rust and caches the counts like an encoding's."""
    return _core.count_message(message, APPROXIMATE)


def reply_priming(encoding: str = DEFAULT_ENCODING) -> int:
    """What a non-empty list of messages costs beyond its messages (3 for an exact encoding)."""
    return _core.reply_priming(encoding)


def ranks_file(encoding: str = DEFAULT_ENCODING) -> str:
    """The ranks file of an exact encoding in tiktoken's format (``<base64 token> <rank>`` per
    line), byte for byte the file OpenAI publishes, rebuilt from the ranks memci ships: write it to
    ``$TIKTOKEN_CACHE_DIR/<sha1 of the file's URL>`` and tiktoken loads offline."""
    return _core.ranks_file(encoding)
