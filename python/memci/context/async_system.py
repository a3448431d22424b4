"""The paged context system for asyncio agents: :class:`AsyncContextSystem`.

It is a :class:`~memci.ContextSystem` driven from an event loop. Each call takes the system's
:class:`asyncio.Lock` (coroutines on one system run one at a time, in the order they asked), then
runs the sync system's method in a worker thread (a pool of the systems' own): summarising, token
counting, search and the core's work never run on the loop. What the sync system would ask of its
storage or its summarizer is brought back to the loop: a call of an :class:`~memci.storage.AsyncStorage`
or an async summarizer (:mod:`~memci.context.async_summary`) is scheduled on the loop with
``asyncio.run_coroutine_threadsafe`` and the worker thread waits for it; a sync store or summarizer
is simply called in the worker thread. So every rule of the sync system holds as it is, with one
implementation: the same pages, contents, rules, saves (one atomic commit, the revision
compare-and-set and its :class:`~memci.ConflictError`) and states, byte for byte.

Semantics and decisions: ``docs/context-system.md``, "Async".
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from memci.context import embedding
from memci.context.async_summary import AsyncSummarizer, AsyncSummarizerFn, on_loop
from memci.context.contents import ArchivePolicy, ContentsEntry, DroppedEntry, PageListing, RoundResult
from memci.context.edits import Edit
from memci.context.embedding import Embedder, checked_embedder
from memci.context.page import Message, Page
from memci.context.search import SearchHit
from memci.context.summary import Summarizer
from memci.context.system import ContextSystem, ToolFormat
from memci.errors import InvalidOperationError
from memci.formats import SdkObject
from memci.storage import AsyncStorage, Storage
from memci.storage.bridge import LoopRunner, in_worker, sync_view
from memci.tokens import Counter

if TYPE_CHECKING:
    from memci.formats import AnthropicTool, ChatMessage, ChatTool, ResponsesTool

__all__ = ["AnyStorage", "AnySummarizer", "AsyncContextSystem"]

T = TypeVar("T")

#: What ``summarizer=`` takes: an async summarizer (awaited on the loop) or a sync one (run in a thread).
AnySummarizer = AsyncSummarizer | AsyncSummarizerFn | Summarizer | Callable[[str], str]
#: What ``storage=`` takes: an async store (awaited on the loop) or a sync one (called in a thread).
AnyStorage = AsyncStorage | Storage


#: The system whose call the current code runs inside (set in the worker thread, and so in the
#: coroutines of the store and summarizer it schedules on the loop): a call back into that system
#: would wait for its own lock for ever, and is refused instead.
_serving: contextvars.ContextVar[AsyncContextSystem | None] = contextvars.ContextVar("memci_serving", default=None)


class AsyncContextSystem:
    """An agent's paged context window for asyncio: :class:`~memci.ContextSystem`'s semantics, with
    every method that does work a coroutine.

    ``storage`` is an :class:`~memci.storage.AsyncStorage` (``AsyncSqliteStorage``,
    ``AsyncRedisStorage``, ``ThreadedStorage``, your own) or any sync store; ``summarizer`` an async
    summarizer (``async def asummarize(page)``, or an ``async def`` ``str -> str``) or a sync one.
    The other options are :class:`~memci.ContextSystem`'s (``tools``, ``agent_tools``, ``active_pages``,
    ``policy``, ``encoding``, ``max_context_tokens``, ``counter``, ``cache_stable``, ``low_water``,
    ``context_edits``). Coroutines on one system are serialised by an :class:`asyncio.Lock`; the event loop is never
    blocked by the system's work.
    """

    _system: ContextSystem

    def __init__(
        self,
        system_prompt: str | Message | None = None,
        *,
        storage: AnyStorage | None = None,
        summarizer: AnySummarizer | None = None,
        embedder: Embedder | None = None,
        **options: Any,
    ) -> None:
        self._setup(storage, summarizer, embedder)
        self._system = ContextSystem(
            system_prompt,
            storage=self._sync_storage,
            summarizer=self._sync_summarizer,
            embedder=self._sync_embedder,
            **options,
        )

    def _setup(self, storage: AnyStorage | None, summarizer: AnySummarizer | None, embedder: Embedder | None) -> None:
        self._lock = asyncio.Lock()
        self._loop = LoopRunner("AsyncContextSystem")
        self._storage = storage
        if storage is not None and not isinstance(storage, Storage | AsyncStorage):
            raise InvalidOperationError(
                "AsyncContextSystem: storage must be an AsyncStorage or a Storage (put_page, get_page, "
                f"page_indices, save_state, load_state, close), got {type(storage).__name__}"
            )
        self._sync_storage = None if storage is None else sync_view(storage, self._loop)
        self._sync_summarizer = on_loop(summarizer, self._loop.run)
        # An async embedder is awaited on the loop, like the summarizer.
        self._sync_embedder = embedding.on_loop(checked_embedder(embedder, "AsyncContextSystem"), self._loop.run)

    @classmethod
    def _empty(
        cls, storage: AnyStorage, summarizer: AnySummarizer | None, embedder: Embedder | None
    ) -> AsyncContextSystem:
        ctx = cls.__new__(cls)
        ctx._setup(storage, summarizer, embedder)
        return ctx

    def _store_for(self, method: str) -> Storage:
        if self._sync_storage is None:
            raise InvalidOperationError(f"AsyncContextSystem.{method}: storage must be a store, got None")
        return self._sync_storage

    async def _run(self, work: Callable[[], T]) -> T:
        """``work()`` (a call of the sync system) in a worker thread, under the system's lock. If
        the caller is cancelled, the thread (which cannot be stopped) still finishes before the
        lock is released, so the next call sees a system that is not half-way through anything;
        then the cancellation is raised."""
        if _serving.get() is self:
            raise InvalidOperationError(
                "AsyncContextSystem: called back from its own summarizer or storage while it works "
                "(its methods are not re-entrant)"
            )

        def serve() -> T:
            _serving.set(self)
            return work()

        async with self._lock:
            return await in_worker(self._loop, serve)

    # ---- construction and persistence --------------------------------------------------------------

    @classmethod
    async def load(
        cls,
        storage: AnyStorage,
        *,
        summarizer: AnySummarizer | None = None,
        counter: Counter | None = None,
        embedder: Embedder | None = None,
    ) -> AsyncContextSystem:
        """The system last saved to ``storage``, exactly (:meth:`ContextSystem.load`): the state is
        read, awaited (the search index is built at the first search)."""
        ctx = cls._empty(storage, summarizer, embedder)
        store, fitted, embeds = ctx._store_for("load"), ctx._sync_summarizer, ctx._sync_embedder
        ctx._system = await ctx._run(
            lambda: ContextSystem.load(store, summarizer=fitted, counter=counter, embedder=embeds)
        )
        return ctx

    @classmethod
    async def open(
        cls,
        storage: AnyStorage,
        system_prompt: str | Message | None = None,
        *,
        summarizer: AnySummarizer | None = None,
        embedder: Embedder | None = None,
        **options: Any,
    ) -> AsyncContextSystem:
        """Load or create (:meth:`ContextSystem.open`): the system saved to ``storage``, continuing
        its conversation, or a new one on it if it holds no state; the settings given (``tools``,
        ``agent_tools``, ``active_pages``, ``policy``, ``encoding``, ``max_context_tokens``,
        ``counter``, ``cache_stable``, ``low_water``, ``context_edits``) replace the saved ones. Nothing is written
        until :meth:`save`."""
        ctx = cls._empty(storage, summarizer, embedder)
        store, fitted, embeds = ctx._store_for("open"), ctx._sync_summarizer, ctx._sync_embedder
        ctx._system = await ctx._run(
            lambda: ContextSystem.open(store, system_prompt, summarizer=fitted, embedder=embeds, **options)
        )
        return ctx

    @classmethod
    async def from_state(
        cls,
        state: dict[str, Any],
        storage: AnyStorage,
        *,
        summarizer: AnySummarizer | None = None,
        counter: Counter | None = None,
        embedder: Embedder | None = None,
    ) -> AsyncContextSystem:
        """The system :meth:`to_state` described, on ``storage`` (the one holding its archived
        pages): :meth:`ContextSystem.from_state`, the pages read for search awaited."""
        ctx = cls._empty(storage, summarizer, embedder)
        store, fitted, embeds = ctx._store_for("from_state"), ctx._sync_summarizer, ctx._sync_embedder
        ctx._system = await ctx._run(
            lambda: ContextSystem.from_state(state, store, summarizer=fitted, counter=counter, embedder=embeds)
        )
        return ctx

    async def to_state(self) -> dict[str, Any]:
        """The whole state as a JSON-able dict, for a framework's state (:meth:`ContextSystem.to_state`)."""
        return await self._run(self._system.to_state)

    async def save(self) -> None:
        """Write the pages archived since the last save and the state as one atomic commit of the
        next revision, awaited on the store (:meth:`ContextSystem.save`); :class:`~memci.ConflictError`
        if another writer saved since this system was loaded, and then nothing was written."""
        await self._run(self._system.save)

    async def state(self) -> dict[str, Any]:
        """The whole state as a JSON-able dict (:meth:`ContextSystem.state`)."""
        return await self._run(self._system.state)

    # ---- the conversation --------------------------------------------------------------------------

    async def add(self, message: Message | SdkObject) -> int:
        """Add one message (:meth:`ContextSystem.add`); the index of the page it opened or joined.
        Archiving a page awaits the summarizer; the page is written to the store at the next save."""
        return await self._run(lambda: self._system.add(message))

    async def extend(self, messages: Sequence[Message | SdkObject]) -> list[int]:
        """Add each message in order, all or none (:meth:`ContextSystem.extend`)."""
        return await self._run(lambda: self._system.extend(messages))

    async def feed(self, messages: Sequence[Message | SdkObject]) -> RoundResult | None:
        """Take a framework's new messages: the round ends first when they hold a new user request,
        then they are added, all or none (:meth:`ContextSystem.feed`)."""
        return await self._run(lambda: self._system.feed(messages))

    async def pop(self) -> Message:
        """Remove and return the last message of the window (:meth:`ContextSystem.pop`)."""
        return await self._run(self._system.pop)

    async def clear(self, *, forget: bool = False) -> None:
        """Empty the window and the contents page (:meth:`ContextSystem.clear`): without ``forget``
        the active pages are archived (summarised, awaited) and stay searchable; with
        ``forget=True`` the next :meth:`save` deletes the stored pages with the state."""
        await self._run(lambda: self._system.clear(forget=forget))

    async def end_round(self) -> RoundResult:
        """End a round: the m rule, the p rule, then LRU (:meth:`ContextSystem.end_round`)."""
        return await self._run(self._system.end_round)

    async def build_messages(self, *, sanitize: bool = True) -> list[ChatMessage]:
        """What to send the model (:meth:`ContextSystem.build_messages`); with
        ``max_context_tokens``, the pages archived to fit are summarised first, awaited."""
        return await self._run(lambda: self._system.build_messages(sanitize=sanitize))

    async def token_count(self) -> int:
        """Tokens of :meth:`build_messages` without sanitizing, counted in a worker thread."""
        return await self._run(self._system.token_count)

    async def count_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of ``messages`` in the system's encoding (or by its counter), in a worker thread."""
        return await self._run(lambda: self._system.count_tokens(messages))

    async def contents_text(self) -> str | None:
        """The contents page's text, or None while no entry is visible."""
        return await self._run(self._system.contents_text)

    async def contents_tokens(self) -> int:
        """Tokens of the contents page (0 while it has no entry)."""
        return await self._run(self._system.contents_tokens)

    async def pages(self) -> list[Page]:
        """The active pages, oldest first (:attr:`ContextSystem.pages`)."""
        return await self._run(lambda: self._system.pages)

    async def contents(self) -> list[ContentsEntry]:
        """The contents entries the model sees, by index (:attr:`ContextSystem.contents`)."""
        return await self._run(lambda: self._system.contents)

    async def dropped(self) -> list[DroppedEntry]:
        """Entries the rules dropped from the contents page, by index (:attr:`ContextSystem.dropped`)."""
        return await self._run(lambda: self._system.dropped)

    # ---- the archive -------------------------------------------------------------------------------

    async def recall(self, page_index: int) -> Page:
        """Page ``page_index`` in full, read from the store (awaited) if it is archived; counts a
        recall (:meth:`ContextSystem.recall`)."""
        return await self._run(lambda: self._system.recall(page_index))

    async def list_pages(self, limit: int = 10) -> list[PageListing]:
        """The ``limit`` most recently archived visible pages, newest first."""
        return await self._run(lambda: self._system.list_pages(limit))

    async def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The ``k`` archived pages that best match ``query`` (BM25, in a worker thread)."""
        return await self._run(lambda: self._system.search(query, k))

    async def run_tool(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> str:
        """Run the recall tool ``name`` with ``arguments`` (a dict or its JSON text); the text the
        model reads, never an exception (:meth:`ContextSystem.run_tool`)."""
        return await self._run(lambda: self._system.run_tool(name, arguments))

    async def handle_tool_call(self, call: object) -> Message:
        """Answer the model's call of a recall tool with the result to :meth:`add`
        (:meth:`ContextSystem.handle_tool_call`); recalled pages are read from the store, awaited."""
        return await self._run(lambda: self._system.handle_tool_call(call))

    # ---- what needs no lock --------------------------------------------------------------------------

    @overload
    def tool_definitions(self, format: Literal["openai"] = "openai") -> list[ChatTool]: ...
    @overload
    def tool_definitions(self, format: Literal["anthropic"]) -> list[AnthropicTool]: ...
    @overload
    def tool_definitions(self, format: Literal["responses"]) -> list[ResponsesTool]: ...
    @overload
    def tool_definitions(self, format: Literal["attp"]) -> str: ...
    def tool_definitions(self, format: ToolFormat = "openai") -> list[Any] | str:
        """The agent's tools, then the recall tools, for the model (:meth:`ContextSystem.tool_definitions`)."""
        return self._system.tool_definitions(format)

    def tool_tokens(self) -> int:
        """Tokens of the tool definitions every request carries (:meth:`ContextSystem.tool_tokens`)."""
        return self._system.tool_tokens()

    @property
    def agent_tools(self) -> list[dict[str, Any]]:
        """The agent's own tool definitions, as given (copies)."""
        return self._system.agent_tools

    def is_recall_call(self, call: object) -> bool:
        """True when ``call`` is for the recall tools (send it to :meth:`handle_tool_call`)."""
        return self._system.is_recall_call(call)

    @property
    def round(self) -> int:
        """Rounds ended so far."""
        return self._system.round

    @property
    def storage(self) -> AnyStorage:
        """The store given (an async one, or a sync one); ``MemoryStorage`` by default."""
        return self._system.storage if self._storage is None else self._storage

    @property
    def policy(self) -> ArchivePolicy:
        return self._system.policy

    @property
    def active_pages(self) -> int:
        return self._system.active_pages

    @property
    def encoding(self) -> str:
        return self._system.encoding

    @property
    def max_context_tokens(self) -> int | None:
        return self._system.max_context_tokens

    @property
    def cache_stable(self) -> bool:
        return self._system.cache_stable

    @property
    def low_water(self) -> float:
        return self._system.low_water

    @property
    def context_edits(self) -> tuple[Edit, ...]:
        """The context edits applied to each window built (saved with the state, as in
        :attr:`ContextSystem.context_edits`)."""
        return self._system.context_edits

    def __reduce__(self) -> tuple[Any, ...]:
        """Refused: a system bound to an event loop, a lock and a store's connection cannot be
        copied or pickled. Its state can: ``await to_state()``, then ``from_state``."""
        raise InvalidOperationError(
            "AsyncContextSystem cannot be copied or pickled: await ctx.to_state() and "
            "rebuild it with await AsyncContextSystem.from_state(state, storage)"
        )

    def __repr__(self) -> str:
        return f"<memci.AsyncContextSystem: round {self._system.round}, storage {self.storage!r}>"
