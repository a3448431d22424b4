"""A scripted agent loop with a fake model, in each of the three wire formats: the model's replies
go into a ``MessageArray`` as the SDK objects the SDKs return, tools answer, and every request the
loop builds validates against its API's request types (the SDKs' own, extra keys refused)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from factories import anthropic_message
from memci import MessageArray, formats
from test_formats import assert_anthropic_request, assert_openai_messages
from test_responses import assert_responses_input

pytest.importorskip("openai")
pytest.importorskip("anthropic")

Message = dict[str, Any]
TURNS = 4


def weather(city: str) -> str:
    return f"{city}: sunny, 21 degrees"


def chat_model(turn: int, step: int) -> Any:
    """Step 0 calls two tools, step 1 answers: as ``openai``'s ``ChatCompletionMessage``."""
    from openai.types.chat import ChatCompletionMessage

    if step == 0:
        calls = [
            {
                "id": f"call_{turn}_{k}",
                "type": "function",
                "function": {"name": "weather", "arguments": json.dumps({"city": c})},
            }
            for k, c in enumerate(("Paris", "Oslo"))
        ]
        return ChatCompletionMessage.model_validate({"role": "assistant", "content": None, "tool_calls": calls})
    return ChatCompletionMessage.model_validate({"role": "assistant", "content": f"Done with turn {turn}."})


def anthropic_model(turn: int, step: int) -> Any:
    """The same as ``anthropic``'s ``Message`` (its content blocks)."""
    if step == 0:
        content: list[Message] = [{"type": "text", "text": "Checking."}] + [
            {"type": "tool_use", "id": f"toolu_{turn}_{k}", "name": "weather", "input": {"city": c}}
            for k, c in enumerate(("Paris", "Oslo"))
        ]
    else:
        content = [{"type": "text", "text": f"Done with turn {turn}."}]
    return anthropic_message(content, message_id=f"msg_{turn}_{step}", calls_tools=step == 0)


def responses_model(turn: int, step: int) -> list[Any]:
    """The same as the ``output`` items of ``openai``'s ``Response``."""
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseReasoningItem

    if step == 0:
        reasoning = ResponseReasoningItem.model_validate({"type": "reasoning", "id": f"rs_{turn}", "summary": []})
        calls = [
            ResponseFunctionToolCall.model_validate(
                {
                    "type": "function_call",
                    "id": f"fc_{turn}_{k}",
                    "call_id": f"call_{turn}_{k}",
                    "name": "weather",
                    "arguments": json.dumps({"city": c}),
                    "status": "completed",
                }
            )
            for k, c in enumerate(("Paris", "Oslo"))
        ]
        return [reasoning, *calls]
    text = {"type": "output_text", "text": f"Done with turn {turn}.", "annotations": []}
    message = {"type": "message", "id": f"msg_{turn}", "role": "assistant", "status": "completed", "content": [text]}
    return [ResponseOutputMessage.model_validate(message)]


def chat_results(reply: Message) -> list[Message]:
    return [
        {"role": "tool", "tool_call_id": c["id"], "content": weather(**json.loads(c["function"]["arguments"]))}
        for c in reply.get("tool_calls") or []
    ]


def anthropic_results(reply: Message) -> list[Message]:
    blocks = [
        {"type": "tool_result", "tool_use_id": b["id"], "content": weather(**b["input"])}
        for b in reply["content"]
        if b["type"] == "tool_use"
    ]
    return [{"role": "user", "content": blocks}] if blocks else []


def responses_results(items: list[Message]) -> list[Message]:
    return [
        {"type": "function_call_output", "call_id": i["call_id"], "output": weather(**json.loads(i["arguments"]))}
        for i in items
        if i.get("type") == "function_call"
    ]


def chat_request(arr: MessageArray) -> None:
    assert_openai_messages([{k: v for k, v in m.items() if v is not None or k == "content"} for m in arr])


def anthropic_request(arr: MessageArray) -> None:
    assert_anthropic_request(dict(formats.to_anthropic(arr)))


def responses_request(arr: MessageArray) -> None:
    assert_responses_input(list(formats.to_responses(arr)))


WIRES: dict[str, tuple[Callable[[int, int], Any], Callable[[Any], list[Message]], Callable[[MessageArray], None]]] = {
    "chat": (chat_model, chat_results, chat_request),
    "anthropic": (anthropic_model, anthropic_results, anthropic_request),
    "responses": (responses_model, responses_results, responses_request),
}


@pytest.mark.parametrize("wire", WIRES)
def test_an_agent_loop_runs_end_to_end(wire: str) -> None:
    model, results, check_request = WIRES[wire]
    arr = MessageArray([{"role": "system", "content": "Answer with the weather tool."}])
    for turn in range(TURNS):
        arr.append({"role": "user", "content": f"Weather, turn {turn}?"})
        for step in (0, 1):
            check_request(arr)
            reply = model(turn, step)
            arr.append(reply)  # the SDK object(s), as the SDK returned them
            stored = arr[-1:] if not isinstance(reply, list) else arr[-len(reply) :]
            answers = results(stored if wire == "responses" else stored[0])
            if answers:
                arr.append(answers)
        assert arr.validate().valid
    check_request(arr)
    assert arr.count("user") >= TURNS
    assert f"Done with turn {TURNS - 1}." in json.dumps(arr[-1])
    before = len(arr)
    arr.trim_to_tokens(arr.token_count() // 2)
    assert 0 < len(arr) < before
    assert arr.validate().valid
    check_request(arr)
