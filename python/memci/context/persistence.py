"""Saving and loading a context system: :class:`Persistent`, the half of
:class:`~memci.ContextSystem` that stands on its page log.

The system writes through one :class:`~memci.storage.log.PageLog`: a page it archives is staged
there (an :class:`~memci.context.page.ArchivedPage`), and :meth:`Persistent.save` commits the staged
pages with the state (:class:`~memci.context.state.SavedState`) in one compare-and-set. Loading reads
the state, checks it against itself (:meth:`SavedState.from_dict`), then builds the system: O(the
state), whatever indices the state claims; no archived page is read until one is recalled, and the
search index is built at the first search (one batched read of the stored pages). Copies and
pickles travel as the same JSON state, with the pages not yet saved.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Self

from memci.context.agent_tools import checked_tools
from memci.context.contents import ArchivePolicy, DroppedEntries
from memci.context.counting import SystemTokens
from memci.context.cuts import DEFAULT_LOW_WATER, CutPolicy, StableContents
from memci.context.edits import Edit, WindowEdits, checked_edits
from memci.context.embedding import Embedder, decode_vector, encode_vector
from memci.context.page import ArchivedPage, Message
from memci.context.parts import SystemParts
from memci.context.search import PageSearch, message_texts, page_text
from memci.context.settings import checked_storage, system_message
from memci.context.state import SavedState
from memci.context.summary import Summarizer
from memci.errors import InvalidMessageError, InvalidOperationError, StateError
from memci.storage import Storage
from memci.storage.json_store import VECTOR_KEY
from memci.tokens import DEFAULT_ENCODING, DEFAULT_THINKING, Counter

if TYPE_CHECKING:
    pass

__all__ = ["AnySummarizerArg", "Persistent"]

#: What ``summarizer=`` takes (a summarizer, or a ``str -> str`` callable; None: the default).
AnySummarizerArg = Summarizer | Callable[[str], str] | None


class Persistent(SystemParts):
    """Saving, loading, copying and pickling a context system. The system's constructor and its
    parts are the subclass's (:class:`~memci.ContextSystem`); this half reads and writes them."""

    _has_prompt: bool
    _tools: str
    _active_pages: int
    _encoding: str
    _max_context_tokens: int | None
    _agent_tools: tuple[dict[str, Any], ...]
    _summarizer_arg: AnySummarizerArg
    _counter: Counter | None
    _tokens: SystemTokens
    _cuts: CutPolicy
    _shown: StableContents
    _edits: WindowEdits

    if TYPE_CHECKING:  # the subclass's constructor (ContextSystem's), which open and _build call

        def __init__(self, system_prompt: str | Message | None = None, **settings: Any) -> None: ...

    # ---- saving --------------------------------------------------------------------------------------

    def _saved(self, *, unsaved: bool = False) -> SavedState:
        """The system's state (with the pages archived since the last save when ``unsaved``)."""
        window = self._window
        return SavedState(
            self._round,
            window.next_index,
            window.messages()[0] if self._has_prompt else None,
            self._tools,
            self._active_pages,
            self._encoding,
            self._max_context_tokens,
            self._archive.policy,
            tuple((i, window.page(i)) for i in window.page_indices()),
            tuple(self._archive.entries.values()),
            tuple(self._archive.dropped.values()),
            self._log.head.revision,
            self._agent_tools,
            self._forgotten_through,
            tuple(ArchivedPage.from_dict(page, page["index"]) for page in self._log.staged) if unsaved else (),
            self._cuts.cache_stable,
            self._cuts.low_water,
            self._shown.saved() if self._cuts.cache_stable else None,
            self._edits.edits,
            self._edits.cleared_through if self._edits.clears else 0,
            self._edits.thinking_through if self._edits.clears_thinking else 0,
            self._archive.dropped.text(),
        )

    def state(self) -> dict[str, Any]:
        """The whole state as a JSON-able dict: :meth:`to_state`."""
        return self.to_state()

    def to_state(self) -> dict[str, Any]:
        """The whole state as a JSON-able dict, for a framework's state (a LangGraph channel, say):
        settings, round, active pages, contents and dropped entries, revision, and the pages
        archived since the last :meth:`save` (key ``"unsaved_pages"``, absent when there are none),
        so that :meth:`from_state` on the same storage takes the system up exactly, and its next
        save writes them. O(state + unsaved pages)."""
        with self._lock:
            return self._saved(unsaved=True).to_dict()

    def save(self) -> None:
        """Write the pages archived since the last save and the whole state to the storage, as one
        atomic commit of the next revision (which also deletes the pages ``clear(forget=True)``
        forgot). If another writer saved to the same storage since this system was loaded (or
        last saved), :class:`~memci.ConflictError` is raised and nothing is written: load again,
        redo the turn, save again."""
        with self._lock:
            saved = self._saved()
            late = self._search.late_vectors()
            live = range(saved.forgotten_through + 1, saved.pages_through + 1)
            self._log.commit(
                saved.body(),
                pages_through=saved.pages_through,
                forgotten_through=saved.forgotten_through,
                amended=self._with_late_vectors({i: v for i, v in late.items() if i in live}),
            )
            self._search.drop_late_vectors(list(late))

    def _with_late_vectors(self, late: dict[int, bytes]) -> list[dict[str, Any]]:
        """The stored pages of ``late`` (vectors search made for pages loaded without one) with
        their vector added, for the save to write back, so that a store written before vectors is
        embedded once, ever; pages still staged take theirs in the stage. A page stored with a
        vector of another dimension keeps it (a committed page may only gain a vector it lacks).
        One batched read of those pages; O(their size)."""
        staged = {page["index"] for page in self._log.staged}
        amended = []
        for index, page in self._log.pages(sorted(late)):
            if VECTOR_KEY in page:
                continue
            with_vector = {**page, VECTOR_KEY: encode_vector(late[index])}
            if index in staged:
                self._log.stage(with_vector)
            else:
                amended.append(with_vector)
        return amended

    # ---- loading -------------------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        storage: Storage,
        *,
        summarizer: AnySummarizerArg = None,
        counter: Counter | None = None,
        thinking: str = DEFAULT_THINKING,
        embedder: Embedder | None = None,
    ) -> Self:
        """The context system last saved to ``storage``, exactly: rounds, counts, the active pages
        with the open one, the contents and dropped entries; search finds what it found (its index
        is built from the stored pages at the first search, once). The summarizer and counter are
        not saved: pass them again if they are not the defaults. :class:`~memci.StateError` names
        what is wrong with a bad state, or says the storage holds none (:meth:`open` creates one
        then). An archived page the storage lost is reported when it is recalled. O(state): no
        archived page is read."""
        state = checked_storage(storage).load_state()
        if state is None:
            raise StateError("load: the storage holds no saved state")
        return cls._build(
            SavedState.from_dict(state), storage, summarizer, counter, thinking=thinking, embedder=embedder
        )

    @classmethod
    def from_state(
        cls,
        state: dict[str, Any],
        storage: Storage,
        *,
        summarizer: AnySummarizerArg = None,
        counter: Counter | None = None,
        thinking: str = DEFAULT_THINKING,
        embedder: Embedder | None = None,
    ) -> Self:
        """The system :meth:`to_state` described, on ``storage`` (the one holding its archived
        pages). :class:`~memci.StateError` names what is wrong with the state, or the archived
        pages it names that neither the storage nor the state holds. Search is built from the
        storage at the first search. O(state + the indices stored), whatever indices the state claims."""
        ctx = cls._build(
            SavedState.from_dict(state),
            checked_storage(storage),
            summarizer,
            counter,
            thinking=thinking,
            embedder=embedder,
        )
        missing = ctx._log.missing(ctx._log.held())
        if missing:
            shown_pages = ", ".join(map(str, missing)) + (", ..." if len(missing) >= 5 else "")
            raise StateError(
                f"from_state: the state names archived pages that neither it nor the storage holds ({shown_pages})"
            )
        return ctx

    def _restore(self, saved: SavedState) -> None:
        """Take up ``saved`` in a new system built with its settings: the round, the active pages
        (the core checks their messages), the contents and dropped entries, the unsaved pages
        (staged for the next save); the live pages the storage holds are indexed for search at the
        first search (:meth:`_searched`). O(state)."""
        self._round = saved.round
        self._forgotten_through = saved.forgotten_through
        self._log.take(saved.head.to_dict())
        for page in saved.unsaved:
            self._log.stage(page.to_dict())
        for i, (index, messages) in enumerate(saved.pages):
            try:
                self._window.open_page_at(index, messages)
            except (InvalidOperationError, InvalidMessageError) as e:
                raise StateError(f"load: state['pages'][{i}]: {e}") from None
        if not saved.pages and saved.next_index > 1:
            # An empty window after archived pages (after clear(), or a pop of the open page's
            # last message): the index goes on from the saved one. The core window takes an index
            # only with a page, so one is opened at the last index given and unlinked at once.
            self._window.open_page_at(saved.next_index - 1, [{"role": "user", "content": ""}])
            self._window.detach(saved.next_index - 1)
        if saved.next_index != self._window.next_index:
            raise StateError(
                f"load: state['next_index'] is {saved.next_index}, but the active pages make it "
                f"{self._window.next_index}"
            )
        for entry in saved.contents:
            self._archive.add(entry)
        self._archive.dropped = DroppedEntries(saved.dropped, saved.dropped_rows)
        self._shown.restore(saved.stable_contents)
        self._edits.cleared_through = saved.cleared_through
        self._edits.thinking_through = saved.thinking_through
        self._unindexed_through = saved.pages_through

    def _searched(self) -> PageSearch:
        """The search index, holding every live page: at the first search after a load, the pages
        stored then are read (one batched read) and indexed, once; pages archived since are in it
        already. Called under the system's lock. O(stored pages) that once, O(1) after."""
        if self._unindexed_through:
            held = [index for index in self._log.held() if index <= self._unindexed_through]
            self._search.extend(self._search_texts(self._log.pages(held)))
            self._unindexed_through = 0
        return self._search

    def _search_texts(self, pages: Iterable[tuple[int, dict[str, Any]]]) -> Iterable[tuple[int, str, bytes | None]]:
        """Each page's searchable text and stored vector (a page that is not an archived page is
        searched as text; a page stored without a vector, or with one of another dimension than
        the rest, is embedded at the first search, once)."""
        hybrid = self._search.embedder is not None
        for index, page in pages:
            summary, messages = page.get("summary"), page.get("messages")
            texts = message_texts(messages if isinstance(messages, list) else [])
            vector = decode_vector(page.get("vector")) if hybrid else None
            yield index, page_text(summary if isinstance(summary, str) else "", texts), vector

    # ---- opening -------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        storage: Storage,
        system_prompt: str | Message | None = None,
        *,
        tools: str | None = None,
        agent_tools: Iterable[Any] | None = None,
        active_pages: int | None = None,
        summarizer: AnySummarizerArg = None,
        policy: ArchivePolicy | None = None,
        encoding: str | None = None,
        max_context_tokens: int | None = None,
        counter: Counter | None = None,
        thinking: str = DEFAULT_THINKING,
        cache_stable: bool | None = None,
        low_water: float | None = None,
        embedder: Embedder | None = None,
        context_edits: Iterable[Edit] | None = None,
    ) -> Self:
        """Load or create: the system saved to ``storage``, continuing its conversation, or a new
        one on it if it holds no state. Each setting given (not None) applies, replacing the saved
        one (your code's configuration wins: a new prompt, new agent tools, a new limit); each not
        given keeps the saved value (or the constructor's default for a new system). New
        ``context_edits`` (other than the saved ones) start their boundary again. The
        summarizer and counter are code: pass them each time. Nothing is written until
        :meth:`save`."""
        state = checked_storage(storage).load_state()
        if state is None:
            return cls(
                system_prompt,
                tools=tools,
                agent_tools=agent_tools,
                active_pages=5 if active_pages is None else active_pages,
                storage=storage,
                summarizer=summarizer,
                policy=policy,
                encoding=DEFAULT_ENCODING if encoding is None else encoding,
                max_context_tokens=max_context_tokens,
                counter=counter,
                thinking=thinking,
                cache_stable=cache_stable,
                low_water=DEFAULT_LOW_WATER if low_water is None else low_water,
                embedder=embedder,
                context_edits=context_edits,
            )
        overrides: dict[str, Any] = {
            "system_prompt": system_message(system_prompt),
            "tools": tools,
            "agent_tools": None if agent_tools is None else checked_tools(agent_tools),
            "active_pages": active_pages,
            "policy": policy,
            "encoding": encoding,
            "max_context_tokens": max_context_tokens,
            "cache_stable": cache_stable,
            "low_water": low_water,
        }
        saved = dataclasses.replace(
            SavedState.from_dict(state), **{k: v for k, v in overrides.items() if v is not None}
        )
        if context_edits is not None:
            edits = checked_edits(context_edits)
            if edits != saved.context_edits:
                saved = dataclasses.replace(saved, context_edits=edits, cleared_through=0, thinking_through=0)
        return cls._build(saved, storage, summarizer, counter, thinking=thinking, embedder=embedder)

    @classmethod
    def _build(
        cls,
        saved: SavedState,
        storage: Storage,
        summarizer: AnySummarizerArg,
        counter: Counter | None,
        *,
        thinking: str = DEFAULT_THINKING,
        embedder: Embedder | None = None,
    ) -> Self:
        """A system built with ``saved``'s settings (and the code given: summarizer, counter, the
        thinking rule), taking up its state."""
        try:
            ctx = cls(
                saved.system_prompt,
                tools=saved.tools,  # the constructor checks it
                agent_tools=saved.agent_tools,
                active_pages=saved.active_pages,
                storage=storage,
                summarizer=summarizer,
                policy=saved.policy,
                encoding=saved.encoding,
                max_context_tokens=saved.max_context_tokens,
                counter=counter,
                thinking=thinking,
                cache_stable=saved.cache_stable,
                low_water=saved.low_water,
                embedder=embedder,
                context_edits=saved.context_edits,
            )
        except (InvalidOperationError, InvalidMessageError, TypeError) as e:
            raise StateError(f"load: {e}") from None
        ctx._restore(saved)
        return ctx

    # ---- copies and pickles ---------------------------------------------------------------------------

    def _snapshot(self) -> SavedState:
        """The state with its unsaved pages, as a JSON-made copy (nothing shared with this system)."""
        with self._lock:
            text = json.dumps(self._saved(unsaved=True).to_dict(), ensure_ascii=False)
        return SavedState.from_dict(json.loads(text))

    @property
    def storage(self) -> Storage:
        return self._log.storage

    def __copy__(self) -> Self:
        """A system with the same state on the same storage (and summarizer and counter): the two
        go on independently, and the second to save over the same revision gets
        :class:`~memci.ConflictError`. Pages this one archived since its last save are copied.
        O(state + archived pages)."""
        return self._rebuilt(self._snapshot(), self.storage)

    def _rebuilt(self, saved: SavedState, storage: Storage) -> Self:
        """A system taking up ``saved`` on ``storage``, with this one's code and configuration
        (summarizer, counter, thinking rule, embedder)."""
        return type(self)._build(
            saved,
            storage,
            self._summarizer_arg,
            self._counter,
            thinking=self._tokens.thinking,
            embedder=self._search.embedder,
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        """As :func:`copy.copy`, with a deep copy of the storage: a ``MemoryStorage`` is copied
        with its pages; a SQLite or directory store is opened again on the same file or folder;
        a store that cannot be copied raises :class:`~memci.StorageError`. The summarizer and
        counter (code) are shared."""
        saved = self._snapshot()
        return self._rebuilt(saved, copy.deepcopy(self.storage, memo))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as JSON text (the state with the pages archived since the last save), never as
        pickled messages, with its storage (a ``MemoryStorage`` as its JSON texts, a SQLite or
        directory store by path; other stores raise :class:`~memci.StorageError`) and the
        summarizer and counter it was given (None for the defaults; yours must be picklable)."""
        text = json.dumps(self._snapshot().to_dict(), ensure_ascii=False)
        return (
            _unpickle,
            (
                type(self),
                text,
                self.storage,
                self._summarizer_arg,
                self._counter,
                self._tokens.thinking,
                self._search.embedder,
            ),
        )


def _unpickle(  # noqa: PLR0917  # pickle calls it with positional arguments only
    cls: type[Persistent],
    text: str,
    storage: Storage,
    summarizer: AnySummarizerArg,
    counter: Counter | None,
    thinking: str = DEFAULT_THINKING,
    embedder: Embedder | None = None,
) -> Persistent:
    """A system from what :meth:`Persistent.__reduce__` pickled."""
    return cls._build(
        SavedState.from_dict(json.loads(text)), storage, summarizer, counter, thinking=thinking, embedder=embedder
    )
