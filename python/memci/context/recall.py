"""The recall tools of the context system: their definitions for the model, a model's call of them
parsed into a request, and the answer their results make. This module never touches a
:class:`~memci.ContextSystem`: the system runs the tools.

Three tools: ``recall_page(page_index)`` (a page's full entries), ``list_pages(limit=10)`` (the
contents entries with recall counts) and ``search_pages(query, k=5)`` (the archived pages that best
match the words of ``query``, one line each: ``[page N] summary — snippet``). They are defined in
three formats: OpenAI function tools, Anthropic tools, and ATTP (:mod:`memci.context.attp`: the
model answers with TOML whose ``[tool_call]`` table holds Python-like ``code`` calling the tools).

:func:`parse_call` takes an OpenAI ``tool_call``, an Anthropic ``tool_use`` block or ATTP TOML
text and returns a :class:`Request`: the calls to run, each a tool with its checked arguments
(:class:`RecallPage`, :class:`ListPages`, :class:`SearchPages`), or the refusal the model gets. The system runs the
calls in order and :func:`answer` turns their results into the message to add to the
conversation: a ``tool`` message, a ``tool_result`` block, or a user message holding an ATTP
``[tool_result]`` table. ATTP code is never executed: it is parsed and checked whole before
anything runs, and only its calls of the recall tools with literal arguments are carried out.
Anything else, in any format, gets a refusal as the result, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memci import tokens
from memci.context import attp
from memci.context.attp import RESULT_HEADER as ATTP_RESULT_HEADER
from memci.context.attp import RefusedError
from memci.context.contents import PageListing
from memci.context.page import Message, Page
from memci.errors import InvalidOperationError, is_unicode, repr_of, shown

__all__ = [
    "ANSWER_MAX_TOKENS",
    "ATTP_RESULT_HEADER",
    "FORMATS",
    "LIST_PAGES",
    "RECALL_PAGE",
    "SEARCH_PAGES",
    "TOOL_NAMES",
    "Found",
    "FoundPage",
    "InWindow",
    "ListPages",
    "RecallPage",
    "Request",
    "SearchPages",
    "ToolCall",
    "ToolResult",
    "answer",
    "is_recall_call",
    "is_tool_result",
    "parse_call",
    "sized_answer",
    "tool_definitions",
]

Format = Literal["openai", "anthropic", "responses", "attp"]
FORMATS: tuple[Format, ...] = ("openai", "anthropic", "responses", "attp")

RECALL_PAGE = "recall_page"
LIST_PAGES = "list_pages"
SEARCH_PAGES = "search_pages"
#: The recall tools' names, in the order they are defined.
TOOL_NAMES = (RECALL_PAGE, LIST_PAGES, SEARCH_PAGES)
#: ``list_pages`` lists at most this many pages.
MAX_LIST = 100
#: ``search_pages`` returns at most this many pages.
MAX_SEARCH = 20
#: A longer ``search_pages`` query is refused (a question, not a document).
MAX_QUERY = 2_000
#: Longer OpenAI ``arguments`` text is refused unread.
MAX_ARGUMENTS = 20_000
#: An answer of the recall tools (a page, a listing, an ATTP result) holds at most this many tokens
#: (``o200k_base``, whatever the system's encoding: a guard, not a bill); a longer one is refused
#: with a note saying how to ask for less. 32,000 tokens: eight pages (an ATTP answer's
#: :data:`~memci.context.attp.MAX_CALLS`) of 4,000 tokens, a quarter of a 128k-token window, so a
#: recalled answer leaves room for the window it joins and for the reply.
ANSWER_MAX_TOKENS = 32_000


# ---- definitions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Param:
    """An integer parameter (at least ``minimum``), or with ``text`` a string one."""

    name: str
    description: str
    minimum: int = 0
    default: int | None = None  # None: required
    text: bool = False


@dataclass(frozen=True, slots=True)
class _Tool:
    name: str
    description: str
    params: tuple[_Param, ...]
    returns: str
    example: str


_TOOLS = (
    _Tool(
        RECALL_PAGE,
        "Read an archived page of this conversation in full: the user message and every assistant "
        "and tool message it caused. Use the page index shown as [page N] in the contents page.",
        (_Param("page_index", "The index of the page, N in [page N].", 1),),
        'dict: {"page": N, "messages": [the page\'s messages, OpenAI chat format]}',
        "3",
    ),
    _Tool(
        LIST_PAGES,
        "List the archived pages of this conversation, newest first, with their summary, how often "
        "each was recalled and how many rounds ago.",
        (_Param("limit", f"How many pages to list (at most {MAX_LIST}).", 0, 10),),
        "list[dict]: [{index, summary, recall_count, rounds_since_recall}]",
        "5",
    ),
    _Tool(
        SEARCH_PAGES,
        "Search the archived pages of this conversation, those the contents page no longer lists "
        "included, for the words of a query. Answers with the best pages, one per line: [page N], "
        "its summary and the text around the best match; read one in full with recall_page.",
        (
            _Param("query", "The words to look for (names, places, topics, what was said).", text=True),
            _Param("k", f"How many pages to return (at most {MAX_SEARCH}).", 1, 5),
        ),
        'list[str]: ["[page N] summary — snippet", ...]',
        '"trip to Paris"',
    ),
)
_BY_NAME = {t.name: t for t in _TOOLS}


def _param_schema(param: _Param) -> dict[str, Any]:
    if param.text:
        return {"type": "string", "maxLength": MAX_QUERY, "description": param.description}
    return {"type": "integer", "minimum": param.minimum, "description": param.description}


def _schema(tool: _Tool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {p.name: _param_schema(p) for p in tool.params},
        "required": [p.name for p in tool.params if p.default is None],
        "additionalProperties": False,
    }


def _attp_signature(tool: _Tool) -> str:
    params = ", ".join(
        p.name + (": str" if p.text else ": int") + ("" if p.default is None else f" = {p.default}")
        for p in tool.params
    )
    args = "\n".join(f"        {p.name}: {p.description}" for p in tool.params)
    example = tool.example
    return (
        f"def {tool.name}({params}) -> {tool.returns.split(':', 1)[0]}:\n"
        f'    """{tool.description}\n\n    Args:\n{args}\n\n    Returns:\n        {tool.returns}\n\n'
        f"    Example:\n        >>> __result__ = {tool.name}({example})\n"
        f'    """'
    )


