"""The compiled core of memci (Rust). Private: use :class:`memci.MessageArray`.

Every write is all-or-nothing: messages are converted and validated before the store is touched,
and a failed call leaves the store exactly as it was. Errors are raised as the classes of
:mod:`memci.errors`. Positions are indices into the visible list; ``description`` is the text a
batch snapshot carries.
"""

import builtins
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, SupportsFloat, final

from memci.ops import (
    Append,
    Checkpoint,
    Clear,
    ClearThinking,
    ClearToolUses,
    Filter,
    Insert,
    Replace,
    Rollback,
    TrimToTokens,
    Truncate,
)

_Message = dict[str, Any]
#: (total_messages, current_batch_messages, total_batches, current_batch_index)
_Stats = tuple[int, int, int, int]
_StoreOperation = Append | Insert | Replace | Truncate | Clear | Filter | Rollback | Checkpoint | TrimToTokens

__all__ = [
    "BatchPipeline",
    "JsonlRun",
    "MessageStore",
    "MessageView",
    "PageWindow",
    "SearchIndex",
    "VectorIndex",
    "__version__",
    "count_message",
    "count_message_list",
    "count_text",
    "count_texts",
    "current_turn_start",
    "encoding_name",
    "entry_texts",
    "fuse_ranks",
    "hybrid_search",
    "message_texts",
    "ranks_file",
    "read_attp_call",
    "reply_priming",
    "sanitize_store",
    "scan_list",
    "scan_store",
]

__version__: str

@final
class MessageStore:
    """Messages stored once, the visible order, per-role indices and copy-on-write batches."""

    def __new__(cls) -> MessageStore: ...
    def __len__(self) -> int: ...
    # ---- writes -------------------------------------------------------------------------------
    def append(self, messages: _Message | Sequence[_Message]) -> None:
        """APPEND: no new batch. O(k) for k messages."""
    def execute(
        self,
        op: _StoreOperation,
        counter: Callable[[_Message], int] | None = None,
        splitter: Callable[[str], list[str]] | None = None,
    ) -> _Stats:
        """Run a ``memci.ops`` config (all but ``Sanitize``), read from its fields; ``counter``
        counts for ``TrimToTokens`` and ``splitter`` cuts its partial message's text into pieces.
        The stats after it, read under the same lock."""
    def edit(self, op: ClearToolUses | ClearThinking) -> tuple[_Stats, tuple[int, int, int]]:
        """Run a context edit, planned and applied with the GIL released: the stats after it and
        ``(cleared_tool_uses, cleared_thinking_turns, cleared_input_tokens)``."""
    def set_tool_description(self, message: _Message) -> None:
        """Store the tool description and make it visible after the leading system messages."""
    def mark(self, index: int, tag: str) -> None:
        """Tag the visible message at index (the tag belongs to the stored message)."""
    # ---- reads --------------------------------------------------------------------------------
    def tool_description(self) -> _Message | None: ...
    def get(self, index: int) -> _Message:
        """The visible message at index (negative counts from the end). O(1)."""
    def slice(self, key: builtins.slice) -> list[_Message]:
        """``arr[a:b:c]`` with Python's slice rules, atomic. O(k)."""
    def messages(self) -> list[_Message]: ...
    def all_messages(self) -> list[_Message]:
        """Every message ever stored, in insertion order."""
    def by_role(self, role: str) -> list[_Message]: ...
    def recent(self, n: int, role: str | None = None, roles: Iterable[str] | None = None) -> list[_Message]:
        """The last n visible messages (of role, or of any of roles; not both), oldest first. O(n)."""
    def role_range(self, role: str, key: builtins.slice) -> list[_Message]:
        """``by_role(role)[key]`` (a step-1 slice), atomic. O(k)."""
    def count(self, role: str | None = None) -> int: ...
    def indices(self, role: str | None = None) -> bytearray:
        """Visible positions (of one role), as native-endian int64."""
    def between(
        self, start: SupportsFloat | None, end: SupportsFloat | None, role: str | None = None
    ) -> list[_Message]:
        """Visible messages with start <= timestamp < end (None: unbounded; an int beyond a float's
        range is beyond every timestamp; NaN is refused)."""
    def marked(self, tag: str, role: str | None = None) -> list[_Message]: ...
    @property
    def batch_index(self) -> int: ...
    def snapshot(self, batch_index: int) -> tuple[int, float, list[_Message], int, str | None]:
        """(batch_index, timestamp, messages, message_count, description) of a batch."""
    def stats(self) -> _Stats:
        """(total_messages, current_batch_messages, total_batches, current_batch_index)."""
    def to_json(self) -> str: ...
    @staticmethod
    def from_json(text: str) -> MessageStore: ...
    def token_count(self, encoding: str, thinking: str | None = None) -> int:
        """The tokens of the visible messages sent in one request, priming included, the thinking
        of earlier turns dropped ("drop_earlier", the default) or counted ("count"); O(1) once
        counted."""
    def copy(self) -> MessageStore:
        """An independent copy of the whole state."""

