"""ATTP, the Agentic TOML Tool-use Protocol: the model answers in TOML whose ``[tool_call]`` table
holds Python-like ``code`` calling tools, and gets a ``[tool_result]`` table back.

This module reads an answer and writes a result; it runs nothing. :func:`parse` reads the TOML (the
core's reader, linear in the text), then checks the code (:mod:`ast`): only ``name = value`` and
calls of the named tools with literal arguments are accepted, every statement before anything runs.
The checked :class:`Program` lists the calls its code makes, in the order it makes them, and knows
the size of the JSON of its ``__result__`` as a sum of its literals and of each call's value times
the uses the code makes of it (a name used twice counts twice). Whoever runs the calls hands their
results back to :meth:`Program.result`, which builds ``__result__`` from them, after
:meth:`Program.result_chars` has said how large it will be. What is not accepted raises
:class:`RefusedError`, whose message is the reason the model reads.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from memci import _core
from memci.errors import is_unicode

__all__ = [
    "MAX_CALLS",
    "MAX_CODE",
    "MAX_DEPTH",
    "MAX_INT",
    "MAX_RESULT_CHARS",
    "MAX_TEXT",
    "RESULT_HEADER",
    "Call",
    "Program",
    "RefusedError",
    "json_text",
    "parse",
    "result_text",
]

#: A result message starts with this line: a user message carrying it is a tool result, not a
#: new request.
RESULT_HEADER = "[tool_result]"
#: At most this many tool calls run from one code block.
MAX_CALLS = 8
#: Longer code is refused unparsed.
MAX_CODE = 20_000
#: A longer answer is refused unread (the TOML around the code is small).
MAX_TEXT = 100_000
#: Integer literals are refused beyond this magnitude: JSON carries them exactly up to 64 bits, and
#: Python refuses to print ints of over 4,300 digits.
MAX_INT = 2**63
#: A ``__result__`` whose JSON would be longer is refused before it is built: the code's own part
#: when the code is checked (each use of a call's value counted as at least one character), the
#: whole once the calls' values are known. 512,000 characters: 16 for each of the 32,000 tokens
#: an answer of the recall tools may hold (``memci.context.recall.ANSWER_MAX_TOKENS``), four times
#: what a token of English or JSON takes, so that only text with unusually long tokens meets this
#: bound before the token budget.
MAX_RESULT_CHARS = 512_000
#: Lists and dicts the code builds from names may nest at most this deep (a literal, at most as
#: deep again): JSON written from deeper values would exhaust Python's recursion.
MAX_DEPTH = 100

#: One call the code makes: the tool's name, its positional and its keyword arguments (literals).
Call = tuple[str, list[object], dict[str, object]]


class RefusedError(Exception):
    """An answer that will not run; the message says why, for the model to read."""


def parse(text: str, tools: Collection[str]) -> Program | None:
    """The checked program of the ATTP answer ``text`` that may call only ``tools``; None when its
    status is ``"fail"`` (the model gave up: nothing is to run). :class:`RefusedError` for
    anything else that is not a ``[tool_call]`` with status ``"success"`` and acceptable code:
    TOML nested over 80 levels deep (tables, arrays, the parts of a dotted key) and integers
    beyond 64 bits are not read. O(text); raises nothing else."""
    if len(text) > MAX_TEXT:
        raise RefusedError(f"the answer is {len(text)} characters long (at most {MAX_TEXT})")
    code, refusal = _core.read_attp_call(text)
    if refusal is not None:
        raise RefusedError(refusal)
    if code is None:
        return None
    if len(code) > MAX_CODE:
        raise RefusedError(f"the code is {len(code)} characters long (at most {MAX_CODE})")
    return Program(code, tools)


class _Size:
    """How long the JSON of a value the code builds is: ``chars`` from its literals plus
    ``uses[i]`` times the JSON of call ``i``'s value; ``depth``, how deep the code nests lists and
    dicts in it. Every count stops at one past :data:`MAX_RESULT_CHARS` (more is refused anyway),
    so a name doubled a thousand times costs no more to count than once."""

    __slots__ = ("chars", "depth", "uses")

    def __init__(self, chars: int, depth: int = 0, uses: dict[int, int] | None = None) -> None:
        self.chars = min(chars, _SATURATED)
        self.depth = depth
        self.uses = uses or {}

    @classmethod
    def joined(cls, parts: Sequence[_Size], chars: int) -> _Size:
        """A list or dict of ``parts``, ``chars`` of its own (brackets, separators, keys)."""
        uses: dict[int, int] = {}
        for part in parts:
            for call, n in part.uses.items():
                uses[call] = min(uses.get(call, 0) + n, _SATURATED)
        depth = 1 + max((p.depth for p in parts), default=0)
        return cls(chars + sum(p.chars for p in parts), depth, uses)

    def lower_bound(self) -> int:
        """The fewest characters the JSON can take: each call's value is at least one."""
        return self.chars + sum(self.uses.values())

    def exact(self, value_chars: Sequence[int]) -> int:
        """The length of the JSON (at most: a key a dict repeats counts twice), given the length
        of each call's value's JSON."""
        return self.chars + sum(n * value_chars[call] for call, n in self.uses.items())


