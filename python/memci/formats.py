"""Convert a history between the OpenAI chat format (memci's own), the Anthropic Messages format,
the OpenAI Responses API's items and LangChain message objects.

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
takes that dict back, or a list of Anthropic messages and a ``system``. ``to_responses`` gives the
``input`` of the OpenAI SDK's ``responses.create``; ``from_responses`` takes items back to chat
messages. Conversion never changes its input and never pairs or drops tool calls: run
:func:`memci.sanitize_messages` for that (it reads every format). SDK message objects (anything
with ``model_dump()``) are taken as their dump. The return types are the SDKs' own request types
(for type checkers; at run time plain dicts and lists). Every rule and every decision:
``docs/sanitizer.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypeAlias, TypedDict, cast

from memci._optional import needs_extra
from memci.errors import InvalidMessageError, repr_of

if TYPE_CHECKING:
    from anthropic.types import MessageParam, TextBlockParam, ToolParam
    from langchain_core.messages import BaseMessage
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
    from openai.types.responses import FunctionToolParam, ResponseInputItemParam

__all__ = [
    "AnthropicRequest",
    "AnthropicTool",
    "ChatMessage",
    "ChatTool",
    "ResponseItem",
    "ResponsesTool",
    "SdkObject",
    "dumped",
    "from_langchain",
    "from_responses",
    "to_anthropic",
    "to_langchain",
    "to_openai",
    "to_responses",
]

Message = dict[str, Any]
Block = dict[str, Any]

#: A Chat Completions message as the OpenAI SDK types it (``ChatCompletionMessageParam``): what
#: ``to_openai`` returns, for type checkers. At run time a plain dict.
ChatMessage: TypeAlias = "ChatCompletionMessageParam"
#: A Responses API input item as the OpenAI SDK types it (``ResponseInputItemParam``): what
#: ``to_responses`` returns, for type checkers. At run time a plain dict.
ResponseItem: TypeAlias = "ResponseInputItemParam"
#: A Chat Completions function tool as the OpenAI SDK types it (``ChatCompletionToolParam``): what
#: ``ContextSystem.tool_definitions("openai")`` returns, for type checkers. At run time a plain dict.
ChatTool: TypeAlias = "ChatCompletionToolParam"
#: A tool of Anthropic's ``messages.create`` as the Anthropic SDK types it (``ToolParam``): what
#: ``ContextSystem.tool_definitions("anthropic")`` returns, for type checkers. At run time a plain dict.
AnthropicTool: TypeAlias = "ToolParam"
#: A function tool of the Responses API as the OpenAI SDK types it (``FunctionToolParam``): what
#: ``ContextSystem.tool_definitions("responses")`` returns, for type checkers. At run time a plain dict.
ResponsesTool: TypeAlias = "FunctionToolParam"


class SdkObject(Protocol):
    """An SDK's message or item object (OpenAI, Anthropic, the Agents SDK: pydantic models), which
    memci takes as its ``model_dump(mode="json", exclude_unset=True)``."""

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]: ...


class AnthropicRequest(TypedDict):
    """The ``system`` and ``messages`` arguments of Anthropic's ``messages.create``, typed as the
    Anthropic SDK types them. ``system`` is absent when the history has no system or developer
    message."""

    system: NotRequired[str | list[TextBlockParam]]
    messages: list[MessageParam]


#: Anthropic block types that OpenAI-format messages may already hold: passed through as they are.
_ANTHROPIC_BLOCKS = frozenset(
    ("text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", "search_result")
)
#: Keys from_langchain keeps that the Chat Completions API has no place for: to_openai leaves them out.
_NOT_CHAT_KEYS = frozenset(("id", "status"))
#: Image media types Anthropic accepts in a base64 source.
_IMAGE_TYPES = frozenset(("image/jpeg", "image/png", "image/gif", "image/webp"))


def _fail(path: str, text: str) -> InvalidMessageError:
    return InvalidMessageError(f"{path}: {text}", path=path)


def dumped(message: object) -> object:
    """An SDK object (anything with a callable ``model_dump``) as the dict its SDK would send:
    ``model_dump(mode="json", exclude_unset=True)``, the rule the store applies too."""
    dump = getattr(message, "model_dump", None)
    if isinstance(message, dict) or not callable(dump):
        return message
    try:
        return dump(mode="json", exclude_unset=True)
    except TypeError:
        return dump()


def _is_item(message: Message) -> bool:
    """Whether a message dict is a Responses API item other than a message (it has a ``type``)."""
    kind = message.get("type")
    return isinstance(kind, str) and kind != "message"


def _is_responses(message: Message) -> bool:
    """Whether a message dict is in the Responses API's shape: an item other than a message, or a
    message whose content holds Responses parts (``input_text``, ``output_text``, ...). An Anthropic
    message dumped from its SDK object also has ``"type": "message"``: its blocks tell it apart."""
    content = message.get("content")
    parts = content if isinstance(content, list) else ()
    return _is_item(message) or any(isinstance(p, dict) and p.get("type") in _RESPONSES_PARTS for p in parts)


def _messages(messages: Iterable[Any], what: str, *, items: bool = False) -> list[Message]:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise _fail("messages", f"{what} takes a list of message dicts, got {type(messages).__name__}")
    out = [dumped(m) for m in messages]
    for i, m in enumerate(out):
        if not isinstance(m, dict):
            raise _fail(f"messages[{i}]", f"a message must be a dict, got {type(m).__name__}")
        if items and _is_item(m):
            continue
        if not isinstance(m.get("role"), str):
            raise _fail(f"messages[{i}].role", "missing or not a str")
    return cast("list[Message]", out)


def _parts(content: list[Any], path: str) -> Iterator[tuple[Any, Any, str]]:
    """Each part of a list content with its type (a bare string is a text part) and its place."""
    if not isinstance(content, list | tuple):
        raise _fail(path, f"must be a str, a list of parts or None, got {type(content).__name__}")
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else "text" if isinstance(part, str) else None
        yield part, kind, f"{path}[{k}]"


def _text(block: Block | str, path: str) -> Block:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, Mapping):
        raise _fail(path, f"must be a text block (a dict) or a str, got {type(block).__name__}")
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
            raise _fail(where, f"a {repr_of(kind)} part has no Anthropic equivalent")
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
    if m.get("status") == "error":  # LangChain's ToolMessage(status="error"), from from_langchain
        block["is_error"] = True
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


#: The prompt-cache breakpoint :func:`to_anthropic` marks with ``cache_control=True``.
CACHE_BREAKPOINT: dict[str, str] = {"type": "ephemeral"}


def _marked(blocks: str | list[Block]) -> list[Block]:
    """``blocks`` (a content) with a cache breakpoint on its last block that can carry one
    (thinking blocks cannot); unchanged when it has none."""
    out: list[Block] = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else list(blocks)
    for k in range(len(out) - 1, -1, -1):
        if out[k].get("type") not in ("thinking", "redacted_thinking"):
            out[k] = {**out[k], "cache_control": dict(CACHE_BREAKPOINT)}
            break
    return out


def _with_breakpoints(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with Anthropic's cache breakpoints at the end of the stable prefix: the last
    system block (tools and system, the contents page included, which a cache-stable window
    rewrites only at a cut) and the last block of the last message (each request then reads the
    previous one's prefix from the cache and writes its own)."""
    system = request.get("system")
    if system:
        request["system"] = _marked(system)
    messages = request["messages"]
    if messages and messages[-1]["content"]:
        messages[-1] = {**messages[-1], "content": _marked(messages[-1]["content"])}
    return request


