"""A pure-Python model of ``memci.MessageArray``, written to be obviously right, not fast.

It follows ``docs/message-array.md`` line by line with plain lists: ``stored`` holds deep copies of
every message ever stored, ``visible`` the stored ids in view, and each ended batch a copy of the
``visible`` list. ``test_reference_model.py`` drives it and the real array with the same random
operations and compares them after every step. Message validation is not modelled (the machine
checks that an invalid message changes nothing); operation arguments are checked here, in the
plainest way, so that both sides must raise the same error class.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memci.errors import BatchError, InvalidOperationError, PositionError

Message = dict[str, Any]

ROLES = ("system", "developer", "user", "assistant", "tool")
INSTRUCTION_ROLES = ("system", "developer")


def plain(value: Any) -> Any:
    """A deep copy as plain JSON values: tuples become lists, subclasses their base type."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool):
        return value
    for base in (int, float, str):
        if isinstance(value, base):
            return base(value)
    raise TypeError(f"not a JSON value: {value!r}")


def timestamp_of(message: Message, now: float) -> float:
    """The message's own numeric ``timestamp`` (milliseconds above 1e11), else ``now``."""
    own = message.get("timestamp")
    if isinstance(own, int | float) and not isinstance(own, bool):
        seconds = float(own)
        return seconds / 1000 if seconds > 1e11 else seconds
    return now


def text_of(message: Message) -> str:
    """The text FILTER searches: what the message says (string content; of blocks, string blocks,
    a block's text, a tool result's content), then each tool call's name and arguments (a
    tool_use input's strings), and a Responses item's call or output, joined by newlines."""
    pieces: list[str] = []
    _content_text(message.get("content"), pieces)
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            _call_text(function.get("name"), function.get("arguments"), pieces)
    if message.get("type") == "function_call":
        _call_text(message.get("name"), message.get("arguments"), pieces)
    elif message.get("type") == "function_call_output":
        _content_text(message.get("output"), pieces)
    return "\n".join(pieces)


def _call_text(name: Any, arguments: Any, pieces: list[str]) -> None:
    pieces.append(name if isinstance(name, str) else "")
    if isinstance(arguments, str):
        pieces.append(arguments)


def _content_text(content: Any, pieces: list[str]) -> None:
    if isinstance(content, str):
        pieces.append(content)
    elif isinstance(content, list):
        for block in content:
            _block_text(block, pieces)


def _block_text(block: Any, pieces: list[str]) -> None:
    if isinstance(block, str):
        pieces.append(block)
        return
    if not isinstance(block, dict):
        return
    if isinstance(block.get("text"), str):
        pieces.append(block["text"])
    if block.get("type") == "tool_result":
        _content_text(block.get("content"), pieces)
    elif block.get("type") == "tool_use":
        pieces.append(block["name"] if isinstance(block.get("name"), str) else "")
        _string_leaves(block.get("input"), pieces)


def _string_leaves(value: Any, pieces: list[str]) -> None:
    if isinstance(value, str):
        pieces.append(value)
    elif isinstance(value, list):
        for item in value:
            _string_leaves(item, pieces)
    elif isinstance(value, dict):
        for item in value.values():
            _string_leaves(item, pieces)


