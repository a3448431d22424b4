"""Shared pieces of the batch tests: pipelines to try, datasets of damaged conversations in both
formats, the reference (the same steps run one conversation at a time through MessageArray), the
changes made to an input under a run, and a FIFO with a reader."""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import memci
from hypothesis import strategies as st
from memci import batch, ops
from memci.batch import CountTokens, Step
from tool_histories import ANTHROPIC, OPENAI, damaged

Message = dict[str, Any]

#: Pipelines covering every step kind (both token paths, both trim strategies).
PIPELINES: dict[str, list[Step]] = {
    "sanitize": [batch.sanitize()],
    "sanitize_trim_count": [batch.sanitize(), batch.trim_to_tokens(60), batch.count_tokens()],
    "count_trim_first": [
        batch.count_tokens("cl100k_base"),
        batch.trim_to_tokens(40, strategy="first", keep_system=False, start_on=None, end_on="assistant"),
        batch.count_tokens("approximate"),
    ],
    "filter_truncate": [batch.filter(roles=["user", "assistant"]), batch.truncate(keep_last=3)],
    "keywords_clear": [batch.filter(content_excludes=["why?"]), batch.truncate(role="user", keep_first=2)],
    "clear": [batch.sanitize(), batch.clear(keep_system=True)],
    "partial": [batch.trim_to_tokens(30, allow_partial=True)],
}


def reference(messages: list[Message], steps: list[Step]) -> tuple[list[Message], list[int]]:
    """The steps run on one conversation through MessageArray, and the count_tokens counts."""
    arr = memci.MessageArray(messages)
    counts = []
    for step in steps:
        if isinstance(step, CountTokens):
            counts.append(arr.token_count(step.encoding))
        else:
            arr.execute(step)
    return arr.messages(), counts


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """A damaged conversation in either format, with long user texts now and then (so that trims
    cut somewhere)."""
    fmt = draw(st.sampled_from([OPENAI, ANTHROPIC]))
    messages = draw(damaged(fmt))
    if messages and draw(st.booleans()):
        messages.insert(1, {"role": "user", "content": "word " * draw(st.integers(1, 40)) + "\nend"})
    return messages


datasets = st.lists(conversations(), max_size=6)


def as_line(messages: list[Message], i: int) -> str:
    """A JSONL record: a bare list for even i, an object with other keys for odd i."""
    if i % 2 == 0:
        return json.dumps(messages, ensure_ascii=False)
    return json.dumps({"id": i, "messages": messages, "meta": {"n": 1.5}}, ensure_ascii=False)


def messages_of(line: str | bytes) -> list[Message]:
    value = json.loads(line)
    return value if isinstance(value, list) else value["messages"]


__all__ = ["PIPELINES", "as_line", "conversations", "datasets", "messages_of", "ops", "reference"]


#: A record of the input-change tests (a user question, an answer).
RECORD = json.dumps([{"role": "user", "content": "question " * 20}, {"role": "assistant", "content": "answer"}])


def cut_short(path: Path) -> None:
    """Truncate the file mid-line, as a writer rewriting it in place would."""
    os.truncate(path, path.stat().st_size // 2 + 7)


def grown(path: Path) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write((RECORD + "\n") * 10)


def rewritten(path: Path) -> None:
    """The same size, other bytes, a later modification time."""
    data = path.read_bytes().replace(b"question", b"QUESTION")
    path.write_bytes(data)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def replaced(path: Path) -> None:
    """Another file renamed into its place (the run goes on reading the one it opened)."""
    other = path.with_name("other.jsonl")
    other.write_bytes(path.read_bytes())
    os.replace(other, path)


CHANGES: dict[str, Callable[[Path], None]] = {
    "cut short": cut_short,
    "grown": grown,
    "rewritten": rewritten,
    "replaced": replaced,
}


@contextmanager
def fifo_reader(path: Path) -> Iterator[list[bytes]]:
    """A FIFO at ``path`` and a thread reading it to its end; what it read is in the list after."""
    os.mkfifo(path)
    got: list[bytes] = []

    def read() -> None:
        with path.open("rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        yield got
    finally:
        # A reader still waiting (the run never opened the FIFO) ends at the EOF of a writer opened
        # and closed without blocking: a blocking open would wait forever for a reader that has
        # just finished between is_alive() and the open (ENXIO: no reader has it open right now).
        while reader.is_alive():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as e:
                if e.errno != errno.ENXIO:
                    raise
            reader.join(0.05)
