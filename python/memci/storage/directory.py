"""``DirectoryStorage``: one JSON file per archived page, plus a state file, in one folder.

Layout::

    PATH/memci-store.json      {"format": "memci-directory", "version": 1}
    PATH/state.json            the system state
    PATH/pages/00000001.json   page 1 (the index, zero-padded to 8 digits, so `ls` sorts them)

Every file is written atomically: the text goes to a temporary file in the same folder, which is
flushed and fsync'ed, then renamed over the target with ``os.replace``, and the folder is fsync'ed.
A process killed mid-write leaves the previous file whole (and at worst a stray ``.*.tmp`` file,
which is ignored). Files are plain UTF-8 JSON, readable and diffable by hand.

A save holds an exclusive lock on ``PATH/.lock`` (``flock``; where the platform has none, only the
threads of one process are serialised) while it checks the stored state's ``revision``, writes its
pages and then the state. A process killed between the pages and the state leaves orphan pages above
the stored state's ``pages_through``, which the next save replaces.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memci.errors import StorageError
from memci.storage.arguments import check_flag, check_path
from memci.storage.json_store import Commit, JsonStore, decode_state, revision_of, settled

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: saves are serialised within one process only
    fcntl = None  # type: ignore[assignment]

__all__ = ["FORMAT_VERSION", "DirectoryStorage"]

#: The layout version written into ``memci-store.json``; a newer one is refused.
FORMAT_VERSION = 1
_MARKER = "memci-store.json"
_STATE = "state.json"
_LOCK = ".lock"
_PAGES = "pages"
_PAGE_NAME = re.compile(r"(\d{8,})\.json")


def _page_name(index: int) -> str:
    return f"{index:08d}.json"


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (a no-op where folders cannot be opened, e.g. Windows)."""
    flag = getattr(os, "O_DIRECTORY", None)
    if flag is None:
        return
    fd = os.open(path, os.O_RDONLY | flag)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str, *, fsync: bool = True) -> None:
    """Replace ``path`` by ``text`` (UTF-8) so that a reader, or a crash, sees the old file or the
    new one, never a part: temporary file, flush, fsync, ``os.replace``, fsync of the folder."""
    tmp = path.with_name(f".{path.name}.{os.urandom(16).hex()}.tmp")  # as unique as a uuid4, without uuid's imports
    try:
        with open(tmp, "xb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        _fsync_dir(path.parent)


class DirectoryStorage(JsonStore):
    """Archived pages and the system state as JSON files in the folder ``path`` (created if missing).

    The folder must be empty or already a memci store (it holds ``memci-store.json``): a folder of
    other files is refused rather than written into. ``read_only=True`` opens an existing store and
    never writes. ``fsync=False`` skips the fsyncs (still atomic against a killed process, not
    against a power loss). Within one process the store is thread-safe; two processes writing the
    same folder must not write the same page index with different contents at the same moment.
    """

    path: Path
    read_only: bool
    fsync: bool

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False, fsync: bool = True) -> None:
        super().__init__()
        self.path = check_path(path)
        self.read_only = check_flag(read_only, "read_only")
        self.fsync = check_flag(fsync, "fsync")
        marker = self.path / _MARKER
        if self.path.exists() and not self.path.is_dir():
            raise StorageError(f"{self.path}: not a folder", str(self.path))
        if marker.exists():
            self._check_marker(marker)
        elif read_only:
            raise StorageError(f"{self.path}: not a memci directory store (no {_MARKER})", str(self.path))
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            if any(self.path.iterdir()):
                raise StorageError(
                    f"{self.path}: the folder holds other files and no {_MARKER}; refusing to write into it",
                    str(self.path),
                )
            (self.path / _PAGES).mkdir()
            write_atomic(marker, json.dumps({"format": "memci-directory", "version": FORMAT_VERSION}), fsync=fsync)
        if not (self.path / _PAGES).is_dir():
            if read_only:
                raise StorageError(f"{self.path}: corrupt store: no {_PAGES}/ folder", str(self.path))
            (self.path / _PAGES).mkdir()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) by its path and options: the copy opens the same folder."""
        return (functools.partial(DirectoryStorage, str(self.path), read_only=self.read_only, fsync=self.fsync), ())

    def _check_marker(self, marker: Path) -> None:
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
            version = info["version"]
            if info["format"] != "memci-directory" or type(version) is not int:
                raise ValueError("unexpected contents")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise StorageError(f"{marker}: corrupt store marker: {e}", str(marker)) from None
        if version > FORMAT_VERSION:
            raise StorageError(
                f"{marker}: written by a newer memci (format {version}, this one reads {FORMAT_VERSION})", str(marker)
            )

    def __repr__(self) -> str:
        return f"DirectoryStorage({str(self.path)!r})"

    def _page_path(self, index: int) -> Path:
        return self.path / _PAGES / _page_name(index)

    def _where(self, index: int | None = None) -> str:
        return f"{self.path / _STATE}" if index is None else f"{self._page_path(index)} (page {index})"

    def _writable(self) -> None:
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only", str(self.path))

    @staticmethod
    def _read(path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def _insert_page_text(self, index: int, text: str) -> str | bytes | None:
        self._writable()
        path = self._page_path(index)
        existing = self._read(path)
        if existing is None:
            write_atomic(path, text, fsync=self.fsync)
        return existing

    def _read_page_text(self, index: int) -> bytes | None:
        return self._read(self._page_path(index))

    def _list_page_indices(self) -> list[int]:
        found = []
        for entry in os.scandir(self.path / _PAGES):
            match = _PAGE_NAME.fullmatch(entry.name)
            if match and entry.name == _page_name(int(match.group(1))):
                found.append(int(match.group(1)))
        return sorted(found)

    def _read_state_text(self) -> bytes | None:
        return self._read(self.path / _STATE)

    @contextmanager
    def _save_lock(self) -> Iterator[None]:
        """Hold the store's lock file: saves from other processes wait (threads wait on the store's
        own lock before they get here)."""
        with open(self.path / _LOCK, "a+b") as lock:
            if fcntl is not None:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            yield  # closing the file releases the lock

    def _commit(self, commit: Commit) -> None:
        self._writable()
        # An OSError may come after the state was renamed into place (a failed fsync of the folder):
        # run again, and a commit that landed finds itself in the state file.
        settled(lambda: self._commit_once(commit), OSError)

    def _commit_once(self, commit: Commit) -> None:
        with self._save_lock():
            stored_text = self._read(self.path / _STATE)
            stored = {} if stored_text is None else decode_state(stored_text, self._where)
            if commit.check(revision_of(stored), self._where, lambda: stored_text):
                return
            stored_mark = stored.get("pages_through", 0)
            writes = commit.pages_to_write(stored_mark, self._read_page_text, self._where)
            for index, text in writes:
                write_atomic(self._page_path(index), text, fsync=self.fsync)
            write_atomic(self.path / _STATE, commit.state_text, fsync=self.fsync)
            # Forgotten pages go once the new state (which no longer names them) is in place: a
            # crash in between leaves pages no loaded state reads (the next forgetting save deletes them).
            if commit.forgotten_through > stored.get("forgotten_through", 0):
                for index in commit.pages_to_forget(self._list_page_indices()):
                    self._page_path(index).unlink(missing_ok=True)
                if self.fsync:
                    _fsync_dir(self.path / _PAGES)
