"""Turning keys on keeps the development data (issue 25, item 5): `memorist keys create`
warns when the store holds records of no tenant, and `memorist keys adopt` moves them
into a tenant (every kind, with vectors and full-text terms; logged; idempotent). On
each backend, through the CLI, then read as a key of that tenant sees them."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from memorist import Memory
from memorist.cli import cli
from memorist.errors import ConflictError
from memorist.store.base import ScopeFilter


@pytest.fixture
def memorist(backend):
    runner = CliRunner()

    def run(*args: str, code: int = 0):
        result = runner.invoke(cli, ["--db", backend.target, "--embedder", "hashing", *args])
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        return result

    return run


@pytest.fixture
def written(backend) -> dict:
    """What a development server wrote before keys: facts, a minute, a trajectory, a
    run-only memory; and one memory written in tenant acme since."""
    made: dict = {}
    with Memory(backend.target, embedder="hashing") as dev:
        made["tea"] = dev.add("I drink green tea every morning", user_id="alex", infer=False)["results"][0]["id"]
        made["hike"] = dev.add("Hiking in the Alps each summer", user_id="alex", agent_id="coach", infer=False)["results"][0]["id"]
        made["bob"] = dev.add("Bob plays the cello", user_id="bob", infer=False)["results"][0]["id"]
        made["run"] = dev.add("A note of run r1 alone", run_id="r1", infer=False)["results"][0]["id"]
        made["minute"] = dev.minutes.record("status", agent_id="coach", project_id="alex", memory_note="standup held")["id"]
        made["trajectory"] = dev.learning.start_trajectory("Plan the Alps trip", user_id="alex")
        made["untenanted"] = sum(dev.store.count(ScopeFilter(t)) for t in ("", "\x1ftest"))
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as acme:
        made["since"] = acme.add("Alex switched to oolong", user_id="alex", infer=False)["results"][0]["id"]
    return made


def test_keys_create_warns_and_keys_adopt_moves_a_users_records(backend, memorist, written):
    created = memorist("keys", "create", "--tenant", "acme", "--user", "alex")
    assert created.stdout.startswith("ek_")  # the key alone on stdout
    warning = created.stderr
    assert f"holds {written['untenanted']:,} memories and other records" in warning
    assert "memorist keys adopt --tenant acme" in warning

    moved = json.loads(memorist("--json", "keys", "adopt", "--tenant", "acme", "--user", "alex").stdout)
    assert moved["tenant_id"] == "acme" and moved["user_id"] == "alex" and moved["from_tenant"] == ""
    assert moved["memories"] >= 4  # tea, hike, the minute, the trajectory (and its bookkeeping)
    assert moved["merged"] == 1  # acme already had a space for alex: tea joined oolong there

    with Memory(backend.target, embedder="hashing", tenant_id="acme") as acme:
        facts = {r["id"] for r in acme.get_all(user_id="alex")["results"]}
        assert {written["tea"], written["hike"], written["since"]} <= facts
        assert acme.search("green tea", user_id="alex")["results"][0]["id"] == written["tea"]
        # The full-text index follows the move (its terms carry the scope).
        hits = acme.store.text_search(ScopeFilter("acme", "alex"), "tea morning", k=5, cutoff=None, now=time.time())
        assert written["tea"] in [m for m, _ in hits]
        assert [e["event"] for e in acme.history(written["tea"], user_id="alex")] == ["ADD"]
        assert [m["memory_note"] for m in acme.minutes.recent(5, project_id="alex")] == ["standup held"]
        assert acme.learning.get_trajectory(written["trajectory"], user_id="alex")["task_description"] == "Plan the Alps trip"
        assert [e.op for e in acme.store.events(ScopeFilter("acme", "", ""), ops=("adopt",))] == ["adopt"]
        assert acme.get_all(user_id="bob")["results"] == []  # only alex was asked for
    with Memory(backend.target, embedder="hashing") as dev:
        assert dev.get_all(user_id="alex")["results"] == []
        assert [r["id"] for r in dev.get_all(user_id="bob")["results"]] == [written["bob"]]

    again = memorist("keys", "adopt", "--tenant", "acme", "--user", "alex").stdout
    assert again.startswith("Nothing to adopt")
    rest = json.loads(memorist("--json", "keys", "adopt", "--tenant", "acme").stdout)
    assert rest["memories"] == 2 and rest["user_id"] is None  # bob's, and the run-only note
    assert json.loads(memorist("--json", "keys", "adopt", "--tenant", "acme").stdout)["memories"] == 0
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as acme:
        assert [r["id"] for r in acme.get_all(user_id="bob")["results"]] == [written["bob"]]
        assert [r["id"] for r in acme.get_all(run_id="r1")["results"]] == [written["run"]]
        assert len(acme.store.events(None, ops=("adopt",))) == 2  # the runs that moved something
    with Memory(backend.target, embedder="hashing") as dev:  # the store's own configuration stayed
        assert dev.stats()["policy"] == "default" and dev.get_all(run_id="r1")["results"] == []
    assert "warning" not in memorist("keys", "create", "--tenant", "acme").stderr  # nothing left to say


def test_the_service_shows_the_adopted_memories_to_a_key_of_the_tenant(backend, memorist, written):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from memorist.server import create_app

    key = memorist("keys", "create", "--tenant", "acme", "--user", "alex").stdout.strip()
    app = create_app(backend.target, embedder="hashing")
    try:
        with TestClient(app) as client:
            headers = {"Authorization": f"Bearer {key}"}
            before = client.get("/api/users/", headers=headers).json()
            memorist("keys", "adopt", "--tenant", "acme")  # another process, while it serves
            after = client.get("/api/users/", headers=headers).json()
            listed = client.get("/api/memories/alex/", headers=headers).json()["results"]
    finally:
        app.state.service.close()
    count = {u["user_id"]: u["memories"] for u in (before.get("results") or before.get("users") or [])}
    assert count.get("alex", 0) == 1  # only what was written in acme since
    count = {u["user_id"]: u["memories"] for u in (after.get("results") or after.get("users") or [])}
    assert count["alex"] == 3
    assert {written["tea"], written["hike"], written["since"]} <= {m["id"] for m in listed}


def test_keys_adopt_checks_its_arguments(memorist, written):
    assert "--tenant" in memorist("keys", "adopt", "--tenant", "", code=1).stderr
    assert "--tenant" in memorist("keys", "adopt", "--tenant", "ac\x01me", code=1).stderr
    assert "--user" in memorist("keys", "adopt", "--tenant", "acme", "--user", " ", code=1).stderr
    assert "Missing option '--tenant'" in memorist("keys", "adopt", code=2).stderr


def test_keys_adopt_on_a_missing_store_creates_nothing(tmp_path):
    path = tmp_path / "typo.db"
    result = CliRunner().invoke(cli, ["--db", str(path), "keys", "adopt", "--tenant", "acme"])
    assert result.exit_code != 0 and not path.exists()


def test_serve_with_keys_says_when_records_of_no_tenant_wait_for_adoption(backend, memorist, written, monkeypatch):
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: None)
    memorist("keys", "create", "--tenant", "acme")
    started = memorist("serve", "--port", "7002")
    assert "API keys required" in started.stdout
    assert "written before keys, in no tenant" in started.stderr and "memorist keys adopt --tenant NAME" in started.stderr
    memorist("keys", "adopt", "--tenant", "acme")
    assert "before keys" not in memorist("serve", "--port", "7002").stderr


def test_a_merge_made_before_the_adoption_is_undone_inside_the_tenant(backend, memorist):
    """The log keeps a merged memory's sources as they were, under the development
    tenant: undone by the tenant that adopted them, they come back in that tenant, and
    the development tenant cannot change the tenant's memories by undoing it."""
    texts = ("Likes green tea in the morning", "Likes green tea in the morning with honey")

    def merged_by_dev() -> str:
        with Memory(backend.target, embedder="hashing") as dev:
            for text in texts:
                dev.add(text, user_id="alice", infer=False, importance=0.3)
            return dev.learning.consolidate(user_id="alice")["run_id"]

    run = merged_by_dev()
    memorist("keys", "adopt", "--tenant", "acme")
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as acme:
        assert len(acme.rollback(run, user_id="alice")["restored"]) == 2
        assert sorted(m["memory"] for m in acme.get_all(user_id="alice")["results"]) == list(texts)
    with Memory(backend.target, embedder="hashing") as dev:
        assert dev.get_all(user_id="alice")["results"] == []

    # Adopted into a user the tenant has already: the memories move, the log stays.
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as acme:
        acme.delete_all(user_id="alice")
        acme.add("Works at ACME", user_id="alice", infer=False)
    run = merged_by_dev()
    memorist("keys", "adopt", "--tenant", "acme")
    with Memory(backend.target, embedder="hashing") as dev, pytest.raises(ConflictError, match="moved out of this scope"):
        dev.rollback(run, user_id="alice")
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as acme:
        assert sorted(m["memory"] for m in acme.get_all(user_id="alice")["results"]) == [texts[1], "Works at ACME"]
