"""The recall tools of the context system: their definitions for the model, and the handling of a
model's call to them.

Two tools: ``recall_page(page_index)`` (a page's full entries) and ``list_pages(limit=10)`` (the
contents entries with recall counts). They are defined in three formats: OpenAI function tools,
Anthropic tools, and ATTP (the Agentic TOML Tool-use Protocol: the model answers with
TOML whose ``[tool_call]`` table holds Python-like ``code`` calling the tools).

:func:`handle_tool_call` takes an OpenAI ``tool_call``, an Anthropic ``tool_use`` block or ATTP
TOML text and returns the result to add to the conversation: a ``tool`` message, a
``tool_result`` block, or a user message holding an ATTP ``[tool_result]`` table. ATTP code is
never executed: it is parsed (:mod:`tomllib`, then :mod:`ast`), every statement is checked before
anything runs, and only assignments and calls of the recall tools with literal arguments are
carried out. Anything else, in any format, gets a refusal as the result, never an exception.
"""

from __future__ import annotations

import ast
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memci.errors import InvalidOperationError, PageError

if TYPE_CHECKING:
    from memci.context.system import ContextSystem

__all__ = [
    "ATTP_RESULT_HEADER",
    "FORMATS",
    "LIST_PAGES",
    "RECALL_PAGE",
    "handle_tool_call",
    "is_recall_call",
    "is_tool_result",
    "tool_definitions",
]

Message = dict[str, Any]
Format = Literal["openai", "anthropic", "attp"]
FORMATS: tuple[Format, ...] = ("openai", "anthropic", "attp")

RECALL_PAGE = "recall_page"
LIST_PAGES = "list_pages"
#: An ATTP result message starts with this line, which is how the context system knows the user
#: message carrying it is a tool result (it joins the open page) and not a new question.
ATTP_RESULT_HEADER = "[tool_result]"
#: At most this many tool calls run from one ATTP code block.
MAX_ATTP_CALLS = 8
#: Longer ATTP code is refused unparsed.
MAX_ATTP_CODE = 20_000
#: ``list_pages`` lists at most this many pages.
MAX_LIST = 100


# ---- definitions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Param:
    name: str
    description: str
    minimum: int
    default: int | None = None  # None: required


@dataclass(frozen=True, slots=True)
class _Tool:
    name: str
    description: str
    params: tuple[_Param, ...]
    returns: str


_TOOLS = (
    _Tool(
        RECALL_PAGE,
        "Read an archived page of this conversation in full: the user message and every assistant "
        "and tool message it caused. Use the page index shown as [page N] in the contents page.",
        (_Param("page_index", "The index of the page, N in [page N].", 1),),
        'dict: {"page": N, "messages": [the page\'s messages, OpenAI chat format]}',
    ),
    _Tool(
        LIST_PAGES,
        "List the archived pages of this conversation, newest first, with their summary, how often "
        "each was recalled and how many rounds ago.",
        (_Param("limit", f"How many pages to list (at most {MAX_LIST}).", 0, 10),),
        "list[dict]: [{index, summary, recall_count, rounds_since_recall}]",
    ),
)
_BY_NAME = {t.name: t for t in _TOOLS}


def _schema(tool: _Tool) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            p.name: {"type": "integer", "minimum": p.minimum, "description": p.description} for p in tool.params
        },
        "required": [p.name for p in tool.params if p.default is None],
        "additionalProperties": False,
    }


def _attp_signature(tool: _Tool) -> str:
    params = ", ".join(p.name + ": int" + ("" if p.default is None else f" = {p.default}") for p in tool.params)
    args = "\n".join(f"        {p.name}: {p.description}" for p in tool.params)
    example = "3" if tool.name == RECALL_PAGE else "5"
    return (
        f"def {tool.name}({params}) -> {tool.returns.split(':', 1)[0]}:\n"
        f'    """{tool.description}\n\n    Args:\n{args}\n\n    Returns:\n        {tool.returns}\n\n'
        f"    Example:\n        >>> __result__ = {tool.name}({example})\n"
        f'    """'
    )


