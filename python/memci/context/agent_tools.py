"""The agent's own tool definitions (``ContextSystem(agent_tools=...)``): checked once, as JSON
dicts, and converted between the three tool formats (OpenAI chat, Anthropic, Responses) when the
system sends them with its recall tools. Function tools are converted; any other tool (a provider's
built-in one) is passed on as given. A tool named like a recall tool is refused."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from memci.context import recall
from memci.errors import InvalidOperationError

__all__ = ["checked_tools", "tool_in"]


def _plain_tool(tool: object, where: str) -> dict[str, Any]:
    """An agent tool definition as a JSON dict (an SDK object is taken as its ``model_dump()``)."""
    dump = getattr(tool, "model_dump", None)
    if callable(dump) and not isinstance(tool, dict):
        tool = dump(exclude_none=True)
    if not isinstance(tool, dict):
        raise InvalidOperationError(f"ContextSystem: {where} must be a tool definition dict, got {type(tool).__name__}")
    try:
        copied = json.loads(json.dumps(tool, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as e:
        raise InvalidOperationError(f"ContextSystem: {where} is not JSON ({e})") from None
    if not isinstance(copied, dict):  # a dict subclass whose JSON is not an object
        raise InvalidOperationError(f"ContextSystem: {where} must be a tool definition dict")
    return copied


def _function_tool(tool: dict[str, Any]) -> tuple[str, str | None, Any, Any] | None:
    """``(name, description, parameters, strict)`` of a function tool in any of the three formats
    (OpenAI chat ``{"type": "function", "function": {...}}``, Responses ``{"type": "function",
    "name", "parameters"}``, Anthropic ``{"name", "input_schema"}``); None for any other tool (a
    provider's built-in one, say), which is passed on as it is."""
    function = tool.get("function")
    if tool.get("type") == "function" and isinstance(function, dict) and isinstance(function.get("name"), str):
        return function["name"], function.get("description"), function.get("parameters"), function.get("strict")
    if tool.get("type") == "function" and isinstance(tool.get("name"), str):
        return tool["name"], tool.get("description"), tool.get("parameters"), tool.get("strict")
    if tool.get("type") in (None, "custom") and isinstance(tool.get("name"), str) and "input_schema" in tool:
        return tool["name"], tool.get("description"), tool.get("input_schema"), None
    return None


def tool_in(format: recall.Format, tool: dict[str, Any]) -> dict[str, Any]:
    """An agent tool in ``format``: function tools are converted, others returned as given."""
    function = _function_tool(tool)
    if function is None or format == "attp":
        return copy.deepcopy(tool)
    name, description, parameters, strict = function
    parameters = {"type": "object", "properties": {}} if parameters is None else copy.deepcopy(parameters)
    if format == "anthropic":
        out: dict[str, Any] = {"name": name, "input_schema": parameters}
        if description is not None:
            out["description"] = description
        return out
    body: dict[str, Any] = {"name": name}
    if description is not None:
        body["description"] = description
    body["parameters"] = parameters
    if format == "openai":
        if strict is not None:
            body["strict"] = strict
        return {"type": "function", "function": body}
    return {"type": "function", **body, "strict": strict}  # the Responses API requires the key, null allowed


def checked_tools(tools: object) -> tuple[dict[str, Any], ...]:
    """The ``agent_tools`` argument checked: a list of tool definitions, none named like a recall
    tool."""
    if tools is None:
        return ()
    if isinstance(tools, dict | str | bytes) or not isinstance(tools, Iterable):
        raise InvalidOperationError(
            f"ContextSystem: agent_tools must be a list of tool definitions, got {type(tools).__name__}"
        )
    checked = tuple(_plain_tool(tool, f"agent_tools[{i}]") for i, tool in enumerate(tools))
    for i, tool in enumerate(checked):
        function = _function_tool(tool)
        if function is not None and function[0] in recall.TOOL_NAMES:
            raise InvalidOperationError(
                f"ContextSystem: agent_tools[{i}] is named {function[0]!r}, the name of a recall tool memci adds"
            )
    return checked
