"""``memci.formats`` outputs are typed as the SDKs' request types: the calls an agent makes with them
pass ``mypy --strict`` with the ``openai`` and ``anthropic`` SDKs installed, and a wrong call fails."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")
mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parent.parent

AGENT = """
    from typing import Any

    from anthropic import Anthropic
    from openai import OpenAI

    from memci import formats


    def turn(openai: OpenAI, claude: Anthropic, history: list[dict[str, Any]]) -> None:
        openai.chat.completions.create(model="gpt-4o", messages=formats.to_openai(history))
        openai.responses.create(model="gpt-4o", input=formats.to_responses(history))
        claude.messages.create(model="claude-sonnet-4-5", max_tokens=1024, **formats.to_anthropic(history))
        items = formats.to_responses(history)
        openai.chat.completions.create(model="gpt-4o", messages=formats.from_responses(items))
        request = formats.to_anthropic(items)
        openai.chat.completions.create(model="gpt-4o", messages=formats.to_openai(request))
"""

CONTEXT = """
    import asyncio

    from anthropic import Anthropic
    from openai import AsyncOpenAI, OpenAI
    from openai.types.chat import ChatCompletionToolParam

    import memci
    from memci import formats
    from memci.summarizers import ModelSummarizer


    def chat_turn(client: OpenAI, ctx: memci.ContextSystem, my_tools: list[ChatCompletionToolParam]) -> None:
        response = client.chat.completions.create(
            model="gpt-4o", messages=ctx.build_messages(), tools=[*my_tools, *ctx.tool_definitions()]
        )
        reply = response.choices[0].message
        ctx.add(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls or []:
            if ctx.is_recall_call(call):
                ctx.add(ctx.handle_tool_call(call))
        ctx.end_round()


    def anthropic_turn(client: Anthropic, ctx: memci.ContextSystem) -> None:
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1024,
            tools=ctx.tool_definitions("anthropic"),
            **formats.to_anthropic(ctx.build_messages()),
        )


    def responses_turn(client: OpenAI, ctx: memci.ContextSystem) -> None:
        client.responses.create(model="gpt-4o", input=formats.to_responses(ctx.build_messages()))


    def attp_listing(ctx: memci.ContextSystem) -> str:
        return ctx.tool_definitions("attp")


    def model_summaries(client: OpenAI, async_client: AsyncOpenAI, page: memci.Page) -> memci.PageSummary:
        summarizer = ModelSummarizer(client, "gpt-4o-mini", max_chars=120)
        memci.ContextSystem("Be brief.", summarizer=summarizer)
        memci.ContextSystem("Be brief.", summarizer=memci.ModelSummarizer(client, "m", api="responses"))
        asyncio.run(ModelSummarizer(async_client, "gpt-4o-mini").asummarize(page))
        return summarizer.summarize(page)
"""

#: Each a call that must fail, with what mypy must name.
WRONG_CONTEXT = {
    "anthropic tools to chat completions": (
        "client.chat.completions.create(model='m', messages=ctx.build_messages(), "
        "tools=ctx.tool_definitions('anthropic'))",
        '"tools"',
    ),
    "chat tools to anthropic": (
        "claude.messages.create(model='m', max_tokens=8, tools=ctx.tool_definitions(), "
        "**formats.to_anthropic(ctx.build_messages()))",
        '"tools"',
    ),
    "chat messages to anthropic": (
        "claude.messages.create(model='m', max_tokens=8, messages=ctx.build_messages())",
        '"messages"',
    ),
    "the attp listing as tools": (
        "client.chat.completions.create(model='m', messages=ctx.build_messages(), tools=ctx.tool_definitions('attp'))",
        '"tools"',
    ),
    "a page summary as a str": ("text: str = ModelSummarizer(client, 'm').summarize(page)", "PageSummary"),
}

WRONG = """
    from typing import Any

    from openai import OpenAI

    from memci import formats


    def turn(openai: OpenAI, history: list[dict[str, Any]]) -> None:
        openai.chat.completions.create(model="gpt-4o", messages=formats.to_responses(history))
