"""The lines of JSONL files as a Ray dataset, split where memci's local run splits them.

Ray's ``read_text`` decodes a whole file and splits it with ``str.splitlines``: it breaks a record
at the Unicode line ends JSON allows raw inside a string (U+2028, U+2029, U+0085, and the ASCII
controls 0x0B, 0x0C, 0x1C to 0x1E), and one byte that is not UTF-8 fails the whole file.
:class:`JsonLines` reads the bytes as the local run does: a line ends at ``\\n`` only, its
trailing ``\\r`` are dropped, and each line stays bytes (a ``binary`` column), so that the
pipeline reports a line that is not UTF-8 as one bad record. Imported by
:mod:`memci.integrations.ray` when a run needs it (this module needs ``ray``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from ray.data.datasource import FileBasedDatasource

__all__ = ["JsonLines", "split_lines"]


def split_lines(data: bytes) -> list[bytes]:
    """The lines of ``data``: split at ``\\n``, each without its trailing ``\\r``; no line after a
    final newline. O(len(data))."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line.rstrip(b"\r") for line in lines] if b"\r" in data else lines


class JsonLines(FileBasedDatasource):
    """Each line of the files at ``paths`` as one row of ``column`` (``binary``), blank lines
    kept, in file order: ``ray.data.read_datasource(JsonLines(path, column="text"))``."""

    def __init__(self, paths: str | list[str], *, column: str) -> None:
        super().__init__(paths)
        self.column = column

    def _read_stream(self, f: Any, path: str) -> Iterator[pa.Table]:
        yield pa.table({self.column: pa.array(split_lines(f.readall()), type=pa.binary())})
