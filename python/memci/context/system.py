"""The paged context system: :class:`ContextSystem`.

The window the model sees has two segments. The **system segment** holds the system prompt and the
description of the recall tools. The **common segment** holds the **archive chapter**, which the
model sees as one system message, the **contents page**, and the **active chapter**: the last
``active_pages`` pages, in full. A **page** is one user interaction: a user message and the
assistant and tool messages it caused, each an **entry**. Pages live in the Rust core as runs of
nodes over one shared chain (:class:`memci._core.PageWindow`); archiving a page unlinks its run in
O(1). When a page leaves the window is decided here; when a contents entry is dropped, in
:mod:`~memci.context.contents`. The recall tools' calls are parsed and answered by
:mod:`~memci.context.recall` and run here; the saved state is :mod:`~memci.context.state`.

Semantics and decisions: ``docs/context-system.md``.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from memci import _core, tokens
from memci.context import recall
from memci.context.agent_tools import checked_tools, tool_in
from memci.context.contents import (
    ArchiveChapter,
    ArchivePolicy,
    ContentsEntry,
    DroppedEntry,
    RoundResult,
)
from memci.context.counting import Sent, SystemTokens
from memci.context.cuts import DEFAULT_LOW_WATER, CutPolicy, StableContents, fewest_to_cut
from memci.context.edits import Edit, WindowEdits, checked_edits
from memci.context.embedding import Embedder, checked_embedder
from memci.context.lock import SystemLock
from memci.context.page import ArchivedPage, Message, Page
from memci.context.persistence import Persistent
from memci.context.recalling import Recalling
from memci.context.search import CONVERSATION_NEIGHBOUR_WEIGHT, PageSearch, page_text
from memci.context.settings import checked_storage, positive, system_message
from memci.context.state import STATE_KIND
from memci.context.summary import PageSummary, Summarizer, as_summarizer, checked, summarize_read
from memci.context.views import SystemViews
from memci.errors import (
    ContextOverflowError,
    InvalidMessageError,
    InvalidOperationError,
    repr_of,
)
from memci.formats import SdkObject, dumped
from memci.sanitize import sanitize_messages
from memci.storage import MemoryStorage, Storage
from memci.storage.log import PageLog
from memci.tokens import Counter

if TYPE_CHECKING:
    from memci.formats import AnthropicTool, ChatMessage, ChatTool, ResponsesTool

__all__ = ["ContextSystem"]

ToolFormat = recall.Format

#: DEBUG events: ``archive`` (page, round, reason), ``drop`` (page, round, rule), ``recall`` (page,
#: round, count), ``clear`` and ``pop``.
log = logging.getLogger("memci.context")


def _read_back(messages: list[Message]) -> tuple[list[Message], list[str], list[tuple[str, str]]]:
    """``messages`` as the window gives them back (checked and copied by the core), the
    searchable text and the entry text of each, before they are added."""
    scratch = _core.PageWindow()
    index = scratch.open_page(messages)
    return scratch.page_texts(index)


@dataclass(frozen=True, slots=True)
class _Extension:
    """Messages to add, with what adding them needs done first: the positions of those that open
    a page, and the pages they make leave the window, summarised, with their searchable text and
    vector."""

    batch: list[Message]
    opens: frozenset[int]
    prepared: list[tuple[Page, PageSummary, str]]
    vectors: list[bytes | None]


class ContextSystem(Persistent, Recalling, SystemViews):
    """An agent's context window, paged by user interaction, with an archive the model recalls from.

    ``add`` messages as they happen (a user message opens a page; assistant and tool messages join
    the open one), call ``end_round`` when a round of conversation is over, and send the model
    ``build_messages()`` with ``tool_definitions()``. Answer its recall calls with
    ``handle_tool_call`` and ``add`` the result like any tool result. Methods are atomic with
    respect to each other (one lock); the storage's own calls happen under it, and so do the
    summarizer's and the counter's: none of them may call back into the system.
    """

    def __init__(
        self,
        system_prompt: str | Message | None = None,
        *,
        tools: ToolFormat | None = None,
        agent_tools: Iterable[Any] | None = None,
        active_pages: int = 5,
        storage: Storage | None = None,
        summarizer: Summarizer | Callable[[str], str] | None = None,
        policy: ArchivePolicy | None = None,
        encoding: str = tokens.DEFAULT_ENCODING,
        max_context_tokens: int | None = None,
        counter: Counter | None = None,
        thinking: str = tokens.DEFAULT_THINKING,
        cache_stable: bool | None = None,
        low_water: float = DEFAULT_LOW_WATER,
        embedder: Embedder | None = None,
        context_edits: Iterable[Edit] | None = None,
    ) -> None:
        """``system_prompt``: a string or a system/developer message, or None (or ``""``) for none:
        then the recall tools' note is the only system message. ``tools``: the protocol the
        system segment describes the recall tools in (``"openai"``, the default, ``"anthropic"``
        and ``"responses"`` for native tool calls; ``"attp"`` for the TOML protocol).
        ``agent_tools``: the agent's own tool definitions (OpenAI, Anthropic or Responses function
        tools, or any other tool dict), returned by :meth:`tool_definitions` before the recall
        tools and counted against ``max_context_tokens``. ``active_pages``
        (n): pages kept whole in the window. ``storage``: where archived pages go (default
        ``memci.MemoryStorage()``). ``summarizer``: a :class:`~memci.summary.Summarizer` or a
        ``str -> str`` callable (default: extractive). ``counter``: a message counter (a
        message dict in, its tokens out) to use instead of ``memci.tokens`` with ``encoding``.
        ``thinking``: whether the thinking of earlier assistant turns counts (``"drop_earlier"``,
        the providers' default, or ``"count"``; see :mod:`memci.tokens`); like the counter, it is
        configuration, not state: copies keep it, :meth:`load` takes it again. ``cache_stable``:
        cut in blocks with hysteresis so consecutive requests share their prefix (None: on under
        ``max_context_tokens``, off with page counts alone, the seed's exact rules); ``low_water``:
        what a cut leaves, as a share of the budget (with page counts: ``active_pages`` is the
        low-water mark, ``active_pages / low_water`` the high one). See :mod:`memci.context.cuts`.
        ``embedder``: a callable from a list of texts to one vector per text (sync or async; lists
        or a numpy array): each archived page is embedded once, in one call per archiving step, its
        vector stored with the page, and :meth:`search` fuses BM25 with cosine similarity
        (:class:`~memci.PageSearch`); code too, passed again to :meth:`load`. Default None: BM25
        alone. ``context_edits``: :class:`memci.ops.ClearToolUses` /
        :class:`~memci.ops.ClearThinking` applied to each window built, never to the pages stored
        (see :mod:`memci.context.edits`); saved with the state like the other settings."""
        if tools is None:
            tools = "openai"
        if tools not in recall.FORMATS:
            raise InvalidOperationError(
                f"ContextSystem: tools must be one of {', '.join(recall.FORMATS)}, got {repr_of(tools)}"
            )
        if policy is None:
            policy = ArchivePolicy()
        if not isinstance(policy, ArchivePolicy):
            raise InvalidOperationError(f"ContextSystem: policy must be an ArchivePolicy, got {type(policy).__name__}")
        _core.encoding_name(encoding, "ContextSystem")  # refuses an unknown encoding, named
        self._tools: ToolFormat = tools
        self._active_pages = positive("active_pages", active_pages)
        self._max_context_tokens = (
            None if max_context_tokens is None else positive("max_context_tokens", max_context_tokens)
        )
        self._encoding = encoding
        self._tokens = SystemTokens(encoding, counter, thinking)
        edits = checked_edits(context_edits)
        #: What was passed (code, not state): copies and pickles carry these.
        self._summarizer_arg, self._counter = summarizer, counter
        self._summarizer = as_summarizer(summarizer)
        self._agent_tools = checked_tools(agent_tools)
        self._log = PageLog(MemoryStorage() if storage is None else checked_storage(storage), STATE_KIND)
        self._lock = SystemLock()
        self._round = 0
        self._window = _core.PageWindow()
        note = {"role": "system", "content": recall.system_note(tools)}
        prompt = system_message(system_prompt)
        self._has_prompt = prompt is not None
        # Stored (checked and copied) by the core: state() reads it back, so nothing aliases it.
        self._window.set_system([note] if prompt is None else [prompt, note])
        self._system_len = self._window.system_len
        #: Tokens of the tool definitions every request carries (:meth:`tool_tokens`).
        self._tool_tokens = self._tokens.lines(json.dumps(self._tools_sent(), ensure_ascii=False))
        self._archive = ArchiveChapter(
            policy, self._tokens.text_message, self._tokens.lines, recall.contents_hint(tools)
        )
        self._cuts = CutPolicy.of(cache_stable, low_water, self._active_pages, self._max_context_tokens)
        self._shown = StableContents(self._cuts, self._archive.render, self._archive.tokens, self._tokens.text_message)
        self._edits = self._window_edits(edits)
        self._search = PageSearch(
            embedder=checked_embedder(embedder, "ContextSystem"), neighbour_weight=CONVERSATION_NEIGHBOUR_WEIGHT
        )
        # Pages up to this index were forgotten (clear(forget=True)); the next save deletes them.
        # (Pages archived since the last save are staged in the log: written with the next state, in
        # one commit, so a crash before it leaves the store at the last save.)
        self._forgotten_through = 0
        self._unindexed_through = 0

    # ---- the conversation ------------------------------------------------------------------------

    def add(self, message: Message | SdkObject) -> int:
        """Add one message (a chat or Anthropic message, or a Responses item); returns the index of
        the page it opened or joined. O(message) plus, when a page opens beyond ``active_pages``,
        archiving the oldest (summary, O(1) unlink; the page is written by the next :meth:`save`).

        A user message (or user message item) opens a new page, unless it only carries tool
        results (Anthropic ``tool_result`` blocks, an ATTP ``[tool_result]``); every other message
        joins the open page (the first message of all opens one, whatever its role). Invalid
        messages raise :class:`~memci.InvalidMessageError`; if archiving fails (the summarizer
        raises), the message is taken back and the error propagates: nothing has changed. An SDK
        object (anything with ``model_dump``) is taken as its dump, as ``MessageArray`` takes it.
        """
        plain = dumped(message)
        if not isinstance(plain, dict):
            raise InvalidMessageError(f"message: a message must be a dict, got {type(plain).__name__}", path="message")
        with self._lock:
            return self._add(plain)

    @staticmethod
    def _opens(message: Message, has_page: bool) -> bool:
        """Whether ``message`` opens a page: a user message that is not only tool results, or the
        first message of all."""
        return not has_page or (message.get("role") == "user" and not recall.is_tool_result(message))

    def _add(self, message: Message) -> int:
        """Add one message. Every page it makes leave the window is summarised before any leaves:
        if a summarizer raises, the message is taken back and nothing has changed."""
        window = self._window
        if not self._opens(message, bool(window.active_count)):
            return window.join(message)
        index = window.open_page(message)
        try:
            leaving = window.page_indices()[: self._cuts.leaving(window.active_count - 1, 1)]
            prepared = [self._prepare(i) for i in leaving]
            vectors = self._search.stored_vectors([text for _, _, text in prepared])
        except BaseException:
            window.undo_open(index)
            raise
        self._archive_pages(prepared, "active_pages", vectors)
        self._after_cut(prepared)
        return index

    def _extend(self, batch: list[Message]) -> list[int]:
        """Add checked messages in order, all or nothing (:meth:`_prepared_extension`, then
        :meth:`_apply_extension`). The result is what adding them one by one gives."""
        return self._apply_extension(self._prepared_extension(batch))

    def _prepared_extension(self, batch: list[Message]) -> _Extension:
        """What adding checked messages needs done before anything changes: the pages the batch
        makes leave the window (the oldest, down to ``active_pages`` after its last opening),
        read, summarised and embedded, from the window and from the batch itself. Raises what a
        summarizer or the embedder raises, with nothing changed. Reads the window only."""
        window = self._window
        existing = window.page_indices()
        opens: list[int] = []
        for i, message in enumerate(batch):
            if self._opens(message, bool(existing or opens)):
                opens.append(i)
        leaving = self._cuts.leaving(len(existing), len(opens))
        prepared = []
        for j in range(leaving):
            if j < len(existing):
                messages, texts, lines = window.page_texts(existing[j])
                if j == len(existing) - 1 and opens[0] > 0:  # the open page, and the batch's first messages
                    more, more_texts, more_lines = _read_back(batch[: opens[0]])
                    messages, texts, lines = messages + more, texts + more_texts, lines + more_lines
                prepared.append(self._summarised(existing[j], messages, texts, lines))
            else:
                at = j - len(existing)
                end = opens[at + 1] if at + 1 < len(opens) else len(batch)
                prepared.append(self._summarised(window.next_index + at, *_read_back(batch[opens[at] : end])))
        vectors = self._search.stored_vectors([text for _, _, text in prepared])
        return _Extension(batch, frozenset(opens), prepared, vectors)

    def _apply_extension(self, extension: _Extension) -> list[int]:
        """Add the messages of a prepared extension and archive the pages it prepared: the page
        index of each message."""
        window = self._window
        indices = [
            window.open_page(m) if i in extension.opens else window.join(m) for i, m in enumerate(extension.batch)
        ]
        self._archive_pages(extension.prepared, "active_pages", extension.vectors)
        self._after_cut(extension.prepared)
        return indices

    def extend(self, messages: Sequence[Message | SdkObject]) -> list[int]:
        """:meth:`add` each message in order, under one lock; the page index of each. Every message
        is checked first, by the rules :meth:`add` applies: if one is refused
        (:class:`~memci.InvalidMessageError` naming ``messages[i]``), none is added. O(messages)."""
        checked = self._checked(messages)
        with self._lock:
            return self._extend(checked)

    def feed(self, messages: Sequence[Message | SdkObject]) -> RoundResult | None:
        """Take the messages a framework added since it last fed the system (a turn's user message,
        the model's answers, tool results), in the one order every adapter uses: when they hold a
        new user request (a user message that opens a page, not one carrying tool results), the
        round ends first (:meth:`end_round`: the archive policies run between turns, before the
        request's page opens), then the messages are added in order (:meth:`extend`), under one
        lock. Every message is checked first, and the pages the messages make leave the window are
        summarised and embedded before the round ends: a refused message, or a summarizer or an
        embedder that raises, changes nothing, the round included, so the same call can be made
        again. The ended round's result, or None. O(messages)."""
        checked = self._checked(messages)
        with self._lock:
            extension = self._prepared_extension(checked)
            ended = None
            if any(self._opens(message, True) for message in checked):
                ended = self._end_round()
            self._apply_extension(extension)
            return ended

    @staticmethod
    def _checked(messages: Sequence[Message | SdkObject]) -> list[Message]:
        """``messages`` as dicts, each checked by the core's acceptance rules (nothing is kept)."""
        if isinstance(messages, dict | str) or not isinstance(messages, Sequence):
            raise InvalidMessageError(
                f"messages: expected a list of message dicts, got {type(messages).__name__}", path="messages"
            )
        batch = [dumped(m) for m in messages]
        for i, message in enumerate(batch):
            if not isinstance(message, dict):
                raise InvalidMessageError(
                    f"messages[{i}]: a message must be a dict, got {type(message).__name__}", path=f"messages[{i}]"
                )
        checked = cast("list[Message]", batch)
        _core.MessageStore().append(checked)  # the core's acceptance rules over all of them; nothing is kept
        return checked

    def end_round(self) -> RoundResult:
        """One round of conversation has ended: the round count rises by one, then the m rule, the
        p rule and LRU under the contents cap run, in that order. What each dropped is returned.
        With ``cache_stable`` the rules run at the next cut instead (nothing is dropped here)."""
        with self._lock:
            return self._end_round()

    def _end_round(self) -> RoundResult:
        self._round += 1
        dropped = [] if self._cuts.cache_stable else self._archive.end_round(self._round)
        self._log_drops(dropped)
        return RoundResult(self._round, tuple(dropped), self._shown.shown_tokens())

    def _after_cut(self, archived: Sequence[object]) -> None:
        """After pages left a cache-stable window (a cut): the archive rules run, the contents
        page is rewritten and the context edits' boundary may move, once for the cut."""
        if archived and self._cuts.cache_stable:
            self._log_drops(self._archive.end_round(self._round))
            self._shown.freeze()
            self._edits.moved(self._planned_edits(self._shown.shown()), self._window.page_indices())

    def _window_edits(self, edits: Sequence[Edit]) -> WindowEdits:
        """The context edits over this system's window, counted as the window is, moving at the
        cuts when the window is cache-stable."""
        return WindowEdits(edits, self._window.page, self._tokens.messages, at_cuts=self._cuts.cache_stable)

    def _planned_edits(self, contents: str | None) -> int:
        """Where the context edits' boundary moves now (:meth:`WindowEdits.planned`), on the
        window as it is with ``contents`` as its contents page; from the counts the window holds."""
        if not self._edits.clears:
            return self._edits.cleared_through
        tokens = self._tokens.without_oldest(self._window)[0] + self._tokens.contents(contents)
        return self._edits.planned(self._window.page_indices(), tokens)

    def _log_drops(self, dropped: Iterable[DroppedEntry]) -> None:
        for gone in dropped:
            log.debug(
                "drop page %d from the contents in round %d (%s)",
                gone.index,
                gone.dropped_round,
                gone.rule,
                extra={"page_index": gone.index, "round": gone.dropped_round, "reason": gone.rule},
            )

    def pop(self) -> Message:
        """Remove and return the last message of the window (of the open page). If it is the message
        that opened the page, the page goes with it and its index will be given again. Archived
        pages are never popped: with no active page, :class:`~memci.InvalidOperationError`. A page
        archived when the popped message opened its page stays archived. O(page)."""
        with self._lock:
            window = self._window
            indices = window.page_indices()
            if not indices:
                raise InvalidOperationError(
                    "pop: the window holds no message to pop (no active page; archived pages are not popped)"
                )
            index = indices[-1]
            messages = window.page(index)
            window.undo_open(index)
            if len(messages) > 1:
                window.open_page_at(index, messages[:-1])
            else:
                self._edits.popped(index)
            log.debug(
                "pop the last message of page %d in round %d",
                index,
                self._round,
                extra={"page_index": index, "round": self._round, "reason": "pop"},
            )
            return messages[-1]

    def clear(self, *, forget: bool = False) -> None:
        """Empty the window and the contents page. Without ``forget`` nothing is lost: the active
        pages are archived first (summarised, as any archived page), then every contents entry is
        dropped (rule ``"cleared"``); the pages stay stored, :meth:`search` finds them and
        :meth:`recall` brings one back. With ``forget=True`` the active pages are discarded, search
        and every entry emptied, recalls of the earlier indices refused, and the next :meth:`save`
        deletes the stored pages in the same commit as the state (until then a :meth:`load`
        finds the last saved state, with its pages). Indices go on rising; the round is unchanged.
        If a summarizer raises, nothing has changed. O(window + contents)."""
        if not isinstance(forget, bool):
            raise InvalidOperationError(f"clear: forget must be a bool, got {type(forget).__name__}")
        with self._lock:
            window = self._window
            indices = window.page_indices()
            if forget:
                for index in indices:
                    window.detach(index)
                self._log.unstage()
                self._search = PageSearch(
                    embedder=self._search.embedder, neighbour_weight=CONVERSATION_NEIGHBOUR_WEIGHT
                )
                self._unindexed_through = 0
                self._archive.forget()
                self._forgotten_through = window.next_index - 1
            else:
                self._archive_pages([self._prepare(index) for index in indices], "clear")
                self._log_drops(self._archive.clear(self._round))
            self._shown.freeze()
            log.debug(
                "clear in round %d (forget=%s)",
                self._round,
                forget,
                extra={"round": self._round, "reason": "forget" if forget else "clear"},
            )

    # ---- archiving ---------------------------------------------------------------------------------

    def _prepare(self, index: int) -> tuple[Page, PageSummary, str]:
        """An active page, its summary and its searchable text: one read of the window, which is all
        the page's archiving asks of the core but the O(1) detach."""
        return self._summarised(index, *self._window.page_texts(index))

    def _summarised(
        self, index: int, messages: list[Message], texts: list[str], lines: list[tuple[str, str]]
    ) -> tuple[Page, PageSummary, str]:
        """Page ``index`` of ``messages``, its summary and its searchable text (``texts``: each
        message's; ``lines``: each message's entry text, what a summary starts from)."""
        page = Page.of(index, messages)
        summary = checked(summarize_read(self._summarizer, page, lines), page)
        return page, summary, page_text(summary.summary, texts)

    def _new_entry(self, page: Page, summary: PageSummary) -> ContentsEntry:
        """The contents entry of a page archived now: never recalled, last-recall round = now."""
        return ContentsEntry(page.index, summary.summary, summary.entry_summaries, 0, self._round, self._round)

    def _archive_pages(
        self, prepared: list[tuple[Page, PageSummary, str]], reason: str, vectors: list[bytes | None] | None = None
    ) -> None:
        """Archive summarised active pages: the O(1) unlink, the contents entry and the search
        index; the page is staged in the log for the next :meth:`save`, which writes it with the
        state. ``reason`` (``"active_pages"``, ``"max_context_tokens"``, ``"clear"``) is logged.
        ``vectors``: the pages' (:meth:`PageSearch.stored_vectors`), else they are embedded first, in one call: if
        that fails, nothing has changed."""
        if vectors is None:
            vectors = self._search.stored_vectors([text for _, _, text in prepared])
        for (page, summary, text), vector in zip(prepared, vectors, strict=True):
            log.debug(
                "archive page %d in round %d (%s): %d messages",
                page.index,
                self._round,
                reason,
                len(page.entries),
                extra={"page_index": page.index, "round": self._round, "reason": reason},
            )
            stored = ArchivedPage(
                page.index, tuple(page.messages()), summary.summary, summary.entry_summaries, self._round, vector
            )
            self._log.stage(stored.to_dict())
            self._window.detach(page.index)
            self._archive.add(self._new_entry(page, summary))
            self._search.add(page.index, text, vector)

    # ---- what the model sees ----------------------------------------------------------------------

    def _assemble(self, contents: str | None, pages: Sequence[Message] | None = None) -> list[Message]:
        """System segment, contents page, then the active pages (or ``pages`` instead)."""
        window = self._window.messages()
        if pages is not None:
            window[self._system_len :] = pages
        if contents is not None:
            window.insert(self._system_len, {"role": "system", "content": contents})
        return window

    def build_messages(self, *, sanitize: bool = True) -> list[ChatMessage]:
        """What to send the model: the system segment, the contents page as one system message
        (left out while it has no entry), then the active pages; then ``memci.sanitize_messages``
        (``sanitize=False`` skips it). With ``max_context_tokens``, the oldest active pages (never
        the open one) are archived first until the window and the tool definitions
        (:meth:`tool_tokens`) fit; :class:`ContextOverflowError` if they cannot, and then nothing
        has changed. O(window)."""
        with self._lock:
            limit = self._max_context_tokens
            if self._cuts.cache_stable:
                messages = self._assemble(self._shown.shown()) if limit is None else self._cut(limit)
            elif limit is None:
                self._edits.moved(self._planned_edits(self._archive.render()), self._window.page_indices())
                messages = self._assemble(self._archive.render())
            else:
                fitted = self._fit(limit, self._planned_edits(self._archive.render()))
                messages = self._assemble(self._archive.render()) if fitted is None else fitted
            if self._edits.edits:
                messages = self._edited(messages)
        if not sanitize:
            return cast("list[ChatMessage]", messages)
        return cast("list[ChatMessage]", sanitize_messages(messages).messages)

    def _edited(self, window: list[Message]) -> list[Message]:
        """``window`` with the context edits applied to its pages (``memci.context.edits``)."""
        pages = [(i, self._window.page(i)) for i in self._window.page_indices()]
        return self._edits.apply_to(window, pages)

    @property
    def context_edits(self) -> tuple[Edit, ...]:
        """The context edits applied to each window built (saved with the state; setting new ones
        starts their boundary again: nothing is cleared until it next moves)."""
        return self._edits.edits

    @context_edits.setter
    def context_edits(self, edits: Iterable[Edit] | None) -> None:
        checked = checked_edits(edits)
        with self._lock:
            self._edits = self._window_edits(checked)

    def _fit(self, limit: int, edits_through: int) -> list[Message] | None:
        """Make the window and the tool definitions fit ``limit`` (``max_context_tokens``): archive
        the oldest active pages (never the open one), the fewest that make it fit, applying the
        contents cap (LRU) to the contents page as they join it; if archiving every page but the
        open one is not enough, drop contents entries too, least recently recalled first (rule
        ``"lru"``). Everything is planned on copies and committed only once it fits. Returns the
        window when it fitted as it was (None once it changed: it must be assembled again).
        Planning is arithmetic: the window's tokens without its k oldest pages come from the
        counts it holds (:meth:`SystemTokens.without_oldest`), less what the context edits save
        with their boundary at ``edits_through`` (committed with the plan), plus the planned
        contents page: the window is planned as it is sent."""
        budget = limit - self._tool_tokens
        contents = self._archive.render()
        indices = self._window.page_indices()
        saved = self._edits.savings(indices, edits_through)
        held = Sent(self._tokens.without_oldest(self._window), saved)
        tokens = held[0] + self._tokens.contents(contents)
        if tokens <= budget:
            self._edits.moved(edits_through, indices)
            return self._assemble(contents)
        prepared: list[tuple[Page, PageSummary, str]] = []

        def plan() -> tuple[ArchiveChapter, list[DroppedEntry], int]:
            """The contents chapter with the ``prepared`` pages archived and the cap applied, what
            the cap dropped, and the window's tokens then."""
            chapter = self._archive.copy()
            for page, summary, _ in prepared:
                chapter.add(self._new_entry(page, summary))
            dropped = chapter.apply_cap(self._round)
            return chapter, dropped, held[len(prepared)] + self._tokens.contents(chapter.render())

        chapter = self._archive.copy()
        dropped: list[DroppedEntry] = []
        for index in indices[:-1]:
            prepared.append(self._prepare(index))
            chapter, dropped, tokens = plan()
            if tokens <= budget:
                break
        while tokens > budget and chapter.entries:
            # By each entry's cached cost, then a recount of the contents page (tokens may merge
            # across entries); the pages' counts are held.
            dropped += chapter.drop_least_recent(self._round, tokens - budget)
            tokens = held[len(prepared)] + self._tokens.contents(chapter.render())
        if tokens > budget:
            tools = f" and {self._tool_tokens} tokens of tool definitions" if self._tool_tokens else ""
            if not indices:
                raise ContextOverflowError(
                    f"build_messages: the system segment alone needs {tokens} tokens{tools}, "
                    f"over max_context_tokens={limit}"
                )
            raise ContextOverflowError(
                f"build_messages: the window needs {tokens} tokens{tools} with every page but the open one "
                f"(page {indices[-1]}) archived and no contents entry, over max_context_tokens={limit}"
            )
        self._archive_pages(prepared, "max_context_tokens")
        for gone in dropped:
            self._archive.drop(gone.index, self._round, gone.rule)
        self._log_drops(dropped)
        self._edits.moved(edits_through, indices)
        return None

    def _cut(self, limit: int) -> list[Message]:
        """The cache-stable window under ``limit``: as it is while it fits; once over, a cut
        archives the fewest oldest pages (never the last ``active_pages``) that bring it to
        ``low_water`` of the budget (if the last ``active_pages`` alone are over the budget, older
        of them too, never the open one), runs the archive rules and, if the window is still above
        low water, drops contents entries least recently recalled first (rule ``"lru"``); then the
        contents page is rewritten. If that is over the budget, :meth:`_fit` archives the fewest
        pages that make it fit (raising, with nothing changed, if nothing can). Planned on copies,
        on the window as it is sent: the context edits' boundary moves first, at the cut (it moves
        only at cuts), and what the cleared pages save is taken off the held counts."""
        budget = limit - self._tool_tokens
        indices = self._window.page_indices()
        unedited = self._tokens.without_oldest(self._window)
        saved = self._edits.savings(indices, self._edits.through(indices))
        if unedited[0] - saved[0] + self._tokens.contents(self._shown.shown()) <= budget:
            return self._assemble(self._shown.shown())
        through = self._planned_edits(self._shown.shown())
        saved = self._edits.savings(indices, through)
        held = Sent(unedited, saved)
        prepared: list[tuple[Page, PageSummary, str]] = []

        def plan(k: int) -> tuple[ArchiveChapter, list[DroppedEntry], int]:
            """The chapter with the k oldest pages archived and the rules run, what they dropped,
            and the window's tokens then (the pages' from the counts the window holds)."""
            while len(prepared) < k:
                prepared.append(self._prepare(indices[len(prepared)]))
            chapter = self._archive.copy()
            for page, summary, _ in prepared[:k]:
                chapter.add(self._new_entry(page, summary))
            dropped = chapter.end_round(self._round)
            return chapter, dropped, held[k] + self._tokens.contents(chapter.render())

        target = self._cuts.low_target(budget)
        cut = fewest_to_cut(max(0, len(indices) - self._active_pages), target, lambda k: plan(k)[2])
        chapter, dropped, tokens = plan(cut)
        if tokens > budget and len(indices) - 1 > cut:  # the last pages alone are over: they yield too
            cut = fewest_to_cut(len(indices) - 1, target, lambda k: plan(k)[2])
            chapter, dropped, tokens = plan(cut)
        if tokens > target and chapter.entries:
            dropped += chapter.drop_least_recent(self._round, tokens - target)
            tokens = held[cut] + self._tokens.contents(chapter.render())
        if tokens <= budget:
            self._archive_pages(prepared[:cut], "cut")
            for gone in dropped:
                self._archive.drop(gone.index, self._round, gone.rule)
            self._log_drops(dropped)
            self._edits.moved(through, indices)
        else:
            self._fit(limit, through)
            self._log_drops(self._archive.end_round(self._round))
        self._shown.freeze()
        return self._assemble(self._shown.shown())

    def token_count(self) -> int:
        """Tokens of :meth:`build_messages` (without sanitizing), in the system's encoding."""
        with self._lock:
            indices = self._window.page_indices()
            saved = self._edits.savings(indices, self._edits.through(indices))[0]
            return self._tokens.without_oldest(self._window)[0] - saved + self._tokens.contents(self._shown.shown())

    def count_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of ``messages`` in the system's encoding (or by its ``counter``)."""
        return self._tokens.messages(messages)

    def contents_text(self) -> str | None:
        """The contents page's text as the model sees it (with ``cache_stable``, as written at the
        last cut), or None while no entry is visible."""
        with self._lock:
            return self._shown.shown()

    def contents_tokens(self) -> int:
        """Tokens of the contents page the model sees (0 while it has no entry)."""
        with self._lock:
            return self._shown.shown_tokens()

    @overload
    def tool_definitions(self, format: Literal["openai"] = "openai") -> list[ChatTool]: ...
    @overload
    def tool_definitions(self, format: Literal["anthropic"]) -> list[AnthropicTool]: ...
    @overload
    def tool_definitions(self, format: Literal["responses"]) -> list[ResponsesTool]: ...
    @overload
    def tool_definitions(self, format: Literal["attp"]) -> str: ...
    def tool_definitions(self, format: ToolFormat = "openai") -> list[Any] | str:
        """The tools to send the model: the agent's own (``agent_tools``, function tools converted
        to ``format``, other tools as given), then the recall tools, as OpenAI function tools,
        Anthropic tools or Responses function tools; for ``"attp"``, the recall tools' ATTP
        listing (text) alone. Fresh dicts each call. O(tools)."""
        if format not in recall.FORMATS:
            raise InvalidOperationError(
                f"tool_definitions: format must be one of {', '.join(recall.FORMATS)}, got {repr_of(format)}"
            )
        definitions = recall.tool_definitions(format)
        if isinstance(definitions, str):
            return definitions
        return [*(tool_in(format, tool) for tool in self._agent_tools), *definitions]

    def _tools_sent(self) -> list[dict[str, Any]]:
        """The tool definitions a request carries in the system's format (with ATTP, the agent's
        tools alone: the recall tools are described in the system segment)."""
        if self._tools == "attp":
            return [copy.deepcopy(tool) for tool in self._agent_tools]
        return cast("list[dict[str, Any]]", self.tool_definitions(self._tools))

    def tool_tokens(self) -> int:
        """Tokens of the tool definitions every request carries in the system's ``tools`` format
        (the agent's tools and the recall tools; with ATTP, the agent's tools alone), counted
        against ``max_context_tokens``: ``memci.tokens`` over their JSON text, an estimate of what
        the provider adds for tool schemas (it renders them in its own way). Counted once."""
        return self._tool_tokens

    @property
    def agent_tools(self) -> list[dict[str, Any]]:
        """The agent's own tool definitions, as given (copies)."""
        return copy.deepcopy(list(self._agent_tools))

    def __repr__(self) -> str:
        return (
            f"<memci.ContextSystem: round {self._round}, {len(self._window.page_indices())} active pages, "
            f"{len(self._archive.entries)} contents entries, {len(self._archive.dropped)} dropped>"
        )
