"""The checks of a store's constructor arguments: one wording per fault, and only
:class:`~memci.StorageError` (docs/errors.md): a path, a namespace or prefix, a number of seconds, a
flag, a URL. Values are shown cut to 80 characters, and a URL without its password."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from memci.errors import StorageError, is_unicode, repr_of

__all__ = ["check_flag", "check_name", "check_path", "check_seconds", "url_shown"]

#: The longest path, and path component, the file stores accept (Linux's PATH_MAX and NAME_MAX, in
#: bytes): a longer one is a bad argument, not an OS error.
_MAX_PATH_BYTES = 4096
_MAX_NAME_BYTES = 255


def check_path(path: object, name: str = "path") -> Path:
    """``path`` (a str or an ``os.PathLike`` of one) as a :class:`Path`; :class:`StorageError` if it
    is of another type, empty, holds a NUL or a lone surrogate, or is too long for a file system."""
    try:
        text = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        text = None
    if not isinstance(text, str):
        raise StorageError(f"{name} must be a str or an os.PathLike, got {repr_of(path)}", name)
    if not text or "\x00" in text or not is_unicode(text):
        raise StorageError(f"{name} must be a non-empty path without NUL or lone surrogates, got {repr_of(text)}", name)
    encoded = text.encode("utf-8")
    if len(encoded) > _MAX_PATH_BYTES or any(len(part) > _MAX_NAME_BYTES for part in encoded.split(b"/")):
        raise StorageError(f"{name} is too long for a file system: {repr_of(text)}", name)
    return Path(text)


def check_name(value: object, name: str) -> str:
    """``value``, a namespace or key prefix: :class:`StorageError` unless it is a str with no NUL
    (PostgreSQL's text cannot hold one) and no lone surrogate."""
    if not isinstance(value, str) or "\x00" in value or not is_unicode(value):
        raise StorageError(
            f"{name} must be a str without NUL characters or lone surrogates, got {repr_of(value)}", name
        )
    return value


def check_seconds(value: object, name: str, *, optional: bool = False) -> float | None:
    """``value`` as seconds (an int or float > 0, finite; None too when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 10**12:  # NaN fails too
        allowed = "None, a timedelta or " if optional else ""
        raise StorageError(f"{name} must be {allowed}a number of seconds > 0, got {repr_of(value)}", name)
    return float(value)


def check_flag(value: object, name: str) -> bool:
    """``value`` if it is a bool; :class:`StorageError` otherwise."""
    if type(value) is not bool:
        raise StorageError(f"{name} must be True or False, got {repr_of(value)}", name)
    return value


def url_shown(url: str) -> str:
    """``url`` for a message: its password replaced by ``***``, cut to 80 characters."""
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            host = parts.netloc.rpartition("@")[2]
            url = parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()
    except ValueError:
        return "the URL (not shown: it does not parse)"
    return repr_of(url)