def tool_definitions(format: Format = "openai") -> list[dict[str, Any]] | str:  # the public keyword
    """The recall tools in ``format``: a list of OpenAI function tools, a list of Anthropic tools,
    a list of Responses function tools, or (``"attp"``) the ATTP tool listing, Python signatures
    with docstrings, as text."""
    if format == "responses":
        # The SDK's FunctionToolParam requires ``strict``: true where strict mode allows the schema
        # (every parameter required).
        return [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": _schema(t),
                "strict": all(p.default is None for p in t.params),
            }
            for t in _TOOLS
        ]
    if format == "openai":
        return [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": _schema(t)},
            }
            for t in _TOOLS
        ]
    if format == "anthropic":
        return [{"name": t.name, "description": t.description, "input_schema": _schema(t)} for t in _TOOLS]
    if format == "attp":
        return "# ===== Available tools =====\n\n" + "\n\n\n".join(map(_attp_signature, _TOOLS)) + "\n"
    raise InvalidOperationError(f"tool_definitions: format must be one of {', '.join(FORMATS)}, got {repr_of(format)}")


def system_note(format: Format) -> str:
    """The recall-tool description the system segment carries."""
    intro = (
        "Earlier parts of this conversation are archived in pages, one per user request. The contents "
        "page lists them as [page N] with a summary of each message."
    )
    if format != "attp":
        return (
            f"{intro} To read a page in full, call the {RECALL_PAGE} tool with its page_index; "
            f"{LIST_PAGES} lists the archived pages with how often each was recalled; {SEARCH_PAGES} "
            "finds pages by the words of a query, those the contents page no longer lists included."
        )
    listing = tool_definitions("attp")
    return (
        f"{intro} To read a page in full, answer in ATTP: TOML with a [tool_call] table whose status "
        'is "success" and whose code assigns __result__, for example:\n\n'
        '[tool_call]\nstatus = "success"\ntarget = "read page 3"\n'
        "code = '''\n__result__ = recall_page(3)\n'''\n\n"
        "Only these tools can be called, with literal arguments (no imports, no other code):\n\n"
        f"{listing}"
    )


