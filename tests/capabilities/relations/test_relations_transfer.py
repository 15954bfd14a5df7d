"""Relation tuples travel with a whole-tenant export: imported into an empty store they
are the same tuples and make the same access decisions; importing twice changes
nothing; a malformed tuple line is an error naming the line. On both backends."""

from __future__ import annotations

import json

import pytest

from memorist import ImportLineError, Memory

_GRANTS = [
    (("agent", "agent_b"), "viewer", ("playbook", "agent_a/default")),
    (("user", "bob"), "member", ("group", "launch")),
    (("group", "launch"), "editor", ("scope", "user:alice")),
    (("agent", "agent_c"), "owner", ("scope", "agent:agent_a")),
]
_QUESTIONS = [
    (("agent", "agent_b"), "viewer", ("playbook", "agent_a/default")),
    (("agent", "agent_b"), "editor", ("playbook", "agent_a/default")),
    (("user", "bob"), "editor", ("scope", "user:alice")),
    (("user", "carol"), "viewer", ("scope", "user:alice")),
    (("agent", "agent_c"), "editor", ("playbook", "agent_a/default")),
    (("user", "bob"), "member", ("group", "launch")),
]


def _tuples(memory: Memory) -> list[tuple]:
    return sorted((tuple(t["subject"]), t["relation"], tuple(t["object"]), t["created_at"]) for t in memory.relations.list(limit=1000)["results"])


def _decisions(memory: Memory) -> list[tuple[bool, str | None]]:
    return [(c["allowed"], c["via"]) for c in (memory.relations.check(*q) for q in _QUESTIONS)]


def _seeded(target: str, tenant: str = "acme") -> Memory:
    memory = Memory(target, embedder="hashing", tenant_id=tenant)
    memory.learning.update_playbook([{"pattern": "Retry with backoff"}], agent_id="agent_a")
    memory.add("Alice's launch is on May 3", user_id="alice", infer=False)
    for grant in _GRANTS:
        assert memory.relations.create(*grant)["changed"] is True
    return memory


def test_export_and_import_carry_the_tenant_s_relation_tuples(backend) -> None:
    source = _seeded(backend.target)
    lines = [json.dumps(item) for item in source.export(all_scopes=True)]
    relation_lines = [json.loads(line) for line in lines if json.loads(line)["type"] == "relation"]
    assert len(relation_lines) == len(_GRANTS)
    assert all(set(item) == {"type", "subject", "relation", "object", "created_at", "tenant_id"} for item in relation_lines)
    assert {item["tenant_id"] for item in relation_lines} == {"acme"}
    # A scope's export is its memories only: tuples are the tenant's.
    assert not [i for i in source.export(user_id="alice") if i["type"] == "relation"]

    with Memory(backend.fresh(), embedder="hashing", tenant_id="acme") as target:
        assert _decisions(target) != _decisions(source)
        summary = target.import_(lines)
        assert summary["relations"] == len(_GRANTS)
        assert _tuples(target) == _tuples(source), "the same tuples, dates included"
        assert _decisions(target) == _decisions(source)
        agent_b = target.as_subject(agent_id="agent_b")
        assert [s["pattern"] for s in agent_b.learning.get_playbook("default", agent_id="agent_a")["strategies"]["helpful"]] == [
            "Retry with backoff"]
        bob = target.as_subject(user_id="bob")
        assert [m["memory"] for m in bob.get_all(user_id="alice")["results"]] == ["Alice's launch is on May 3"]

        # Twice: nothing changes, and a re-export is the same file.
        again = target.import_(lines)
        assert again["relations"] == 0 and again["added"] == 0
        assert _tuples(target) == _tuples(source)
        assert [json.dumps(i) for i in target.export(all_scopes=True)] == lines
    source.close()


