"""Token budgets of a :class:`~memci.MessageArray`: ``token_count`` and ``trim_to_tokens`` check
their arguments here and delegate to the store, which caches each message's count per encoding."""

from __future__ import annotations

from memci import _core, tokens


def token_count(store: _core.MessageStore, encoding: str, counter: tokens.Counter | None) -> int:
    name, fn = tokens.resolve("token_count", encoding, counter)
    if fn is None:
        return store.token_count(name)
    return tokens.count_messages(store.messages(), counter=fn)
