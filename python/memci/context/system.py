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
import dataclasses
import inspect
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from memci import _core, tokens
from memci.context import recall
from memci.context.agent_tools import checked_tools, tool_in
from memci.context.contents import (
    ArchiveChapter,
    ArchivePolicy,
    ContentsEntry,
    DroppedEntry,
    PageListing,
    RoundResult,
)
from memci.context.page import Message, Page, role_of
from memci.context.recall import InWindow, ListPages, ToolCall, ToolResult
from memci.context.search import PageSearch, SearchHit, message_texts, page_text
from memci.context.state import SavedState
from memci.context.summary import PageSummary, Summarizer, as_summarizer, checked
from memci.errors import (
    ContextOverflowError,
    InvalidMessageError,
    InvalidOperationError,
    PageError,
    StateError,
    repr_of,
    shown,
)
from memci.formats import SdkObject, dumped
from memci.sanitize import sanitize_messages
from memci.storage import MemoryStorage, Storage
from memci.tokens import Counter

if TYPE_CHECKING:
    from memci.formats import AnthropicTool, ChatMessage, ChatTool, ResponsesTool

__all__ = ["ContextSystem"]

ToolFormat = recall.Format

#: DEBUG events: ``archive`` (page, round, reason), ``drop`` (page, round, rule), ``recall`` (page,
#: round, count), ``clear`` and ``pop``.
log = logging.getLogger("memci.context")


class _Tokens:
    """Counts with ``memci.tokens`` in the system's encoding, or with the caller's message
    ``counter`` (as everywhere in memci: a message dict in, its tokens out). The contents page is
    counted as the system message it is sent as."""

    __slots__ = ("counter", "encoding", "overhead", "thinking")

    def __init__(self, encoding: str, counter: Counter | None, thinking: str = tokens.DEFAULT_THINKING) -> None:
        self.encoding, self.counter = tokens.resolve("ContextSystem", encoding, counter)
        self.thinking = tokens.thinking_rule("ContextSystem", thinking)
        #: What a system message costs beyond its text: subtracted from one entry's lines when
        #: they are counted alone.
        self.overhead = self.text_message("")

    def text_message(self, text: str) -> int:
        message = {"role": "system", "content": text}
        if self.counter is not None:
            return tokens.counted("ContextSystem: counter", self.counter, message)
        return tokens.count_message(message, self.encoding)

    def lines(self, text: str) -> int:
        """The tokens ``text`` adds to the contents page."""
        return max(0, self.text_message(text) - self.overhead)

    def messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        return tokens.count_messages(messages, self.encoding, counter=self.counter, thinking=self.thinking)


class _Lock:
    """The system's lock: a plain (not re-entrant) lock that refuses a call from the thread that
    holds it, which only a summarizer, counter or storage calling back into the system it serves
    can make, with :class:`~memci.InvalidOperationError` instead of a deadlock. No method of the
    system calls another that locks."""

    __slots__ = ("_lock", "_owner")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: The thread holding the lock (only that thread sets it to its own id).
        self._owner: int | None = None

    def __enter__(self) -> None:
        me = threading.get_ident()
        if self._owner == me:
            raise InvalidOperationError(
                "ContextSystem: called back from its own summarizer, counter or storage while it works "
                "(its methods are not re-entrant)"
            )
        self._lock.acquire()
        self._owner = me

    def __exit__(self, *_: object) -> None:
        self._owner = None
        self._lock.release()


def _system_message(prompt: str | Message | None) -> Message | None:
    """The system prompt as a message; None for no prompt (``None`` or ``""``)."""
    if prompt is None or (isinstance(prompt, str) and not prompt):
        return None
    if isinstance(prompt, str):
        return {"role": "system", "content": str.__str__(prompt)}
    if isinstance(prompt, dict):
        if prompt.get("role") not in ("system", "developer"):
            raise InvalidMessageError(
                f"system_prompt: role must be 'system' or 'developer', got {repr_of(prompt.get('role'))}",
                path="system_prompt.role",
            )
        return prompt
    raise InvalidMessageError(
        f"system_prompt must be a str or a system message dict, got {type(prompt).__name__}", path="system_prompt"
    )


