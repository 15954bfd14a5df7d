"""Relations through the service, on each backend: a tenant key administers the tuples,
a user-bound key acts as its user (it reaches another user's scope or playbook only
through a relation, a viewer cannot write, revocation is immediate), tenants never
cross; and the CLI's commands."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")

from service_helpers import assert_error, keyed_service  # noqa: E402


@pytest.fixture
def service(backend):
    keys = {"acme": ("acme", None), "alice": ("acme", "alice"), "bob": ("acme", "bob"), "globex": ("globex", None)}
    with keyed_service(backend.target, keys) as served:
        yield served


def _patterns(body: dict) -> list[str]:
    return [s["pattern"] for cat in ("helpful", "harmful", "neutral") for s in body["strategies"][cat]]


def test_a_user_key_reaches_another_user_s_playbook_and_memories_only_through_a_relation(service) -> None:
    client, keys = service
    r = client.put("/api/playbooks/default/", json={"strategies": [{"pattern": "Cite the source"}]}, headers=keys["alice"])
    assert r.status_code == 200, r.text
    memory = client.post("/api/memories/", json={"messages": "Alice likes jazz", "infer": False}, headers=keys["alice"]).json()
    mid = memory["results"][0]["id"]

    # No relation: exactly what a user that does not exist answers.
    denied = client.get("/api/playbooks/default/?user_id=alice", headers=keys["bob"])
    missing = client.get("/api/playbooks/default/?user_id=nobody", headers=keys["bob"])
    assert denied.status_code == missing.status_code == 404
    assert denied.json()["error"]["message"].replace("alice", "X") == missing.json()["error"]["message"].replace("nobody", "X")
    assert client.get(f"/api/memories/alice/{mid}/", headers=keys["bob"]).status_code == 404

    # Alice shares her playbook with bob, as a viewer (a user key manages what its user owns).
    grant = {"subject": "user:bob", "relation": "viewer", "object": ["playbook", "user:alice/default"]}
    r = client.post("/api/relations/", json=grant, headers=keys["alice"])
    assert r.status_code == 200 and r.json()["changed"] is True, r.text
    book = client.get("/api/playbooks/default/?user_id=alice", headers=keys["bob"])
    assert book.status_code == 200 and _patterns(book.json()) == ["Cite the source"]
    assert client.get(f"/api/memories/alice/{mid}/", headers=keys["bob"]).status_code == 404  # the playbook only
    write = client.put("/api/playbooks/default/", json={"strategies": [{"pattern": "Skip sources"}], "user_id": "alice"}, headers=keys["bob"])
    assert_error(write, 403, "forbidden")
    # Bob may not share alice's things onward.
    onward = client.post("/api/relations/", json={**grant, "subject": "user:carol"}, headers=keys["bob"])
    assert_error(onward, 403, "forbidden")
    listed = client.get("/api/relations/", headers=keys["bob"]).json()["results"]
    assert [(r["subject"], r["relation"], r["object"]) for r in listed] == [(["user", "bob"], "viewer", ["playbook", "user:alice/default"])]

    # The tenant key (the administrator) makes bob an editor of alice's memories.
    r = client.post("/api/relations/", json={"subject": "user:bob", "relation": "editor", "object": "scope:user:alice"}, headers=keys["acme"])
    assert r.status_code == 200, r.text
    assert client.get(f"/api/memories/alice/{mid}/", headers=keys["bob"]).json()["memory"] == "Alice likes jazz"
    found = client.post("/api/memories/search/", json={"query": "jazz", "user_id": "alice"}, headers=keys["bob"]).json()
    assert [m["memory"] for m in found["results"]] == ["Alice likes jazz"]
    check = client.get("/api/relations/check/?subject=user:bob&relation=editor&object=playbook:user:alice/default", headers=keys["bob"])
    assert check.json()["allowed"] is True and check.json()["via"] == "grant"

    # Revoked: the next request has nothing.
    r = client.delete("/api/relations/?subject=user:bob&relation=editor&object=scope:user:alice", headers=keys["acme"])
    assert r.status_code == 200 and r.json()["changed"] is True
    assert client.get(f"/api/memories/alice/{mid}/", headers=keys["bob"]).status_code == 404
    r = client.delete("/api/relations/?subject=user:bob&relation=viewer&object=playbook:user:alice/default", headers=keys["alice"])
    assert r.json()["changed"] is True
    assert client.get("/api/playbooks/default/?user_id=alice", headers=keys["bob"]).status_code == 404


def test_groups_and_tenants_over_the_service(service) -> None:
    client, keys = service
    client.post("/api/memories/", json={"messages": "Alice's launch date is May 3", "infer": False}, headers=keys["alice"])
    for grant in ({"subject": "user:bob", "relation": "member", "object": "group:launch"},
                  {"subject": "group:launch", "relation": "viewer", "object": "scope:user:alice"}):
        assert client.post("/api/relations/", json=grant, headers=keys["acme"]).status_code == 200
    found = client.post("/api/memories/search/", json={"query": "launch date", "user_id": "alice"}, headers=keys["bob"]).json()
    assert [m["memory"] for m in found["results"]] == ["Alice's launch date is May 3"]
    added = client.post("/api/memories/", json={"messages": "x", "infer": False, "user_id": "alice"}, headers=keys["bob"])
    assert_error(added, 403, "forbidden")
    # The other tenant sees no tuple, and its keys nothing of acme's.
    assert client.get("/api/relations/", headers=keys["globex"]).json() == {"results": []}
    # A bad tuple names its field.
    bad = client.post("/api/relations/", json={"subject": "robot:x", "relation": "viewer", "object": "scope:user:alice"}, headers=keys["acme"])
    assert_error(bad, 422, "validation_error", "subject")
    bad = client.get("/api/relations/check/?subject=user:bob&relation=boss&object=scope:user:alice", headers=keys["acme"])
    assert_error(bad, 422, "validation_error", "relation")


@pytest.mark.sqlite_only("the CLI opens a store file")
def test_the_cli_commands(backend) -> None:
    from click.testing import CliRunner

    from memorist.cli import cli

    db = backend.target
    run = CliRunner().invoke
    r = run(cli, ["--db", db, "--embedder", "hashing", "relations", "create", "agent:agent_b", "viewer", "playbook:agent_a/default"])
    assert r.exit_code == 0 and "Granted: agent:agent_b viewer playbook:agent_a/default" in r.output, r.output
    r = run(cli, ["--db", db, "--json", "relations", "list"])
    assert json.loads(r.output)["results"][0]["object"] == ["playbook", "agent_a/default"]
    r = run(cli, ["--db", db, "relations", "check", "agent:agent_b", "editor", "playbook:agent_a/default"])
    assert r.exit_code == 0 and "denied" in r.output
    r = run(cli, ["--db", db, "relations", "check", "agent:agent_b", "viewer", "playbook:agent_a/default"])
    assert "allowed (via grant)" in r.output
    r = run(cli, ["--db", db, "relations", "create", "robot:x", "viewer", "scope:user:alex"])
    assert r.exit_code == 1 and "SUBJECT: type must be one of user, agent, group" in r.output
    r = run(cli, ["--db", db, "relations", "delete", "agent:agent_b", "viewer", "playbook:agent_a/default"])
    assert r.exit_code == 0 and "Revoked" in r.output
    assert json.loads(run(cli, ["--db", db, "--json", "relations", "list"]).output) == {"results": []}
