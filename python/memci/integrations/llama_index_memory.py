"""memci as the short-term store behind LlamaIndex's ``Memory`` (``pip install 'memci[llama-index]'``).

``Memory`` (LlamaIndex's chat engines' and agents' default memory) keeps a FIFO queue of messages
in an ``AsyncDBChatStore`` and flushes the oldest into its memory blocks when the queue passes its
share of ``token_limit``. :class:`MemciChatStore` is that store on any memci store (SQLite, Redis,
Postgres, encrypted, in memory), one memci store per session::

    import memci
    from llama_index.core.memory import Memory
    from memci.integrations.llama_index_memory import MemciChatStore

    store = MemciChatStore(lambda session_id: memci.SqliteStorage("chats.db", namespace=session_id))
    memory = Memory.from_defaults(session_id="user-42", chat_store=store, token_limit=3000)

Decisions: ``docs/integrations/llama-index.md``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from memci._optional import needs_extra

with needs_extra("llama-index", __name__):
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus

from memci.errors import InvalidOperationError
from memci.storage.log import CONFLICTS, PageLog
from memci.storage.memory import MemoryStorage
from memci.storage.protocol import Storage

__all__ = ["STORE_KIND", "MemciChatStore"]

#: The ``kind`` of a session's state in its memci store.
STORE_KIND = "memci.llama_index.chat_store"
#: One stored message: its status and its ``ChatMessage.model_dump(mode="json")``.
Row = dict[str, Any]


class _Session:
    """One session's messages (all statuses, in order) on the page log of its memci store: the
    rows are the state's body, its head (kind, revision) is written by the log alone."""

    def __init__(self, key: str, storage: Storage) -> None:
        self.key = key
        self.log = PageLog(storage, STORE_KIND)
        self.lock = threading.Lock()
        self.rows: list[Row] = []
        self.load()

    def load(self) -> None:
        """Read the stored rows (none when nothing is stored); :class:`~memci.StateError` if the
        store holds another kind of state."""
        state = self.log.load(f"session {self.key!r}", hint=": the store holds another kind of state")
        self.rows = [] if state is None else list(state["messages"])

    def change(self, edit: Callable[[list[Row]], Any]) -> Any:
        """Apply ``edit`` to a copy of the rows and save them as one commit; after another
        writer's save, reload and apply it again, by the page log's one conflict policy
        (:data:`~memci.storage.log.CONFLICTS`). Returns what ``edit`` returns."""
        with self.lock:

            def attempt() -> Any:
                rows = list(self.rows)
                result = edit(rows)
                self.log.commit({"messages": rows})
                self.rows = rows
                return result

            return CONFLICTS.run(attempt, self.load)

    def fresh(self) -> list[Row]:
        """The rows, reloaded when another writer saved since (or cleared the store)."""
        with self.lock:
            if self.log.changed():
                self.load()
            return list(self.rows)


def _row(message: ChatMessage, status: MessageStatus) -> Row:
    if not isinstance(message, ChatMessage):
        raise InvalidOperationError(f"a chat store takes LlamaIndex ChatMessages, got {type(message).__name__}")
    return {"status": MessageStatus(status).value, "message": message.model_dump(mode="json")}


def _messages(rows: list[Row]) -> list[ChatMessage]:
    return [ChatMessage.model_validate(row["message"]) for row in rows]


def _matches(row: Row, status: MessageStatus | None) -> bool:
    return status is None or row["status"] == MessageStatus(status).value


