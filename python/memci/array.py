"""``MessageArray``: an LLM agent's messages, with cuts that can be rolled back.

A thin class over the Rust store (:class:`memci._core.MessageStore`): it checks and converts the
arguments (through the configs of :mod:`memci.ops`), then delegates. Semantics:
``docs/message-array.md``. Complexities below are for ``n`` visible messages, ``N`` stored ones
and ``k`` messages returned or given.
"""

from __future__ import annotations

import datetime as dt
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, SupportsFloat, cast, overload

from memci import _core, ops, tokens
from memci.errors import BatchError, InvalidMessageError, InvalidOperationError, repr_of, shown
from memci.results import BatchSnapshot, EditResult, OperationResult, Stats
from memci.sanitize import SanitizeResult, ValidationResult, sanitize_store, validate_store
from memci.usage import TokenUsage

if TYPE_CHECKING:
    # numpy is imported by indices() alone, when first called: ``import memci`` does not load it.
    import numpy as np
    import numpy.typing as npt

__all__ = ["MessageArray"]

Message = ops.Message
#: A bound of :meth:`MessageArray.between`: epoch seconds, a ``datetime`` (naive: local time) or
#: ``None`` (unbounded).
TimeBound = float | dt.datetime | None
#: ``trim_to_tokens``' ``text_splitter``: a message's text to pieces that join back to it.
TextSplitter = Callable[[str], list[str]]


