"""A deterministic offline embedder for the tests: each word hashed into one of ``dim`` buckets
(a bag of words), so texts sharing words have a high cosine similarity; it counts its calls and
the texts it was given."""

from __future__ import annotations

import re
import zlib

import numpy as np
import numpy.typing as npt


class HashingEmbedder:
    """Texts in, one ``dim``-component float32 vector per text out; ``calls`` holds each call's texts."""

    def __init__(self, dim: int = 32) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []

    @property
    def texts(self) -> int:
        """How many texts it embedded, over all calls."""
        return sum(map(len, self.calls))

    def vector(self, text: str) -> npt.NDArray[np.float32]:
        out = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            out[zlib.crc32(word.encode()) % self.dim] += 1.0
        return out

    def __call__(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.calls.append(list(texts))
        return np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


class AsyncHashingEmbedder(HashingEmbedder):
    """The same vectors, from an ``async def __call__``."""

    async def __call__(self, texts: list[str]) -> npt.NDArray[np.float32]:  # type: ignore[override]
        return super().__call__(texts)
