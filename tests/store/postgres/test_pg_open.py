"""Opening a PostgreSQL store: wrong URLs, unreachable servers, foreign or newer
schemas, options in the URL, and passwords kept out of every message."""

from __future__ import annotations

import time

import psycopg
import pytest
from click.testing import CliRunner
from pg_records import HeldConnections

from memorist import ConfigurationError, CorruptStoreError, Memory, StoreError
from memorist.cli import cli
from memorist.model import MemoryRecord, Scope
from memorist.store import open_store
from memorist.store.base import ScopeFilter
from memorist.store.postgres import PostgresStore

SECRET = "s3cret-Pa55"


def with_query(url: str, extra: str) -> str:
    return url + ("&" if "?" in url else "?") + extra


def database_of(url: str, name: str) -> str:
    """``url`` with another database name (pgserver's URLs: ``postgresql://postgres:@/db?host=...``)."""
    head, _, rest = url.partition("@/")
    return f"{head}@/{name}?{rest.partition('?')[2]}"


def assert_no_secret(exc: BaseException) -> None:
    seen = exc
    while seen is not None:
        assert SECRET not in str(seen)
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://memorist:{SECRET}@127.0.0.1:1/memories",  # nothing listens on port 1
        f"postgres://memorist:{SECRET}@/memories?host=/nonexistent-memorist-socket-dir",
        f"postgresql://memorist@127.0.0.1:1/memories?password={SECRET}",
    ],
)
def test_an_unreachable_server_is_a_store_error_without_the_password(url: str) -> None:
    start = time.monotonic()
    with pytest.raises(StoreError) as info:
        open_store(url)
    assert time.monotonic() - start < 15
    assert "cannot open" in str(info.value)
    assert_no_secret(info.value)
    with pytest.raises(StoreError) as info:
        Memory(url, embedder="hashing")
    assert_no_secret(info.value)


def test_the_cli_reports_an_unreachable_server_without_the_password() -> None:
    url = f"postgresql://memorist:{SECRET}@127.0.0.1:1/memories"
    result = CliRunner().invoke(cli, ["--db", url, "--embedder", "hashing", "list", "--user", "alex"])
    assert result.exit_code != 0
    assert "cannot open postgresql://memorist:***@127.0.0.1:1/memories" in result.output
    assert SECRET not in result.output


def test_a_url_with_no_host_names_the_socket_in_its_query(pg_url: str) -> None:
    """``postgresql:///db?host=/run/postgresql&user=...``, libpq's usual local form:
    the empty host part is kept (it was dropped, and libpq refused the URL)."""
    database, query = pg_url.partition("@/")[2].partition("?")[::2]
    url = f"postgresql:///{database}?{query}&user=postgres"
    with Memory(url, embedder="hashing") as m:
        m.add("I like tea", user_id="u", infer=False)
    result = CliRunner().invoke(cli, ["--db", url, "--embedder", "hashing", "list", "--user", "u"])
    assert result.exit_code == 0 and "I like tea" in result.output, result.output


@pytest.mark.parametrize("url", [f"postgresql://postgres:{SECRET}@[::1/db", f"postgresql://postgres:{SECRET}@[fe80::zz]:5432/db"])
def test_a_malformed_url_is_a_configuration_error_without_the_password(url: str) -> None:
    with pytest.raises(ConfigurationError, match="not a valid PostgreSQL URL") as caught:
        Memory(url, embedder="hashing")
    assert SECRET not in str(caught.value)
    result = CliRunner().invoke(cli, ["--db", url, "list", "--user", "u"])
    assert result.exit_code != 0 and "not a valid PostgreSQL URL" in result.output and SECRET not in result.output
    assert "Traceback" not in result.output


def test_a_database_that_does_not_exist(pg_url: str) -> None:
    with pytest.raises(StoreError, match="memorist_nowhere"):
        open_store(database_of(pg_url, "memorist_nowhere"))


