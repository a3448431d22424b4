"""memci's context edits as a LangChain v1 agent middleware (``pip install 'memci[langchain]'``):
what LangChain's ``ContextEditingMiddleware`` does, with Anthropic's edit names and exact counts.

:class:`MemciContextEditingMiddleware` applies :class:`memci.ops.ClearToolUses` /
:class:`memci.ops.ClearThinking` to each model request (never to the agent's state, which keeps
every message) and reports what it cleared on the model's reply, as Anthropic's API reports its
own edits: ``response_metadata["context_management"]["applied_edits"]``, each with ``type``,
``cleared_tool_uses`` (or ``cleared_thinking_turns``) and ``cleared_input_tokens``, exact (the
request's token count before the edit less after, in the edit's encoding). A cleared tool message
keeps its ``tool_call_id`` (and id, name, metadata); only its content becomes the placeholder.
Decisions: ``docs/context-edits.md``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, cast

from memci._optional import needs_extra

with needs_extra("langchain", __name__):
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage, AnyMessage, BaseMessage

from memci import ops
from memci.array import MessageArray
from memci.context.edits import Edit, checked_edits
from memci.formats import from_langchain, to_langchain
from memci.results import EditResult

__all__ = ["MemciContextEditingMiddleware"]

#: Anthropic's names of the edits, for the report.
_TYPES = {"clear_tool_uses": "clear_tool_uses_20250919", "clear_thinking": "clear_thinking_20251015"}


class MemciContextEditingMiddleware(AgentMiddleware[Any]):
    """Clears old tool results (and thinking) from each model call of a ``create_agent`` agent.

    ``edits``: :class:`memci.ops.ClearToolUses` and :class:`memci.ops.ClearThinking` configs,
    applied in order (default: one ``ClearToolUses(trigger=100_000)``, Anthropic's and
    LangChain's default trigger). A trigger is compared with the request's messages (the system
    prompt and tools left out, as LangChain's middleware counts). O(request) a call."""

    def __init__(self, edits: Iterable[Edit] | None = None) -> None:
        super().__init__()
        given = checked_edits(edits, "MemciContextEditingMiddleware: edits")
        self.edits: tuple[Edit, ...] = given if edits is not None else (ops.ClearToolUses(trigger=100_000),)

    def _edited(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], list[EditResult]]:
        messages = list(request.messages)
        dicts = from_langchain(messages)
        arr = MessageArray(dicts)
        results = [cast("EditResult", arr.execute(edit)) for edit in self.edits]
        edited = arr.messages()
        if edited == dicts:
            return request, results
        return request.override(messages=_replaced(messages, dicts, edited)), results

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        edited, results = self._edited(request)
        return _reported(handler(edited), results)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        edited, results = self._edited(request)
        return _reported(await handler(edited), results)


def _replaced(messages: Sequence[BaseMessage], before: list[Any], after: list[Any]) -> list[AnyMessage]:
    """``messages`` with each one whose dict changed replaced by its edited form (keeping its id,
    name and metadata); the whole list converted when the edit changed its length."""
    if len(before) != len(after):
        return cast("list[AnyMessage]", to_langchain(after))
    out: list[AnyMessage] = []
    for message, old, new in zip(messages, before, after, strict=True):
        if old == new:
            out.append(cast("AnyMessage", message))
            continue
        converted = to_langchain([new])[0]
        update: dict[str, Any] = {"content": converted.content}
        if isinstance(message, AIMessage) and isinstance(converted, AIMessage):
            update["tool_calls"] = converted.tool_calls
        out.append(cast("AnyMessage", message.model_copy(update=update)))
    return out


def _reported(response: ModelResponse[Any], results: list[EditResult]) -> ModelResponse[Any]:
    """The reply with the edits that cleared something reported on its AI message."""
    applied = []
    for r in results:
        if r.cleared_tool_uses or r.cleared_thinking_turns:
            cleared = (
                {"cleared_tool_uses": r.cleared_tool_uses}
                if r.operation == "clear_tool_uses"
                else {"cleared_thinking_turns": r.cleared_thinking_turns}
            )
            applied.append({"type": _TYPES[r.operation], **cleared, "cleared_input_tokens": r.cleared_input_tokens})
    if not applied:
        return response
    for message in response.result:
        if isinstance(message, AIMessage):
            message.response_metadata = {**message.response_metadata, "context_management": {"applied_edits": applied}}
    return response
