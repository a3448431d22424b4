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
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memci._optional import needs_extra

with needs_extra("langgraph", __name__):
    from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage
    from langchain_core.tools import StructuredTool
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from langgraph.prebuilt.chat_agent_executor import AgentState
    from langgraph.store.base import BaseStore

from memci import tokens
from memci.context.system import ContextSystem
from memci.errors import StorageError
from memci.formats import from_langchain, to_langchain
from memci.integrations.langchain_messages import MIRRORS, MessageTrimmer
from memci.storage.json_store import Commit, JsonStore

__all__ = ["STATE_KEY", "ContextHook", "ContextState", "LangGraphStorage", "trim_hook"]

#: The graph-state key :class:`ContextHook` keeps the context system's JSON state under.
STATE_KEY = "memci"


# ---- the trim hook ------------------------------------------------------------------------------


def trim_hook(
    max_tokens: int,
    *,
    encoding: str = tokens.DEFAULT_ENCODING,
    keep_system: bool = True,
    start_on: str | None = "user",
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A ``pre_model_hook`` sending the model the newest messages of ``state["messages"]`` within
    ``max_tokens`` exact tokens, as ``llm_input_messages``: the state keeps everything. The trim is
    :class:`~memci.integrations.langchain_messages.MessageTrimmer`'s (whole tool groups, the
    graph's own message objects, each thread mirrored once, so a call costs O(new + kept))."""
    trimmer = MessageTrimmer(max_tokens, encoding=encoding, keep_system=keep_system, start_on=start_on)

    def hook(state: Mapping[str, Any]) -> dict[str, Any]:
        return {"llm_input_messages": trimmer.trim(list(state["messages"]))}

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
    """A prebuilt agent's state with the key :class:`ContextHook` keeps the context system in."""

    memci: dict[str, Any] | None


class ContextHook:
    """A ``pre_model_hook`` keeping the conversation in a :class:`~memci.ContextSystem` carried in
    graph state (see the module). Each call takes every message in ``state["messages"]`` into the
    context system (a human message ends the round before it, so the archive policies run between
    turns), removes them from the state, saves the system's JSON state under ``"memci"`` (archived
    pages to the graph's store, under ``namespace + (thread_id,)``) and sends the model
    ``build_messages()``. Give the agent :meth:`tools` so the model can recall pages. The graph's
    state schema must have a ``"memci"`` key: :class:`ContextState`, or your own."""

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
        #: thread id -> (the revision saved, the graph's store, the system), the newest last.
        self._systems: OrderedDict[str, tuple[Any, BaseStore, ContextSystem]] = OrderedDict()

    def storage(self, store: BaseStore, thread_id: str) -> LangGraphStorage:
        """The memci store of one thread in the graph's ``store``."""
        return LangGraphStorage(store, (*self.namespace, thread_id))

    def context(self, state: Mapping[str, Any], store: BaseStore, thread_id: str) -> ContextSystem:
        """The thread's context system as ``state`` carries it (a new one when it carries none).
        The system this hook saved last for the thread is reused when the state is the one it
        saved (same revision, same store), so a step costs what it adds, not a rebuild of the
        search index from every archived page."""
        saved = state.get(STATE_KEY)
        cached = self._systems.get(thread_id)
        if saved is not None and cached is not None:
            revision, cached_store, ctx = cached
            if revision == saved.get("revision") and cached_store is store:
                return ctx
        storage = self.storage(store, thread_id)
        if saved is None:
            return ContextSystem(None, tools="openai", storage=storage, summarizer=self.summarizer, **self.options)
        return ContextSystem.from_state(saved, storage, summarizer=self.summarizer)

    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        from langgraph.config import get_config, get_store

        thread_id = str(get_config().get("configurable", {}).get("thread_id", "default"))
        store = get_store()
        ctx = self.context(state, store, thread_id)
        new: list[BaseMessage] = list(state.get("messages") or ())
        if new:
            if any(isinstance(m, HumanMessage) for m in new):
                ctx.end_round()
            ctx.extend(from_langchain(new))
        ctx.save()
        saved = ctx.to_state()
        self._systems[thread_id] = (saved.get("revision"), store, ctx)
        while len(self._systems) > MIRRORS:
            self._systems.popitem(last=False)
        return {
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)],
            STATE_KEY: saved,
            "llm_input_messages": to_langchain(ctx.build_messages()),
        }

    def tools(self) -> list[StructuredTool]:
        """``recall_page`` and ``list_pages`` as LangChain tools for the agent: each reads the
        thread's archive from the graph's store."""
        definitions = ContextSystem(None).tool_definitions("openai")
        return [self._tool(d["function"]) for d in definitions]

    def _tool(self, function: Mapping[str, Any]) -> StructuredTool:
        name = str(function["name"])

        def run(**arguments: Any) -> str:
            from langgraph.config import get_config, get_store

            thread_id = str(get_config().get("configurable", {}).get("thread_id", "default"))
            storage = self.storage(get_store(), thread_id)
            saved = storage.load_state()
            ctx = ContextSystem(None, storage=storage) if saved is None else ContextSystem.from_state(saved, storage)
            call = {"id": "call", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            return str(ctx.handle_tool_call(call)["content"])

        return StructuredTool.from_function(
            func=run,
            name=name,
            description=str(function.get("description", "")),
            args_schema=dict(function.get("parameters") or {"type": "object", "properties": {}}),
        )