def tool_definitions(format: Format = "openai") -> list[dict[str, Any]] | str:  # the public keyword
    """The recall tools in ``format``: a list of OpenAI function tools, a list of Anthropic tools,
    or (``"attp"``) the ATTP tool listing, Python signatures with docstrings, as text."""
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
    raise InvalidOperationError(f"tool_definitions: format must be one of {', '.join(FORMATS)}, got {format!r}")


def system_note(format: Format) -> str:
    """The recall-tool description the system segment carries."""
    intro = (
        "Earlier parts of this conversation are archived in pages, one per user request. The contents "
        "page lists them as [page N] with a summary of each message."
    )
    if format != "attp":
        return (
            f"{intro} To read a page in full, call the {RECALL_PAGE} tool with its page_index; "
            f"{LIST_PAGES} lists the archived pages with how often each was recalled."
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


# ---- calls --------------------------------------------------------------------------------------


class _RefusedError(Exception):
    """A call that will not run; the text is the result the model gets."""


class _FailedError(Exception):
    """A recall tool that ran and failed (a page that does not exist)."""


def _value(tool: _Tool, param: _Param, value: object) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < param.minimum:
        raise _RefusedError(f"{tool.name}: {param.name} must be an integer >= {param.minimum}, got {value!r}")
    return value


def _bind(name: str, args: list[object], kwargs: dict[str, object]) -> tuple[_Tool, dict[str, int]]:
    """Check a call of a recall tool against its signature; the arguments by name."""
    tool = _BY_NAME.get(name)
    if tool is None:
        raise _RefusedError(f"{name!r} is not a recall tool (only {RECALL_PAGE} and {LIST_PAGES} run here)")
    if len(args) > len(tool.params):
        raise _RefusedError(f"{name}: takes at most {len(tool.params)} argument(s), got {len(args)}")
    bound: dict[str, int] = {}
    for param, value in zip(tool.params, args, strict=False):
        bound[param.name] = _value(tool, param, value)
    known = {p.name: p for p in tool.params}
    for key, value in kwargs.items():
        if key not in known:
            raise _RefusedError(f"{name}: unknown argument {key!r} (expected {', '.join(known)})")
        if key in bound:
            raise _RefusedError(f"{name}: argument {key!r} given twice")
        bound[key] = _value(tool, known[key], value)
    for param in tool.params:
        if param.name not in bound:
            if param.default is None:
                raise _RefusedError(f"{name}: missing argument {param.name!r}")
            bound[param.name] = param.default
    return tool, bound


def _run(ctx: ContextSystem, tool: _Tool, args: dict[str, int]) -> Any:
    """Run a bound call: the page (or listing) as JSON-able data."""
    if tool.name == RECALL_PAGE:
        index = args["page_index"]
        if ctx.is_active(index):
            return {"page": index, "in_window": True, "note": f"page {index} is still in the conversation above"}
        try:
            page = ctx.recall(index)
        except PageError as e:
            raise _FailedError(str(e)) from None
        return {"page": page.index, "messages": page.messages()}
    listing = ctx.list_pages(min(args["limit"], MAX_LIST))
    return [
        {
            "index": p.index,
            "summary": p.summary,
            "recall_count": p.recall_count,
            "rounds_since_recall": p.rounds_since_recall,
        }
        for p in listing
    ]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _refusal_text(reason: str) -> str:
    return (
        f"Refused: {reason}. Only {RECALL_PAGE}(page_index) and {LIST_PAGES}(limit) can be called here, "
        "with literal arguments."
    )


def _native(ctx: ContextSystem, name: object, arguments: object) -> tuple[str, bool]:
    """Run an OpenAI or Anthropic call: (result text, is_error)."""
    try:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as e:
                raise _RefusedError(f"the arguments are not valid JSON ({e.msg})") from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise _RefusedError(f"the arguments must be a JSON object, got {type(arguments).__name__}")
        if not isinstance(name, str):
            raise _RefusedError(f"the tool name must be a string, got {type(name).__name__}")
        tool, bound = _bind(name, [], arguments)
        return _json(_run(ctx, tool, bound)), False
    except _RefusedError as e:
        return _refusal_text(str(e)), True
    except _FailedError as e:
        return f"Error: {e}", True


def _plain(call: object) -> object:
    dump = getattr(call, "model_dump", None)
    return dump() if callable(dump) else call


def _is_anthropic(call: object) -> bool:
    return isinstance(call, dict) and call.get("type") == "tool_use"


def _is_openai(call: object) -> bool:
    return isinstance(call, dict) and isinstance(call.get("function"), dict)


def is_recall_call(call: object) -> bool:
    """True when ``call`` (OpenAI tool call, Anthropic ``tool_use`` block, or ATTP text) is meant
    for the recall tools, so an agent loop knows to send it to :func:`handle_tool_call`. ATTP text
    counts when its code names a recall tool."""
    call = _plain(call)
    if isinstance(call, dict) and _is_anthropic(call):
        return call.get("name") in _BY_NAME
    if isinstance(call, dict) and _is_openai(call):
        return call["function"].get("name") in _BY_NAME
    if isinstance(call, str):
        return any(f"{name}(" in call for name in _BY_NAME)
    return False


def handle_tool_call(ctx: ContextSystem, call: object) -> Message:
    """Answer a model's call of a recall tool (see the module's documentation). O(page size)."""
    call = _plain(call)
    if _is_anthropic(call):
        assert isinstance(call, dict)
        use_id = call.get("id")
        if not isinstance(use_id, str):
            raise InvalidOperationError("handle_tool_call: a tool_use block needs a string 'id' to answer")
        text, error = _native(ctx, call.get("name"), call.get("input"))
        block: Message = {"type": "tool_result", "tool_use_id": use_id, "content": text}
        if error:
            block["is_error"] = True
        return block
    if _is_openai(call):
        assert isinstance(call, dict)
        call_id = call.get("id")
        if not isinstance(call_id, str):
            raise InvalidOperationError("handle_tool_call: an OpenAI tool call needs a string 'id' to answer")
        function = call["function"]
        text, _ = _native(ctx, function.get("name"), function.get("arguments"))
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    if isinstance(call, str):
        return {"role": "user", "content": _attp(ctx, call)}
    raise InvalidOperationError(
        "handle_tool_call: expected an OpenAI tool call (a dict with 'function'), an Anthropic tool_use "
        f"block (a dict with type 'tool_use') or ATTP TOML text, got {type(call).__name__}"
    )


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


# ---- ATTP ---------------------------------------------------------------------------------------


def _toml_str(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, but for DEL, which TOML wants escaped."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007F")


def _toml_text(text: str) -> str:
    """A TOML string the model reads easily: a multi-line literal string (no escapes) when the text
    allows one, otherwise a basic string."""
    if "'''" in text or text.endswith("'") or "\x7f" in text or any(ord(c) < 0x20 and c not in "\t\n" for c in text):
        return _toml_str(text)
    return f"'''\n{text}'''"


def _attp_result(status: str, **fields: str) -> str:
    lines = [ATTP_RESULT_HEADER, f"status = {_toml_str(status)}"]
    lines += [f"{k} = {_toml_text(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"


class _Program:
    """ATTP code checked statement by statement; nothing runs until all of it is accepted."""

    def __init__(self, code: str) -> None:
        try:
            tree = ast.parse(code, mode="exec")
        except SyntaxError as e:
            raise _RefusedError(f"the code is not valid Python ({e.msg}, line {e.lineno})") from None
        self.body = tree.body
        self.calls = 0
        self.names: set[str] = set()
        for stmt in self.body:
            self._statement(stmt)
        if "__result__" not in self.names:
            raise _RefusedError("the code must assign its result to __result__")

    def _statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            self._expr(stmt.value)
            self.names.add(stmt.targets[0].id)
        elif isinstance(stmt, ast.Expr):
            self._expr(stmt.value)
        else:
            raise _RefusedError(
                f"line {stmt.lineno}: {type(stmt).__name__} is not allowed (only name = value and tool calls)"
            )

    def _expr(self, node: ast.expr) -> None:
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _BY_NAME:
                raise _RefusedError(f"line {node.lineno}: only {RECALL_PAGE} and {LIST_PAGES} can be called")
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                self._literal(arg)
            # `*xs` never gets here (a starred argument is not a literal); `**{...}` does.
            if any(k.arg is None for k in node.keywords):
                raise _RefusedError(f"line {node.lineno}: * and ** arguments are not allowed")
            self.calls += 1
            if self.calls > MAX_ATTP_CALLS:
                raise _RefusedError(f"at most {MAX_ATTP_CALLS} tool calls per tool_call block")
        elif isinstance(node, ast.Name):
            if node.id not in self.names:
                raise _RefusedError(f"line {node.lineno}: {node.id!r} is not defined")
        elif isinstance(node, ast.List | ast.Tuple):
            for item in node.elts:
                self._expr(item)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    raise _RefusedError(f"line {node.lineno}: ** in a dict is not allowed")
                self._literal(key)
                self._expr(value)
        else:
            self._literal(node)

    @staticmethod
    def _literal(node: ast.expr) -> object:
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise _RefusedError(
                f"line {getattr(node, 'lineno', '?')}: {ast.unparse(node)[:60]!r} is not a literal"
            ) from None

    def run(self, call: Callable[[str, list[object], dict[str, object]], Any]) -> Any:
        env: dict[str, Any] = {}

        def value(node: ast.expr) -> Any:
            if isinstance(node, ast.Call):
                assert isinstance(node.func, ast.Name)
                args = [self._literal(a) for a in node.args]
                kwargs = {str(k.arg): self._literal(k.value) for k in node.keywords}
                return call(node.func.id, args, kwargs)
            if isinstance(node, ast.Name):
                return env[node.id]
            if isinstance(node, ast.List | ast.Tuple):
                return [value(item) for item in node.elts]
            if isinstance(node, ast.Dict):
                return {str(self._literal(k)): value(v) for k, v in zip(node.keys, node.values, strict=True) if k}
            return self._literal(node)

        for stmt in self.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                env[stmt.targets[0].id] = value(stmt.value)
            elif isinstance(stmt, ast.Expr):
                value(stmt.value)
        return env["__result__"]


def _attp(ctx: ContextSystem, text: str) -> str:
    try:
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise _RefusedError(f"the answer is not valid TOML ({e})") from None
        table = doc.get("tool_call")
        if not isinstance(table, dict):
            raise _RefusedError("the answer has no [tool_call] table")
        status = table.get("status")
        if status == "fail":
            return _attp_result("skipped", message="the tool_call status is fail: nothing was run")
        if status != "success":
            raise _RefusedError(f'the tool_call status must be "success" or "fail", got {status!r}')
        code = table.get("code")
        if not isinstance(code, str):
            raise _RefusedError("the tool_call has no code string")
        if len(code) > MAX_ATTP_CODE:
            raise _RefusedError(f"the code is {len(code)} characters long (at most {MAX_ATTP_CODE})")
        program = _Program(code)
        for name, args, kwargs in _planned_calls(program):
            _bind(name, args, kwargs)  # every call is checked against its signature before any runs
        result = program.run(lambda name, args, kwargs: _run(ctx, *_bind(name, args, kwargs)))
        return _attp_result("success", result=_json(result))
    except _RefusedError as e:
        return _attp_result("refused", message=_refusal_text(str(e)))
    except _FailedError as e:
        return _attp_result("error", message=str(e))


def _planned_calls(program: _Program) -> list[tuple[str, list[object], dict[str, object]]]:
    """Every tool call in the program with its literal arguments, in source order."""
    out: list[tuple[str, list[object], dict[str, object]]] = []
    for stmt in program.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                args = [program._literal(a) for a in node.args]
                kwargs = {str(k.arg): program._literal(k.value) for k in node.keywords}
                out.append((node.func.id, args, kwargs))
    return out
