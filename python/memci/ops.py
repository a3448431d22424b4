"""Typed operation configs for :meth:`memci.MessageArray.execute`, and :func:`parse` for dicts.

Each config checks its own fields when it is built, so a config that exists is valid:
counts are non-negative ``int`` (``bool`` is refused), roles are known role names, keyword
lists are tuples of ``str``. A bad field raises :class:`~memci.errors.InvalidOperationError`
naming the operation and the field::

    >>> Truncate(keep_last=-1)
    Traceback (most recent call last):
    memci.errors.InvalidOperationError: truncate: keep_last must be a non-negative int, got -1

``describe()`` is the text a batch snapshot carries for the batch the operation ended
(``"truncate(keep_last=5)"``). :func:`parse` reads both operation-dict formats: flat
(``{"operation": "TRUNCATE", "keepLast": 5, "role": "user"}``) and nested
(``{"operation": "truncate", "truncate": {"keepLast": 5}}``).
"""

from __future__ import annotations

import dataclasses
import operator
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, NoReturn, SupportsIndex, TypeAlias, cast

from memci.errors import BatchError, InvalidMessageError, InvalidOperationError, repr_of, shown
from memci.tokens import DEFAULT_ENCODING, DEFAULT_THINKING, thinking_rule

__all__ = [
    "ROLES",
    "Append",
    "Checkpoint",
    "Clear",
    "ClearThinking",
    "ClearToolUses",
    "Filter",
    "Insert",
    "Operation",
    "Replace",
    "Rollback",
    "Sanitize",
    "TrimToTokens",
    "Truncate",
    "parse",
]

#: The roles a message may have. ``developer`` indexes and clears like ``system``.
ROLES: tuple[str, ...] = ("system", "developer", "user", "assistant", "tool")
_ROLE_SET = frozenset(ROLES)

Message: TypeAlias = dict[str, Any]
#: One message, or a list of them.
#: What the store takes as messages: one message or a sequence of them (any mapping, such as the
#: SDKs' TypedDicts, or an SDK object with ``model_dump``).
Messages: TypeAlias = Mapping[str, Any] | Sequence[Mapping[str, Any]]
#: The same as the core takes them (dicts at run time: a mapping that is not a dict is refused there).
CoreMessages: TypeAlias = Message | Sequence[Message]
#: The forms ``range`` takes: ``(start, end)``, ``[start, end]`` or ``{"start": s, "end": e}``.
RangeLike: TypeAlias = tuple[int, int] | Sequence[int] | Mapping[str, int]


# ---- field checks, shared by the configs and by the queries of MessageArray ----------------------


def _fail(op: str, text: str) -> NoReturn:
    raise InvalidOperationError(f"{op}: {text}")


def _as_int(value: object) -> int | None:
    # The common case first: an isinstance check against the runtime-checkable SupportsIndex
    # protocol costs microseconds (measured: it made arr[-1] 30x slower than the lookup itself).
    if type(value) is int:
        return value
    # Anything with __index__ (numpy integers, IntEnum) but bool, which is not a count here.
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        return None
    try:
        return operator.index(value)
    except TypeError:  # numpy.bool_ declares __index__ and refuses it
        return None


def check_index(op: str, field: str, value: object) -> int:
    """``value`` as an ``int`` (negative allowed; numpy integers too); ``bool`` is refused."""
    index = _as_int(value)
    if index is None:
        _fail(op, f"{field} must be an int, got {repr_of(value)}")
    return index


def check_count(op: str, field: str, value: object) -> int:
    """``value`` as a non-negative ``int`` (an ``IntEnum`` comes back as a plain ``int``)."""
    count = _as_int(value)
    if count is None or count < 0:
        _fail(op, f"{field} must be a non-negative int, got {repr_of(value)}")
    return count


def _optional_count(op: str, field: str, value: object) -> int | None:
    return None if value is None else check_count(op, field, value)


def check_role(op: str, field: str, value: object) -> str:
    """``value`` as one of :data:`ROLES`, as a plain ``str`` (a ``StrEnum`` is accepted)."""
    if type(value) is str and value in ROLES:
        return value
    if not isinstance(value, str):
        _fail(op, f"{field} must be a str, got {repr_of(value)}")
    role = str.__str__(value)
    if role not in ROLES:
        _fail(op, f"{field}: unknown role {repr_of(role)}; expected one of {', '.join(ROLES)}")
    return role


def check_optional_role(op: str, field: str, value: object) -> str | None:
    return None if value is None else check_role(op, field, value)


