"""An append-only message log on any memci store: what a chat history keeps (no framework needed).

Each ``append`` writes its messages as one page, written once, and the state (``kind``
:data:`LOG_KIND`, the pages it spans) in the same commit, so an append costs what it adds; a
``clear`` deletes every page in the commit that empties the log. A save that finds another
writer's newer revision reloads and appends again, so concurrent writers to one log lose nothing.
Reading returns what is in memory, refreshed from the store when its revision moved.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from memci.errors import ConflictError, StorageError
from memci.storage.protocol import Storage

__all__ = ["LOG_KIND", "MessageLog"]

#: The ``kind`` of a message log's state.
LOG_KIND = "memci.message_log"
#: Appends retried after another writer's save (each after a short random wait and a reload).
CONFLICT_RETRIES = 100

Message = dict[str, Any]


class MessageLog:
    """The messages of one conversation in ``storage`` (this conversation's own store)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {}
        self._messages: list[Message] = []
        self._load()

    def _load(self) -> None:
        state = self.storage.load_state()
        if state is None:
            state = {"version": 1, "kind": LOG_KIND, "revision": 0, "pages_through": 0}
        elif state.get("kind") != LOG_KIND:
            raise StorageError(
                f"the store holds another kind of state, not a message log: {state.get('kind')!r}", "state"
            )
        messages: list[Message] = []
        first = state.get("forgotten_through", 0)
        for index in self.storage.page_indices():
            if first < index <= state["pages_through"]:
                page = self.storage.get_page(index)
                messages.extend(page["messages"] if page is not None else ())
        self._state, self._messages = state, messages

    def _fresh(self) -> None:
        """Reload when another writer saved since (one state read)."""
        stored = self.storage.load_state()
        if stored is not None and stored.get("revision") != self._state.get("revision"):
            self._load()

    def messages(self) -> list[Message]:
        """The messages, oldest first (the log's own dicts: copy before changing them)."""
        with self._lock:
            self._fresh()
            return list(self._messages)

    def append(self, messages: list[Message]) -> None:
        """Append ``messages`` in one commit."""
        if not messages:
            return
        with self._lock:
            for attempt in range(CONFLICT_RETRIES + 1):
                index = self._state["pages_through"] + 1
                state = {**self._state, "revision": self._state.get("revision", 0) + 1, "pages_through": index}
                page = {"index": index, "messages": messages, "summary": "", "entry_summaries": [], "archived_round": 0}
                try:
                    self.storage.save_state(state, [page])
                except ConflictError:
                    if attempt == CONFLICT_RETRIES:
                        raise
                    time.sleep(random.uniform(0, 0.001 * min(attempt + 1, 20)))
                    self._load()
                    continue
                self._state = state
                self._messages.extend(page["messages"])
                return

    def clear(self) -> None:
        """Forget every message: the pages are deleted in the commit that empties the log."""
        with self._lock:
            for attempt in range(CONFLICT_RETRIES + 1):
                state = {
                    **self._state,
                    "revision": self._state.get("revision", 0) + 1,
                    "forgotten_through": self._state["pages_through"],
                }
                try:
                    self.storage.save_state(state)
                except ConflictError:
                    if attempt == CONFLICT_RETRIES:
                        raise
                    self._load()
                    continue
                self._state, self._messages = state, []
                return
