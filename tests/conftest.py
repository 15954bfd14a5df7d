"""Shared fixtures: a hermetic environment, no network, a throwaway Memory, a real
PostgreSQL server, and ``backend``: the same test on SQLite and on PostgreSQL."""

from __future__ import annotations

import ipaddress
import itertools
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

# Settings Memorist reads from the environment when a Memory is built. Tests that
# need one set it themselves with monkeypatch.
_MEMORIST_ENV = (
    "MEMORIST_DB",
    "MEMORIST_EMBEDDER",
    "MEMORIST_DECAY_DAYS",
    "MEMORY_DECAY_DAYS",
    "MEMORIST_TENANT",
    "MEMORIST_BUSY_TIMEOUT",
    "MEMORIST_POLICY",
    "MEMORIST_MAINTENANCE_LOG",
    # LLM providers: no test may pick up a developer's real key or endpoint.
    "MEMORIST_LLM",
    "MEMORIST_LLM_BASE_URL",
    "MEMORIST_LLM_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "GEMINI_API_KEY",
    "GEMINI_MODEL",
    "GEMINI_BASE_URL",
    "ACE_LLM_TEMPERATURE",
    "ACE_CURATOR_USE_LLM",
    # The chat service's memory service (memorist chat).
    "MEMORY_MANAGEMENT_URL",
    "MEMORY_API_KEY",
    # LangGraph's tracing (LangSmith): never on in a test.
    "LANGSMITH_TRACING",
    "LANGCHAIN_TRACING_V2",
    "LANGSMITH_API_KEY",
    # The playbooks' and the learning loop's settings (memorist.config).
    "ACE_CURATOR_MAX_NEW",
    "TRAJECTORY_RETENTION_DAYS",
    "TRAJECTORY_SAMPLE_RATE",
    "TRAJECTORY_ALWAYS_STORE_FAILURES",
    "PLAYBOOK_VERSION_KEEP_LATEST",
    "PLAYBOOK_VERSION_KEEP_ALL_MAJOR",
    "PLAYBOOK_VERSION_KEEP_DAYS",
)


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every MEMORIST_ setting too, the ones added after this list included (not the
    # test suite's own: MEMORIST_TEST_*, MEMORIST_FUZZ_*).
    settings = (n for n in os.environ if n.startswith("MEMORIST_") and not n.startswith(("MEMORIST_TEST_", "MEMORIST_FUZZ_")))
    for name in {*_MEMORIST_ENV, *settings}:
        monkeypatch.delenv(name, raising=False)


def _is_local(address: object) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False  # a host name other than localhost: would need DNS
    return False


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch):
    """Any connection to a non-loopback address fails the test, even if the code
    under test swallows the error."""
    attempts: list[object] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guard(real):
        def connect(self, address, *args, **kwargs):
            if not _is_local(address):
                attempts.append(address)
                raise ConnectionRefusedError(f"tests may not use the network (tried {address!r})")
            return real(self, address, *args, **kwargs)

        return connect

    monkeypatch.setattr(socket.socket, "connect", guard(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guard(real_connect_ex))
    yield
    if attempts:
        pytest.fail(f"test tried to reach the network: {attempts!r}")


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "m.db")


@pytest.fixture
def between_transactions(monkeypatch):
    """``install(store, n, action)``: ``action`` runs as the store's ``n``-th
    transaction from now opens (another caller writing between two transactions of
    one call); returns the list of the transactions opened, itself growing."""

    def install(store, n, action):
        opened = store.transaction
        calls: list[int] = []

        def transaction(*args, **kwargs):
            calls.append(len(calls))
            if len(calls) == n:
                action()
            return opened(*args, **kwargs)

        monkeypatch.setattr(store, "transaction", transaction)
        return calls

    return install


@pytest.fixture
def another_caller_in_filter_checks(monkeypatch):
    """``install(memory)``: the first filter check of a search runs another caller (a
    listing of user ``other``, then a write for them) and waits for it to finish. A
    search that holds the store (its lock, its pooled connection) meanwhile keeps that
    caller waiting: the check then fails. Returns what the caller did."""

    def install(memory):
        from memorist.policies import filters

        checked = filters.Filter.__call__
        served: list[str] = []

        def other_caller() -> None:
            served.append(memory.get_all(user_id="other", limit=1)["results"][0]["memory"])
            memory.add("Written meanwhile", user_id="other", infer=False)
            served.append("written")

        def check(self, record):
            if not served:
                other = threading.Thread(target=other_caller)
                other.start()
                other.join(10)
                assert served[1:] == ["written"], "the other caller waited on the search"
            return checked(self, record)

        monkeypatch.setattr(filters.Filter, "__call__", check)
        return served

    return install


@pytest.fixture
def memory(db_path):
    from memorist import Memory

    m = Memory(db_path, embedder="hashing")
    yield m
    m.close()


