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
  :meth:`MemciSession.tools` gives the agent ``recall_page`` and ``list_pages`` as function tools.

Needs ``pip install 'memci[openai-agents]'``. Semantics and decisions:
``docs/integrations/openai-agents.md``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from agents.items import TResponseInputItem
from agents.memory.session import _CompactionSnapshot
from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit
from agents.tool import FunctionTool, Tool
from agents.tool_context import ToolContext

from memci.array import MessageArray
from memci.context.async_system import AnySummarizer, AsyncContextSystem
from memci.context.contents import ArchivePolicy
from memci.context.recall import LIST_PAGES, RECALL_PAGE, tool_definitions
from memci.errors import ConflictError, InvalidMessageError, InvalidOperationError, SessionClosedError, StateError
from memci.formats import dumped
from memci.integrations.any_loop_lock import AnyLoopLock
from memci.storage.async_protocol import AsyncStorage
from memci.storage.memory import MemoryStorage
from memci.storage.protocol import Storage
from memci.storage.sqlite import SqliteStorage
from memci.storage.threaded import ThreadedStorage
from memci.tokens import DEFAULT_ENCODING

__all__ = ["MemciSession"]

T = TypeVar("T")

MAX_RETRIES = 20
"""Calls redone after a :class:`~memci.ConflictError` (another writer saved first) before it is raised."""

HISTORY_KIND = "memci.integrations.openai_agents.history"
"""The ``kind`` of a full-history session's saved state (a paged session's is the context system's)."""


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


def _is_async_store(storage: object) -> bool:
    return inspect.iscoroutinefunction(getattr(storage, "save_state", None))


def _limited(items: list[Any], limit: int | None) -> list[Any]:
    """The SDK's ``limit``, as ``SQLiteSession`` reads it: None all, N > 0 the latest N in order,
    0 none, a negative limit all (SQLite's ``LIMIT -1``)."""
    if limit is None or limit < 0:
        return items
    return items[max(0, len(items) - limit) :] if limit else []