def test_an_unknown_connection_parameter_is_libpq_s_error(pg_url: str) -> None:
    with pytest.raises(StoreError, match="frobnicate"):
        open_store(with_query(pg_url, "frobnicate=1"))


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ("pool_size=0", "pool_size"),
        ("pool_size=many", "pool_size"),
        ("pool_min=3&pool_size=2", "pool_min"),
        ("schema=bad-name", "schema"),
        ("lock_timeout=-1", "lock_timeout"),
        ("pool_timeout=0", "pool_timeout"),
        ("pool_timeout=soon", "pool_timeout"),
    ],
)
def test_bad_options_in_the_url_are_configuration_errors(pg_url: str, extra: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        open_store(with_query(pg_url, extra))


def test_options_in_the_url_are_taken_and_hidden_from_libpq(pg_url: str) -> None:
    store = open_store(with_query(pg_url, "pool_size=3&pool_min=2&lock_timeout=5&pool_timeout=7&schema=memorist_other"))
    try:
        assert isinstance(store, PostgresStore)
        assert (store.pool_size, store.lock_timeout, store.pool_timeout, store.schema) == (3, 5.0, 7.0, "memorist_other")
        assert store.schema_version() >= 1
    finally:
        store.close()
    with pytest.raises(ConfigurationError):
        open_store(pg_url, pool_size=0)


def test_the_password_stays_out_of_labels_stats_and_errors(pg_url: str) -> None:
    # pgserver trusts local connections: any password is accepted, and must show nowhere.
    url = pg_url.replace("postgres:@", f"postgres:{SECRET}@")
    m = Memory(url, embedder="hashing")
    m.add("Likes tea", user_id="alex", infer=False)
    shown = [repr(m), str(m.stats()), m.store.path]  # type: ignore[attr-defined]
    m.close()
    for text in shown:
        assert SECRET not in text and "postgres:***@" in text
    with pytest.raises(StoreError) as info:
        m.store.get("x")
    assert "closed" in str(info.value)
    assert_no_secret(info.value)


def test_schemas_keep_two_stores_apart_in_one_database(pg_url: str) -> None:
    a = Memory(with_query(pg_url, "schema=team_a"), embedder="hashing")
    b = Memory(with_query(pg_url, "schema=team_b"), embedder="hashing")
    try:
        a.add("Likes tea", user_id="alex", infer=False)
        assert [r["memory"] for r in a.get_all(user_id="alex")["results"]] == ["Likes tea"]
        assert b.get_all(user_id="alex")["results"] == []
        assert b.search("tea", user_id="alex")["results"] == []
    finally:
        a.close()
        b.close()


def test_a_schema_holding_someone_elses_tables_is_refused_and_left_alone(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA memorist")
        conn.execute("CREATE TABLE memorist.invoices (id int, total numeric)")
        conn.execute("INSERT INTO memorist.invoices VALUES (1, 9.5)")
    with pytest.raises(CorruptStoreError, match="not a Memorist store"):
        open_store(pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT total FROM memorist.invoices").fetchall() == [(9.5,)]
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'memorist'").fetchone()[0] == 1


def test_a_schema_whose_meta_table_is_someone_elses_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA memorist")
        conn.execute("CREATE TABLE memorist.meta (name text, setting text)")
    with pytest.raises(CorruptStoreError, match="meta table that is not Memorist's"):
        open_store(pg_url)


def test_tables_of_other_schemas_are_none_of_memorists_business(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.events (id int)")  # Memorist has an events table too
    with Memory(pg_url, embedder="hashing") as m:
        m.add("Likes tea", user_id="alex", infer=False)
        assert len(m.events(user_id="alex")) == 2
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM public.events").fetchone()[0] == 0


@pytest.mark.parametrize(("version", "match"), [
    ("99", "has schema version 99, newer than"),  # a store of a newer Memorist
    ("abc", "schema version 'abc' is not a number"),  # damage
])
def test_a_store_of_a_newer_memorist_or_a_version_that_is_no_number_is_refused(pg_url: str, version: str, match: str) -> None:
    open_store(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE memorist.meta SET value = %s WHERE key = 'schema_version'", (version,))
    with pytest.raises(CorruptStoreError, match=match):
        open_store(pg_url)


def test_a_database_without_pgvector_and_no_right_to_install_it(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE ROLE memorist_plain LOGIN")
        conn.execute("CREATE DATABASE memorist_plain_db OWNER memorist_plain TEMPLATE template0")
    url = database_of(pg_url, "memorist_plain_db").replace("postgres:@", "memorist_plain@")
    try:
        with pytest.raises(ConfigurationError, match="CREATE EXTENSION vector"):
            open_store(url)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP DATABASE memorist_plain_db WITH (FORCE)")
            conn.execute("DROP ROLE memorist_plain")


def test_a_dropped_schema_under_an_open_store_is_an_memorist_error(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA memorist CASCADE")
        with pytest.raises(StoreError, match="memorist"):
            store.get("x")
        with pytest.raises(StoreError):
            store.list(ScopeFilter("", "alex"))
        with pytest.raises(StoreError), store.transaction() as batch:
            batch.add(MemoryRecord(id="a", scope=Scope(user_id="alex"), text="x", created_at=1.0, content_hash="h"), None)
    finally:
        store.close()


def test_check_and_backup_refuse_postgresql(pg_url: str) -> None:
    runner = CliRunner()
    for command in (["check"], ["backup", "/tmp/never.db"]):
        result = runner.invoke(cli, ["--db", pg_url, *command])
        assert result.exit_code != 0
        assert "pg_dump" in result.output or "PostgreSQL" in result.output
    with Memory(pg_url, embedder="hashing") as m, pytest.raises(ConfigurationError, match="pg_dump"):
        m.check()


def test_close_is_idempotent_and_final(pg_url: str) -> None:
    store = open_store(pg_url)
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"), store.transaction():
        pass
    with pytest.raises(StoreError, match="closed"):
        store.stats()


def test_a_database_error_while_writing_retrievals_is_a_store_error(pg_url: str) -> None:
    """The buffered retrievals' write (flush) says what failed as every store call does,
    never with the driver's own exception."""
    m = Memory(pg_url, embedder="hashing")
    mid = m.add("I drink green tea", user_id="u", infer=False)["results"][0]["id"]
    assert m.search("green tea", user_id="u")["results"]
    assert m.store.buffered_uses(mid) == 1
    m.store._pool.close()  # the database out of reach from here on
    with pytest.raises(StoreError, match="is closed"):  # PoolClosed, said as a store error
        m.store.flush()
    m.close()


def test_a_call_waits_for_a_busy_pool_but_fails_within_a_second_when_the_server_is_down(pg_url: str, tmp_path) -> None:
    """With the server down every call waited the pool's whole timeout (30 s, not
    configurable) and then blamed the pool; the reason went only to the log. Now a
    call that finds no connection asks the server once, on a connection of its own:
    down, it fails with the server's words; up (every connection busy), it waits."""
    store = open_store(pg_url, pool_size=1, pool_timeout=10)
    assert isinstance(store, PostgresStore)
    try:
        held = HeldConnections(store)
        held.release(after=1.6)
        began = time.monotonic()
        assert store.schema_version() >= 1  # busy, not down: it waited for the connection
        assert 1.5 < time.monotonic() - began < 8
        held.join()

        held = HeldConnections(store)
        real = store._conninfo
        store._conninfo = f"host={tmp_path}/nowhere dbname=x"  # the server gone: no socket there
        began = time.monotonic()
        with pytest.raises(StoreError, match="the server does not answer"):
            store.schema_version()
        assert time.monotonic() - began < 5
        store._conninfo = real
        held.release()
        held.join()
    finally:
        store.close()


def test_a_server_at_its_connection_limit_is_busy_not_down(pg_url: str) -> None:
    """The probe of a call that waited a second is refused by a server at its limit
    ("too many connections"): that server answers, so the call waits for the pool
    instead of failing as if the server were down."""
    import uuid

    role, name = f"lim_{uuid.uuid4().hex[:8]}", f"lim_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 2")
        conn.execute(f"CREATE DATABASE {name} OWNER {role}")
    with psycopg.connect(database_of(pg_url, name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    head, _, rest = database_of(pg_url, name).partition("://")
    url = with_query(f"{head}://{role}@{rest.partition('@')[2]}", "pool_size=2&pool_min=2&pool_timeout=10")
    store = open_store(url)
    try:
        held = HeldConnections(store, 2)
        held.release(after=2.5)
        began = time.monotonic()
        assert store.schema_version() >= 1
        assert 2 < time.monotonic() - began < 9
        held.join()
    finally:
        store.close()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
            conn.execute(f"DROP ROLE {role}")
