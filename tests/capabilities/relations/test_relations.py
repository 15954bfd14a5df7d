"""Sharing through relation tuples (memory.relations, memory.as_subject), on each backend:
grants, revocation on the next call, group inheritance, viewer vs editor, a playbook's
visibility, and a denial that answers exactly as a missing thing does."""

from __future__ import annotations

import pytest

from memorist import Memory, NotFoundError, PermissionDeniedError, ValidationError

A_BOOK = ("playbook", "agent_a/default")


def _patterns(book: dict) -> list[str]:
    return [s["pattern"] for cat in ("helpful", "harmful", "neutral") for s in book["strategies"][cat]]


def _without_times(book: dict) -> dict:
    return {k: v for k, v in book.items() if k not in ("created_at", "updated_at", "last_used_at")}


def test_spec_example_agent_b_reads_agent_a_s_playbook_only_with_a_grant(mem) -> None:
    mem.learning.update_playbook([{"pattern": "Validate the invoice total"}], agent_id="agent_a")
    agent_b = mem.as_subject(agent_id="agent_b")
    denied = agent_b.learning.get_playbook("default", agent_id="agent_a")
    missing = agent_b.learning.get_playbook("never_written", agent_id="agent_a")
    assert _patterns(denied) == []
    # Denied answers exactly as a playbook that does not exist (its name aside).
    assert {**_without_times(denied), "name": None} == {**_without_times(missing), "name": None}
    assert agent_b.learning.list_playbook_versions("default", agent_id="agent_a") == []
    with pytest.raises(NotFoundError) as denied_version:
        agent_b.learning.get_playbook_version("default", 1, agent_id="agent_a")
    with pytest.raises(NotFoundError) as missing_version:
        agent_b.learning.get_playbook_version("default", 1, agent_id="nobody")
    assert str(denied_version.value) == str(missing_version.value)

    created = mem.relations.create(subject=("agent", "agent_b"), relation="viewer", object=A_BOOK)
    assert created == {"subject": ["agent", "agent_b"], "relation": "viewer", "object": list(A_BOOK), "changed": True}
    assert mem.relations.create(("agent", "agent_b"), "viewer", A_BOOK)["changed"] is False
    assert _patterns(agent_b.learning.get_playbook("default", agent_id="agent_a")) == ["Validate the invoice total"]
    assert [v["version"] for v in agent_b.learning.list_playbook_versions("default", agent_id="agent_a")] == [1]
    # A viewer may not write: a clear permission error, and nothing changed.
    with pytest.raises(PermissionDeniedError, match="editor"):
        agent_b.learning.update_playbook([{"pattern": "Skip validation"}], agent_id="agent_a")
    with pytest.raises(PermissionDeniedError):
        agent_b.learning.rollback_playbook("default", 1, agent_id="agent_a")
    assert _patterns(mem.learning.get_playbook("default", agent_id="agent_a")) == ["Validate the invoice total"]
    # Another agent has nothing.
    assert _patterns(mem.as_subject(agent_id="agent_c").learning.get_playbook("default", agent_id="agent_a")) == []

    mem.relations.create(("agent", "agent_b"), "editor", A_BOOK)
    agent_b.learning.update_playbook([{"pattern": "Log the supplier id"}], agent_id="agent_a")
    assert set(_patterns(mem.learning.get_playbook("default", agent_id="agent_a"))) == {"Validate the invoice total", "Log the supplier id"}

    # Revoking takes effect on the very next call.
    assert mem.relations.delete(("agent", "agent_b"), "editor", A_BOOK)["changed"] is True
    with pytest.raises(PermissionDeniedError):
        agent_b.learning.update_playbook([{"pattern": "Again"}], agent_id="agent_a")
    mem.relations.delete(("agent", "agent_b"), "viewer", A_BOOK)
    assert _patterns(agent_b.learning.get_playbook("default", agent_id="agent_a")) == []
    with pytest.raises(NotFoundError):
        agent_b.learning.update_playbook([{"pattern": "Again"}], agent_id="agent_a")
    assert mem.relations.delete(("agent", "agent_b"), "viewer", A_BOOK)["changed"] is False


def test_a_subject_s_own_space_needs_no_grant(mem) -> None:
    agent_a = mem.as_subject(agent_id="agent_a")
    agent_a.learning.update_playbook([{"pattern": "Mine"}])
    assert _patterns(mem.learning.get_playbook("default", agent_id="agent_a")) == ["Mine"]
    added = agent_a.add("Prefers CSV exports", infer=False)["results"][0]
    assert agent_a.get(added["id"])["memory"] == "Prefers CSV exports"
    assert [m["memory"] for m in agent_a.search("CSV")["results"]] == ["Prefers CSV exports"]