def test_tuples_stay_in_their_tenant(backend) -> None:
    source = _seeded(backend.target, tenant="acme")
    lines = [json.dumps(item) for item in source.export(all_scopes=True)]
    source.close()
    target = backend.fresh()
    with Memory(target, embedder="hashing", tenant_id="acme") as acme:
        acme.import_(lines)
    with Memory(target, embedder="hashing", tenant_id="globex") as globex:
        assert globex.relations.list()["results"] == []
        assert globex.relations.check(("agent", "agent_b"), "viewer", ("playbook", "agent_a/default"))["allowed"] is False
        # acme's tuples are not imported into globex, even alone.
        tuples_only = [line for line in lines if json.loads(line)["type"] == "relation"]
        with pytest.raises(ImportLineError) as err:
            globex.import_(tuples_only)
        assert err.value.line == 1 and "tenant 'acme'" in str(err.value)
        assert globex.relations.list()["results"] == []


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ({"type": "relation", "subject": "robot:x", "relation": "viewer", "object": "scope:user:alice"}, "subject"),
        ({"type": "relation", "subject": "user:bob", "relation": "boss", "object": "scope:user:alice"}, "relation"),
        ({"type": "relation", "subject": "user:bob", "relation": "viewer"}, "object"),
        ({"type": "relation", "subject": "user:bob", "relation": "member", "object": "scope:user:alice"}, "member"),
        ({"type": "relation", "subject": "user:bob", "relation": "viewer", "object": "playbook:0b5c1f1e-not-a-path"}, "path"),
        ({"type": "relation", "subject": "user:bob", "relation": "viewer", "object": "scope:user:alice", "created_at": "soon"}, "created_at"),
        ({"type": "relation", "subject": "user:bob", "relation": "viewer", "object": "scope:user:alice", "extra": 1}, "extra"),
    ],
)
def test_a_malformed_tuple_line_is_named_and_the_lines_before_it_stay(backend, line, said) -> None:
    good = {"type": "relation", "subject": ["agent", "agent_b"], "relation": "viewer", "object": ["scope", "agent:agent_a"], "tenant_id": "acme"}
    line = {**line, "tenant_id": "acme"}
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as memory:
        with pytest.raises(ImportLineError) as err:
            memory.import_([json.dumps(good), json.dumps(line)])
        assert err.value.line == 2 and said in str(err.value), str(err.value)
        listed = memory.relations.list()["results"]
        assert [(t["subject"], t["relation"], t["object"]) for t in listed] == [(["agent", "agent_b"], "viewer", ["scope", "agent:agent_a"])]


@pytest.mark.sqlite_only("the CLI opens a store file")
def test_the_cli_round_trip(backend, tmp_path) -> None:
    from click.testing import CliRunner

    from memorist.cli import cli

    _seeded(backend.target, tenant="").close()
    out = tmp_path / "all.jsonl"
    run = CliRunner().invoke
    r = run(cli, ["--db", backend.target, "export", "--all", "--output", str(out)])
    assert r.exit_code == 0, r.output
    target = backend.fresh()
    r = run(cli, ["--db", target, "--embedder", "hashing", "import", str(out)])
    assert r.exit_code == 0 and f"{len(_GRANTS)} relation tuples" in r.output, r.output
    r = run(cli, ["--db", target, "relations", "check", "agent:agent_b", "viewer", "playbook:agent_a/default"])
    assert "allowed (via grant)" in r.output, r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "relation", "subject": "user:dave", "relation": "viewer", "object": "scope:user:alice"}\n'
                   '{"type": "relation", "subject": "user:bob", "relation": "viewer", "object": "scope:nowhere"}\n')
    r = run(cli, ["--db", target, "--embedder", "hashing", "import", str(bad)])
    assert r.exit_code == 1 and "line 2" in r.output and "object" in r.output, r.output
    r = run(cli, ["--db", target, "relations", "check", "user:dave", "viewer", "scope:user:alice"])
    assert "allowed (via grant)" in r.output, "the line before the bad one stays"
