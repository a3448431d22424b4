"""The OpenAI Agents SDK's ``Session``, kept by memci: ``MemciSession``.

``MemciSession(session_id, db_path=":memory:", *, storage=None, ...)`` has the constructor
``agents.SQLiteSession`` has and implements the SDK's ``Session`` protocol (async ``get_items``,
``add_items``, ``pop_item``, ``clear_session``), so it drops in where that session was:
``Runner.run(agent, text, session=MemciSession("user-42", "conversations.db"))``. Many sessions
share one SQLite file (one namespace each) or one Redis (a prefix each).

Two modes:

- **full history** (the default): every item, kept exactly as added, in a
  :class:`~memci.MessageArray`; ``max_tokens=`` sends only the newest items that fit that budget,
  never a tool call without its output or an output without its call;
- **paged** (``paged=True``): a :class:`~memci.AsyncContextSystem` with Responses items; old turns
  leave the window for storage, ``get_items()`` returns the window with its contents page, and
  :meth:`MemciSession.tools` gives the agent ``recall_page``, ``list_pages`` and ``search_pages`` as function tools.

Needs ``pip install 'memci[openai-agents]'``. Semantics and decisions:
``docs/integrations/openai-agents.md``.
"""

from __future__ import annotations

import asyncio
import operator
import os
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar, cast

from memci._optional import needs_extra

with needs_extra("openai-agents", __name__):
    from agents.items import TResponseInputItem
    from agents.memory.session import _CompactionSnapshot
    from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit
    from agents.tool import FunctionTool, Tool
    from agents.tool_context import ToolContext

from memci.array import MessageArray
from memci.context.async_system import AnySummarizer, AsyncContextSystem
from memci.context.contents import ArchivePolicy
from memci.context.recall import TOOL_NAMES, tool_definitions
from memci.errors import ConflictError, InvalidMessageError, InvalidOperationError, SessionClosedError, StateError
from memci.formats import dumped
from memci.integrations.any_loop_lock import AnyLoopLock
from memci.integrations.message_log import MessageLog
from memci.integrations.trimming import LOW_WATER, HistoryTrimmer, check_low_water
from memci.storage.async_protocol import AsyncStorage, is_async_store
from memci.storage.bridge import LoopRunner, in_worker, sync_view
from memci.storage.log import CONFLICTS
from memci.storage.memory import MemoryStorage
from memci.storage.protocol import Storage
from memci.storage.sqlite import SqliteStorage
from memci.storage.threaded import ThreadedStorage
from memci.tokens import DEFAULT_ENCODING

__all__ = ["MemciSession"]

T = TypeVar("T")

HISTORY_KIND = "memci.integrations.openai_agents.history"
"""The ``kind`` of a full-history session's saved state (a paged session's is the context system's)."""


_SESSION_IO = ("add_items", "get_items", "pop_item", "clear_session")
"""The session's public reads and writes: a subclass overriding none of them compacts (see ``_compacts``)."""

OPAQUE_TYPE = "memci.opaque"
"""The ``type`` of the envelope an opaque item is stored in (see :func:`_stored`)."""


def _stored(item: Any) -> Any:
    """The form an item is stored in: an SDK object as its ``model_dump``; an item with neither a
    ``role`` nor a ``type`` (another wrapper's own record: ``EncryptedSession``'s
    ``{"__enc__": 1, ...}``) kept verbatim inside ``{"type": "memci.opaque", "item": ...}``, an item
    type the array keeps as it is. An item already of that type is wrapped too, so reading is exact."""
    item = dumped(item)
    if isinstance(item, dict) and (("role" not in item and "type" not in item) or item.get("type") == OPAQUE_TYPE):
        return {"type": OPAQUE_TYPE, "item": item}
    return item


def _opaque_where_unreadable(batch: list[Any]) -> list[Any]:
    """``batch`` once the array refused it: each item it refuses on its own (a message without its
    role, a ``function_call`` without its ``call_id``: JSON all the same, which the SDK's sessions
    store) goes into an opaque envelope too. A value that is not JSON still fails, in its envelope,
    with its path. O(len(batch))."""
    readable = []
    for item in batch:
        try:
            MessageArray([item])
        except InvalidMessageError:
            readable.append({"type": OPAQUE_TYPE, "item": item})
        else:
            readable.append(item)
    return readable


