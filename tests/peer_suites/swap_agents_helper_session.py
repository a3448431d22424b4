"""Swap plugin: the Agents SDK's test helper session (``tests/utils/simple_session.py``) re-based on
memci's ``MemciSession``.

The SDK's Runner tests keep their history in ``SimpleListSession`` (a list in memory) and its
subclasses ``CountingSession`` and ``IdStrippingSession``. On the ``memci`` side the name
``SimpleListSession`` is bound to :class:`MemciListSession`, a ``MemciSession`` with the helper's
constructor, its ``saved_items`` view and, as the helper, no compaction hooks, and the two
subclasses are re-based onto it (their own methods, unchanged, then call memci's; :func:`rebased`).
``noop`` binds a subclass of the helper that changes nothing.
"""

from __future__ import annotations

import asyncio
import threading
import types
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from swap import rebind, side

T = TypeVar("T")

BLOCKING_TIMEOUT = 60
"""Seconds a synchronous view (``saved_items``) waits for the session before it gives up."""


def blocking(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to its end on a loop of its own, in a thread of its own (the caller may be on
    a running loop): the helper's constructor and ``saved_items`` are synchronous."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(work)
        except BaseException as error:  # handed to the caller below
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(BLOCKING_TIMEOUT)
    if thread.is_alive():
        raise TimeoutError(f"the session did not answer in {BLOCKING_TIMEOUT} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


def rebased(cls: type, base: type) -> type:
    """``cls`` with ``base`` for its base: its own methods, unchanged, whose ``super()`` now means
    ``base`` (each method is remade with its ``__class__`` cell pointing at the new class)."""
    namespace = {key: value for key, value in vars(cls).items() if key not in ("__dict__", "__weakref__")}
    new = type(cls.__name__, (base,), namespace)
    for key, value in namespace.items():
        code = getattr(value, "__code__", None)
        if code is None or "__class__" not in code.co_freevars:
            continue
        cells = tuple(
            types.CellType(new) if name == "__class__" else cell
            for name, cell in zip(code.co_freevars, value.__closure__ or (), strict=True)
        )
        method = types.FunctionType(code, value.__globals__, value.__name__, value.__defaults__, cells)
        method.__kwdefaults__ = value.__kwdefaults__
        setattr(new, key, method)
    new.__qualname__ = cls.__qualname__
    return new


def memci_list_session() -> type:
    from memci.integrations.openai_agents import MemciSession

    class MemciListSession(MemciSession):
        """``SimpleListSession(session_id="test", history=None)``, kept by memci."""

        def __init__(self, session_id: str = "test", history: list[Any] | None = None) -> None:
            super().__init__(session_id)
            self._ignore_ids_for_matching = False
            if history:  # stored as the helper stores it: past any add_items a test's subclass overrides
                blocking(MemciSession.add_items(self, list(history)))

        @property
        def saved_items(self) -> list[Any]:
            """The items stored now (a copy: the helper's own list was its storage), read past any
            get_items a test's subclass overrides, as the helper's attribute is."""
            return blocking(MemciSession.get_items(self))

        # The helper offers none of the compaction hooks the SDK looks up on a session, and the
        # tests check the path the SDK takes without them: its stand-in answers "not offered",
        # as MemciSession itself does where it offers none (a paged session).

        async def _get_compaction_snapshot(self, limit: int, **options: Any) -> None:
            return None

        async def _atomic_replace_items(self, items: list[Any]) -> bool:
            return False

    return MemciListSession


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.utils import simple_session

    chosen = side()
    if chosen == "native":
        return
    native = simple_session.SimpleListSession
    if chosen == "noop":
        replacement: type = type("SimpleListSession", (native,), {"__doc__": "The helper, under another class."})
    else:
        replacement = memci_list_session()
    counting = rebased(simple_session.CountingSession, replacement)
    stripping = rebased(simple_session.IdStrippingSession, counting)
    for name, native_class, new_class in (
        ("CountingSession", simple_session.CountingSession, counting),
        ("IdStrippingSession", simple_session.IdStrippingSession, stripping),
    ):
        rebind(name, native_class, new_class, config.rootpath)
    if not rebind("SimpleListSession", native, replacement, config.rootpath):
        raise pytest.UsageError("swap_agents_helper_session: no test module binds SimpleListSession")
