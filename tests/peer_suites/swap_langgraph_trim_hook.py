"""Swap plugin: langgraph-prebuilt's react-agent tests with a trimming ``pre_model_hook`` added.

The test modules' ``create_react_agent`` is rebound to one that adds a hook when the test gives
none (a test's own hook is kept): on the ``native`` side LangChain's ``trim_messages``
(``count_tokens_approximately``), on the ``memci`` side memci's ``trim_hook``, both at
:data:`BUDGET` tokens, newest messages kept, the system message kept, starting on a human
message. The tests' conversations fit the budget, so the hook must hand the model every message
unchanged and alter nothing else the tests check. ``noop`` adds a hook that returns the messages
as they are: the control for a test that fails because any hook is there (a graph snapshot with
the hook's node, a count of model calls).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langgraph.prebuilt import create_react_agent
from swap import rebind, side

BUDGET = 100_000
"""Tokens the hook sends at most: more than any of the tests' conversations."""

Hook = Callable[[Any], dict[str, Any]]


def messages_of(state: Any) -> list[Any]:
    """``state["messages"]`` of a ``TypedDict`` state or a Pydantic one."""
    return list(state["messages"] if isinstance(state, dict) else state.messages)


def native_hook(state: Any) -> dict[str, Any]:
    """LangChain's ``trim_messages`` at :data:`BUDGET`, as its docs write a trimming hook."""
    trimmed = trim_messages(
        messages_of(state),
        max_tokens=BUDGET,
        token_counter=count_tokens_approximately,
        strategy="last",
        include_system=True,
        start_on="human",
    )
    return {"llm_input_messages": trimmed}


def noop_hook(state: Any) -> dict[str, Any]:
    """The messages as they are."""
    return {"llm_input_messages": messages_of(state)}


def with_hook(hook: Hook) -> Callable[..., Any]:
    """``create_react_agent`` adding ``hook`` as the pre-model hook when the caller gives none."""

    def create(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("pre_model_hook") is None:
            kwargs["pre_model_hook"] = hook
        return create_react_agent(*args, **kwargs)

    return create


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = side()
    if chosen == "native":
        hook: Hook = native_hook
    elif chosen == "noop":
        hook = noop_hook
    else:
        from memci.integrations.langgraph import trim_hook

        hook = trim_hook(BUDGET, keep_system=True, start_on="user")
    if not rebind("create_react_agent", create_react_agent, with_hook(hook), config.rootpath):
        raise pytest.UsageError("swap_langgraph_trim_hook: no test module binds create_react_agent")
