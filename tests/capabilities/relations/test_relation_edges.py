"""Edges of sharing, on each backend: object ids that name exactly one owner whatever
characters the ids hold, a context window or a PAIR round that reads only what the
subject may, visibility changed only by an owner, a ``shared`` playbook reached only
through its owner's own teams, a playbook id that tells nothing to a subject who may
not read it (nor to another tenant), and curation by an editor."""

from __future__ import annotations

import json

import pytest

from memorist import Memory, NotFoundError, PermissionDeniedError, ValidationError
from memorist.policies import relations as rules
from memorist.relations import Target


def _patterns(book: dict) -> list[str]:
    return [s["pattern"] for cat in ("helpful", "harmful", "neutral") for s in book["strategies"][cat]]


def _same_not_found(denied: NotFoundError, missing: NotFoundError, denied_id: str, missing_id: str) -> None:
    assert str(denied).replace(denied_id, "X") == str(missing).replace(missing_id, "X")


# object ids ------------------------------------------------------------------------------
def test_ids_without_slash_colon_or_percent_keep_their_stored_form() -> None:
    """Tuples stored before ids were escaped still read the same."""
    assert Target("alice", "agent_a").key == ("scope", "user:alice/agent:agent_a")
    assert Target("", "agent_a", "default").key == ("playbook", "agent_a/default")
    assert Target("alice", "", "notes", "user").key == ("playbook", "user:alice/notes")
    assert Target("alice", "tutor", "default").key == ("playbook", "user:alice/agent:tutor/default")
    assert Target("", "", "rules", "tenant").key == ("playbook", "tenant/rules")
    assert rules.object_of("scope:agent:agent_a") == ("scope", "agent:agent_a")
    assert rules.object_of("playbook:agent:agent_a/default") == ("playbook", "agent_a/default")


@pytest.mark.parametrize("path", [
    rules.PlaybookPath("agent", "", "team/ops", "default"),
    rules.PlaybookPath("agent", "", "team", "ops/default"),
    rules.PlaybookPath("agent", "", "user:7", "default"),
    rules.PlaybookPath("agent", "", "agent:7", "default"),
    rules.PlaybookPath("agent", "", "tenant", "default"),
    rules.PlaybookPath("agent", "", "global", "default"),
    rules.PlaybookPath("agent", "", "50%", "a%2Fb"),
    rules.PlaybookPath("user", "alice/agent:bob", "", "default"),
    rules.PlaybookPath("user", "alice", "", "agent:bob/default"),
    rules.PlaybookPath("agent", "alice", "bob", "default"),
    rules.PlaybookPath("agent", "a:b", "c/d", "e:f"),
    rules.PlaybookPath("tenant", "", "", "a/b"),
])
def test_every_playbook_path_reads_back_as_the_one_playbook_it_was_made_for(path) -> None:
    key = rules.playbook_key(path)
    assert rules.parse_playbook(key) == path
    assert rules.object_of(("playbook", key)) == ("playbook", key)


def test_different_owners_never_share_an_object_id() -> None:
    paths = [
        rules.PlaybookPath("agent", "", "team/ops", "default"), rules.PlaybookPath("agent", "", "team", "ops/default"),
        rules.PlaybookPath("agent", "", "tenant", "default"), rules.PlaybookPath("tenant", "", "", "default"),
        rules.PlaybookPath("agent", "", "user:alice", "x"), rules.PlaybookPath("user", "alice", "", "x"),
        rules.PlaybookPath("agent", "alice", "bob", "x"), rules.PlaybookPath("user", "alice/agent:bob", "", "x"),
        rules.PlaybookPath("user", "alice", "", "agent:bob/x"),
    ]
    assert len({rules.playbook_key(p) for p in paths}) == len(paths)
    spaces = [("alice", "bob"), ("alice/agent:bob", ""), ("", "alice/agent:bob"), ("user:alice", ""), ("", "user:alice")]
    assert len({rules.space_key(*s) for s in spaces}) == len(spaces)
    assert all(rules.parse_space(rules.space_key(*s)) == s for s in spaces)