def contents_hint(format: Format) -> str:
    """The first line of the contents page: what it is and how to recall."""
    how = (
        "answer with an ATTP tool_call whose code is __result__ = recall_page(N)"
        if format == "attp"
        else f"call {RECALL_PAGE}(page_index=N)"
    )
    return f"Contents of archived pages (earlier in this conversation). To read page N in full, {how}."


# ---- requests -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecallPage:
    """A checked call of ``recall_page``."""

    page_index: int


@dataclass(frozen=True, slots=True)
class ListPages:
    """A checked call of ``list_pages``: ``limit`` is at most :data:`MAX_LIST`."""

    limit: int


@dataclass(frozen=True, slots=True)
class SearchPages:
    """A checked call of ``search_pages``: ``query`` is text of at most :data:`MAX_QUERY`
    characters, ``k`` at most :data:`MAX_SEARCH`."""

    query: str
    k: int


ToolCall = RecallPage | ListPages | SearchPages


@dataclass(frozen=True, slots=True)
class InWindow:
    """What ``recall_page`` of a page still in the window gives: nothing to recall."""

    page_index: int


@dataclass(frozen=True, slots=True)
class FoundPage:
    """A page ``search_pages`` found: its index, its summary and the text around its best match."""

    index: int
    summary: str
    snippet: str

    def line(self) -> str:
        """``[page N] summary — snippet`` on one line (whitespace runs made one space; the snippet
        left out when the summary holds it)."""
        summary, snippet = " ".join(self.summary.split()), " ".join(self.snippet.split())
        parts = [p for p in (summary, snippet) if p]
        if summary and snippet.strip("…") in summary:
            parts = [summary]
        return " ".join([f"[page {self.index}]", " — ".join(parts)]) if parts else f"[page {self.index}]"


@dataclass(frozen=True, slots=True)
class Found:
    """What ``search_pages`` gives: the pages found, best first, for ``query``."""

    query: str
    pages: tuple[FoundPage, ...]

    def lines(self) -> list[str]:
        """One line per page found, each beginning ``[page N]``; none when nothing matched."""
        return [page.line() for page in self.pages]


#: What running a call gives: the recalled page (or :class:`InWindow`), the listing, or the pages
#: a search found.
ToolResult = Page | InWindow | list[PageListing] | Found


@dataclass(frozen=True, slots=True)
class Request:
    """A model's call of the recall tools, parsed. ``calls``: what to run, in order (none when it is
    refused); ``refusal``: why it will not run, for the model to read. ``format`` and
    ``reply_to`` (the id of an OpenAI call or an Anthropic block, the ``call_id`` of a Responses
    ``function_call`` item) say how to answer; ``program``
    is the ATTP code that builds its result from the calls' (None, with no refusal, for an ATTP
    answer whose status is ``"fail"``: nothing runs)."""

    format: Format
    reply_to: str | None
    calls: tuple[ToolCall, ...] = ()
    refusal: str | None = None
    program: attp.Program | None = None


def _text_value(tool: _Tool, param: _Param, value: object) -> str:
    if not isinstance(value, str):
        raise RefusedError(f"{tool.name}: {param.name} must be a string, got {shown(value)}")
    if len(value) > MAX_QUERY:
        raise RefusedError(f"{tool.name}: {param.name} is {len(value)} characters long (at most {MAX_QUERY})")
    if not is_unicode(value):
        raise RefusedError(f"{tool.name}: {param.name} holds a lone surrogate, which is not text")
    return value


def _value(tool: _Tool, param: _Param, value: object) -> int | str:
    if param.text:
        return _text_value(tool, param, value)
    if isinstance(value, str) and 0 < len(digits := value.strip()) <= 20 and digits.isascii() and digits.isdigit():
        value = int(digits)  # "3" as the model may quote it; ASCII digits only ("²" is a digit to str)
    if isinstance(value, bool) or not isinstance(value, int) or value < param.minimum:
        raise RefusedError(f"{tool.name}: {param.name} must be an integer >= {param.minimum}, got {shown(value)}")
    if value > attp.MAX_INT:
        raise RefusedError(f"{tool.name}: {param.name} must be at most 2**63, got {shown(value)}")
    return value