def _storage(storage: object) -> Storage:
    """``storage`` if it has the :class:`~memci.Storage` methods, else a named error."""
    if inspect.iscoroutinefunction(getattr(storage, "save_state", None)):
        raise InvalidOperationError(
            f"ContextSystem: storage {type(storage).__name__} is async (its methods are coroutines): "
            "use memci.AsyncContextSystem"
        )
    if not isinstance(storage, Storage):
        raise InvalidOperationError(
            "ContextSystem: storage must be a memci.Storage (put_page, get_page, page_indices, save_state, "
            f"load_state, close), got {type(storage).__name__}"
        )
    return storage


def _positive(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOperationError(f"ContextSystem: {name} must be an int >= {minimum}, got {repr_of(value)}")
    return value


def _read_back(messages: list[Message]) -> tuple[list[Message], list[str]]:
    """``messages`` as the window gives them back (checked and copied by the core) and the
    searchable text of each, before they are added."""
    scratch = _core.PageWindow()
    index = scratch.open_page(messages)
    return scratch.page_texts(index)


class ContextSystem:
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
        configuration, not state: copies keep it, :meth:`load` takes it again."""
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
        self._active_pages = _positive("active_pages", active_pages)
        self._max_context_tokens = (
            None if max_context_tokens is None else _positive("max_context_tokens", max_context_tokens)
        )
        self._encoding = encoding
        self._tokens = _Tokens(encoding, counter, thinking)
        #: What was passed (code, not state): copies and pickles carry these.
        self._summarizer_arg, self._counter = summarizer, counter
        self._summarizer = as_summarizer(summarizer)
        self._agent_tools = checked_tools(agent_tools)
        self._storage: Storage = MemoryStorage() if storage is None else _storage(storage)
        self._lock = _Lock()
        self._round = 0
        self._window = _core.PageWindow()
        note = {"role": "system", "content": recall.system_note(tools)}
        prompt = _system_message(system_prompt)
        self._has_prompt = prompt is not None
        # Stored (checked and copied) by the core: state() reads it back, so nothing aliases it.
        self._window.set_system([note] if prompt is None else [prompt, note])
        self._system_len = self._window.system_len
        #: Tokens of the tool definitions every request carries (:meth:`tool_tokens`).
        self._tool_tokens = self._tokens.lines(json.dumps(self._tools_sent(), ensure_ascii=False))
        self._archive = ArchiveChapter(
            policy, self._tokens.text_message, self._tokens.lines, recall.contents_hint(tools)
        )
        self._search = PageSearch()
        # Pages archived since the last save: written with the next state, in one commit (a crash
        # before it leaves the store at the last save, with no page it does not name).
        self._pending: dict[int, dict[str, Any]] = {}
        # The revision of the state this system was loaded from or last saved as (0: never saved).
        self._revision = 0
        # Pages up to this index were forgotten (clear(forget=True)); the next save deletes them.
        self._forgotten_through = 0
        # Archived pages a restored state names that the storage does not hold (from_state checks).
        self._missing: list[int] = []

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
            leaving = window.page_indices()[: max(0, window.active_count - self._active_pages)]
            prepared = [self._prepare(i) for i in leaving]
        except BaseException:
            window.undo_open(index)
            raise
        self._archive_pages(prepared, "active_pages")
        return index

    def _extend(self, batch: list[Message]) -> list[int]:
        """Add checked messages in order, all or nothing: the pages the batch makes leave the
        window (the oldest, down to ``active_pages`` after its last opening) are read and
        summarised first, from the window and from the batch itself; only then does anything
        change. The result is what adding them one by one gives."""
        window = self._window
        existing = window.page_indices()
        opens: list[int] = []
        for i, message in enumerate(batch):
            if self._opens(message, bool(existing or opens)):
                opens.append(i)
        leaving = max(0, len(existing) + len(opens) - self._active_pages) if opens else 0
        prepared = []
        for j in range(leaving):
            if j < len(existing):
                messages, texts = window.page_texts(existing[j])
                if j == len(existing) - 1 and opens[0] > 0:  # the open page, and the batch's first messages
                    more, more_texts = _read_back(batch[: opens[0]])
                    messages, texts = messages + more, texts + more_texts
                prepared.append(self._summarised(existing[j], messages, texts))
            else:
                at = j - len(existing)
                end = opens[at + 1] if at + 1 < len(opens) else len(batch)
                messages, texts = _read_back(batch[opens[at] : end])
                prepared.append(self._summarised(window.next_index + at, messages, texts))
        opening = set(opens)
        indices = [window.open_page(m) if i in opening else window.join(m) for i, m in enumerate(batch)]
        self._archive_pages(prepared, "active_pages")
        return indices

    def extend(self, messages: Sequence[Message | SdkObject]) -> list[int]:
        """:meth:`add` each message in order, under one lock; the page index of each. Every message
        is checked first, by the rules :meth:`add` applies: if one is refused
        (:class:`~memci.InvalidMessageError` naming ``messages[i]``), none is added. O(messages)."""
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
        with self._lock:
            return self._extend(checked)

    def end_round(self) -> RoundResult:
        """One round of conversation has ended: the round count rises by one, then the m rule, the
        p rule and LRU under the contents cap run, in that order. What each dropped is returned."""
        with self._lock:
            self._round += 1
            dropped = self._archive.end_round(self._round)
            self._log_drops(dropped)
            return RoundResult(self._round, tuple(dropped), self._archive.tokens())

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
                self._pending.clear()
                self._search = PageSearch()
                self._archive.forget()
                self._forgotten_through = window.next_index - 1
            else:
                self._archive_pages([self._prepare(index) for index in indices], "clear")
                self._log_drops(self._archive.clear(self._round))
            log.debug(
                "clear in round %d (forget=%s)",
                self._round,
                forget,
                extra={"round": self._round, "reason": "forget" if forget else "clear"},
            )

    # ---- archiving ---------------------------------------------------------------------------------

    def _prepare(self, index: int) -> tuple[Page, PageSummary, str]:
        """An active page, its summary and its searchable text (one read of the window)."""
        return self._summarised(index, *self._window.page_texts(index))

    def _summarised(self, index: int, messages: list[Message], texts: list[str]) -> tuple[Page, PageSummary, str]:
        """Page ``index`` of ``messages``, its summary and its searchable text (``texts``: each
        message's)."""
        page = Page.of(index, messages)
        summary = checked(self._summarizer.summarize(page), page)
        return page, summary, page_text(summary.summary, texts)

    def _new_entry(self, page: Page, summary: PageSummary) -> ContentsEntry:
        """The contents entry of a page archived now: never recalled, last-recall round = now."""
        return ContentsEntry(page.index, summary.summary, summary.entry_summaries, 0, self._round, self._round)

    def _archive_pages(self, prepared: list[tuple[Page, PageSummary, str]], reason: str) -> None:
        """Archive summarised active pages: the O(1) unlink, the contents entry and the search
        index; the page waits in ``_pending`` for the next :meth:`save`, which writes it with the
        state. ``reason`` (``"active_pages"``, ``"max_context_tokens"``, ``"clear"``) is logged."""
        for page, summary, text in prepared:
            log.debug(
                "archive page %d in round %d (%s): %d messages",
                page.index,
                self._round,
                reason,
                len(page.entries),
                extra={"page_index": page.index, "round": self._round, "reason": reason},
            )
            stored = {
                "index": page.index,
                "messages": page.messages(),
                "summary": summary.summary,
                "entry_summaries": list(summary.entry_summaries),
                "archived_round": self._round,
            }
            self._pending[page.index] = stored
            self._window.detach(page.index)
            self._archive.add(self._new_entry(page, summary))
            self._search.add(page.index, text)

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
            messages = None if limit is None else self._fit(limit)
            if messages is None:
                messages = self._assemble(self._archive.render())
        if not sanitize:
            return cast("list[ChatMessage]", messages)
        return cast("list[ChatMessage]", sanitize_messages(messages).messages)

    def _fit(self, limit: int) -> list[Message] | None:
        """Make the window and the tool definitions fit ``limit`` (``max_context_tokens``): archive
        the oldest active pages (never the open one), the fewest that make it fit, applying the
        contents cap (LRU) to the contents page as they join it; if archiving every page but the
        open one is not enough, drop contents entries too, least recently recalled first (rule
        ``"lru"``). Everything is planned on copies and committed only once it fits. Returns the
        window when it fitted as it was (None once it changed: it must be assembled again)."""
        budget = limit - self._tool_tokens
        window = self._assemble(self._archive.render())
        tokens = self._tokens.messages(window)
        if tokens <= budget:
            return window
        indices = self._window.page_indices()
        pages = {i: self._window.page(i) for i in indices}
        prepared: list[tuple[Page, PageSummary, str]] = []

        def plan() -> tuple[ArchiveChapter, list[DroppedEntry], int]:
            """The contents chapter with the ``prepared`` pages archived and the cap applied, what
            the cap dropped, and the window's tokens then."""
            chapter = self._archive.copy()
            for page, summary, _ in prepared:
                chapter.add(self._new_entry(page, summary))
            dropped = chapter.apply_cap(self._round)
            rest = [m for i in indices[len(prepared) :] for m in pages[i]]
            return chapter, dropped, self._tokens.messages(self._assemble(chapter.render(), rest))

        chapter = self._archive.copy()
        dropped: list[DroppedEntry] = []
        for index in indices[:-1]:
            prepared.append(self._prepare(index))
            chapter, dropped, tokens = plan()
            if tokens <= budget:
                break
        rest = [m for i in indices[len(prepared) :] for m in pages[i]]
        while tokens > budget and chapter.entries:
            # By each entry's cached cost, then a recount (tokens may merge across entries).
            dropped += chapter.drop_least_recent(self._round, tokens - budget)
            tokens = self._tokens.messages(self._assemble(chapter.render(), rest))
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
        return None

    def token_count(self) -> int:
        """Tokens of :meth:`build_messages` (without sanitizing), in the system's encoding."""
        with self._lock:
            return self._tokens.messages(self._assemble(self._archive.render()))

    def count_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of ``messages`` in the system's encoding (or by its ``counter``)."""
        return self._tokens.messages(messages)

    def contents_text(self) -> str | None:
        """The contents page's text, or None while no entry is visible."""
        with self._lock:
            return self._archive.render()

    def contents_tokens(self) -> int:
        """Tokens of the contents page (0 while it has no entry)."""
        with self._lock:
            return self._archive.tokens()

    # ---- recall --------------------------------------------------------------------------------------

    def is_active(self, page_index: int) -> bool:
        """True while page ``page_index`` is in the window (not archived)."""
        return page_index in self._window.page_indices()

    def _check_index(self, page_index: object) -> int:
        if isinstance(page_index, bool) or not isinstance(page_index, int):
            raise PageError(f"recall: page_index must be an int, got {shown(page_index)}")
        last = self._window.next_index - 1
        if not 1 <= page_index <= last:
            pages = "no page exists yet" if last == 0 else f"pages are 1 to {last}"
            raise PageError(f"recall: page {shown(page_index)} does not exist ({pages})")
        if page_index <= self._forgotten_through:
            raise PageError(f"recall: page {page_index} was forgotten (clear(forget=True))")
        return page_index

    def _stored(self, index: int) -> dict[str, Any]:
        """Archived page ``index`` (a copy if it awaits the next save; from the storage otherwise),
        checked to be what :meth:`_archive_pages` wrote."""
        pending = self._pending.get(index)
        page = copy.deepcopy(pending) if pending is not None else self._storage.get_page(index)
        if page is None:
            raise PageError(f"recall: page {index} was archived but the storage does not hold it")
        messages = page.get("messages")
        fine = (
            isinstance(messages, list)
            and all(isinstance(m, dict) and role_of(m) for m in messages)
            and isinstance(page.get("summary"), str)
            and isinstance(page.get("entry_summaries"), list)
            and type(page.get("archived_round")) is int
        )
        if not fine:
            raise PageError(
                f"recall: page {index} in the storage is not an archived page "
                "(it needs messages, summary, entry_summaries and archived_round)"
            )
        return page

    def recall(self, page_index: int) -> Page:
        """Page ``page_index`` in full. For an archived page, its recall count rises by one and
        its last-recall round becomes the current round (a dropped entry comes back to the contents
        page); an active page is returned as it is. :class:`~memci.PageError` if no such page.
        O(page) plus one storage read."""
        with self._lock:
            return self._recall(page_index)

    def _recall(self, page_index: object) -> Page:
        index = self._check_index(page_index)
        if self.is_active(index):
            return Page.of(index, self._window.page(index))
        return self._count_recall(index, self._stored(index))

    def _count_recall(self, index: int, stored: dict[str, Any]) -> Page:
        """Count a recall of archived page ``index`` (read as ``stored``); the page."""

        def restore() -> tuple[str, tuple[str, ...], int]:
            return stored["summary"], tuple(map(str, stored["entry_summaries"])), stored["archived_round"]

        entry = self._archive.recall(index, self._round, restore)
        log.debug(
            "recall page %d in round %d (recalled %d times)",
            index,
            self._round,
            entry.recall_count,
            extra={"page_index": index, "round": self._round, "reason": "recall"},
        )
        return Page.of(index, stored["messages"])

    def list_pages(self, limit: int = 10) -> list[PageListing]:
        """The ``limit`` most recently archived pages on the contents page, newest first, with
        their recall counts and the rounds since each was last recalled (or archived)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidOperationError(f"list_pages: limit must be an int >= 0, got {repr_of(limit)}")
        with self._lock:
            return self._archive.listing(self._round, limit)

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The ``k`` archived pages (dropped contents entries included) that best match ``query``,
        best first, by BM25 over each page's summary and messages (:class:`memci.PageSearch`):
        ``SearchHit(page_index, score, snippet)``. Searching counts no recall."""
        with self._lock:
            return self._search.search(query, k)

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

    def handle_tool_call(self, call: object) -> Message:
        """Answer the model's call of a recall tool (an OpenAI ``tool_call``, an Anthropic
        ``tool_use`` block, or ATTP TOML text) with the result to :meth:`add`: a ``tool`` message,
        a ``tool_result`` block (put it in a user message), or a user message with the ATTP result.
        A recalled page's entries come back in the result, so the page re-enters the window where
        the model asked for it. Calls of anything else are refused in the result.

        The call is parsed and checked whole (:func:`memci.context.recall.parse_call`), its tool
        calls run in order under the lock, and the answer is written from their results."""
        request = recall.parse_call(call)
        with self._lock:
            results, failure = self._run_tools(request.calls)
        return recall.answer(request, results, failure)

    def _run_tools(self, calls: Sequence[ToolCall]) -> tuple[list[ToolResult], str | None]:
        """Run the recall tools' calls, all or none: every page is checked and read first, and only
        when all of them can be does any recall count, in order. The results, or none and the
        error of the first call that cannot run (a page that does not exist, or is not stored)."""
        reads: list[ListPages | InWindow | tuple[int, dict[str, Any]]] = []
        try:
            for call in calls:
                if isinstance(call, ListPages):
                    reads.append(call)
                elif self.is_active(call.page_index):
                    reads.append(InWindow(call.page_index))
                else:
                    index = self._check_index(call.page_index)
                    reads.append((index, self._stored(index)))
        except PageError as e:
            return [], str(e)
        results: list[ToolResult] = []
        for read in reads:
            if isinstance(read, ListPages):
                results.append(self._archive.listing(self._round, read.limit))
            elif isinstance(read, InWindow):
                results.append(read)
            else:
                results.append(self._count_recall(*read))
        return results, None

    def is_recall_call(self, call: object) -> bool:
        """True when ``call`` is for the recall tools (send it to :meth:`handle_tool_call`)."""
        return recall.is_recall_call(call)

    # ---- state ---------------------------------------------------------------------------------------

    @property
    def round(self) -> int:
        """Rounds ended so far."""
        return self._round

    @property
    def pages(self) -> list[Page]:
        """The active pages, oldest first (the last one is open)."""
        with self._lock:
            return [Page.of(i, self._window.page(i)) for i in self._window.page_indices()]

    @property
    def contents(self) -> list[ContentsEntry]:
        """The contents entries the model sees, by index."""
        with self._lock:
            return list(self._archive.entries.values())

    @property
    def dropped(self) -> list[DroppedEntry]:
        """Entries the rules dropped from the contents page (their pages stay stored), by index."""
        with self._lock:
            return sorted(self._archive.dropped.values(), key=lambda d: d.index)

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def policy(self) -> ArchivePolicy:
        return self._archive.policy

    @property
    def active_pages(self) -> int:
        return self._active_pages

    @property
    def encoding(self) -> str:
        return self._encoding

    @property
    def max_context_tokens(self) -> int | None:
        return self._max_context_tokens

    def __repr__(self) -> str:
        return (
            f"<memci.ContextSystem: round {self._round}, {len(self._window.page_indices())} active pages, "
            f"{len(self._archive.entries)} contents entries, {len(self._archive.dropped)} dropped>"
        )

    # ---- saving --------------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The whole state as a JSON-able dict (what :meth:`save` writes, with the next revision):
        see :meth:`SavedState.to_dict`. Same as :meth:`to_state`."""
        with self._lock:
            return self._saved().to_dict()

    def to_state(self) -> dict[str, Any]:
        """The whole state as a JSON-able dict, for a framework's state (a LangGraph channel, say):
        settings, round, active pages, contents and dropped entries, revision. Not the archived
        pages: they are the storage's, and pages archived since the last :meth:`save` are only in
        this system until it saves (so save first when another system will take over:
        :meth:`from_state` refuses a state naming pages its storage lacks). O(state)."""
        return self.state()

    def _saved(self, revision: int | None = None) -> SavedState:
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
            self._revision if revision is None else revision,
            self._agent_tools,
            self._forgotten_through,
        )

    def save(self) -> None:
        """Write the pages archived since the last save and the whole state to the storage, as one
        atomic commit of the next revision (which also deletes the pages ``clear(forget=True)``
        forgot). If another writer saved to the same storage since this system was loaded (or
        last saved), :class:`~memci.ConflictError` is raised and nothing is written: load again,
        redo the turn, save again."""
        with self._lock:
            self._storage.save_state(self._saved(self._revision + 1).to_dict(), list(self._pending.values()))
            self._revision += 1
            self._pending.clear()

    @classmethod
    def load(
        cls,
        storage: Storage,
        *,
        summarizer: Summarizer | Callable[[str], str] | None = None,
        counter: Counter | None = None,
        thinking: str = tokens.DEFAULT_THINKING,
    ) -> ContextSystem:
        """The context system last saved to ``storage``, exactly: rounds, counts, the active pages
        with the open one, the contents and dropped entries; search is rebuilt from the stored
        pages. The summarizer and counter are not saved: pass them again if they are not the
        defaults. :class:`~memci.StateError` names what is wrong with a bad state, or says the
        storage holds none (:meth:`open` creates one then)."""
        state = _storage(storage).load_state()
        if state is None:
            raise StateError("load: the storage holds no saved state")
        return cls._build(SavedState.from_dict(state), storage, summarizer, counter, thinking=thinking)

    @classmethod
    def open(
        cls,
        storage: Storage,
        system_prompt: str | Message | None = None,
        *,
        tools: ToolFormat | None = None,
        agent_tools: Iterable[Any] | None = None,
        active_pages: int | None = None,
        summarizer: Summarizer | Callable[[str], str] | None = None,
        policy: ArchivePolicy | None = None,
        encoding: str | None = None,
        max_context_tokens: int | None = None,
        counter: Counter | None = None,
        thinking: str = tokens.DEFAULT_THINKING,
    ) -> ContextSystem:
        """Load or create: the system saved to ``storage``, continuing its conversation, or a new
        one on it if it holds no state. Each setting given (not None) applies, replacing the saved
        one (your code's configuration wins: a new prompt, new agent tools, a new limit); each not
        given keeps the saved value (or the constructor's default for a new system). The
        summarizer and counter are code: pass them each time. Nothing is written until
        :meth:`save`."""
        state = _storage(storage).load_state()
        if state is None:
            return cls(
                system_prompt,
                tools=tools,
                agent_tools=agent_tools,
                active_pages=5 if active_pages is None else active_pages,
                storage=storage,
                summarizer=summarizer,
                policy=policy,
                encoding=tokens.DEFAULT_ENCODING if encoding is None else encoding,
                max_context_tokens=max_context_tokens,
                counter=counter,
                thinking=thinking,
            )
        saved = SavedState.from_dict(state)
        overrides: dict[str, Any] = {
            "system_prompt": _system_message(system_prompt),
            "tools": tools,
            "agent_tools": None if agent_tools is None else checked_tools(agent_tools),
            "active_pages": active_pages,
            "policy": policy,
            "encoding": encoding,
            "max_context_tokens": max_context_tokens,
        }
        return cls._build(
            dataclasses.replace(saved, **{k: v for k, v in overrides.items() if v is not None}),
            storage,
            summarizer,
            counter,
            thinking=thinking,
        )

    @classmethod
    def from_state(
        cls,
        state: dict[str, Any],
        storage: Storage,
        *,
        summarizer: Summarizer | Callable[[str], str] | None = None,
        counter: Counter | None = None,
        thinking: str = tokens.DEFAULT_THINKING,
    ) -> ContextSystem:
        """The system :meth:`to_state` described, on ``storage`` (the one holding its archived
        pages). :class:`~memci.StateError` names what is wrong with the state, or the archived
        pages it names that the storage does not hold (pages archived after the last save are
        not in any storage: save before taking the state). Search is rebuilt from the storage.
        O(state + archived pages)."""
        ctx = cls._build(SavedState.from_dict(state), storage, summarizer, counter, thinking=thinking)
        missing = ctx._missing
        if missing:
            shown_pages = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
            raise StateError(
                f"from_state: the state names archived pages the storage does not hold ({shown_pages}): "
                "pages archived since the last save() are not in the storage; save() before to_state()"
            )
        return ctx

    @classmethod
    def _build(
        cls,
        saved: SavedState,
        storage: Storage,
        summarizer: Summarizer | Callable[[str], str] | None,
        counter: Counter | None,
        pending: Sequence[dict[str, Any]] = (),
        *,
        thinking: str = tokens.DEFAULT_THINKING,
    ) -> ContextSystem:
        """A system built with ``saved``'s settings, taking up its state; ``pending``: pages it
        archived that are not saved yet (a copy's)."""
        try:
            ctx = cls(
                saved.system_prompt,
                tools=cast(ToolFormat, saved.tools),  # the constructor checks it
                agent_tools=saved.agent_tools,
                active_pages=saved.active_pages,
                storage=storage,
                summarizer=summarizer,
                policy=saved.policy,
                encoding=saved.encoding,
                max_context_tokens=saved.max_context_tokens,
                counter=counter,
                thinking=thinking,
            )
        except (InvalidOperationError, InvalidMessageError, TypeError) as e:
            raise StateError(f"load: {e}") from None
        ctx._restore(saved, pending)
        return ctx

    def _restore(self, saved: SavedState, pending: Sequence[dict[str, Any]]) -> None:
        """Take up ``saved`` in a new system built with its settings: the round, the active pages
        (the core checks their messages), the contents and dropped entries; search is rebuilt
        from the storage's pages (and ``pending``, pages archived but not saved)."""
        self._round = saved.round
        self._revision = saved.revision
        self._forgotten_through = saved.forgotten_through
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
        for gone in saved.dropped:
            self._archive.dropped[gone.index] = gone
        self._pending = {page["index"]: page for page in pending}
        # Only the pages this state archived: a page above them is an orphan of a run that died
        # before its save, which the next archive of that index replaces; pages it forgot are
        # deleted by its next save.
        storage, low, high = self._storage, saved.forgotten_through, saved.pages_through
        stored = [
            (index, page)
            for index in storage.page_indices()
            if low < index <= high and index not in self._pending and (page := storage.get_page(index)) is not None
        ]
        pages = sorted([*stored, *self._pending.items()])
        self._search.extend(
            (index, page_text(str(page.get("summary") or ""), message_texts(page.get("messages") or [])))
            for index, page in pages
        )
        held = {index for index, _ in pages}
        #: Archived pages the state names that neither the storage nor ``pending`` holds.
        self._missing = [index for index in range(low + 1, high + 1) if index not in held]

    # ---- copies and pickles ---------------------------------------------------------------------------

    def _snapshot(self) -> tuple[SavedState, list[dict[str, Any]]]:
        """The state and the pending pages, as JSON-made copies (nothing shared with this system)."""
        with self._lock:
            saved = self._saved()
            text = json.dumps([saved.to_dict(), list(self._pending.values())], ensure_ascii=False)
        state, pending = json.loads(text)
        return SavedState.from_dict(state), pending

    def __copy__(self) -> ContextSystem:
        """A system with the same state on the same storage (and summarizer and counter): the two
        go on independently, and the second to save over the same revision gets
        :class:`~memci.ConflictError`. Pages this one archived since its last save are copied.
        O(state + archived pages)."""
        saved, pending = self._snapshot()
        return type(self)._build(
            saved, self._storage, self._summarizer_arg, self._counter, pending, thinking=self._tokens.thinking
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> ContextSystem:
        """As :func:`copy.copy`, with a deep copy of the storage: a ``MemoryStorage`` is copied
        with its pages; a SQLite or directory store is opened again on the same file or folder;
        a store that cannot be copied raises :class:`~memci.StorageError`. The summarizer and
        counter (code) are shared."""
        saved, pending = self._snapshot()
        storage = copy.deepcopy(self._storage, memo)
        return type(self)._build(
            saved, storage, self._summarizer_arg, self._counter, pending, thinking=self._tokens.thinking
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as JSON text (the state and the pages archived since the last save), never as
        pickled messages, with its storage (a ``MemoryStorage`` as its JSON texts, a SQLite or
        directory store by path; other stores raise :class:`~memci.StorageError`) and the
        summarizer and counter it was given (None for the defaults; yours must be picklable)."""
        saved, pending = self._snapshot()
        text = json.dumps({"state": saved.to_dict(), "pending": pending}, ensure_ascii=False)
        return (_unpickle, (text, self._storage, self._summarizer_arg, self._counter, self._tokens.thinking))


def _unpickle(
    text: str,
    storage: Storage,
    summarizer: Summarizer | Callable[[str], str] | None,
    counter: Counter | None,
    thinking: str = tokens.DEFAULT_THINKING,
) -> ContextSystem:
    """A :class:`ContextSystem` from what :meth:`ContextSystem.__reduce__` pickled."""
    data = json.loads(text)
    state = SavedState.from_dict(data["state"])
    return ContextSystem._build(state, storage, summarizer, counter, data["pending"], thinking=thinking)
