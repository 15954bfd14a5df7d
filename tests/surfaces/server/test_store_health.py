"""A damaged store is not served as healthy: the service checks the store when it
starts and whenever a request meets damage; /healthz (GET and HEAD) says so with a
503, reads go on, and no write goes into the damaged file."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memorist import Memory
from memorist.server import create_app
from service_helpers import UNLIMITED

PAGE = 4096


@pytest.fixture
def built(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    with Memory(str(path), embedder="hashing") as m:
        for i in range(60):
            m.add(f"Fact number {i} about tea and walks", user_id=f"u{i % 3}", infer=False)
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _damage_table(path: Path, table: str) -> None:
    with sqlite3.connect(path) as c:
        page = c.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    with open(path, "r+b") as f:
        f.seek((page - 1) * PAGE)
        f.write(b"\xff" * PAGE)


def test_a_healthy_store_is_healthy_and_healthz_answers_head(built: Path) -> None:
    app = create_app(str(built), embedder="hashing", limits=UNLIMITED)
    with TestClient(app) as client:
        r = client.get("/healthz")
        assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["store"] == {"healthy": True}
        head = client.head("/healthz")
        assert head.status_code == 200 and head.content == b""


def test_a_store_damaged_before_the_start_takes_no_write(built: Path) -> None:
    _damage_table(built, "memories")
    before = _digest(built)
    app = create_app(str(built), embedder="hashing", limits=UNLIMITED)
    with TestClient(app) as client:
        r = client.get("/healthz")
        assert r.status_code == 503 and r.json()["status"] == "damaged"
        assert "memorist check" in r.json()["store"]["problem"]
        assert client.head("/healthz").status_code == 503
        added = client.post("/api/memories/", json={"messages": "A new fact", "user_id": "u1", "infer": False})
        assert added.status_code == 503  # the cause is in the server's log, as for every store failure
    app.state.service.close()
    assert _digest(built) == before  # nothing was written into the damaged file, not even the keys' table


def test_damage_met_by_a_request_stops_the_writes(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memorist import CorruptStoreError

    app = create_app(str(built), embedder="hashing", limits=UNLIMITED)
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        memory = app.state.service.tenants.get("")

        def damaged(*args, **kwargs):
            raise CorruptStoreError(f"{built} is damaged (database disk image is malformed; during list): run `memorist check`")

        monkeypatch.setattr(memory, "get_all", damaged)
        assert client.get("/api/memories/", params={"user_id": "u1"}).status_code == 503
        health = client.get("/healthz")
        assert health.status_code == 503 and "malformed" in health.json()["store"]["problem"]
        monkeypatch.undo()
        events = len(memory.store.events(None))
        added = client.post("/api/memories/", json={"messages": "A new fact", "user_id": "u1", "infer": False})
        assert added.status_code == 503
        assert len(memory.store.events(None)) == events  # the write was refused, not half made
        assert client.get("/api/memories/", params={"user_id": "u1"}).status_code == 200  # reads go on
    app.state.service.close()


def test_a_copy_restored_from_backup_is_healthy_again(built: Path, tmp_path: Path) -> None:
    backup = tmp_path / "backup.db"
    shutil.copy(built, backup)
    _damage_table(built, "memories")
    shutil.copy(backup, built)
    app = create_app(str(built), embedder="hashing", limits=UNLIMITED)
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert client.post("/api/memories/", json={"messages": "Back again", "user_id": "u1", "infer": False}).status_code == 200
    app.state.service.close()


def test_memorist_serve_writes_nothing_into_a_damaged_store(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command too: it read its keys through a KeyStore that created their table in
    the damaged file before the app checked it (bench/damage.py found the file changed)."""
    import uvicorn
    from click.testing import CliRunner

    from memorist.cli import cli

    served: list[int] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.append(kw["port"]))
    _damage_table(built, "memories")
    before = _digest(built)
    r = CliRunner().invoke(cli, ["--db", str(built), "--embedder", "hashing", "serve", "--port", "7001"])
    assert r.exit_code == 0 and served == [7001], r.output
    assert _digest(built) == before
    assert not Path(f"{built}-wal").exists() or Path(f"{built}-wal").stat().st_size == 0
    # Refusing a non-loopback host on a store without keys creates no table either.
    r = CliRunner().invoke(cli, ["--db", str(built), "--embedder", "hashing", "serve", "--host", "0.0.0.0"])
    assert r.exit_code == 1 and "refusing to serve" in r.stderr
    assert _digest(built) == before


def test_a_store_whose_vectors_only_are_missing_is_told_to_reindex_not_to_restore(built: Path) -> None:
    """Search indexes are rebuilt from the memories: a backup is no repair for them."""
    with sqlite3.connect(built) as c:
        c.execute("DELETE FROM embeddings WHERE memory_rowid IN (SELECT rowid FROM memories LIMIT 5)")
    app = create_app(str(built), embedder="hashing", limits=UNLIMITED)
    with TestClient(app) as client:
        problem = client.get("/healthz").json()["store"]["problem"]
    assert problem.startswith("the store's search indexes are damaged (active memories without a vector")
    assert "memorist reindex --embedder" in problem and "backup" not in problem
