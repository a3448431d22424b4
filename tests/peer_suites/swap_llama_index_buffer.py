"""Swap plugin: LlamaIndex's ``ChatMemoryBuffer`` becomes memci's ``MemciChatMemory`` in the suite
(``ChatMemoryBuffer``'s own tests and the chat engine's that build one).

``MemciChatMemory`` is a drop-in for ``ChatMemoryBuffer`` (the same ``from_defaults``, ``get``
with an initial token count, counting as ``ChatMemoryBuffer`` counts by default,
``to_string``/``from_string``, ``to_dict``/``from_dict``, pickle), so the name is rebound to the
class itself. ``noop`` binds a subclass of ``ChatMemoryBuffer``
that changes nothing.
"""

from __future__ import annotations

import pytest
from llama_index.core.memory import ChatMemoryBuffer
from swap import rebind, side


class NoopChatMemoryBuffer(ChatMemoryBuffer):
    """``ChatMemoryBuffer`` itself, under another class."""


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = side()
    if chosen == "native":
        return
    if chosen == "noop":
        replacement: type = NoopChatMemoryBuffer
    else:
        from memci.integrations.llama_index import MemciChatMemory

        replacement = MemciChatMemory
    if not rebind("ChatMemoryBuffer", ChatMemoryBuffer, replacement, config.rootpath):
        raise pytest.UsageError("swap_llama_index_buffer: no test module binds ChatMemoryBuffer")
