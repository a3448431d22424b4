"""The context system's lock (:class:`SystemLock`)."""

from __future__ import annotations

import threading

from memci.errors import InvalidOperationError

__all__ = ["SystemLock"]


class SystemLock:
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