def to_anthropic(messages: Iterable[Any], *, cache_control: bool = False) -> AnthropicRequest:
    """OpenAI-format messages (or Responses API items, through :func:`from_responses`) as the
    ``system`` and ``messages`` of Anthropic's ``messages.create``.

    System and developer messages are lifted out, in order, into ``system`` (a str when there is
    exactly one with str content, else a list of text blocks; absent when there is none).
    ``tool_calls`` become ``tool_use`` blocks with their arguments parsed; each run of tool
    messages becomes one user message of ``tool_result`` blocks; ``image_url`` parts become image
    blocks (a base64 data URL or a URL source); empty text parts are left out (the API refuses empty
    text blocks). Only ``role`` and ``content`` are kept (the API refuses other keys, such as
    ``name``). Raises :class:`~memci.errors.InvalidMessageError`
    naming the place of anything with no Anthropic equivalent (arguments that are not a JSON
    object, an audio or file part, an unknown role). With ``cache_control=True`` the request
    carries prompt-cache breakpoints (``{"type": "ephemeral"}``) on the last system block (the
    tools and the system) and on the last block of the last message (two of the four the API
    allows); ``system`` is then a list of blocks. O(n).
    """
    items = _messages(messages, "to_anthropic", items=True)
    if any(_is_responses(m) for m in items):
        items = cast("list[Message]", from_responses(items))
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
            raise _fail(f"{path}.role", f"unknown role {repr_of(role)}")
    request: dict[str, Any] = {"messages": out}
    if len(system) == 1 and isinstance(system[0][0].get("content"), str):
        request = {"system": system[0][0]["content"], "messages": out}
    elif system:
        request = {"system": [b for m, path in system for b in _system_blocks(m, path)], "messages": out}
    return cast("AnthropicRequest", _with_breakpoints(request) if cache_control else request)


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
            raise _fail(where, f"a {repr_of(kind)} block has no OpenAI equivalent here")
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
            raise _fail(where, f"a {repr_of(kind)} block has no OpenAI equivalent")
    text: str | list[Block] | None = texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]
    if not texts:
        text = None if calls else ""
    out: Message = {"role": "assistant", "content": text}
    if calls:
        out["tool_calls"] = calls
    return out


