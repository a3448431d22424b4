"""Async summarizers, for :class:`~memci.context.async_system.AsyncContextSystem`.

An **async summarizer** is either

- any object with ``async def asummarize(page) -> PageSummary`` (:class:`AsyncSummarizer`; when it
  also has a sync ``summarize``, the async system awaits ``asummarize``), or
- a plain ``async def`` callable ``str -> str`` (a coroutine function, or an object whose
  ``__call__`` is one), called as :class:`~memci.context.summary.CallableSummarizer` calls a sync
  one: once per entry with ``"{role}: {text}"``, then once for the page.

The async system awaits them on its event loop. Everything else it accepts is what the sync system
accepts (a :class:`~memci.context.summary.Summarizer` or a sync ``str -> str`` callable), and that
runs in a worker thread, off the loop. The sync :class:`~memci.ContextSystem` refuses an async
summarizer with a :class:`~memci.SummaryError` pointing here (it has no loop to await it on).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar, runtime_checkable

from memci.context.page import Page
from memci.context.summary import CallableSummarizer, PageSummary, Summarizer, is_coroutine_callable
from memci.errors import SummaryError

__all__ = ["AsyncSummarizer", "AsyncSummarizerFn", "is_async_summarizer", "on_loop"]

T = TypeVar("T")

#: A plain async summarizer: the text of an entry (or of the page) in, its summary out.
AsyncSummarizerFn = Callable[[str], Awaitable[str]]
#: Runs a coroutine on the event loop from a worker thread and waits for its result.
LoopRunner = Callable[[Coroutine[Any, Any, T]], T]


@runtime_checkable
class AsyncSummarizer(Protocol):
    """Anything with ``async def asummarize(page) -> PageSummary``."""

    async def asummarize(self, page: Page) -> PageSummary:
        """Summarise ``page``: one line for the page, one per entry."""
        ...


def is_async_summarizer(value: object) -> bool:
    """Whether ``value`` is an async summarizer (an ``asummarize`` method, or an ``async def`` callable)."""
    return callable(getattr(value, "asummarize", None)) or is_coroutine_callable(value)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _awaitable(result: object, what: str) -> Awaitable[Any]:
    if not inspect.isawaitable(result):
        raise SummaryError(f"{what} returned {type(result).__name__}, not an awaitable (is it async def?)")
    return result


class _OnLoop:
    """A sync :class:`~memci.context.summary.Summarizer` (called in a worker thread) that awaits an
    :class:`AsyncSummarizer` on the event loop."""

    __slots__ = ("run", "summarizer")

    def __init__(self, summarizer: AsyncSummarizer, run: LoopRunner[Any]) -> None:
        self.summarizer = summarizer
        self.run = run

    def summarize(self, page: Page) -> PageSummary:
        what = f"{type(self.summarizer).__name__}.asummarize"
        summary: PageSummary = self.run(_awaited(_awaitable(self.summarizer.asummarize(page), what)))
        return summary

    def __repr__(self) -> str:
        return f"<{self.summarizer!r}, awaited>"


def on_loop(
    value: AsyncSummarizer | AsyncSummarizerFn | Summarizer | Callable[[str], str] | None, run: LoopRunner[Any]
) -> Summarizer | Callable[[str], str] | None:
    """What the sync system running in a worker thread is given for ``value``: an async summarizer
    becomes a sync one whose calls ``run`` awaits on the loop; anything else is passed on as is."""
    if callable(getattr(value, "asummarize", None)):
        return _OnLoop(value, run)  # type: ignore[arg-type]
    if is_coroutine_callable(value):
        fn: AsyncSummarizerFn = value  # type: ignore[assignment]
        what = f"summarizer {getattr(fn, '__name__', type(fn).__name__)}"
        return CallableSummarizer(lambda text: run(_awaited(_awaitable(fn(text), what))))
    return value  # type: ignore[return-value]
