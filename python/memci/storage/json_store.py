"""What every store shares: the JSON rules for pages and states, and :class:`JsonStore`.

A store keeps JSON text only (never pickle): a page or a state is checked on the way in (every value
JSON, every key a string, a page's ``index`` its own, a state's head keys typed) and again on the way
out (a file or a row that does not parse, or is not a dict naming its index, is reported as corrupt).
What a page holds besides its index is its writer's: the store never reads it. Pages are
written once: writing the same index again with the same content is a no-op, with other content an
error.

A save (:meth:`JsonStore.save_state`) writes the pages archived since the last save and the new
state as one atomic step, and is a compare-and-set on the state's ``revision``: see
:class:`Commit`. A concrete store supplies the primitives over text (``_insert_page_text``,
``_read_page_text``, ``_list_page_indices``, ``_read_state_text``, ``_commit``) and ``_release``; the
rules, the lock and the closed check live here.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar

from memci.errors import ConflictError, StorageError, is_unicode, repr_of, shown

__all__ = [
    "COMMIT_KEY",
    "VECTOR_KEY",
    "Commit",
    "JsonStore",
    "adds_vector",
    "check_index",
    "check_stored",
    "commit_ids_of",
    "commit_of",
    "decode_page",
    "decode_pages",
    "decode_state",
    "decode_stored_state",
    "encode_page",
    "encode_state",
    "refuse_pickle",
    "settled",
]

#: The key under which a stored state carries the ids of the save that wrote it and of the saves
#: before it (its trail, newest first; see :class:`Commit`): added by the store on the way in, removed
#: on the way out; a state given to a store must not hold it. A state written before trails holds
#: one id (a str) there; one written before commit ids, none.
COMMIT_KEY = "memci_commit"
#: How many commit ids a stored state's trail keeps: a save whose reply was lost is still told
#: from a conflict when up to this many saves minus one landed after it, before its read-back.
TRAIL_LENGTH = 8
#: Longer ints are refused: Python will not write an int of over 4,300 digits as text.
_MAX_INT_BITS = 14_000
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
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:  # an int subclass too: json writes it
        raise StorageError(
            f"{where}: {path} is an integer of {value.bit_length()} bits, too long to write as JSON", where
        )
    if kind is str or kind is int or kind is bool or value is None:
        return
    if kind is float or (isinstance(value, float) and kind is not bool):
        if not math.isfinite(value):
            raise StorageError(f"{where}: {path} is {repr_of(value)}, which JSON cannot hold", where)
        return
    if depth >= MAX_DEPTH:
        raise StorageError(f"{where}: {path} is nested more than {MAX_DEPTH} deep (a container holding itself?)", where)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise StorageError(f"{where}: {path} has a key {shown(key)} that is not a string", where)
            _check_json(item, f"{path}.{key}", where, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", where, depth + 1)
        return
    if isinstance(value, (str, int)):
        return
    raise StorageError(f"{where}: {path} is a {kind.__name__}, which is not a JSON value", where)


_LEAVES = frozenset({str, bool, type(None)})
_CONTAINERS = frozenset({dict, list, tuple})


def _is_plain_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` holds only exact JSON types (str, bool, None, an int that fits, a finite
    float, a dict with str keys, a list or tuple), nested at most :data:`MAX_DEPTH` deep: the fast
    check a save makes of its whole state (no path built, leaves tested inline), about 3x quicker
    than :func:`_check_json`, which runs only when this says no, to accept subclasses or name the
    value that is wrong. O(size of ``value``)."""
    if depth >= MAX_DEPTH:
        return False
    if type(value) is dict:
        for key in value:
            if type(key) is not str:
                return False
        value = value.values()
    for item in value:
        kind = type(item)
        if kind in _LEAVES:
            continue
        if kind is int:
            if item.bit_length() > _MAX_INT_BITS:
                return False
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif kind not in _CONTAINERS or not _is_plain_json(item, depth + 1):
            return False
    return True


def check_index(index: object) -> int:
    """``index`` if it is a positive int below 2**63 (not a bool), else :class:`StorageError`."""
    if type(index) is not int or not 1 <= index < 2**63:
        raise StorageError(f"a page index must be an int from 1 to 2**63 - 1, got {shown(index)}", "page")
    return index