"""


def mypy_strict(tmp_path: Path, source: str) -> tuple[str, int]:
    snippet = tmp_path / "agent.py"
    snippet.write_text(textwrap.dedent(source))
    stdout, stderr, status = mypy_api.run(
        ["--strict", "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary", str(snippet)]
    )
    return stdout + stderr, status


def test_the_sdk_calls_type_check(tmp_path: Path) -> None:
    output, status = mypy_strict(tmp_path, AGENT)
    assert status == 0, output


def test_a_wrong_call_does_not(tmp_path: Path) -> None:
    output, status = mypy_strict(tmp_path, WRONG)
    assert status == 1, output
    assert '"messages"' in output, output
    assert "[arg-type]" in output, output


def test_the_context_systems_requests_type_check(tmp_path: Path) -> None:
    output, status = mypy_strict(tmp_path, CONTEXT)
    assert status == 0, output


@pytest.mark.parametrize("case", WRONG_CONTEXT, ids=str)
def test_a_wrong_use_of_the_context_system_does_not(tmp_path: Path, case: str) -> None:
    line, named = WRONG_CONTEXT[case]
    source = f"""
    from anthropic import Anthropic
    from openai import OpenAI

    import memci
    from memci import formats
    from memci.summarizers import ModelSummarizer


    def turn(client: OpenAI, claude: Anthropic, ctx: memci.ContextSystem, page: memci.Page) -> None:
        {line}
"""
    output, status = mypy_strict(tmp_path, source)
    assert status == 1, output
    assert named in output, output
    assert output.count("error:") == 1, output


#: What the README's examples take as given: the agent's own tools and their runner.
README_PRELUDE = """
from typing import Any

import openai
from openai.types.chat import ChatCompletionMessageToolCallUnion, ChatCompletionToolParam
from openai.types.responses import ResponseFunctionToolCall

import memci

my_tools: list[ChatCompletionToolParam] = []


def run_my_tool(call: ChatCompletionMessageToolCallUnion) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": "done"}


def run_my_function(call: ResponseFunctionToolCall) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call.call_id, "output": "done"}
"""


def readme_blocks(*needles: str) -> list[str]:
    """The README's Python examples that hold one of ``needles``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]
    return [block for block in blocks if any(needle in block for needle in needles)]


def test_the_readmes_agent_loops_and_summarizer_type_check(tmp_path: Path) -> None:
    blocks = readme_blocks("ctx.build_messages()", "ModelSummarizer")
    assert len(blocks) == 4  # the chat loop, the Responses loop, the async loop, the model summarizer
    output, status = mypy_strict(tmp_path, README_PRELUDE + "\n\n".join(blocks))
    assert status == 0, output


#: What memci builds goes back into memci's own inputs: the SDK-typed messages are mappings.
ROUND_TRIP = """
from typing import Any

import memci
from memci import formats

ctx = memci.ContextSystem("You are terse.")
built = ctx.build_messages()
total: int = ctx.count_tokens(built) + memci.tokens.count_messages(built)
cleaned = memci.sanitize_messages(built)
array = memci.MessageArray(built)
array.append(formats.to_openai([{"role": "user", "content": "hi"}]))
array.insert(0, built)
"""


def test_what_memci_builds_goes_back_into_memci(tmp_path: Path) -> None:
    output, status = mypy_strict(tmp_path, ROUND_TRIP)
    assert status == 0, output


def test_the_readmes_framework_examples_type_check(tmp_path: Path) -> None:
    """Each framework's README example, as its user would write it, under mypy --strict with the
    framework's own types (each block on its own: they reuse names)."""
    blocks = readme_blocks("memci.integrations.")
    assert len(blocks) == 4  # the Agents SDK, LangChain, LangGraph, LlamaIndex
    for block in blocks:
        output, status = mypy_strict(tmp_path, block)
        assert status == 0, f"{block}\n{output}"
