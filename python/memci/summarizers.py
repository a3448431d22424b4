"""Page summaries written by a model: :class:`ModelSummarizer`.

>>> summarizer = ModelSummarizer(openai.OpenAI(), "gpt-4o-mini")        # doctest: +SKIP
>>> ctx = memci.ContextSystem("You are a helpful agent.", summarizer=summarizer)  # doctest: +SKIP

One request per archived page, to any OpenAI-compatible client (the ``openai`` SDK's clients, or
anything shaped like them: ``client.chat.completions.create`` or ``client.responses.create``). The
model answers with JSON, a line for the page and one per message; whatever goes wrong (the client
raises, times out, refuses, or answers with something that is not that JSON) the page gets the
``fallback`` summarizer's summary (the extractive one by default) and a WARNING is logged on the
``memci`` logger: a summarizer that fails never stops the context system. ``summarize`` calls a
sync client; ``asummarize`` awaits an async one (a sync client then runs in a worker thread, so
the event loop never blocks). Nothing here imports a model SDK.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from memci.context.page import Page
from memci.context.summary import (
    ExtractiveSummarizer,
    PageSummary,
    Summarizer,
    as_summarizer,
    checked,
    cut,
    entry_lines,
)
from memci.errors import SummaryError, repr_of

__all__ = ["DEFAULT_PROMPT", "ModelSummarizer"]

logger = logging.getLogger("memci")

Api = Literal["chat", "responses"]

#: The prompt :class:`ModelSummarizer` sends by default. ``{messages}`` becomes the page's messages,
#: numbered, one per line; ``{count}`` their number; ``{max_chars}`` the longest line a summary may
#: have. Placeholders are replaced literally (no ``str.format``), so a prompt may hold braces.
DEFAULT_PROMPT = """\
You write the table of contents of a conversation between a user and an AI assistant. The \
assistant reads it later to decide which archived page to read again in full, so say what each \
page is about: keep names, numbers, files, tools and decisions; write in the conversation's \
language.

Summarise the page below: {count} messages, numbered. Answer with JSON only, no other text:
{"summary": "<one line of at most {max_chars} characters: what the user wanted and what came \
of it>", "entries": [<exactly {count} strings, one per message in order, each one line of at most \
{max_chars} characters saying what that message says or does>]}

{messages}"""

#: The placeholders a prompt may hold; ``{messages}`` it must.
_PLACEHOLDERS = ("{messages}", "{count}", "{max_chars}")
#: The least a message's text is cut to, however long the page: enough to say what it is about.
_MIN_TEXT = 60
#: An answer longer than this is not read (a summary is a few lines).
_MAX_ANSWER = 100_000
_CUT_MARK = " [cut]"


class _InvalidAnswerError(Exception):
    """The model's answer is not a page summary; the message says why."""


class _AsyncClientError(Exception):
    """``summarize`` was given an async client."""


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a dict, else the attribute (SDK response objects); None when absent."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SummaryError(f"ModelSummarizer: {name} must be an int >= 1, got {repr_of(value)}")
    return value