def _page_problem(page: Any, index: int) -> str | None:
    """What is wrong with ``page`` (stored under ``index``), or None: a store knows only that a page
    is a dict naming its own index; what else it holds is its writer's (the context wing's
    ``ArchivedPage`` checks its fields when it reads one back)."""
    if type(page) is not dict:
        return f"a page must be a dict, got {type(page).__name__}"
    if "index" not in page:
        return "missing field 'index'"
    if type(page["index"]) is not int or page["index"] != index:
        return f"the page says index {shown(page['index'])}, not {index}"
    return None


def _state_problem(state: Any) -> str | None:
    if type(state) is not dict:
        return f"must be a dict, got {type(state).__name__}"
    if "version" not in state:
        return "missing key 'version'"
    for key, minimum in (("revision", 1), ("pages_through", 0), ("forgotten_through", 0)):
        value = state.get(key, minimum)
        if type(value) is not int or value < minimum:
            return f"{key} must be an int >= {minimum}, got {shown(value)}"
    if state.get("forgotten_through", 0) > state.get("pages_through", 0):
        return (
            f"forgotten_through ({state['forgotten_through']}) must not be above "
            f"pages_through ({state.get('pages_through', 0)})"
        )
    return None


def _encode(document: Any, where: str, problem: str | None) -> str:
    """The JSON text of a page or state whose shape ``problem`` was checked: refuse it if there was
    one, or if any value inside it is not JSON, or any str not Unicode (a lone surrogate)."""
    if problem is not None:
        raise StorageError(f"{where}: {problem}", where)
    if not _is_plain_json(document):
        for key, value in document.items():
            if type(key) is not str:
                raise StorageError(f"{where}: has a key {shown(key)} that is not a string", where)
            _check_json(value, key, where)
    text = _dumps(document)
    if not text.isascii():
        try:
            text.encode("utf-8")  # the stores write UTF-8: the one pass over the text that finds a surrogate
        except UnicodeEncodeError:
            path = _surrogate_path(document, "")
            raise StorageError(f"{where}: {path} holds a lone surrogate, which is not Unicode", where) from None
    return text


def _surrogate_path(value: Any, path: str) -> str:
    """Where in a checked JSON value a str (or a key) holds a lone surrogate."""
    if isinstance(value, str):
        return path if not is_unicode(value) else ""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list | tuple) else ()
    for key, item in items:
        # A key is shown with its surrogates escaped: the error's own text must be Unicode.
        if isinstance(key, str):
            inner = f"{path}.{key.encode('utf-8', 'backslashreplace').decode()}"
        else:
            inner = f"{path}[{key}]"
        if isinstance(key, str) and not is_unicode(key):
            return f"{inner.lstrip('.')} (a key)"
        found = _surrogate_path(item, inner)
        if found:
            return found.lstrip(".")
    return ""


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


def decode_pages(texts: Iterable[tuple[int, str | bytes]], where: Callable[[int], str]) -> dict[int, dict[str, Any]]:
    """The pages held in ``texts`` ((index, text) pairs), by index; :class:`StorageError` naming
    ``where(index)`` for the first that is not one. O(size of the texts).

    Python's cyclic garbage collector is paused while they are decoded: decoding makes millions of
    objects that all stay alive, and the collections their allocations trigger would traverse them
    again and again for nothing. 10k pages of 3.3 kB, decoded and then the young generations
    collected (what running the collector afterwards costs): 695 ms with it running, 329 ms paused;
    with a full collection after, 1.12 s and 676 ms. It is turned back on only if it was on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return {index: decode_page(text, index, functools.partial(where, index)) for index, text in texts}
    finally:
        if was_enabled:
            gc.enable()


def encode_page(index: int, page: Any) -> str:
    """The JSON text of ``page`` (stored under ``index``), after checking it. O(size of the page)."""
    return _encode(page, f"page {index}", _page_problem(page, index))


def decode_page(text: str | bytes, index: int, where: Callable[[], str]) -> dict[str, Any]:
    """The page held in ``text``; :class:`StorageError` naming ``where()`` if it is not one."""
    return _decode(text, where, lambda page: _page_problem(page, index))


def encode_state(state: Any) -> str:
    """The JSON text of a system state (a dict with a ``version`` key), after checking it."""
    problem = _state_problem(state)
    if problem is None and COMMIT_KEY in state:
        problem = f"the key {COMMIT_KEY!r} is the store's own"
    return _encode(state, "state", problem)


def decode_state(text: str | bytes, where: Callable[[], str]) -> dict[str, Any]:
    """The state held in ``text`` (without its commit trail); :class:`StorageError` naming
    ``where()`` if it is not one."""
    return decode_stored_state(text, where)[0]


def decode_stored_state(text: str | bytes, where: Callable[[], str]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The state held in ``text`` and its commit trail (:func:`commit_ids_of`), apart."""
    state = _decode(text, where, _state_problem)
    return state, _trail_of(state.pop(COMMIT_KEY, None))


