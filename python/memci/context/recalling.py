"""Recall in a context system: :class:`Recalling`, the half of :class:`~memci.ContextSystem` that
answers the model's recall tools and the API's ``recall``.

A recall tool's call is parsed and checked whole by :mod:`~memci.context.recall`; here its calls run
against the window, the contents chapter and the page log, all or none, and the answer is written
from their results. :meth:`Recalling.run_tool` is the face for a framework that calls a tool by name
with its arguments (a LangChain tool, an Agents SDK function tool): the text the model reads comes
back, whatever the model wrote.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memci.context import recall
from memci.context.contents import PageListing
from memci.context.page import ArchivedPage, Message, Page
from memci.context.parts import SystemParts
from memci.context.recall import Found, FoundPage, InWindow, ListPages, SearchPages, ToolCall, ToolResult
from memci.context.search import SearchHit
from memci.errors import InvalidOperationError, PageError, repr_of, shown

if TYPE_CHECKING:
    pass

__all__ = ["Recalling"]

#: The context system's logger (its ``recall`` events).
log = logging.getLogger("memci.context")


@dataclass(frozen=True, slots=True)
class _Search:
    """A ``search_pages`` call, read: what it found, and each found page's stored copy when its
    contents entry was dropped (its recall brings the entry back from it)."""

    found: Found
    stored: dict[int, ArchivedPage]


#: What a recall tool call needs, read before anything counts.
_Read = ListPages | InWindow | tuple[int, ArchivedPage] | _Search


class Recalling(SystemParts):
    """Recall, the recall tools and search over a context system's archive. The system's parts are
    the subclass's (:class:`~memci.ContextSystem`); this half reads them and counts recalls."""

    def run_tool(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> str:
        """Run the recall tool ``name`` (``recall_page``, ``list_pages``, ``search_pages``) with
        ``arguments`` (a dict, or its JSON text as a model wrote it) and return the text the model
        reads: the page, the listing, the pages found, or a refusal or error naming what is wrong.
        Whatever the model wrote, this never raises: it is :meth:`handle_tool_call` on a call of
        that tool. O(page) plus one storage read."""
        if isinstance(arguments, str):
            text = arguments
        else:
            try:
                text = json.dumps({} if arguments is None else dict(arguments), ensure_ascii=False)
            except Exception:  # whatever the arguments hold, the model gets an answer, not a traceback
                text = repr_of(arguments)  # not JSON: the parser refuses it in the answer
        tool = name if isinstance(name, str) else repr_of(name)  # str() of a huge int raises
        call = {"id": "call", "type": "function", "function": {"name": tool, "arguments": text}}
        content = self.handle_tool_call(call)["content"]
        return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)

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

    def _stored(self, index: int) -> ArchivedPage:
        """Archived page ``index`` (a copy if it awaits the next save; from the storage otherwise),
        checked to be an :class:`ArchivedPage`."""
        page = self._log.page(index)
        if page is None:
            raise PageError(f"recall: page {index} was archived but the storage does not hold it")
        return ArchivedPage.from_dict(page, index)

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

    def _count_recall(self, index: int, stored: ArchivedPage) -> Page:
        """Count a recall of archived page ``index`` (read as ``stored``); the page."""
        self._count(index, stored, "recall")
        return Page.of(index, stored.messages)

    def _count(self, index: int, stored: ArchivedPage | None, reason: str) -> None:
        """Count a recall of archived page ``index``, read (``reason`` ``"recall"``) or found by a
        search (``"search"``). ``stored``: the page as stored, if read; a dropped entry comes back
        from it (read now when it was not)."""

        def restore() -> tuple[str, tuple[str, ...], int]:
            page = self._stored(index) if stored is None else stored
            return page.summary, page.entry_summaries, page.archived_round

        entry = self._archive.recall(index, self._round, restore)
        log.debug(
            "%s page %d in round %d (recalled %d times)",
            reason,
            index,
            self._round,
            entry.recall_count,
            extra={"page_index": index, "round": self._round, "reason": reason},
        )

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
        ``SearchHit(page_index, score, snippet)``. Searching counts no recall (the
        ``search_pages`` tool does: see :meth:`handle_tool_call`)."""
        with self._lock:
            return self._ranked(query, k)

    def _ranked(self, query: str, k: int) -> list[SearchHit]:
        """The one ranking both :meth:`search` and the ``search_pages`` tool use: the ``k`` best
        archived pages for ``query``, best first. A hybrid ranking (query and page vectors fused
        with BM25) replaces this one place."""
        return self._searched().search(query, k)

    def _found(self, call: SearchPages) -> _Search:
        """Run a ``search_pages`` call, counting nothing: each page found with its summary (from
        its contents entry, or from the stored page when the entry was dropped) and snippet.
        :class:`~memci.PageError` when a found page is no longer stored."""
        pages: list[FoundPage] = []
        stored: dict[int, ArchivedPage] = {}
        for hit in self._ranked(call.query, call.k):
            entry = self._archive.entries.get(hit.page_index)
            if entry is None:
                stored[hit.page_index] = page = self._stored(hit.page_index)
                summary = page.summary
            else:
                summary = entry.summary
            pages.append(FoundPage(hit.page_index, summary, hit.snippet))
        return _Search(Found(call.query, tuple(pages)), stored)

    def handle_tool_call(self, call: object) -> Message:
        """Answer the model's call of a recall tool (an OpenAI ``tool_call``, an Anthropic
        ``tool_use`` block, or ATTP TOML text) with the result to :meth:`add`: a ``tool`` message,
        a ``tool_result`` block (put it in a user message), or a user message with the ATTP result.
        A recalled page's entries come back in the result, so the page re-enters the window where
        the model asked for it. ``search_pages`` answers with one line per page found
        (``[page N] summary — snippet``), and each page it returns counts as recalled: its entry
        comes back onto the contents page (if it was dropped) and stays there by the same rules
        as a page read. Calls of anything else are refused in the result.

        The call is parsed and checked whole (:func:`memci.context.recall.parse_call`), its tool
        calls run in order under the lock, all or none: every page is checked and read, and the
        answer is built, before any recall counts, so a call that fails, or an answer refused for
        its size, changes nothing."""
        request = recall.parse_call(call)
        with self._lock:
            reads, failure = self._read_tools(request.calls)
            if failure is not None:
                return recall.answer(request, [], failure)
            message, oversized = recall.sized_answer(request, self._results(reads, count=False))
            recalls = any(isinstance(read, tuple) or (isinstance(read, _Search) and read.found.pages) for read in reads)
            if oversized or not recalls:
                return message
            results = self._results(reads, count=True)
            if any(isinstance(read, ListPages) for read in reads):
                message = recall.answer(request, results)  # a listing shows the counts just made
        return message

    def _read_tools(self, calls: Sequence[ToolCall]) -> tuple[list[_Read], str | None]:
        """Check and read what the recall tools' calls need, counting nothing: every page first.
        The reads, or none and the error of the first call that cannot run (a page that does not
        exist, or is not stored)."""
        reads: list[_Read] = []
        try:
            for call in calls:
                if isinstance(call, ListPages):
                    reads.append(call)
                elif isinstance(call, SearchPages):
                    reads.append(self._found(call))
                elif self.is_active(call.page_index):
                    reads.append(InWindow(call.page_index))
                else:
                    index = self._check_index(call.page_index)
                    reads.append((index, self._stored(index)))
        except PageError as e:
            return [], str(e)
        return reads, None

    def _results(self, reads: Sequence[_Read], *, count: bool) -> list[ToolResult]:
        """The results of the calls read, in order; ``count``: each archived page's recall counts
        (else the results are only read)."""
        results: list[ToolResult] = []
        for read in reads:
            if isinstance(read, ListPages):
                results.append(self._archive.listing(self._round, read.limit))
            elif isinstance(read, InWindow):
                results.append(read)
            elif isinstance(read, _Search):
                results.append(read.found)
                if count:
                    for page in read.found.pages:
                        self._count(page.index, read.stored.get(page.index), "search")
            elif count:
                results.append(self._count_recall(*read))
            else:
                results.append(Page.of(read[0], read[1].messages))
        return results

    def is_recall_call(self, call: object) -> bool:
        """True when ``call`` is for the recall tools (send it to :meth:`handle_tool_call`)."""
        return recall.is_recall_call(call)