def test_the_typed_forms_still_read_and_a_slash_inside_an_id_must_be_escaped() -> None:
    assert rules.object_of("scope:user:user:123") == ("scope", "user:user%3A123")  # a ':' may be typed plainly
    assert rules.object_of("scope:user:user:123/agent:bot") == ("scope", "user:user%3A123/agent:bot")
    assert rules.object_of("playbook:agent:user:7/default") == ("playbook", "user%3A7/default")
    assert rules.object_of("playbook:team%2Fops/default") == ("playbook", "team%2Fops/default")
    assert rules.object_of("playbook:team/ops%2Fdefault") == ("playbook", "team/ops%2Fdefault")
    for ambiguous in ("playbook:team/ops/default", "playbook:user:alice/agent:bob", "scope:user:alice/agent:bob/x"):
        with pytest.raises(ValidationError) as err:
            rules.object_of(ambiguous)
        assert err.value.field == "object" and "%2F" in str(err.value)


def test_an_agent_cannot_reach_another_agent_whose_id_extends_its_own(mem) -> None:
    mem.learning.update_playbook(["Rotate the on-call pager"], agent_id="team/ops")
    team = mem.as_subject(agent_id="team")
    # Once read as agent team's own playbook "ops/default": now refused as ambiguous.
    with pytest.raises(ValidationError):
        team.relations.create(("agent", "team"), "editor", ("playbook", "team/ops/default"))
    with pytest.raises(PermissionDeniedError):  # agent team/ops's playbook, written unambiguously
        team.relations.create(("agent", "team"), "editor", ("playbook", "team%2Fops/default"))
    # Its own playbook named "ops/default" is its own to share.
    assert team.relations.create(("agent", "viewer_x"), "viewer", ("playbook", "team/ops%2Fdefault"))["changed"] is True
    assert _patterns(team.learning.get_playbook("default", agent_id="team/ops")) == []
    with pytest.raises(NotFoundError):
        team.learning.update_playbook(["Injected"], agent_id="team/ops")
    assert _patterns(mem.learning.get_playbook("default", agent_id="team/ops")) == ["Rotate the on-call pager"]
    # The application shares agent team/ops's playbook by its escaped path.
    mem.relations.create(("agent", "team"), "viewer", ("playbook", "team%2Fops/default"))
    assert _patterns(team.learning.get_playbook("default", agent_id="team/ops")) == ["Rotate the on-call pager"]
    assert mem.relations.check("agent:viewer_x", "viewer", "playbook:team/ops%2Fdefault")["allowed"] is True
    assert mem.relations.check("agent:viewer_x", "viewer", "playbook:team%2Fops/default")["allowed"] is False


def test_a_user_cannot_grant_itself_the_space_of_a_user_whose_id_looks_like_its_pair(mem) -> None:
    mem.add("The other user's private fact", user_id="alice/agent:bob", infer=False)
    mem.add("user:123's own fact", user_id="user:123", infer=False)
    alice = mem.as_subject(user_id="alice")
    # "user:alice/agent:bob" is alice's space with agent bob: hers to share, not the other user's.
    alice.relations.create(("user", "alice"), "editor", ("scope", "user:alice/agent:bob"))
    assert alice.get_all(user_id="alice/agent:bob")["results"] == []
    with pytest.raises(PermissionDeniedError):
        alice.relations.create(("user", "alice"), "editor", ("scope", "user:alice%2Fagent%3Abob"))
    # An id holding ':' is shared as it is typed.
    mem.relations.create(("user", "alice"), "viewer", ("scope", "user:user:123"))
    assert [m["memory"] for m in alice.get_all(user_id="user:123")["results"]] == ["user:123's own fact"]
    assert alice.get_all(user_id="alice/agent:bob")["results"] == []


