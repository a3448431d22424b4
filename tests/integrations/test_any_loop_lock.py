"""memci.integrations.any_loop_lock.AnyLoopLock: one lock for coroutines on many loops and threads."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from memci.integrations.any_loop_lock import AnyLoopLock


def test_coroutines_on_many_loops_take_turns() -> None:
    lock = AnyLoopLock()
    shared = {"count": 0, "inside": 0, "most_inside": 0}
    start = threading.Barrier(4)

    async def bump() -> None:
        async with lock:
            shared["inside"] += 1
            shared["most_inside"] = max(shared["most_inside"], shared["inside"])
            value = shared["count"]
            await asyncio.sleep(0)  # another holder would interleave here
            shared["count"] = value + 1
            shared["inside"] -= 1

    def worker() -> None:
        start.wait()

        async def main() -> None:
            await asyncio.gather(*(bump() for _ in range(25)))

        asyncio.run(main())

    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(worker) for _ in range(4)]:
            future.result(timeout=120)
    assert shared["count"] == 100
    assert shared["most_inside"] == 1
    assert not lock.locked()


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    lock = AnyLoopLock()
    await lock.acquire()
    waiter = asyncio.ensure_future(lock.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    lock.release()
    assert not lock.locked()
    async with lock:
        assert lock.locked()


async def test_a_waiter_cancelled_after_the_hand_over_passes_the_lock_on() -> None:
    lock = AnyLoopLock()
    await lock.acquire()
    first = asyncio.ensure_future(lock.acquire())
    second = asyncio.ensure_future(lock.acquire())
    await asyncio.sleep(0)
    lock.release()  # handed to `first`, whose wake-up is scheduled on this loop
    first.cancel()  # before it runs
    await asyncio.gather(first, return_exceptions=True)
    await asyncio.wait_for(second, timeout=60)
    assert lock.locked()  # `second` holds it now
    lock.release()
    assert not lock.locked()
