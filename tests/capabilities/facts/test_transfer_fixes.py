"""Export and import after the store changed a memory without new dates (a rollback),
what a memories-json file holds, lines of no tenant, a trajectory's steps, and
playbooks that join one of their name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memorist import ImportLineError, Memory, ValidationError
from memorist.cli import cli
from memorist.pipelines.transfer import memories_json_items, memories_json_memories


def run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(cli, ["--embedder", "hashing", *args], env={"MEMORIST_TENANT": None, **(env or {})})
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    return result


def texts(memory: Memory, **scope: str) -> list[str]:
    return sorted(r["memory"] for r in memory.get_all(**scope)["results"])


def with_internal_records(m: Memory) -> None:
    """A fact of alice's, and beside it a playbook (header, version, strategy) and a trajectory."""
    m.add("Alice likes green tea", user_id="alice", infer=False)
    m.learning.update_playbook([{"pattern": "Alice strat"}], user_id="alice")
    tid = m.learning.start_trajectory("Fetch weather", user_id="alice")
    m.learning.complete_trajectory(tid, "success", user_id="alice")


# an export taken before a rollback --------------------------------------------------------------
def test_an_export_taken_before_a_rollback_does_not_undo_it(backend) -> None:
    """The rollback restores the originals as they were, dates and all: the file's
    archived copies (and its merged memory) are older than it and change nothing."""
    with Memory(backend.target, embedder="hashing") as m:
        for text in ("Likes jazz music a lot", "Likes jazz music a lot!"):
            m.add(text, user_id="alice", infer=False, importance=0.1)
        run_id = m.learning.consolidate(user_id="alice")["run_id"]
        before = list(m.export(user_id="alice"))
        assert sorted(line["status"] for line in before) == ["active", "archived", "archived"]
        m.rollback(run_id, user_id="alice")
        summary = m.import_(before)
        assert (summary["updated"], summary["added"], summary["unchanged"], summary["skipped"]) == (0, 0, 2, 1)
        assert texts(m, user_id="alice") == ["Likes jazz music a lot", "Likes jazz music a lot!"]
        assert m.import_(before)["updated"] == 0


def test_a_copy_changed_after_the_rollback_still_wins(backend) -> None:
    """The rollback dates the store's copy, it does not freeze it: a file's copy
    edited after it (in another store) is newer."""
    with Memory(backend.target, embedder="hashing") as m, Memory(backend.fresh(), embedder="hashing") as other:
        for text in ("Likes jazz music a lot", "Likes jazz music a lot!"):
            m.add(text, user_id="alice", infer=False, importance=0.1)
        m.rollback(m.learning.consolidate(user_id="alice")["run_id"], user_id="alice")
        other.import_(list(m.export(user_id="alice")))
        first = next(r for r in other.get_all(user_id="alice")["results"] if r["memory"] == "Likes jazz music a lot")
        other.update(first["id"], "Loves jazz")
        assert m.import_(list(other.export(user_id="alice")))["updated"] == 1
        assert m.get(first["id"])["memory"] == "Loves jazz"


# memories-json holds memories only ---------------------------------------------------------------
def test_bookkeeping_in_the_store_does_not_make_its_copy_newer_than_an_edit(tmp_path: Path) -> None:
    """A decay (or a boost) leaves a memory's dates as they were and is no edit: a copy
    edited elsewhere since still wins over the store's."""
    import time

    with Memory(str(tmp_path / "s.db"), embedder="hashing", policy="energy") as source, \
            Memory(str(tmp_path / "t.db"), embedder="hashing", policy="energy") as target:
        mid = source.add("The office opens at 9", user_id="u", infer=False, timestamp=time.time() - 10 * 3600,
                         metadata={"energy": 50.0})["results"][0]["id"]
        target.import_(list(source.export(user_id="u")))
        time.sleep(0.05)
        source.update(mid, "The office opens at 8", user_id="u")
        time.sleep(0.05)
        assert target.tiers.maintain()["decayed"] == 1
        target.tiers.boost(mid, user_id="u")
        assert target.import_(list(source.export(user_id="u")))["updated"] == 1
        assert target.get(mid, user_id="u")["memory"] == "The office opens at 8"


