"""Keys bound to an agent (alone or with a user) act as that agent subject.

Its own agent's memories, playbooks and trajectories are its own; another agent's are
"not found" (as a missing agent) unless a relation grants them; a viewer cannot write
(403); revocation takes effect on the next request; a tenant key stays the tenant's
administrator; tenants never cross. The key table of a store made before keys could
bind an agent keeps working. On SQLite and PostgreSQL alike."""

from __future__ import annotations

import sqlite3
import time

import pytest
from fastapi.testclient import TestClient

from memorist import Memory
from memorist.server import KeyStore, create_app
from memorist.server.keys import hash_key
from service_helpers import UNLIMITED, assert_error, bearer, key_headers


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> str:
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else str(tmp_path / "service.db")


@pytest.fixture
def served(store):
    app = create_app(store, embedder="hashing", limits=UNLIMITED)
    with TestClient(app) as client:
        yield client
    app.state.service.close()


def _add(client: TestClient, headers, text: str, **ids: str) -> str:
    r = client.post("/api/memories/", json={"messages": text, "infer": False, **ids}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["id"]


def _texts(response) -> list[str]:
    assert response.status_code == 200, response.text
    return sorted(m["memory"] for m in response.json()["results"])


def _same_as_missing(denied, missing, name: str, unknown: str) -> None:
    assert denied.status_code == missing.status_code == 404, (denied.text, missing.text)
    assert denied.json()["error"]["message"].replace(name, "X") == missing.json()["error"]["message"].replace(unknown, "X")


def test_an_agent_key_owns_its_agent_and_reaches_another_only_through_a_relation(served, store) -> None:
    acme, a, b = key_headers(store, "acme"), key_headers(store, "acme", agent="agent_a"), key_headers(store, "acme", agent="agent_b")
    own = _add(served, a, "Agent A's note: the deploy runs at noon")  # no ids: the key's agent
    with_alex = _add(served, a, "Alex prefers short answers", user_id="alex")  # its memories with any user are its own
    assert _texts(served.get("/api/memories/", params={"agent_id": "agent_a"}, headers=acme)) == [
        "Agent A's note: the deploy runs at noon", "Alex prefers short answers"]
    assert _texts(served.get("/api/memories/", headers=a)) == _texts(served.get("/api/memories/", params={"agent_id": "agent_a"}, headers=acme))
    assert served.get(f"/api/memories/alex/{with_alex}/", headers=a).json()["memory"] == "Alex prefers short answers"
    r = served.put("/api/playbooks/default/", json={"strategies": [{"pattern": "Check the logs first"}]}, headers=a)
    assert r.status_code == 200, r.text
    trajectory = served.post("/api/trajectories/", json={"task_description": "deploy"}, headers=a).json()["trajectory_id"]
    assert served.get(f"/api/trajectories/{trajectory}/", headers=a).json()["trajectory_id"] == trajectory
    assert [t["trajectory_id"] for t in served.get("/api/trajectories/", headers=a).json()["results"]] == [trajectory]

    # Agent B, no relation: agent A's things answer exactly as a missing agent's do.
    _same_as_missing(served.get("/api/memories/", params={"agent_id": "agent_a"}, headers=b),
                     served.get("/api/memories/", params={"agent_id": "nobody"}, headers=b), "agent_a", "nobody")
    _same_as_missing(served.get("/api/playbooks/default/", params={"agent_id": "agent_a"}, headers=b),
                     served.get("/api/playbooks/default/", params={"agent_id": "nobody"}, headers=b), "agent_a", "nobody")
    _same_as_missing(served.post("/api/memories/search/", json={"query": "deploy", "agent_id": "agent_a"}, headers=b),
                     served.post("/api/memories/search/", json={"query": "deploy", "agent_id": "nobody"}, headers=b), "agent_a", "nobody")
    assert served.get("/api/memories/", headers=b).json() == {"results": []}  # its own agent holds nothing
    assert_error(served.get(f"/api/memories/alex/{with_alex}/", headers=b), 404, "not_found")  # as agent_b: not its memory
    assert_error(served.get(f"/api/memories/alex/{with_alex}/", params={"agent_id": "agent_a"}, headers=b), 404, "not_found")
    assert_error(served.get(f"/api/trajectories/{trajectory}/", params={"agent_id": "agent_a"}, headers=b), 404, "not_found")
    assert_error(served.get(f"/api/trajectories/{trajectory}/", headers=b), 404, "not_found")
    assert_error(served.put(f"/api/memories/{own}/", params={"agent_id": "agent_a"}, json={"text": "hijacked"}, headers=b), 404, "not_found")
    assert_error(served.delete(f"/api/memories/{own}/", headers=b), 404, "not_found")
    assert_error(served.delete("/api/memories/", params={"agent_id": "agent_a"}, headers=b), 404, "not_found")
    assert_error(served.post("/api/erase/", json={"agent_id": "agent_a"}, headers=b), 404, "not_found")
    assert_error(served.post("/api/memories/consolidate/", json={"agent_id": "agent_a", "dry_run": True}, headers=b), 404, "not_found")
    assert_error(served.post("/api/relations/", json={"subject": "agent:agent_b", "relation": "owner", "object": "scope:agent:agent_a"},
                             headers=b), 403, "forbidden")  # it cannot grant itself A's space

    # Agent A shares its space with agent B as a viewer (an agent key manages what its agent owns).
    grant = {"subject": "agent:agent_b", "relation": "viewer", "object": "scope:agent:agent_a"}
    r = served.post("/api/relations/", json=grant, headers=a)
    assert r.status_code == 200 and r.json()["changed"] is True, r.text
    assert "Check the logs first" in str(served.get("/api/playbooks/default/", params={"agent_id": "agent_a"}, headers=b).json())
    assert "Agent A's note: the deploy runs at noon" in _texts(
        served.post("/api/memories/search/", json={"query": "deploy", "agent_id": "agent_a"}, headers=b))
    assert served.get(f"/api/trajectories/{trajectory}/", params={"agent_id": "agent_a"}, headers=b).json()["trajectory_id"] == trajectory
    # ... but a viewer cannot write: 403, and nothing changes.
    assert_error(served.post("/api/memories/", json={"messages": "x", "infer": False, "agent_id": "agent_a"}, headers=b), 403, "forbidden")
    assert_error(served.put(f"/api/memories/{own}/", params={"agent_id": "agent_a"}, json={"text": "hijacked"}, headers=b), 403, "forbidden")
    assert_error(served.put("/api/playbooks/default/", json={"strategies": [{"pattern": "Skip the logs"}], "agent_id": "agent_a"},
                            headers=b), 403, "forbidden")
    assert_error(served.post(f"/api/trajectories/{trajectory}/steps/", json={"step_type": "action", "description": "rm -rf",
                                                                             "agent_id": "agent_a"}, headers=b), 403, "forbidden")
    assert _texts(served.get("/api/memories/", params={"agent_id": "agent_a"}, headers=acme)) == [
        "Agent A's note: the deploy runs at noon", "Alex prefers short answers"]
    listed = served.get("/api/relations/", headers=b).json()["results"]
    assert [(t["subject"], t["relation"], t["object"]) for t in listed] == [(["agent", "agent_b"], "viewer", ["scope", "agent:agent_a"])]

    consolidate = {"agent_id": "agent_a", "min_importance": 1.0, "importance_threshold": 1.0}
    assert_error(served.post("/api/memories/consolidate/", json=consolidate, headers=b), 403, "forbidden")
    preview = served.post("/api/memories/consolidate/", json={**consolidate, "dry_run": True}, headers=b)
    assert preview.status_code == 200, preview.text

    # An editor writes; an erasure still needs the owner.
    r = served.post("/api/relations/", json={**grant, "relation": "editor"}, headers=acme)  # the tenant key administers
    assert r.status_code == 200, r.text
    _add(served, b, "Written by B into A's space", agent_id="agent_a")
    assert_error(served.post("/api/erase/", json={"agent_id": "agent_a"}, headers=b), 403, "forbidden")

    # Revoked: the very next request has nothing.
    for relation in ("viewer", "editor"):
        r = served.delete("/api/relations/", params={**grant, "relation": relation}, headers=a)
        assert r.status_code == 200 and r.json()["changed"] is True, r.text
    assert_error(served.get("/api/memories/", params={"agent_id": "agent_a"}, headers=b), 404, "not_found")
    assert_error(served.get("/api/playbooks/default/", params={"agent_id": "agent_a"}, headers=b), 404, "not_found")

    # Its own erasure erases its agent only.
    done = served.post("/api/erase/", json={}, headers=a)
    assert done.status_code == 200 and done.json()["erased"]["facts"] == 3, done.text
    assert served.get("/api/memories/", params={"agent_id": "agent_a"}, headers=acme).json() == {"results": []}


def test_a_user_and_agent_key_owns_that_pair_only(served, store) -> None:
    acme, pair = key_headers(store, "acme"), key_headers(store, "acme", user="alex", agent="tutor")
    _add(served, acme, "Alex with the tutor", user_id="alex", agent_id="tutor")
    _add(served, acme, "Alex with the coach", user_id="alex", agent_id="coach")
    _add(served, acme, "Sam with the tutor", user_id="sam", agent_id="tutor")
    _add(served, acme, "Alex alone", user_id="alex")

    assert _texts(served.get("/api/memories/", headers=pair)) == ["Alex with the tutor"]
    mid = _add(served, pair, "Alex asked about fractions")
    item = served.get(f"/api/memories/alex/{mid}/", headers=pair).json()
    assert (item["user_id"], item["agent_id"]) == ("alex", "tutor")
    _same_as_missing(served.get("/api/memories/", params={"user_id": "sam"}, headers=pair),
                     served.get("/api/memories/", params={"user_id": "nobody"}, headers=pair), "sam", "nobody")
    _same_as_missing(served.get("/api/memories/", params={"agent_id": "coach"}, headers=pair),
                     served.get("/api/memories/", params={"agent_id": "nobody"}, headers=pair), "coach", "nobody")
    # The user's own playbook is the user's, not this pair's.
    assert_error(served.put("/api/playbooks/default/", json={"strategies": [{"pattern": "p"}], "user_id": "alex", "scope": "user"},
                            headers=pair), 404, "not_found")
    assert served.get("/api/users/", headers=pair).json() == {"results": [{"user_id": "alex", "memories": 2}]}
    # Its user's project's minutes, as a user key's.
    r = served.post("/api/minutes/", json={"event_type": "handoff", "memory_note": "Standup: fractions next", "agent_id": "tutor"}, headers=pair)
    assert r.status_code == 200, r.text
    assert_error(served.get("/api/minutes/", params={"project_id": "sam"}, headers=pair), 404, "not_found")


def test_agent_keys_never_cross_tenants_and_never_administer_them(served, store) -> None:
    acme, a = key_headers(store, "acme"), key_headers(store, "acme", agent="agent_a")
    globex, globex_a = key_headers(store, "globex"), key_headers(store, "globex", agent="agent_a")
    _add(served, a, "Acme's agent_a", user_id="alex")
    _add(served, acme, "Acme's alex with another agent", user_id="alex", agent_id="other")
    _add(served, globex_a, "Globex's agent_a", user_id="zoe")
    assert _texts(served.get("/api/memories/", headers=a)) == ["Acme's agent_a"]
    assert _texts(served.get("/api/memories/", headers=globex_a)) == ["Globex's agent_a"]
    assert served.get("/api/memories/", params={"agent_id": "agent_a"}, headers=globex).json()["results"][0]["memory"] == "Globex's agent_a"
    # The users list: the users of its agent's memories, counting those only.
    assert served.get("/api/users/", headers=a).json() == {"results": [{"user_id": "alex", "memories": 1}]}
    assert served.get("/api/users/", headers=globex_a).json() == {"results": [{"user_id": "zoe", "memories": 1}]}
    # The tenant's own things: a tenant key only.
    tenant_write = {"strategies": [{"pattern": "Everyone: be brief"}], "scope": "tenant"}
    assert_error(served.put("/api/playbooks/house/", json=tenant_write, headers=a), 403, "forbidden", "scope")
    assert served.put("/api/playbooks/house/", json=tenant_write, headers=acme).status_code == 200
    assert "Everyone: be brief" in str(served.get("/api/playbooks/house/", params={"scope": "tenant"}, headers=a).json())
    # An agent alone has no minutes project of its own.
    assert_error(served.get("/api/minutes/", headers=a), 404, "not_found")
    assert_error(served.post("/api/minutes/", json={"event_type": "handoff", "project_id": "alex"}, headers=a), 404, "not_found")
    # Its relations are its tenant's: globex sees none of acme's.
    r = served.post("/api/relations/", json={"subject": "agent:agent_b", "relation": "viewer", "object": "scope:agent:agent_a"}, headers=a)
    assert r.status_code == 200, r.text
    assert served.get("/api/relations/", headers=globex).json() == {"results": []}
    assert served.get("/api/relations/", headers=globex_a).json() == {"results": []}


def test_revoking_an_agent_key_takes_effect_on_the_next_request(served, store) -> None:
    with KeyStore(store) as keys:
        key, record = keys.create("acme", agent_id="agent_a")
    headers = bearer(key)
    assert served.get("/api/memories/", headers=headers).status_code == 200
    with KeyStore(store) as keys:
        keys.revoke(record.key_id)
    assert_error(served.get("/api/memories/", headers=headers), 401, "unauthorized")


_OLD_SQLITE_TABLE = """
CREATE TABLE api_keys (
    key_id       TEXT PRIMARY KEY,
    key_hash     TEXT NOT NULL,
    tenant_id    TEXT NOT NULL,
    user_id      TEXT,
    label        TEXT NOT NULL DEFAULT '',
    created_at   REAL NOT NULL,
    revoked_at   REAL,
    last_used_at REAL
)
"""


def test_a_key_table_made_before_agent_keys_keeps_working(store) -> None:
    """A store whose key table has no agent column (as the code before agent keys made
    it) keeps its keys, and gains agent keys."""
    old_key = "ek_oldkey01_" + "s" * 43
    row = ("oldkey01", hash_key(old_key), "acme", "alex", "laptop", time.time())
    insert = "INSERT INTO api_keys (key_id, key_hash, tenant_id, user_id, label, created_at) VALUES ({0}, {0}, {0}, {0}, {0}, {0})"
    Memory(store, embedder="hashing").close()  # a store; on PostgreSQL its schema holds the old key table
    if store.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store, autocommit=True) as conn:
            conn.execute("SET search_path TO memorist")
            assert "agent_id" not in [c.name for c in conn.execute("SELECT * FROM api_keys LIMIT 0").description]
            conn.execute(insert.format("%s"), row)
    else:
        with sqlite3.connect(store) as conn:
            conn.execute(_OLD_SQLITE_TABLE)
            conn.execute(insert.format("?"), row)
        conn.close()
    with KeyStore(store) as keys:
        assert [(k.key_id, k.user_id, k.agent_id, k.label) for k in keys.list()] == [("oldkey01", "alex", None, "laptop")]
        found = keys.authenticate(old_key)
        assert found is not None and (found.tenant_id, found.user_id, found.agent_id) == ("acme", "alex", None)
        new_key, record = keys.create("acme", agent_id="agent_a")
    with KeyStore(store) as keys:  # opened again: the column is there, nothing is added twice
        assert keys.authenticate(new_key).agent_id == "agent_a"
        assert {k.key_id: k.to_item()["agent_id"] for k in keys.list()} == {"oldkey01": None, record.key_id: "agent_a"}
    app = create_app(store, embedder="hashing", limits=UNLIMITED)
    try:
        with TestClient(app) as client:
            _add(client, bearer(old_key), "Alex's note")
            assert _texts(client.get("/api/memories/", headers=bearer(new_key))) == []
            assert _texts(client.get("/api/memories/", params={"user_id": "alex"}, headers=bearer(old_key))) == ["Alex's note"]
    finally:
        app.state.service.close()