_SATURATED = MAX_RESULT_CHARS + 1


class Program:
    """ATTP code checked statement by statement; nothing runs until all of it is accepted.

    ``calls``: every tool call of the code with its literal arguments, in the order running the
    code makes them (source order: the arguments are literals, so no call waits on another).
    ``size``: the length of the JSON of ``__result__``, counted while the code is checked (a name
    counted each time it is used; :meth:`result_chars` adds the calls' values). Code whose result
    would pass :data:`MAX_RESULT_CHARS` whatever its calls return, or that nests names deeper than
    :data:`MAX_DEPTH`, is refused. O(code).
    """

    __slots__ = ("body", "calls", "names", "size", "tools")

    def __init__(self, code: str, tools: Collection[str]) -> None:
        try:
            tree = ast.parse(code, mode="exec")
        except SyntaxError as e:
            raise RefusedError(f"the code is not valid Python ({e.msg}, line {e.lineno})") from None
        except (ValueError, RecursionError, MemoryError):  # a huge int literal; nesting too deep
            raise RefusedError("the code is too deeply nested or holds a literal too large to read") from None
        self.tools = tools
        self.body = tree.body
        self.calls: list[Call] = []
        sizes: dict[str, _Size] = {}
        for stmt in self.body:
            self._statement(stmt, sizes)
        self.names = set(sizes)
        if "__result__" not in sizes:
            raise RefusedError("the code must assign its result to __result__")
        self.size = sizes["__result__"]
        if self.size.lower_bound() > MAX_RESULT_CHARS:
            raise RefusedError(_too_long(self.size.lower_bound()))

    def _statement(self, stmt: ast.stmt, sizes: dict[str, _Size]) -> None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            sizes[stmt.targets[0].id] = self._expr(stmt.value, sizes)
        elif isinstance(stmt, ast.Expr):
            self._expr(stmt.value, sizes)
        else:
            raise RefusedError(
                f"line {stmt.lineno}: {type(stmt).__name__} is not allowed (only name = value and tool calls)"
            )

    def _expr(self, node: ast.expr, sizes: dict[str, _Size]) -> _Size:
        """Check ``node`` and size the JSON of its value (see :class:`_Size`)."""
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in self.tools:
                raise RefusedError(f"line {node.lineno}: only {_names(list(self.tools))} can be called")
            args = [_literal(a) for a in node.args]
            kwargs = {str(k.arg): _literal(k.value) for k in node.keywords}
            # `*xs` never gets here (a starred argument is not a literal); `**{...}` does.
            if any(k.arg is None for k in node.keywords):
                raise RefusedError(f"line {node.lineno}: * and ** arguments are not allowed")
            self.calls.append((node.func.id, args, kwargs))
            if len(self.calls) > MAX_CALLS:
                raise RefusedError(f"at most {MAX_CALLS} tool calls per tool_call block")
            return _Size(0, 0, {len(self.calls) - 1: 1})
        if isinstance(node, ast.Name):
            size = sizes.get(node.id)
            if size is None:
                raise RefusedError(f"line {node.lineno}: {node.id!r} is not defined")
            return size
        if isinstance(node, ast.List | ast.Tuple):
            size = _Size.joined([self._expr(item, sizes) for item in node.elts], _brackets(len(node.elts)))
        elif isinstance(node, ast.Dict):
            parts, keys = [], 0
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    raise RefusedError(f"line {node.lineno}: ** in a dict is not allowed")
                keys += len(json_text(str(_literal(key)))) + len(": ")
                parts.append(self._expr(value, sizes))
            size = _Size.joined(parts, _brackets(len(parts)) + keys)
        else:
            return _Size(len(json_text(_literal(node))))
        if size.depth > MAX_DEPTH:
            raise RefusedError(f"line {node.lineno}: lists and dicts nest more than {MAX_DEPTH} deep")
        return size

    def result_chars(self, value_chars: Sequence[int]) -> int:
        """The length of the JSON of ``__result__`` (at most: a dict's repeated key counts
        twice), given the length of the JSON of each of :attr:`calls`' values, in order. O(calls)."""
        if len(value_chars) != len(self.calls):
            raise ValueError(f"{len(self.calls)} calls but {len(value_chars)} values")
        return self.size.exact(value_chars)

    def result(self, values: Sequence[Any]) -> Any:
        """``__result__`` of the code, given the value of each of :attr:`calls`, in order. Values
        given a name are shared, not copied: this costs O(code); writing the JSON of the result
        costs what :meth:`result_chars` says."""
        if len(values) != len(self.calls):
            raise ValueError(f"{len(self.calls)} calls but {len(values)} values")
        returned: Iterator[Any] = iter(values)
        env: dict[str, Any] = {}

        def value(node: ast.expr) -> Any:
            if isinstance(node, ast.Call):
                return next(returned)
            if isinstance(node, ast.Name):
                return env[node.id]
            if isinstance(node, ast.List | ast.Tuple):
                return [value(item) for item in node.elts]
            if isinstance(node, ast.Dict):
                return {str(_literal(k)): value(v) for k, v in zip(node.keys, node.values, strict=True) if k}
            return _literal(node)

        for stmt in self.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                env[stmt.targets[0].id] = value(stmt.value)
            elif isinstance(stmt, ast.Expr):
                value(stmt.value)
        return env["__result__"]