@final
class PageWindow:
    """The context system's window: the system chapter, then the active pages, each a run of
    message nodes over one shared chain. Opening, joining and detaching a page are O(1) per
    message; page indices start at 1 and are never reused."""

    def __new__(cls) -> PageWindow: ...
    def __len__(self) -> int:
        """Messages in the window (system chapter and active pages)."""
    def set_system(self, messages: _Message | Sequence[_Message]) -> None:
        """Replace the system chapter (at the front of the window)."""
    def open_page(self, messages: _Message | Sequence[_Message]) -> int:
        """Open the next page with these messages at the end of the window; its index."""
    def open_page_at(self, index: int, messages: _Message | Sequence[_Message]) -> None:
        """Open a page with a given index, not below ``next_index`` (restoring a saved state)."""
    def join(self, messages: _Message | Sequence[_Message]) -> int:
        """Append messages to the open (newest) page; its index."""
    def detach(self, index: int) -> None:
        """Unlink an active page from the window in O(1)."""
    def undo_open(self, index: int) -> None:
        """Take back the page just opened (the newest); its index will be given again."""
    def page(self, index: int) -> list[_Message]:
        """The messages of an active page."""
    def page_texts(self, index: int) -> tuple[list[_Message], list[str], list[tuple[str, str]]]:
        """The messages of an active page, the searchable text of each and its entry text (what it
        says, the tools it calls: as ``entry_texts`` gives them), read under one lock: all that
        archiving the page needs."""
    def page_indices(self) -> list[int]:
        """The active pages' indices, oldest first."""
    def messages(self) -> list[_Message]:
        """The window in order: the system chapter, then the active pages."""
    def tokens_without_oldest(self, encoding: str, thinking: str | None = None) -> list[int]:
        """For each k from 0 to the number of active pages, the tokens of the window with its k
        oldest pages left out, sent as one request (what ``memci.tokens.count_messages`` gives
        them), from per-message counts the window keeps: each message is counted once."""
    @property
    def active_count(self) -> int:
        """Pages in the window; the newest is the open one."""
    @property
    def system_len(self) -> int: ...
    @property
    def next_index(self) -> int: ...

# Not in __all__: present only in builds with the count-alloc feature.
def allocated_bytes() -> int:
    """Bytes currently allocated by the Rust core in this process (all stores together). Present
    only in builds with the ``count-alloc`` cargo feature (the memory bench's: ``make bench``)."""

# ---- the text of messages (rust/src/core/text.rs) -----------------------------------------------
def message_texts(messages: _Message | Sequence[_Message]) -> list[str]:
    """The searchable text of each message (what FILTER matches and search indexes): what it says,
    then each tool call's name and arguments, one per line. Not checked against the message rules."""

def entry_texts(messages: _Message | Sequence[_Message]) -> list[tuple[str, str]]:
    """What each message says, and the tools it calls as ``name(arguments)`` joined by ``"; "``."""

# ---- ATTP answers (rust/src/core/attp.rs) ---------------------------------------------------------
def read_attp_call(text: str) -> tuple[str | None, str | None]:
    """The ``[tool_call]`` of an ATTP answer, its TOML read in O(text): ``(code, None)`` to run
    ``code``, ``(None, None)`` when its status is ``"fail"``, ``(None, reason)`` when it is refused
    (not TOML, nested over 80 levels, an integer beyond 64 bits, a lone surrogate, no table, another
    status, no code string). Never raises."""

# ---- the pair scan (memci.sanitize) -----------------------------------------------------------------
# A finding: (index, role, reason code, the ids the reason names, the other position it names).
_Finding = tuple[int, str, str, list[str], int | None]

@final
class MessageView:
    """Stored messages in a fixed order (a store's visible list at one moment), decoded on demand."""

    def __len__(self) -> int: ...
    def messages(self) -> list[_Message]:
        """The messages as fresh dicts, in order. O(n)."""

def scan_list(messages: Sequence[_Message]) -> list[_Finding]:
    """What the sanitizer would remove from a list or tuple of message dicts, in order. O(n)."""

def scan_store(store: MessageStore) -> list[_Finding]:
    """What the sanitizer would remove from the store's visible messages. O(n), GIL released."""

def sanitize_store(store: MessageStore, description: str) -> tuple[list[_Finding], MessageView]:
    """Remove what the scan finds as a new batch (none when nothing is found); return the findings
    and the visible messages after. O(n), GIL released."""

# ---- tokens (rust/src/python/tokens.rs) ------------------------------------------------------------
def count_text(text: str, encoding: str) -> int:
    """The tokens of text in encoding (a name, a model name or "approximate")."""

def count_texts(texts: Sequence[str], encoding: str) -> list[int]:
    """The tokens of each text, on all cores with the GIL released."""

