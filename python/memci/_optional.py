"""The import points of memci's optional dependencies.

Each import of a package an extra brings sits in a ``with needs_extra(...)`` block, so a missing
package, or one too old to hold what memci imports, fails as :class:`~memci.MissingExtraError`
naming the extra and how to install it, not as a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from memci.errors import MissingExtraError

__all__ = ["needs_extra"]


@contextmanager
def needs_extra(extra: str, feature: str) -> Iterator[None]:
    """Turn an ``ImportError`` raised in the block into a :class:`~memci.MissingExtraError` that
    says ``feature`` needs ``extra``, with the extra's requirements and the install command; the
    original error is kept as its cause."""
    try:
        yield
    except MissingExtraError:
        raise
    except ImportError as e:
        wanted = ", ".join(requirements_of(extra))
        raise MissingExtraError(
            f"{feature} needs the '{extra}' extra{f' ({wanted})' if wanted else ''}: "
            f"pip install 'memci[{extra}]' ({type(e).__name__}: {e})",
            extra=extra,
            name=e.name,
        ) from e


def requirements_of(extra: str) -> list[str]:
    """The requirements memci's installed metadata lists for ``extra`` (``llama-index-core>=0.14``),
    or none when memci's metadata cannot be read."""
    from importlib import metadata  # only on this error path: it costs an import of memci a few ms

    try:
        listed = metadata.requires("memci") or []
    except metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [requirement.split(";")[0].strip() for requirement in listed if marker.search(requirement)]