def to_openai(
    messages: AnthropicRequest | Mapping[str, Any] | Iterable[Any], system: str | Sequence[Any] | None = None
) -> list[ChatMessage]:
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
        if isinstance(system, bytes | bytearray | Mapping) or not isinstance(system, Iterable):
            raise _fail("system", f"must be a str or a list of text blocks, got {type(system).__name__}")
        for k, block in enumerate(system):
            out.append({"role": "system", "content": _text(block, f"system[{k}]")["text"]})
    for i, m in enumerate(items):
        role, path = m["role"], f"messages[{i}]"
        if role in ("system", "developer", "tool") or "tool_calls" in m:
            # Already OpenAI-shaped; `id` and `status` (from from_langchain) are not chat fields.
            out.append({k: v for k, v in m.items() if k not in _NOT_CHAT_KEYS})
        elif role == "user":
            out += _user_to_openai(m, path)
        elif role == "assistant":
            out.append(_assistant_to_openai(m, path))
        else:
            raise _fail(f"{path}.role", f"unknown role {repr_of(role)}")
    return cast("list[ChatMessage]", out)


# ---- Responses API items ----------------------------------------------------------------------------

#: Responses content part types that chat messages may already hold: passed through as they are.
_RESPONSES_PARTS = frozenset(("input_text", "input_image", "input_file", "output_text"))
#: A chat tool call's type (also the key of its dict) -> the Responses item type and its text key.
_CALL_ITEMS = {"function": ("function_call", "arguments"), "custom": ("custom_tool_call", "input")}