def test_a_memories_json_file_holds_the_users_memories_only(backend) -> None:
    with Memory(backend.target, embedder="hashing") as m:
        with_internal_records(m)
        memories = memories_json_memories(m.export(all_scopes=True))
        assert [x["memory"] for x in memories] == ["Alice likes green tea"]


def test_a_memories_json_file_with_the_engines_records_is_refused() -> None:
    """A file written by an earlier release may hold playbooks and trajectories: they
    would come back as facts, so the file is refused, naming the first."""
    header = {"id": "p1", "memory": "Playbook default", "user_id": "alice", "run_id": "memorist:playbook",
              "created_at": "2024-01-01T00:00:00Z"}
    fact = {"id": "m1", "memory": "Likes tea", "user_id": "alice", "created_at": "2024-01-01T00:00:00Z"}
    with pytest.raises(ValidationError, match=r"memories\[1\]\.run_id: 'memorist:playbook' is a run Memorist keeps"):
        memories_json_items([fact, header])


@pytest.mark.sqlite_only("the CLI on a store file")
def test_memories_json_export_and_import_carry_no_internal_record(tmp_path: Path) -> None:
    with Memory(str(tmp_path / "src.db"), embedder="hashing") as m:
        with_internal_records(m)
    out = tmp_path / "mj.json"
    run("--db", str(tmp_path / "src.db"), "export", "--all", "--format", "memories-json", "-o", str(out))
    assert [x["memory"] for x in json.loads(out.read_text())] == ["Alice likes green tea"]
    run("--db", str(tmp_path / "dst.db"), "import", "--format", "memories-json", str(out))
    listed = json.loads(run("--db", str(tmp_path / "dst.db"), "--json", "list", "--user", "alice").output)["results"]
    assert [r["memory"] for r in listed] == ["Alice likes green tea"]
    # A file of an earlier release's export: refused whole, and no store is made.
    old = [*json.loads(out.read_text()), {"id": "t1", "memory": "Fetch weather", "user_id": "alice",
                                          "run_id": "memorist:trajectories", "created_at": "2024-01-01T00:00:00Z"}]
    out.write_text(json.dumps(old), encoding="utf-8")
    result = run("--db", str(tmp_path / "new.db"), "import", "--format", "memories-json", str(out), code=1)
    assert "memories[1].run_id" in result.output and "holds memories only" in result.output
    assert not (tmp_path / "new.db").exists()


# a line of no tenant belongs to the importing Memory's -----------------------------------------------
def test_a_line_of_no_tenant_is_the_importing_tenants(backend) -> None:
    with Memory(backend.target, embedder="hashing", tenant_id="acme") as acme:
        line = {"type": "memory", "id": "abc-1", "memory": "hand written", "user_id": "u1", "created_at": "2024-01-01T00:00:00Z"}
        assert acme.import_([line])["added"] == 1
        assert next(acme.export(user_id="u1"))["tenant_id"] == "acme"
        with pytest.raises(ImportLineError, match="line 1: the memory belongs to tenant 'other'"):
            acme.import_([{**line, "id": "abc-2", "tenant_id": "other"}])
        with pytest.raises(ImportLineError, match="line 1: the memory belongs to tenant ''"):
            acme.import_([{**line, "id": "abc-3", "tenant_id": ""}])  # the default tenant, named


