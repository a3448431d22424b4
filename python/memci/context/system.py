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
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from memci import _core, tokens
from memci.context import recall
from memci.context.contents import (
    ArchiveChapter,
    ArchivePolicy,
    ContentsEntry,
    DroppedEntry,
    PageListing,
    RoundResult,
)
from memci.context.page import Message, Page
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
    shown,
)
from memci.sanitize import sanitize_messages
from memci.storage import MemoryStorage, Storage
from memci.tokens import Counter

if TYPE_CHECKING:
    from memci.formats import AnthropicTool, ChatMessage, ChatTool

__all__ = ["ContextSystem"]

ToolFormat = recall.Format


class _Tokens:
    """Counts with ``memci.tokens`` in the system's encoding, or with the caller's message
    ``counter`` (as everywhere in memci: a message dict in, its tokens out). The contents page is
    counted as the system message it is sent as."""

    __slots__ = ("counter", "encoding", "overhead")

    def __init__(self, encoding: str, counter: Counter | None) -> None:
        self.encoding, self.counter = tokens.resolve("ContextSystem", encoding, counter)
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

    def messages(self, messages: list[Message]) -> int:
        return tokens.count_messages(messages, self.encoding, counter=self.counter)


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


def _system_message(prompt: str | Message) -> Message:
    if isinstance(prompt, str):
        return {"role": "system", "content": str.__str__(prompt)}
    if isinstance(prompt, dict):
        if prompt.get("role") not in ("system", "developer"):
            raise InvalidMessageError(
                f"system_prompt: role must be 'system' or 'developer', got {prompt.get('role')!r}",
                path="system_prompt.role",
            )
        return prompt
    raise InvalidMessageError(
        f"system_prompt must be a str or a system message dict, got {type(prompt).__name__}", path="system_prompt"
    )