def _bind(name: str, args: list[object], kwargs: dict[str, object]) -> ToolCall:
    """Check a call of a recall tool against its signature: the call, or :class:`RefusedError`."""
    tool = _BY_NAME.get(name)
    if tool is None:
        raise RefusedError(f"{shown(name)} is not a recall tool (only {', '.join(TOOL_NAMES)} run here)")
    if len(args) > len(tool.params):
        raise RefusedError(f"{name}: takes at most {len(tool.params)} argument(s), got {len(args)}")
    bound: dict[str, int | str] = {}
    for param, value in zip(tool.params, args, strict=False):
        bound[param.name] = _value(tool, param, value)
    known = {p.name: p for p in tool.params}
    for key, value in kwargs.items():
        if key not in known:
            raise RefusedError(f"{name}: unknown argument {shown(key)} (expected {', '.join(known)})")
        if key in bound:
            raise RefusedError(f"{name}: argument {key!r} given twice")
        bound[key] = _value(tool, known[key], value)
    for param in tool.params:
        if param.name not in bound:
            if param.default is None:
                raise RefusedError(f"{name}: missing argument {param.name!r}")
            bound[param.name] = param.default
    if tool.name == SEARCH_PAGES:
        return SearchPages(str(bound["query"]), min(int(bound["k"]), MAX_SEARCH))
    if tool.name == RECALL_PAGE:
        return RecallPage(int(bound["page_index"]))
    return ListPages(min(int(bound["limit"]), MAX_LIST))


def _native(format: Format, reply_to: str, name: object, arguments: object) -> Request:
    """An OpenAI or Anthropic call: one tool call, or a refusal."""
    try:
        if isinstance(arguments, str):
            if len(arguments) > MAX_ARGUMENTS:
                raise RefusedError(f"the arguments are {len(arguments)} characters long (at most {MAX_ARGUMENTS})")
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as e:
                raise RefusedError(f"the arguments are not valid JSON ({e.msg})") from None
            except (ValueError, RecursionError, MemoryError):  # an int of over 4,300 digits; deep nesting
                raise RefusedError("the arguments hold a number too large or nesting too deep to read") from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RefusedError(f"the arguments must be a JSON object, got {type(arguments).__name__}")
        if not isinstance(name, str):
            raise RefusedError(f"the tool name must be a string, got {type(name).__name__}")
        return Request(format, reply_to, (_bind(name, [], arguments),))
    except RefusedError as e:
        return Request(format, reply_to, refusal=str(e))


def _attp(text: str) -> Request:
    """ATTP text: the calls its code makes, every one checked against its signature before any
    runs; or a refusal."""
    try:
        program = attp.parse(text, tuple(_BY_NAME))
        if program is None:
            return Request("attp", None)
        calls = tuple(_bind(name, args, kwargs) for name, args, kwargs in program.calls)
        return Request("attp", None, calls, program=program)
    except RefusedError as e:
        return Request("attp", None, refusal=str(e))


def _plain(call: object) -> object:
    dump = getattr(call, "model_dump", None)
    return dump() if callable(dump) else call


def _is_anthropic(call: object) -> bool:
    return isinstance(call, dict) and call.get("type") == "tool_use"


def _is_openai(call: object) -> bool:
    return isinstance(call, dict) and isinstance(call.get("function"), dict)


def _is_responses(call: object) -> bool:
    return isinstance(call, dict) and call.get("type") == "function_call"


def is_recall_call(call: object) -> bool:
    """True when ``call`` (OpenAI tool call, Anthropic ``tool_use`` block, or ATTP text) is meant
    for the recall tools, so an agent loop knows to send it to the context system. ATTP text
    counts when its code names a recall tool."""
    call = _plain(call)
    if isinstance(call, dict) and _is_anthropic(call):
        name = call.get("name")
        return isinstance(name, str) and name in _BY_NAME
    if isinstance(call, dict) and _is_openai(call):
        name = call["function"].get("name")
        return isinstance(name, str) and name in _BY_NAME
    if isinstance(call, dict) and _is_responses(call):
        name = call.get("name")
        return isinstance(name, str) and name in _BY_NAME
    if isinstance(call, str):
        return any(f"{name}(" in call for name in _BY_NAME)
    return False


