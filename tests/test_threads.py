"""One array used from several threads at once: nothing crashes, nothing is lost, and every
call sees a whole state (docs/message-array.md, "threads")."""

from __future__ import annotations

import contextlib
import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from factories import assistant, run_together, system, user
from memci import BatchError, MessageArray, PositionError

THREADS = 4
ROUNDS = 300


def test_concurrent_appends_lose_nothing_and_keep_each_threads_order() -> None:
    arr = MessageArray([system()])

    def writer(t: int) -> Callable[[], None]:
        def work() -> None:
            for i in range(ROUNDS):
                if i % 3:
                    arr.append(user(f"{t}:{i}"))
                else:
                    arr.append([user(f"{t}:{i}"), assistant(f"{t}:{i}:a")])

        return work

    run_together(*(writer(t) for t in range(THREADS)))
    stored = [m["content"] for m in arr.all_messages()]
    assert len(stored) == 1 + THREADS * (ROUNDS + ROUNDS // 3)
    assert arr.stats().total_messages == len(stored)
    for t in range(THREADS):
        mine = [c for c in stored if c.startswith(f"{t}:") and not c.endswith(":a")]
        assert mine == [f"{t}:{i}" for i in range(ROUNDS)]
    assert arr.batch_index == 0
    assert arr.messages() == arr.all_messages()


class Hammered:
    """One array and the workers that hammer it; ``written`` counts every message they stored."""

    def __init__(self) -> None:
        self.arr = MessageArray([system("prompt")], tool_description="Tools: f")
        self.written: Counter[str] = Counter()
        self.lock = threading.Lock()

    def stored(self, *contents: str) -> None:
        with self.lock:
            self.written.update(contents)

    def writer(self) -> None:
        for i in range(ROUNDS):
            batch = [user(f"w{i}"), assistant(f"w{i}:a")] if i % 2 else [user(f"w{i}")]
            self.arr.append(batch if i % 4 else batch[0])
            self.stored(*(m["content"] for m in batch))

    def cutter(self) -> None:
        arr, rng = self.arr, random.Random(1)
        for i in range(ROUNDS):
            step = i % 6
            if step == 0:
                arr.truncate(keep_last=rng.randint(0, 20))
            elif step == 1:
                arr.filter(roles=["system", "user"])
            elif step == 2:
                arr.checkpoint(f"cp{i}")
            elif step == 3:
                with contextlib.suppress(BatchError):  # a later batch may have been discarded meanwhile
                    arr.rollback(rng.randint(0, arr.batch_index))
            elif step == 4:
                arr.clear()
            else:
                arr.insert(0, user(f"i{i}"))
                self.stored(f"i{i}")

    def replacer(self) -> None:
        for i in range(ROUNDS):
            with contextlib.suppress(PositionError):  # the array may be empty at that moment
                self.arr.replace(-1, assistant(f"r{i}"))
                self.stored(f"r{i}")
                self.arr.mark(0, "first")

    def reader(self) -> None:
        arr = self.arr
        for _ in range(ROUNDS):
            stats = arr.stats()
            assert stats.total_batches == stats.current_batch_index + 1
            assert stats.current_batch_messages <= stats.total_messages
            positions = arr.indices()
            assert positions.tolist() == list(range(len(positions)))
            assert all(m["role"] in {"system", "user", "assistant"} and "content" in m for m in arr.messages())
            with contextlib.suppress(BatchError):  # rolled back meanwhile
                snap = arr.snapshot(stats.current_batch_index)
                assert snap.message_count == len(snap.messages)
            arr.recent(3, role="user")
            arr.marked("first")


def test_writers_cutters_and_readers_together_leave_a_consistent_array() -> None:
    hammered = Hammered()
    run_together(hammered.writer, hammered.cutter, hammered.replacer, hammered.reader)

    arr, written = hammered.arr, hammered.written
    stored = Counter(m["content"] for m in arr.all_messages())
    assert stored - Counter(["prompt", "Tools: f"]) == written, "every message written is stored exactly once"
    stats = arr.stats()
    assert stats.total_messages == sum(stored.values())
    assert stats.current_batch_messages == len(arr) == len(arr.messages())
    assert stats.total_batches == arr.batch_index + 1
    for b in range(arr.batch_index + 1):
        assert arr.snapshot(b).message_count == len(arr.snapshot(b).messages)
    assert MessageArray.from_json(arr.to_json()).messages() == arr.messages()
    arr.clear(keep_system=False)
    assert arr.messages() == [system("Tools: f")]


def flipping() -> tuple[MessageArray, list[dict[str, str]], list[dict[str, str]], Callable[[], None]]:
    """An array, its two states (all, filtered) and a worker that flips it between them."""
    arr = MessageArray([user(str(i)) for i in range(2000)])
    everything = arr.messages()
    filtered = [m for m in everything if "1" in m["content"]]

    def flipper() -> None:
        for _ in range(ROUNDS // 3):
            arr.filter(content_contains=["1"])
            arr.rollback(0)

    return arr, everything, filtered, flipper


READS: dict[str, tuple[Callable[[MessageArray], list[Any]], slice]] = {
    "messages()": (MessageArray.messages, slice(None)),
    "iter": (list, slice(None)),
    "[:]": (lambda a: a[:], slice(None)),
    "[100:1500]": (lambda a: a[100:1500], slice(100, 1500)),
    "[-300:]": (lambda a: a[-300:], slice(-300, None)),
    "[5:-5]": (lambda a: a[5:-5], slice(5, -5)),
    "[::7]": (lambda a: a[::7], slice(None, None, 7)),
    "role_range(-300)": (lambda a: a.role_range("user", -300), slice(-300, None)),
}


@pytest.mark.parametrize("name", READS)
def test_readers_see_the_state_before_or_after_a_write_never_half_of_it(name: str) -> None:
    read, key = READS[name]
    arr, everything, filtered, flipper = flipping()
    seen: list[int] = []

    def reader() -> None:
        for _ in range(ROUNDS // 3):
            got = read(arr)
            assert got in (everything[key], filtered[key])
            seen.append(len(got))

    run_together(flipper, *([reader] * (THREADS - 1)))
    assert len(seen) == (THREADS - 1) * (ROUNDS // 3)
    assert arr.messages() == everything
