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