class MemciChatStore(AsyncDBChatStore):
    """An ``AsyncDBChatStore`` (what ``Memory`` keeps its queue in) on memci stores:
    ``storage(session_id)`` gives each session its own memci store (default: one
    :class:`~memci.MemoryStorage` per session, this process only).

    A session's messages, with their status (``active`` or ``archived``), are one JSON state in its
    store (``ChatMessage.model_dump(mode="json")`` each, the form ``SQLAlchemyChatStore`` writes),
    so every write is one commit (O(session) bytes, as ``Memory`` reads the whole active queue at
    each ``put`` anyway), and a writer that finds another's newer revision reloads and applies its
    change again: concurrent writers to one session lose nothing. ``delete_message(key, idx)``
    takes the message's position among the session's messages (``SimpleChatStore``'s rule; the
    SQL store's row ids have no meaning here). ``get_keys`` lists the sessions this object has
    opened that hold messages (a store of one namespace per session cannot list the others).
    The blocking store work runs in a worker thread."""

    _storage_for: Callable[[str], Storage] = PrivateAttr()
    _sessions: dict[str, _Session] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, storage: Callable[[str], Storage] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if storage is not None and not callable(storage):
            raise InvalidOperationError(
                f"storage must be a function of the session id returning a memci store, got {type(storage).__name__}"
            )
        self._storage_for = storage or (lambda _key: MemoryStorage())

    @classmethod
    def class_name(cls) -> str:
        return "MemciChatStore"

    def _session(self, key: str) -> _Session:
        if not isinstance(key, str):
            raise InvalidOperationError(f"a session key must be a str, got {type(key).__name__}")
        with self._lock:
            session = self._sessions.get(key)
        if session is None:
            session = _Session(key, self._storage_for(key))
            with self._lock:
                session = self._sessions.setdefault(key, session)
        return session

    async def _run(self, work: Callable[[], Any]) -> Any:
        return await asyncio.to_thread(work)

    async def get_messages(
        self,
        key: str,
        status: MessageStatus | None = MessageStatus.ACTIVE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        """The session's messages of ``status`` (all when None), oldest first, from ``offset``,
        at most ``limit``."""

        def read() -> list[ChatMessage]:
            rows = [row for row in self._session(key).fresh() if _matches(row, status)]
            start = offset or 0
            return _messages(rows[start : None if limit is None else start + limit])

        result: list[ChatMessage] = await self._run(read)
        return result

    async def count_messages(self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE) -> int:
        """How many messages of ``status`` (all when None) the session holds."""
        rows: list[Row] = await self._run(lambda: self._session(key).fresh())
        return sum(1 for row in rows if _matches(row, status))

    async def add_message(self, key: str, message: ChatMessage, status: MessageStatus = MessageStatus.ACTIVE) -> None:
        """Append a message with ``status``."""
        await self.add_messages(key, [message], status)

    async def add_messages(
        self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        """Append messages with ``status``, in one commit."""
        rows = [_row(m, status) for m in messages]
        await self._run(lambda: self._session(key).change(lambda stored: stored.extend(rows)))

    async def set_messages(
        self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE
    ) -> None:
        """Replace every message of the session (whatever its status) with ``messages``."""
        rows = [_row(m, status) for m in messages]

        def replace(stored: list[Row]) -> None:
            stored[:] = rows

        await self._run(lambda: self._session(key).change(replace))

    async def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Delete and return the message at position ``idx`` (None when there is none)."""

        def delete(stored: list[Row]) -> ChatMessage | None:
            if type(idx) is not int or not 0 <= idx < len(stored):
                return None
            return _messages([stored.pop(idx)])[0]

        result: ChatMessage | None = await self._run(lambda: self._session(key).change(delete))
        return result

    async def delete_messages(self, key: str, status: MessageStatus | None = None) -> None:
        """Delete the session's messages of ``status`` (all when None)."""

        def delete(stored: list[Row]) -> None:
            stored[:] = [row for row in stored if not _matches(row, status)]

        await self._run(lambda: self._session(key).change(delete))

    async def delete_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Delete and return the oldest ``n`` active messages."""
        return await self._take_oldest(key, n, archive=False)

    async def archive_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Mark the oldest ``n`` active messages archived and return them."""
        return await self._take_oldest(key, n, archive=True)

    async def _take_oldest(self, key: str, n: int, *, archive: bool) -> list[ChatMessage]:
        active = MessageStatus.ACTIVE.value

        def take(stored: list[Row]) -> list[ChatMessage]:
            positions = [i for i, row in enumerate(stored) if row["status"] == active][: max(n, 0)]
            taken = _messages([stored[i] for i in positions])
            if archive:
                for i in positions:
                    stored[i] = {**stored[i], "status": MessageStatus.ARCHIVED.value}
            else:
                chosen = set(positions)
                stored[:] = [row for i, row in enumerate(stored) if i not in chosen]
            return taken

        result: list[ChatMessage] = await self._run(lambda: self._session(key).change(take))
        return result

    async def get_keys(self) -> list[str]:
        """The sessions this store has opened that hold messages."""
        with self._lock:
            sessions = list(self._sessions.values())
        held = await self._run(lambda: [s.key for s in sessions if s.fresh()])
        return list(held)
