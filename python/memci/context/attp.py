"""ATTP, the Agentic TOML Tool-use Protocol: the model answers in TOML whose ``[tool_call]`` table
holds Python-like ``code`` calling tools, and gets a ``[tool_result]`` table back.

This module reads an answer and writes a result; it runs nothing. :func:`parse` checks the TOML
(:mod:`tomllib`), then the code (:mod:`ast`): only ``name = value`` and calls of the named tools
with literal arguments are accepted, every statement before anything runs. The checked
:class:`Program` lists the calls its code makes, in the order it makes them; whoever runs them
hands the results back to :meth:`Program.result`, which builds ``__result__`` from them. What is
not accepted raises :class:`RefusedError`, whose message is the reason the model reads.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from memci.errors import is_unicode

__all__ = [
    "MAX_CALLS",
    "MAX_CODE",
    "MAX_INT",
    "MAX_TEXT",
    "RESULT_HEADER",
    "Call",
    "Program",
    "RefusedError",
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

#: One call the code makes: the tool's name, its positional and its keyword arguments (literals).
Call = tuple[str, list[object], dict[str, object]]


class RefusedError(Exception):
    """An answer that will not run; the message says why, for the model to read."""


def parse(text: str, tools: Collection[str]) -> Program | None:
    """The checked program of the ATTP answer ``text`` that may call only ``tools``; None when its
    status is ``"fail"`` (the model gave up: nothing is to run). :class:`RefusedError` for
    anything else that is not a ``[tool_call]`` with status ``"success"`` and acceptable code."""
    import tomllib  # only ATTP answers need it: ``import memci`` does not load it

    if len(text) > MAX_TEXT:
        raise RefusedError(f"the answer is {len(text)} characters long (at most {MAX_TEXT})")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RefusedError(f"the answer is not valid TOML ({e})") from None
    except (RecursionError, MemoryError):
        raise RefusedError("the answer's TOML is nested too deeply to read") from None
    table = doc.get("tool_call")
    if not isinstance(table, dict):
        raise RefusedError("the answer has no [tool_call] table")
    status = table.get("status")
    if status == "fail":
        return None
    if status != "success":
        raise RefusedError(f'the tool_call status must be "success" or "fail", got {status!r}')
    code = table.get("code")
    if not isinstance(code, str):
        raise RefusedError("the tool_call has no code string")
    if len(code) > MAX_CODE:
        raise RefusedError(f"the code is {len(code)} characters long (at most {MAX_CODE})")
    return Program(code, tools)


class Program:
    """ATTP code checked statement by statement; nothing runs until all of it is accepted.

    ``calls``: every tool call of the code with its literal arguments, in the order running the
    code makes them (source order: the arguments are literals, so no call waits on another).
    """

    __slots__ = ("body", "calls", "names", "tools")

    def __init__(self, code: str, tools: Collection[str]) -> None:
        try:
            tree = ast.parse(code, mode="exec")
        except SyntaxError as e:
            raise RefusedError(f"the code is not valid Python ({e.msg}, line {e.lineno})") from None
        except (ValueError, RecursionError, MemoryError):  # a huge int literal; nesting too deep
            raise RefusedError("the code is too deeply nested or holds a literal too large to read") from None
        self.tools = tools
        self.body = tree.body
        self.names: set[str] = set()
        self.calls: list[Call] = []
        for stmt in self.body:
            self._statement(stmt)
        if "__result__" not in self.names:
            raise RefusedError("the code must assign its result to __result__")

    def _statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            self._expr(stmt.value)
            self.names.add(stmt.targets[0].id)
        elif isinstance(stmt, ast.Expr):
            self._expr(stmt.value)
        else:
            raise RefusedError(
                f"line {stmt.lineno}: {type(stmt).__name__} is not allowed (only name = value and tool calls)"
            )

    def _expr(self, node: ast.expr) -> None:
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in self.tools:
                raise RefusedError(f"line {node.lineno}: only {' and '.join(self.tools)} can be called")
            args = [_literal(a) for a in node.args]
            kwargs = {str(k.arg): _literal(k.value) for k in node.keywords}
            # `*xs` never gets here (a starred argument is not a literal); `**{...}` does.
            if any(k.arg is None for k in node.keywords):
                raise RefusedError(f"line {node.lineno}: * and ** arguments are not allowed")
            self.calls.append((node.func.id, args, kwargs))
            if len(self.calls) > MAX_CALLS:
                raise RefusedError(f"at most {MAX_CALLS} tool calls per tool_call block")
        elif isinstance(node, ast.Name):
            if node.id not in self.names:
                raise RefusedError(f"line {node.lineno}: {node.id!r} is not defined")
        elif isinstance(node, ast.List | ast.Tuple):
            for item in node.elts:
                self._expr(item)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    raise RefusedError(f"line {node.lineno}: ** in a dict is not allowed")
                _literal(key)
                self._expr(value)
        else:
            _literal(node)

    def result(self, values: Sequence[Any]) -> Any:
        """``__result__`` of the code, given the value of each of :attr:`calls`, in order."""
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
