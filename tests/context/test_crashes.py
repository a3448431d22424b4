"""A conversation survives every crash, and shared stores lose no update (docs/context-system.md,
"Saving, crashes and many workers"): agent processes killed with SIGKILL at random moments on
SQLite, a directory and Redis, and two processes racing on one store."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import memci
import pytest


def test_regression_a_crash_between_an_archive_and_the_next_save_does_not_wedge_the_conversation(
    tmp_path: Path,
) -> None:
    """Pages were written when archived: after a crash the same index was archived again with other
    content, and every later user message raised StorageError."""
    store = memci.SqliteStorage(tmp_path / "a.db")
    ctx = memci.ContextSystem("sys", active_pages=1, storage=store)
    ctx.add({"role": "user", "content": "q1"})
    ctx.save()
    ctx.add({"role": "assistant", "content": "a1"})
    ctx.add({"role": "user", "content": "q2"})  # archives page 1
    store.close()  # the process dies here
    with memci.SqliteStorage(tmp_path / "a.db") as again:
        ctx2 = memci.ContextSystem.load(again)
        assert ctx2.search("a1") == [], "nothing of the lost run is searchable"
        ctx2.add({"role": "assistant", "content": "another a1"})
        ctx2.add({"role": "user", "content": "q2"})  # archives page 1 again, with other content
        ctx2.save()
        assert ctx2.recall(1).messages()[1] == {"role": "assistant", "content": "another a1"}
        assert [hit.page_index for hit in ctx2.search("another")] == [1]


#: Kills per store; each restart must load, agree with itself and carry on.
KILLS = 20

AGENT = textwrap.dedent(
    """
    import sys
    import memci

    kind, where, prefix, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if kind == "sqlite":
        store = memci.SqliteStorage(where, synchronous="NORMAL")
    elif kind == "directory":
        store = memci.DirectoryStorage(where, fsync=False)
    elif kind == "postgres":
        store = memci.PostgresStorage(where, namespace=prefix, pool_size=1)
    else:
        store = memci.RedisStorage(where, prefix=prefix)
    if store.load_state() is None:
        ctx = memci.ContextSystem(
            "You are an agent.", active_pages=4, storage=store, max_context_tokens=1200,
            policy=memci.ArchivePolicy(contents_max_tokens=300),
        )
    else:
        ctx = memci.ContextSystem.load(store)
    print("loaded", ctx.round, flush=True)
    if ctx.round:
        # Search agrees with recall: every page it finds is one the loaded state can recall (on a
        # copy, as recalls bring dropped entries back to the contents page).
        check = memci.ContextSystem.load(store)
        for hit in check.search("question topic", k=1000):
            check.recall(hit.page_index)
    for _ in range(rounds):
        n = ctx.round + 1
        ctx.add({"role": "user", "content": f"question {n} on topic {n % 7}: " + "words " * (n % 13)})
        call = {"id": f"c{n}", "type": "function", "function": {"name": "look", "arguments": '{"n": %d}' % n}}
        ctx.add({"role": "assistant", "content": None, "tool_calls": [call]})
        ctx.add({"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n} " + "data " * (n * 37 % 400)})
        ctx.build_messages()  # over max_context_tokens in about half the rounds: archives more pages
        ctx.add({"role": "assistant", "content": f"answer {n}"})
        ctx.end_round()
        if n % 3 == 0:
            ctx.save()
            print("saved", ctx.round, flush=True)
    print("done", ctx.round, flush=True)
    """
)


def _run_until_killed(kind: str, where: str, prefix: str, rng: random.Random, acked: int) -> int:
    """Start the agent, check it loaded at least the acknowledged round, let it save a random number
    of times, kill it; the round of the last save it acknowledged."""
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, kind, where, prefix, "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert agent.stdout is not None
    word, number = agent.stdout.readline().split()
    assert word == "loaded", agent.stderr.read() if agent.stderr else ""
    assert int(number) >= acked, f"a save acknowledged at round {acked} was lost: loaded round {number}"
    saves = rng.randrange(0, 4)
    # Anywhere from at once to a few rounds later: mid-archive, mid-save or between saves.
    lines_after = rng.randrange(0, 40) if rng.random() < 0.7 else 0
    for line in agent.stdout:
        word, number = line.split()
        if word == "saved":
            acked = int(number)
            saves -= 1
        if saves < 0:
            if lines_after == 0:
                break
            lines_after -= 1
    agent.send_signal(signal.SIGKILL)
    # The rest through the same buffered reader (communicate() would read the pipe beneath it and
    # lose what the reader had read ahead, cutting a line in two); EOF comes with the process's death.
    out = agent.stdout.read()
    err = agent.stderr.read() if agent.stderr else ""
    for pipe in (agent.stdout, agent.stderr):
        if pipe is not None:
            pipe.close()
    assert agent.wait(timeout=60) == -signal.SIGKILL, err
    for line in out.splitlines():  # acknowledged before the kill landed
        word, number = line.split()
        if word == "saved":
            acked = int(number)
    return acked


@pytest.mark.parametrize("kind", ["sqlite", "directory", "redis", "postgres"])
def test_agents_killed_at_random_moments_carry_on_with_nothing_acknowledged_lost(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind in ("redis", "postgres"):
        where = request.getfixturevalue(f"{kind}_url" if kind == "redis" else "postgres_dsn")
    else:
        where = str(tmp_path / ("agent.db" if kind == "sqlite" else "store"))
    rng, prefix = random.Random(f"{kind}-crashes"), f"crash-{uuid.uuid4().hex}:"
    acked = 0
    for _ in range(KILLS):
        acked = _run_until_killed(kind, where, prefix, rng, acked)
    final = subprocess.run(
        [sys.executable, "-c", AGENT, kind, where, prefix, "20"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert final.returncode == 0, final.stderr
    lines = [line.split() for line in final.stdout.splitlines()]
    assert int(lines[0][1]) >= acked
    assert lines[-1][0] == "done"
    assert int(lines[-1][1]) == int(lines[0][1]) + 20
    assert acked > 0, "the campaign saved at least once"


RACER = textwrap.dedent(
    """
    import sys
    import memci

    kind, where, prefix, name, cycles = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    def open_store():
        if kind == "sqlite":
            return memci.SqliteStorage(where, synchronous="NORMAL")
        return memci.RedisStorage(where, prefix=prefix)
    store = open_store()
    conflicts = 0
    for i in range(cycles):
        while True:
            if store.load_state() is None:
                ctx = memci.ContextSystem("sys", active_pages=2, storage=store)
            else:
                ctx = memci.ContextSystem.load(store)
            ctx.add({"role": "user", "content": f"{name} {i}"})
            ctx.add({"role": "assistant", "content": "ok"})
            ctx.end_round()
            try:
                ctx.save()
                break
            except memci.ConflictError:
                conflicts += 1
    print(conflicts)
    """
)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_two_agents_on_one_store_lose_no_turn(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    where = str(tmp_path / "shared.db") if kind == "sqlite" else request.getfixturevalue("redis_url")
    prefix, cycles = f"race-{uuid.uuid4().hex}:", 100
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, kind, where, prefix, name, str(cycles)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    # A racer exits non-zero on any error but ConflictError, which it answers by reloading.
    results = [r.communicate(timeout=300) for r in racers]
    assert [r.returncode for r in racers] == [0, 0], [err for _, err in results]
    store = memci.SqliteStorage(where) if kind == "sqlite" else memci.RedisStorage(where, prefix=prefix)
    with store:
        ctx = memci.ContextSystem.load(store)
        turns = [ctx.recall(i).messages()[0]["content"] for i in range(1, ctx.round + 1)]
    assert ctx.round == 2 * cycles
    assert sorted(turns) == sorted(f"{name} {i}" for name in ("a", "b") for i in range(cycles))
