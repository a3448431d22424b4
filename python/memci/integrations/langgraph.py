"""memci in LangGraph (``pip install 'memci[langgraph]'``): three pieces, each usable alone.

- :func:`trim_hook`: a ``pre_model_hook`` for prebuilt agents (``create_react_agent``) that sends
  the model the newest messages within a token budget, counted exactly, a tool call never
  separated from its results, while the graph's ``messages`` keep everything.
- :class:`LangGraphStorage`: a memci store over LangGraph's ``BaseStore`` (``InMemoryStore``, the
  Postgres or Redis stores), so a context system's archived pages live in the store the graph
  already uses.
- :class:`ContextHook`: a ``pre_model_hook`` that keeps the conversation in a memci
  :class:`~memci.ContextSystem` carried in the graph state as its JSON state (key ``"memci"``),
  archived pages in the graph's store. The model reads the window with the contents page and
  can call ``recall_page``; the state's ``messages`` hold only what arrived since the last model
  call, so a checkpoint stays small however long the thread runs, where a prebuilt agent's
  checkpoint otherwise carries the whole history at every step.

Decisions and guarantees: ``docs/integrations/langgraph.md``.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

from memci._optional import needs_extra

with needs_extra("langgraph", __name__):
    from langchain_core.messages import BaseMessage, RemoveMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from langgraph.prebuilt import ToolRuntime
    from langgraph.prebuilt.chat_agent_executor import AgentState
    from langgraph.store.base import BaseStore
    from langgraph.types import Command

from memci import tokens
from memci.context.system import ContextSystem
from memci.errors import InvalidOperationError, StorageError
from memci.formats import from_langchain, to_langchain
from memci.integrations.langchain_messages import MIRRORS, MessageTrimmer
from memci.integrations.trimming import LOW_WATER
from memci.storage.json_store import Commit, JsonStore

__all__ = [
    "STATE_KEY",
    "ContextHook",
    "ContextState",
    "LangGraphStorage",
    "newest_state",
    "state_value",
    "thread_label",
    "trim_hook",
]

#: The graph-state key :class:`ContextHook` keeps the context system's JSON state under.
STATE_KEY = "memci"


# ---- the graph state ----------------------------------------------------------------------------


def state_value(state: Any, key: str, default: Any = None) -> Any:
    """``state[key]`` of a graph state that is a mapping (a ``TypedDict`` schema) or an object (a
    Pydantic or dataclass schema), or ``default`` when it has no such key."""
    if isinstance(state, Mapping):
        return state.get(key, default)
    return getattr(state, key, default)


def thread_label(thread_id: str) -> str:
    """A thread id as one ``BaseStore`` namespace label: labels may not be empty or hold ``.``
    or NUL, so ``%``, ``.`` and NUL are written ``%25``, ``%2E`` and ``%00``, and the empty id
    ``%`` (no other id is written so). One-to-one: two threads never share a label, and an id
    without those characters is its own label."""
    if not thread_id:
        return "%"
    return thread_id.replace("%", "%25").replace(".", "%2E").replace("\x00", "%00")


def newest_state(current: dict[str, Any] | None, update: dict[str, Any] | None) -> dict[str, Any] | None:
    """The reducer of the ``"memci"`` state key: of two context-system states written in one
    step (two recall calls run in parallel), the one with the higher revision."""
    if update is None:
        return current
    if current is None or update.get("revision", 0) >= current.get("revision", 0):
        return update
    return current


# ---- the trim hook ------------------------------------------------------------------------------


def trim_hook(
    max_tokens: int,
    *,
    encoding: str = tokens.DEFAULT_ENCODING,
    keep_system: bool = True,
    start_on: str | None = "user",
    low_water: float | None = LOW_WATER,
) -> Callable[[Any], dict[str, Any]]:
    """A ``pre_model_hook`` sending the model the newest messages of ``state["messages"]`` within
    ``max_tokens`` exact tokens, as ``llm_input_messages``: the state keeps everything. The trim is
    :class:`~memci.integrations.langchain_messages.MessageTrimmer`'s (whole tool groups, the
    graph's own message objects, each thread mirrored once, so a call costs O(new + kept) whatever
    the thread's length), cut with hysteresis: the messages sent grow append-only until they pass
    ``max_tokens``, then are cut back to ``low_water`` of it (None: the newest that fit, every
    call). The state may be a dict (``TypedDict``) or a Pydantic model; threads are kept apart by
    their ``thread_id``."""
    trimmer = MessageTrimmer(
        max_tokens, encoding=encoding, keep_system=keep_system, start_on=start_on, low_water=low_water
    )

    def hook(state: Any) -> dict[str, Any]:
        messages = state_value(state, "messages") or ()
        return {"llm_input_messages": trimmer.trim(messages if isinstance(messages, list) else list(messages))}

    return hook


# ---- the store ----------------------------------------------------------------------------------


class LangGraphStorage(JsonStore):
    """A memci store over a LangGraph ``BaseStore``: each page an item under
    ``namespace + ("pages",)`` (key: its index), the state an item ``"state"`` under ``namespace``,
    each value ``{"json": text}`` in memci's JSON (the same checks as every memci store), never
    indexed for search.

    A ``BaseStore`` has no transaction and no compare-and-set: a save writes its pages, then the
    state (a crash in between leaves pages above the saved mark, which the next save replaces),
    and checks the revision by reading it first, which detects a stale writer but not one racing in
    the same instant. One writer per conversation: LangGraph runs a thread's steps one at a time."""

    def __init__(self, store: BaseStore, namespace: Sequence[str] = ("memci",)) -> None:
        super().__init__()
        if not isinstance(store, BaseStore):
            raise StorageError(f"store must be a LangGraph BaseStore, got {type(store).__name__}", "store")
        names = tuple(namespace)
        if not names or not all(isinstance(n, str) and n and "." not in n for n in names):
            raise StorageError(f"namespace must be non-empty labels without dots, got {namespace!r}", "namespace")
        self.store = store
        self.namespace = names
        self._pages_ns = (*names, "pages")

    def __repr__(self) -> str:
        return f"LangGraphStorage({type(self.store).__name__}, namespace={self.namespace!r})"

    def _where(self, index: int | None = None) -> str:
        return f"{self!r}: " + ("state" if index is None else f"page {index}")

    def _text(self, namespace: tuple[str, ...], key: str) -> str | None:
        item = self.store.get(namespace, key)
        if item is None:
            return None
        text = item.value.get("json")
        if not isinstance(text, str):
            place = self._where(None if key == "state" else int(key))
            raise StorageError(f"{place}: the item holds no memci JSON", place)
        return text

    def _insert_page_text(self, index: int, text: str) -> str | None:
        existing = self._text(self._pages_ns, str(index))
        if existing is None:
            self.store.put(self._pages_ns, str(index), {"json": text}, index=False)
        return existing

    def _read_page_text(self, index: int) -> str | None:
        return self._text(self._pages_ns, str(index))

    def _list_page_indices(self) -> list[int]:
        indices: list[int] = []
        while True:
            found = self.store.search(self._pages_ns, limit=1000, offset=len(indices))
            indices += [int(item.key) for item in found if tuple(item.namespace) == self._pages_ns]
            if len(found) < 1000:
                return sorted(indices)

    def _read_state_text(self) -> str | None:
        return self._text(self.namespace, "state")

    def _commit(self, commit: Commit) -> None:
        stored = self._read_state_text()
        state = json.loads(stored) if stored is not None else {}
        commit.check(state.get("revision", 0) if isinstance(state.get("revision"), int) else 0, self._where)
        mark = state.get("pages_through", 0)
        writes = commit.pages_to_write(mark, self._read_page_text, self._where)
        if commit.forgotten_through:
            for index in commit.pages_to_forget(self._list_page_indices()):
                self.store.delete(self._pages_ns, str(index))
        for index, text in writes:
            self.store.put(self._pages_ns, str(index), {"json": text}, index=False)
        self.store.put(self.namespace, "state", {"json": commit.state_text}, index=False)


