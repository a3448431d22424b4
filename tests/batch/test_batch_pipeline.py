"""The pipeline on iterables: every input path gives what the same steps give one conversation at
a time through MessageArray (and sanitize_messages), bad records are reported and skipped."""

from __future__ import annotations

import os
import pickle
import signal
import time
import warnings
from typing import Any

import memci
import pytest
from batch_helpers import PIPELINES, as_line, conversations, datasets, messages_of, reference
from hypothesis import given
from hypothesis import strategies as st
from memci import batch, ops
from memci.errors import InvalidMessageError, InvalidOperationError


@pytest.mark.parametrize("name", sorted(PIPELINES))
@given(data=datasets)
def test_iterable_and_records_match_the_array_one_conversation_at_a_time(name: str, data: list[Any]) -> None:
    steps = PIPELINES[name]
    pipeline = batch.Pipeline(steps, workers=2)
    expected = [reference(c, steps) for c in data]
    results = pipeline.run(data, chunk_size=4)
    assert list(results) == [messages for messages, _ in expected]
    assert results.tokens == [counts for _, counts in expected]
    assert results.errors == []
    records = pipeline.run_records([as_line(c, i) for i, c in enumerate(data)], chunk_size=3)
    assert [messages_of(r) for r in records] == [messages for messages, _ in expected]
    assert records.summary.tokens == [sum(col) for col in zip(*(c for _, c in expected), strict=True)]
    assert records.summary.messages_in == sum(map(len, data))
    assert records.summary.messages_out == sum(len(m) for m, _ in expected)


@given(conversation=conversations())
def test_sanitize_matches_sanitize_messages(conversation: list[Any]) -> None:
    kept = batch.Pipeline([batch.sanitize()]).apply(conversation)
    assert kept == memci.sanitize_messages(conversation).messages


@given(conversation=conversations())
def test_removals_are_counted_by_step(conversation: list[Any]) -> None:
    steps = [batch.sanitize(), batch.filter(roles=["user"])]
    results = batch.Pipeline(steps).run([conversation])
    [kept] = list(results)
    sanitized = memci.sanitize_messages(conversation)
    assert results.summary.removed["sanitize"] == sanitized.removed_count
    assert results.summary.removed["filter"] == len(sanitized.messages) - len(kept)
    assert results.summary.messages_in - results.summary.messages_out == sum(results.summary.removed.values())


def test_kept_messages_are_the_input_dicts_and_cut_ones_are_new() -> None:
    conversation = [{"role": "user", "content": "a"}, {"role": "user", "content": "line one\nline two"}]
    kept = batch.Pipeline([batch.filter(roles=["user"])]).apply(conversation)
    assert kept[0] is conversation[0]
    steps = [batch.trim_to_tokens(10, allow_partial=True)]
    cut = batch.Pipeline(steps).apply(conversation)
    assert cut == [{"role": "user", "content": "line two"}] == reference(conversation, steps)[0]
    assert conversation[1]["content"] == "line one\nline two"


def test_bad_conversations_are_reported_with_their_place_and_skipped() -> None:
    good = [{"role": "user", "content": "x"}]
    data: list[Any] = [
        good,
        [{"role": "robot", "content": "x"}],
        "not a list",
        good,
        [{"role": "tool", "content": "x"}],
    ]
    results = batch.Pipeline([batch.sanitize()]).run(data, chunk_size=2)
    assert list(results) == [good, good]
    assert [(e.number, e.path) for e in results.errors] == [
        (1, "messages[0].role"),
        (2, ""),
        (4, "messages[0].tool_call_id"),
    ]
    assert results.summary.bad == 3
    assert results.summary.exit_code == 1
    with pytest.raises(InvalidMessageError, match="role"):
        batch.Pipeline([]).apply([{"role": "robot", "content": "x"}])


def test_bad_records_name_line_paths() -> None:
    records = ["[", "42", '{"id": 1}', '{"messages": [{"role": "user"}]}', b"\xff", '[{"role":"user","content":"ok"}]']
    results = batch.Pipeline([]).run_records(records)
    assert list(results) == [b'[{"role":"user","content":"ok"}]']
    assert [(e.number, e.path) for e in results.errors] == [
        (0, ""),
        (1, ""),
        (2, "messages"),
        (3, "messages[0].content"),
        (4, ""),
    ]
    assert "UTF-8" in results.errors[4].reason


