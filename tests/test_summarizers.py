"""``memci.summarizers.ModelSummarizer``: one request per page to an OpenAI-compatible client, the
answer read into a page summary, and the fallback (with a WARNING) whenever the model fails. Offline:
stub clients shaped like the SDK's, and the real ``openai`` clients against a loopback server."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import memci
import pytest
from memci import ExtractiveSummarizer, Page, PageSummary, SummaryError
from memci.summarizers import ModelSummarizer
from test_formats import _check

Message = dict[str, Any]

PAGE = Page.of(
    7,
    [
        {"role": "user", "content": "What's the weather in Paris tomorrow? I fly at noon."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Tomorrow in Paris: 21°C, light wind."},
        {"role": "assistant", "content": "It will be 21°C with a light wind."},
    ],
)
GOOD = {
    "summary": "Paris weather for tomorrow's noon flight: 21°C, light wind",
    "entries": [
        "asks tomorrow's Paris weather (flight at noon)",
        "calls get_weather for Paris",
        "tool: 21°C, light wind",
        "answers 21°C with a light wind",
    ],
}
EXPECTED = PageSummary(
    "Paris weather for tomorrow's noon flight: 21°C, light wind",
    (
        "user: asks tomorrow's Paris weather (flight at noon)",
        "assistant: calls get_weather for Paris",
        "tool: 21°C, light wind",  # already tagged with its role: not tagged twice
        "assistant: answers 21°C with a light wind",
    ),
)


def chat_response(content: str | None, refusal: str | None = None) -> Any:
    message = SimpleNamespace(role="assistant", content=content, refusal=refusal)
    return SimpleNamespace(choices=[SimpleNamespace(index=0, message=message)])


class Create:
    """A ``create`` method: records each request and answers with ``answer(request)``."""

    def __init__(self, answer: Callable[[dict[str, Any]], Any]) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.threads: list[int] = []

    def __call__(self, **request: Any) -> Any:
        self.requests.append(request)
        self.threads.append(threading.get_ident())
        return self.answer(request)


class AsyncCreate(Create):
    async def __call__(self, **request: Any) -> Any:  # type: ignore[override]
        self.requests.append(request)
        result = self.answer(request)
        return await result if asyncio.iscoroutine(result) else result


def chat_client(create: Create) -> Any:
    """An object shaped like ``openai.OpenAI()`` (or ``AsyncOpenAI()``) for chat completions."""
    return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))


def answering(content: object) -> Create:
    text = content if isinstance(content, str) else json.dumps(content)
    return Create(lambda _: chat_response(text))


def extractive(page: Page = PAGE) -> PageSummary:
    return ExtractiveSummarizer().summarize(page)


# ---- the request and the answer ------------------------------------------------------------------


def test_one_request_per_page_carries_every_message_and_the_answer_becomes_the_summary() -> None:
    create = answering(GOOD)
    summarizer = ModelSummarizer(chat_client(create), "small-model", options={"temperature": 0})
    assert summarizer.summarize(PAGE) == EXPECTED
    (request,) = create.requests
    assert set(request) == {"model", "messages", "timeout", "temperature"}
    assert (request["model"], request["temperature"], request["timeout"]) == ("small-model", 0, 60.0)
    (message,) = request["messages"]
    assert message["role"] == "user"
    prompt = message["content"]
    assert "[1] user: What's the weather in Paris tomorrow? I fly at noon." in prompt
    assert '[2] assistant: → get_weather({"city": "Paris"})' in prompt
    assert "[3] tool: Tomorrow in Paris: 21°C, light wind." in prompt
    assert "[4] assistant: It will be 21°C with a light wind." in prompt
    assert "exactly 4 strings" in prompt
    assert "{messages}" not in prompt
    assert "{count}" not in prompt
    assert "cut" not in prompt.split("[1]", 1)[1]  # nothing was cut, and the prompt says nothing of it


def test_json_in_a_fenced_block_with_words_around_it_is_read() -> None:
    answer = f"Here it is:\n```json\n{json.dumps(GOOD)}\n```\nHope that helps."
    assert ModelSummarizer(chat_client(answering(answer)), "m").summarize(PAGE) == EXPECTED


def test_lines_are_folded_and_cut_to_max_chars_and_an_empty_entry_takes_the_fallbacks() -> None:
    answer = {"summary": "a  long\nsummary " + "x" * 50, "entries": ["one", "", "   ", "four " * 20]}
    got = ModelSummarizer(chat_client(answering(answer)), "m", max_chars=30).summarize(PAGE)
    assert got.summary == "a long summary " + "x" * 14 + "…"
    fallback = extractive().entry_summaries
    assert got.entry_summaries == ("user: one", fallback[1], fallback[2], "assistant: four four four fou…")
    assert all(len(s) <= 30 for s in (got.summary, *got.entry_summaries[::3]))


def test_a_custom_prompt_gets_its_placeholders_and_may_hold_braces() -> None:
    create = answering(GOOD)
    prompt = 'JSON {"summary", "entries"} for {count} messages, {max_chars} chars:\n{messages}'
    ModelSummarizer(chat_client(create), "m", prompt=prompt, max_chars=50, timeout=None).summarize(PAGE)
    (request,) = create.requests
    assert "timeout" not in request
    text = request["messages"][0]["content"]
    assert text.startswith('JSON {"summary", "entries"} for 4 messages, 50 chars:\n[1] user: What')


def test_the_responses_api_is_asked_with_input_and_its_output_text_read() -> None:
    create = Create(lambda _: SimpleNamespace(output_text=json.dumps(GOOD)))
    client = SimpleNamespace(responses=SimpleNamespace(create=create))
    assert ModelSummarizer(client, "m", api="responses").summarize(PAGE) == EXPECTED
    (request,) = create.requests
    assert set(request) == {"model", "input", "timeout"}
    assert "[4] assistant: It will be 21°C" in request["input"]


def test_a_responses_answer_without_output_text_is_read_from_its_output_items() -> None:
    half = len(json.dumps(GOOD)) // 2
    parts = [{"type": "output_text", "text": json.dumps(GOOD)[:half]}, {"type": "output_text", "text": ""}]
    parts.append({"type": "output_text", "text": json.dumps(GOOD)[half:]})
    output = [{"type": "reasoning", "summary": []}, {"type": "message", "role": "assistant", "content": parts}]
    client = SimpleNamespace(responses=SimpleNamespace(create=Create(lambda _: {"output": output})))
    assert ModelSummarizer(client, "m", api="responses").summarize(PAGE) == EXPECTED


def test_long_texts_are_cut_to_share_the_input_budget_and_the_prompt_says_so() -> None:
    long = "word " * 20_000
    page = Page.of(
        2,
        [
            {"role": "user", "content": "Summarise this log:\n" + long},
            {"role": "assistant", "content": "Short answer."},
            {"role": "tool", "tool_call_id": "x", "content": long},
        ],
    )
    create = answering({"summary": "s", "entries": ["a", "b", "c"]})
    ModelSummarizer(chat_client(create), "m", input_chars=3_000).summarize(page)
    prompt = create.requests[0]["messages"][0]["content"]
    lines = prompt.split("\n")
    assert "[2] assistant: Short answer." in lines  # a short text is whole
    first = next(line for line in lines if line.startswith("[1] user: Summarise this log: word word"))
    third = next(line for line in lines if line.startswith("[3] tool: word word"))
    assert first.endswith("… [cut]")
    assert third.endswith("… [cut]")
    body = len(first) + len(third) + len("[2] assistant: Short answer.")
    assert 2_500 < body < 3_100  # the two long texts share what the short one left of the budget
    assert '2 of these texts were cut to fit; a cut text ends with "… [cut]".' in prompt
    assert len(prompt) < 5_000


def test_a_page_of_thousands_of_messages_still_shows_each_one() -> None:
    messages: list[Message] = [{"role": "user", "content": "start"}]
    messages += [{"role": "assistant", "content": f"step {i} " + "x" * 500} for i in range(2_000)]
    create = answering({"summary": "s", "entries": ["e"] * len(messages)})
    got = ModelSummarizer(chat_client(create), "m", input_chars=10_000).summarize(Page.of(1, messages))
    assert len(got.entry_summaries) == 2_001
    prompt = create.requests[0]["messages"][0]["content"]
    assert "[2001] assistant: step 1999 xxx" in prompt
    assert len(prompt) < 2_001 * (60 + 40)  # each text cut to the least share (60 characters)


def test_an_image_only_request_is_described_to_the_model_and_in_the_fallback() -> None:
    page = Page.of(
        3,
        [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]},
            {"role": "assistant", "content": "A cat on a sofa."},
        ],
    )
    create = answering({"summary": "User shared a photo of a cat on a sofa", "entries": ["sent a photo", "a cat"]})
    assert ModelSummarizer(chat_client(create), "m").summarize(page).summary == "User shared a photo of a cat on a sofa"
    assert "[1] user: sent an image\n[2] assistant: A cat on a sofa." in create.requests[0]["messages"][0]["content"]
    assert extractive(page) == PageSummary("user sent an image", ("user: sent an image", "assistant: A cat on a sofa."))


def test_the_requests_validate_against_the_sdks_request_types() -> None:
    pytest.importorskip("openai")
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

    chat, responses = answering(GOOD), Create(lambda _: {"output_text": json.dumps(GOOD)})
    ModelSummarizer(chat_client(chat), "m", options={"temperature": 0, "max_tokens": 400}).summarize(PAGE)
    ModelSummarizer(SimpleNamespace(responses=SimpleNamespace(create=responses)), "m", api="responses").summarize(PAGE)
    for kind, (request,) in (
        (CompletionCreateParamsNonStreaming, chat.requests),
        (ResponseCreateParamsNonStreaming, responses.requests),
    ):
        assert request.pop("timeout") == 60.0  # the SDKs' per-call option, not a request field
        _check(kind, request)
    with pytest.raises(ValueError, match="extra"):
        _check(CompletionCreateParamsNonStreaming, {**chat.requests[0], "prompt": "x"})


# ---- failures fall back ----------------------------------------------------------------------------


def raising(error: BaseException) -> Create:
    def answer(_: object) -> Any:
        raise error

    return Create(answer)


FAILURES: dict[str, tuple[Create, str]] = {
    "client error": (raising(ConnectionError("connection refused")), "ConnectionError: connection refused"),
    "timeout": (raising(TimeoutError("read timed out")), "TimeoutError: read timed out"),
    "refusal": (Create(lambda _: chat_response(None, refusal="I can't help with that.")), "the model refused"),
    "empty": (answering("   "), "an empty answer"),
    "no choices": (Create(lambda _: SimpleNamespace(choices=[])), "no choices"),
    "not JSON": (answering("The user asked about the weather."), "no JSON object"),
    "broken JSON": (answering('{"summary": "x", "entries": [}'), "not valid JSON"),
    "deep JSON": (answering("{" + '"a":[' * 10_000 + "]" * 10_000 + "}"), "not valid JSON"),
    "JSON list": (answering('["a", "b"]'), "no JSON object"),
    "no summary": (answering({"entries": ["a", "b", "c", "d"]}), "no summary"),
    "blank summary": (answering({"summary": " ", "entries": ["a", "b", "c", "d"]}), "no summary"),
    "too few": (answering({"summary": "s", "entries": ["a", "b", "c"]}), "3 entries in the answer for 4 messages"),
    "not strings": (answering({"summary": "s", "entries": ["a", 2, "c", "d"]}), "4 entries in the answer"),
    "no entries": (answering({"summary": "s"}), "no entries list"),
    "huge": (answering(json.dumps(GOOD) + " " * 100_000), "an answer of 100"),
    "not a response": (Create(lambda _: 42), "no choices"),
}


@pytest.mark.parametrize("case", FAILURES, ids=str)
def test_any_failure_gives_the_fallback_summary_and_a_warning(case: str, caplog: pytest.LogCaptureFixture) -> None:
    create, reason = FAILURES[case]
    with caplog.at_level(logging.WARNING, logger="memci"):
        got = ModelSummarizer(chat_client(create), "m").summarize(PAGE)
    assert got == extractive()
    (record,) = [r for r in caplog.records if r.name == "memci"]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("page 7: the model's summary failed (")
    assert reason in record.getMessage()


def test_the_fallback_is_the_one_given() -> None:
    summarizer = ModelSummarizer(chat_client(raising(OSError("down"))), "m", fallback=lambda text: text[:5])
    assert summarizer.summarize(PAGE) == PageSummary("user:", ("user:", "assis", "tool:", "assis"))


def test_interruptions_are_not_failures() -> None:
    summarizer = ModelSummarizer(chat_client(raising(KeyboardInterrupt())), "m")
    with pytest.raises(KeyboardInterrupt):
        summarizer.summarize(PAGE)


def test_an_async_client_given_to_summarize_falls_back_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    create = AsyncCreate(lambda _: chat_response(json.dumps(GOOD)))
    with caplog.at_level(logging.WARNING, logger="memci"):
        got = ModelSummarizer(chat_client(create), "m").summarize(PAGE)
    assert got == extractive()
    assert "the client is async" in caplog.text  # and its coroutine was closed: no "never awaited" warning


# ---- async -------------------------------------------------------------------------------------------


def test_asummarize_awaits_an_async_client() -> None:
    create = AsyncCreate(lambda _: chat_response(json.dumps(GOOD)))
    assert asyncio.run(ModelSummarizer(chat_client(create), "m").asummarize(PAGE)) == EXPECTED
    assert len(create.requests) == 1


def test_asummarize_runs_a_sync_client_in_a_worker_thread() -> None:
    create = answering(GOOD)

    async def run() -> tuple[PageSummary, int]:
        return await ModelSummarizer(chat_client(create), "m").asummarize(PAGE), threading.get_ident()

    got, loop_thread = asyncio.run(run())
    assert got == EXPECTED
    assert create.threads != [loop_thread]
    assert len(create.threads) == 1


def test_asummarize_falls_back_on_an_error_an_invalid_answer_or_its_timeout(caplog: pytest.LogCaptureFixture) -> None:
    async def never(_: object) -> Any:
        await asyncio.Event().wait()

    cases = [
        (AsyncCreate(lambda _: (_ for _ in ()).throw(ConnectionError("reset"))), "ConnectionError: reset"),
        (AsyncCreate(lambda _: chat_response("no json here")), "no JSON object"),
        (AsyncCreate(never), "TimeoutError"),
    ]
    for create, reason in cases:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="memci"):
            got = asyncio.run(ModelSummarizer(chat_client(create), "m", timeout=0.05).asummarize(PAGE))
        assert got == extractive()
        assert reason in caplog.text


def test_asummarize_lets_a_cancellation_through() -> None:
    async def run() -> None:
        entered = asyncio.Event()

        async def hang(_: object) -> Any:
            entered.set()
            await asyncio.Event().wait()

        task = asyncio.ensure_future(ModelSummarizer(chat_client(AsyncCreate(hang)), "m").asummarize(PAGE))
        await entered.wait()
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run())


# ---- construction ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"api": "completions"}, "api must be 'chat' or 'responses'"),
        ({"client": object()}, "the client has no chat.completions.create"),
        ({"api": "responses"}, "the client has no responses.create"),
        ({"model": ""}, "model must be a non-empty str"),
        ({"prompt": "Summarise: {page}"}, "prompt must be a str holding {messages}"),
        ({"max_chars": 0}, "max_chars must be an int >= 1"),
        ({"input_chars": True}, "input_chars must be an int >= 1"),
        ({"timeout": -1}, "timeout must be a number > 0 or None"),
        ({"fallback": 3}, "summarizer must be a Summarizer"),
    ],
)
def test_bad_settings_are_refused_when_made(arguments: dict[str, Any], message: str) -> None:
    settings: dict[str, Any] = {"client": chat_client(answering(GOOD)), "model": "m", **arguments}
    client, model = settings.pop("client"), settings.pop("model")
    with pytest.raises(SummaryError, match=message.replace("(", r"\(").replace("{", r"\{")):
        ModelSummarizer(client, model, **settings)


# ---- the context system --------------------------------------------------------------------------------


def turn(ctx: memci.ContextSystem, question: str) -> None:
    ctx.add({"role": "user", "content": question})
    ctx.add({"role": "assistant", "content": f"Answer to: {question}"})
    ctx.end_round()


def test_the_context_system_archives_pages_with_the_models_summaries() -> None:
    def answer(request: dict[str, Any]) -> Any:
        question = request["messages"][0]["content"].split("[1] user: ")[1].split("\n")[0]
        return chat_response(json.dumps({"summary": f"about {question}", "entries": ["asks", "answers"]}))

    create = Create(answer)
    ctx = memci.ContextSystem("Be brief.", active_pages=1, summarizer=ModelSummarizer(chat_client(create), "m"))
    for question in ("tides", "moons", "stars"):
        turn(ctx, question)
    assert len(create.requests) == 2  # one per archived page
    assert [(e.index, e.summary, e.entry_summaries) for e in ctx.contents] == [
        (1, "about tides", ("user: asks", "assistant: answers")),
        (2, "about moons", ("user: asks", "assistant: answers")),
    ]
    assert "[page 2] about moons" in ctx.contents_text()


def test_a_failing_model_never_stops_the_context_system(caplog: pytest.LogCaptureFixture) -> None:
    summarizer = ModelSummarizer(chat_client(raising(RuntimeError("503 from the provider"))), "m")
    ctx = memci.ContextSystem("Be brief.", active_pages=1, summarizer=summarizer)
    with caplog.at_level(logging.WARNING, logger="memci"):
        for question in ("What are tides?", "What are moons?"):
            turn(ctx, question)
    (entry,) = ctx.contents
    assert (entry.summary, entry.entry_summaries) == (
        "What are tides?",
        ("user: What are tides?", "assistant: Answer to: What are tides?"),
    )
    assert "page 1: the model's summary failed (RuntimeError: 503 from the provider)" in caplog.text


# ---- the real SDK, offline ---------------------------------------------------------------------------------


class Server:
    """A loopback HTTP server answering the OpenAI API's chat completions and responses endpoints
    with canned bodies (``status`` and ``text``), recording each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.status = 200
        self.text = json.dumps(GOOD)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, body))
                payload = server.body(self.path) if server.status == 200 else {"error": {"message": "overloaded"}}
                data = json.dumps(payload).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def body(self, path: str) -> dict[str, Any]:
        if path.endswith("/chat/completions"):
            message = {"role": "assistant", "content": self.text}
            choice = {"index": 0, "finish_reason": "stop", "message": message, "logprobs": None}
            return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
        part = {"type": "output_text", "text": self.text, "annotations": []}
        item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [part]}
        return {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "status": "completed",
            "output": [item],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
        }

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join()


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.close()


