"""Swap plugin: the Agents SDK's SQLite sessions, ``SQLiteSession`` and ``AsyncSQLiteSession``
(``agents.extensions.memory``), become memci's ``MemciSession`` in the suite: each name a test
module binds is rebound to a subclass of ``MemciSession`` that adds nothing and bears that name,
the name the test constructs (its errors name it, as they name any subclass a user makes).

``noop`` binds a subclass of each that changes nothing, the control for tests that check the exact class.
"""

from __future__ import annotations

import pytest
from agents.extensions.memory import AsyncSQLiteSession
from agents.memory import SQLiteSession
from swap import rebind, side


class NoopSQLiteSession(SQLiteSession):
    """``SQLiteSession`` itself, under another class."""


class NoopAsyncSQLiteSession(AsyncSQLiteSession):
    """``AsyncSQLiteSession`` itself, under another class."""


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = side()
    if chosen == "native":
        return
    natives: dict[str, type] = {"SQLiteSession": SQLiteSession, "AsyncSQLiteSession": AsyncSQLiteSession}
    if chosen == "noop":
        replacements: dict[str, type] = {
            "SQLiteSession": NoopSQLiteSession,
            "AsyncSQLiteSession": NoopAsyncSQLiteSession,
        }
    else:
        from memci.integrations.openai_agents import MemciSession

        replacements = {name: type(name, (MemciSession,), {"__module__": __name__}) for name in natives}
    rebound = sum(rebind(name, natives[name], replacements[name], config.rootpath) for name in natives)
    if not rebound:
        raise pytest.UsageError("swap_agents_sqlite: no test module binds SQLiteSession or AsyncSQLiteSession")