def test_steps_come_from_configs_and_both_seed_dict_formats() -> None:
    pipeline = batch.Pipeline(
        [
            {"operation": "TRUNCATE", "keepLast": 2},
            {"operation": "filter", "filter": {"roles": ["user"]}},
            {"operation": "count_tokens", "encoding": "gpt-4o"},
            ops.Sanitize(),
        ]
    )
    assert isinstance(pipeline.steps[0], ops.Truncate)
    assert pipeline.steps[2] == batch.CountTokens("gpt-4o")
    conversation = [{"role": "user", "content": str(i)} for i in range(5)]
    assert pipeline.apply(conversation) == conversation[3:]
    restored = pickle.loads(pickle.dumps(pipeline))
    assert restored.steps == pipeline.steps


@pytest.mark.parametrize(
    ("steps", "match"),
    [
        ([ops.Rollback(0)], "not a batch step"),
        ([{"operation": "append", "messages": []}], "not a batch step"),
        ([{"operation": "count_tokens", "what": 1}], "unknown keys"),
        ([{"operation": "count_tokens", "encoding": "nope"}], "unknown encoding"),
        ([batch.trim_to_tokens(10, encoding="nope")], "unknown encoding"),
        ([batch.trim_to_tokens(10, start_on="robot")], "robot"),
        ("sanitize", "list of steps"),
    ],
)
def test_bad_steps_are_refused_before_any_run(steps: Any, match: str) -> None:
    with pytest.raises(InvalidOperationError, match=match):
        batch.Pipeline(steps)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"format": "gemini"}, "unknown format"), ({"workers": 0}, "workers"), ({"workers": True}, "workers")],
)
def test_bad_options_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidOperationError, match=match):
        batch.Pipeline([], **kwargs)


@given(data=st.lists(conversations(), max_size=4), workers=st.integers(1, 3))
def test_output_order_is_input_order_whatever_the_workers(data: list[Any], workers: int) -> None:
    steps = [batch.sanitize()]
    assert list(batch.Pipeline(steps, workers=workers).run(data, chunk_size=1)) == [
        memci.sanitize_messages(c).messages for c in data
    ]


def test_a_child_forked_after_a_run_starts_threads_of_its_own() -> None:
    """Pipelines with as many workers share one pool in a process (the core's tests check the
    sharing); a child forked after the pool started, where its threads do not exist, must start a
    pool of its own rather than wait on it."""
    conversation = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "orphan"}]
    first = batch.Pipeline([batch.sanitize()], workers=2)
    assert list(first.run([conversation] * 50, chunk_size=7)) == [conversation[:1]] * 50
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork beside threads (3.12+)
        pid = os.fork()
    if pid == 0:  # the child: run a new pipeline of the same workers, report, and leave at once
        try:
            got = list(batch.Pipeline([batch.sanitize()], workers=2).run([conversation] * 50, chunk_size=7))
            os.write(write, b"ok" if got == [conversation[:1]] * 50 else b"wrong")
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's pipeline hung on its parent's threads")
        time.sleep(0.01)
    with os.fdopen(read, "rb") as f:
        assert f.read() == b"ok"


def test_anthropic_format_runs_the_same_rules() -> None:
    conversation = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": "no result"},
    ]
    kept = batch.Pipeline([batch.sanitize()], format="anthropic").apply(conversation)
    assert kept == [conversation[0], conversation[2]]
    assert messages_of(as_line(kept, 0)) == kept


@pytest.mark.parametrize(
    "workers", [257, 2**31, 2**64, 10**5000, -(2**64)], ids=["257", "2**31", "2**64", "10**5000", "-2**64"]
)
def test_workers_beyond_the_cap_are_refused_before_any_thread_starts(workers: int) -> None:
    threads = len(os.listdir("/proc/self/task"))
    with pytest.raises(InvalidOperationError, match="workers must be an int from 1 to 256") as raised:
        batch.Pipeline([batch.sanitize()], workers=workers)
    assert len(str(raised.value)) < 200
    assert len(os.listdir("/proc/self/task")) == threads


def test_a_format_too_long_to_print_is_named_short() -> None:
    for bad in (10**5000, "x" * 100_000, "\ud800" * 100):
        with pytest.raises(InvalidOperationError) as raised:
            batch.Pipeline([], format=bad)  # type: ignore[arg-type]
        assert len(str(raised.value)) < 200
        str(raised.value).encode("utf-8")