def test_memory_scopes_groups_and_denial_like_missing(mem) -> None:
    tea = mem.add("Loves green tea", user_id="alex", infer=False)["results"][0]["id"]
    bob = mem.as_subject(user_id="bob")
    # No relation: alex's memories answer as missing ones.
    assert bob.search("tea", user_id="alex") == mem.search("tea", user_id="nobody")
    assert bob.get_all(user_id="alex") == mem.get_all(user_id="nobody")
    with pytest.raises(NotFoundError) as denied:
        bob.get(tea, user_id="alex")
    with pytest.raises(NotFoundError) as missing:
        bob.get("0" * 8 + tea[8:], user_id="alex")
    assert denied.value.what == missing.value.what == "memory"
    with pytest.raises(NotFoundError):
        bob.history(tea, user_id="alex")
    with pytest.raises(NotFoundError):
        bob.add("Hates tea", user_id="alex", infer=False)

    # Bob is in the team, the team may view alex's memories: bob inherits it.
    mem.relations.create(("user", "bob"), "member", ("group", "team"))
    mem.relations.create(("group", "team"), "viewer", ("scope", "user:alex"))
    assert [m["memory"] for m in bob.search("tea", user_id="alex")["results"]] == ["Loves green tea"]
    assert bob.get(tea, user_id="alex")["memory"] == "Loves green tea"
    assert mem.relations.check(("user", "bob"), "viewer", ("scope", "user:alex")) | {"subject": None} == {
        "subject": None, "relation": "viewer", "object": ["scope", "user:alex"], "allowed": True, "via": "group"}
    with pytest.raises(PermissionDeniedError):
        bob.add("Hates tea", user_id="alex", infer=False)
    with pytest.raises(PermissionDeniedError):
        bob.delete(tea, user_id="alex")
    assert mem.get(tea, user_id="alex")["memory"] == "Loves green tea"
    # Groups of groups.
    mem.relations.create(("user", "carol"), "member", ("group", "interns"))
    mem.relations.create(("group", "interns"), "member", ("group", "team"))
    assert mem.as_subject(user_id="carol").get(tea, user_id="alex")["memory"] == "Loves green tea"
    # Leaving the group ends it on the next call.
    mem.relations.delete(("user", "bob"), "member", ("group", "team"))
    assert bob.search("tea", user_id="alex")["results"] == []
    # An editor writes.
    mem.relations.create(("user", "bob"), "editor", ("scope", "user:alex"))
    assert bob.add("Drinks it without sugar", user_id="alex", infer=False)["results"][0]["memory"] == "Drinks it without sugar"


def test_visibility_is_enforced(mem) -> None:
    mem.learning.create_playbook("tips", visibility="private", agent_id="agent_a")
    mem.learning.update_playbook([{"pattern": "Cache the token"}], "tips", agent_id="agent_a")
    team_mate, stranger = mem.as_subject(agent_id="agent_b"), mem.as_subject(agent_id="agent_z")
    mem.relations.create(("agent", "agent_a"), "member", ("group", "team"))
    mem.relations.create(("agent", "agent_b"), "member", ("group", "team"))
    assert _patterns(team_mate.learning.get_playbook("tips", agent_id="agent_a")) == []  # private
    mem.learning.create_playbook("tips", visibility="shared", agent_id="agent_a")
    assert _patterns(team_mate.learning.get_playbook("tips", agent_id="agent_a")) == ["Cache the token"]
    assert _patterns(stranger.learning.get_playbook("tips", agent_id="agent_a")) == []
    with pytest.raises(PermissionDeniedError):
        team_mate.learning.update_playbook([{"pattern": "x"}], "tips", agent_id="agent_a")
    mem.learning.create_playbook("tips", visibility="tenant", agent_id="agent_a")
    assert _patterns(stranger.learning.get_playbook("tips", agent_id="agent_a")) == ["Cache the token"]
    assert [p["name"] for p in stranger.learning.list_playbooks(agent_id="agent_a")] == ["tips"]
    mem.learning.create_playbook("tips", visibility="private", agent_id="agent_a")
    assert stranger.learning.list_playbooks(agent_id="agent_a") == []
    with pytest.raises(ValidationError, match="visibility"):
        mem.learning.create_playbook("tips", visibility="public", agent_id="agent_a")