def _names(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


def _brackets(items: int) -> int:
    """The characters of a JSON list or dict of ``items`` items besides them: brackets, ", "."""
    return 2 + 2 * max(items - 1, 0)


def json_text(value: object) -> str:
    """The JSON text of a result, as the recall tools write it (UTF-8 kept, no escapes)."""
    return json.dumps(value, ensure_ascii=False)


def _too_long(chars: int) -> str:
    return (
        f"__result__ would be at least {chars} characters of JSON (at most {MAX_RESULT_CHARS}): "
        "use each value once and ask for fewer pages at a time"
    )


def _literal(node: ast.expr) -> object:
    """The value of a literal that JSON can carry; :class:`RefusedError` for anything else."""
    line = getattr(node, "lineno", "?")
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise RefusedError(f"line {line}: {_source(node)} is not a literal") from None
    problem = _not_json(value)
    if problem is not None:
        raise RefusedError(f"line {line}: {_source(node)} {problem}")
    return value


def _source(node: ast.expr) -> str:
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError, MemoryError):
        return "the expression"
    return repr(text[:60]) if len(text) <= 60 else repr(text[:60]) + "…"


def _not_json(value: object, depth: int = 0) -> str | None:
    """Why ``value`` (a literal) cannot go into a JSON result, or None."""
    if depth > 100:
        return "is nested too deeply"
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else "is not a finite number"
    if isinstance(value, int):
        return None if abs(value) <= MAX_INT else "holds an integer beyond ±2**63"
    if isinstance(value, str):
        return None if is_unicode(value) else "holds a lone surrogate, which is not text"
    if isinstance(value, list | tuple):
        return next((p for p in (_not_json(v, depth + 1) for v in value) if p is not None), None)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return "has a key that is not a string"
            problem = _not_json(key, depth + 1) or _not_json(item, depth + 1)
            if problem is not None:
                return problem
        return None
    return f"is a {type(value).__name__}, which JSON cannot carry"


def _toml_str(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, but for DEL, which TOML wants escaped."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007F")


def _toml_text(text: str) -> str:
    """A TOML string the model reads easily: a multi-line literal string (no escapes) when the text
    allows one, otherwise a basic string."""
    if "'''" in text or text.endswith("'") or "\x7f" in text or any(ord(c) < 0x20 and c not in "\t\n" for c in text):
        return _toml_str(text)
    return f"'''\n{text}'''"


def result_text(status: str, **fields: str) -> str:
    """A ``[tool_result]`` table: its ``status``, then each field as a TOML string."""
    lines = [RESULT_HEADER, f"status = {_toml_str(status)}"]
    lines += [f"{k} = {_toml_text(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"