async def _written(write: Callable[[list[Any]], Awaitable[T]], batch: list[Any]) -> T:
    """``write(batch)``; if the array refuses an item (nothing was written then), ``write`` again
    with the items it cannot read kept opaque (:func:`_opaque_where_unreadable`)."""
    try:
        return await write(batch)
    except InvalidMessageError:
        return await write(_opaque_where_unreadable(batch))


def _given(item: Any) -> Any:
    """An item as it was added: the inverse of :func:`_stored`."""
    if isinstance(item, dict) and item.get("type") == OPAQUE_TYPE:
        return item["item"]
    return item


async def _settled(work: Awaitable[T]) -> T:
    """Await a write through to its outcome even when the caller is cancelled meanwhile, then
    raise the ``CancelledError``: a cancelled write has landed or failed before the caller hears of
    the cancellation, never after (as the SDK's own sessions do)."""
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError as error:
            cancelled = cancelled or error
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller hears of
        raise cancelled
    return task.result()


class _Done:
    """An awaitable with nothing left to do: what :meth:`MemciSession.close` returns (a bare
    coroutine would warn when a sync caller never awaits it; this does not)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator that ends at once: awaiting it returns None


_CLOSED = _Done()


def _limited(items: list[Any], limit: int | None) -> list[Any]:
    """The SDK's ``limit``, as ``SQLiteSession`` reads it: None all, N > 0 the latest N in order,
    0 none, a negative limit all (SQLite's ``LIMIT -1``)."""
    if limit is None or limit < 0:
        return items
    return items[max(0, len(items) - limit) :] if limit else []


class _History:
    """The full history of one session: a :class:`~memci.integrations.message_log.MessageLog` that
    keeps runs (so ``pop_item`` can take an item back) on the session's store, run in a worker
    thread (an async store is awaited back on the loop), and its live items as a
    :class:`~memci.MessageArray`, read whole again only when the log was reloaded (another session
    object on the same id, or another process, saved)."""

    def __init__(self, storage: Storage | AsyncStorage) -> None:
        self._loop = LoopRunner("MemciSession")
        self.log = MessageLog(
            sync_view(storage, self._loop),
            HISTORY_KIND,
            runs=True,
            owner="MemciSession",
            hint=" (was this session_id used with paged=True?)",
            conflicts=None,  # MemciSession redoes a whole call after a conflict, under the same policy
        )
        self.items = MessageArray()
        self._generation = 0  # the log's generation the items were read at

    def _rebuilt(self) -> bool:
        """Read the items whole again if the log was reloaded since; whether they were."""
        if self.log.generation == self._generation:
            return False
        self.items, self._generation = MessageArray(self.log.current()), self.log.generation
        return True

    async def refresh(self) -> None:
        """Reload if another writer saved since (one state read)."""

        def work() -> None:
            self.log.refresh()
            self._rebuilt()

        await in_worker(self._loop, work)

    async def add(self, items: list[dict[str, Any]]) -> None:
        self.items.append(items)  # checks every item first (all or nothing)

        def work() -> None:
            self.log.append(items)
            self._rebuilt()

        try:
            await in_worker(self._loop, work)
        except BaseException:
            self._generation = -1  # read whole again at the next call
            raise

    async def pop(self) -> dict[str, Any] | None:
        def work() -> dict[str, Any] | None:
            item = self.log.pop()
            if not self._rebuilt() and item is not None:
                self.items.truncate(remove_last=1)
            return item

        return await in_worker(self._loop, work)

    async def clear(self) -> None:
        def work() -> None:
            self.log.clear()
            if not self._rebuilt():
                self.items = MessageArray()

        await in_worker(self._loop, work)

    async def rewrite(self, items: list[dict[str, Any]]) -> None:
        """The whole history becomes ``items``: one commit that writes them as one page and
        forgets every older page (a compaction's replacement). O(len(items))."""
        array = MessageArray(items)  # checks every item first (all or nothing)

        def work() -> None:
            self.log.replace(items)
            if not self._rebuilt():
                self.items = array

        try:
            await in_worker(self._loop, work)
        except BaseException:
            self._generation = -1  # read whole again at the next call
            raise


class _Paged:
    """A paged session: an :class:`~memci.AsyncContextSystem` on the session's store, saved after
    every change, reloaded when another writer saved since."""

    def __init__(
        self,
        store: AsyncStorage,
        system_store: Storage | AsyncStorage,
        options: dict[str, Any],
        summarizer: AnySummarizer | None,
    ) -> None:
        self.store = store
        self.system_store = system_store  # as given: the context system calls a sync store in its own thread
        self.options = options
        self.summarizer = summarizer
        self.ctx: AsyncContextSystem | None = None
        self.revision = -1

    async def refresh(self) -> AsyncContextSystem:
        state = await self.store.load_state()
        revision = 0 if state is None else state.get("revision", 0)
        if self.ctx is not None and revision == self.revision:
            return self.ctx
        if state is not None and state.get("kind") == HISTORY_KIND:
            raise StateError("MemciSession: the store holds a full-history session's state (paged=False)")
        options = dict(self.options)
        prompt = options.pop("system_prompt", None)
        self.ctx = await AsyncContextSystem.open(self.system_store, prompt, summarizer=self.summarizer, **options)
        self.revision = revision
        return self.ctx

    async def saved(self, ctx: AsyncContextSystem) -> None:
        try:
            await ctx.save()
        except BaseException:
            self.ctx = None  # reread at the next call
            raise
        self.revision += 1


class MemciSession:
    """An Agents SDK session kept by memci; drops in where ``SQLiteSession`` was.

    Args:
        session_id: the conversation's id (a SQLite namespace in ``db_path``).
        db_path: a SQLite file many sessions share (``":memory:"``, the default: this object's own
            memory, lost with it, as ``SQLiteSession``'s).
        storage: any memci store, sync or async (``RedisStorage(url, prefix=...)``,
            ``AsyncSqliteStorage``, ``DirectoryStorage``, your own), holding this session alone;
            replaces ``db_path``.
        session_settings: the SDK's ``SessionSettings`` (its ``limit`` is the default of
            :meth:`get_items`).
        max_tokens: full history only: :meth:`get_items` returns the newest items whose tokens fit
            this budget, never splitting a tool call from its output (None: everything).
        low_water: with ``max_tokens``: the items returned grow append-only (a provider's prompt
            cache keeps hitting) until they pass the budget, then are cut back to this share of it
            in one step (:data:`~memci.integrations.trimming.LOW_WATER`, 0.6; None: the newest
            items that fit at every call).
        encoding: the tokenizer of ``max_tokens`` and of the paged window (a tiktoken encoding or a
            model name).
        paged: keep a paged context window instead of the full history.
        system_prompt, active_pages, max_context_tokens, policy, summarizer: paged mode only: the
            :class:`~memci.AsyncContextSystem`'s settings (the prompt is usually the agent's
            ``instructions``, which the SDK sends itself, so None by default).
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        db_path: str | os.PathLike[str] = ":memory:",
        *,
        storage: Storage | AsyncStorage | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        low_water: float | None = LOW_WATER,
        encoding: str = DEFAULT_ENCODING,
        paged: bool = False,
        system_prompt: str | None = None,
        active_pages: int | None = None,
        max_context_tokens: int | None = None,
        policy: ArchivePolicy | None = None,
        summarizer: AnySummarizer | None = None,
    ) -> None:
        if not isinstance(session_id, str):
            raise InvalidOperationError(f"MemciSession: session_id must be a str, got {type(session_id).__name__}")
        bad_budget = isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0
        if max_tokens is not None and bad_budget:
            raise InvalidOperationError(f"MemciSession: max_tokens must be an int >= 0 or None, got {max_tokens!r}")
        if paged and max_tokens is not None:
            raise InvalidOperationError(
                "MemciSession: max_tokens is the full history's budget; a paged session takes max_context_tokens"
            )
        self.session_id = session_id
        self.session_settings = coerce_session_settings(session_settings or SessionSettings())
        self.db_path = db_path
        self.max_tokens = max_tokens
        self.encoding = encoding
        # The budget's trim keeps its window between calls (hysteresis; O(new + kept) a call).
        self._trimmer: HistoryTrimmer[dict[str, Any]] = HistoryTrimmer(
            list,
            same=operator.eq,
            encoding=encoding,
            keep_system=False,
            start_on=None,
            low_water=check_low_water("MemciSession", low_water),
        )
        self.paged = paged
        self._owns_store = storage is None
        if storage is None:
            storage = MemoryStorage() if str(db_path) == ":memory:" else SqliteStorage(db_path, namespace=session_id)
        self.storage = storage
        # This session's own calls await the store: a sync one runs in a worker thread.
        store = cast("AsyncStorage", storage) if is_async_store(storage) else ThreadedStorage(cast("Storage", storage))
        self._history: _History | None = None
        self._paged: _Paged | None = None
        if paged:
            options: dict[str, Any] = {"tools": "responses", "encoding": encoding, "system_prompt": system_prompt}
            given = {"active_pages": active_pages, "max_context_tokens": max_context_tokens, "policy": policy}
            options.update({key: value for key, value in given.items() if value is not None})
            self._paged = _Paged(store, storage, options, summarizer)
        else:
            self._history = _History(storage)
        self._lock = AnyLoopLock()  # one session object may serve several threads, each with its loop
        self._closed = False

    def __repr__(self) -> str:
        mode = ", paged=True" if self.paged else ""
        return f"{type(self).__name__}({self.session_id!r}, storage={self.storage!r}{mode})"

    def _check_open(self) -> None:
        if self._closed:
            # The class the caller made, as the SDK's sessions name theirs: a subclass's own name.
            raise SessionClosedError(f"{type(self).__name__} is closed", self.session_id)

    async def _serialised(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` alone among this session's calls, from whatever thread and event loop
        (``run_sync`` runs each call on a loop of its own), again after a
        :class:`~memci.ConflictError` (another writer saved first: reload, redo), by the page log's
        one policy."""
        self._check_open()
        async with self._lock:
            self._check_open()
            for wait in CONFLICTS.waits():
                try:
                    return await work()
                except ConflictError:
                    await asyncio.sleep(wait)
            return await work()  # the last try: its ConflictError goes to the caller

    async def _write(self, work: Callable[[], Awaitable[T]]) -> T:
        """:meth:`_serialised`, settled: a cancelled caller hears of it once the write is done."""
        self._check_open()
        return await _settled(self._serialised(work))

    # ---- the Session protocol ------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history to send: the latest ``limit`` items in order (None: the session settings'
        limit, else all). Full history: the items as added (with ``max_tokens``, the newest that
        fit, cut with hysteresis: see ``low_water``); paged: the window, its leading system
        messages (the recall tools' note, the contents page) always, then the latest ``limit``
        items of the active pages; ``[]`` while the session holds nothing. O(n) for n items
        returned (with ``max_tokens``: O(new + kept))."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidOperationError(f"get_items: limit must be an int or None, got {type(limit).__name__}")
        session_limit = resolve_session_limit(limit, self.session_settings)

        async def work() -> list[Any]:
            if self._paged is not None:
                ctx = await self._paged.refresh()
                if not (await ctx.pages()) and not (await ctx.contents()):
                    return []  # nothing to send: not even the recall tools' note
                window: list[Any] = await ctx.build_messages()
                head = next((i for i, item in enumerate(window) if item.get("role") != "system"), len(window))
                return window[:head] + _limited(window[head:], session_limit)
            history = self._history
            assert history is not None
            await history.refresh()
            if self.max_tokens is None:
                return _limited(history.items.messages(), session_limit)
            kept = self._trimmer.trim(history.items, self.max_tokens)
            return _limited(kept or [], session_limit)

        return [_given(item) for item in await self._serialised(work)]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Add items at the end, all or none: any JSON item, as the SDK's sessions take it (one
        memci cannot read as a message is kept verbatim; a value that is not JSON raises
        ``InvalidMessageError`` naming it, and nothing is added). Full
        history: one commit of the new items and a small state, O(len(items)); paged: the window
        takes them (a batch holding a user message then ends the round), then the system is saved.
        SDK objects are taken as their ``model_dump``, as everywhere in memci."""
        self._check_open()  # before the empty batch's early return, as the SDK's sessions do
        if not isinstance(items, list | tuple):
            raise InvalidOperationError(f"add_items: items must be a list of items, got {type(items).__name__}")
        batch: list[Any] = [_stored(item) for item in items]
        if not batch:
            return

        async def work() -> None:
            if self._paged is not None:
                ctx = await self._paged.refresh()
                await _written(ctx.feed, batch)  # all or nothing; a user request ends the round first
                await self._paged.saved(ctx)
                return
            history = self._history
            assert history is not None
            await history.refresh()
            await _written(history.add, batch)

        await self._write(work)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item; None when there is none (paged: none in the window,
        an archived turn is never popped)."""

        async def work() -> Any:
            if self._paged is not None:
                ctx = await self._paged.refresh()
                if not await ctx.pages():
                    return None
                item = await ctx.pop()
                await self._paged.saved(ctx)
                return item
            history = self._history
            assert history is not None
            await history.refresh()
            return await history.pop()

        return cast("TResponseInputItem | None", _given(await self._write(work)))

    async def clear_session(self) -> None:
        """Forget every item of this session (its stored pages are deleted in the same commit)."""

        async def work() -> None:
            if self._paged is not None:
                ctx = await self._paged.refresh()
                await ctx.clear(forget=True)
                await self._paged.saved(ctx)
                return
            history = self._history
            assert history is not None
            await history.refresh()
            await history.clear()

        await self._write(work)

    # ---- the SDK's compaction protocol -----------------------------------------------------------------
    # ``OpenAIResponsesCompactionSession`` looks these up on the session it wraps: a bounded read of
    # the newest items with an atomic replacement of their suffix (automatic partial compaction), and
    # an atomic replacement of the whole history (manual compaction). Both bypass the public reads
    # and writes, so a subclass that overrides one of them (it may transform what it adds or
    # returns) offers neither; one that keeps them all stores exactly what this class stores and
    # offers both. A paged session offers neither (its window is not the stored history).

    def _compacts(self) -> bool:
        keeps_io = all(getattr(type(self), name) is getattr(MemciSession, name) for name in _SESSION_IO)
        return keeps_io and self._history is not None

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[TResponseInputItem], bool] | None = None
    ) -> _CompactionSnapshot | None:
        """The newest ``limit`` items, whether they are the whole history, and a
        ``replace_suffix(start, output)`` that swaps ``items[start:]`` for ``output`` in one commit
        if that suffix is still the newest stored (else False, nothing changed). ``prune_prefix``
        drops the leading stored items it accepts in the same commit (an expired envelope)."""
        if not self._compacts():
            return None
        history = self._history
        assert history is not None

        async def read() -> list[Any]:
            await history.refresh()
            return [_given(item) for item in history.items.messages()]

        stored = await self._serialised(read)
        items = stored[max(0, len(stored) - limit) :] if limit > 0 else []

        async def replace_suffix(start: int, output: list[TResponseInputItem]) -> bool:
            expected = items[start:]
            if not expected:
                return False

            async def work() -> bool:
                await history.refresh()
                current = [_given(item) for item in history.items.messages()]
                kept = len(current) - len(expected)
                if kept < 0 or current[kept:] != expected:
                    return False
                first = 0
                while prune_prefix is not None and first < kept and prune_prefix(current[first]):
                    first += 1
                await _written(history.rewrite, [_stored(item) for item in [*current[first:kept], *output]])
                return True

            return await self._write(work)

        return _CompactionSnapshot(items, len(items) == len(stored), replace_suffix)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """Replace the whole history by ``items`` in one commit; False (nothing done) where this
        session does not offer it (see above): the SDK then clears and adds."""
        if not self._compacts():
            return False
        history = self._history
        assert history is not None
        batch = [_stored(item) for item in items]

        async def work() -> bool:
            await history.refresh()
            await _written(history.rewrite, batch)
            return True

        return await self._write(work)

    # ---- the paged mode's tools ----------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The recall tools as the SDK's function tools (``recall_page``, ``list_pages``,
        ``search_pages``), for the agent's ``tools=``; paged mode only. A call is answered by the
        context system: a page's messages, a listing, the pages a search found, or a refusal or
        error text the model reads (never an exception)."""
        if self._paged is None:
            raise InvalidOperationError("MemciSession.tools(): the recall tools need a paged session (paged=True)")
        paged = self._paged
        definitions = tool_definitions("responses")
        assert isinstance(definitions, list)

        def invoker(name: str) -> Callable[[ToolContext[Any], str], Awaitable[str]]:
            async def invoke(context: ToolContext[Any], arguments: str) -> str:
                async def work() -> str:
                    ctx = await paged.refresh()
                    return await ctx.run_tool(name, arguments)

                return await self._serialised(work)

            return invoke

        return [
            FunctionTool(
                name=definition["name"],
                description=definition.get("description", ""),
                params_json_schema=definition["parameters"],
                on_invoke_tool=invoker(definition["name"]),
                strict_json_schema=False,
            )
            for definition in definitions
            if definition["name"] in TOOL_NAMES
        ]

    def close(self) -> Awaitable[None]:
        """Close the store this session opened (a ``storage=`` given is the caller's to close);
        every later call raises :class:`~memci.SessionClosedError` (a ``RuntimeError``). Closing
        again does nothing.

        The close is done when this returns. What it returns may be awaited, and awaiting it does
        nothing more: ``session.close()`` is ``SQLiteSession``'s close, ``await session.close()``
        the SDK's async sessions' (``AsyncSQLiteSession``, ``RedisSession``), so either caller's
        code runs unchanged."""
        if not self._closed:
            self._closed = True
            if self._owns_store:
                self.storage.close()
        return _CLOSED
