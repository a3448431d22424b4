"""PostgresStorage and AsyncPostgresStorage (docs/storage.md, "PostgresStorage"): namespaces that never
see each other, TTL expiry, bulk reads, the tables' schema, bad arguments, and eight processes racing
on one conversation with no acknowledged turn lost. The store contract itself runs in
test_stores.py, test_commits.py and test_async_stores.py; agents killed mid-loop in
tests/context/test_crashes.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from datetime import timedelta
from typing import Any

import pytest
from factories import saved_state as state
from factories import stored_page as page
from memci import ConflictError, PostgresStorage, StorageError
from memci.storage import AsyncPostgresStorage, postgres
from memci.storage.postgres import SCHEMA_VERSION

pytest.importorskip("psycopg", reason="the psycopg package is not installed (pip install 'memci[postgres]')")


def fresh() -> str:
    return f"test-{uuid.uuid4().hex}"


def sql(dsn: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(statement, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def test_namespaces_never_see_each_other(postgres_dsn: str) -> None:
    a_name, b_name = fresh(), fresh()
    with PostgresStorage(postgres_dsn, namespace=a_name) as a, PostgresStorage(postgres_dsn, namespace=b_name) as b:
        a.save_state(state(1, 2, who="a"), [page(1, "a"), page(2, "a")])
        assert b.load_state() is None
        assert b.page_indices() == []
        assert b.get_page(1) is None
        assert b.get_pages([1, 2]) == {}
        b.save_state(state(1, 1, who="b"), [page(1, "b")])  # revision 1 of b: no conflict with a
        b.save_state(state(2, 1, who="b", forgotten_through=1))  # b forgets its page 1; a keeps its own
        assert a.get_page(1) == page(1, "a")
        assert a.page_indices() == [1, 2]
        assert b.page_indices() == []
        assert a.load_state() == state(1, 2, who="a")
    rows = sql(
        postgres_dsn, "SELECT namespace, page_index FROM memci_pages WHERE namespace = ANY(%s)", [a_name, b_name]
    )
    assert sorted(rows) == [(a_name, 1), (a_name, 2)]


def test_many_stores_share_one_pool_and_close_leaves_it_open(postgres_dsn: str) -> None:
    from psycopg_pool import ConnectionPool

    with ConnectionPool(postgres_dsn, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True) as pool:
        stores = [PostgresStorage(pool, namespace=fresh()) for _ in range(5)]
        for i, store in enumerate(stores):
            store.save_state(state(1, 1, n=i), [page(1, str(i))])
        for i, store in enumerate(stores):
            assert store.get_page(1) == page(1, str(i))
            store.close()
        assert pool.closed is False
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_get_pages_reads_many_pages_at_once(postgres_dsn: str) -> None:
    with PostgresStorage(postgres_dsn, namespace=fresh()) as store:
        store.save_state(state(1, 300), [page(i) for i in range(1, 301)])
        got = store.get_pages(range(1, 400))
        assert sorted(got) == list(range(1, 301))
        assert got[123] == page(123)
        with pytest.raises(StorageError, match="an int from 1 to 2"):
            store.get_pages([1, 0])


def test_a_conversation_expires_ttl_after_its_last_write(postgres_dsn: str) -> None:
    name = fresh()
    with PostgresStorage(postgres_dsn, namespace=name, ttl=timedelta(hours=1)) as store:
        store.save_state(state(1, 1), [page(1)])
        ((expires_in,),) = sql(
            postgres_dsn, "SELECT extract(epoch FROM expires_at - now()) FROM memci_expiry WHERE namespace = %s", name
        )
        assert 3000 < expires_in <= 3600
        sql(postgres_dsn, "UPDATE memci_expiry SET expires_at = now() - interval '1 second' WHERE namespace = %s", name)
        assert store.load_state() is None  # expired: reads as empty, though its rows are still there
        assert store.page_indices() == []
        assert store.get_page(1) is None
        with pytest.raises(ConflictError, match="holds revision 0"):  # a writer from before the expiry
            store.save_state(state(2, 2), [page(2)])
        # A new conversation under the name: the old one's rows are deleted in the same transaction.
        store.save_state(state(1, 1, again=True), [page(1, "new")])
        assert store.get_page(1) == page(1, "new")
        assert sql(postgres_dsn, "SELECT page_index FROM memci_pages WHERE namespace = %s", name) == [(1,)]


def test_a_store_without_ttl_keeps_the_conversation_and_purge_frees_expired_ones(postgres_dsn: str) -> None:
    kept, gone = fresh(), fresh()
    with PostgresStorage(postgres_dsn, namespace=kept, ttl=60) as store:
        store.save_state(state(1))
    with PostgresStorage(postgres_dsn, namespace=kept) as store:  # no ttl: the save clears the expiry
        store.save_state(state(2))
    with PostgresStorage(postgres_dsn, namespace=gone, ttl=60) as store:
        store.save_state(state(1, 1), [page(1)])
        sql(postgres_dsn, "UPDATE memci_expiry SET expires_at = now() - interval '1 second' WHERE namespace = %s", gone)
        assert store.purge_expired() >= 1
        assert store.purge_expired() == 0
    assert sql(postgres_dsn, "SELECT count(*) FROM memci_state WHERE namespace = %s", gone) == [(0,)]
    assert sql(postgres_dsn, "SELECT count(*) FROM memci_pages WHERE namespace = %s", gone) == [(0,)]
    with PostgresStorage(postgres_dsn, namespace=kept) as store:
        assert store.load_state() == state(2)


def test_the_tables_hold_json_text_and_a_schema_version(postgres_dsn: str) -> None:
    name = fresh()
    with PostgresStorage(postgres_dsn, namespace=name) as store:
        store.save_state(state(1, 1), [page(1)])
    ((body,),) = sql(postgres_dsn, "SELECT body FROM memci_pages WHERE namespace = %s", name)
    assert body.startswith('{"index":1,"messages"')
    assert "東京" in body  # UTF-8 text, not \\u escapes
    assert sql(postgres_dsn, "SELECT version FROM memci_schema") == [(SCHEMA_VERSION,)]
    assert sql(postgres_dsn, "SELECT revision, pages_through FROM memci_state WHERE namespace = %s", name) == [(1, 1)]


def tails(dsn: str, namespace: str) -> list[tuple[Any, ...]]:
    return sql(
        dsn, "SELECT key, start, length(text) FROM memci_state_tails WHERE namespace = %s ORDER BY start", namespace
    )


def test_a_long_text_that_grows_is_appended_and_loads_whole(postgres_dsn: str) -> None:
    name, rows = fresh(), "1,0,0,1,2,unrecalled;" * 300  # a state's dropped entries: 6,600 characters
    with PostgresStorage(postgres_dsn, namespace=name) as store:
        store.save_state(state(1, dropped=rows))
        store.save_state(state(2, dropped=rows + "2,0,0,1,2,lru"))  # grown at its end: the end appended
        store.save_state(state(3, dropped=rows + "2,0,0,1,2,lru"))  # unchanged: nothing written
        assert tails(postgres_dsn, name) == [("dropped", 0, len(rows)), ("dropped", len(rows), 13)]
        ((body,),) = sql(postgres_dsn, "SELECT body FROM memci_state WHERE namespace = %s", name)
        assert '"dropped":""' in body  # the state row holds the place, not the text
        assert store.load_state() == state(3, dropped=rows + "2,0,0,1,2,lru")
        store.save_state(state(4, dropped="x" + rows))  # changed before its end: rewritten as one part
        assert tails(postgres_dsn, name) == [("dropped", 0, len(rows) + 1)]
        store.save_state(state(5, dropped="short"))  # no longer long: back in the state row
        assert tails(postgres_dsn, name) == []
    with PostgresStorage(postgres_dsn, namespace=name) as store:
        assert store.load_state() == state(5, dropped="short")


def test_writers_taking_turns_on_a_growing_text_never_append_to_anothers(postgres_dsn: str) -> None:
    name, rows = fresh(), "r;" * 3000
    with PostgresStorage(postgres_dsn, namespace=name) as a, PostgresStorage(postgres_dsn, namespace=name) as b:
        a.save_state(state(1, log=rows))
        b.load_state()
        b.save_state(state(2, log=rows + "b;"))
        with pytest.raises(ConflictError):
            a.save_state(state(2, log=rows + "a;"))
        assert a.load_state() == state(2, log=rows + "b;")
        a.save_state(state(3, log=rows + "b;a;"))
        # b's unversioned save replaces the state with a shorter text: a's copy no longer is what is stored
        b.save_state({"version": 1, "pages_through": 0, "log": rows})
        a.save_state(state(1, log=rows + "b;a;z;"))  # extends a's copy, but over b's state: rewritten whole
        assert b.load_state() == state(1, log=rows + "b;a;z;")
        assert tails(postgres_dsn, name) == [("log", 0, len(rows) + 6)]


def test_a_schema_1_database_is_upgraded_and_its_states_load(postgres_dsn: str) -> None:
    import psycopg

    dbname = f"old_{uuid.uuid4().hex[:12]}"
    sql(postgres_dsn, f"CREATE DATABASE {dbname}")
    old = postgres_dsn.replace("dbname=postgres", f"dbname={dbname}")
    with psycopg.connect(old, autocommit=True) as conn:  # the tables and a state as memci schema 1 wrote them
        for statement in postgres._SCHEMA[:4]:
            conn.execute(statement)  # type: ignore[arg-type]  # our own statements
        conn.execute("INSERT INTO memci_schema VALUES (1)")
        conn.execute(
            "INSERT INTO memci_state VALUES ('c', 1, 0, 0, %s)",
            [
                '{"version":1,"revision":1,"pages_through":0,"dropped":"'
                + "r;" * 3000
                + '","memci_commit":["'
                + "a" * 24
                + '"]}'
            ],
        )
    with PostgresStorage(old, namespace="c") as store:
        assert store.load_state() == state(1, 0, dropped="r;" * 3000)
        store.save_state(state(2, 0, dropped="r;" * 3001))  # the old state row holds it: rewritten, not appended
        assert sql(old, "SELECT version FROM memci_schema") == [(SCHEMA_VERSION,)]
        assert tails(old, "c") == [("dropped", 0, 6002)]
        assert store.load_state() == state(2, 0, dropped="r;" * 3001)


def test_a_newer_schema_and_damaged_rows_are_refused(postgres_dsn: str) -> None:
    name = fresh()
    with PostgresStorage(postgres_dsn, namespace=name) as store:
        store.save_state(state(1, 1), [page(1)])
        sql(postgres_dsn, "UPDATE memci_pages SET body = '{oops' WHERE namespace = %s", name)
        sql(postgres_dsn, "UPDATE memci_state SET body = '[]' WHERE namespace = %s", name)
        with pytest.raises(StorageError, match=r"\[test-[0-9a-f]+\]: page 1: corrupt"):
            store.get_page(1)
        with pytest.raises(StorageError, match="state: corrupt"):
            store.load_state()
    sql(postgres_dsn, "UPDATE memci_schema SET version = 99")
    try:
        with pytest.raises(StorageError, match="newer memci"):
            PostgresStorage(postgres_dsn, namespace=name)
    finally:
        sql(postgres_dsn, "UPDATE memci_schema SET version = %s", SCHEMA_VERSION)


@pytest.mark.parametrize(
    ("target", "options", "words"),
    [
        ("host=127.0.0.1 dbname=x", {"namespace": 3}, "namespace must be a str"),
        ("host=127.0.0.1 dbname=x", {"namespace": "a\x00b"}, "without NUL"),
        ("host=127.0.0.1 dbname=x", {"ttl": 0}, "ttl must be None, a timedelta or a number of seconds > 0"),
        ("host=127.0.0.1 dbname=x", {"ttl": float("nan")}, "ttl must be"),
        ("host=127.0.0.1 dbname=x", {"ttl": "1h"}, "ttl must be"),
        ("host=127.0.0.1 dbname=x", {"timeout": True}, "timeout must be a number of seconds > 0"),
        ("host=127.0.0.1 dbname=x", {"pool_size": 0}, "pool_size must be an int from 1 to 1000"),
        (42, {}, "target must be a PostgreSQL connection string"),
        ("postgresql://user:s3cret@[bad", {}, "dsn is not a PostgreSQL connection string"),
        ("host=x password=s3cret dbname", {}, "dsn is not a PostgreSQL connection string"),
    ],
)
def test_bad_arguments_are_storage_errors_that_never_show_a_password(
    target: Any, options: dict[str, Any], words: str
) -> None:
    for kind in (PostgresStorage, AsyncPostgresStorage):
        with pytest.raises(StorageError, match=words) as caught:
            kind(target, **options)
        assert "s3cret" not in str(caught.value)


def test_an_unreachable_server_is_a_storage_error_at_once() -> None:
    from factories import free_port

    with pytest.raises(StorageError, match="cannot reach PostgreSQL") as caught:
        PostgresStorage(f"postgresql://memci:s3cret@127.0.0.1:{free_port()}/x", timeout=5)
    assert "s3cret" not in str(caught.value)


def test_a_store_pickles_by_its_connection_string(postgres_dsn: str) -> None:
    import pickle

    name = fresh()
    with PostgresStorage(postgres_dsn, namespace=name, ttl=600) as store:
        store.save_state(state(1))
        twin = pickle.loads(pickle.dumps(store))
    with twin:
        assert twin.load_state() == state(1)
        assert (twin.namespace, twin.ttl) == (name, 600.0)


async def test_async_namespaces_expiry_and_bulk_reads(postgres_dsn: str) -> None:
    name = fresh()
    async with AsyncPostgresStorage(postgres_dsn, namespace=name, ttl=60) as store:
        await store.save_state(state(1, 2), [page(1), page(2)])
        assert await store.get_pages([2, 1, 9]) == {1: page(1), 2: page(2)}
        async with AsyncPostgresStorage(postgres_dsn, namespace=fresh()) as other:
            assert await other.load_state() is None
        with PostgresStorage(postgres_dsn, namespace=name) as sync:  # sync and async on one namespace
            assert sync.load_state() == state(1, 2)
            with pytest.raises(ConflictError):
                sync.save_state(state(1, 2))
        sql(postgres_dsn, "UPDATE memci_expiry SET expires_at = now() - interval '1 second' WHERE namespace = %s", name)
        assert await store.load_state() is None
        assert await store.purge_expired() >= 1


# ---- eight processes on one conversation ----------------------------------------------------------

TURNS = textwrap.dedent(
    """
    import sys
    import memci

    dsn, namespace, name, turns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = memci.PostgresStorage(dsn, namespace=namespace, pool_size=1)
    conflicts = 0
    for turn in range(turns):
        while True:  # one turn: a page and the state that names it, over the revision loaded
            loaded = store.load_state() or {"version": 1, "turns": []}
            revision, mark = loaded.get("revision", 0) + 1, loaded.get("pages_through", 0) + 1
            written = {"index": mark, "messages": [{"role": "user", "content": f"{name} {turn}"}],
                       "summary": name, "entry_summaries": [], "archived_round": revision}
            try:
                store.save_state({**loaded, "revision": revision, "pages_through": mark,
                                  "turns": [*loaded["turns"], f"{name} {turn}"]}, [written])
                break
            except memci.ConflictError:
                conflicts += 1
    print(conflicts)
    """
)


def test_eight_processes_on_one_namespace_lose_no_turn(postgres_dsn: str) -> None:
    namespace, turns, names = fresh(), 200, [f"w{i}" for i in range(8)]
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", TURNS, postgres_dsn, namespace, name, str(turns)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    # A racer exits non-zero on any error but ConflictError, which it answers by reloading.
    results = [r.communicate(timeout=600) for r in racers]
    assert [r.returncode for r in racers] == [0] * 8, [err[-2000:] for _, err in results]
    conflicts = sum(int(out) for out, _ in results)
    assert conflicts > 0, "eight writers on one revision raced at least once"
    with PostgresStorage(postgres_dsn, namespace=namespace) as store:
        final = store.load_state()
        assert final is not None
        acknowledged = sorted(f"{name} {turn}" for name in names for turn in range(turns))
        assert sorted(final["turns"]) == acknowledged  # every acknowledged turn, once
        assert final["revision"] == final["pages_through"] == 8 * turns
        pages = store.get_pages(range(1, 8 * turns + 1))
        # Page n was written by the turn that made revision n: the state's n-th turn.
        assert [pages[n]["messages"][0]["content"] for n in range(1, 8 * turns + 1)] == final["turns"]