def test_erasing_an_owner_keeps_the_tuples_of_owners_whose_ids_extend_its_own(mem) -> None:
    kept = [Target("", "team/ops", "default").key, Target("", "team/ops").key, Target("", "team/ops", "x", "agent").key,
            Target("alice/agent:bob", "").key, Target("alice/agent:bob", "", "default", "user").key, Target("", "alice").key]
    gone = [Target("", "team", "default").key, Target("", "team", "ops/default").key, Target("alice", "bob").key,
            Target("alice", "", "default", "user").key]
    for obj in kept + gone:
        mem.relations.create(("agent", "x"), "viewer", obj)
    assert len({obj for obj in kept + gone}) == len(kept + gone)
    mem.erase(agent_id="team")
    mem.erase(user_id="alice")
    left = [tuple(r["object"]) for r in mem.relations.list()["results"]]
    assert sorted(left) == sorted(kept)


def test_escaped_tuples_travel_through_export_and_import(mem, backend) -> None:
    grants = [
        (("agent", "x/y"), "viewer", ("playbook", "team%2Fops/default")),
        (("user", "user:1"), "editor", ("scope", "user:user%3A1/agent:a%25b")),
        (("group", "g/1"), "viewer", ("playbook", "agent:tenant/rules")),
    ]
    for grant in grants:
        mem.relations.create(*grant)
    lines = [json.dumps(item) for item in mem.export(all_scopes=True)]
    with Memory(backend.fresh(), embedder="hashing") as copy:
        assert copy.import_(lines)["relations"] == len(grants)
        assert copy.relations.list()["results"] == mem.relations.list()["results"]
        assert copy.relations.check(("agent", "x/y"), "viewer", ("playbook", "team%2Fops/default"))["allowed"] is True
        assert copy.relations.check(("agent", "x/y"), "viewer", ("playbook", "team/ops%2Fdefault"))["allowed"] is False


# context windows and PAIR rounds ------------------------------------------------------------
_CRITERIA = "1. States the passport number of Alice\n2. Cites the source document\n3. Gives the expiry date"


def test_a_subject_s_context_and_pair_read_only_what_it_may(mem) -> None:
    mem.add("Alice passport number is 998877", user_id="alice", agent_id="agent_x", infer=False)
    mem.add("Alice passport expires in 2031", user_id="alice", agent_id="agent_b", infer=False)
    pair = mem.as_subject(user_id="alice", agent_id="agent_b")
    with pytest.raises(NotFoundError) as denied:
        pair.minutes.build_context("agent_x", "passport number")
    with pytest.raises(NotFoundError) as missing:
        pair.minutes.build_context("nobody", "passport number")
    _same_not_found(denied.value, missing.value, "agent_x", "nobody")
    with pytest.raises(NotFoundError):
        pair.minutes.pair_round("What is Alice passport number", _CRITERIA, "Hello", agent_id="agent_x")
    own = pair.minutes.build_context("agent_b", "passport number").to_dict()
    assert "2031" in json.dumps(own) and "998877" not in json.dumps(own)
    found = json.dumps(pair.minutes.pair_round("What is Alice passport number", _CRITERIA, "Hello"))
    assert "2031" in found and "998877" not in found
    # The user itself owns the project: all of it.
    assert "998877" in json.dumps(mem.as_subject(user_id="alice").minutes.pair_round("What is Alice passport number", _CRITERIA, "Hello"))
    # A relation on the other agent's space opens its context; one on the user's scope, the whole project.
    mem.relations.create(("agent", "agent_b"), "viewer", ("scope", "user:alice/agent:agent_x"))
    assert "998877" in json.dumps(pair.minutes.build_context("agent_x", "passport number").to_dict())
    assert "998877" not in json.dumps(pair.minutes.pair_round("What is Alice passport number", _CRITERIA, "Hello"))
    mem.relations.create(("agent", "agent_b"), "viewer", ("scope", "user:alice"))
    assert "998877" in json.dumps(pair.minutes.pair_round("What is Alice passport number", _CRITERIA, "Hello"))


