"""The files of a batch run: its file arguments checked, and the output written to the place the
user pointed at, and nothing else (``docs/batch.md``, "Files"). This is the Python side's writer
(Parquet, and its errors file); the JSONL run's files follow the same rules in the core
(``rust/src/core/batch/jsonl.rs``, ``Sink``)."""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, NamedTuple

from memci.errors import InvalidOperationError, repr_of

__all__ = ["RunFiles", "checked_path", "is_streamed", "positive_int", "run_files", "same_file", "written"]


@contextmanager
def written(path: str) -> Iterator[BinaryIO]:
    """A binary file through which to write ``path``: ``-`` is standard output; a regular file (or
    a path not there yet), reached through its symlinks, is written under a temporary name beside
    it and renamed over it when the block ends without an exception, the temporary file removed
    otherwise; a device, FIFO or socket is written to as it is, never replaced; a directory is
    refused (``IsADirectoryError``)."""
    if path == "-":
        sys.stdout.flush()  # what Python buffered goes out first
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None  # a new file, or a dangling symlink: created where the link points
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
    if mode is not None and not stat.S_ISREG(mode):
        with open(path, "wb") as stream:  # no truncation on a device or FIFO: O_TRUNC is ignored there
            yield stream
        return
    final = Path(os.path.realpath(path))
    temp = final.with_name(f".{final.name}.partial-{os.getpid()}")
    try:
        with open(temp, "wb") as file:
            yield file
        os.replace(temp, final)
    finally:
        temp.unlink(missing_ok=True)


def is_streamed(path: str) -> bool:
    """Whether ``path`` is written as a stream (``-``, a device, a FIFO), not renamed into place."""
    if path == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def same_file(output: str, errors: str | None) -> bool:
    """Whether an output and an errors file would be written to one place (one would clobber the
    other): both ``-``, or both the same regular file once symlinks are resolved."""
    if errors is None:
        return False
    if output == "-" or errors == "-":
        return output == errors
    return not is_streamed(output) and os.path.realpath(output) == os.path.realpath(errors)


def checked_path(value: object, what: str) -> str:
    """A file argument as a ``str`` path (``-`` included), or InvalidOperationError naming ``what``:
    not a path, empty, holding a NUL or a lone surrogate (which has no form in a file name)."""
    try:
        path: str | bytes = os.fspath(value)  # type: ignore[call-overload]  # any object: refused when not a path
    except TypeError:
        raise InvalidOperationError(f"{what} must be a path (str or os.PathLike), got {repr_of(value)}") from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not path or "\0" in path:
        raise InvalidOperationError(f"{what} must be a file path without NUL characters, got {repr_of(path)}")
    try:
        os.fsencode(path)
    except UnicodeEncodeError as e:
        raise InvalidOperationError(
            f"{what} is not a file name: it holds a lone surrogate at index {e.start}"
        ) from None
    return path


def positive_int(value: object, what: str, most: int = sys.maxsize) -> int:
    """``value`` checked to be an int >= 1 (a size: one beyond ``most`` is taken as ``most``)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOperationError(f"{what} must be an int >= 1, got {repr_of(value)}")
    return min(value, most)


class RunFiles(NamedTuple):
    """A file run's paths, checked."""

    input: str
    output: str
    errors: str | None


def run_files(what: str, input: object, output: object, errors: object, progress: object) -> RunFiles:
    """The arguments every file run takes, checked before anything is opened: the three paths
    (:func:`checked_path`), ``progress`` a callable or None, output and errors not one file."""
    files = RunFiles(
        checked_path(input, f"{what}: input"),
        checked_path(output, f"{what}: output"),
        None if errors is None else checked_path(errors, f"{what}: errors"),
    )
    if progress is not None and not callable(progress):
        raise InvalidOperationError(f"{what}: progress must be a callable or None, got {repr_of(progress)}")
    if same_file(files.output, files.errors):
        raise InvalidOperationError(f"{what}: output and errors are the same file: {repr_of(files.output)}")
    return files
