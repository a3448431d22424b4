"""Token budgets of a :class:`~memci.MessageArray`: ``token_count`` and ``trim_to_tokens`` check
their arguments here and delegate to the store, which caches each message's count per encoding."""

from __future__ import annotations

from collections.abc import Sequence

from memci import _core, ops, tokens
from memci.errors import InvalidOperationError


def token_count(store: _core.MessageStore, encoding: str, counter: tokens.Counter | None) -> int:
    name, fn = tokens.resolve("token_count", encoding, counter)
    if fn is None:
        return store.token_count(name)
    return tokens.count_messages(store.messages(), counter=fn)


#: LangChain's message types, accepted where a role is named.
_LANGCHAIN_TYPES = {"human": "user", "ai": "assistant"}
STRATEGIES = ("first", "last")


def _roles(field: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise InvalidOperationError(f"trim_to_tokens: {field} must be a role, a list of roles or None, got {value!r}")
    names = [_LANGCHAIN_TYPES.get(r, r) if isinstance(r, str) else r for r in items]
    return ops.check_roles("trim_to_tokens", field, names) or None


def _flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidOperationError(f"trim_to_tokens: {field} must be a bool, got {value!r}")
    return value


def trim_to_tokens(
    store: _core.MessageStore,
    max_tokens: int,
    *,
    strategy: str,
    keep_system: bool,
    start_on: str | Sequence[str] | None,
    end_on: str | Sequence[str] | None,
    allow_partial: bool,
    encoding: str,
    counter: tokens.Counter | None,
) -> str:
    """Check the arguments, trim, and return the operation's name."""
    limit = ops.check_count("trim_to_tokens", "max_tokens", max_tokens)
    if strategy not in STRATEGIES:
        raise InvalidOperationError(f"trim_to_tokens: strategy must be 'first' or 'last', got {strategy!r}")
    starts, ends = _roles("start_on", start_on), _roles("end_on", end_on)
    keep, partial = _flag("keep_system", keep_system), _flag("allow_partial", allow_partial)
    name, fn = tokens.resolve("trim_to_tokens", encoding, counter)
    shown = {"max_tokens": limit, "strategy": strategy}
    description = f"trim_to_tokens({', '.join(f'{k}={v!r}' for k, v in shown.items())})"
    store.trim_to_tokens(description, limit, str(strategy), keep, starts, ends, partial, name, fn)
    return "trim_to_tokens"