# visibility --------------------------------------------------------------------------------
def test_only_an_owner_changes_a_playbook_s_visibility(mem) -> None:
    mem.learning.create_playbook("secret", agent_id="agent_a")
    mem.learning.update_playbook([{"pattern": "Use key XYZ"}], name="secret", agent_id="agent_a")
    mem.relations.create(("agent", "agent_b"), "editor", ("playbook", "agent_a/secret"))
    editor, stranger = mem.as_subject(agent_id="agent_b"), mem.as_subject(agent_id="agent_c")
    for visibility in ("tenant", "shared"):
        with pytest.raises(PermissionDeniedError, match="visibility"):
            editor.learning.create_playbook("secret", agent_id="agent_a", visibility=visibility)
    assert _patterns(stranger.learning.get_playbook("secret", agent_id="agent_a")) == []
    assert mem.learning.get_playbook("secret", agent_id="agent_a")["visibility"] == "private"
    # What leaves the visibility as it is stays an editor's.
    editor.learning.create_playbook("secret", agent_id="agent_a", visibility="private", description="Keys")
    assert mem.learning.get_playbook("secret", agent_id="agent_a")["description"] == "Keys"
    # An owner relation lets it.
    mem.relations.create(("agent", "agent_b"), "owner", ("playbook", "agent_a/secret"))
    editor.learning.create_playbook("secret", agent_id="agent_a", visibility="tenant")
    assert _patterns(stranger.learning.get_playbook("secret", agent_id="agent_a")) == ["Use key XYZ"]


def test_a_shared_playbook_reaches_only_its_owner_s_teams(mem) -> None:
    mem.learning.create_playbook("sh", agent_id="victim", visibility="shared")
    mem.learning.update_playbook(["Team-only tip"], name="sh", agent_id="victim")
    mem.relations.create(("agent", "mallory"), "owner", ("group", "mallory_club"))
    mallory = mem.as_subject(agent_id="mallory")
    # Mallory enrols the owner into her own group: no team of the owner's.
    mallory.relations.create(("agent", "victim"), "member", ("group", "mallory_club"))
    mallory.relations.create(("agent", "mallory"), "member", ("group", "mallory_club"))
    assert _patterns(mallory.learning.get_playbook("sh", agent_id="victim")) == []
    # Nor through a group of the tenant's that her group is in.
    mem.relations.create(("group", "mallory_club"), "member", ("group", "company"))
    assert _patterns(mallory.learning.get_playbook("sh", agent_id="victim")) == []
    assert mem.relations.check(("agent", "mallory"), "viewer", ("playbook", "victim/sh"))["allowed"] is False
    # A group the owner manages is its team: whoever it admits reads.
    mem.relations.create(("agent", "victim"), "owner", ("group", "victims_team"))
    victim = mem.as_subject(agent_id="victim")
    victim.relations.create(("agent", "friend"), "member", ("group", "victims_team"))
    assert _patterns(mem.as_subject(agent_id="friend").learning.get_playbook("sh", agent_id="victim")) == ["Team-only tip"]
    # So is a group the tenant manages (nobody holds owner of it) with the owner in it.
    mem.relations.create(("agent", "victim"), "member", ("group", "staff"))
    mem.relations.create(("agent", "colleague"), "member", ("group", "staff"))
    assert _patterns(mem.as_subject(agent_id="colleague").learning.get_playbook("sh", agent_id="victim")) == ["Team-only tip"]
    assert _patterns(mallory.learning.get_playbook("sh", agent_id="victim")) == []


# playbook ids ----------------------------------------------------------------------------
def test_a_playbook_id_tells_nothing_to_a_subject_that_may_not_read_it(mem) -> None:
    playbook_id = mem.learning.create_playbook("secret", agent_id="agent_a")
    missing_id = "0190c0de-0000-7000-8000-000000000000"
    agent_b = mem.as_subject(agent_id="agent_b")
    calls = [
        lambda pid: agent_b.relations.check(("agent", "agent_b"), "viewer", ("playbook", pid)),
        lambda pid: agent_b.relations.create(("agent", "agent_b"), "viewer", ("playbook", pid)),
        lambda pid: agent_b.relations.delete(("agent", "agent_b"), "viewer", ("playbook", pid)),
        lambda pid: agent_b.relations.list(object=("playbook", pid)),
    ]
    for call in calls:
        with pytest.raises(NotFoundError) as denied:
            call(playbook_id)
        with pytest.raises(NotFoundError) as missing:
            call(missing_id)
        _same_not_found(denied.value, missing.value, playbook_id, missing_id)
    # One it may read is named by its path.
    mem.relations.create(("agent", "agent_b"), "viewer", ("playbook", "agent_a/secret"))
    assert agent_b.relations.check(("agent", "agent_b"), "viewer", ("playbook", playbook_id))["object"] == ["playbook", "agent_a/secret"]
    assert mem.relations.check(("agent", "agent_c"), "viewer", ("playbook", playbook_id))["object"] == ["playbook", "agent_a/secret"]


