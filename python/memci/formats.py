"""Convert a history between the OpenAI chat format (memci's own), the Anthropic Messages format
and LangChain message objects.

>>> request = to_anthropic([
...     {"role": "system", "content": "Be terse."},
...     {"role": "user", "content": "2+2?"},
... ])
>>> request
{'system': 'Be terse.', 'messages': [{'role': 'user', 'content': '2+2?'}]}
>>> to_openai(request)
[{'role': 'system', 'content': 'Be terse.'}, {'role': 'user', 'content': '2+2?'}]

``to_anthropic`` returns the keyword arguments of the Anthropic SDK's ``messages.create`` (so
``client.messages.create(model=..., max_tokens=..., **to_anthropic(history))``); ``to_openai``
takes that dict back, or a list of Anthropic messages and a ``system``. Conversion never changes
its input and never pairs or drops tool calls: run :func:`memci.sanitize_messages` for that (it reads
both formats). Every rule and every decision: ``docs/sanitizer.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from memci.errors import InvalidMessageError

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

__all__ = ["AnthropicRequest", "from_langchain", "to_anthropic", "to_langchain", "to_openai"]

Message = dict[str, Any]
Block = dict[str, Any]


class AnthropicRequest(TypedDict):
    """The ``system`` and ``messages`` arguments of Anthropic's ``messages.create``. ``system`` is
    absent when the history has no system or developer message."""

    system: NotRequired[str | list[Block]]
    messages: list[Message]


#: Anthropic block types that OpenAI-format messages may already hold: passed through as they are.
_ANTHROPIC_BLOCKS = frozenset(
    ("text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", "search_result")
)
#: Image media types Anthropic accepts in a base64 source.
_IMAGE_TYPES = frozenset(("image/jpeg", "image/png", "image/gif", "image/webp"))


def _fail(path: str, text: str) -> InvalidMessageError:
    return InvalidMessageError(f"{path}: {text}", path=path)


def _messages(messages: Iterable[Message], what: str) -> list[Message]:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise _fail("messages", f"{what} takes a list of message dicts, got {type(messages).__name__}")
    out = list(messages)
    for i, m in enumerate(out):
        if not isinstance(m, dict):
            raise _fail(f"messages[{i}]", f"a message must be a dict, got {type(m).__name__}")
        if not isinstance(m.get("role"), str):
            raise _fail(f"messages[{i}].role", "missing or not a str")
    return out


def _parts(content: list[Any], path: str) -> Iterator[tuple[Any, Any, str]]:
    """Each part of a list content with its type (a bare string is a text part) and its place."""
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else "text" if isinstance(part, str) else None
        yield part, kind, f"{path}[{k}]"


def _text(block: Block | str, path: str) -> Block:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    text = block.get("text")
    if not isinstance(text, str):
        raise _fail(f"{path}.text", "a text block needs a str text")
    out: Block = {"type": "text", "text": text}
    if "cache_control" in block:
        out["cache_control"] = block["cache_control"]
    return out


# ---- OpenAI -> Anthropic ----------------------------------------------------------------------------


def _image_to_anthropic(part: Block, path: str) -> Block:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        raise _fail(f"{path}.image_url", "an image_url part needs a url")
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header[len("data:") :].removesuffix(";base64")
        if not header.endswith(";base64") or media_type not in _IMAGE_TYPES:
            raise _fail(
                f"{path}.image_url.url", f"Anthropic takes base64 data URLs of {', '.join(sorted(_IMAGE_TYPES))}"
            )
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks_to_anthropic(content: Any, path: str) -> str | list[Block]:
    """A user or assistant content: a string stays a string; parts become blocks."""
    if isinstance(content, str):
        return content
    return _parts_to_anthropic(content, path)


def _parts_to_anthropic(content: Any, path: str) -> list[Block]:
    if not isinstance(content, list):
        raise _fail(path, f"content must be a str or a list of parts, got {type(content).__name__}")
    out: list[Block] = []
    for part, kind, where in _parts(content, path):
        if kind == "text":
            block = _text(part, where)
            if block["text"]:  # Anthropic refuses empty text blocks
                out.append(block)
        elif kind == "refusal":
            out.append({"type": "text", "text": str(part.get("refusal", ""))})
        elif kind == "image_url":
            out.append(_image_to_anthropic(part, where))
        elif kind in _ANTHROPIC_BLOCKS:
            out.append(dict(part))
        else:
            raise _fail(where, f"a {kind!r} part has no Anthropic equivalent")
    return out


def _arguments(call: Any, path: str) -> tuple[str, str, dict[str, Any]]:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise _fail(path, "a tool call needs an id and a function")
    function = call["function"]
    arguments = function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError as e:
        raise _fail(f"{path}.function.arguments", f"not valid JSON ({e.msg}); Anthropic needs an object") from None
    if not isinstance(parsed, dict):
        raise _fail(f"{path}.function.arguments", "must be a JSON object: Anthropic's tool input is an object")
    return str(call.get("id", "")), str(function.get("name", "")), parsed


def _assistant_to_anthropic(m: Message, path: str) -> Message:
    calls = m.get("tool_calls") or []
    content = m.get("content")
    if not calls and content is not None:
        return {"role": "assistant", "content": _blocks_to_anthropic(content, f"{path}.content")}
    blocks: list[Block] = []
    if isinstance(content, str):
        if content:
            blocks.append({"type": "text", "text": content})
    elif content is not None:
        blocks += _parts_to_anthropic(content, f"{path}.content")
    for k, call in enumerate(calls):
        call_id, name, arguments = _arguments(call, f"{path}.tool_calls[{k}]")
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return {"role": "assistant", "content": blocks}


def _tool_result(m: Message, path: str) -> Block:
    content = m.get("content")
    block: Block = {"type": "tool_result", "tool_use_id": m.get("tool_call_id")}
    if isinstance(content, str):
        block["content"] = content
    elif content is not None:
        block["content"] = _blocks_to_anthropic(content, f"{path}.content")
    return block


def _system_blocks(m: Message, path: str) -> list[Block]:
    content = m.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = _parts_to_anthropic(content, f"{path}.content")
    for k, block in enumerate(blocks):
        if block.get("type") != "text":
            raise _fail(f"{path}.content[{k}]", "Anthropic's system prompt holds text blocks only")
    return blocks


def to_anthropic(messages: Iterable[Message]) -> AnthropicRequest:
    """OpenAI-format messages as the ``system`` and ``messages`` of Anthropic's ``messages.create``.

    System and developer messages are lifted out, in order, into ``system`` (a str when there is
    exactly one with str content, else a list of text blocks; absent when there is none).
    ``tool_calls`` become ``tool_use`` blocks with their arguments parsed; each run of tool
    messages becomes one user message of ``tool_result`` blocks; ``image_url`` parts become image
    blocks (a base64 data URL or a URL source); empty text parts are left out (the API refuses empty
    text blocks). Only ``role`` and ``content`` are kept (the API refuses other keys, such as
    ``name``). Raises :class:`~memci.errors.InvalidMessageError`
    naming the place of anything with no Anthropic equivalent (arguments that are not a JSON
    object, an audio or file part, an unknown role). O(n).
    """
    items = _messages(messages, "to_anthropic")
    system: list[tuple[Message, str]] = []
    out: list[Message] = []
    results: list[Block] | None = None
    for i, m in enumerate(items):
        role, path = m["role"], f"messages[{i}]"
        if role != "tool":
            results = None
        if role in ("system", "developer"):
            system.append((m, path))
        elif role == "user":
            out.append({"role": "user", "content": _blocks_to_anthropic(m.get("content", ""), f"{path}.content")})
        elif role == "assistant":
            out.append(_assistant_to_anthropic(m, path))
        elif role == "tool":
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            results.append(_tool_result(m, path))
        else:
            raise _fail(f"{path}.role", f"unknown role {role!r}")
    request: AnthropicRequest = {"messages": out}
    if len(system) == 1 and isinstance(system[0][0].get("content"), str):
        request = {"system": system[0][0]["content"], "messages": out}
    elif system:
        request = {"system": [b for m, path in system for b in _system_blocks(m, path)], "messages": out}
    return request


# ---- Anthropic -> OpenAI ----------------------------------------------------------------------------


def _image_to_openai(block: Block, path: str) -> Block:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    elif isinstance(source, dict) and source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise _fail(f"{path}.source", "an image needs a base64 or url source for OpenAI")
    return {"type": "image_url", "image_url": {"url": url}}


def _parts_to_openai(blocks: list[Any], path: str, *, images: bool) -> list[Block]:
    out: list[Block] = []
    for block, kind, where in _parts(blocks, path):
        if kind == "text":
            out.append({"type": "text", "text": _text(block, where)["text"]})
        elif kind == "image" and images:
            out.append(_image_to_openai(block, where))
        elif kind == "image":
            raise _fail(where, "an OpenAI tool message holds text only, not images")
        else:
            raise _fail(where, f"a {kind!r} block has no OpenAI equivalent here")
    return out


def _user_to_openai(m: Message, path: str) -> list[Message]:
    content = m.get("content")
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    if not isinstance(content, list):
        raise _fail(f"{path}.content", f"must be a str or a list of blocks, got {type(content).__name__}")
    out: list[Message] = []
    rest: list[Any] = []
    for k, block in enumerate(content):
        if not (isinstance(block, dict) and block.get("type") == "tool_result"):
            rest.append(block)
            continue
        inner = block.get("content", "")
        where = f"{path}.content[{k}].content"
        text = inner if isinstance(inner, str) else _parts_to_openai(inner, where, images=False)
        out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text})
    if rest or not out:
        out.append({"role": "user", "content": _parts_to_openai(rest, f"{path}.content", images=True)})
    return out


def _assistant_to_openai(m: Message, path: str) -> Message:
    content = m.get("content")
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    if not isinstance(content, list):
        raise _fail(f"{path}.content", f"must be a str or a list of blocks, got {type(content).__name__}")
    texts: list[str] = []
    calls: list[Block] = []
    for k, block in enumerate(content):
        where = f"{path}.content[{k}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(_text(block, where)["text"])
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            function = {"name": block.get("name"), "arguments": arguments}
            calls.append({"id": block.get("id"), "type": "function", "function": function})
        elif kind not in ("thinking", "redacted_thinking"):
            raise _fail(where, f"a {kind!r} block has no OpenAI equivalent")
    text: str | list[Block] | None = texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]
    if not texts:
        text = None if calls else ""
    out: Message = {"role": "assistant", "content": text}
    if calls:
        out["tool_calls"] = calls
    return out


def to_openai(
    messages: AnthropicRequest | Mapping[str, Any] | Iterable[Message], system: str | Sequence[Block] | None = None
) -> list[Message]:
    """Anthropic-format messages (and their ``system``) as OpenAI chat messages: the reverse of
    :func:`to_anthropic`, which returns what this takes (``to_openai(to_anthropic(h))``).

    ``system`` becomes a system message (one per text block when it is a list); messages already in
    the OpenAI shape (system, developer and tool messages, assistant messages with ``tool_calls``)
    are copied as they are; a user message's
    ``tool_result`` blocks become tool messages, in order, followed by a user message with its
    other blocks if it has any; ``tool_use`` blocks become ``tool_calls`` with their input
    serialised as JSON; image blocks become ``image_url`` parts. Thinking blocks are dropped (the
    chat format has no place for them), as is a tool result's ``is_error`` flag. Raises
    :class:`~memci.errors.InvalidMessageError` for what OpenAI cannot carry (an image inside a tool
    result, a document block). O(n).
    """
    if isinstance(messages, Mapping):
        system = messages.get("system", system)
        messages = messages.get("messages", ())
    items = _messages(messages, "to_openai")
    out: list[Message] = []
    if isinstance(system, str):
        out.append({"role": "system", "content": system})
    elif system is not None:
        for k, block in enumerate(system):
            out.append({"role": "system", "content": _text(block, f"system[{k}]")["text"]})
    for i, m in enumerate(items):
        role, path = m["role"], f"messages[{i}]"
        if role in ("system", "developer", "tool") or "tool_calls" in m:
            out.append(dict(m))  # already OpenAI-shaped
        elif role == "user":
            out += _user_to_openai(m, path)
        elif role == "assistant":
            out.append(_assistant_to_openai(m, path))
        else:
            raise _fail(f"{path}.role", f"unknown role {role!r}")
    return out


# ---- LangChain ---------------------------------------------------------------------------------------


def _langchain() -> Any:
    try:
        from langchain_core import messages
    except ImportError:  # pragma: no cover - exercised only without the optional extra
        raise ImportError("memci.formats needs langchain-core for this: pip install 'memci[langchain]'") from None
    return messages


def to_langchain(messages: Iterable[Message]) -> list[BaseMessage]:
    """OpenAI-format messages as LangChain message objects (``SystemMessage``, ``HumanMessage``,
    ``AIMessage`` with parsed ``tool_calls``, ``ToolMessage``), by LangChain's own
    ``convert_to_messages``. For an Anthropic-format list, ``to_langchain(to_openai(...))``.
    Needs ``langchain-core`` (``pip install 'memci[langchain]'``). O(n)."""
    items = _messages(messages, "to_langchain")
    return list(_langchain().convert_to_messages(items))


def from_langchain(messages: Iterable[BaseMessage]) -> list[Message]:
    """LangChain message objects as OpenAI-format dicts, by LangChain's own
    ``convert_to_openai_messages``; an assistant message that only calls tools gets ``content``
    None, as the OpenAI API sends it (LangChain writes ``""``). Needs ``langchain-core``. O(n)."""
    lc = _langchain()
    out: list[Message] = lc.convert_to_openai_messages(list(messages))
    for m in out:
        if m.get("role") == "assistant" and m.get("tool_calls") and m.get("content") == "":
            m["content"] = None
    return out
