"""Swap plugin: langchain's ``create_agent`` tests with a trimming middleware added.

The test modules' ``create_agent`` is rebound to one that appends a trimming middleware to the
test's own (innermost, next to the model): on the ``native`` side a ``wrap_model_call`` middleware
running LangChain's ``trim_messages`` (``count_tokens_approximately``), on the ``memci`` side
memci's ``MemciTrimMiddleware``, both at :data:`BUDGET` tokens, newest messages kept, starting on
a human message. The tests' conversations fit the budget, so the middleware must hand the model
every message unchanged and alter nothing else the tests check (the state, the stream, the other
middlewares' effects, sync and async). ``noop`` appends a middleware with no hook: the control
for a test that fails because one more middleware is there.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from swap import rebind, side

BUDGET = 100_000
"""Tokens the middleware sends at most: more than any of the tests' conversations."""


class NoopMiddleware(AgentMiddleware[Any]):
    """A middleware with no hook: the agent as it is, with one more middleware in its list."""


def trimmed(request: ModelRequest[Any]) -> ModelRequest[Any]:
    """``request`` with its messages through LangChain's ``trim_messages`` at :data:`BUDGET`."""
    messages = trim_messages(
        request.messages,
        max_tokens=BUDGET,
        token_counter=count_tokens_approximately,
        strategy="last",
        start_on="human",
    )
    return request.override(messages=messages)


class NativeTrimMiddleware(AgentMiddleware[Any]):
    """LangChain's ``trim_messages`` on each model call, sync and async, as its docs trim."""

    def wrap_model_call(self, request: ModelRequest[Any], handler: Callable[..., ModelResponse[Any]]) -> Any:
        return handler(trimmed(request))

    async def awrap_model_call(self, request: ModelRequest[Any], handler: Callable[..., Awaitable[Any]]) -> Any:
        return await handler(trimmed(request))


def with_middleware(make: Callable[[], AgentMiddleware[Any]]) -> Callable[..., Any]:
    """``create_agent`` with a middleware from ``make`` appended to the caller's."""

    def create(*args: Any, **kwargs: Any) -> Any:
        kwargs["middleware"] = [*kwargs.get("middleware", ()), make()]
        return create_agent(*args, **kwargs)

    return create


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = side()
    if chosen == "native":
        make: Callable[[], AgentMiddleware[Any]] = NativeTrimMiddleware
    elif chosen == "noop":
        make = NoopMiddleware
    else:
        from memci.integrations.langchain import MemciTrimMiddleware

        make = functools.partial(MemciTrimMiddleware, BUDGET, start_on="user")
    if not rebind("create_agent", create_agent, with_middleware(make), config.rootpath):
        raise pytest.UsageError("swap_langchain_trim_middleware: no test module binds create_agent")
