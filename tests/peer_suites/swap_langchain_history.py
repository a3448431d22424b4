"""Swap plugin: langchain-core's ``InMemoryChatMessageHistory`` becomes memci's
``MemciChatMessageHistory`` in the suite (its chat-history and ``RunnableWithMessageHistory`` tests).

The tests build the native class as ``InMemoryChatMessageHistory()`` or
``InMemoryChatMessageHistory(messages=[...])`` and check what a run stored by comparing histories
by value (``store == {"1": InMemoryChatMessageHistory(messages=[...])}``), which the native class
has as a Pydantic model. memci's class takes a session id and compares by identity, so the memci
side binds a subclass with the native constructor (each instance a session of its own, a fresh
id, seeded with ``messages``) and the native equality (the same class, the same messages, read
back from memci's store): those assertions then check what memci stored, message by message.
That equality is the native one, not a looser stand-in: the native class is a Pydantic model with
one field, ``messages``, and Pydantic's ``==`` holds for two models of the same class with equal
fields, so both sides assert "a history of this class holding exactly these messages"; the memci
side reads the messages from the store, so a message memci lost or changed fails the comparison.
memci's class itself keeps identity equality, as LangChain's persistent histories do (two handles
on one stored session are not made equal by what they hold at a moment).
``noop`` binds a subclass of the native class that changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import BaseMessage
from swap import rebind, side


class NoopInMemoryChatMessageHistory(InMemoryChatMessageHistory):
    """``InMemoryChatMessageHistory`` itself, under another class."""


def memci_history() -> type:
    """``MemciChatMessageHistory`` with the native class's constructor (imported late: the
    native side never loads memci)."""
    from memci.integrations.langchain import MemciChatMessageHistory

    class SessionPerInstance(MemciChatMessageHistory):
        """A ``MemciChatMessageHistory`` on a session of its own, seeded with ``messages``, equal to
        another by its messages."""

        def __init__(self, messages: Sequence[BaseMessage] = ()) -> None:
            super().__init__(uuid.uuid4().hex)
            if messages:
                self.add_messages(messages)

        def __eq__(self, other: object) -> bool:
            return type(other) is type(self) and self.messages == other.messages  # type: ignore[attr-defined]

        __hash__ = None  # type: ignore[assignment]  # equal by value, as the native class

    return SessionPerInstance


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = side()
    if chosen == "native":
        return
    replacement = NoopInMemoryChatMessageHistory if chosen == "noop" else memci_history()
    if not rebind("InMemoryChatMessageHistory", InMemoryChatMessageHistory, replacement, config.rootpath):
        raise pytest.UsageError("swap_langchain_history: no test module binds InMemoryChatMessageHistory")