def _reply_id(call: dict[str, Any], key: str, what: str) -> str:
    """The id to answer ``call`` with, or :class:`~memci.InvalidOperationError`."""
    value = call.get(key)
    if not isinstance(value, str):
        raise InvalidOperationError(f"handle_tool_call: {what} needs a string {key!r} to answer")
    return value


def _native_call(format: Format, reply_to: str, name: object, arguments: object) -> Request:
    """A native call, refused unrun when its id holds a lone surrogate: no message holding that id
    can be stored, so the answer carries it escaped (``\\ud800``) with the refusal, and is one
    the system accepts."""
    if not is_unicode(reply_to):
        escaped = reply_to.encode("utf-8", "backslashreplace").decode("utf-8")
        return Request(
            format, escaped, refusal=f"the call id {shown(escaped)} holds a lone surrogate, which is not text"
        )
    return _native(format, reply_to, name, arguments)


def parse_call(call: object) -> Request:
    """The request a model's call of the recall tools makes (see the module's documentation).
    What the model wrote never raises: a bad call is a refused request. Only a call that cannot
    be answered raises :class:`~memci.InvalidOperationError`: a tool call or block without a
    string id, or something that is no tool call at all. O(call size)."""
    call = _plain(call)
    if _is_anthropic(call):
        assert isinstance(call, dict)
        use_id = _reply_id(call, "id", "a tool_use block")
        return _native_call("anthropic", use_id, call.get("name"), call.get("input"))
    if _is_openai(call):
        assert isinstance(call, dict)
        function = call["function"]
        call_id = _reply_id(call, "id", "an OpenAI tool call")
        return _native_call("openai", call_id, function.get("name"), function.get("arguments"))
    if _is_responses(call):
        assert isinstance(call, dict)
        call_id = _reply_id(call, "call_id", "a function_call item")
        return _native_call("responses", call_id, call.get("name"), call.get("arguments"))
    if isinstance(call, str):
        return _attp(call)
    raise InvalidOperationError(
        "handle_tool_call: expected an OpenAI tool call (a dict with 'function'), an Anthropic tool_use "
        "block (a dict with type 'tool_use'), a Responses function_call item or ATTP TOML text, "
        f"got {type(call).__name__}"
    )


# ---- answers --------------------------------------------------------------------------------------


def _data(result: ToolResult) -> Any:
    """A tool's result as JSON-able data."""
    if isinstance(result, Page):
        return {"page": result.index, "messages": result.messages()}
    if isinstance(result, Found):
        return result.lines()
    if isinstance(result, InWindow):
        index = result.page_index
        return {"page": index, "in_window": True, "note": f"page {index} is still in the conversation above"}
    return [
        {
            "index": p.index,
            "summary": p.summary,
            "recall_count": p.recall_count,
            "rounds_since_recall": p.rounds_since_recall,
        }
        for p in result
    ]


