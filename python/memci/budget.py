"""Token budgets of a :class:`~memci.MessageArray`: ``token_count`` and ``trim_to_tokens`` check
their arguments here and delegate to the store, which caches each message's count per encoding."""

from __future__ import annotations

from memci import _core, ops, tokens
from memci.errors import InvalidOperationError


def token_count(store: _core.MessageStore, encoding: str, counter: tokens.Counter | None) -> int:
    name, fn = tokens.resolve("token_count", encoding, counter)
    if fn is None:
        return store.token_count(name)
    return tokens.count_messages(store.messages(), counter=fn)


#: LangChain's message types, accepted where a role is named.
_LANGCHAIN_TYPES = {"human": "user", "ai": "assistant"}


def _roles(field: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise InvalidOperationError(f"trim_to_tokens: {field} must be a role, a list of roles or None, got {value!r}")
    names = [_LANGCHAIN_TYPES.get(r, r) if isinstance(r, str) else r for r in items]
    return ops.check_roles("trim_to_tokens", field, names) or None


def trim_to_tokens(store: _core.MessageStore, config: ops.TrimToTokens, counter: tokens.Counter | None) -> None:
    """Trim as ``config`` says (its scalar fields are checked by the config itself): resolve the
    roles (LangChain's ``human``/``ai`` too) and the counter, then delegate."""
    starts, ends = _roles("start_on", config.start_on), _roles("end_on", config.end_on)
    name, fn = tokens.resolve("trim_to_tokens", config.encoding, counter)
    store.trim_to_tokens(
        config.describe(),
        config.max_tokens,
        config.strategy,
        config.keep_system,
        starts,
        ends,
        config.allow_partial,
        name,
        fn,
    )