def test_a_playbook_named_by_its_id_and_what_a_subject_manages(mem) -> None:
    playbook_id = mem.learning.create_playbook("api_strategies", scope="agent", visibility="private", agent_id="agent_a")
    stored = mem.relations.create(("user", "alice"), "viewer", ("playbook", playbook_id))
    assert stored["object"] == ["playbook", "agent_a/api_strategies"]
    assert mem.relations.check("user:alice", "viewer", "playbook:agent_a/api_strategies")["allowed"] is True
    # A subject shares what it owns, and nothing else.
    agent_a, agent_b = mem.as_subject(agent_id="agent_a"), mem.as_subject(agent_id="agent_b")
    assert agent_a.relations.create(("agent", "agent_b"), "viewer", ("playbook", "agent_a/default"))["changed"] is True
    with pytest.raises(PermissionDeniedError):
        agent_b.relations.create(("agent", "agent_b"), "editor", ("playbook", "agent_a/default"))
    with pytest.raises(PermissionDeniedError):
        agent_b.relations.delete(("agent", "agent_b"), "viewer", ("playbook", "agent_a/default"))
    assert [r["object"] for r in agent_b.relations.list()["results"]] == [["playbook", "agent_a/default"]]
    assert agent_b.relations.check(("agent", "agent_b"), "viewer", A_BOOK)["via"] == "grant"
    with pytest.raises(PermissionDeniedError):
        agent_b.relations.check(("user", "alice"), "viewer", ("playbook", "agent_a/api_strategies"))
    # An owner relation lets another subject manage the playbook.
    mem.relations.create(("agent", "agent_b"), "owner", ("playbook", "agent_a/api_strategies"))
    agent_b.relations.create(("agent", "agent_c"), "viewer", ("playbook", "agent_a/api_strategies"))
    assert mem.as_subject(agent_id="agent_c").relations.check("agent:agent_c", "viewer", "playbook:agent_a/api_strategies")["allowed"]


def test_bad_tuples_are_refused_and_nothing_is_stored(mem) -> None:
    for subject, relation, obj, field in [
        (("robot", "x"), "viewer", A_BOOK, "subject"),
        ("agent_b", "viewer", A_BOOK, "subject"),
        (("agent", ""), "viewer", A_BOOK, "subject"),
        (("agent", "b"), "admin", A_BOOK, "relation"),
        (("agent", "b"), "viewer", ("file", "x"), "object"),
        (("agent", "b"), "viewer", ("scope", "alex"), "object"),
        (("agent", "b"), "member", A_BOOK, "object"),
        (("agent", "b"), "viewer", ("group", "team"), "relation"),
        (("group", "team"), "member", ("group", "team"), "object"),
    ]:
        with pytest.raises(ValidationError) as err:
            mem.relations.create(subject, relation, obj)
        assert err.value.field == field, (subject, relation, obj)
    with pytest.raises(NotFoundError):
        mem.relations.create(("agent", "b"), "viewer", ("playbook", "no-such-playbook-id"))
    assert mem.relations.list() == {"results": []}
    with pytest.raises(ValidationError):
        mem.as_subject()


def test_tenants_never_cross(backend) -> None:
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as acme, \
            Memory(backend.target, embedder="hashing", tenant_id="globex") as globex:
        acme.learning.update_playbook([{"pattern": "Acme secret"}], agent_id="agent_a")
        globex.learning.update_playbook([{"pattern": "Globex secret"}], agent_id="agent_a")
        acme.relations.create(("agent", "agent_b"), "viewer", A_BOOK)
        assert globex.relations.list() == {"results": []}
        assert _patterns(globex.as_subject(agent_id="agent_b").learning.get_playbook("default", agent_id="agent_a")) == []
        assert _patterns(acme.as_subject(agent_id="agent_b").learning.get_playbook("default", agent_id="agent_a")) == ["Acme secret"]


def test_the_log_records_each_change(mem) -> None:
    mem.relations.create(("agent", "agent_b"), "viewer", A_BOOK)
    mem.relations.create(("agent", "agent_b"), "viewer", A_BOOK)  # no change, no event
    mem.relations.delete(("agent", "agent_b"), "viewer", A_BOOK)
    ops = [e.op for e in mem.store.events(None) if e.op.startswith("relation")]
    assert ops == ["relation_create", "relation_delete"]


def test_a_trajectory_s_parent_is_one_the_subject_may_read(backend) -> None:
    """A subject starts a child of a trajectory it can read; another owner's answers as
    a missing one. Before, any subject linked its trajectory under another user's, and
    the answer (made, or 404) told whether that trajectory id existed."""
    with Memory(backend.target, embedder="hashing") as memory:
        bobs = memory.learning.start_trajectory("Bob's task", user_id="bob", agent_id="x")
        missing = "0190c0de-0000-7000-8000-000000000000"
        alice = memory.as_subject(user_id="alice")
        for parent in (bobs, missing):
            with pytest.raises(NotFoundError) as caught:
                alice.learning.start_trajectory("Alice's step", parent_trajectory_id=parent)
            assert str(caught.value).replace(parent, "X") == f"trajectory not found: {missing!r}".replace(missing, "X")
            with pytest.raises(NotFoundError):  # the loop starts its trajectory the same way
                alice.learning.execute_with_learning(lambda: "done", "Alice's step", parent_trajectory_id=parent, auto_reflect=False)
        assert memory.learning.query_trajectories(user_id="alice") == []
        own = alice.learning.start_trajectory("Alice's workflow")
        assert alice.learning.get_trajectory(alice.learning.start_trajectory("step", parent_trajectory_id=own))["parent_trajectory_id"] == own
        memory.relations.create(("user", "alice"), "viewer", ("scope", "user:bob"))
        child = alice.learning.start_trajectory("Alice's step", parent_trajectory_id=bobs)
        assert alice.learning.get_trajectory(child)["parent_trajectory_id"] == bobs