def _strings(op: str, field: str, value: object) -> tuple[str, ...] | None:
    # A bare string is one item: Filter(content_contains="error") means ["error"], not its letters.
    if value is None:
        return None
    kind = type(value)
    # The common case first: ABC isinstance checks cost microseconds per call.
    if (kind is list or kind is tuple) and all(type(item) is str for item in value):  # type: ignore[attr-defined]
        return tuple(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        return (str.__str__(value),)
    if not isinstance(value, Iterable) or isinstance(value, bytes | bytearray | Mapping):
        _fail(op, f"{field} must be a list of str, got {repr_of(value)}")
    items = tuple(value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            _fail(op, f"{field}[{i}] must be a str, got {repr_of(item)}")
    return tuple(str.__str__(item) for item in items)


def check_roles(op: str, field: str, value: object) -> tuple[str, ...] | None:
    """A list of roles (a bare role name is a list of one) as a tuple of :data:`ROLES`."""
    items = _strings(op, field, value)
    if items is None or all(r in _ROLE_SET for r in items):
        return items
    return tuple(check_role(op, f"{field}[{i}]", r) for i, r in enumerate(items))


def _range(op: str, value: object) -> tuple[int, int] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        if set(value) != {"start", "end"}:
            _fail(op, f"range as a dict must have exactly the keys 'start' and 'end', got {sorted(map(str, value))}")
        start, end = value["start"], value["end"]
    elif isinstance(value, list | tuple) and len(value) == 2:
        start, end = value
    else:
        _fail(op, f"range must be (start, end), [start, end] or {{'start': s, 'end': e}}, got {repr_of(value)}")
    return check_count(op, "range.start", start), check_count(op, "range.end", end)


def check_messages(op: str, value: object) -> CoreMessages:
    # The core checks every message; here only the container: one dict, or a list of them. An SDK
    # object (with `model_dump`) is one message: the core takes it as its dump.
    if isinstance(value, dict | list | tuple) or callable(getattr(value, "model_dump", None)):
        return cast("CoreMessages", value)  # the items are the core's to check
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | bytearray | Mapping):
        return list(value)
    raise InvalidMessageError(
        f"{op}: messages must be a message dict or a list of them, got {type(value).__name__}", path="messages"
    )


def _message(op: str, value: object) -> Message:
    if callable(getattr(value, "model_dump", None)):
        return cast("Message", value)  # the core takes it as its dump
    if not isinstance(value, dict):
        raise InvalidMessageError(f"{op}: a message must be a dict, got {type(value).__name__}", path="message")
    return value


def _describe(name: str, **fields: object) -> str:
    # Whole reprs (a batch's description names its arguments), but never failing on an int too long to print.
    parts = (
        f"{k}={repr_of(list(v) if isinstance(v, tuple) and k != 'range' else v, limit=sys.maxsize)}"
        for k, v in fields.items()
    )
    return f"{name}({', '.join(parts)})"


def _set(config: object, field: str, value: object) -> None:
    object.__setattr__(config, field, value)  # frozen dataclass: normalise once, in __post_init__


# ---- the configs --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Append:
    """APPEND one message or a list at the end; opens no batch. All-or-nothing."""

    name: ClassVar[str] = "append"
    messages: Messages

    def __post_init__(self) -> None:
        _set(self, "messages", check_messages(self.name, self.messages))

    def describe(self) -> str:
        return _describe(self.name, count=_count_of(self.messages))


@dataclasses.dataclass(frozen=True, slots=True)
class Insert:
    """INSERT messages before visible ``position`` (``0 <= position <= len``); opens a batch."""

    name: ClassVar[str] = "insert"
    position: int
    messages: Messages

    def __post_init__(self) -> None:
        _set(self, "position", check_count(self.name, "position", self.position))
        _set(self, "messages", check_messages(self.name, self.messages))

    def describe(self) -> str:
        return _describe(self.name, position=self.position, count=_count_of(self.messages))


@dataclasses.dataclass(frozen=True, slots=True)
class Replace:
    """REPLACE the visible message at ``index`` (negative counts from the end); opens a batch."""

    name: ClassVar[str] = "replace"
    index: int
    message: Message

    def __post_init__(self) -> None:
        _set(self, "index", check_index(self.name, "index", self.index))
        _set(self, "message", _message(self.name, self.message))

    def describe(self) -> str:
        return _describe(self.name, index=self.index)


@dataclasses.dataclass(frozen=True, slots=True)
class Truncate:
    """TRUNCATE the visible messages; the given cuts apply in field order, like slices.

    ``keep_first=n`` is ``[:n]``, ``keep_last=n`` is ``[len-n:]`` (0 keeps nothing),
    ``remove_first=n`` is ``[n:]``, ``remove_last=n`` is ``[:len-n]``, ``range=(s, e)`` is
    ``[s:e]``. With ``role``, the visible messages of that role are taken first and the result
    holds only them. At least one field must be given. Opens a batch.
    """

    name: ClassVar[str] = "truncate"
    keep_first: int | None = None
    keep_last: int | None = None
    remove_first: int | None = None
    remove_last: int | None = None
    range: tuple[int, int] | None = None
    role: str | None = None

    def __post_init__(self) -> None:
        for field in ("keep_first", "keep_last", "remove_first", "remove_last"):
            _set(self, field, _optional_count(self.name, field, getattr(self, field)))
        _set(self, "range", _range(self.name, self.range))
        _set(self, "role", check_optional_role(self.name, "role", self.role))
        if all(getattr(self, f.name) is None for f in dataclasses.fields(self)):
            _fail(self.name, "give at least one of keep_first, keep_last, remove_first, remove_last, range, role")

    def describe(self) -> str:
        given = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return _describe(self.name, **{k: v for k, v in given.items() if v is not None})


@dataclasses.dataclass(frozen=True, slots=True)
class Clear:
    """CLEAR: keep the visible system/developer messages when ``keep_system``, then re-add the
    tool description if it is no longer visible. Opens a batch."""

    name: ClassVar[str] = "clear"
    keep_system: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.keep_system, bool):
            _fail(self.name, f"keep_system must be a bool, got {repr_of(self.keep_system)}")

    def describe(self) -> str:
        return _describe(self.name, keep_system=self.keep_system)


