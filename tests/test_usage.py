"""memci.TokenUsage: each provider's usage shape is normalised to OpenAI's meaning, totals and
per-batch / per-model sums add up, and MessageArray.usage files records under the current batch."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from factories import run_together, user
from hypothesis import given
from hypothesis import strategies as st
from memci import InvalidOperationError, MessageArray, TokenUsage, Usage


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        pytest.param(
            {
                "prompt_tokens": 1200,
                "completion_tokens": 300,
                "total_tokens": 1500,
                "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 256},
            },
            Usage(1200, 300, cached_tokens=1024, reasoning_tokens=256),
            id="openai-chat",
        ),
        pytest.param(
            {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": None},
            Usage(10, 2),
            id="openai-chat-model-dump-with-nones",
        ),
        pytest.param(
            {
                "input_tokens": 500,
                "output_tokens": 40,
                "total_tokens": 540,
                "input_tokens_details": {"cached_tokens": 128},
                "output_tokens_details": {"reasoning_tokens": 8},
            },
            Usage(500, 40, cached_tokens=128, reasoning_tokens=8),
            id="openai-responses",
        ),
        pytest.param(
            {
                "input_tokens": 20,
                "output_tokens": 50,
                "cache_read_input_tokens": 3000,
                "cache_creation_input_tokens": 200,
            },
            Usage(3220, 50, cached_tokens=3000, cache_write_tokens=200),
            id="anthropic",
        ),
        pytest.param(
            {
                "input_tokens": 20,
                "output_tokens": 5,
                "cache_read_input_tokens": None,
                "cache_creation_input_tokens": None,
            },
            Usage(20, 5),
            id="anthropic-no-cache",
        ),
        pytest.param(
            {
                "input_tokens": 3220,
                "output_tokens": 50,
                "total_tokens": 3270,
                "input_token_details": {"cache_read": 3000, "cache_creation": 200},
                "output_token_details": {"reasoning": 10},
            },
            Usage(3220, 50, cached_tokens=3000, cache_write_tokens=200, reasoning_tokens=10),
            id="langchain-usage-metadata",
        ),
    ],
)
def test_every_provider_shape_means_the_same(shape: dict[str, Any], expected: Usage) -> None:
    assert Usage.of(shape) == expected
    assert Usage.of(_as_object(shape)) == expected  # SDK objects: attributes instead of keys
    assert Usage.of({"usage": shape}) == expected  # a whole response
    assert Usage.of(SimpleNamespace(usage_metadata=shape, content="hi")) == expected  # a LangChain AIMessage
    if "total_tokens" in shape:  # the provider's own total agrees with the normalised counts
        assert Usage.of(shape).total_tokens == shape["total_tokens"]


def _as_object(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _as_object(v) for k, v in value.items()})
    return value


@pytest.mark.parametrize(
    ("shape", "match"),
    [
        ({"tokens": 5}, "keys \\['tokens'\\]"),
        ("12 tokens", "str"),
        ({"prompt_tokens": -1, "completion_tokens": 0}, "prompt_tokens"),
        ({"prompt_tokens": 1.5, "completion_tokens": 0}, "prompt_tokens"),
        ({"input_tokens": 1, "output_tokens": True}, "output_tokens"),
    ],
)
def test_unknown_or_bad_shapes_are_refused(shape: Any, match: str) -> None:
    usage = TokenUsage()
    with pytest.raises(InvalidOperationError, match=match):
        usage.record(shape)
    assert len(usage) == 0
    assert usage.total == Usage()


counts = st.integers(0, 10**6)
usages = st.builds(Usage, counts, counts, counts, counts, counts)


@given(recorded=st.lists(st.tuples(usages, st.integers(0, 3), st.sampled_from([None, "gpt-4o", "claude"]))))
def test_totals_and_groupings_add_up(recorded: list[tuple[Usage, int, str | None]]) -> None:
    tracker = TokenUsage()
    for u, batch, model in recorded:
        assert tracker.record(u, batch_index=batch, model=model) == u
    expected = Usage()
    for u, _, _ in recorded:
        expected += u
    assert tracker.total == expected
    assert sum(tracker.per_batch().values(), Usage()) == expected
    assert sum(tracker.per_model().values(), Usage()) == expected
    for batch, total in tracker.per_batch().items():
        assert total == sum((u for u, b, _ in recorded if b == batch), Usage())
    assert [r.usage for r in tracker] == [u for u, _, _ in recorded]
    assert tracker.last == (recorded[-1][0] if recorded else None)
    tracker.reset()
    assert tracker.total == Usage()
    assert tracker.records() == []


def test_a_message_array_files_usage_under_its_current_batch() -> None:
    arr = MessageArray([user("hi")])
    arr.usage.record({"prompt_tokens": 100, "completion_tokens": 10})
    cp = arr.checkpoint()
    arr.usage.record({"input_tokens": 50, "output_tokens": 5}, model="claude")
    arr.usage.record({"input_tokens": 60, "output_tokens": 6})
    arr.rollback(cp)  # the tokens were spent: rollback keeps the records
    assert arr.usage.per_batch() == {0: Usage(100, 10), 1: Usage(110, 11)}
    assert arr.usage.total.total_tokens == 231
    assert arr.usage is arr.usage
    assert [r.batch_index for r in arr.usage.records()] == [0, 1, 1]
    assert MessageArray.from_json(arr.to_json()).usage.total == Usage()


def test_a_prompt_over_the_limit_is_flagged_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    tracker = TokenUsage(limit=1000)
    tracker.record({"prompt_tokens": 900, "completion_tokens": 1})
    assert not tracker.over_limit
    with caplog.at_level(logging.WARNING, logger="memci"):
        tracker.record({"prompt_tokens": 1001, "completion_tokens": 1})
    assert tracker.over_limit
    assert "1001" in caplog.text
    assert "limit of 1000" in caplog.text
    with pytest.raises(InvalidOperationError, match="limit"):
        TokenUsage(limit=-5)


def test_records_from_many_threads_are_all_counted() -> None:
    tracker = TokenUsage()

    def work() -> None:
        for _ in range(500):
            tracker.record({"prompt_tokens": 2, "completion_tokens": 1})

    run_together(work, work, work, work)
    assert len(tracker) == 2000
    assert tracker.total == Usage(4000, 2000)


def test_each_record_carries_memcis_count_of_its_request() -> None:
    arr = MessageArray([user("hello there")])
    arr.usage.record({"input_tokens": 11, "output_tokens": 2})
    arr.append({"role": "assistant", "content": "hi"})
    arr.append(user("how are you today?"))
    arr.usage.record({"input_tokens": 25, "output_tokens": 2})
    arr.usage.record({"input_tokens": 25, "output_tokens": 2}, counted=7)
    counts = [r.counted for r in arr.usage.records()]
    assert counts == [MessageArray([user("hello there")]).token_count(), arr.token_count(), 7]
    assert counts[0] < counts[1]
    # Outside an array: given, or read from the tracker's own count, or not known.
    tracker = TokenUsage(count=lambda: 40)
    tracker.record({"prompt_tokens": 41})
    tracker.record({"prompt_tokens": 41}, counted=3)
    TokenUsage().record({"prompt_tokens": 41})
    assert [r.counted for r in tracker.records()] == [40, 3]
    with pytest.raises(InvalidOperationError, match="counted must be an int >= 0"):
        tracker.record({"prompt_tokens": 1}, counted=-1)
    assert len(tracker) == 2
