"""Swap plugin: the Agents SDK's ``SQLiteSession`` becomes memci's ``MemciSession`` in the suite.

``noop`` binds a subclass that changes nothing, the control for tests that check the exact class.
"""

from __future__ import annotations

import pytest
from agents.memory import SQLiteSession
from swap import rebind, side


class NoopSQLiteSession(SQLiteSession):
    """``SQLiteSession`` itself, under another class."""


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = side()
    if chosen == "native":
        return
    if chosen == "noop":
        replacement: type = NoopSQLiteSession
    else:
        from memci.integrations.openai_agents import MemciSession

        replacement = MemciSession
    if not rebind("SQLiteSession", SQLiteSession, replacement, config.rootpath):
        raise pytest.UsageError("swap_agents_sqlite: no test module binds SQLiteSession")
