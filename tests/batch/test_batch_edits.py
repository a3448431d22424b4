"""The CLEAR_TOOL_USES step: ``batch.clear_tool_uses(...)`` and ``memci batch --clear-tool-uses
KEEP`` do to every conversation what ``MessageArray.clear_tool_uses`` does, in each format, and the
summary adds up what was cleared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import memci
import pytest
from batch_helpers import reference
from hypothesis import given
from hypothesis import strategies as st
from memci import batch
from memci.cli.main import main
from test_edits import steps as history_steps

FORMATS = {"openai": "chat", "anthropic": "anthropic", "responses": "responses"}


@st.composite
def datasets(draw: st.DrawFn, fmt: str) -> list[list[dict[str, Any]]]:
    out = []
    for _ in range(draw(st.integers(0, 4))):
        conversation: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        for _ in range(draw(st.integers(0, 6))):
            conversation += draw(history_steps(fmt))
        out.append(conversation)
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@given(data=st.data())
def test_the_step_does_what_the_array_does(fmt: str, data: st.DataObject) -> None:
    conversations = data.draw(datasets(fmt))
    keep = data.draw(st.integers(0, 3))
    inputs = data.draw(st.booleans())
    step = batch.clear_tool_uses(keep=keep, clear_tool_inputs=inputs)
    results = batch.Pipeline([step], format=FORMATS[fmt], workers=2).run(conversations)
    got = list(results)
    assert got == [reference(c, [step])[0] for c in conversations]
    edits = [memci.MessageArray(c).clear_tool_uses(keep=keep, clear_tool_inputs=inputs) for c in conversations]
    assert results.summary.cleared_tool_uses == sum(e.cleared_tool_uses for e in edits)
    assert results.summary.cleared_input_tokens == sum(e.cleared_input_tokens for e in edits)
    for messages in got:
        assert memci.validate_messages(messages).valid


def test_the_cli_flag_clears_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(5):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "look", "arguments": "{}"}}
        conversation += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "data " * 100},
        ]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps(conversation) + "\n", encoding="utf-8")
    assert main(["batch", str(source), str(target), "--clear-tool-uses", "2"]) == 0
    out = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    expected = memci.MessageArray(conversation)
    cleared = expected.clear_tool_uses(keep=2)
    assert out == [expected.messages()]
    shown = capsys.readouterr().out
    assert "tool uses cleared" in shown
    assert f"{cleared.cleared_input_tokens:,}" in shown
    assert main(["batch", str(source), str(target), "--clear-tool-uses", "-1"]) == 2
