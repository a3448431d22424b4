"""memci: an LLM agent's context window, held in Rust.

>>> import memci
>>> arr = memci.MessageArray([{"role": "system", "content": "You are terse."}])
>>> arr.append({"role": "user", "content": "hi"})
>>> arr.recent(1, role="user")
[{'role': 'user', 'content': 'hi'}]

See :class:`MessageArray`, the configs of :mod:`memci.ops`, and ``docs/message-array.md``.

``import memci`` loads the core modules only. The context system, the stores and the model
summarizer (the wings :mod:`memci.context`, :mod:`memci.storage` and :mod:`memci.summarizers`) load
when one of their names is first used,
:mod:`memci.formats` when it is first used, and numpy when ``MessageArray.indices`` is first
called.
"""

import importlib
import logging
from typing import TYPE_CHECKING, Any

from memci import cost, ops, tokens
from memci._core import __version__
from memci.array import MessageArray
from memci.errors import (
    BatchError,
    ConflictError,
    ContextOverflowError,
    EmbeddingError,
    InvalidMessageError,
    InvalidOperationError,
    MemciError,
    MissingExtraError,
    PageError,
    PositionError,
    SessionClosedError,
    StateError,
    StorageError,
    SummaryError,
)
from memci.results import BatchSnapshot, EditResult, OperationResult, Stats
from memci.sanitize import RemovedMessage, SanitizeResult, ValidationResult, sanitize_messages, validate_messages
from memci.usage import TokenUsage, Usage, UsageRecord

if TYPE_CHECKING:
    from memci import context as context
    from memci import formats
    from memci import storage as storage
    from memci import summarizers as summarizers
    from memci.context.async_summary import AsyncSummarizer
    from memci.context.async_system import AsyncContextSystem
    from memci.context.contents import ArchivePolicy, ContentsEntry, DroppedEntry, PageListing, RoundResult
    from memci.context.page import Entry, Page
    from memci.context.search import PageSearch, SearchHit
    from memci.context.summary import CallableSummarizer, ExtractiveSummarizer, PageSummary, Summarizer
    from memci.context.system import ContextSystem
    from memci.storage import (
        AsyncEncryptedStorage,
        AsyncPostgresStorage,
        AsyncRedisStorage,
        AsyncSqliteStorage,
        AsyncStorage,
        DirectoryStorage,
        EncryptedStorage,
        MemoryStorage,
        PostgresStorage,
        RedisStorage,
        SqliteStorage,
        Storage,
        ThreadedStorage,
    )
    from memci.summarizers import ModelSummarizer

#: The names of the wings, by the module that defines them: imported on first use.
_WINGS = {
    "memci.context.async_summary": ("AsyncSummarizer",),
    "memci.context.async_system": ("AsyncContextSystem",),
    "memci.context.contents": ("ArchivePolicy", "ContentsEntry", "DroppedEntry", "PageListing", "RoundResult"),
    "memci.context.page": ("Entry", "Page"),
    "memci.context.search": ("PageSearch", "SearchHit"),
    "memci.context.summary": ("CallableSummarizer", "ExtractiveSummarizer", "PageSummary", "Summarizer"),
    "memci.context.system": ("ContextSystem",),
    "memci.storage": (
        "AsyncEncryptedStorage",
        "AsyncPostgresStorage",
        "AsyncRedisStorage",
        "AsyncSqliteStorage",
        "AsyncStorage",
        "DirectoryStorage",
        "EncryptedStorage",
        "MemoryStorage",
        "PostgresStorage",
        "RedisStorage",
        "SqliteStorage",
        "Storage",
        "ThreadedStorage",
    ),
    "memci.summarizers": ("ModelSummarizer",),
}
_LAZY = {name: module for module, names in _WINGS.items() for name in names}
_LAZY_MODULES = ("context", "formats", "storage", "summarizers")

if not TYPE_CHECKING:  # to the type checker the names above are plain imports

    def __getattr__(name: str) -> Any:
        """A wing's name (or the wing itself), imported on first use and kept."""
        if name in _LAZY_MODULES:
            value = importlib.import_module(f"memci.{name}")
        elif name in _LAZY:
            value = getattr(importlib.import_module(_LAZY[name]), name)
        else:
            raise AttributeError(f"module 'memci' has no attribute {name!r}")
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_LAZY_MODULES})


# memci logs its warnings (a sanitized history, a prompt over its limit) on the "memci" logger. A
# library leaves the output to the program: without this handler, logging's last resort would print
# them to stderr in a program that configured no logging.
logging.getLogger("memci").addHandler(logging.NullHandler())

__all__ = [
    "ArchivePolicy",
    "AsyncContextSystem",
    "AsyncEncryptedStorage",
    "AsyncPostgresStorage",
    "AsyncRedisStorage",
    "AsyncSqliteStorage",
    "AsyncStorage",
    "AsyncSummarizer",
    "BatchError",
    "BatchSnapshot",
    "CallableSummarizer",
    "ConflictError",
    "ContentsEntry",
    "ContextOverflowError",
    "ContextSystem",
    "DirectoryStorage",
    "DroppedEntry",
    "EditResult",
    "EmbeddingError",
    "EncryptedStorage",
    "Entry",
    "ExtractiveSummarizer",
    "InvalidMessageError",
    "InvalidOperationError",
    "MemciError",
    "MemoryStorage",
    "MessageArray",
    "MissingExtraError",
    "ModelSummarizer",
    "OperationResult",
    "Page",
    "PageError",
    "PageListing",
    "PageSearch",
    "PageSummary",
    "PositionError",
    "PostgresStorage",
    "RedisStorage",
    "RemovedMessage",
    "RoundResult",
    "SanitizeResult",
    "SearchHit",
    "SessionClosedError",
    "SqliteStorage",
    "StateError",
    "Stats",
    "Storage",
    "StorageError",
    "Summarizer",
    "SummaryError",
    "ThreadedStorage",
    "TokenUsage",
    "Usage",
    "UsageRecord",
    "ValidationResult",
    "__version__",
    "cost",
    "formats",
    "ops",
    "sanitize_messages",
    "tokens",
    "validate_messages",
]