def test_bad_agent_ids_are_refused_naming_the_field(store) -> None:
    from memorist.errors import ValidationError

    with KeyStore(store) as keys:
        with pytest.raises(ValidationError) as err:
            keys.create("acme", agent_id="x" * 5000)
        assert err.value.field == "agent_id"
        assert keys.list() == []


def test_the_keys_commands_bind_and_list_agents(tmp_path) -> None:
    import json

    from click.testing import CliRunner

    from memorist.cli import cli

    db = str(tmp_path / "keys.db")
    run = CliRunner().invoke
    r = run(cli, ["--db", db, "--json", "keys", "create", "--tenant", "acme", "--agent", "agent_a"])
    assert r.exit_code == 0, r.output
    made = json.loads(r.output)
    assert (made["user_id"], made["agent_id"]) == (None, "agent_a")
    r = run(cli, ["--db", db, "keys", "create", "--tenant", "acme", "--user", "alex", "--agent", "tutor"])
    assert r.exit_code == 0 and "user 'alex', agent 'tutor'" in r.output, r.output
    listed = json.loads(run(cli, ["--db", db, "--json", "keys", "list"]).output)
    assert [(k["user_id"], k["agent_id"]) for k in listed] == [(None, "agent_a"), ("alex", "tutor")]
    r = run(cli, ["--db", db, "keys", "list"])
    assert "agent_a" in r.output and "tutor" in r.output
    r = run(cli, ["--db", db, "keys", "create", "--tenant", "acme", "--agent", "x" * 5000])
    assert r.exit_code != 0 and "--agent" in r.output, r.output


