"""The single-pass record reader against the reference rules: every line, good or hostile, is
accepted or refused by ``memci.batch`` exactly as ``MessageArray.from_json`` accepts or refuses
the same messages (the same error path and wording), and an accepted line's messages read back
as the store holds them."""

from __future__ import annotations

import json
from typing import Any

from batch_helpers import conversations
from hypothesis import example, given, settings
from hypothesis import strategies as st
from memci import MessageArray, batch
from memci.errors import InvalidMessageError, MemciError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)

#: Number spellings at and past the store's limits, and ones JSON does not allow.
RAW_NUMBERS = ["1e400", "-1e309", "1E5", "-0", "0.0", "2.50", "1" + "0" * 4299, "9" * 4301, "01", "1.", ".5", "NaN"]
#: Text that breaks or bends the JSON around it.
RAW_INSERTS = [",", ":", "[", "]", "{", "}", '"', "\\", " ", "0", "e", "-", "\\ud800", "\t", "\x01", "\u00e9"]


@st.composite
def lines(draw: st.DrawFn) -> tuple[str, str]:
    """A record line ``{"id": .., "messages": TEXT}`` and its messages TEXT: a conversation, now
    and then with odd fields, raw numbers, a repeated key, or one character inserted, deleted or
    the text cut short."""
    messages: list[Any] = draw(conversations())
    if messages and draw(st.booleans()):
        messages[0] = {**messages[0], "x-extra": draw(json_values)}
    text = json.dumps(messages, ensure_ascii=draw(st.booleans()))
    if '"content": ' in text and draw(st.booleans()):
        text = text.replace('"content": ', f'"n": {draw(st.sampled_from(RAW_NUMBERS))}, "content": ', 1)
    if '"role": ' in text and draw(st.integers(0, 4)) == 0:
        text = text.replace('"role": ', '"role": "assistant", "role": ', 1)
    mutation = draw(st.sampled_from(["none", "none", "insert", "delete", "cut"]))
    at = draw(st.integers(0, max(len(text) - 1, 0)))
    if mutation == "insert":
        text = text[:at] + draw(st.sampled_from(RAW_INSERTS)) + text[at:]
    elif mutation == "delete":
        text = text[:at] + text[at + 1 :]
    elif mutation == "cut":
        text = text[:at]
    return line_of(text)


def from_json(messages_text: str) -> MessageArray:
    """The messages through ``MessageArray.from_json`` (a state holding them all, visible)."""
    try:
        parsed = json.loads(messages_text, parse_int=str)  # str: no digit limit for the count
        n = len(parsed) if isinstance(parsed, list) else 0
    except ValueError:
        n = 0
    state = '{"format":"memci.MessageStore","version":1,"messages":' + messages_text
    state += ',"timestamps":' + json.dumps([0] * n)
    state += ',"visible":' + json.dumps(list(range(n))) + ',"batches":[],"marks":{},"tool_description":null}'
    return MessageArray.from_json(state)


def line_of(messages_text: str) -> tuple[str, str]:
    return '{"id": 7, "messages": ' + messages_text + ', "meta": {"k": [1.50]}}', messages_text


@settings(max_examples=400, deadline=None)
@given(lines())
@example(line_of('[{"role": "user", "content": "x"}, {"role": "robot", "content": "x"}]'))
@example(line_of('[{"role": "user", "content": "x", "n": {"a": [1, 1e400]}}]'))
@example(line_of('[{"role": "user", "content": "x", "role": "tool"}]'))
def test_single_pass_accepts_and_refuses_as_from_json(case: tuple[str, str]) -> None:
    line, messages_text = case
    results = batch.Pipeline([]).run_records([line])
    out = list(results)
    try:
        array = from_json(messages_text)
    except InvalidMessageError as e:
        refused: InvalidMessageError | None = e
    except MemciError:
        # Not JSON the store reads: the record is refused too. (from_json reads the whole state
        # first, a record is read message by message, so the first fault each names may differ.)
        assert out == [], line
        assert len(results.errors) == 1
        return
    else:
        refused = None
    if refused is not None:
        assert out == []
        (bad,) = results.errors
        assert (bad.path, f"{bad.path}: {bad.reason}") == (refused.path, str(refused))
        return
    assert results.errors == [], line
    assert out[0].startswith(b'{"id": 7, "messages": ')
    assert out[0].endswith(b'], "meta": {"k": [1.50]}}')
    assert json.loads(out[0])["messages"] == array.messages()


def test_hostile_bytes_are_bad_records_not_failures() -> None:
    good = '[{"role": "user", "content": "h\u00e9llo"}]'.encode()
    cut_utf8 = good[: good.index("é".encode()) + 1]
    deep = b'[{"role": "user", "content": "x", "d": ' + b"[" * 5000 + b"]" * 5000 + b"}]"
    huge = b'[{"role": "user", "content": "x", "n": 1' + b"0" * 5000 + b"}]"
    results = batch.Pipeline([batch.sanitize()]).run_records([cut_utf8, good[:-3] + b"\xff\xfe]", deep, huge, good])
    assert list(results) == [good]
    reasons = [(e.number, e.path, e.reason.split(":")[0]) for e in results.errors]
    assert reasons[:2] == [(0, "", "not valid UTF-8"), (1, "", "not valid UTF-8")]
    assert reasons[2][:2] == (2, "[0]")
    assert "recursion limit" in results.errors[2].reason
    assert reasons[3][:2] == (3, "[0].n")
    assert "digits is more than Python reads" in results.errors[3].reason
