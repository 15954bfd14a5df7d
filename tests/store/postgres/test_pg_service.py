"""The memory service on PostgreSQL: its API keys in the database, shared by every
`memorist serve` process on it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from click.testing import CliRunner

from memorist import Memory, NotFoundError
from memorist.cli import cli
from memorist.server import KeyStore, ServerLimits, create_app

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from service_helpers import bearer  # noqa: E402


def test_keys_live_in_the_database_and_every_key_store_sees_them(pg_url: str) -> None:
    url = pg_url.replace("postgres:@", "postgres:hunter2@")
    with KeyStore(url) as one, KeyStore(url) as two:
        assert "hunter2" not in one.path and "***" in one.path
        key, record = one.create("acme", user_id="alice", label="ci")
        assert two.authenticate(key) == record
        assert [k.key_id for k in two.list()] == [record.key_id]
        assert two.revoke(record.key_id).revoked_at is not None
        assert one.authenticate(key) is None and not one.has_active_keys()
        with pytest.raises(NotFoundError):
            one.revoke("zzzzzzzz")
        fresh, _ = one.create("acme")
        assert two.authenticate(fresh) is not None
        two.flush_usage()
        assert one.get(fresh).last_used_at is not None
    with Memory(pg_url, embedder="hashing") as m:  # the keys sit beside the store's tables
        m.add("Likes tea", user_id="alice", infer=False)
        assert m.stats()["memories"] == 1


def test_memorist_keys_on_a_database(pg_url: str) -> None:
    runner = CliRunner()
    created = runner.invoke(cli, ["--db", pg_url, "keys", "create", "--tenant", "acme", "--user", "alex"])
    assert created.exit_code == 0, created.output
    listed = runner.invoke(cli, ["--db", pg_url, "--json", "keys", "list"])
    assert listed.exit_code == 0 and '"tenant_id": "acme"' in listed.output
    with KeyStore(pg_url) as keys:
        (record,) = keys.list()
    revoked = runner.invoke(cli, ["--db", pg_url, "keys", "revoke", record.key_id])
    assert revoked.exit_code == 0, revoked.output
    with KeyStore(pg_url) as keys:
        assert not keys.has_active_keys()


def test_two_apps_on_one_database_serve_the_same_memories(pg_url: str) -> None:
    with KeyStore(pg_url) as keys:
        key, _ = keys.create("acme", user_id="alex")
    limits = ServerLimits(rate_per_minute=0)
    apps = [create_app(pg_url, embedder="hashing", limits=limits, require_keys=True) for _ in range(2)]
    try:
        with TestClient(apps[0]) as a, TestClient(apps[1]) as b:
            r = a.post("/api/memories/", json={"messages": "I live in Oslo.", "user_id": "alex"}, headers=bearer(key))
            assert r.status_code == 200, r.text
            r = b.post("/api/memories/", json={"messages": "I live in Lisbon.", "user_id": "alex"}, headers=bearer(key))
            assert r.status_code == 200, r.text
            for client in (a, b):
                got = client.get("/api/memories/alex/", headers=bearer(key)).json()["results"]
                assert [m["memory"] for m in got] == ["Lives in Lisbon"]
                hits = client.post("/api/memories/search/", json={"query": "where does alex live", "user_id": "alex"}, headers=bearer(key))
                assert hits.json()["results"][0]["memory"] == "Lives in Lisbon"
            assert b.get("/api/memories/alex/").status_code == 401
    finally:
        for app in apps:
            app.state.service.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(url: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memorist", "--db", url, "--embedder", "hashing", "serve", "--port", str(port), "--no-access-log"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "MEMORY_"))},
    )
    return proc, f"http://127.0.0.1:{port}"


def wait_ready(proc: subprocess.Popen[str], base: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"memorist serve exited with {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    pytest.fail("memorist serve did not answer /healthz within 90 s")


def stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


def test_two_memorist_serve_processes_on_one_database(pg_url: str) -> None:
    url = pg_url.replace("postgres:@", "postgres:hunter2@")
    created = CliRunner().invoke(cli, ["--db", url, "keys", "create", "--tenant", "acme", "--user", "alex"])
    assert created.exit_code == 0, created.output
    key = next(word for word in created.output.split() if word.startswith("ek_"))
    servers = [serve(url) for _ in range(2)]
    outputs = []
    try:
        for proc, base in servers:
            wait_ready(proc, base)
        (_, one), (_, two) = servers
        added = httpx.post(f"{one}/api/memories/", json={"messages": "I love hiking", "infer": False}, headers=bearer(key), timeout=30)
        assert added.status_code == 200, added.text
        memory_id = added.json()["results"][0]["id"]
        got = httpx.get(f"{two}/api/memories/alex/", headers=bearer(key), timeout=30).json()["results"]
        assert [m["id"] for m in got] == [memory_id]
        gone = httpx.delete(f"{two}/api/memories/{memory_id}/", headers=bearer(key), timeout=30)
        assert gone.status_code == 200, gone.text
        assert httpx.get(f"{one}/api/memories/alex/", headers=bearer(key), timeout=30).json()["results"] == []
        # A key revoked from the command line stops working on both at once.
        with KeyStore(url) as keys:
            keys.revoke(key)
        for base in (one, two):
            assert httpx.get(f"{base}/api/memories/alex/", headers=bearer(key), timeout=30).status_code == 401
    finally:
        outputs = [stop(proc) for proc, _ in servers]
    for out in outputs:
        assert "API keys required" in out and "hunter2" not in out and "postgres:***@" in out


def test_healthz_says_unavailable_while_the_database_refuses_and_recovers_with_it(pg_url: str) -> None:
    """A database that stops answering (here: it refuses connections and ends the
    service's sessions, as a restart does) is a 503 "unavailable" from /healthz, not
    "ok"; once it answers again, so does the service, from its first request."""
    import psycopg

    database = pg_url.partition("@/")[2].partition("?")[0]
    admin = pg_url.replace(f"@/{database}?", "@/postgres?")
    app = create_app(pg_url, embedder="hashing", limits=ServerLimits(rate_per_minute=0))

    def refuse(refusing: bool) -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {database} ALLOW_CONNECTIONS {'false' if refusing else 'true'}")
            if refusing:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                             (database,))

    try:
        with TestClient(app) as client:
            assert client.post("/api/memories/", json={"messages": "I live in Oslo.", "user_id": "alex"}).status_code == 200
            assert client.get("/healthz").json()["status"] == "ok"
            refuse(True)
            try:
                down = client.get("/healthz")
                assert down.status_code == 503, down.text
                assert down.json()["status"] == "unavailable" and down.json()["store"]["healthy"] is False
                assert "the database does not answer" in down.json()["store"]["problem"]
                assert "postgres" not in down.json()["store"]["problem"]  # no address, user or password: it is public
            finally:
                refuse(False)
            assert client.get("/healthz").json()["status"] == "ok"
            # The pool's connections the server ended are replaced when taken: no request fails for them.
            for _ in range(6):
                assert client.get("/api/memories/alex/").status_code == 200
    finally:
        app.state.service.close()


def test_healthz_answers_ok_while_every_pooled_connection_is_busy(pg_url: str) -> None:
    """A pool busy with slow requests is a database that answers: 200, at once."""
    import threading

    url = pg_url + ("&" if "?" in pg_url else "?") + "pool_size=2"
    app = create_app(url, embedder="hashing", limits=ServerLimits(rate_per_minute=0))
    try:
        with TestClient(app) as client:
            store = app.state.service.tenants.get("").store
            taken = threading.Barrier(3)

            def slow_request() -> None:
                with store.connection() as conn:
                    taken.wait()
                    conn.execute("SELECT pg_sleep(3)")

            threads = [threading.Thread(target=slow_request) for _ in range(2)]
            for thread in threads:
                thread.start()
            taken.wait()
            started = time.monotonic()
            answer = client.get("/healthz")
            assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
            assert time.monotonic() - started < 1.5
            for thread in threads:
                thread.join()
    finally:
        app.state.service.close()