# ---- the context system in graph state ------------------------------------------------------------


class ContextState(AgentState):
    """A prebuilt agent's state with the key :class:`ContextHook` keeps the context system in
    (the newest revision wins when two writes land in one step)."""

    memci: Annotated[dict[str, Any] | None, newest_state]


class ContextHook:
    """A ``pre_model_hook`` keeping the conversation in a :class:`~memci.ContextSystem` carried in
    graph state (see the module). Each call takes every message in ``state["messages"]`` into the context system
    (:meth:`~memci.ContextSystem.feed`: a new user request ends the round before it, so the archive policies run
    between turns), removes them from the state, saves the system's JSON state under ``"memci"`` (archived pages to
    the graph's store, under ``namespace + (thread_label(thread_id),)``) and sends the model ``build_messages()``.
    Give the agent :meth:`tools` so the model can recall pages: a recall runs on the thread's own system and saves
    it (the recall counts persist). The graph's state schema must have a ``"memci"`` key: :class:`ContextState`, or
    your own (a ``TypedDict`` or a Pydantic model); without one the hook raises an error that says so. Threads never
    share a system; each has its own lock."""

    def __init__(
        self,
        *,
        namespace: Sequence[str] = ("memci",),
        active_pages: int = 5,
        max_context_tokens: int | None = None,
        encoding: str = tokens.DEFAULT_ENCODING,
        summarizer: Any = None,
    ) -> None:
        self.namespace = tuple(namespace)
        self.options: dict[str, Any] = {
            "active_pages": active_pages,
            "max_context_tokens": max_context_tokens,
            "encoding": encoding,
        }
        self.summarizer = summarizer
        #: thread id -> (the revisions of graph states it stands for, the graph's store, the
        #: system), the newest last.
        self._systems: OrderedDict[str, tuple[set[Any], BaseStore, ContextSystem]] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def storage(self, store: BaseStore, thread_id: str) -> LangGraphStorage:
        """The memci store of one thread in the graph's ``store``."""
        return LangGraphStorage(store, (*self.namespace, thread_label(thread_id)))

    def context(self, state: Any, store: BaseStore, thread_id: str) -> ContextSystem:
        """The thread's context system as ``state`` carries it (a new one when it carries none).
        The system this hook (or a recall) saved last for the thread is reused when the state is
        one it saved (same revision, same store), so a step costs what it adds, not a rebuild of
        the search index from every archived page."""
        self._check_schema(state)
        saved = state_value(state, STATE_KEY)
        with self._lock:
            cached = self._systems.get(thread_id)
        if saved is not None and cached is not None:
            revisions, cached_store, ctx = cached
            if saved.get("revision") in revisions and cached_store is store:
                return ctx
        storage = self.storage(store, thread_id)
        if saved is None:
            if storage.load_state() is not None:
                raise InvalidOperationError(
                    f"ContextHook: the graph state of thread {thread_id!r} carries no {STATE_KEY!r} key while "
                    "the store holds this thread's context system: the graph's state schema has no "
                    f"{STATE_KEY!r} key. Build the agent with state_schema=ContextState (or add a "
                    f"{STATE_KEY!r} key to your own schema)"
                )
            return ContextSystem(None, tools="openai", storage=storage, summarizer=self.summarizer, **self.options)
        return ContextSystem.from_state(saved, storage, summarizer=self.summarizer)

    @staticmethod
    def _check_schema(state: Any) -> None:
        """Refuse a state whose schema, a Pydantic model, has no ``"memci"`` field."""
        fields = getattr(type(state), "model_fields", None)
        if isinstance(fields, Mapping) and STATE_KEY not in fields:
            raise InvalidOperationError(
                f"ContextHook: the graph's state schema {type(state).__name__} has no {STATE_KEY!r} field; add "
                f"`{STATE_KEY}: Annotated[dict[str, Any] | None, newest_state] = None` to it "
                "(or build the agent with state_schema=ContextState)"
            )

    def _thread_lock(self, thread_id: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(thread_id, threading.Lock())

    def _remember(self, thread_id: str, store: BaseStore, ctx: ContextSystem, also: Any = None) -> dict[str, Any]:
        """Save ``ctx`` as the thread's system, standing for its new revision (and for ``also``,
        the state revision it was reached from by a recall in the same step)."""
        saved = ctx.to_state()
        revisions = {saved.get("revision")}
        if also is not None:
            previous = self._systems.get(thread_id)
            revisions |= {also} | (previous[0] if previous is not None and previous[2] is ctx else set())
        with self._lock:
            self._systems[thread_id] = (revisions, store, ctx)
            self._systems.move_to_end(thread_id)
            while len(self._systems) > MIRRORS:
                evicted, _ = self._systems.popitem(last=False)
                self._locks.pop(evicted, None)
        return saved

    def __call__(self, state: Any) -> dict[str, Any]:
        from langgraph.config import get_config, get_store

        self._check_schema(state)
        thread_id = _thread_id(get_config())
        store = get_store()
        with self._thread_lock(thread_id):
            ctx = self.context(state, store, thread_id)
            new: list[BaseMessage] = list(state_value(state, "messages") or ())
            if new:
                ctx.feed(from_langchain(new))
            ctx.save()
            saved = self._remember(thread_id, store, ctx)
            window = to_langchain(ctx.build_messages())
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], STATE_KEY: saved, "llm_input_messages": window}

    def tools(self) -> list[StructuredTool]:
        """The context system's recall tools (``recall_page``, ``list_pages``, ...) as LangChain
        tools for the agent: each runs on the calling thread's system, saves it, and writes its
        new state to the graph state with the tool's result."""
        definitions = ContextSystem(None).tool_definitions("openai")
        return [self._tool(d["function"]) for d in definitions]

    def _tool(self, function: Mapping[str, Any]) -> StructuredTool:
        name = str(function["name"])

        def run(runtime: ToolRuntime, **arguments: Any) -> Command[Any]:
            thread_id = _thread_id(runtime.config)
            store = runtime.store
            if store is None:
                raise InvalidOperationError("ContextHook's tools need the graph's store: build the agent with store=")
            with self._thread_lock(thread_id):
                ctx = self.context(runtime.state, store, thread_id)
                content = ctx.run_tool(name, arguments)
                ctx.save()
                reached_from = (state_value(runtime.state, STATE_KEY) or {}).get("revision")
                saved = self._remember(thread_id, store, ctx, also=reached_from)
            answer = ToolMessage(content, tool_call_id=runtime.tool_call_id or "", name=name)
            return Command(update={STATE_KEY: saved, "messages": [answer]})

        return StructuredTool.from_function(
            func=run,
            name=name,
            description=str(function.get("description", "")),
            args_schema=dict(function.get("parameters") or {"type": "object", "properties": {}}),
        )


def _thread_id(config: Mapping[str, Any]) -> str:
    """The run's ``thread_id`` (``"default"`` for a run without one)."""
    return str((config.get("configurable") or {}).get("thread_id", "default"))