class MessageArray:
    """The visible messages of an agent's context, every message ever stored, and the batches.

    ``append`` adds at the end; ``insert``, ``replace``, ``truncate``, ``clear``, ``filter`` and
    ``checkpoint`` each open a new batch whose predecessor can be restored with ``rollback``.
    Messages are OpenAI chat-format dicts, copied in and out (never aliased). Every method call is
    atomic with respect to other threads.
    """

    __slots__ = ("__weakref__", "_store", "_usage")

    _store: _core.MessageStore
    _usage: TokenUsage

    def __init__(
        self,
        messages: Iterable[Mapping[str, Any]] | None = None,
        *,
        tool_description: str | Message | None = None,
    ) -> None:
        """Store ``messages`` (all-or-nothing) and the tool description, if any. Batch 0. O(k).

        ``tool_description`` is a string (stored as a system message) or a system/developer
        message; it is stored after ``messages`` and shown right after their leading
        system/developer messages. CLEAR re-adds it when it is no longer visible.
        """
        description = _tool_description(tool_description)
        store = _core.MessageStore()
        if messages is not None:
            store.append(ops.check_messages("MessageArray", messages))
        if description is not None:
            store.set_tool_description(description)
        self._store = store

    @classmethod
    def _wrap(cls, store: _core.MessageStore) -> MessageArray:
        array = cls.__new__(cls)
        array._store = store
        return array

    # ---- operations ------------------------------------------------------------------------------

    def append(self, messages: ops.Messages) -> None:
        """APPEND one message or a list at the end, all-or-nothing; opens no batch. O(k).

        Returns None, like ``list.append``: it is the hot path of an agent loop (use
        ``execute(ops.Append(...))`` for an :class:`OperationResult`).
        """
        if type(messages) is dict or type(messages) is list:
            self._store.append(cast("ops.CoreMessages", messages))
        else:
            self._store.append(ops.check_messages("append", messages))

    def insert(self, position: int, messages: ops.Messages) -> OperationResult:
        """INSERT messages before visible ``position``, ``0 <= position <= len``; new batch. O(n + k)."""
        return self.execute(ops.Insert(position, messages))

    def replace(self, index: int, message: Message) -> OperationResult:
        """REPLACE the visible message at ``index`` (negative from the end) with a newly stored one;
        the old one stays in :meth:`all_messages` with its marks (the new one has none). New batch.
        O(1) for a message of the same role, O(n) when the role changes (the role index is rebuilt)."""
        return self.execute(ops.Replace(index, message))

    def truncate(
        self,
        *,
        keep_first: int | None = None,
        keep_last: int | None = None,
        remove_first: int | None = None,
        remove_last: int | None = None,
        range: ops.RangeLike | None = None,
        role: str | None = None,
    ) -> OperationResult:
        """TRUNCATE: the given cuts in this order, like slices (see :class:`memci.ops.Truncate`);
        with ``role``, only that role's visible messages are cut and kept. Keyword arguments only:
        ``truncate(keep_last=5)``. New batch. O(k)."""
        return self.execute(ops.Truncate(keep_first, keep_last, remove_first, remove_last, range, role))  # type: ignore[arg-type]  # Truncate normalises every RangeLike

    def clear(self, keep_system: bool = True) -> OperationResult:
        """CLEAR: keep the visible system/developer messages if ``keep_system``, then re-add the
        tool description if it is no longer visible. New batch. O(n)."""
        return self.execute(ops.Clear(keep_system))

    def filter(
        self,
        roles: Sequence[str] | None = None,
        content_contains: Sequence[str] | None = None,
        content_excludes: Sequence[str] | None = None,
    ) -> OperationResult:
        """FILTER: keep a visible message when its role is in ``roles``, its text contains any of
        ``content_contains`` and none of ``content_excludes`` (``None`` or empty: not given; a bare
        string is a list of one). New batch. O(total text), the GIL released."""
        return self.execute(ops.Filter(roles, content_contains, content_excludes))

    def rollback(self, batch_index: int) -> OperationResult:
        """ROLLBACK to ``batch_index`` as it was when it ended, discarding later batches; the
        current batch is a no-op. Nothing stored is lost. O(1)."""
        return self.execute(ops.Rollback(batch_index))

    def checkpoint(self, description: str | None = None) -> int:
        """Open a new batch with no change and return the index of the batch it closed, so that
        ``rollback(returned)`` comes back to this state. O(1)."""
        *_, batch_index = self._store.execute(ops.Checkpoint(description))
        return batch_index - 1

    def execute(self, op: ops.Operation | Mapping[str, Any]) -> OperationResult:
        """Run a config of :mod:`memci.ops`, or an operation dict in either dict format
        (:func:`memci.ops.parse`). The cost is the operation's."""
        config = op if isinstance(op, ops.CONFIGS) else ops.parse(op)  # type: ignore[arg-type]  # parse rejects non-dicts
        return self._run(config)

    def _run(
        self, config: ops.Operation, counter: tokens.Counter | None = None, splitter: TextSplitter | None = None
    ) -> OperationResult:
        """Run a checked config (``counter``, ``splitter``: trim_to_tokens' callables, which no
        config carries): the store reads the config's fields itself
        (``memci._core.MessageStore.execute``)."""
        if isinstance(config, ops.Sanitize):
            sanitize_store(self._store)
            stats = self.stats()
        elif isinstance(config, ops.ClearToolUses | ops.ClearThinking):
            counts, (tool_uses, thinking_turns, tokens_cleared) = self._store.edit(config)
            stats = Stats(*counts)
            return EditResult(
                config.name,
                stats.current_batch_index,
                stats.current_batch_messages,
                stats,
                tool_uses,
                thinking_turns,
                tokens_cleared,
            )
        else:
            stats = Stats(*self._store.execute(config, counter, splitter))
        return OperationResult(config.name, stats.current_batch_index, stats.current_batch_messages, stats)

    # ---- context edits (docs/context-edits.md) --------------------------------------------------

    def clear_tool_uses(
        self,
        *,
        trigger: int | None = None,
        keep: int = 3,
        clear_at_least: int | None = None,
        exclude_tools: Sequence[str] = (),
        clear_tool_inputs: bool = False,
        placeholder: str | None = None,
        encoding: str = tokens.DEFAULT_ENCODING,
        thinking: str = tokens.DEFAULT_THINKING,
    ) -> EditResult:
        """CLEAR TOOL USES (:class:`memci.ops.ClearToolUses`, Anthropic's ``clear_tool_uses``):
        replace the results of all but the last ``keep`` tool uses with a placeholder that keeps
        their pair ids, when the visible messages cost more than ``trigger`` tokens. One batch
        (none when nothing is cleared), so ``rollback`` restores; the originals stay stored. The
        result's ``cleared_tool_uses`` and ``cleared_input_tokens`` are exact (``token_count``
        before less after). O(n) with cached counts, the GIL released."""
        config = ops.ClearToolUses(
            trigger, keep, clear_at_least, exclude_tools, clear_tool_inputs, placeholder, encoding, thinking
        )
        return cast("EditResult", self._run(config))

    def clear_thinking(
        self,
        keep_turns: int = 1,
        *,
        encoding: str = tokens.DEFAULT_ENCODING,
        thinking: str = tokens.DEFAULT_THINKING,
    ) -> EditResult:
        """CLEAR THINKING (:class:`memci.ops.ClearThinking`, Anthropic's ``clear_thinking``): clear
        the thinking blocks and reasoning items of every turn but the last ``keep_turns`` turns that
        have some. One batch (none when nothing is cleared); ``cleared_thinking_turns`` and
        ``cleared_input_tokens`` are exact. O(n), the GIL released."""
        return cast("EditResult", self._run(ops.ClearThinking(keep_turns, encoding, thinking)))

    # ---- tool-call hygiene (docs/sanitizer.md) ----------------------------------------------------

    def sanitize(self) -> SanitizeResult:
        """Remove the visible messages the model APIs would refuse for their tool calls or results
        (the rules of :func:`memci.sanitize_messages`), read straight from the store with the GIL
        released. When something is removed, that is a new batch (undo it with ``rollback``);
        when nothing is, no batch opens, so ``b = arr.batch_index; arr.sanitize(); arr.rollback(b)``
        always comes back. Indices in the report are positions before the call; its ``messages``
        are decoded only if read. O(n)."""
        return sanitize_store(self._store)

    def validate(self) -> ValidationResult:
        """Check the visible messages' tool calls and results without changing anything:
        ``valid`` exactly when :meth:`sanitize` would remove nothing. O(n), the GIL released."""
        return validate_store(self._store)

    # ---- the visible messages -------------------------------------------------------------------

    def messages(self) -> list[Message]:
        """The visible messages, in order, as fresh dicts. O(n)."""
        return self._store.messages()

    def all_messages(self) -> list[Message]:
        """Every message ever stored (hidden and replaced ones too), in insertion order. O(N)."""
        return self._store.all_messages()

    def __len__(self) -> int:
        """The number of visible messages. O(1)."""
        return len(self._store)

    @overload
    def __getitem__(self, key: int) -> Message: ...
    @overload
    def __getitem__(self, key: slice) -> list[Message]: ...
    def __getitem__(self, key: int | slice) -> Message | list[Message]:
        """``arr[i]`` (negative from the end; ``PositionError`` out of range), O(1);
        ``arr[a:b:c]``, a list with Python's slice rules, read at once, O(k)."""
        if not isinstance(key, slice):
            return self._store.get(ops.check_index("getitem", "index", key))
        *_, step = (
            None if v is None else ops.check_index("getitem", "slice", v) for v in (key.start, key.stop, key.step)
        )
        if step == 0:
            raise InvalidOperationError("getitem: slice step cannot be zero")
        return self._store.slice(key)

    def __iter__(self) -> Iterator[Message]:
        """Iterate over the visible messages as they are when iteration starts. O(n) up front."""
        return iter(self._store.messages())

    def __repr__(self) -> str:
        s = self.stats()
        return (
            f"<memci.MessageArray: {s.current_batch_messages} visible of {s.total_messages} stored, "
            f"batch {s.current_batch_index}>"
        )

    @property
    def tool_description(self) -> Message | None:
        """The tool description message, if the array has one. O(1)."""
        return self._store.tool_description()

    # ---- queries by role, time and mark ----------------------------------------------------------

    def by_role(self, role: str) -> list[Message]:
        """The visible messages of ``role``, in order (``system`` excludes ``developer``). O(k)."""
        return self._store.by_role(role)

    def recent(self, n: int, role: str | None = None, roles: Iterable[str] | None = None) -> list[Message]:
        """The last ``n`` visible messages, of ``role`` or of any of ``roles`` (not both; an empty
        ``roles`` is not given), oldest first. O(n) through the role index."""
        return self._store.recent(n, role, roles)

    def role_range(self, role: str, start: int = 0, end: int | None = None) -> list[Message]:
        """``by_role(role)[start:end]``, slice rules (negatives count from the end). O(k)."""
        first = ops.check_index("role_range", "start", start)
        last = None if end is None else ops.check_index("role_range", "end", end)
        return self._store.role_range(role, slice(first, last))

    def count(self, role: str | None = None) -> int:
        """The number of visible messages (of ``role``). O(1)."""
        return self._store.count(role)

    def indices(self, role: str | None = None) -> npt.NDArray[np.int64]:
        """Positions in the visible list (of ``role``'s messages), as a writable int64 array. O(k)."""
        import numpy as np

        buffer = self._store.indices(role)
        return np.frombuffer(buffer, dtype=np.int64)

    def between(self, start: TimeBound = None, end: TimeBound = None, role: str | None = None) -> list[Message]:
        """Visible messages (of ``role``) with ``start <= timestamp < end``; a bound is epoch
        seconds, a ``datetime`` (naive: local time) or ``None`` (unbounded). O(n)."""
        return self._store.between(_epoch("start", start), _epoch("end", end), role)

    def mark(self, index: int, tag: str) -> None:
        """Tag the message at visible ``index``. The tag belongs to the stored message, so it
        survives rollback; a replacement does not inherit it. O(1)."""
        if not isinstance(tag, str):
            raise InvalidOperationError(f"mark: tag must be a str, got {repr_of(tag)}")
        self._store.mark(ops.check_index("mark", "index", index), str.__str__(tag))

    def marked(self, tag: str, role: str | None = None) -> list[Message]:
        """The visible messages (of ``role``) carrying ``tag``, in order. O(n)."""
        if not isinstance(tag, str):
            raise InvalidOperationError(f"marked: tag must be a str, got {repr_of(tag)}")
        return self._store.marked(str.__str__(tag), role)

    # ---- batches ---------------------------------------------------------------------------------

    @property
    def batch_index(self) -> int:
        """The index of the current batch (0 for a new array). O(1)."""
        return self._store.batch_index

    def snapshot(self, batch_index: int) -> BatchSnapshot:
        """Batch ``batch_index`` as it ended, or the current state for the current batch;
        ``BatchError`` for any other index. O(k)."""
        index = ops.check_index("snapshot", "batch_index", batch_index)
        if index < 0:
            raise BatchError(f"snapshot: batch {shown(index)} does not exist (batches are 0..={self.batch_index})")
        return BatchSnapshot(*self._store.snapshot(index))

    def stats(self) -> Stats:
        """Stored and visible counts, the number of batches and the current one, read at once. O(1)."""
        return Stats(*self._store.stats())

    # ---- token budgets (docs/tokens.md) ---------------------------------------------------------

    def token_count(
        self,
        encoding: str = tokens.DEFAULT_ENCODING,
        *,
        counter: tokens.Counter | None = None,
        thinking: str = tokens.DEFAULT_THINKING,
    ) -> int:
        """The tokens the visible messages cost in a chat request: each message's count plus the
        reply priming (3, once; 0 when nothing is visible), the thinking of earlier turns dropped
        (``thinking="drop_earlier"``, the providers' default) or counted (``"count"``), so it
        equals ``tokens.count_messages(arr.messages(), encoding, thinking=thinking)``. Each stored
        message is counted once per encoding and cached (snapshots and rollback keep the counts):
        O(1) once counted, O(k) after k appends (plus a walk back over the current turn when a
        message has thinking). With ``counter`` (any callable, see :mod:`memci.tokens`): the sum
        of ``counter(m)`` over the messages as sent, O(n) in Python, except
        :func:`memci.tokens.approximate`, which is cached."""
        rule = tokens.thinking_rule("token_count", thinking)
        if counter is None:
            return self._store.token_count(encoding, rule)
        if counter is tokens.approximate:
            return self._store.token_count(tokens.APPROXIMATE, rule)
        fn = tokens.callable_counter("token_count", counter)
        return tokens.count_messages(self._store.messages(), counter=fn, thinking=rule)

    def trim_to_tokens(
        self,
        max_tokens: int,
        *,
        strategy: str = "last",
        keep_system: bool = True,
        start_on: str | Sequence[str] | None = "user",
        end_on: str | Sequence[str] | None = None,
        allow_partial: bool = False,
        encoding: str = tokens.DEFAULT_ENCODING,
        thinking: str = tokens.DEFAULT_THINKING,
        low_water: float | None = None,
        counter: tokens.Counter | None = None,
        text_splitter: TextSplitter | None = None,
    ) -> OperationResult:
        """Keep the last (``strategy="last"``) or first messages that fit ``max_tokens``, as a new
        batch: LangChain's ``trim_messages`` where they overlap, except that an assistant message
        that calls tools and its results are kept or dropped together, always. ``keep_system``
        keeps the leading system/developer messages (whatever they cost); ``start_on`` (last only)
        and ``end_on`` name the roles the kept messages must start and end on (whole units are
        dropped until they do); ``allow_partial`` cuts the message at the boundary to its last (or
        first) lines that fit, or with ``text_splitter`` (a function of the message's text to a
        list of str that join back to it, LangChain's ``text_splitter``) its last (or first)
        pieces that fit, joined, counted exactly; ``thinking`` is the rule for earlier turns' thinking, as in
        :meth:`token_count`. With an encoding the result's ``token_count(encoding,
        thinking=thinking)`` is at most ``max_tokens`` (unless the system messages alone exceed
        it); with ``counter`` (any callable) the sum of its counts is. O(k) for k messages looked
        at, once counted; the GIL is released. Semantics: ``docs/tokens.md``.

        ``low_water`` (a fraction of ``max_tokens`` in (0, 1]; ``None``, the default: off) cuts
        with hysteresis, for an array trimmed again after each turn: while everything the role
        rules keep fits ``max_tokens`` (the high-water mark) nothing is cut, so the messages kept
        grow only at their end and a provider's prompt cache keeps hitting; once they pass it,
        the trim keeps what fits ``low_water * max_tokens`` in one step (what fits ``max_tokens``
        when no unit fits that), so the next cut comes only after that much room has filled
        again. :data:`memci.integrations.trimming.LOW_WATER` (0.6) is the adapters' default. Last strategy, no
        ``allow_partial``."""
        if counter is tokens.approximate:
            encoding, counter = tokens.APPROXIMATE, None
        elif counter is not None:
            counter = tokens.callable_counter("trim_to_tokens", counter)
        config = ops.TrimToTokens(
            max_tokens, strategy, keep_system, start_on, end_on, allow_partial, encoding, thinking, low_water
        )
        splitter = None if text_splitter is None else _checked_splitter(text_splitter, allow_partial)
        return self._run(config, counter, splitter)

    @property
    def usage(self) -> TokenUsage:
        """The token usage the model reported for this conversation: ``arr.usage.record(response)``
        files it under the current batch, beside the array's own ``token_count()`` then (record a
        response before appending its reply); ``arr.usage.per_batch()`` and ``.total`` read it
        back. Kept in memory only (not saved, not copied; a rollback keeps it). See
        :mod:`memci.usage`."""
        try:
            return self._usage
        except AttributeError:
            self._usage = TokenUsage(batch=lambda: self._store.batch_index, count=self._store_tokens)
            return self._usage

    def _store_tokens(self) -> int:
        """The visible messages' tokens in the default encoding and thinking rule (cached)."""
        return self._store.token_count(tokens.DEFAULT_ENCODING, tokens.DEFAULT_THINKING)

    # ---- saving and copying ----------------------------------------------------------------------

    def to_json(self) -> str:
        """The whole state as JSON: stored messages with their timestamps, the visible order,
        every batch snapshot, marks and the tool description. O(N + history)."""
        return self._store.to_json()

    @classmethod
    def from_json(cls, text: str) -> MessageArray:
        """The array :meth:`to_json` saved. O(size of text)."""
        if not isinstance(text, str):
            raise InvalidOperationError(f"from_json: text must be a str, got {type(text).__name__}")
        return cls._wrap(_core.MessageStore.from_json(text))

    def __copy__(self) -> MessageArray:
        """An independent array (nothing is shared with callers, so shallow is deep): the store is
        copied whole (every stored message, the batches, the cached counts), O(N + bytes stored).
        To try a cut and undo it, ``b = arr.checkpoint()`` ... ``arr.rollback(b)`` costs O(1)."""
        return type(self)._wrap(self._store.copy())

    def __deepcopy__(self, memo: dict[int, object]) -> MessageArray:
        return self.__copy__()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle through :meth:`to_json`: no Python object is pickled."""
        return (_restore, (type(self), self.to_json()))


def _checked_splitter(text_splitter: object, allow_partial: bool) -> TextSplitter:
    """``text_splitter`` wrapped so that what it returns is checked: a list of str that join back
    to the text it was given (else ``InvalidOperationError``, raised before anything changes)."""
    if not callable(text_splitter):
        raise InvalidOperationError(
            f"trim_to_tokens: text_splitter must be a function of a str to a list of str, got {repr_of(text_splitter)}"
        )
    if not allow_partial:
        raise InvalidOperationError("trim_to_tokens: text_splitter cuts a message to fit: it takes allow_partial=True")
    split = cast("TextSplitter", text_splitter)

    def checked(text: str) -> list[str]:
        pieces = split(text)
        if not isinstance(pieces, list) or not all(isinstance(piece, str) for piece in pieces):
            raise InvalidOperationError(
                f"trim_to_tokens: text_splitter must return a list of str, got {repr_of(pieces)} for {shown(text)}"
            )
        if "".join(pieces) != text:
            raise InvalidOperationError(
                f"trim_to_tokens: text_splitter's pieces must join back to the text, got {repr_of(pieces)} "
                f"for {shown(text)} (keep the separators on the pieces)"
            )
        return pieces

    return checked


def _restore(cls: type[MessageArray], text: str) -> MessageArray:
    return cls.from_json(text)


def _tool_description(value: str | Message | None) -> Message | None:
    if value is None or isinstance(value, dict):
        if value is not None and value.get("role") not in ("system", "developer"):
            raise InvalidMessageError(
                f"tool_description: role must be 'system' or 'developer', got {repr_of(value.get('role'))}",
                path="tool_description.role",
            )
        return value
    if isinstance(value, str):
        return {"role": "system", "content": str.__str__(value)}
    raise InvalidMessageError(
        f"tool_description must be a str or a system message dict, got {type(value).__name__}",
        path="tool_description",
    )


def _epoch(field: str, value: object) -> SupportsFloat | None:
    """A bound as epoch seconds for the store, which converts a number itself (an int too large
    for a float is beyond every timestamp; NaN is refused)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        try:
            return value.timestamp()  # a naive datetime is taken as local time
        except (OverflowError, ValueError, OSError) as e:  # year 1 or 9999 at the edge of a time zone
            raise InvalidOperationError(f"between: {field} {value} has no epoch time: {e}") from None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):  # numpy numbers too
        return value
    raise InvalidOperationError(f"between: {field} must be a number, a datetime or None, got {repr_of(value)}")