def test_an_agent_key_maintains_and_reads_its_own_tiers_only(store) -> None:
    app = create_app(store, embedder="hashing", limits=UNLIMITED, policy="energy")
    try:
        with TestClient(app) as served:
            acme, a, b = key_headers(store, "acme"), key_headers(store, "acme", agent="agent_a"), key_headers(store, "acme", agent="agent_b")
            for n in range(3):
                _add(served, a, f"Agent A's note {n}", user_id=f"user{n}")
            theirs = _add(served, b, "Agent B's note")
            assert served.post("/api/tiers/maintain/", json={}, headers=acme).status_code == 200
            assert served.get("/api/tiers/", headers=acme).json()["total"] == 4
            assert served.get("/api/tiers/", headers=a).json()["total"] == 3
            assert served.get("/api/tiers/", headers=b).json()["total"] == 1
            assert served.post("/api/tiers/maintain/", json={}, headers=a).status_code == 200
            assert_error(served.post("/api/tiers/boost/", json={"memory_id": theirs, "amount": 0.5}, headers=a), 404, "not_found")
            assert_error(served.post("/api/tiers/boost/", json={"memory_id": theirs, "amount": 0.5, "agent_id": "agent_b"}, headers=a),
                         404, "not_found")
            assert served.post("/api/tiers/boost/", json={"memory_id": theirs, "amount": 0.5}, headers=b).status_code == 200
            assert_error(served.put("/api/tiers/config/", json={"changes": {}}, headers=a), 403, "forbidden")
            # A relation shares memories, not the energy tiers of another agent.
            grant = {"subject": "agent:agent_a", "relation": "editor", "object": "scope:agent:agent_b"}
            assert served.post("/api/relations/", json=grant, headers=b).status_code == 200
            denied = served.post("/api/tiers/maintain/", json={"agent_id": "agent_b"}, headers=a)
            assert_error(denied, 404, "not_found")
            assert "agent_b" in denied.json()["error"]["message"]
    finally:
        app.state.service.close()


