"""memci.claude_tokens: the calibrated estimate fitted to reported usage (also from arr.usage), and
the count_tokens counter against a fake Anthropic endpoint on 127.0.0.1, through the real
``anthropic`` SDK."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from factories import assistant, user
from memci import InvalidOperationError, MessageArray, tokens
from memci.claude_tokens import CalibratedCounter, CountTokensCounter

#: The fake endpoint's tokenizer, standing in for Claude's: cl100k_base, a different tokenizer
#: from the counters' o200k_base, plus a fixed cost per request (as a system prompt or tools add).
FAKE_OVERHEAD = 40


def fake_claude_count(request: dict[str, Any]) -> int:
    """What the fake endpoint answers: the request's messages and system in cl100k_base."""
    system = request.get("system") or ""
    system_text = system if isinstance(system, str) else " ".join(b["text"] for b in system)
    return (
        tokens.count_messages(request["messages"], "cl100k_base")
        + tokens.count(system_text, "cl100k_base")
        + FAKE_OVERHEAD
    )


class FakeAnthropic(ThreadingHTTPServer):
    """``POST /v1/messages/count_tokens`` on 127.0.0.1: answers ``fake_claude_count`` and keeps
    each request body."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []


class _Handler(BaseHTTPRequestHandler):
    server: FakeAnthropic

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.split("?")[0] != "/v1/messages/count_tokens":
            self.send_error(404)
            return
        self.server.requests.append(body)
        reply = json.dumps({"input_tokens": fake_claude_count(body)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def client(endpoint: FakeAnthropic) -> Any:
    anthropic = pytest.importorskip("anthropic")
    host, port = endpoint.server_address[:2]
    return anthropic.Anthropic(api_key="test-key", base_url=f"http://{host}:{port}", max_retries=0)


def conversation(turns: int) -> list[dict[str, Any]]:
    """A growing chat: a question and an answer per turn, of varied lengths."""
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append(user(f"Question {i}: what about the report on item {i * 7}? " * (1 + i % 3)))
        messages.append(assistant(f"Item {i * 7} was shipped on day {i}, as the log shows. " * (1 + i % 4)))
    return messages


# ---- the calibrated estimate ------------------------------------------------------------------


def test_the_fitted_line_recovers_a_known_ratio_and_overhead() -> None:
    claude = CalibratedCounter()
    assert claude.line == (1.0, 0.0)
    assert claude.error() is None
    for n in (100, 400, 900, 2500):
        claude.add(n, round(1.25 * n + 60))
    ratio, overhead = claude.line
    assert ratio == pytest.approx(1.25, abs=1e-3)
    assert overhead == pytest.approx(60, abs=1)
    assert claude.error() == pytest.approx(0, abs=1e-3)
    message = user("hello world, how are you today?")
    assert claude(message) == -(-tokens.count_message(message) * ratio // 1)
    assert claude.count_messages([message]) == round(ratio * tokens.count_messages([message]) + overhead)


def test_a_line_through_the_origin_when_the_points_do_not_fix_an_intercept() -> None:
    claude = CalibratedCounter()
    claude.add(200, 300)
    assert claude.line == (1.5, 0.0)
    claude.add(200, 320)  # the same count twice: no spread to fit a slope on
    assert claude.line == pytest.approx((1.55, 0.0))


def test_calibrated_from_the_usage_an_array_records() -> None:
    arr = MessageArray()
    counted_then = []
    for i, question in enumerate(conversation(6)[::2]):
        arr.append(question)
        counted_then.append(arr.token_count())
        # What the API would report: its own tokenizer's count of the request.
        arr.usage.record({"input_tokens": fake_claude_count({"messages": arr.messages()}), "output_tokens": 10 + i})
        arr.append(assistant(f"Answer {i} is in the log of day {i}."))
    assert [r.counted for r in arr.usage.records()] == counted_then
    claude = CalibratedCounter.from_usage(arr.usage)
    assert claude.observations == 6
    error = claude.error()
    assert error is not None
    assert error < 0.05
    truth = fake_claude_count({"messages": arr.messages()})
    assert abs(claude.count_messages(arr.messages()) - truth) / truth < 0.05


def test_observe_reads_any_usage_shape_and_bad_counts_are_refused() -> None:
    claude = CalibratedCounter("gpt-4o")
    claude.observe([user("hi")], {"input_tokens": 5, "cache_read_input_tokens": 20, "output_tokens": 1})
    assert claude.line == (25 / tokens.count_messages([user("hi")]), 0.0)
    with pytest.raises(InvalidOperationError, match="reported must be an int >= 0"):
        claude.add(3, -1)
    with pytest.raises(InvalidOperationError, match="expected a TokenUsage"):
        CalibratedCounter.from_usage([])  # type: ignore[arg-type]
    assert claude.observations == 1


# ---- the count_tokens endpoint, at most once per N turns -------------------------------------


def test_the_endpoint_is_asked_at_most_once_per_every_turns(endpoint: FakeAnthropic, client: Any) -> None:
    counter = CountTokensCounter(client, "claude-sonnet-4-5", every=4, system="You are terse.")
    history = conversation(12)
    answers = []
    for turn in range(1, 13):
        answers.append(counter.count_messages(history[: 2 * turn]))
    # Turns 1, 5 and 9 asked; the others were estimated from the last exact count.
    assert counter.calls == len(endpoint.requests) == 3
    for turn in (1, 5, 9):
        request = endpoint.requests[(turn - 1) // 4]
        assert request["model"] == "claude-sonnet-4-5"
        assert request["system"] == "You are terse."
        assert answers[turn - 1] == fake_claude_count(request)
    for turn in range(1, 13):
        truth = fake_claude_count({"messages": history[: 2 * turn], "system": "You are terse."})
        assert abs(answers[turn - 1] - truth) / truth < 0.1, turn
    # The request counted last is answered from the cache, whatever the turn.
    assert counter.count_messages(history[:18]) == answers[8]
    assert counter.calls == 3


def test_the_request_is_sent_in_anthropics_format_with_tools(endpoint: FakeAnthropic, client: Any) -> None:
    tools = [{"name": "search", "description": "Search.", "input_schema": {"type": "object", "properties": {}}}]
    counter = CountTokensCounter(client, "claude-haiku-4-5", every=1, tools=tools)
    messages = [{"role": "system", "content": "Be brief."}, user("hello")]
    assert counter.count_messages(messages) == fake_claude_count({"messages": [user("hello")], "system": "Be brief."})
    (request,) = endpoint.requests
    assert request["tools"] == tools
    assert request["system"] == "Be brief."
    assert request["messages"] == [{"role": "user", "content": "hello"}]
    # As a message counter it gives the calibrated estimate, with no call.
    assert counter(user("hello")) >= 1
    assert counter.calls == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"client": object(), "model": "m"}, "client must have messages.count_tokens"),
        ({"model": ""}, "model must be a non-empty str"),
        ({"model": "m", "every": 0}, "every must be an int >= 1"),
    ],
)
def test_bad_arguments_are_refused_by_name(client: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidOperationError, match=match):
        CountTokensCounter(**{"client": client, **kwargs})
