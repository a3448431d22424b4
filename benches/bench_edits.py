"""Context edits per model call of a tool-using agent: memci's ``clear_tool_uses`` against LangChain's
``ContextEditingMiddleware`` with its ``ClearToolUsesEdit``.

One workload, ``clear_tool_uses``: a conversation of N messages (about a third of them tool results)
grows by one tool call and its result, then the tool uses before the last 3 are cleared for the next
model call:

- ``langchain``: what ``ContextEditingMiddleware.wrap_model_call`` does on every call: a deep copy
  of the state's messages, then ``ClearToolUsesEdit(trigger=0, keep=3).apply`` with its default
  approximate counter (it finds each result's call by scanning back from the result, and the copy
  starts uncleared every call, so every old result is cleared again);
- ``memci``: ``MessageArray.append`` of the two new messages, then ``clear_tool_uses(keep=3)``: the
  incremental edit (the earlier results are already cleared; the new batch shares the rest), its
  reported ``cleared_input_tokens`` exact.
"""

from __future__ import annotations

import json
from copy import deepcopy
from typing import Any

import generator
import harness
import memci
import pytest

PEERS = ("langchain", "memci")
CASES = harness.cases(PEERS, slow=("langchain-10k",), very_slow=("langchain-100k",))
KEEP = 3


def _new_use(turn: int) -> list[dict[str, Any]]:
    call_id = f"call_new_{turn}"
    arguments = json.dumps({"query": f"what changed in step {turn}"})
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "search", "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": f"step {turn}: " + "found it " * 60},
    ]


class _Agent:
    def __init__(self, peer: str, size: str) -> None:
        self.turn = 0
        self.peer = peer
        # The last 3 uses are ours, so each call's edit clears exactly the use that falls out of them.
        history = generator.conversation(generator.SIZES[size]) + [m for t in (-3, -2, -1) for m in _new_use(t)]
        if peer == "memci":
            self.array = memci.MessageArray(history)
            self.array.clear_tool_uses(keep=KEEP)  # the first call clears the old history once
        else:
            from langchain.agents.middleware.context_editing import ClearToolUsesEdit
            from langchain_core.messages.utils import count_tokens_approximately
            from memci.formats import to_langchain

            self.messages = to_langchain(history)
            self.edit = ClearToolUsesEdit(trigger=0, keep=KEEP)
            self.count = count_tokens_approximately

    def call(self) -> int:
        self.turn += 1
        new = _new_use(self.turn)
        if self.peer == "memci":
            self.array.append(new)
            return self.array.clear_tool_uses(keep=KEEP).cleared_tool_uses
        from memci.formats import to_langchain

        self.messages.extend(to_langchain(new))
        edited = deepcopy(self.messages)
        self.edit.apply(edited, count_tokens=self.count)
        return sum(1 for m in edited if getattr(m, "response_metadata", {}).get("context_editing"))


@pytest.mark.parametrize(("peer", "size"), CASES)
def test_clear_tool_uses(benchmark: Any, request: pytest.FixtureRequest, peer: str, size: str) -> None:
    harness.importorskip_peer(peer)
    if peer == "langchain":
        pytest.importorskip("langchain")
    harness.label(benchmark, "clear_tool_uses", peer, size)
    agent = _Agent(peer, size)
    cleared = harness.measure(benchmark, agent.call, slow=harness.is_slow(request))
    # memci clears the one use that fell out of the last 3; LangChain re-clears every old result of
    # its fresh copy.
    assert cleared == 1 if peer == "memci" else cleared > 1
