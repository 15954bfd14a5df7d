"""Erasing an owner removes the relation tuples that speak of it, exactly: its grants
and memberships, and what it shared of its scopes and playbooks; never a tuple of a
look-alike id (another case, a longer id, an id with LIKE's wildcards), on both backends."""

from __future__ import annotations

import pytest

from memorist import Memory


@pytest.fixture
def memory(backend):
    m = Memory(backend.target, embedder="hashing")
    for user in ("alex", "bob", "ALEX", "alexa", "al_x", "alxx"):
        m.add(f"{user} likes tea", user_id=user, infer=False)
    yield m
    m.close()


def _tuples(memory: Memory) -> set[tuple[str, str, str]]:
    rows = memory.relations.list(limit=1000)["results"]
    return {(":".join(r["subject"]), r["relation"], ":".join(r["object"])) for r in rows}


GONE_WITH_ALEX = [
    ("user:bob", "viewer", ("scope", "user:alex")),  # alex's memories shared
    ("user:bob", "editor", ("scope", "user:alex/agent:tutor")),  # alex's space with an agent
    ("user:bob", "viewer", ("playbook", "user:alex/default")),  # alex's playbook
    ("user:alex", "viewer", ("scope", "user:bob")),  # a grant to alex
    ("user:alex", "member", ("group", "team")),  # alex's membership
]
KEPT = [
    ("user:carol", "viewer", ("scope", "user:bob")),
    ("user:carol", "viewer", ("scope", "user:ALEX")),  # another case is another user
    ("user:carol", "viewer", ("scope", "user:alexa")),  # a longer id
    ("user:carol", "viewer", ("playbook", "user:alexa/default")),
    ("user:ALEX", "viewer", ("scope", "user:bob")),
    ("group:team", "viewer", ("playbook", "user:bob/default")),
    ("user:carol", "viewer", ("playbook", "tenant/house-rules")),
]


def test_erasing_a_user_removes_its_tuples_and_only_them(memory) -> None:
    for subject, relation, obj in GONE_WITH_ALEX + KEPT:
        memory.relations.create(subject, relation, obj)
    before = _tuples(memory)
    assert len(before) == len(GONE_WITH_ALEX) + len(KEPT)

    preview = memory.erase(user_id="alex", dry_run=True)
    assert preview["erased"]["relations"] == len(GONE_WITH_ALEX)
    assert _tuples(memory) == before, "a dry run removes nothing"

    result = memory.erase(user_id="alex")
    assert result["erased"]["relations"] == len(GONE_WITH_ALEX)
    assert "5 relation tuples" in result["message"]
    assert _tuples(memory) == {(s, r, ":".join(o)) for s, r, o in KEPT}
    assert not memory.relations.check("user:bob", "viewer", ("scope", "user:alex"))["allowed"]
    assert memory.erase(user_id="alex")["erased"]["relations"] == 0  # nothing left to find


def test_like_wildcards_in_an_id_match_only_themselves(memory) -> None:
    memory.relations.create("user:bob", "viewer", ("scope", "user:al_x"))
    memory.relations.create("user:bob", "viewer", ("scope", "user:alxx"))  # '_' would match 'x'
    memory.relations.create("user:bob", "viewer", ("playbook", "user:alxx/default"))
    assert memory.erase(user_id="al_x")["erased"]["relations"] == 1
    assert _tuples(memory) == {("user:bob", "viewer", "scope:user:alxx"), ("user:bob", "viewer", "playbook:user:alxx/default")}


def test_erasing_an_agent_removes_its_playbooks_scopes_and_grants(memory) -> None:
    gone = [
        ("agent:ag", "viewer", ("playbook", "other/default")),  # a grant to the agent
        ("user:u", "viewer", ("playbook", "ag/default")),  # the agent's playbook
        ("user:u", "viewer", ("scope", "agent:ag")),
        ("user:u", "viewer", ("scope", "user:x/agent:ag")),  # the agent's space with a user
        ("user:u", "viewer", ("playbook", "user:x/agent:ag/notes")),
    ]
    kept = [
        ("user:u", "viewer", ("playbook", "agx/default")),
        ("user:u", "viewer", ("scope", "agent:agx")),
        ("user:u", "viewer", ("scope", "user:x/agent:agx")),
        ("user:u", "viewer", ("scope", "user:x")),
    ]
    for subject, relation, obj in gone + kept:
        memory.relations.create(subject, relation, obj)
    assert memory.erase(agent_id="ag")["erased"]["relations"] == len(gone)
    assert _tuples(memory) == {(s, r, ":".join(o)) for s, r, o in kept}


