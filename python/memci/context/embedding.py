"""Embedders: the callables that turn page texts into vectors for hybrid search, checked once here.

An **embedder** is any callable from a list of texts to one vector per text: a list of lists of
numbers, or a 2-D numpy array (any real dtype), or an awaitable of either (an ``async def``
embedder). :func:`embed` calls it and checks what comes back at this one boundary: one row per text,
at least one component, all rows of one length (and of ``dim`` when the caller has vectors
already), every value a finite real number. What passes is a C-contiguous ``float32`` array;
anything else raises :class:`~memci.EmbeddingError` naming what is wrong, before anything was
changed. Ready-made embedders live in :mod:`memci.embedders`.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from memci.errors import EmbeddingError, InvalidOperationError

if TYPE_CHECKING:  # numpy is imported where vectors are made: importing memci loads no heavy package
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "Embedder",
    "Vectors",
    "checked_embedder",
    "decode_vector",
    "embed",
    "encode_vector",
    "on_loop",
    "row_bytes",
]

#: What an embedder returns for its texts: rows of numbers (lists or a 2-D array).
Vectors: TypeAlias = "Sequence[Sequence[float]] | npt.NDArray[Any]"
#: Texts in, one vector per text out (or an awaitable of them).
Embedder: TypeAlias = "Callable[[list[str]], Vectors | Awaitable[Vectors]]"
#: Runs a coroutine on an event loop from a worker thread and waits for its result.
LoopRunner: TypeAlias = "Callable[[Coroutine[Any, Any, Any]], Any]"


def checked_embedder(embedder: object, where: str) -> Embedder | None:
    """``embedder`` if it is None or callable; :class:`~memci.InvalidOperationError` otherwise."""
    if embedder is not None and not callable(embedder):
        raise InvalidOperationError(
            f"{where}: embedder must be a callable from a list of texts to vectors, got {type(embedder).__name__}"
        )
    return embedder


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _resolved(result: object, name: str) -> object:
    """``result``, awaited when it is an awaitable: on a loop of its own, since the caller runs
    none in this thread (an async system awaits on its loop instead: :func:`on_loop`)."""
    if not inspect.isawaitable(result):
        return result
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(result))
    if inspect.iscoroutine(result):
        result.close()  # never awaited: closed so that no "never awaited" warning follows
    raise EmbeddingError(
        f"embedder {name} is async and an event loop is running in this thread: use memci.AsyncContextSystem, "
        "which awaits it on its loop"
    )


def _name(embedder: object) -> str:
    return getattr(embedder, "__name__", type(embedder).__name__)


def embed(embedder: Embedder, texts: list[str], dim: int = 0) -> npt.NDArray[np.float32]:
    """The vectors ``embedder`` gives ``texts``, as a ``(len(texts), dim)`` C-contiguous float32
    array, checked (``dim`` 0: any dimension). :class:`~memci.EmbeddingError` names what is wrong.
    One call of the embedder; O(texts * dim) for the checks."""
    import numpy as np

    name = _name(embedder)
    result = _resolved(embedder(list(texts)), name)
    where = f"embedder {name} given {len(texts)} texts"
    if isinstance(result, str | bytes | dict) or result is None:
        raise EmbeddingError(f"{where} returned {type(result).__name__}, not a list of vectors")
    try:
        rows = np.asarray(result)
    except (ValueError, TypeError) as e:
        raise EmbeddingError(f"{where} returned vectors that are not rows of numbers of one length ({e})") from None
    if rows.dtype.kind not in "fiu":
        raise EmbeddingError(f"{where} returned values of dtype {rows.dtype}, not real numbers")
    if rows.ndim != 2:
        raise EmbeddingError(f"{where} returned an array of shape {rows.shape}, expected ({len(texts)}, dim)")
    if rows.shape[0] != len(texts):
        raise EmbeddingError(f"{where} returned {rows.shape[0]} vectors, expected one per text")
    if rows.shape[1] == 0:
        raise EmbeddingError(f"{where} returned vectors of 0 dimensions")
    if dim and rows.shape[1] != dim:
        raise EmbeddingError(
            f"{where} returned vectors of {rows.shape[1]} dimensions, but the vectors it made before have {dim}"
        )
    with np.errstate(over="ignore"):  # a value too large for float32 becomes inf, refused below
        vectors = np.ascontiguousarray(rows, dtype=np.float32)
    bad = ~np.isfinite(vectors)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise EmbeddingError(f"{where} returned a NaN, infinite or float32-overflowing value at [{row}][{col}]")
    return vectors


def on_loop(embedder: Embedder | None, run: LoopRunner) -> Embedder | None:
    """What a system running in a worker thread is given for ``embedder``: a callable whose
    awaitable results ``run`` awaits on the event loop (a sync result is passed on as it is)."""
    if embedder is None:
        return None

    def embedded(texts: list[str]) -> Vectors:
        result = embedder(texts)
        return run(_awaited(result)) if inspect.isawaitable(result) else result

    embedded.__name__ = _name(embedder)
    return embedded


def _little_endian(vector: npt.NDArray[np.float32]) -> bytes:
    return vector.astype("<f4", copy=False).tobytes()


def encode_vector(vector: bytes) -> str:
    """A page vector (little-endian float32 bytes) as stored in a page: base64 text."""
    return base64.b64encode(vector).decode("ascii")


def decode_vector(text: object) -> bytes | None:
    """The little-endian float32 bytes a page stores as ``text``, or None when ``text`` is not
    base64 of at least one finite float32."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    if not raw or len(raw) % 4:
        return None
    import numpy as np

    if not np.isfinite(np.frombuffer(raw, dtype="<f4")).all():
        return None
    return raw


def row_bytes(vectors: npt.NDArray[np.float32]) -> list[bytes]:
    """Each row of ``vectors`` as little-endian float32 bytes."""
    return [_little_endian(row) for row in vectors]
