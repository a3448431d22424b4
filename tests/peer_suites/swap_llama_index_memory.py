"""Swap plugin: the chat store LlamaIndex's ``Memory`` builds by default (``SQLAlchemyChatStore``,
an in-memory SQLite database per ``Memory``) becomes memci's ``MemciChatStore`` (in-memory memci
stores, one per session) for the whole run: ``Memory(...)``, ``Memory.from_defaults(...)`` and the
chat engines' default memory all build theirs through the name ``SQLAlchemyChatStore`` of
``llama_index.core.memory.memory``, which is rebound here. A store a test passes itself
(``chat_store=``, ``sql_store=``) is left as it is.

The test bodies then drive ``Memory`` (its queue, flushes into memory blocks, archive, session
ids) on memci's store. ``noop`` binds a subclass of ``SQLAlchemyChatStore`` that changes nothing.
"""

from __future__ import annotations

from typing import Any

import llama_index.core.memory.memory as memory_module
import pytest
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
from swap import side


class NoopSQLAlchemyChatStore(SQLAlchemyChatStore):
    """``SQLAlchemyChatStore`` itself, under another class."""


def memci_store(**sql_options: Any) -> AsyncDBChatStore:
    """A fresh ``MemciChatStore`` where ``Memory`` builds its default store (``sql_options``, the
    SQL store's table name, database URI, engine and schema, mean nothing to it)."""
    from memci.integrations.llama_index_memory import MemciChatStore

    return MemciChatStore()


def pytest_configure(config: pytest.Config) -> None:
    chosen = side()
    if chosen == "native":
        return
    if getattr(memory_module, "SQLAlchemyChatStore", None) is not SQLAlchemyChatStore:
        raise pytest.UsageError("swap_llama_index_memory: Memory no longer builds its store as SQLAlchemyChatStore")
    memory_module.SQLAlchemyChatStore = NoopSQLAlchemyChatStore if chosen == "noop" else memci_store  # type: ignore[misc,assignment]
