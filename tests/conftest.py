"""Shared settings: modest hypothesis runs with no deadline (tests never time anything)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from factories import free_port
from hypothesis import HealthCheck, settings

settings.register_profile(
    "memci",
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# A longer hunt, by hand: pytest tests --hypothesis-profile=thorough
settings.register_profile("thorough", parent=settings.get_profile("memci"), max_examples=1000, stateful_step_count=60)
# The context edits' long run (make test-edits): 10,000 generated edit sequences per format.
settings.register_profile("edits", parent=settings.get_profile("memci"), max_examples=10_000)
settings.load_profile("memci")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of our own on a free loopback port (no persistence), stopped at the end."""
    pytest.importorskip("redis", reason="the redis package is not installed (pip install 'memci[redis]')")
    import redis

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (`make test` installs it with apt-get where it can)")
    port = free_port()
    server = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tmp_path_factory.mktemp("redis"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if server.poll() is not None:
                    pytest.skip(f"redis-server exited at start with status {server.returncode}")
                time.sleep(0.05)
        else:
            pytest.skip("redis-server did not answer within 5 s")
        client.close()
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A PostgreSQL server of our own on a free loopback port (tests/postgres_server.py), stopped at
    the end. Skips only when no server can be installed or run here."""
    pytest.importorskip("psycopg", reason="the psycopg package is not installed (pip install 'memci[postgres]')")
    from postgres_server import running_postgres

    with ExitStack() as stack:
        try:
            dsn = stack.enter_context(running_postgres())
        except RuntimeError as e:
            pytest.skip(str(e))
        yield dsn
