"""The KeyStore, `memorist keys create|list|revoke`, and a store with keys that
`memorist check` still finds healthy."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import Memory
from memorist.cli import cli
from memorist.errors import CorruptStoreError, NotFoundError, ValidationError
from memorist.server import KeyStore
from memorist.server.keys import hash_key, key_id_of

KEY = re.compile(r"^ek_[a-z0-9]{8}_[A-Za-z0-9_-]{43}$")


def test_create_authenticate_revoke(store: str) -> None:
    with KeyStore(store) as keys:
        key, record = keys.create("acme", user_id="alice", label="ci")
        assert KEY.match(key) and key_id_of(key) == record.key_id
        assert (record.tenant_id, record.user_id, record.label, record.active) == ("acme", "alice", "ci", True)
        assert keys.authenticate(key) == record
        assert keys.authenticate(key + "x") is None
        assert keys.authenticate("ek_" + record.key_id + "_" + "A" * 43) is None
        assert keys.authenticate("") is None and keys.authenticate("x" * 10_000) is None
        assert keys.has_active_keys()
        revoked = keys.revoke(record.key_id)
        assert not revoked.active and revoked.revoked_at is not None
        assert keys.revoke(key) == revoked  # by the whole key too; twice changes nothing
        assert keys.authenticate(key) is None
        assert not keys.has_active_keys()
        assert [k.key_id for k in keys.list()] == [record.key_id]
        assert keys.list(include_revoked=False) == []
        with pytest.raises(NotFoundError):
            keys.revoke("zzzzzzzz")


def test_create_checks_its_arguments(store: str) -> None:
    with KeyStore(store) as keys:
        for tenant in ("", "  ", "a\x00b", 5):
            with pytest.raises(ValidationError) as info:
                keys.create(tenant)  # type: ignore[arg-type]
            assert info.value.field == "tenant_id"
        with pytest.raises(ValidationError):
            keys.create("acme", user_id="")
        with pytest.raises(ValidationError):
            keys.create("acme", label="x" * 500)


def test_a_new_file_becomes_an_memorist_store_that_memory_opens(tmp_path: Path) -> None:
    path = str(tmp_path / "deep" / "folder" / "k.db")
    with KeyStore(path) as keys:
        keys.create("acme")
    with Memory(path, embedder="hashing") as m:
        m.add("Likes tea", user_id="a", infer=False)
        assert m.check()["healthy"]


def test_a_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    with pytest.raises(CorruptStoreError):
        KeyStore(str(path))
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]  # untouched
    conn.close()


def test_hash_is_sha256_of_the_whole_key() -> None:
    key = "ek_abcdefgh_" + "s" * 43
    assert hash_key(key) == hashlib.sha256(key.encode()).hexdigest()


def run(*args: str) -> object:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_keys(store: str) -> None:
    r = run("--db", store, "keys", "create", "--tenant", "acme", "--user", "alice", "--label", "laptop")
    assert r.exit_code == 0, r.output
    key = r.stdout.strip()
    assert KEY.match(key)
    assert "shown only now" in r.stderr
    r = run("keys", "create", "--tenant", "globex", "--db", store, "--json")
    created = json.loads(r.stdout)
    assert KEY.match(created["key"]) and created["tenant_id"] == "globex" and created["user_id"] is None

    r = run("--db", store, "keys", "list")
    assert r.exit_code == 0 and "laptop" in r.stdout and "acme" in r.stdout and "globex" in r.stdout
    assert key.split("_", 2)[2] not in r.stdout and created["key"].split("_", 2)[2] not in r.stdout
    listed = json.loads(run("--db", store, "--json", "keys", "list").stdout)
    assert [k["tenant_id"] for k in listed] == ["acme", "globex"] and all("key" not in k for k in listed)

    r = run("--db", store, "keys", "revoke", key_id_of(key))
    assert r.exit_code == 0 and "revoked" in r.stdout
    r = run("--db", store, "keys", "revoke", key_id_of(key))
    assert r.exit_code == 0 and "already revoked" in r.stdout
    assert [k["key_id"] for k in json.loads(run("--db", store, "--json", "keys", "list", "--active").stdout)] == [created["key_id"]]

    r = CliRunner().invoke(cli, ["--db", store, "keys", "revoke", "nosuchid"])
    assert r.exit_code == 1 and "not found" in r.stderr
    r = CliRunner().invoke(cli, ["--db", store, "keys", "create", "--tenant", " "])
    assert r.exit_code == 1 and "--tenant" in r.stderr
    r = CliRunner().invoke(cli, ["--db", str(Path(store).parent / "missing.db"), "keys", "list"])
    assert r.exit_code == 1 and "no store" in r.stderr


def test_memorist_check_stays_healthy_with_keys(store: str) -> None:
    with Memory(store, embedder="hashing") as m:
        m.add("I am Alex and I love hiking", user_id="alex")
    run("--db", store, "keys", "create", "--tenant", "acme")
    r = CliRunner().invoke(cli, ["--db", store, "check"])
    assert r.exit_code == 0, r.output
    assert "healthy" in r.stdout
    backup = str(Path(store).parent / "copy.db")
    assert CliRunner().invoke(cli, ["--db", store, "backup", backup]).exit_code == 0
    with KeyStore(backup) as keys:  # the keys travel with a backup, as hashes
        assert [k.tenant_id for k in keys.list()] == ["acme"]