def _input_parts(content: list[Any], path: str, *, assistant: bool) -> list[Block]:
    """Chat content parts as Responses content parts (``output_text`` for an assistant)."""
    out: list[Block] = []
    for part, kind, where in _parts(content, path):
        if kind == "text":
            text = _text(part, where)["text"]
            out.append(
                {"type": "output_text", "text": text, "annotations": []}
                if assistant
                else {"type": "input_text", "text": text}
            )
        elif kind == "refusal" and assistant:
            out.append({"type": "refusal", "refusal": str(part.get("refusal", ""))})
        elif kind == "image_url" and not assistant:
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise _fail(f"{where}.image_url", "an image_url part needs a url")
            detail = image.get("detail", "auto") if isinstance(image, dict) else "auto"
            out.append({"type": "input_image", "image_url": url, "detail": detail})
        elif kind == "file" and not assistant and isinstance(part.get("file"), dict):
            out.append({"type": "input_file", **part["file"]})
        elif kind in _RESPONSES_PARTS:
            out.append(dict(part))  # already a Responses part
        else:
            raise _fail(where, f"a {repr_of(kind)} part has no Responses API equivalent")
    return out


def _chat_to_items(m: Message, path: str, kinds: dict[str, str]) -> list[Message]:
    role = m["role"]
    content = m.get("content")
    if role == "tool":
        call_id = m.get("tool_call_id")
        output: Any = (
            content if isinstance(content, str) else _input_parts(content or [], f"{path}.content", assistant=False)
        )
        kind = kinds.get(call_id, "function_call") if isinstance(call_id, str) else "function_call"
        return [{"type": f"{kind}_output", "call_id": call_id, "output": output}]
    if role not in ("system", "developer", "user", "assistant"):
        raise _fail(f"{path}.role", f"unknown role {repr_of(role)}")
    out: list[Message] = []
    assistant = role == "assistant"
    if isinstance(content, list):
        parts = _input_parts(content, f"{path}.content", assistant=assistant)
        if assistant:
            # An assistant's parts need an output message, whose id and status only the API assigns:
            # their text goes as one string, as the API takes an assistant's input message.
            texts = [p.get("text") or p.get("refusal") or "" for p in parts]
            if any(texts):
                out.append({"role": role, "content": "".join(texts)})
        elif parts or not m.get("tool_calls"):
            out.append({"role": role, "content": parts})
    elif isinstance(content, str) and (content or not m.get("tool_calls")):
        out.append({"role": role, "content": content})
    elif content is None and assistant and isinstance(m.get("refusal"), str):
        out.append({"role": role, "content": m["refusal"]})
    elif content is not None and not isinstance(content, str):
        raise _fail(path, f"must be a str, a list of parts or None, got {type(content).__name__}")
    for k, call in enumerate(m.get("tool_calls") or []):
        kind = "custom" if isinstance(call, dict) and call.get("type") == "custom" else "function"
        inner = call.get(kind) if isinstance(call, dict) else None
        if not isinstance(inner, dict):
            raise _fail(f"{path}.tool_calls[{k}]", f"a tool call needs an id and a {kind} dict")
        item_type, text = _CALL_ITEMS[kind]
        kinds[str(call.get("id"))] = item_type
        out.append({"type": item_type, "call_id": call.get("id"), "name": inner.get("name"), text: inner.get(text)})
    return out


def to_responses(messages: AnthropicRequest | Mapping[str, Any] | Iterable[Any]) -> list[ResponseItem]:
    """Chat messages (or an Anthropic request, through :func:`to_openai`) as the ``input`` items of
    the OpenAI Responses API: ``client.responses.create(model=..., input=to_responses(history))``.

    System, developer and user messages become input messages (string content stays a string; text
    parts become ``input_text``, ``image_url`` parts ``input_image``); an assistant's text becomes an
    assistant input message with string content; each of its ``tool_calls`` a ``function_call``
    item (a ``custom`` call a ``custom_tool_call``) after it; each tool message a
    ``function_call_output`` (or ``custom_tool_call_output``) with the same ``call_id``. Items
    already in the list pass through unchanged. Raises :class:`~memci.errors.InvalidMessageError`
    naming the place of what has no equivalent (an audio part, an unknown role). O(n).
    """
    if isinstance(messages, Mapping):
        messages = to_openai(messages)
    items = _messages(messages, "to_responses", items=True)
    out: list[Message] = []
    kinds: dict[str, str] = {}
    for i, m in enumerate(items):
        if "type" in m:
            out.append(dict(m))  # already an item (a message item included)
            if _is_item(m) and isinstance(m.get("call_id"), str):
                kinds[m["call_id"]] = m["type"].removesuffix("_output")
        else:
            out += _chat_to_items(m, f"messages[{i}]", kinds)
    return cast("list[ResponseItem]", out)


