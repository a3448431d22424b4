"""Swap plugin: langchain-core's ``trim_messages`` becomes memci's ``MessageArray.trim_to_tokens``
in the suite, through the mapping of ``docs/migrating/langchain.md``.

``include_system`` is ``keep_system``; ``strategy``, ``start_on``, ``end_on`` and ``allow_partial``
keep their names; ``token_counter`` (a function of a message list, a chat model, or
``"approximate"``) becomes ``counter=``, a function of one message dict, counting that message
alone; ``text_splitter`` (a function, or a LangChain ``TextSplitter``: its ``split_text``) is
passed through when ``allow_partial`` (LangChain ignores it otherwise); called without messages it
is a ``RunnableLambda``, as LangChain's. ``noop`` binds a function that calls LangChain's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langchain_core.runnables import RunnableLambda
from swap import rebind, side


def noop_trim(messages: Any = None, **options: Any) -> Any:
    """LangChain's ``trim_messages`` itself, under another function."""
    return trim_messages(messages, **options)


SHORTCUTS: dict[str, Callable[[list[BaseMessage]], int]] = {"approximate": count_tokens_approximately}
"""The ``token_counter`` names the mapping knows: ``trim_messages``' own."""


def message_counter(token_counter: Any) -> Callable[[dict[str, Any]], int]:
    """``token_counter`` as memci's ``counter=``: the tokens of one message dict.

    A ``token_counter`` the mapping cannot translate is refused as ``trim_messages`` refuses it, a
    ``ValueError`` in its words: the caller wrote a ``trim_messages`` call, and what the mapping
    accepts is what ``trim_messages`` accepts (a shortcut above, a chat model, a function)."""
    from memci.formats import to_langchain

    if isinstance(token_counter, str):
        if token_counter not in SHORTCUTS:
            known = ", ".join(repr(name) for name in SHORTCUTS)
            raise ValueError(f"Invalid token_counter shortcut {token_counter!r}. Available shortcuts: {known}.")
        token_counter = SHORTCUTS[token_counter]
    count = getattr(token_counter, "get_num_tokens_from_messages", token_counter)
    if not callable(count):
        raise ValueError(
            "'token_counter' expected to be a model that implements 'get_num_tokens_from_messages()' or a "
            f"function. Received object of type {type(token_counter)}."
        )
    return lambda message: int(count(to_langchain([message])))


def memci_trim(
    messages: Sequence[Any] | None = None,
    *,
    max_tokens: int,
    token_counter: Any,
    strategy: str = "last",
    allow_partial: bool = False,
    end_on: Any = None,
    start_on: Any = None,
    include_system: bool = False,
    text_splitter: Any = None,
) -> Any:
    """``trim_messages``'s signature over ``MessageArray.trim_to_tokens``."""
    import memci
    from memci.formats import from_langchain, to_langchain

    options = {
        "max_tokens": max_tokens,
        "token_counter": token_counter,
        "strategy": strategy,
        "allow_partial": allow_partial,
        "end_on": end_on,
        "start_on": start_on,
        "include_system": include_system,
        "text_splitter": text_splitter,
    }
    if messages is None:
        return RunnableLambda(lambda given: memci_trim(given, **options))
    array = memci.MessageArray(from_langchain(convert_to_messages(messages)))
    array.trim_to_tokens(
        max_tokens,
        strategy=strategy,
        keep_system=include_system,
        start_on=start_on,
        end_on=end_on,
        allow_partial=allow_partial,
        counter=message_counter(token_counter),
        text_splitter=getattr(text_splitter, "split_text", text_splitter) if allow_partial else None,
    )
    trimmed: list[BaseMessage] = to_langchain(array.messages())
    return trimmed


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = side()
    if chosen == "native":
        return
    replacement = noop_trim if chosen == "noop" else memci_trim
    if not rebind("trim_messages", trim_messages, replacement, config.rootpath):
        raise pytest.UsageError("swap_langchain_trim: no test module binds trim_messages")