def count_message(message: _Message, encoding: str) -> int:
    """The tokens one message costs (its texts and the chat overhead, no priming)."""

def count_message_list(messages: Sequence[_Message], encoding: str, thinking: str | None = None) -> list[int]:
    """The tokens of each message sent in one request, the thinking of earlier turns dropped
    ("drop_earlier", the default) or counted ("count"), on all cores with the GIL released."""

def current_turn_start(messages: Sequence[_Message]) -> int:
    """The position of the last message that opens a user turn (0 when none does)."""

def encoding_name(encoding: str, place: str) -> str:
    """The canonical name of an encoding given by name or model name; ``place`` names the
    function or class it was given to, in an error."""

def reply_priming(encoding: str) -> int:
    """What a non-empty list of messages costs beyond its messages."""

def ranks_file(encoding: str) -> str:
    """The ranks file of an exact encoding, in tiktoken's format."""

@final
class SearchIndex:
    """BM25 over page texts (an inverted index); the GIL is released while it works. With
    neighbour_weight w (0 <= w < 1), a page scores at least w times its better neighbour's
    (page - 1, page + 1) own score."""

    def __new__(cls, snippet_chars: int | None = None, neighbour_weight: float = 0.0) -> SearchIndex: ...
    @property
    def snippet_chars(self) -> int: ...
    @property
    def neighbour_weight(self) -> float: ...
    def __len__(self) -> int: ...
    def add(self, page: int, text: str) -> None:
        """Index text as page (>= 0), replacing what that page held. O(tokens)."""
    def add_many(self, items: Sequence[tuple[int, str]]) -> None:
        """add() for each item, in order; tokenizes in parallel."""
    def search(self, query: str, k: int) -> list[tuple[int, float, str]]:
        """(page, score, snippet) of the k best pages, best first; ties to the lower page."""

@final
class VectorIndex:
    """Unit-length page vectors (float32) of one dimension, by page; cosine similarity."""

    def __new__(cls) -> VectorIndex: ...
    def __len__(self) -> int: ...
    def __contains__(self, page: int, /) -> bool: ...
    @property
    def dim(self) -> int:
        """The dimension (0 before the first vector)."""
    def add_many(self, pages: Sequence[int], data: bytes, dim: int) -> None:
        """The vectors of pages (data: their rows of dim little-endian float32), all or none."""
    def nearest(self, query: bytes, k: int) -> list[tuple[int, float]]:
        """(page, cosine) of the k pages nearest query, best first; ties to the lower page."""

def fuse_ranks(
    lexical: Sequence[tuple[int, float]], dense: Sequence[tuple[int, float]], method: str, weight: float, k: int
) -> list[tuple[int, float]]:
    """The k best (page, score) of two ranked lists fused by "rrf" or "convex", weight on dense."""

def hybrid_search(
    search: SearchIndex,
    vectors: VectorIndex,
    query: str,
    query_vector: bytes,
    k: int,
    method: str,
    weight: float,
    depth: int,
) -> list[tuple[int, float, str]]:
    """(page, fused score, snippet) of the k best pages: BM25 and cosine top-depth lists fused."""

# ---- batch (memci.batch) --------------------------------------------------------------------------

#: The totals of a batch run: conversations, bad, messages_in, messages_out, removed (by step),
#: tokens (per count_tokens step), bytes_in, bytes_out.
_Totals = dict[str, Any]
_Bad = tuple[int, str, str]

@final
class BatchPipeline:
    """Step configs (memci.ops, memci.batch.CountTokens) applied to every conversation on a thread pool,
    shared by the process's pipelines of as many workers (a forked child starts its own)."""

    MAX_WORKERS: ClassVar[int]
    """The most threads a pipeline may run on."""
    def __new__(cls, steps: Sequence[Any], format: str = "chat", workers: int | None = None) -> BatchPipeline: ...
    @property
    def workers(self) -> int: ...
    def run_messages(
        self, conversations: Sequence[Any]
    ) -> tuple[list[list[_Message] | None], list[list[int]], list[_Bad], _Totals]:
        """Outputs (kept input dicts; None for a bad one), count_tokens counts, bad ones, totals."""
    def run_records(self, records: Sequence[Any]) -> tuple[list[bytes | None], list[list[int]], list[_Bad], _Totals]:
        """The same on records as JSON text (str or bytes); outputs are UTF-8 bytes."""
    def open_jsonl(self, input: str, output: str, errors: str | None, chunk_bytes: int) -> JsonlRun:
        """A streamed run of a JSONL file, driven by JsonlRun.step."""

@final
class JsonlRun:
    """A streamed JSONL run: step() until False, then finish(); close() discards it."""

    def step(self) -> bool: ...
    def progress(self) -> tuple[int, int, int]: ...
    def input_change(self) -> str | None:
        """Why the input cannot be taken as read whole and unchanged, or None."""
    def totals(self) -> _Totals: ...
    def finish(self) -> _Totals: ...
    def close(self) -> None: ...