@dataclasses.dataclass(frozen=True, slots=True)
class Filter:
    """FILTER: keep a visible message when its role is in ``roles``, its text contains any of
    ``content_contains`` and none of ``content_excludes``. ``None`` or an empty list means "not
    given"; a bare string is a list of one. Matching is case-sensitive. Opens a batch."""

    name: ClassVar[str] = "filter"
    roles: Sequence[str] | None = None
    content_contains: Sequence[str] | None = None
    content_excludes: Sequence[str] | None = None

    def __post_init__(self) -> None:
        _set(self, "roles", check_roles(self.name, "roles", self.roles))
        _set(self, "content_contains", _strings(self.name, "content_contains", self.content_contains))
        _set(self, "content_excludes", _strings(self.name, "content_excludes", self.content_excludes))

    def describe(self) -> str:
        fields = ("roles", "content_contains", "content_excludes")
        return _describe(self.name, **{k: v for k in fields if (v := getattr(self, k))})


@dataclasses.dataclass(frozen=True, slots=True)
class Rollback:
    """ROLLBACK to ``batch_index`` as it was when it ended; later batches are discarded. Opens no
    batch; the current batch is a no-op."""

    name: ClassVar[str] = "rollback"
    batch_index: int

    def __post_init__(self) -> None:
        index = check_index(self.name, "batch_index", self.batch_index)
        if index < 0:
            # A batch that cannot exist, like snapshot(-1): the same error as one past the end.
            raise BatchError(f"rollback: batch {shown(index)} does not exist (batch indices are >= 0)")
        _set(self, "batch_index", index)

    def describe(self) -> str:
        return _describe(self.name, batch_index=self.batch_index)


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """CHECKPOINT: open a new batch with no change; ``description`` labels the batch it closes."""

    name: ClassVar[str] = "checkpoint"
    description: str | None = None

    def __post_init__(self) -> None:
        if self.description is not None and not isinstance(self.description, str):
            _fail(self.name, f"description must be a str or None, got {repr_of(self.description)}")

    def describe(self) -> str:
        return "checkpoint()" if self.description is None else str.__str__(self.description)


@dataclasses.dataclass(frozen=True, slots=True)
class Sanitize:
    """SANITIZE: remove the visible messages the model APIs would refuse for their tool calls or
    results (the rules of :func:`memci.sanitize_messages`). Opens a batch only when something is
    removed; :meth:`memci.MessageArray.sanitize` also returns the report."""

    name: ClassVar[str] = "sanitize"

    def describe(self) -> str:
        return "sanitize()"