@pytest.mark.sqlite_only("the CLI on a store file")
def test_memories_json_imports_into_a_named_tenant(tmp_path: Path) -> None:
    source = tmp_path / "memories.json"
    source.write_text(json.dumps([{"id": "mem_1", "memory": "Likes tea", "user_id": "alex", "created_at": "2024-01-01T00:00:00Z"}]))
    acme = {"MEMORIST_TENANT": "acme"}
    assert "added 1 memories" in run("--db", str(tmp_path / "t.db"), "import", "--format", "memories-json", str(source), env=acme).output
    listed = json.loads(run("--db", str(tmp_path / "t.db"), "--json", "list", "--user", "alex", env=acme).output)["results"]
    assert [r["memory"] for r in listed] == ["Likes tea"]


# a trajectory's steps ---------------------------------------------------------------------------------
def test_a_trajectorys_logged_steps_come_along(backend) -> None:
    """An unsampled success keeps its steps in the log alone: its line carries them."""
    with Memory(backend.target, embedder="hashing") as m, Memory(backend.fresh(), embedder="hashing") as copy:
        m.learning_config = {"trajectory_sample_rate": 0.0}
        tid = m.learning.start_trajectory("Fetch weather", agent_id="a1")
        m.learning.log_step(tid, "action", "called the api", {"url": "/weather"}, agent_id="a1")
        running = list(m.export(agent_id="a1"))  # taken while it runs
        m.learning.log_step(tid, "observation", "got 200", agent_id="a1")
        m.learning.complete_trajectory(tid, "success", agent_id="a1")
        steps = m.learning.get_trajectory(tid, agent_id="a1")["steps"]
        assert [s["description"] for s in steps] == ["called the api", "got 200"]
        assert copy.import_(running)["added"] == 1
        assert copy.learning.get_trajectory(tid, agent_id="a1")["steps"] == steps[:1]
        exported = list(m.export(agent_id="a1", events=True))
        assert copy.import_(exported)["updated"] == 1  # completed since: its later step is logged too
        assert copy.learning.get_trajectory(tid, agent_id="a1")["steps"] == steps  # times included
        assert copy.import_(exported)["updated"] == 0
        assert copy.learning.get_trajectory(tid, agent_id="a1")["steps"] == steps
        assert list(copy.export(agent_id="a1")) == [line for line in exported if line["type"] == "memory"]


def test_steps_on_a_line_that_is_no_trajectory_are_refused(backend) -> None:
    line = {"type": "memory", "id": "m1", "memory": "a fact", "user_id": "u", "created_at": "2024-01-01T00:00:00Z",
            "steps": [{"type": "action", "description": "x"}]}
    with Memory(backend.target, embedder="hashing") as m, pytest.raises(ImportLineError, match="line 1: steps: are a trajectory's"):
        m.import_([line])


# a playbook that joins one of its name -----------------------------------------------------------------
def test_a_joining_playbook_is_counted_as_joined(backend) -> None:
    with Memory(backend.target, embedder="hashing") as a, Memory(backend.fresh(), embedder="hashing") as b:
        a.learning.update_playbook([{"pattern": "Check inputs"}], agent_id="a1")
        b.learning.update_playbook([{"pattern": "Existing"}], agent_id="a1")
        lines = list(a.export(all_scopes=True))
        summary = b.import_(lines)
        assert (summary["added"], summary["joined"], summary["skipped"]) == (1, 2, 2)
        again = b.import_(lines)
        assert (again["joined"], again["skipped"]) == (2, 2)


@pytest.mark.sqlite_only("the CLI on a store file")
def test_the_import_summary_says_joined_not_deleted(tmp_path: Path) -> None:
    run("--db", str(tmp_path / "a.db"), "playbook", "update", "--agent", "a1", "--pattern", "Check inputs")
    run("--db", str(tmp_path / "a.db"), "export", "--all", "-o", str(tmp_path / "a.jsonl"))
    run("--db", str(tmp_path / "b.db"), "playbook", "update", "--agent", "a1", "--pattern", "Existing")
    said = run("--db", str(tmp_path / "b.db"), "import", str(tmp_path / "a.jsonl")).output
    assert "added 1 memories, 2 joined the playbook of that name already here." in said
    assert "deleted here since" not in said
