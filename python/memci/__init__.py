"""memci: an LLM agent's context window, held in Rust.

>>> import memci
>>> arr = memci.MessageArray([{"role": "system", "content": "You are terse."}])
>>> arr.append({"role": "user", "content": "hi"})
>>> arr.recent(1, role="user")
[{'role': 'user', 'content': 'hi'}]

See :class:`MessageArray`, the configs of :mod:`memci.ops`, and ``docs/message-array.md``.
"""

from memci import ops
from memci._core import __version__
from memci.array import MessageArray
from memci.contents import ArchivePolicy, ContentsEntry, DroppedEntry, PageListing, RoundResult
from memci.context import ContextSystem, Entry, Page
from memci.errors import (
    BatchError,
    ContextOverflowError,
    InvalidMessageError,
    InvalidOperationError,
    MemciError,
    PageError,
    PositionError,
    StateError,
    SummaryError,
)
from memci.results import BatchSnapshot, OperationResult, Stats
from memci.summary import CallableSummarizer, ExtractiveSummarizer, PageSummary, Summarizer

__all__ = [
    "ArchivePolicy",
    "BatchError",
    "BatchSnapshot",
    "CallableSummarizer",
    "ContentsEntry",
    "ContextOverflowError",
    "ContextSystem",
    "DroppedEntry",
    "Entry",
    "ExtractiveSummarizer",
    "InvalidMessageError",
    "InvalidOperationError",
    "MemciError",
    "MessageArray",
    "OperationResult",
    "Page",
    "PageError",
    "PageListing",
    "PageSummary",
    "PositionError",
    "RoundResult",
    "StateError",
    "Stats",
    "Summarizer",
    "SummaryError",
    "__version__",
    "ops",
]