def test_a_tenant_resolves_its_own_and_the_global_playbook_ids_only(backend) -> None:
    with Memory(backend.target, embedder="hashing") as base, Memory(backend.target, embedder="hashing", tenant_id="acme") as acme:
        untenanted = base.learning.update_playbook(["Untenanted secret"], agent_id="agent_hidden", name="ops")
        of_user = base.learning.update_playbook(["Untenanted user secret"], user_id="u", name="ops")
        everyone = base.learning.update_playbook(["For everyone"], scope="global", name="rules")
        for pid in (untenanted, of_user):
            with pytest.raises(NotFoundError):
                acme.relations.create(("agent", "x"), "viewer", ("playbook", pid))
            with pytest.raises(NotFoundError):
                acme.as_subject(agent_id="x").relations.check(("agent", "x"), "viewer", ("playbook", pid))
        assert acme.relations.list() == {"results": []}
        assert acme.as_subject(agent_id="x").relations.check(("agent", "x"), "viewer", ("playbook", everyone)) == {
            "subject": ["agent", "x"], "relation": "viewer", "object": ["playbook", "global/rules"], "allowed": True, "via": "visibility"}
        # The default tenant's own ids resolve for it.
        assert base.relations.check(("agent", "x"), "viewer", ("playbook", untenanted))["object"] == ["playbook", "agent_hidden/ops"]


# curation ----------------------------------------------------------------------------------
def _reflection(memory: Memory, agent: str) -> str:
    tid = memory.learning.start_trajectory("Fetch users", "api_call", agent_id=agent)
    memory.learning.log_step(tid, "decision", "Use exponential backoff", agent_id=agent)
    memory.learning.complete_trajectory(tid, "success", agent_id=agent)
    return memory.learning.reflect(tid, agent_id=agent)["memory_id"]


def test_an_editor_curates_from_reflections_it_may_read(mem) -> None:
    mem.learning.update_playbook(["Tip"], agent_id="agent_a")
    reflection = _reflection(mem, "agent_a")
    mem.relations.create(("agent", "agent_b"), "editor", ("playbook", "agent_a/default"))
    learning = mem.as_subject(agent_id="agent_b").learning
    assert learning.get_playbook("default", agent_id="agent_a")["version"] == 1
    with pytest.raises(PermissionDeniedError, match="agent:agent_a"):
        learning.curate_playbook([reflection], agent_id="agent_a")
    # A subject that may not see the playbook either: as a missing agent; one that only reads it: as a viewer's write.
    with pytest.raises(NotFoundError, match="agent not found"):
        mem.as_subject(agent_id="agent_c").learning.curate_playbook([reflection], agent_id="agent_a")
    mem.relations.create(("agent", "agent_c"), "viewer", ("playbook", "agent_a/default"))
    with pytest.raises(PermissionDeniedError, match="editor"):
        mem.as_subject(agent_id="agent_c").learning.curate_playbook([reflection], agent_id="agent_a")
    mem.relations.create(("agent", "agent_b"), "viewer", ("scope", "agent:agent_a"))
    result = learning.curate_playbook([reflection], agent_id="agent_a")
    assert [s["pattern"] for s in result["added"]] == ["Use exponential backoff"]
    # A viewer of both still may not write the playbook.
    mem.relations.delete(("agent", "agent_b"), "editor", ("playbook", "agent_a/default"))
    with pytest.raises(PermissionDeniedError, match="editor"):
        learning.curate_playbook([_reflection(mem, "agent_a")], agent_id="agent_a")