def _shares(lengths: list[int], budget: int) -> list[int]:
    """How many characters of each text the prompt shows: all of those that fit, and the budget
    left shared fairly among the longer ones (shortest first), at least ``_MIN_TEXT`` each.
    O(n log n)."""
    shares = list(lengths)
    left, remaining = budget, len(lengths)
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        share = max(_MIN_TEXT, left // remaining)
        shares[i] = min(lengths[i], share)
        left -= shares[i]
        remaining -= 1
    return shares


class ModelSummarizer:
    """A :class:`~memci.Summarizer` whose summaries a model writes: one request per page.

    ``client``: an OpenAI-compatible client (``openai.OpenAI()``, ``openai.AsyncOpenAI()``, any
    compatible server through ``base_url``, or an object of the same shape); ``model``: the model
    to ask. ``api``: ``"chat"`` calls ``client.chat.completions.create(model=..., messages=[one
    user message])``, ``"responses"`` calls ``client.responses.create(model=..., input=...)``;
    ``options`` are passed along too (``temperature``, ``max_tokens``, ...), and ``timeout``
    (seconds) when not None. ``prompt``: the prompt, with ``{messages}`` where the page goes (see
    :data:`DEFAULT_PROMPT`). ``max_chars``: the longest a summary line may be (longer ones are cut
    on character boundaries). ``input_chars``: how many characters of the page's texts the prompt
    carries at most; longer texts are cut (at least 60 characters each) and the prompt says so.
    ``fallback``: the summarizer used when the model fails (default
    :class:`~memci.ExtractiveSummarizer`).

    The model answers ``{"summary": ..., "entries": [one per message]}``; an entry summary is given
    its role (``"user: ..."``) unless it starts with it, like the extractive ones. An empty entry
    takes the fallback's summary of that entry. Anything else (an exception from the client, a
    timeout, a refusal, no JSON object, a missing or empty ``summary``, a wrong number of entries)
    logs a WARNING on the ``memci`` logger naming the page and the reason, and the page gets the
    fallback's summary: nothing is raised into the context system but what the fallback raises.
    """

    __slots__ = ("api", "client", "fallback", "input_chars", "max_chars", "model", "options", "prompt", "timeout")

    def __init__(
        self,
        client: Any,
        model: str,
        *,
        prompt: str = DEFAULT_PROMPT,
        max_chars: int = 100,
        input_chars: int = 12_000,
        api: Api = "chat",
        timeout: float | None = 60.0,
        options: Mapping[str, Any] | None = None,
        fallback: Summarizer | Callable[[str], str] | None = None,
    ) -> None:
        if api not in ("chat", "responses"):
            raise SummaryError(f"ModelSummarizer: api must be 'chat' or 'responses', got {repr_of(api)}")
        if not callable(_create_of(client, api)):
            where = "chat.completions.create" if api == "chat" else "responses.create"
            raise SummaryError(f"ModelSummarizer: the client has no {where} (api={api!r})")
        if not isinstance(model, str) or not model:
            raise SummaryError(f"ModelSummarizer: model must be a non-empty str, got {repr_of(model)}")
        if not isinstance(prompt, str) or "{messages}" not in prompt:
            raise SummaryError("ModelSummarizer: prompt must be a str holding {messages}, where the page goes")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise SummaryError(f"ModelSummarizer: timeout must be a number > 0 or None, got {repr_of(timeout)}")
        self.client = client
        self.model = model
        self.prompt = prompt
        self.max_chars = _positive("max_chars", max_chars)
        self.input_chars = _positive("input_chars", input_chars)
        self.api: Api = api
        self.timeout = timeout
        self.options = dict(options or {})
        self.fallback = ExtractiveSummarizer() if fallback is None else as_summarizer(fallback)

    # ---- the request ----------------------------------------------------------------------------

    def render(self, page: Page) -> str:
        """The prompt for ``page``: its messages numbered, one per line (``[1] user: ...``), each
        as the extractive summarizer reads it (what it says, then ``→ tool(arguments)``; what a
        message without text holds), newlines folded, cut to share ``input_chars``. O(page text)."""
        roles = [e.role for e in page.entries]
        texts = [" ".join(line.split()) for line in entry_lines(page.messages())]
        shares = _shares([len(t) for t in texts], self.input_chars)
        lines: list[str] = []
        cuts = 0
        for i, (role, text, share) in enumerate(zip(roles, texts, shares, strict=True), 1):
            shown = text if share >= len(text) else cut(text, share) + _CUT_MARK
            cuts += shown is not text
            lines.append(f"[{i}] {role}: {shown}")
        if cuts:
            lines.append(f'({cuts} of these texts were cut to fit; a cut text ends with "…{_CUT_MARK}".)')
        values = {"{messages}": "\n".join(lines), "{count}": str(len(roles)), "{max_chars}": str(self.max_chars)}
        out = self.prompt
        for placeholder in _PLACEHOLDERS:
            out = out.replace(placeholder, values[placeholder])
        return out

    def _request(self, page: Page) -> dict[str, Any]:
        text = self.render(page)
        request: dict[str, Any] = {**self.options, "model": self.model}
        if self.api == "chat":
            request["messages"] = [{"role": "user", "content": text}]
        else:
            request["input"] = text
        if self.timeout is not None:
            request["timeout"] = self.timeout
        return request

    # ---- the answer -----------------------------------------------------------------------------

    def _answer_text(self, response: Any) -> str:
        if self.api == "chat":
            choices = _field(response, "choices")
            if not choices:
                raise _InvalidAnswerError("no choices in the answer")
            message = _field(choices[0], "message")
            content = _field(message, "content")
            refusal = _field(message, "refusal")
            if isinstance(refusal, str) and refusal and not content:
                raise _InvalidAnswerError(f"the model refused: {cut(refusal, 80)!r}")
        else:
            content = _field(response, "output_text")
            if not isinstance(content, str):
                parts = [
                    _field(part, "text")
                    for item in _field(response, "output") or ()
                    if _field(item, "type") == "message"
                    for part in _field(item, "content") or ()
                    if _field(part, "type") == "output_text"
                ]
                content = "".join(p for p in parts if isinstance(p, str))
        if not isinstance(content, str) or not content.strip():
            raise _InvalidAnswerError("an empty answer")
        return content

    def _read(self, response: Any, page: Page) -> PageSummary:
        """The page summary in the model's answer, or :class:`_InvalidAnswerError`."""
        text = self._answer_text(response)
        if len(text) > _MAX_ANSWER:
            raise _InvalidAnswerError(f"an answer of {len(text)} characters")
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            raise _InvalidAnswerError("no JSON object in the answer")
        try:
            data = json.loads(text[start : end + 1])
        except (ValueError, RecursionError) as e:
            raise _InvalidAnswerError(f"the answer is not valid JSON ({type(e).__name__})") from None
        summary = data.get("summary") if isinstance(data, dict) else None
        entries = data.get("entries") if isinstance(data, dict) else None
        if not isinstance(summary, str) or not summary.strip():
            raise _InvalidAnswerError("no summary in the answer")
        count = len(page.entries)
        if not isinstance(entries, list) or len(entries) != count or not all(isinstance(e, str) for e in entries):
            got = f"{len(entries)} entries" if isinstance(entries, list) else "no entries list"
            raise _InvalidAnswerError(f"{got} in the answer for {count} messages (one string each)")
        fallback: tuple[str, ...] | None = None
        lines: list[str] = []
        for entry, written in zip(page.entries, entries, strict=True):
            said = " ".join(written.split())
            if not said:
                if fallback is None:
                    fallback = self._fallback(page).entry_summaries
                lines.append(fallback[len(lines)])
                continue
            tagged = said if said.lower().startswith(f"{entry.role}:") else f"{entry.role}: {said}"
            lines.append(cut(tagged, self.max_chars))
        return PageSummary(cut(" ".join(summary.split()), self.max_chars), tuple(lines))

    def _fallback(self, page: Page) -> PageSummary:
        return checked(self.fallback.summarize(page), page)

    def _failed(self, page: Page, error: Exception) -> PageSummary:
        if isinstance(error, _InvalidAnswerError):
            reason = str(error)
        elif isinstance(error, _AsyncClientError):
            reason = "the client is async: summarize needs a sync client (asummarize takes either)"
        else:
            reason = f"{type(error).__name__}: {cut(str(error), 200)}"
        logger.warning("page %d: the model's summary failed (%s); the fallback summarizer wrote it", page.index, reason)
        return self._fallback(page)

    # ---- the calls ------------------------------------------------------------------------------

    def summarize(self, page: Page) -> PageSummary:
        """Ask the model (a sync client) for ``page``'s summary: one request. Falls back, logging
        a WARNING, on any failure (an async client included)."""
        try:
            response = _create_of(self.client, self.api)(**self._request(page))
            if inspect.isawaitable(response):
                if inspect.iscoroutine(response):
                    response.close()  # never awaited: close it, so it warns nothing
                raise _AsyncClientError
            return self._read(response, page)
        except Exception as e:  # any failure of the client or the answer: the fallback writes it
            return self._failed(page, e)

    async def asummarize(self, page: Page) -> PageSummary:
        """Ask the model for ``page``'s summary without blocking the event loop: an async client is
        awaited, a sync one called in a worker thread; ``timeout`` bounds the whole call. Falls
        back, logging a WARNING, on any failure (cancellation is not one: it propagates)."""
        try:
            return self._read(await asyncio.wait_for(self._acall(page), self.timeout), page)
        except Exception as e:
            return self._failed(page, e)

    async def _acall(self, page: Page) -> Any:
        create = _create_of(self.client, self.api)
        request = self._request(page)
        # The SDK wraps its async create in a plain function: calling it in a thread starts nothing
        # but returns the coroutine, which is then awaited here, on the loop.
        if inspect.iscoroutinefunction(create):
            response = create(**request)
        else:
            response = await asyncio.to_thread(create, **request)
        return await response if inspect.isawaitable(response) else response

    def __repr__(self) -> str:
        return f"ModelSummarizer(model={self.model!r}, api={self.api!r}, fallback={self.fallback!r})"


def _create_of(client: Any, api: Api) -> Any:
    """``client.chat.completions.create`` or ``client.responses.create``; None when absent."""
    if api == "chat":
        return getattr(getattr(getattr(client, "chat", None), "completions", None), "create", None)
    return getattr(getattr(client, "responses", None), "create", None)