class _History:
    """The full history of one session on an async store.

    The items are stored in **chunks**, one write-once page per ``add_items`` call, and the state
    names the live ones as runs ``[first, last, kept]`` (pages ``first..last``, whole but for the
    last, of which the first ``kept`` items are live: ``pop_item`` shortens it). A turn writes one
    page and a small state in one commit, whatever the history's length; ``clear_session`` is a
    forgetting save. In memory the live items are a :class:`~memci.MessageArray`, checked against
    the store's revision at every call, so a second session object on the same id (or another
    process) is seen."""

    def __init__(self, store: AsyncStorage) -> None:
        self.store = store
        self.items = MessageArray()
        self.revision = -1  # not read yet
        self.pages_through = 0
        self.forgotten_through = 0
        self.runs: list[list[int]] = []
        self.sizes: dict[int, int] = {}

    async def refresh(self) -> None:
        """Read the stored state; load the items again if another writer saved since."""
        state = await self.store.load_state()
        revision = 0 if state is None else state.get("revision", 0)
        if revision == self.revision:
            return
        if state is not None and state.get("kind") != HISTORY_KIND:
            raise StateError(
                f"MemciSession: the store holds a {state.get('kind')!r} state, not a full-history session's "
                "(was this session_id used with paged=True?)"
            )
        runs = [] if state is None else [list(run) for run in state.get("runs", [])]
        pages = await self._read([index for first, last, _ in runs for index in range(first, last + 1)])
        sizes: dict[int, int] = {}
        items: list[dict[str, Any]] = []
        for first, last, kept in runs:
            for index in range(first, last + 1):
                page = pages[index]
                if page is None:
                    raise StateError(f"MemciSession: the state names page {index}, which the store does not hold")
                messages = page["messages"]
                sizes[index] = len(messages)
                items.extend(messages if index < last else messages[:kept])
        self.items = MessageArray(items)
        self.runs, self.sizes, self.revision = runs, sizes, revision
        self.pages_through = 0 if state is None else state.get("pages_through", 0)
        self.forgotten_through = 0 if state is None else state.get("forgotten_through", 0)

    async def _read(self, indices: list[int]) -> dict[int, dict[str, Any] | None]:
        """The pages of ``indices``: a sync store (this session's own ``ThreadedStorage``) reads
        them all in one worker thread, an async store one awaited call each."""
        store = self.store
        if isinstance(store, ThreadedStorage):
            sync = store.store
            return await asyncio.to_thread(lambda: {index: sync.get_page(index) for index in indices})
        return {index: await store.get_page(index) for index in indices}

    def _state(self, runs: list[list[int]], pages_through: int, forgotten_through: int) -> dict[str, Any]:
        state: dict[str, Any] = {
            "version": 1,
            "kind": HISTORY_KIND,
            "revision": self.revision + 1,
            "pages_through": pages_through,
            "runs": runs,
        }
        if forgotten_through:
            state["forgotten_through"] = forgotten_through
        return state

    async def add(self, items: list[dict[str, Any]]) -> None:
        index = self.pages_through + 1
        runs = [list(run) for run in self.runs[-1:]]
        if runs and runs[0][1] == self.pages_through and runs[0][2] == self.sizes[runs[0][1]]:
            runs[0][1:] = [index, len(items)]  # the run goes on: its last page was whole
        else:
            runs.append([index, index, len(items)])
        runs = self.runs[:-1] + runs if self.runs else runs
        page = {"index": index, "messages": items, "summary": "", "entry_summaries": [], "archived_round": 0}
        self.items.append(items)  # checks every item first (all or nothing)
        try:
            await self.store.save_state(self._state(runs, index, self.forgotten_through), [page])
        except BaseException:
            self.revision = -1  # reread at the next call
            raise
        self.runs, self.pages_through, self.revision = runs, index, self.revision + 1
        self.sizes[index] = len(items)

    async def pop(self) -> dict[str, Any] | None:
        if not self.runs:
            return None
        item = self.items[-1]
        runs = [list(run) for run in self.runs]
        first, last, kept = runs[-1]
        if kept > 1:
            runs[-1][2] = kept - 1
        elif first < last:
            runs[-1][1:] = [last - 1, self.sizes[last - 1]]
        else:
            runs.pop()
        await self.store.save_state(self._state(runs, self.pages_through, self.forgotten_through))
        self.runs, self.revision = runs, self.revision + 1
        self.items.truncate(remove_last=1)
        return item

    async def clear(self) -> None:
        await self.store.save_state(self._state([], self.pages_through, self.pages_through))
        self.runs, self.sizes, self.revision = [], {}, self.revision + 1
        self.forgotten_through = self.pages_through
        self.items = MessageArray()

    async def rewrite(self, items: list[dict[str, Any]]) -> None:
        """The whole history becomes ``items``: one commit that writes them as one page and
        forgets every older page (a compaction's replacement). O(len(items))."""
        array = MessageArray(items)  # checks every item first (all or nothing)
        index = self.pages_through + 1
        runs = [[index, index, len(items)]] if items else []
        page = {"index": index, "messages": items, "summary": "", "entry_summaries": [], "archived_round": 0}
        pages_through = index if items else self.pages_through
        try:
            await self.store.save_state(self._state(runs, pages_through, self.pages_through), [page] if items else [])
        except BaseException:
            self.revision = -1  # reread at the next call
            raise
        self.forgotten_through, self.pages_through = self.pages_through, pages_through
        self.runs, self.sizes, self.items = runs, ({index: len(items)} if items else {}), array
        self.revision += 1


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
        self.paged = paged
        self._owns_store = storage is None
        if storage is None:
            storage = MemoryStorage() if str(db_path) == ":memory:" else SqliteStorage(db_path, namespace=session_id)
        self.storage = storage
        # This session's own calls await the store: a sync one runs in a worker thread.
        store = cast("AsyncStorage", storage) if _is_async_store(storage) else ThreadedStorage(cast("Storage", storage))
        self._history: _History | None = None
        self._paged: _Paged | None = None
        if paged:
            options: dict[str, Any] = {"tools": "responses", "encoding": encoding, "system_prompt": system_prompt}
            given = {"active_pages": active_pages, "max_context_tokens": max_context_tokens, "policy": policy}
            options.update({key: value for key, value in given.items() if value is not None})
            self._paged = _Paged(store, storage, options, summarizer)
        else:
            self._history = _History(store)
        self._lock = AnyLoopLock()  # one session object may serve several threads, each with its loop
        self._closed = False

    def __repr__(self) -> str:
        mode = ", paged=True" if self.paged else ""
        return f"MemciSession({self.session_id!r}, storage={self.storage!r}{mode})"

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError("MemciSession is closed", self.session_id)

    async def _serialised(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` alone among this session's calls, from whatever thread and event loop
        (``run_sync`` runs each call on a loop of its own), again after a
        :class:`~memci.ConflictError` (another writer saved first: reload, redo)."""
        self._check_open()
        async with self._lock:
            self._check_open()
            for _ in range(MAX_RETRIES):
                try:
                    return await work()
                except ConflictError:
                    continue
            return await work()  # the last try: its ConflictError goes to the caller

    async def _write(self, work: Callable[[], Awaitable[T]]) -> T:
        """:meth:`_serialised`, settled: a cancelled caller hears of it once the write is done."""
        self._check_open()
        return await _settled(self._serialised(work))

    # ---- the Session protocol ------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history to send: the latest ``limit`` items in order (None: the session settings'
        limit, else all). Full history: the items as added (the newest that fit ``max_tokens``,
        with one); paged: the window, its leading system messages (the recall tools' note, the
        contents page) always, then the latest ``limit`` items of the active pages; ``[]`` while
        the session holds nothing. O(n) for n items returned."""
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
            items = history.items
            checkpoint = items.checkpoint()
            try:
                items.trim_to_tokens(self.max_tokens, keep_system=False, start_on=None, encoding=self.encoding)
                return _limited(items.messages(), session_limit)
            finally:
                items.rollback(checkpoint)

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
        opens_turn = any(isinstance(item, dict) and item.get("role") == "user" for item in batch)

        async def work() -> None:
            if self._paged is not None:
                ctx = await self._paged.refresh()
                await _written(ctx.extend, batch)  # all or nothing
                if opens_turn:
                    await ctx.end_round()
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
    # an atomic replacement of the whole history (manual compaction). A subclass may transform what
    # it adds or returns, so, as the SDK's own sessions do, only this class itself offers them; a
    # paged session does neither (its window is not the stored history).

    def _compacts(self) -> bool:
        return type(self) is MemciSession and self._history is not None

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
        """The recall tools as the SDK's function tools (``recall_page``, ``list_pages``), for the
        agent's ``tools=``; paged mode only. A call is answered by the context system: a page's
        messages, a listing, or a refusal or error text the model reads (never an exception)."""
        if self._paged is None:
            raise InvalidOperationError("MemciSession.tools(): the recall tools need a paged session (paged=True)")
        paged = self._paged
        definitions = tool_definitions("responses")
        assert isinstance(definitions, list)

        def invoker(name: str) -> Callable[[ToolContext[Any], str], Awaitable[str]]:
            async def invoke(context: ToolContext[Any], arguments: str) -> str:
                call = {"type": "function_call", "call_id": context.tool_call_id, "name": name, "arguments": arguments}

                async def work() -> str:
                    ctx = await paged.refresh()
                    answer = await ctx.handle_tool_call(call)
                    output = answer["output"]
                    return output if isinstance(output, str) else json.dumps(output)

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
            if definition["name"] in (RECALL_PAGE, LIST_PAGES)
        ]

    def close(self) -> None:
        """Close the store this session opened (a ``storage=`` given is the caller's to close);
        every later call raises :class:`~memci.SessionClosedError` (a ``RuntimeError``)."""
        self._closed = True
        if self._owns_store:
            self.storage.close()