def _chat_parts(content: list[Any], path: str) -> list[Block]:
    """Responses content parts as chat content parts."""
    out: list[Block] = []
    for part, kind, where in _parts(content, path):
        if kind in ("input_text", "output_text", "text", "summary_text"):
            out.append({"type": "text", "text": _text(part, where)["text"]})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            image: Block = {"url": part["image_url"]}
            if part.get("detail") in ("low", "high"):
                image["detail"] = part["detail"]
            out.append({"type": "image_url", "image_url": image})
        elif kind == "input_file":
            fields = ("file_data", "file_id", "filename")
            out.append({"type": "file", "file": {k: part[k] for k in fields if part.get(k) is not None}})
        else:
            raise _fail(where, f"a {repr_of(kind)} part has no chat equivalent")
    return out


def _message_from_item(m: Message, path: str) -> Message:
    role, content = m["role"], m.get("content")
    if isinstance(content, str) or role != "assistant":
        text = content if isinstance(content, str) else _chat_parts(content or [], f"{path}.content")
        return {"role": role, "content": text}
    out: Message = {"role": "assistant", "content": None}
    texts: list[str] = []
    for part, kind, where in _parts(content or [], f"{path}.content"):
        if kind == "refusal":
            out["refusal"] = part.get("refusal")
        else:
            texts.append(_chat_parts([part], where)[0]["text"])
    if texts or "refusal" not in out:
        out["content"] = texts[0] if len(texts) == 1 else "".join(texts)
    return out