def _positive(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOperationError(f"ContextSystem: {name} must be an int >= {minimum}, got {value!r}")
    return value


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
        system_prompt: str | Message,
        *,
        tools: ToolFormat | None = None,
        active_pages: int = 5,
        storage: Storage | None = None,
        summarizer: Summarizer | Callable[[str], str] | None = None,
        policy: ArchivePolicy | None = None,
        encoding: str = tokens.DEFAULT_ENCODING,
        max_context_tokens: int | None = None,
        counter: Counter | None = None,
    ) -> None:
        """``system_prompt``: a string or a system/developer message. ``tools``: the protocol the
        system segment describes the recall tools in (``"openai"``, the default, and
        ``"anthropic"`` for native tool calls; ``"attp"`` for the TOML protocol). ``active_pages``
        (n): pages kept whole in the window. ``storage``: where archived pages go (default
        ``memci.MemoryStorage()``). ``summarizer``: a :class:`~memci.summary.Summarizer` or a
        ``str -> str`` callable (default: extractive). ``counter``: a message counter (a
        message dict in, its tokens out) to use instead of ``memci.tokens`` with ``encoding``."""
        if tools is None:
            tools = "openai"
        if tools not in recall.FORMATS:
            raise InvalidOperationError(
                f"ContextSystem: tools must be one of {', '.join(recall.FORMATS)}, got {tools!r}"
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
        self._tokens = _Tokens(encoding, counter)
        self._summarizer = as_summarizer(summarizer)
        self._storage: Storage = MemoryStorage() if storage is None else storage
        self._lock = _Lock()
        self._round = 0
        self._window = _core.PageWindow()
        note = {"role": "system", "content": recall.system_note(tools)}
        # Stored (checked and copied) by the core: state() reads it back, so nothing aliases it.
        self._window.set_system([_system_message(system_prompt), note])
        self._system_len = self._window.system_len
        self._archive = ArchiveChapter(
            policy, self._tokens.text_message, self._tokens.lines, recall.contents_hint(tools)
        )
        self._search = PageSearch()
        # Pages archived since the last save: written with the next state, in one commit (a crash
        # before it leaves the store at the last save, with no page it does not name).
        self._pending: dict[int, dict[str, Any]] = {}
        # The revision of the state this system was loaded from or last saved as (0: never saved).
        self._revision = 0

    # ---- the conversation ------------------------------------------------------------------------

    def add(self, message: Message) -> int:
        """Add one message; returns the index of the page it opened or joined. O(message) plus,
        when a page opens beyond ``active_pages``, archiving the oldest (summary, storage write,
        O(1) unlink).

        A user message opens a new page, unless it only carries tool results (Anthropic
        ``tool_result`` blocks, an ATTP ``[tool_result]``); every other message joins the open page
        (the first message of all opens one, whatever its role). Invalid messages raise
        :class:`~memci.InvalidMessageError`; if archiving fails (the summarizer or the storage
        raises), the message is taken back and the error propagates: nothing has changed.
        """
        if not isinstance(message, dict):
            raise InvalidMessageError(
                f"message: a message must be a dict, got {type(message).__name__}", path="message"
            )
        with self._lock:
            return self._add(message)

    def _add(self, message: Message) -> int:
        window = self._window
        if window.active_count and (message.get("role") != "user" or recall.is_tool_result(message)):
            return window.join(message)
        index = window.open_page(message)
        try:
            while window.active_count > self._active_pages:
                self._archive_pages([self._prepare(window.page_indices()[0])])
        except BaseException:
            window.undo_open(index)
            raise
        return index

    def extend(self, messages: Sequence[Message]) -> list[int]:
        """:meth:`add` each message in order, under one lock; the page index of each. Every message
        is checked first, by the rules :meth:`add` applies: if one is refused
        (:class:`~memci.InvalidMessageError` naming ``messages[i]``), none is added. O(messages)."""
        if isinstance(messages, dict | str) or not isinstance(messages, Sequence):
            raise InvalidMessageError(
                f"messages: expected a list of message dicts, got {type(messages).__name__}", path="messages"
            )
        batch = list(messages)
        for i, message in enumerate(batch):
            if not isinstance(message, dict):
                raise InvalidMessageError(
                    f"messages[{i}]: a message must be a dict, got {type(message).__name__}", path=f"messages[{i}]"
                )
        _core.MessageStore().append(batch)  # the core's acceptance rules over all of them; nothing is kept
        with self._lock:
            return [self._add(message) for message in batch]

    def end_round(self) -> RoundResult:
        """One round of conversation has ended: the round count rises by one, then the m rule, the
        p rule and LRU under the contents cap run, in that order. What each dropped is returned."""
        with self._lock:
            self._round += 1
            dropped = self._archive.end_round(self._round)
            return RoundResult(self._round, tuple(dropped), self._archive.tokens())

    # ---- archiving ---------------------------------------------------------------------------------

    def _prepare(self, index: int) -> tuple[Page, PageSummary, str]:
        """An active page, its summary and its searchable text (one read of the window)."""
        messages, texts = self._window.page_texts(index)
        page = Page.of(index, messages)
        summary = checked(self._summarizer.summarize(page), page)
        return page, summary, page_text(summary.summary, texts)

    def _new_entry(self, page: Page, summary: PageSummary) -> ContentsEntry:
        """The contents entry of a page archived now: never recalled, last-recall round = now."""
        return ContentsEntry(page.index, summary.summary, summary.entry_summaries, 0, self._round, self._round)

    def _archive_pages(self, prepared: list[tuple[Page, PageSummary, str]]) -> None:
        """Archive summarised active pages: the O(1) unlink, the contents entry and the search
        index; the page waits in ``_pending`` for the next :meth:`save`, which writes it with the
        state."""
        for page, summary, text in prepared:
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
        the open one) are archived first until the window fits; :class:`ContextOverflowError` if
        it cannot, and then nothing has changed. O(window)."""
        with self._lock:
            messages = None if self._max_context_tokens is None else self._fit(self._max_context_tokens)
            if messages is None:
                messages = self._assemble(self._archive.render())
        if not sanitize:
            return cast("list[ChatMessage]", messages)
        return cast("list[ChatMessage]", sanitize_messages(messages).messages)

    def _fit(self, limit: int) -> list[Message] | None:
        """Archive the oldest active pages until the window fits ``limit``. Returns the window when
        it fitted as it was (None once pages were archived: it must be assembled again)."""
        window = self._assemble(self._archive.render())
        tokens = self._tokens.messages(window)
        if tokens <= limit:
            return window
        indices = self._window.page_indices()
        if not indices:
            raise ContextOverflowError(
                f"build_messages: the system segment and the contents page alone need {tokens} tokens, "
                f"over max_context_tokens={limit}"
            )
        pages = {i: self._window.page(i) for i in indices}
        prepared: list[tuple[Page, PageSummary, str]] = []
        for index in indices[:-1]:
            prepared.append(self._prepare(index))
            extra = [self._new_entry(p, s) for p, s, _ in prepared]
            rest = [m for i in indices[len(prepared) :] for m in pages[i]]
            tokens = self._tokens.messages(self._assemble(self._archive.render(extra), rest))
            if tokens <= limit:
                self._archive_pages(prepared)
                return None
        raise ContextOverflowError(
            f"build_messages: the window needs {tokens} tokens with every page but the open one "
            f"(page {indices[-1]}) archived, over max_context_tokens={limit}"
        )

    def token_count(self) -> int:
        """Tokens of :meth:`build_messages` (without sanitizing), in the system's encoding."""
        with self._lock:
            return self._tokens.messages(self._assemble(self._archive.render()))

    def count_tokens(self, messages: list[Message]) -> int:
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
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
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

        self._archive.recall(index, self._round, restore)
        return Page.of(index, stored["messages"])

    def list_pages(self, limit: int = 10) -> list[PageListing]:
        """The ``limit`` most recently archived pages on the contents page, newest first, with
        their recall counts and the rounds since each was last recalled (or archived)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidOperationError(f"list_pages: limit must be an int >= 0, got {limit!r}")
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
    def tool_definitions(self, format: Literal["attp"]) -> str: ...
    def tool_definitions(self, format: ToolFormat = "openai") -> list[Any] | str:
        """The recall tools for the model: OpenAI function tools, Anthropic tools, or the ATTP
        listing (text). Pass them to the model with your own tools."""
        return recall.tool_definitions(format)

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
        see :meth:`SavedState.to_dict`."""
        with self._lock:
            return self._saved().to_dict()

    def _saved(self, revision: int | None = None) -> SavedState:
        window = self._window
        return SavedState(
            self._round,
            window.next_index,
            window.messages()[0],
            self._tools,
            self._active_pages,
            self._encoding,
            self._max_context_tokens,
            self._archive.policy,
            tuple((i, window.page(i)) for i in window.page_indices()),
            tuple(self._archive.entries.values()),
            tuple(self._archive.dropped.values()),
            self._revision if revision is None else revision,
        )

    def save(self) -> None:
        """Write the pages archived since the last save and the whole state to the storage, as one
        atomic commit of the next revision. If another writer saved to the same storage since this
        system was loaded (or last saved), :class:`~memci.ConflictError` is raised and nothing is
        written: load again, redo the turn, save again."""
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
    ) -> ContextSystem:
        """The context system last saved to ``storage``, exactly: rounds, counts, the active pages
        with the open one, the contents and dropped entries; search is rebuilt from the stored
        pages. The summarizer and counter are not saved: pass them again if they are not the
        defaults. :class:`~memci.StateError` names what is wrong with a bad state."""
        state = storage.load_state()
        if state is None:
            raise StateError("load: the storage holds no saved state")
        saved = SavedState.from_dict(state)
        try:
            ctx = cls(
                saved.system_prompt,
                tools=cast(ToolFormat, saved.tools),  # the constructor checks it
                active_pages=saved.active_pages,
                storage=storage,
                summarizer=summarizer,
                policy=saved.policy,
                encoding=saved.encoding,
                max_context_tokens=saved.max_context_tokens,
                counter=counter,
            )
        except (InvalidOperationError, InvalidMessageError, TypeError) as e:
            raise StateError(f"load: {e}") from None
        ctx._restore(saved)
        return ctx

    def _restore(self, saved: SavedState) -> None:
        """Take up ``saved`` in a new system built with its settings: the round, the active pages
        (the core checks their messages), the contents and dropped entries; search is rebuilt
        from the storage's pages."""
        self._round = saved.round
        self._revision = saved.revision
        for i, (index, messages) in enumerate(saved.pages):
            try:
                self._window.open_page_at(index, messages)
            except (InvalidOperationError, InvalidMessageError) as e:
                raise StateError(f"load: state['pages'][{i}]: {e}") from None
        if saved.next_index != self._window.next_index:
            raise StateError(
                f"load: state['next_index'] is {saved.next_index}, but the active pages make it "
                f"{self._window.next_index}"
            )
        for entry in saved.contents:
            self._archive.add(entry)
        for gone in saved.dropped:
            self._archive.dropped[gone.index] = gone
        # Only the pages this state archived: a page above them is an orphan of a run that died
        # before its save, which the next archive of that index replaces.
        storage, through = self._storage, saved.pages_through
        self._search.extend(
            (index, page_text(str(stored.get("summary") or ""), message_texts(stored.get("messages") or [])))
            for index in storage.page_indices()
            if index <= through and (stored := storage.get_page(index)) is not None
        )