# Both storage backends -------------------------------------------------------------------
# The capability suites (tests/capabilities: facts' Memory API on both backends,
# playbooks, learning, tiers, minutes) run each test that opens a Memory on SQLite and on
# PostgreSQL, as the store contract runs on both (tests/store/contract): the engine
# promises the same behaviour on each. A test asks for ``backend`` (or for a suite fixture built on it:
# ``mem``, ``opened``, ``m`` ...) and is collected twice, ``[sqlite]`` and
# ``[postgresql]``. A test about SQLite itself (a file path, the maintenance log beside the
# file, the CLI or a subprocess on a file) is marked ``@pytest.mark.sqlite_only("why")``:
# with ``backend`` it is collected for SQLite alone; without, the mark says why it never
# runs on PostgreSQL.
BACKENDS = ("sqlite", "postgresql")


class Backend:
    """The stores of one test on one backend.

    ``name`` is ``"sqlite"`` or ``"postgresql"``; ``target`` is the path or URL of a
    fresh, empty store: a file in the test's ``tmp_path``, or the test's own database
    (``pg_url``). Open it as often as needed, as other processes would. ``fresh()`` is
    the target of another empty store: another file, or another schema (the ``schema``
    option) of the same database.
    """

    def __init__(self, name: str, target: str, folder: Path) -> None:
        self.name = name
        self.target = target
        self._folder = folder
        self._stores = itertools.count(2)

    def fresh(self) -> str:
        n = next(self._stores)
        if self.name == "sqlite":
            return str(self._folder / f"store-{n}.db")
        return self.target + ("&" if "?" in self.target else "?") + f"schema=memorist_{n}"

    def __repr__(self) -> str:
        return f"Backend({self.name!r}, {self.target!r})"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sqlite_only(reason): runs on SQLite alone, though its suite runs on both backends (the reason says why)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    only = metafunc.definition.get_closest_marker("sqlite_only")
    if only is not None and not (only.args and isinstance(only.args[0], str) and only.args[0].strip()):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: sqlite_only needs a reason")
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", ["sqlite"] if only else list(BACKENDS), indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """This test's stores on one backend (parametrised by ``pytest_generate_tests``)."""
    if request.param == "postgresql":
        return Backend("postgresql", request.getfixturevalue("pg_url"), tmp_path)
    return Backend("sqlite", str(tmp_path / "store.db"), tmp_path)


# PostgreSQL ------------------------------------------------------------------------------
# One real server per test process (each xdist worker starts its own), started by
# pgserver on first use. Every test that asks for ``pg_url`` gets a database of its
# own, empty but for pgvector. Databases are reused: after a test, its connections
# are ended and everything it created is dropped (a database that cannot be cleaned
# is dropped whole), which costs a tenth of creating one. There is no skip: if the
# server cannot start, the tests that need it fail, because CI must run them.
_PG_TEMPLATE = "memorist_template"
_pg_databases = itertools.count(1)
_pg_free: list[str] = []


@pytest.fixture(scope="session")
def _pg_server():
    import shutil
    import tempfile
    import warnings

    import psycopg

    with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR in CI containers
        warnings.simplefilter("ignore")
        import pgserver

    # Not under pytest's temporary folder: each pytest session makes pytest-of-<user>
    # private to its user again, and the server runs as another user when started by
    # root (pgserver's rule).
    folder = tempfile.mkdtemp(prefix="memorist-pg-")
    server = pgserver.get_server(f"{folder}/data", cleanup_mode="stop")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        # A throwaway server: durability buys nothing and costs every commit a sync.
        for setting in ("fsync = off", "synchronous_commit = off", "full_page_writes = off"):
            conn.execute(f"ALTER SYSTEM SET {setting}")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute(f"CREATE DATABASE {_PG_TEMPLATE}")
    with psycopg.connect(server.get_uri(_PG_TEMPLATE), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    yield server
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


def _pg_clean(server, name: str) -> bool:
    """Bring database ``name`` back to its template's state; False if it cannot be."""
    import psycopg

    try:
        with psycopg.connect(server.get_uri(name), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            schemas = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname NOT IN ('public', 'information_schema') "
                "AND nspname NOT LIKE 'pg\\_%'"
            ).fetchall()
            for (schema,) in schemas:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
            for (table,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall():
                conn.execute(f'DROP TABLE public."{table}" CASCADE')
            return conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()[0] == 1
    except psycopg.Error:
        return False


@pytest.fixture
def pg_url(_pg_server) -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database (pgvector installed)."""
    import psycopg

    if _pg_free:
        name = _pg_free.pop()
    else:
        name = f"memorist_test_{next(_pg_databases)}"
        with psycopg.connect(_pg_server.get_uri(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {_PG_TEMPLATE}")
    yield _pg_server.get_uri(name)
    if _pg_clean(_pg_server, name):
        _pg_free.append(name)
    else:
        with psycopg.connect(_pg_server.get_uri(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