def from_responses(items: Iterable[Any]) -> list[ChatMessage]:
    """Responses API items (``input`` items, or a response's ``output``; SDK objects too) as chat
    messages: the reverse of :func:`to_responses` (``from_responses(to_responses(h))``).

    Message items become messages (``input_text`` and ``output_text`` parts become text parts, one
    assistant text a string content); consecutive ``function_call`` / ``custom_tool_call`` items
    become the ``tool_calls`` of one assistant message (the assistant message right before them if
    there is one); each output item a tool message. Reasoning items are dropped (the chat format has
    no place for them). Raises :class:`~memci.errors.InvalidMessageError` naming any other item type
    (hosted tool calls have no chat equivalent). O(n).
    """
    entries = _messages(items, "from_responses", items=True)
    out: list[Message] = []
    open_reply: Message | None = None  # the assistant message the next call joins
    for i, m in enumerate(entries):
        path = f"messages[{i}]"
        kind = m.get("type") if _is_item(m) else "message"
        if kind == "message":
            message = _message_from_item(m, path)
            out.append(message)
            open_reply = message if message["role"] == "assistant" else None
        elif kind in ("function_call", "custom_tool_call"):
            if open_reply is None:
                open_reply = {"role": "assistant", "content": None}
                out.append(open_reply)
            chat_type = "function" if kind == "function_call" else "custom"
            text = _CALL_ITEMS[chat_type][1]
            inner = {"name": m.get("name"), text: m.get(text)}
            open_reply.setdefault("tool_calls", []).append(
                {"id": m.get("call_id"), "type": chat_type, chat_type: inner}
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = m.get("output")
            content = output if isinstance(output, str) else _chat_parts(output or [], f"{path}.output")
            out.append({"role": "tool", "tool_call_id": m.get("call_id"), "content": content})
            open_reply = None
        elif kind == "reasoning":
            continue
        else:
            raise _fail(f"{path}.type", f"a {repr_of(kind)} item has no chat equivalent")
    return cast("list[ChatMessage]", out)


# ---- LangChain ---------------------------------------------------------------------------------------


def _langchain() -> Any:
    with needs_extra("langchain", "memci.formats' LangChain conversions"):
        from langchain_core import messages
    return messages


def _first_line(error: Exception) -> str:
    """The first line of an error from another library, cut to a readable length (surrogates escaped)."""
    line = f"{type(error).__name__}: {error}".encode("utf-8", "backslashreplace").decode().split("\n", 1)[0]
    return line if len(line) <= 200 else line[:200] + "…"


def to_langchain(messages: Iterable[Any]) -> list[BaseMessage]:
    """OpenAI-format messages as LangChain message objects (``SystemMessage``, ``HumanMessage``,
    ``AIMessage`` with parsed ``tool_calls``, ``ToolMessage``), by LangChain's own
    ``convert_to_messages``, which reads a message's ``id``, ``name`` and a tool message's
    ``status`` (``"error"`` from :func:`from_langchain`). For an Anthropic-format list,
    ``to_langchain(to_openai(...))``; for Responses items, ``to_langchain(from_responses(...))``.
    Needs ``langchain-core`` (``pip install 'memci[langchain]'``). O(n)."""
    items = _messages(messages, "to_langchain")
    lc = _langchain()
    try:
        return list(lc.convert_to_messages(items))
    except (ValueError, TypeError, KeyError, NotImplementedError) as e:  # LangChain's refusals (pydantic's too)
        raise _fail("messages", f"LangChain cannot read them: {_first_line(e)}") from None


def from_langchain(messages: Iterable[BaseMessage]) -> list[Message]:
    """LangChain message objects as OpenAI-format dicts, by LangChain's own
    ``convert_to_openai_messages``, keeping what it leaves out: each message's ``id`` and a tool
    message's ``status`` when it is ``"error"`` (:func:`to_anthropic` makes it ``is_error``;
    :func:`to_openai` leaves both keys out, the Chat Completions API has neither). An assistant
    message that only calls tools gets ``content`` None, as the OpenAI API sends it (LangChain writes
    ``""``). Content given as a list of blocks stays a list (text blocks are not joined into one
    string); string content stays a string. Needs ``langchain-core``. O(n)."""
    lc = _langchain()
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise _fail("messages", f"from_langchain takes a list of LangChain messages, got {type(messages).__name__}")
    objects = list(messages)
    try:
        out: list[Message] = lc.convert_to_openai_messages(objects)
        # Content given as blocks stays blocks (the string form joins text blocks into one).
        with_blocks = [i for i, obj in enumerate(objects) if isinstance(getattr(obj, "content", None), list)]
        if with_blocks:
            as_blocks = lc.convert_to_openai_messages([objects[i] for i in with_blocks], text_format="block")
            for i, converted in zip(with_blocks, as_blocks, strict=True):
                out[i]["content"] = converted.get("content")
    except (ValueError, TypeError, KeyError, NotImplementedError) as e:  # LangChain's refusals (pydantic's too)
        raise _fail("messages", f"LangChain cannot read them: {_first_line(e)}") from None
    for m, obj in zip(out, objects, strict=len(out) == len(objects)):
        if m.get("role") == "assistant" and m.get("tool_calls") and m.get("content") in ("", []):
            m["content"] = None
        if isinstance(getattr(obj, "name", None), str) and "name" not in m:
            m["name"] = obj.name
        if isinstance(getattr(obj, "id", None), str):
            m["id"] = obj.id
        if m.get("role") == "tool" and getattr(obj, "status", None) == "error":
            m["status"] = "error"
    return out