@dataclasses.dataclass(frozen=True, slots=True)
class TrimToTokens:
    """TRIM_TO_TOKENS: keep what fits ``max_tokens``, tool calls and their results together; the
    fields of :meth:`memci.MessageArray.trim_to_tokens` that a JSON config can carry (a custom
    ``counter`` is a method argument only). ``start_on``/``end_on`` and ``encoding`` are checked
    when the operation runs; ``thinking`` (``"drop_earlier"`` or ``"count"``) when it is made.
    Opens a batch."""

    name: ClassVar[str] = "trim_to_tokens"
    max_tokens: int
    strategy: str = "last"
    keep_system: bool = True
    start_on: str | Sequence[str] | None = "user"
    end_on: str | Sequence[str] | None = None
    allow_partial: bool = False
    encoding: str = DEFAULT_ENCODING
    thinking: str = DEFAULT_THINKING
    low_water: float | None = None

    def __post_init__(self) -> None:
        _set(self, "max_tokens", check_count(self.name, "max_tokens", self.max_tokens))
        thinking_rule(self.name, self.thinking)
        for flag in ("keep_system", "allow_partial"):
            if not isinstance(getattr(self, flag), bool):
                _fail(self.name, f"{flag} must be a bool, got {repr_of(getattr(self, flag))}")
        if self.low_water is not None:
            _set(self, "low_water", _low_water(self.name, self.low_water, self.strategy, self.allow_partial))

    def describe(self) -> str:
        return _describe(self.name, max_tokens=self.max_tokens, strategy=self.strategy)


def _low_water(op: str, value: object, strategy: object, allow_partial: bool) -> float:
    """``low_water`` as a float in (0, 1]; hysteresis keeps the newest messages, whole."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        _fail(op, f"low_water must be a fraction of max_tokens in (0, 1] or None, got {repr_of(value)}")
    if strategy != "last" or allow_partial:
        _fail(op, "low_water cuts the oldest whole messages: it takes strategy='last' and allow_partial=False")
    return float(value)


def _anthropic_amount(op: str, field: str, value: object, unit: str) -> object:
    """Anthropic's ``{"type": unit, "value": n}`` form of an amount as ``n``; anything else as given."""
    if isinstance(value, Mapping):
        if set(value) != {"type", "value"} or value["type"] != unit:
            _fail(op, f"{field} as a dict must be {{'type': {unit!r}, 'value': n}}, got {repr_of(value)}")
        return value["value"]
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class ClearToolUses:
    """CLEAR TOOL USES, Anthropic's ``clear_tool_uses_20250919`` done here, losslessly: when the
    visible messages cost more than ``trigger`` tokens (``None``: whenever it runs), the results of
    every tool use but the last ``keep`` are replaced by ``placeholder`` (``{name}`` and ``{id}``
    filled in; ``None``: a text telling the model what was cleared and how to get it back), each
    result keeping its pair id, so the history stays valid for every API. ``clear_at_least``:
    clear nothing unless at least that many tokens go; ``exclude_tools``: tools never cleared;
    ``clear_tool_inputs``: the cleared calls' arguments become ``{}`` too. Amounts may be given in
    Anthropic's form (``{"type": "input_tokens", "value": 30000}``, ``{"type": "tool_uses",
    "value": 3}``). Tokens are counted in ``encoding`` with the ``thinking`` rule. Opens a batch
    only when something is cleared; the originals stay stored (``all_messages``, ``rollback``).
    Semantics: ``docs/context-edits.md``."""

    name: ClassVar[str] = "clear_tool_uses"
    trigger: int | None = None
    keep: int = 3
    clear_at_least: int | None = None
    exclude_tools: Sequence[str] = ()
    clear_tool_inputs: bool = False
    placeholder: str | None = None
    encoding: str = DEFAULT_ENCODING
    thinking: str = DEFAULT_THINKING

    def __post_init__(self) -> None:
        for field, unit in (("trigger", "input_tokens"), ("keep", "tool_uses"), ("clear_at_least", "input_tokens")):
            _set(self, field, _anthropic_amount(self.name, field, getattr(self, field), unit))
        _set(self, "trigger", _optional_count(self.name, "trigger", self.trigger))
        _set(self, "keep", check_count(self.name, "keep", self.keep))
        _set(self, "clear_at_least", _optional_count(self.name, "clear_at_least", self.clear_at_least))
        _set(self, "exclude_tools", _strings(self.name, "exclude_tools", self.exclude_tools) or ())
        if not isinstance(self.clear_tool_inputs, bool):
            _fail(self.name, f"clear_tool_inputs must be a bool, got {repr_of(self.clear_tool_inputs)}")
        if self.placeholder is not None and not isinstance(self.placeholder, str):
            _fail(self.name, f"placeholder must be a str or None, got {repr_of(self.placeholder)}")
        thinking_rule(self.name, self.thinking)

    def describe(self) -> str:
        given = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return _describe(self.name, **{k: v for k, v in given.items() if v not in (None, ())})


