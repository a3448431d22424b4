"""A PostgreSQL server of the tests' own: a new cluster in a temporary folder, on a free loopback port,
stopped and deleted at the end (``make postgres-server`` installs the Debian package where it can).

PostgreSQL refuses to run as root, and CI runs as root: there the cluster is made and run as the
``postgres`` user the Debian package creates. The tests and the benches share this module.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from factories import free_port


def _binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: on the PATH, else the newest Debian install."""
    found = shutil.which("initdb")
    if found is not None:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    return Path(versions[-1]).parent if versions else None


def _run_as() -> str | None:
    """The user the server runs as: ``postgres`` when we are root, else ourselves (None)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return ""
    return "postgres"


@contextmanager
def running_postgres(*, durable: bool = False) -> Iterator[str]:
    """Start a server and yield its DSN (user ``postgres``, database ``postgres``, trust auth on
    127.0.0.1); raise :class:`RuntimeError` with the reason if it cannot start. ``durable=False``
    turns fsync off: these tests kill clients, never the server, and run faster for it."""
    binaries = _binaries()
    if binaries is None:
        raise RuntimeError("PostgreSQL is not installed (`make postgres-server` installs it with apt-get)")
    user = _run_as()
    if user == "":
        raise RuntimeError("running as root and there is no `postgres` user to run PostgreSQL as")
    folder = Path(tempfile.mkdtemp(prefix="memci-pg-"))
    data = folder / "data"
    if user:
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    port = free_port()
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={folder} -c max_connections=100"
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"

    def run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, user=user, capture_output=True, text=True, check=check, timeout=120, cwd=folder)

    try:
        try:
            run(str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
            run(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"PostgreSQL did not start: {e.stderr.strip()[-400:]}") from None
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        _wait_for(dsn)
        yield dsn
    finally:
        if data.exists():
            run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for(dsn: str) -> None:
    import psycopg

    for _ in range(100):
        try:
            psycopg.connect(dsn, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            time.sleep(0.05)
    raise RuntimeError("PostgreSQL did not answer within 5 s")