def _trail_of(found: object) -> tuple[str, ...]:
    """The commit ids a stored ``memci_commit`` value holds: a list of them (newest first), or one
    id (a state stored before trails); anything else holds none."""
    if type(found) is str:
        found = [found]
    if type(found) is list:
        return tuple(item for item in found[:TRAIL_LENGTH] if _is_commit_id(item))
    return ()


def _is_commit_id(item: object) -> bool:
    """Whether ``item`` is a commit id as :func:`commit_of` makes them (24 hex digits): a crafted
    state's other values are not carried into the next state's text."""
    return type(item) is str and len(item) == 24 and all(c in "0123456789abcdef" for c in item)


def commit_ids_of(text: str | bytes | None) -> tuple[str, ...]:
    """The ids of the save that wrote the stored state ``text`` and of the saves before it, newest
    first (none: no state stored, one written before commit ids, or text that does not parse)."""
    if text is None:
        return ()
    try:
        document = _loads(text)
    except (ValueError, UnicodeDecodeError):
        return ()
    return _trail_of(document.get(COMMIT_KEY)) if type(document) is dict else ()


@dataclass(frozen=True, slots=True)
class Commit:
    """One save, checked and encoded: what a store's ``_commit`` writes, all or nothing.

    ``revision`` is the state's ``revision`` key (None: an unversioned save, which replaces whatever
    is stored). A versioned save succeeds only if the stored state's revision is ``revision - 1``
    (0 when nothing, or an unversioned state, is stored), else :class:`ConflictError`.
    ``pages_through`` is the state's ``pages_through`` key (0 if absent): every page at or below it
    is committed, that is written once for good; a page above the stored state's ``pages_through``
    is an orphan of a run that died before its save, and a later save replaces it.
    ``forgotten_through`` is the state's ``forgotten_through`` key (0 if absent): the commit deletes
    every stored page at or below it (``ContextSystem.clear(forget=True)``), in the same step.
    ``commit_id`` is new for each save and written into ``state_text`` (under :data:`COMMIT_KEY`),
    first of ``trail``: the ids of the stored states the store read or wrote last, newest first. A
    store that lost the reply to its write (a connection dropped after the commit was applied) runs
    the commit again, and :meth:`check` recognises its own commit in the stored state's trail
    instead of calling it a conflict, even when other writers saved after it (they loaded the
    state it wrote, so their trail holds its id). An id enters a stored trail only by a commit that
    landed, so a commit that did not land is never taken for one that did.
    """

    state_text: str
    revision: int | None
    pages_through: int
    #: (index, JSON text, the page) of each page to write, ascending.
    pages: tuple[tuple[int, str, dict[str, Any]], ...]
    forgotten_through: int = 0
    commit_id: str = ""
    #: The ids the state's trail holds, this commit's first.
    trail: tuple[str, ...] = ()

    def pages_to_forget(self, stored: Iterable[int]) -> list[int]:
        """Of the ``stored`` page indices, those this commit deletes (at or below
        ``forgotten_through``)."""
        return [index for index in stored if index <= self.forgotten_through]

    def follows(self, stored_revision: int) -> bool:
        """Whether this save may be written over ``stored_revision`` (an unversioned one always may)."""
        return self.revision is None or self.revision == stored_revision + 1

    def landed(self, stored_text: str | bytes | None) -> bool:
        """Whether the stored state ``stored_text`` is this very commit's, or one written after it
        (it was applied, its reply lost, and others may have saved since): its trail holds this
        commit's id."""
        return bool(self.commit_id) and self.commit_id in commit_ids_of(stored_text)

    def check(
        self,
        stored_revision: int,
        where: Callable[[], str],
        stored_state: Callable[[], str | bytes | None] | None = None,
    ) -> bool:
        """Whether this commit is stored already (``stored_state()``, read only then, holds its own
        commit id: a run again after a lost reply, with nothing left to write); False when it may be
        written; :class:`ConflictError` when it does not follow the stored revision."""
        if self.follows(stored_revision):
            return False
        if stored_state is not None and self.landed(stored_state()):
            return True
        revision = self.revision or 0  # not None: an unversioned save follows any revision
        place = where()
        raise ConflictError(
            f"{place}: the store holds revision {stored_revision}, newer than this state's "
            f"{revision - 1}: another writer saved since it was loaded (reload and retry)",
            place,
            revision=revision,
            stored_revision=stored_revision,
        )

    def pages_to_write(
        self, stored_mark: int, read: Callable[[int], str | bytes | None], where: Callable[[int], str]
    ) -> list[tuple[int, str]]:
        """The (index, text) of each page of this save that must be written, reading what is stored
        with ``read(index)``: not a committed page (at or below ``stored_mark``) stored already with
        the same content; :class:`StorageError` if one holds other content, unless the page only
        adds the :data:`VECTOR_KEY` the stored one lacks (:func:`adds_vector`), which replaces it.
        An orphan above the mark is replaced."""
        writes = []
        for index, text, page in self.pages:
            existing = read(index)
            if existing is not None and index <= stored_mark:
                if adds_vector(existing, page):
                    writes.append((index, text))
                elif not same_content(existing, page):
                    place = where(index)
                    raise StorageError(f"{place}: already stored with other content", place)
            elif existing is None or existing != text:
                writes.append((index, text))
        return writes