def test_a_user_and_agent_space_takes_its_own_tuples_not_the_users(memory) -> None:
    memory.relations.create("user:bob", "viewer", ("scope", "user:alex/agent:tutor"))
    memory.relations.create("user:bob", "viewer", ("scope", "user:alex"))
    memory.relations.create("user:alex", "viewer", ("scope", "user:bob"))
    assert memory.erase(user_id="alex", agent_id="tutor")["erased"]["relations"] == 1
    assert _tuples(memory) == {("user:bob", "viewer", "scope:user:alex"), ("user:alex", "viewer", "scope:user:bob")}


def test_erasing_a_run_keeps_the_tuples(memory) -> None:
    memory.add("a run's note", user_id="alex", run_id="r1", infer=False)
    memory.relations.create("user:bob", "viewer", ("scope", "user:alex"))
    assert memory.erase(user_id="alex", run_id="r1")["erased"]["relations"] == 0
    assert len(_tuples(memory)) == 1


def test_erasure_takes_any_number_of_tuples(memory) -> None:
    for i in range(1203):  # more than one page of the erasure's reads
        memory.relations.create(f"user:reader{i}", "viewer", ("scope", "user:alex"))
    assert memory.erase(user_id="alex", dry_run=True)["erased"]["relations"] == 1203
    assert memory.erase(user_id="alex")["erased"]["relations"] == 1203
    assert memory.relations.list(object=("scope", "user:alex"))["results"] == []


def test_erasure_finds_the_owners_tuples_behind_a_page_of_another_cases(memory) -> None:
    """SQLite's LIKE ignores case: a page of ``user:ALEX``'s tuples hid ``user:alex``'s,
    and the erasure stopped with them left (a new ``alex`` was readable by bob)."""
    for i in range(1001):
        memory.relations.create(f"user:reader{i}", "viewer", ("scope", "user:ALEX"))
    memory.relations.create("user:bob", "viewer", ("scope", "user:alex"))
    memory.relations.create("user:bob", "viewer", ("playbook", "user:alex/default"))
    assert memory.erase(user_id="alex", dry_run=True)["erased"]["relations"] == 2
    assert memory.erase(user_id="alex")["erased"]["relations"] == 2
    assert memory.relations.list(object=("scope", "user:alex"))["results"] == []
    assert memory.relations.list(object=("playbook", "user:alex/default"))["results"] == []
    assert len(memory.relations.list(object=("scope", "user:ALEX"), limit=2000)["results"]) == 1001


@pytest.mark.parametrize("relation", ["viewer", "editor", "owner"])
def test_only_the_owner_erases_whatever_the_grant(memory, relation) -> None:
    from memorist.errors import NotFoundError, PermissionDeniedError

    bob = memory.as_subject(user_id="bob")
    with pytest.raises(NotFoundError):  # without a grant alex is not there for bob
        bob.erase(user_id="alex")
    memory.relations.create("user:bob", relation, ("scope", "user:alex"))
    with pytest.raises(PermissionDeniedError, match="only the owner"):
        bob.erase(user_id="alex")
    assert memory.get_all(user_id="alex")["results"], "nothing of alex was erased"
    assert bob.erase()["erased"]["facts"] == 1  # its own: yes


def test_rolling_back_in_another_users_space_needs_an_editor(memory) -> None:
    from memorist.errors import NotFoundError, PermissionDeniedError

    kept = memory.get_all(user_id="alex")["results"][0]
    memory.delete(kept["id"], user_id="alex")
    seq = memory.history(kept["id"])[-1]["seq"]  # a user's own delete: no operation to undo
    bob = memory.as_subject(user_id="bob")
    memory.relations.create("user:bob", "viewer", ("scope", "user:alex"))
    with pytest.raises(PermissionDeniedError):
        bob.rollback(seq, user_id="alex")
    memory.relations.create("user:bob", "editor", ("scope", "user:alex"))
    with pytest.raises(NotFoundError):  # past the gate, the call itself answers
        bob.rollback(seq, user_id="alex")