def test_the_openai_sdk_chat_path_end_to_end(server: Server) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
    assert ModelSummarizer(client, "small-model").summarize(PAGE) == EXPECTED
    ((path, body),) = server.requests
    assert path == "/v1/chat/completions"
    assert body["model"] == "small-model"
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "[3] tool: Tomorrow in Paris: 21°C, light wind." in body["messages"][0]["content"]


def test_the_openai_sdk_responses_path_end_to_end(server: Server) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
    assert ModelSummarizer(client, "m", api="responses").summarize(PAGE) == EXPECTED
    ((path, body),) = server.requests
    assert path == "/v1/responses"
    assert "[1] user: What's the weather in Paris tomorrow?" in body["input"]


def test_the_async_openai_sdk_end_to_end(server: Server) -> None:
    openai = pytest.importorskip("openai")

    async def run() -> tuple[PageSummary, PageSummary]:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0) as client:
            chat = await ModelSummarizer(client, "m").asummarize(PAGE)
            responses = await ModelSummarizer(client, "m", api="responses").asummarize(PAGE)
        return chat, responses

    assert asyncio.run(run()) == (EXPECTED, EXPECTED)
    assert [path for path, _ in server.requests] == ["/v1/chat/completions", "/v1/responses"]


def test_the_openai_sdks_errors_fall_back(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    openai = pytest.importorskip("openai")
    server.status = 503
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
    with caplog.at_level(logging.WARNING, logger="memci"):
        assert ModelSummarizer(client, "m").summarize(PAGE) == extractive()
    assert "InternalServerError" in caplog.text
    server.status, server.text = 200, "Sorry, I cannot summarise that."
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memci"):
        assert ModelSummarizer(client, "m").summarize(PAGE) == extractive()
    assert "no JSON object" in caplog.text
    assert len(server.requests) == 2