def test_a_bound_key_s_consolidation_scope_does_not_reach_other_users_or_agents(served, store) -> None:
    """``scope: "agent"`` merges every memory of the agent (any user), ``"user"`` every
    memory of the user (any agent): a bound key is checked on that space. Before, a user
    key naming an agent merged (and its dry run showed) other users' memories of it."""
    acme, alice = key_headers(store, "acme"), key_headers(store, "acme", user="alice")
    pair = key_headers(store, "acme", user="alice", agent="helper")
    notes = ["The server restarts nightly at 2am", "The server restarts nightly at 2 am", "Server restarts nightly at 2am"]
    for text in notes:
        for ids in ({"user_id": "bob", "agent_id": "helper"}, {"user_id": "alice", "agent_id": "other"}):
            assert served.post("/api/memories/", json={"messages": text, "infer": False, "importance": 0.1, **ids},
                               headers=acme).status_code == 200
    before = {u: _texts(served.get("/api/memories/", params={"user_id": u}, headers=acme)) for u in ("alice", "bob")}
    wide = {"min_importance": 0.9, "importance_threshold": 0.95}
    for dry in (True, False):
        r = served.post("/api/memories/consolidate/", json={"agent_id": "helper", "scope": "agent", "dry_run": dry, **wide}, headers=alice)
        assert_error(r, 404, "not_found")
        for scope in ("agent", "user"):
            r = served.post("/api/memories/consolidate/", json={"scope": scope, "dry_run": dry, **wide}, headers=pair)
            assert r.status_code in (403, 404), r.text
    assert {u: _texts(served.get("/api/memories/", params={"user_id": u}, headers=acme)) for u in ("alice", "bob")} == before
    # Its own user's every agent: a user key's own.
    r = served.post("/api/memories/consolidate/", json={"scope": "user", **wide}, headers=alice)
    assert r.status_code == 200 and r.json()["merged_count"] >= 2, r.text
    assert _texts(served.get("/api/memories/", params={"user_id": "bob"}, headers=acme)) == before["bob"]