# over the service --------------------------------------------------------------------------
@pytest.fixture
def served(backend):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from memorist.server import create_app
    from service_helpers import UNLIMITED

    Memory(backend.target, embedder="hashing").close()
    app = create_app(backend.target, embedder="hashing", limits=UNLIMITED)
    with TestClient(app) as client:
        yield client, backend.target
    app.state.service.close()


def test_an_agent_key_cannot_share_itself_an_agent_whose_id_extends_its_own(served) -> None:
    from service_helpers import assert_error, key_headers

    client, db = served
    acme, team = key_headers(db, "acme"), key_headers(db, "acme", agent="team")
    r = client.put("/api/playbooks/default/", json={"strategies": [{"pattern": "Victim secret"}], "agent_id": "team/ops"}, headers=acme)
    assert r.status_code == 200, r.text
    grant = {"subject": "agent:team", "relation": "editor", "object": "playbook:team/ops/default"}
    assert_error(client.post("/api/relations/", json=grant, headers=team), 422, "validation_error", "object")
    assert_error(client.post("/api/relations/", json={**grant, "object": "playbook:team%2Fops/default"}, headers=team), 403, "forbidden")
    assert_error(client.get("/api/playbooks/default/", params={"agent_id": "team/ops"}, headers=team), 404, "not_found")
    write = client.put("/api/playbooks/default/", json={"strategies": [{"pattern": "Injected"}], "agent_id": "team/ops"}, headers=team)
    assert_error(write, 404, "not_found")
    # The tenant shares it by its escaped path, in a query string too.
    assert client.post("/api/relations/", json={**grant, "relation": "viewer", "object": "playbook:team%2Fops/default"},
                       headers=acme).status_code == 200
    assert client.get("/api/playbooks/default/", params={"agent_id": "team/ops"}, headers=team).status_code == 200
    check = client.get("/api/relations/check/", params={"subject": "agent:team", "relation": "viewer",
                                                         "object": "playbook:team%2Fops/default"}, headers=team)
    assert check.json()["allowed"] is True and check.json()["object"] == ["playbook", "team%2Fops/default"]


def test_a_user_and_agent_key_s_context_and_pair_read_only_its_agent(served) -> None:
    from service_helpers import key_headers

    client, db = served
    acme, pair = key_headers(db, "acme"), key_headers(db, "acme", user="alice", agent="agent_b")
    for text, agent in (("Alice passport number is 998877", "agent_x"), ("Alice passport expires in 2031", "agent_b")):
        r = client.post("/api/memories/", json={"messages": text, "user_id": "alice", "agent_id": agent, "infer": False}, headers=acme)
        assert r.status_code == 200, r.text
    assert client.get("/api/memories/alice/", params={"agent_id": "agent_x"}, headers=pair).status_code == 404
    denied = client.post("/api/context/", json={"agent_id": "agent_x", "task": "passport number"}, headers=pair)
    missing = client.post("/api/context/", json={"agent_id": "nobody", "task": "passport number"}, headers=pair)
    assert denied.status_code == missing.status_code == 404
    assert denied.json()["error"]["message"].replace("agent_x", "X") == missing.json()["error"]["message"].replace("nobody", "X")
    body = {"task": "What is Alice passport number", "criteria": _CRITERIA, "output": "Hello"}
    assert client.post("/api/pair/", json={**body, "agent_id": "agent_x"}, headers=pair).status_code == 404
    r = client.post("/api/pair/", json=body, headers=pair)
    assert r.status_code == 200 and "2031" in r.text and "998877" not in r.text, r.text
    own = client.post("/api/context/", json={"agent_id": "agent_b", "task": "passport number"}, headers=pair)
    assert own.status_code == 200 and "2031" in own.text and "998877" not in own.text
    # The tenant key reads the whole project, as before.
    assert "998877" in client.post("/api/pair/", json={**body, "project_id": "alice"}, headers=acme).text