@dataclasses.dataclass(frozen=True, slots=True)
class ClearThinking:
    """CLEAR THINKING, Anthropic's ``clear_thinking_20251015`` done here, losslessly: the thinking
    of every turn but the last ``keep_turns`` (>= 1) turns that have some is cleared: thinking
    blocks leave their assistant message (one holding nothing else keeps them), Responses
    ``reasoning`` items leave the visible list. ``keep_turns`` may be Anthropic's
    ``{"type": "thinking_turns", "value": n}``. Opens a batch only when something is cleared."""

    name: ClassVar[str] = "clear_thinking"
    keep_turns: int = 1
    encoding: str = DEFAULT_ENCODING
    thinking: str = DEFAULT_THINKING

    def __post_init__(self) -> None:
        keep = _anthropic_amount(self.name, "keep_turns", self.keep_turns, "thinking_turns")
        _set(self, "keep_turns", check_count(self.name, "keep_turns", keep))
        if self.keep_turns < 1:
            _fail(self.name, "keep_turns must be at least 1: the current turn's thinking must stay for a tool loop")
        thinking_rule(self.name, self.thinking)

    def describe(self) -> str:
        return _describe(self.name, keep_turns=self.keep_turns)


#: The context edits: their results carry what they cleared (:class:`memci.results.EditResult`).
EDITS: tuple[type[ClearToolUses], type[ClearThinking]] = (ClearToolUses, ClearThinking)

Operation: TypeAlias = (
    Append
    | Insert
    | Replace
    | Truncate
    | Clear
    | Filter
    | Rollback
    | Checkpoint
    | Sanitize
    | TrimToTokens
    | ClearToolUses
    | ClearThinking
)
CONFIGS: tuple[type[Operation], ...] = (
    Append,
    Insert,
    Replace,
    Truncate,
    Clear,
    Filter,
    Rollback,
    Checkpoint,
    Sanitize,
    TrimToTokens,
    ClearToolUses,
    ClearThinking,
)


def _count_of(messages: Messages) -> int:
    return 1 if isinstance(messages, dict) else len(messages)


# ---- parse: the flat and nested dict formats ---------------------------------------------------------------

_BY_NAME: dict[str, type[Operation]] = {cls.name: cls for cls in CONFIGS}
# The flat format's spellings of fields, after camelCase -> snake_case.
_ALIASES = {"keep_system_message": "keep_system", "target_batch_index": "batch_index"}
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _snake(key: str) -> str:
    return _CAMEL.sub(r"_\1", key).lower()


def parse(op: Mapping[str, Any]) -> Operation:
    """Build the typed config for an operation dict in either dict format.

    The ``operation`` name may be in any case; keys camelCase or snake_case; the fields either
    beside ``operation`` (flat) or in a dict under the operation's name (nested).
    ``keepSystemMessage`` is ``keep_system`` and ``targetBatchIndex`` is ``batch_index``.
    Unknown operations, unknown or repeated keys and missing required keys raise
    :class:`~memci.errors.InvalidOperationError` naming them. O(number of keys).
    """
    if not isinstance(op, Mapping):
        raise InvalidOperationError(f"an operation must be a dict or a memci.ops config, got {type(op).__name__}")
    if "operation" not in op:
        raise InvalidOperationError(f"an operation dict needs an 'operation' key, got keys {list(op)}")
    given_name = op["operation"]
    if not isinstance(given_name, str) or given_name.lower() not in _BY_NAME:
        raise InvalidOperationError(f"unknown operation {repr_of(given_name)}; expected one of {', '.join(_BY_NAME)}")
    name = given_name.lower()
    cls = _BY_NAME[name]
    items: list[tuple[object, object]] = []
    for key, value in op.items():
        if key == "operation":
            continue
        if isinstance(key, str) and _snake(key) == name:  # nested: {"truncate": {...}}
            if not isinstance(value, Mapping):
                raise InvalidOperationError(
                    f"{name}: {repr_of(key)} must be a dict of the operation's keys, got {repr_of(value)}"
                )
            items.extend(value.items())
        else:
            items.append((key, value))
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, object] = {}
    for raw, value in items:
        field = _ALIASES.get(_snake(raw), _snake(raw)) if isinstance(raw, str) else None
        if field is None or field not in fields:
            raise InvalidOperationError(f"{name}: unknown key {repr_of(raw)}; expected {', '.join(fields) or 'none'}")
        if field in kwargs:
            raise InvalidOperationError(f"{name}: {field} is given twice (as {repr_of(raw)} and another spelling)")
        kwargs[field] = value
    missing = [f for f, spec in fields.items() if f not in kwargs and spec.default is dataclasses.MISSING]
    if missing:
        raise InvalidOperationError(f"{name}: missing key {missing[0]!r}")
    return cls(**kwargs)  # type: ignore[arg-type]  # each config checks its own fields
