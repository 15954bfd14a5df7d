"""What a subject's listing shows with no ``object`` filter (or only a subject or a
relation filter): its own tuples and those of the objects it manages (its spaces and
playbooks, and what it holds ``owner`` of), and nothing else: no other subject's
shares, no other tenant's. An owner checking who reads its memories is told."""

from __future__ import annotations

import pytest

from memorist import Memory
from memorist.mcp_server import create_relation, list_relations

CAROL_READS_ALEX = (["user", "carol"], "viewer", ["scope", "user:alex"])


def _listed(result: dict) -> list[tuple]:
    return [(r["subject"], r["relation"], r["object"]) for r in result["results"]]


def test_an_owner_lists_what_it_shares_with_no_object_filter(mem) -> None:
    alex, carol, dave = (mem.as_subject(user_id=u) for u in ("alex", "carol", "dave"))
    alex.relations.create("user:carol", "viewer", "scope:user:alex")
    alex.relations.create("user:carol", "editor", "playbook:user:alex/agent:helper/notes")
    dave.relations.create("user:carol", "viewer", "scope:user:dave")  # another owner's share
    alex_shares = [CAROL_READS_ALEX, (["user", "carol"], "editor", ["playbook", "user:alex/agent:helper/notes"])]
    alex_shares.sort(key=lambda t: (t[2], t[1], t[0]))
    assert _listed(alex.relations.list()) == alex_shares
    assert _listed(alex.relations.list(subject="user:carol")) == alex_shares
    assert _listed(alex.relations.list(relation="viewer")) == [CAROL_READS_ALEX]
    assert _listed(alex.relations.list(subject="user:carol", relation="editor")) == [t for t in alex_shares if t[1] == "editor"]
    assert _listed(alex.relations.list(subject="user:dave")) == []
    assert _listed(alex.relations.list(limit=1)) == alex_shares[:1]
    # The grantee sees every tuple naming it (of both owners); each owner only its own shares.
    assert len(_listed(carol.relations.list())) == 3
    assert _listed(dave.relations.list()) == [(["user", "carol"], "viewer", ["scope", "user:dave"])]
    # A third user sees neither, whatever it filters on.
    eve = mem.as_subject(user_id="eve")
    for query in ({}, {"subject": "user:carol"}, {"relation": "viewer"}, {"subject": "user:alex"}):
        assert eve.relations.list(**query) == {"results": []}, query


def test_what_a_subject_manages_through_owner_tuples_is_listed(mem) -> None:
    mem.relations.create("user:bob", "owner", "group:launch")
    mem.relations.create("user:carol", "member", "group:launch")
    mem.relations.create("user:bob", "owner", "scope:agent:helper")
    mem.relations.create("user:dave", "viewer", "scope:user:zed/agent:helper")  # covered by bob's scope
    mem.relations.create("user:dave", "viewer", "playbook:helper/tips")  # so is the agent's playbook
    mem.relations.create("user:dave", "viewer", "scope:agent:other")  # not
    listed = _listed(mem.as_subject(user_id="bob").relations.list())
    assert (["user", "carol"], "member", ["group", "launch"]) in listed
    assert (["user", "dave"], "viewer", ["scope", "user:zed/agent:helper"]) in listed
    assert (["user", "dave"], "viewer", ["playbook", "helper/tips"]) in listed
    assert (["user", "dave"], "viewer", ["scope", "agent:other"]) not in listed
    assert len(listed) == 5  # and bob's own two owner tuples
    # A user and agent handle owns that space only, not the user's other spaces.
    mem.relations.create("user:dave", "viewer", "scope:user:zed")
    pair = mem.as_subject(user_id="zed", agent_id="helper")
    assert _listed(pair.relations.list()) == [(["user", "dave"], "viewer", ["scope", "user:zed/agent:helper"])]
    # An agent named like a label lists the tuples of its playbooks (written agent:tenant/<name>).
    named_tenant = mem.as_subject(agent_id="tenant")
    named_tenant.relations.create("user:dave", "viewer", "playbook:agent:tenant/tips")
    assert _listed(named_tenant.relations.list()) == [(["user", "dave"], "viewer", ["playbook", "agent:tenant/tips"])]


def test_ids_differing_only_in_case_neither_show_nor_crowd_out_an_owner_s_shares(mem) -> None:
    upper = mem.as_subject(user_id="ALEX")
    for n in range(5):
        upper.relations.create(f"user:r{n}", "viewer", "scope:user:ALEX")
    mem.as_subject(agent_id="Helper").relations.create("user:r0", "viewer", "playbook:Helper/tips")
    alex = mem.as_subject(user_id="alex")
    alex.relations.create("user:carol", "viewer", "scope:user:alex")
    assert _listed(alex.relations.list(limit=1)) == [CAROL_READS_ALEX]
    assert _listed(alex.relations.list()) == [CAROL_READS_ALEX]
    assert mem.as_subject(agent_id="helper").relations.list() == {"results": []}


def test_tenants_never_cross_in_an_owner_s_listing(backend) -> None:
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as acme, \
            Memory(backend.target, embedder="hashing", tenant_id="globex") as globex:
        acme.as_subject(user_id="alex").relations.create("user:carol", "viewer", "scope:user:alex")
        assert _listed(acme.as_subject(user_id="alex").relations.list()) == [CAROL_READS_ALEX]
        for who in ("alex", "carol"):
            for query in ({}, {"subject": "user:carol"}):
                assert globex.as_subject(user_id=who).relations.list(**query) == {"results": []}


def test_the_mcp_server_s_user_lists_what_it_shares() -> None:
    with Memory(":memory:", embedder="hashing") as memory:
        alex, carol, dave = (memory.scope(user_id=u) for u in ("alex", "carol", "dave"))
        assert create_relation(alex, "user:carol", "viewer", "scope:user:alex")["changed"] is True
        assert _listed(list_relations(alex)) == [CAROL_READS_ALEX]
        assert _listed(list_relations(alex, subject="user:carol")) == [CAROL_READS_ALEX]
        assert _listed(list_relations(carol)) == [CAROL_READS_ALEX]
        assert list_relations(dave) == {"results": []}
        assert list_relations(dave, subject="user:carol") == {"results": []}


def test_a_user_key_lists_what_its_user_shares(backend) -> None:
    pytest.importorskip("fastapi")
    from service_helpers import keyed_service

    keys = {"ann": ("acme", "ann"), "ben": ("acme", "ben"), "cal": ("acme", "cal"), "globex": ("globex", None),
            "globex_ann": ("globex", "ann")}
    with keyed_service(backend.target, keys) as (client, headers):
        grant = {"subject": "user:ben", "relation": "viewer", "object": "scope:user:ann"}
        assert client.post("/api/relations/", json=grant, headers=headers["ann"]).status_code == 200
        shared = [(["user", "ben"], "viewer", ["scope", "user:ann"])]
        assert _listed(client.get("/api/relations/", headers=headers["ann"]).json()) == shared
        assert _listed(client.get("/api/relations/?subject=user:ben", headers=headers["ann"]).json()) == shared
        assert _listed(client.get("/api/relations/", headers=headers["ben"]).json()) == shared
        for key in ("cal", "globex", "globex_ann"):
            for query in ("", "?subject=user:ben"):
                assert client.get(f"/api/relations/{query}", headers=headers[key]).json() == {"results": []}, (key, query)
