"""A LangGraph thread's checkpoints: the plain message state against memci's ``ContextHook``.

One workload, ``graph_step``: a prebuilt agent (``create_react_agent``, a fake chat model
answering at once) on ``InMemorySaver``, whose thread already holds N messages of the generated
agent conversation, runs one more turn (a user message, the model's answer), checkpointing as it
goes:

- ``langgraph``: the plain state: every checkpoint holds the whole history;
- ``memci``: ``ContextHook`` (state key ``"memci"``, archived pages in an ``InMemoryStore``): the
  checkpoint holds the context system's JSON state (window, contents page, dropped-entry counts).

Besides the time, ``extra_info["checkpoint_bytes"]`` records the size of the thread's last
checkpoint (its channel values as JSON), the memory a checkpointer keeps per step.
"""

from __future__ import annotations

import json
import warnings
from functools import cache
from typing import Any

import generator
import harness
import pytest

pytest.importorskip("langgraph")
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.prebuilt.chat_agent_executor import AgentState
from langgraph.store.memory import InMemoryStore
from memci.formats import to_langchain
from memci.integrations.langgraph import ContextHook

PEERS = ("langgraph", "memci")
# The 10k and 100k threads take minutes to build a turn at a time: not in the untimed pass.
CASES = harness.cases(PEERS, slow=("langgraph-10k", "memci-10k"), very_slow=("langgraph-100k", "memci-100k"))


class _Model(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> _Model:
        return self


class _State(AgentState):
    memci: dict | None  # type: ignore[type-arg]  # the context system's JSON state


def _answers() -> Any:
    while True:
        yield AIMessage(content="Noted; the tests pass after the fix.")


@cache
def history(size: str) -> tuple[Any, ...]:
    return tuple(generator.conversation(generator.SIZES[size])[1:])


class _Thread:
    def __init__(self, peer: str, size: str) -> None:
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        self.saver = InMemorySaver()
        self.config = {"configurable": {"thread_id": "bench"}}
        if peer == "memci":
            hook = ContextHook(active_pages=5)
            self.agent = create_react_agent(
                _Model(messages=_answers()),
                [],
                pre_model_hook=hook,
                state_schema=_State,
                checkpointer=self.saver,
                store=InMemoryStore(),
            )
        else:
            self.agent = create_react_agent(_Model(messages=_answers()), [], checkpointer=self.saver)
        # The history enters the thread a turn at a time, as it would have.
        turn: list[dict[str, Any]] = []
        for message in history(size):
            if message["role"] == "user" and turn:
                self.agent.update_state(self.config, {"messages": to_langchain(turn)}, as_node="agent")
                if peer == "memci":
                    self.agent.invoke({"messages": []}, self.config)
                turn = []
            turn.append(message)
        self.turn = 0

    def step(self) -> int:
        self.turn += 1
        self.agent.invoke({"messages": [("user", f"Question {self.turn}: and the tests?")]}, self.config)
        checkpoint = self.saver.get_tuple(self.config)
        assert checkpoint is not None
        return len(json.dumps(checkpoint.checkpoint["channel_values"], default=str))


_THREADS: dict[str, _Thread] = {}


@pytest.mark.parametrize(("peer", "size"), CASES)
def test_graph_step(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    key = f"{peer}-{size}"
    if key not in _THREADS:
        _THREADS[key] = _Thread(peer, size)
    thread = _THREADS[key]
    harness.label(benchmark, "graph_step", peer, size)
    size_bytes = harness.measure(benchmark, thread.step, slow=harness.is_slow(request))
    benchmark.extra_info["checkpoint_bytes"] = size_bytes
    assert size_bytes > 0
