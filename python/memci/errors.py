"""The memci exception family.

Every error memci raises on bad input is a :class:`MemciError`, so ``except memci.MemciError``
catches them all; each also derives from the builtin a caller would expect (``ValueError`` for
bad values, ``IndexError`` for a position out of range). Messages name what is wrong and where
(``messages[3].tool_calls[0].function: missing key 'name'``). A call that raises has changed
nothing.
"""

from __future__ import annotations

__all__ = [
    "BatchError",
    "ConflictError",
    "ContextOverflowError",
    "EmbeddingError",
    "InvalidMessageError",
    "InvalidOperationError",
    "MemciError",
    "MissingExtraError",
    "PageError",
    "PositionError",
    "SessionClosedError",
    "StateError",
    "StorageError",
    "SummaryError",
]


class MemciError(Exception):
    """Root of every error memci raises on bad input or a bad request."""


class InvalidMessageError(MemciError, ValueError):
    """A message (or a value inside it) is not acceptable.

    ``path`` names the place, e.g. ``messages[3].metadata.when``.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class InvalidOperationError(MemciError, ValueError):
    """An operation, its configuration or a query argument is not valid."""


class BatchError(MemciError, LookupError):
    """A batch index that does not exist (rollback or snapshot)."""


class PositionError(MemciError, IndexError):
    """A position outside the visible messages."""


class StateError(MemciError, ValueError):
    """A saved state (``from_json``) that cannot be loaded; the message names the bad part."""


class PageError(MemciError, LookupError):
    """A page index of a :class:`~memci.ContextSystem` that does not exist (or is not stored)."""


class ContextOverflowError(MemciError, ValueError):
    """The context cannot fit ``max_context_tokens`` even with every page but the open one archived."""


class SummaryError(MemciError, ValueError):
    """A summarizer returned something that is not a summary of the page it was given."""


class EmbeddingError(MemciError, ValueError):
    """An embedder returned something that is not one vector per text given, or vectors of another
    dimension than the ones it made before."""


class StorageError(MemciError, ValueError):
    """A store refused a page or a state, or holds one it cannot read.
    Raised for a value that is not JSON, a page index that is not a positive int, a page written
    twice with different content, a corrupt file or database, and a store used after ``close()``.
    ``where`` names the place: ``page 3: messages[2].metadata``, a file path, or a database path.
    """

    def __init__(self, message: str, where: str | None = None) -> None:
        super().__init__(message)
        self.where = where


class ConflictError(StorageError):
    """A save over a newer state: another writer saved since this state was loaded.

    Nothing was written. ``stored_revision`` is the revision the store holds, ``revision`` the one
    the refused save carried; reload (``ContextSystem.load``), redo the turn, and save again.
    """

    def __init__(self, message: str, where: str | None = None, *, revision: int, stored_revision: int) -> None:
        super().__init__(message, where)
        self.revision = revision
        self.stored_revision = stored_revision


class MissingExtraError(MemciError, ModuleNotFoundError):
    """A feature needs an optional dependency that is missing, or too old to import from.

    ``extra`` names the extra that brings it (``pip install 'memci[extra]'``); ``name`` is the
    module that could not be imported, as on any ``ImportError``.
    """

    def __init__(self, message: str, *, extra: str, name: str | None = None) -> None:
        super().__init__(message, name=name)
        self.extra = extra


class SessionClosedError(StorageError, RuntimeError):
    """A framework session (``MemciSession``) used after its ``close()``. Also a ``RuntimeError``,
    which is what the framework's own sessions raise then."""


def shown(value: object, limit: int = 60) -> str:
    """A short, safe rendering of a value the model wrote, for a refusal: never raises (an int too
    large to print, a lone surrogate, a container nested deep)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1024:
        sign = "a negative" if value < 0 else "an"
        return f"{sign} integer of {value.bit_length()} bits"  # printing one of 4,300 digits raises
    if isinstance(value, str | int | float | bool) or value is None:
        text = repr(value)
        return text if len(text) <= limit else text[:limit] + "…"
    return f"a {type(value).__name__}"


def repr_of(value: object, limit: int = 80) -> str:
    """``repr(value)`` for an error message about an argument, never raising: cut to ``limit``
    characters, and :func:`shown` when the repr itself fails (an int of over 4,300 digits anywhere
    inside, a ``__repr__`` that raises)."""
    try:
        text = repr(value)
    except Exception:  # whatever a repr raises, the error being reported matters more
        return shown(value, limit)
    return text if len(text) <= limit else text[:limit] + "…"


def is_unicode(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form: it holds no lone surrogate (which a str may, and neither
    JSON text, nor a store, nor an error message that shows it can carry)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
