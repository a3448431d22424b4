"""memci: an LLM agent's context window, held in Rust.

>>> import memci
>>> arr = memci.MessageArray([{"role": "system", "content": "You are terse."}])
>>> arr.append({"role": "user", "content": "hi"})
>>> arr.recent(1, role="user")
[{'role': 'user', 'content': 'hi'}]

See :class:`MessageArray`, the configs of :mod:`memci.ops`, and ``docs/message-array.md``.
"""

from memci import ops, tokens
from memci._core import __version__
from memci.array import MessageArray
from memci.errors import (
    BatchError,
    InvalidMessageError,
    InvalidOperationError,
    MemciError,
    PositionError,
    StateError,
)
from memci.results import BatchSnapshot, OperationResult, Stats
from memci.usage import TokenUsage, Usage, UsageRecord

__all__ = [
    "BatchError",
    "BatchSnapshot",
    "InvalidMessageError",
    "InvalidOperationError",
    "MemciError",
    "MessageArray",
    "OperationResult",
    "PositionError",
    "StateError",
    "Stats",
    "TokenUsage",
    "Usage",
    "UsageRecord",
    "__version__",
    "ops",
    "tokens",
]