def _text(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate quoted from what the model wrote (in a parser's
    message, say) becomes "?", so the answer is a message the context system accepts."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _refusal_text(reason: str) -> str:
    return (
        f"Refused: {reason}. Only {RECALL_PAGE}(page_index), {LIST_PAGES}(limit) and {SEARCH_PAGES}(query, k) "
        "can be called here, with literal arguments."
    )


def _over_budget(size: str, results: Sequence[ToolResult], *, whole: bool) -> str:
    """The refusal of an answer over the budget: how large it would be and how to ask for less.
    ``whole``: the answer is its one result, as it is (a page alone then cannot be made smaller)."""
    if whole and len(results) == 1 and isinstance(page := results[0], Page):
        less = f"page {page.index} alone is too long to recall whole; its summary is in the contents page"
    else:
        less = (
            f"ask for less: fewer pages per call, each value used once, a smaller {LIST_PAGES} limit "
            f"or {SEARCH_PAGES} k"
        )
    return f"Refused: the answer would be {size}, over the {ANSWER_MAX_TOKENS} tokens an answer may hold; {less}."


def _oversize(text: str) -> str | None:
    """How large ``text`` is when it is over the budget of an answer (``"N tokens"``), or None.
    Tokens are counted only in a text of at most :data:`~memci.context.attp.MAX_RESULT_CHARS`
    characters: a longer one is over unread. O(len(text))."""
    if len(text) > attp.MAX_RESULT_CHARS:
        return f"{len(text)} characters long"
    count = tokens.count(text)
    return f"{count} tokens" if count > ANSWER_MAX_TOKENS else None


def _attp_answer(request: Request, results: Sequence[ToolResult], failure: str | None) -> tuple[str, bool]:
    """The ATTP result text, and whether it is a refusal for its size."""
    if request.refusal is not None:
        return attp.result_text("refused", message=_refusal_text(request.refusal)), False
    if request.program is None:
        return attp.result_text("skipped", message="the tool_call status is fail: nothing was run"), False
    if failure is not None:
        return attp.result_text("error", message=failure), False
    data = [_data(r) for r in results]
    chars = request.program.result_chars([len(attp.json_text(d)) for d in data])
    whole = request.program.size.uses == {0: 1}
    if chars > attp.MAX_RESULT_CHARS:  # refused before the result is built, however it is shared
        refusal = _over_budget(f"{chars} characters long", results, whole=whole)
        return attp.result_text("refused", message=refusal), True
    text = attp.result_text("success", result=attp.json_text(request.program.result(data)))
    size = _oversize(text)
    if size is None:
        return text, False
    return attp.result_text("refused", message=_over_budget(size, results, whole=whole)), True


def answer(request: Request, results: Sequence[ToolResult], failure: str | None = None) -> Message:
    """The message that answers ``request``, given the results of its calls, in order, and
    ``failure``: the error of the call that failed, if one did (the calls after it did not run).
    An answer holds at most :data:`ANSWER_MAX_TOKENS` tokens: a longer one is refused (a short
    text saying how to ask for less), its length checked before it is built, a value the code
    uses twice counted twice. O(results + answer)."""
    return sized_answer(request, results, failure)[0]


def sized_answer(request: Request, results: Sequence[ToolResult], failure: str | None = None) -> tuple[Message, bool]:
    """:func:`answer`, and whether it is a refusal for its size: the system builds the answer
    before it counts any recall, so an answer refused for its size changes nothing."""
    if request.format == "attp":
        text, oversized = _attp_answer(request, results, failure)
        return {"role": "user", "content": _text(text)}, oversized
    oversized = False
    if request.refusal is not None:
        text, error = _text(_refusal_text(request.refusal)), True
    elif failure is not None:
        text, error = _text(f"Error: {failure}"), True
    else:
        text = _native_text(results[0])
        size = _oversize(text)
        oversized = size is not None
        text, error = (text, False) if size is None else (_over_budget(size, results, whole=True), True)
    return _native_answer(request, text, error), oversized


def _native_text(result: ToolResult) -> str:
    """The text a native call's result is answered with: a search's lines, or the result's JSON
    (linear in the page the system stored)."""
    if isinstance(result, Found):
        lines = result.lines()
        return "\n".join(lines) if lines else f"No archived page matches {shown(result.query)}."
    return attp.json_text(_data(result))


def _native_answer(request: Request, text: str, error: bool) -> Message:
    if request.format == "openai":
        return {"role": "tool", "tool_call_id": request.reply_to, "content": text}
    if request.format == "responses":
        return {"type": "function_call_output", "call_id": request.reply_to, "output": text}
    block: Message = {"type": "tool_result", "tool_use_id": request.reply_to, "content": text}
    if error:
        block["is_error"] = True
    return block


def is_tool_result(message: Message) -> bool:
    """True for a user message that carries tool results rather than a new request: Anthropic
    ``tool_result`` blocks only, or an ATTP ``[tool_result]``. Such a message joins the open page."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return content.startswith(ATTP_RESULT_HEADER)
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )
