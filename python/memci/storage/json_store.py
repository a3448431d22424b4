"""What every store shares: the JSON rules for pages and states, and :class:`JsonStore`.

A store keeps JSON text only (never pickle): a page or a state is checked on the way in (every value
JSON, every key a string, the page's required fields present and typed) and again on the way out (a
file or a row that does not parse, or does not hold a page, is reported as corrupt). Pages are
written once: writing the same index again with the same content is a no-op, with other content an
error. A concrete store supplies five primitives over text (``_insert_page_text``,
``_read_page_text``, ``_list_page_indices``, ``_read_state_text``, ``_write_state_text``) and
``_release``; the rules, the lock and the closed check live here.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar

from memci.errors import StorageError

__all__ = [
    "PAGE_FIELDS",
    "JsonStore",
    "check_index",
    "decode_page",
    "decode_state",
    "encode_page",
    "encode_state",
]

#: The fields every page must have, with their types (lists may be given as tuples).
PAGE_FIELDS: dict[str, type] = {
    "index": int,
    "messages": list,
    "summary": str,
    "entry_summaries": list,
    "archived_round": int,
}
#: Deeper nesting than this is refused (it is almost always a container that holds itself).
MAX_DEPTH = 200

T = TypeVar("T")


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


# One encoder and decoder each, made once: ``json.dumps``/``json.loads`` with options build a new
# one on every call, which costs more than encoding a small page.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=True)
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def _dumps(value: Any, *, canonical: bool = False) -> str:
    return (_CANONICAL if canonical else _ENCODER).encode(value)


def _loads(text: str | bytes) -> Any:
    return _DECODER.decode(text if isinstance(text, str) else text.decode("utf-8"))


def _check_json(value: Any, path: str, where: str, depth: int = 0) -> None:
    """Raise :class:`StorageError` at the first value JSON cannot hold exactly, naming its path.

    Subclasses of str, int, float, dict and list (enums, OrderedDict) are taken as their base type.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return
    if kind is float or (isinstance(value, float) and kind is not bool):
        if not math.isfinite(value):
            raise StorageError(f"{where}: {path} is {value!r}, which JSON cannot hold", where)
        return
    if depth >= MAX_DEPTH:
        raise StorageError(f"{where}: {path} is nested more than {MAX_DEPTH} deep (a container holding itself?)", where)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise StorageError(f"{where}: {path} has a key {key!r} that is not a string", where)
            _check_json(item, f"{path}.{key}", where, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", where, depth + 1)
        return
    if isinstance(value, (str, int)):
        return
    raise StorageError(f"{where}: {path} is a {kind.__name__}, which is not a JSON value", where)


def check_index(index: object) -> int:
    """``index`` if it is a positive int (not a bool), else :class:`StorageError`."""
    if type(index) is not int or index < 1:
        raise StorageError(f"a page index must be a positive int, got {index!r}", f"page {index!r}")
    return index


def _page_problem(page: Any, index: int) -> str | None:
    """What is wrong with the shape of ``page`` (stored under ``index``), or None."""
    if type(page) is not dict:
        return f"a page must be a dict, got {type(page).__name__}"
    for field, kind in PAGE_FIELDS.items():
        if field not in page:
            return f"missing field {field!r}"
        value = page[field]
        if not (type(value) is kind or (kind is list and type(value) is tuple)):
            return f"{field} must be a {kind.__name__}, got {type(value).__name__}"
    if page["index"] != index:
        return f"the page says index {page['index']}, not {index}"
    if page["archived_round"] < 0:
        return f"archived_round must be >= 0, got {page['archived_round']}"
    for i, message in enumerate(page["messages"]):
        if type(message) is not dict:
            return f"messages[{i}] must be a dict, got {type(message).__name__}"
    for i, summary in enumerate(page["entry_summaries"]):
        if type(summary) is not str:
            return f"entry_summaries[{i}] must be a str, got {type(summary).__name__}"
    return None


def _state_problem(state: Any) -> str | None:
    if type(state) is not dict:
        return f"must be a dict, got {type(state).__name__}"
    if "version" not in state:
        return "missing key 'version'"
    return None


def _encode(document: Any, where: str, problem: str | None) -> str:
    """The JSON text of a page or state whose shape ``problem`` was checked: refuse it if there was
    one, or if any value inside it is not JSON."""
    if problem is not None:
        raise StorageError(f"{where}: {problem}", where)
    for key, value in document.items():
        if type(key) is not str:
            raise StorageError(f"{where}: has a key {key!r} that is not a string", where)
        _check_json(value, key, where)
    return _dumps(document)


def _decode(text: str | bytes, where: Callable[[], str], shape: Callable[[Any], str | None]) -> dict[str, Any]:
    """The page or state held in ``text``, whose shape ``shape`` checks; corrupt otherwise (the
    error names ``where()``, computed only then)."""
    try:
        document = _loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        problem: str | None = str(e)
    else:
        problem = shape(document)
        if problem is None:
            return document  # type: ignore[no-any-return]
    place = where()
    raise StorageError(f"{place}: corrupt: {problem}", place)


def encode_page(index: int, page: Any) -> str:
    """The JSON text of ``page`` (stored under ``index``), after checking it. O(size of the page)."""
    return _encode(page, f"page {index}", _page_problem(page, index))


def decode_page(text: str | bytes, index: int, where: Callable[[], str]) -> dict[str, Any]:
    """The page held in ``text``; :class:`StorageError` naming ``where()`` if it is not one."""
    return _decode(text, where, lambda page: _page_problem(page, index))


def encode_state(state: Any) -> str:
    """The JSON text of a system state (a dict with a ``version`` key), after checking it."""
    return _encode(state, "state", _state_problem(state))


def decode_state(text: str | bytes, where: Callable[[], str]) -> dict[str, Any]:
    """The state held in ``text``; :class:`StorageError` naming ``where()`` if it is not one."""
    return _decode(text, where, _state_problem)


def same_content(stored_text: str | bytes, page: dict[str, Any]) -> bool:
    """Whether the stored text holds ``page`` (key order aside; 1, 1.0 and True differ)."""
    try:
        stored = _loads(stored_text)
    except (ValueError, UnicodeDecodeError):
        return False
    return _dumps(stored, canonical=True) == _dumps(page, canonical=True)


class JsonStore:
    """Base of the stores: the shared rules over five text primitives. Thread-safe: one lock."""

    _lock: threading.Lock
    _closed: bool

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False

    # ---- what a concrete store supplies -----------------------------------------------------------

    def _insert_page_text(self, index: int, text: str) -> str | bytes | None:
        """Store ``text`` under ``index`` unless a page is there; return that page's text if one is."""
        raise NotImplementedError

    def _read_page_text(self, index: int) -> str | bytes | None:
        raise NotImplementedError

    def _list_page_indices(self) -> list[int]:
        raise NotImplementedError

    def _read_state_text(self) -> str | bytes | None:
        raise NotImplementedError

    def _write_state_text(self, text: str) -> None:
        """Replace the state atomically: a reader sees the old text or the new, never a mix."""
        raise NotImplementedError

    def _release(self) -> None:
        """Free what the store holds open (called once, by the first ``close``)."""

    def _where(self, index: int | None = None) -> str:
        """Where page ``index`` (or the state, for None) lives, for error messages; names the page."""
        return f"{type(self).__name__}: " + ("state" if index is None else f"page {index}")

    # ---- the protocol -----------------------------------------------------------------------------

    def _locked(self, work: Callable[[], T]) -> T:
        with self._lock:
            if self._closed:
                raise StorageError(f"{self!r} is closed", repr(self))
            return work()

    def put_page(self, index: int, page: dict[str, Any]) -> None:
        """Store an archived page under ``index``, once. O(size of the page).

        Writing the same index again with the same content (key order aside) does nothing; with
        other content it raises :class:`StorageError` and the stored page stays.
        """
        check_index(index)
        text = encode_page(index, page)

        def work() -> None:
            existing = self._insert_page_text(index, text)
            if existing is not None and not same_content(existing, page):
                raise StorageError(f"{self._where(index)}: already stored with other content", self._where(index))

        self._locked(work)

    def get_page(self, index: int) -> dict[str, Any] | None:
        """The page stored under ``index`` (a new dict), or None. O(size of the page)."""
        check_index(index)
        text = self._locked(lambda: self._read_page_text(index))
        return None if text is None else decode_page(text, index, lambda: self._where(index))

    def page_indices(self) -> list[int]:
        """The indices of the stored pages, ascending."""
        return self._locked(self._list_page_indices)

    def save_state(self, state: dict[str, Any]) -> None:
        """Replace the system state, atomically (the old state stays loadable until the new one is)."""
        text = encode_state(state)
        self._locked(lambda: self._write_state_text(text))

    def load_state(self) -> dict[str, Any] | None:
        """The last state saved (a new dict), or None if none was."""
        text = self._locked(self._read_state_text)
        return None if text is None else decode_state(text, self._where)

    def close(self) -> None:
        """Release the store; later calls raise :class:`StorageError`. Closing twice is fine."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._release()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