def _count(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidOperationError(f"{name} must be a non-negative int")
    return value


@dataclass
class Stored:
    message: Message
    timestamp: float


@dataclass
class Ended:
    visible: list[int]
    timestamp: float
    description: str


@dataclass
class ReferenceArray:
    stored: list[Stored] = field(default_factory=list)
    visible: list[int] = field(default_factory=list)
    ended: list[Ended] = field(default_factory=list)
    marks: dict[str, set[int]] = field(default_factory=dict)
    tool_description_id: int | None = None

    @classmethod
    def build(cls, messages: list[Message], tool_description: Message | None) -> ReferenceArray:
        ref = cls()
        ref.append(messages)
        if tool_description is not None:
            ref.set_tool_description(tool_description)
        return ref

    # ---- helpers ----------------------------------------------------------------------------------

    def _store(self, messages: list[Message]) -> list[int]:
        now = time.time()
        ids = []
        for message in messages:
            self.stored.append(Stored(plain(message), timestamp_of(message, now)))
            ids.append(len(self.stored) - 1)
        return ids

    def _open_batch(self, description: str) -> None:
        self.ended.append(Ended(list(self.visible), time.time(), description))

    def _role(self, i: int) -> str:
        return str(self.stored[i].message["role"])

    def _messages(self, ids: list[int]) -> list[Message]:
        return [plain(self.stored[i].message) for i in ids]

    def _position(self, index: int) -> int:
        position = index + len(self.visible) if index < 0 else index
        if not 0 <= position < len(self.visible):
            raise PositionError(f"index {index} out of range")
        return position

    def _of_role(self, role: str) -> list[int]:
        return [i for i in self.visible if self._role(i) == role]

    # ---- operations ------------------------------------------------------------------------------

    def append(self, messages: list[Message]) -> None:
        self.visible.extend(self._store(messages))

    def insert(self, position: int, messages: list[Message], description: str) -> None:
        if not 0 <= _count("position", position) <= len(self.visible):
            raise InvalidOperationError("position out of range")
        self._open_batch(description)
        self.visible[position:position] = self._store(messages)

    def replace(self, index: int, message: Message, description: str) -> None:
        position = self._position(index)
        self._open_batch(description)
        self.visible[position] = self._store([message])[0]

    def truncate(
        self,
        description: str,
        *,
        keep_first: int | None = None,
        keep_last: int | None = None,
        remove_first: int | None = None,
        remove_last: int | None = None,
        range: tuple[int, int] | None = None,
        role: str | None = None,
    ) -> None:
        numbers = {"keep_first": keep_first, "keep_last": keep_last, "remove_first": remove_first}
        numbers |= {"remove_last": remove_last}
        numbers |= {
            "range.start": None if range is None else range[0],
            "range.end": None if range is None else range[1],
        }
        for name, value in numbers.items():
            if value is not None:
                _count(name, value)
        if all(v is None for v in numbers.values()) and role is None:
            raise InvalidOperationError("truncate says nothing")
        ids = self.visible if role is None else self._of_role(role)
        if keep_first is not None:
            ids = ids[:keep_first]
        if keep_last is not None:
            ids = ids[len(ids) - min(keep_last, len(ids)) :]
        if remove_first is not None:
            ids = ids[remove_first:]
        if remove_last is not None:
            ids = ids[: max(len(ids) - remove_last, 0)]
        if range is not None:
            ids = ids[range[0] : range[1]]
        self._open_batch(description)
        self.visible = list(ids)

    def clear(self, description: str, keep_system: bool) -> None:
        kept = [i for i in self.visible if self._role(i) in INSTRUCTION_ROLES] if keep_system else []
        if self.tool_description_id is not None and self.tool_description_id not in kept:
            kept.append(self.tool_description_id)
        self._open_batch(description)
        self.visible = kept

    def filter(self, description: str, roles: list[str], contains: list[str], excludes: list[str]) -> None:
        def keep(i: int) -> bool:
            text = text_of(self.stored[i].message)
            return (
                (not roles or self._role(i) in roles)
                and (not contains or any(word in text for word in contains))
                and not any(word in text for word in excludes)
            )

        kept = [i for i in self.visible if keep(i)]
        self._open_batch(description)
        self.visible = kept

    def rollback(self, batch_index: int) -> None:
        if not isinstance(batch_index, int) or isinstance(batch_index, bool):
            raise InvalidOperationError("batch_index must be an int")
        if not 0 <= batch_index <= self.batch_index:
            raise BatchError(f"no batch {batch_index}")
        if batch_index < self.batch_index:
            self.visible = list(self.ended[batch_index].visible)
            del self.ended[batch_index:]

    def checkpoint(self, description: str) -> int:
        self._open_batch(description)
        return self.batch_index - 1

    def set_tool_description(self, message: Message) -> None:
        (tool_id,) = self._store([message])
        leading = 0
        while leading < len(self.visible) and self._role(self.visible[leading]) in INSTRUCTION_ROLES:
            leading += 1
        self.visible.insert(leading, tool_id)
        self.tool_description_id = tool_id

    def mark(self, index: int, tag: str) -> None:
        self.marks.setdefault(tag, set()).add(self.visible[self._position(index)])

    # ---- queries ---------------------------------------------------------------------------------

    @property
    def batch_index(self) -> int:
        return len(self.ended)

    def messages(self) -> list[Message]:
        return self._messages(self.visible)

    def all_messages(self) -> list[Message]:
        return [plain(s.message) for s in self.stored]

    def tool_description(self) -> Message | None:
        return None if self.tool_description_id is None else plain(self.stored[self.tool_description_id].message)

    def by_role(self, role: str) -> list[Message]:
        return self._messages(self._of_role(role))

    def recent(self, n: int, roles: list[str] | None = None) -> list[Message]:
        ids = [i for i in self.visible if not roles or self._role(i) in roles]
        return self._messages(ids[max(len(ids) - n, 0) :])

    def role_range(self, role: str, start: int, end: int | None) -> list[Message]:
        return self.by_role(role)[start:end]

    def count(self, role: str | None = None) -> int:
        return len(self.visible) if role is None else len(self._of_role(role))

    def indices(self, role: str | None = None) -> list[int]:
        return [p for p, i in enumerate(self.visible) if role is None or self._role(i) == role]

    def between(self, start: float | None, end: float | None, role: str | None = None) -> list[Message]:
        def inside(i: int) -> bool:
            t = self.stored[i].timestamp
            return (
                (start is None or start <= t) and (end is None or t < end) and (role is None or self._role(i) == role)
            )

        return self._messages([i for i in self.visible if inside(i)])

    def marked(self, tag: str, role: str | None = None) -> list[Message]:
        tagged = self.marks.get(tag, set())
        return self._messages([i for i in self.visible if i in tagged and (role is None or self._role(i) == role)])

    def snapshot(self, batch_index: int) -> tuple[int, list[Message], int, str | None]:
        """(batch_index, messages, message_count, description); timestamps are not modelled exactly."""
        if not 0 <= batch_index <= self.batch_index:
            raise BatchError(f"no batch {batch_index}")
        if batch_index == self.batch_index:
            return batch_index, self.messages(), len(self.visible), None
        ended = self.ended[batch_index]
        return batch_index, self._messages(ended.visible), len(ended.visible), ended.description

    def stats(self) -> tuple[int, int, int, int]:
        return len(self.stored), len(self.visible), self.batch_index + 1, self.batch_index


def trimmed_with_low_water(
    trim: Callable[[int], list[Message]], max_tokens: int, low_water: float, system: int
) -> list[Message]:
    """The hysteresis rule of ``trim_to_tokens(max_tokens, low_water=...)``, over ``trim(budget)``,
    the plain trim of the same messages to ``budget`` (checked against LangChain's trim_messages
    in test_trim.py): when the budget decides nothing (the plain trim at ``max_tokens`` keeps what
    one with no limit keeps), that; otherwise the plain trim at ``floor(low_water * max_tokens)``
    when it keeps more than the ``system`` leading messages a trim always keeps, else the plain
    trim at ``max_tokens``."""
    at_max = trim(max_tokens)
    if at_max == trim(10**18):
        return at_max
    at_low = trim(int(max_tokens * low_water))
    return at_low if len(at_low) > system else at_max