def test_an_editor_of_the_tenant_s_playbook_changes_it_but_only_an_owner_deletes_it(served, store) -> None:
    """As in the library, an editor of ``tenant/<name>`` writes its strategies and only
    an owner deletes it. Before, a user- or agent-bound key holding editor deleted the
    tenant's playbook with all its versions."""
    acme, alice, agent = key_headers(store, "acme"), key_headers(store, "acme", user="alice"), key_headers(store, "acme", agent="agent_a")
    body = {"strategies": [{"pattern": "Greet every customer by name"}], "scope": "tenant"}
    assert served.put("/api/playbooks/house/", json=body, headers=acme).status_code == 200
    for subject in ("user:alice", "agent:agent_a"):
        grant = {"subject": subject, "relation": "editor", "object": "playbook:tenant/house"}
        assert served.post("/api/relations/", json=grant, headers=acme).status_code == 200
    for key in (alice, agent):
        more = {"strategies": [{"pattern": "Confirm the order back"}], "scope": "tenant"}
        assert served.put("/api/playbooks/house/", json=more, headers=key).status_code == 200
        assert_error(served.delete("/api/playbooks/house/", params={"scope": "tenant"}, headers=key), 403, "forbidden")
    kept = served.get("/api/playbooks/house/", params={"scope": "tenant"}, headers=acme)
    assert kept.status_code == 200 and kept.json()["version"] >= 3
    owner = {"subject": "user:alice", "relation": "owner", "object": "playbook:tenant/house"}
    assert served.post("/api/relations/", json=owner, headers=acme).status_code == 200
    assert served.delete("/api/playbooks/house/", params={"scope": "tenant"}, headers=alice).status_code == 200


def test_a_bound_key_starts_a_child_only_of_a_trajectory_it_may_read(served, store) -> None:
    """Another user's trajectory as a parent answers as a missing one (before: the child
    was made, so a key learnt that the id existed and linked its work under it)."""
    acme, alice = key_headers(store, "acme"), key_headers(store, "acme", user="alice")
    bobs = served.post("/api/trajectories/", json={"task_description": "Bob's task", "user_id": "bob"}, headers=acme).json()["trajectory_id"]
    missing = "0190c0de-0000-7000-8000-000000000000"
    answers = [served.post("/api/trajectories/", json={"task_description": "step", "parent_trajectory_id": p}, headers=alice)
               for p in (bobs, missing)]
    _same_as_missing(*answers, bobs, missing)
    own = served.post("/api/trajectories/", json={"task_description": "mine"}, headers=alice).json()["trajectory_id"]
    child = served.post("/api/trajectories/", json={"task_description": "step", "parent_trajectory_id": own}, headers=alice)
    assert child.status_code == 200, child.text