def revision_of(state: dict[str, Any]) -> int:
    """The ``revision`` of a saved state (0 if it has none)."""
    revision = state.get("revision", 0)
    return revision if type(revision) is int else 0


def same_content(stored_text: str | bytes, page: dict[str, Any]) -> bool:
    """Whether the stored text holds ``page`` (key order aside; 1, 1.0 and True differ)."""
    try:
        stored = _loads(stored_text)
    except (ValueError, UnicodeDecodeError):
        return False
    return _dumps(stored, canonical=True) == _dumps(page, canonical=True)


#: The one key of a committed page that a later commit may add: the page's search vector (derived
#: from the rest of the page), written back for a page stored before vectors were.
VECTOR_KEY = "vector"


def adds_vector(stored_text: str | bytes, page: dict[str, Any]) -> bool:
    """Whether ``page`` is the stored page (its text ``stored_text``) with a :data:`VECTOR_KEY` it
    lacked added, and nothing else changed (key order aside)."""
    if VECTOR_KEY not in page:
        return False
    try:
        stored = _loads(stored_text)
    except (ValueError, UnicodeDecodeError):
        return False
    if type(stored) is not dict or VECTOR_KEY in stored:
        return False
    rest = {key: value for key, value in page.items() if key != VECTOR_KEY}
    return _dumps(stored, canonical=True) == _dumps(rest, canonical=True)


def commit_of(state: Any, pages: Iterable[Any], trail: tuple[str, ...] = ()) -> Commit:
    """The :class:`Commit` of a save of ``state`` with ``pages``, checked and encoded: every page
    must be at or below the state's ``pages_through`` and above its ``forgotten_through``;
    ``trail``: the commit ids of the state the writer read (:meth:`JsonStore.load_state`), newest
    first. O(size of both)."""
    text = encode_state(state)
    pages_through = state.get("pages_through", 0)
    forgotten_through = state.get("forgotten_through", 0)
    if isinstance(pages, str | bytes | dict) or not isinstance(pages, Iterable):
        raise StorageError(f"state: pages must be a list of pages, got {type(pages).__name__}", "pages")
    encoded = []
    for page in pages:
        index = check_index(page.get("index") if type(page) is dict else None)
        if index > pages_through:
            raise StorageError(
                f"state: page {index} is saved with it but pages_through is {pages_through}", f"page {index}"
            )
        if index <= forgotten_through:
            raise StorageError(
                f"state: page {index} is saved with it but forgotten_through is {forgotten_through}",
                f"page {index}",
            )
        encoded.append((index, encode_page(index, page), page))
    encoded.sort(key=lambda item: item[0])
    commit_id = os.urandom(12).hex()
    ids = (commit_id, *trail[: TRAIL_LENGTH - 1])
    # The trail goes last into the state's text (a dict's text ends in "}"): no second encoding.
    # The ids are hex, written as they are.
    listed = ",".join(f'"{i}"' for i in ids)
    text = f'{text[:-1]},"{COMMIT_KEY}":[{listed}]}}'
    return Commit(text, state.get("revision"), pages_through, tuple(encoded), forgotten_through, commit_id, ids)


#: Runs of a commit whose reply was lost (the last failure is raised).
COMMIT_ATTEMPTS = 3


