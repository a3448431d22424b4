"""memci: an LLM agent's context window, held in Rust.

>>> import memci
>>> arr = memci.MessageArray([{"role": "system", "content": "You are terse."}])
>>> arr.append({"role": "user", "content": "hi"})
>>> arr.recent(1, role="user")
[{'role': 'user', 'content': 'hi'}]

See :class:`MessageArray`, the configs of :mod:`memci.ops`, and ``docs/message-array.md``.
"""

from memci import formats, ops, tokens
from memci._core import __version__
from memci.array import MessageArray
from memci.context.contents import ArchivePolicy, ContentsEntry, DroppedEntry, PageListing, RoundResult
from memci.context.search import PageSearch, SearchHit
from memci.context.summary import CallableSummarizer, ExtractiveSummarizer, PageSummary, Summarizer
from memci.context.system import ContextSystem, Entry, Page
from memci.errors import (
    BatchError,
    ConflictError,
    ContextOverflowError,
    InvalidMessageError,
    InvalidOperationError,
    MemciError,
    PageError,
    PositionError,
    StateError,
    StorageError,
    SummaryError,
)
from memci.results import BatchSnapshot, OperationResult, Stats
from memci.sanitize import RemovedMessage, SanitizeResult, ValidationResult, sanitize_messages, validate_messages
from memci.storage import DirectoryStorage, MemoryStorage, RedisStorage, SqliteStorage, Storage
from memci.usage import TokenUsage, Usage, UsageRecord

__all__ = [
    "ArchivePolicy",
    "BatchError",
    "BatchSnapshot",
    "CallableSummarizer",
    "ConflictError",
    "ContentsEntry",
    "ContextOverflowError",
    "ContextSystem",
    "DirectoryStorage",
    "DroppedEntry",
    "Entry",
    "ExtractiveSummarizer",
    "InvalidMessageError",
    "InvalidOperationError",
    "MemciError",
    "MemoryStorage",
    "MessageArray",
    "OperationResult",
    "Page",
    "PageError",
    "PageListing",
    "PageSearch",
    "PageSummary",
    "PositionError",
    "RedisStorage",
    "RemovedMessage",
    "RoundResult",
    "SanitizeResult",
    "SearchHit",
    "SqliteStorage",
    "StateError",
    "Stats",
    "Storage",
    "StorageError",
    "Summarizer",
    "SummaryError",
    "TokenUsage",
    "Usage",
    "UsageRecord",
    "ValidationResult",
    "__version__",
    "formats",
    "ops",
    "sanitize_messages",
    "tokens",
    "validate_messages",
]