def settled(run: Callable[[], T], lost: type[BaseException] | tuple[type[BaseException], ...]) -> T:
    """``run()``, a store's commit, run again when it fails with ``lost`` (a connection dropped, a
    COMMIT whose outcome is unknown), up to :data:`COMMIT_ATTEMPTS` runs: a commit that landed the
    first time finds its own id in the stored state (:meth:`Commit.check`) and writes nothing more,
    one that did not is written now. Never a :class:`ConflictError` from one's own write."""
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            return run()
        except lost:
            if attempt == COMMIT_ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def check_stored(existing: str | bytes | None, page: dict[str, Any], where: Callable[[], str]) -> None:
    """After a write-once insert of ``page``: :class:`StorageError` naming ``where()`` if the index
    already held ``existing`` with other content (the same content is a no-op)."""
    if existing is not None and not same_content(existing, page):
        place = where()
        raise StorageError(f"{place}: already stored with other content", place)


def refuse_pickle(store: object) -> NoReturn:
    """The :class:`StorageError` of a store that cannot travel in a pickle or a deep copy."""
    raise StorageError(
        f"{store!r} cannot be pickled or deep-copied (it holds a connection it did not open); pickle the "
        "ContextSystem's to_state() instead, and rebuild it with ContextSystem.from_state(state, storage)",
        repr(store),
    )


class JsonStore:
    """Base of the stores: the shared rules over five text primitives. Thread-safe: one lock."""

    _lock: threading.Lock
    _closed: bool
    #: The commit trail of the state this store last read or wrote (see :class:`Commit`).
    _trail: tuple[str, ...]

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._trail = ()

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

    def _commit(self, commit: Commit) -> None:
        """Carry out ``commit`` atomically: check it against the stored revision
        (:meth:`Commit.check`), write its pages (:meth:`Commit.page_to_write` against the stored
        state's ``pages_through``), then replace the state. A reader, a crash or a racing writer sees
        the old state or the new one, never a mix; a store that cannot write pages and state in one
        transaction writes the pages first, so a crash leaves at most orphans above the old mark."""
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

        existing = self._locked(lambda: self._insert_page_text(index, text))
        check_stored(existing, page, lambda: self._where(index))

    def get_page(self, index: int) -> dict[str, Any] | None:
        """The page stored under ``index`` (a new dict), or None. O(size of the page)."""
        check_index(index)
        text = self._locked(lambda: self._read_page_text(index))
        return None if text is None else decode_page(text, index, lambda: self._where(index))

    def get_pages(self, indices: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The stored pages among ``indices``, by index (absent ones left out), read under one lock
        (a store that can read many in one query overrides :meth:`_read_pages_text`). O(size of
        the pages)."""
        if isinstance(indices, str | bytes | dict) or not isinstance(indices, Iterable):
            raise StorageError(f"get_pages: indices must be an iterable of page indices, got {shown(indices)}", "page")
        wanted = [check_index(index) for index in indices]
        texts = self._locked(lambda: self._read_pages_text(wanted))
        return decode_pages(texts, self._where)

    def _read_pages_text(self, indices: list[int]) -> list[tuple[int, str | bytes]]:
        """(index, text) of each stored page among ``indices``: a read per page, unless overridden."""
        found = []
        for index in indices:
            text = self._read_page_text(index)
            if text is not None:
                found.append((index, text))
        return found

    def page_indices(self) -> list[int]:
        """The indices of the stored pages, ascending."""
        return self._locked(self._list_page_indices)

    def save_state(self, state: dict[str, Any], pages: Iterable[dict[str, Any]] = ()) -> None:
        """Write ``pages`` and replace the system state, in one atomic step. O(size of both).

        The old state stays loadable until the new one is. If ``state`` carries a ``revision``,
        the save is a compare-and-set: it succeeds only over revision ``revision - 1`` and raises
        :class:`~memci.ConflictError`, writing nothing, over any other. Each page is written once
        for good when the state's ``pages_through`` covers it (the same page again is a no-op,
        another one a :class:`StorageError`); a stored page above the stored state's
        ``pages_through`` is an orphan of a run that died before saving, and is replaced. Every
        stored page at or below the state's ``forgotten_through`` is deleted in the same step.
        """
        commit = commit_of(state, pages, self._trail)

        def work() -> None:
            self._commit(commit)
            self._trail = commit.trail

        self._locked(work)

    def load_state(self) -> dict[str, Any] | None:
        """The last state saved (a new dict), or None if none was."""
        text = self._locked(self._read_state_text)
        if text is None:
            return None
        state, self._trail = decode_stored_state(text, self._where)
        return state

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

    def __reduce__(self) -> tuple[Any, ...]:
        """A store that holds a connection cannot travel in a pickle (or a deep copy): a clear
        :class:`StorageError` instead of Python's. Stores that can (in memory, or reopened by path)
        override this."""
        refuse_pickle(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
