"""Deleting one playbook: its strategies, its versions and itself go; everything else
stays; an unknown one is not found. On both backends, and through the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memorist.cli import cli
from memorist.errors import NotFoundError, ValidationError
from memorist.model import Kind, Status
from memorist.store.base import ScopeFilter


def _fill(mem, name: str, user: str, patterns: list[str]) -> None:
    for pattern in patterns:
        mem.learning.update_playbook([{"pattern": pattern}], name, user_id=user)


def test_delete_playbook_removes_its_strategies_and_versions_only(mem) -> None:
    _fill(mem, "study", "alex", ["Draw the problem first", "Check units", "Say it aloud"])
    _fill(mem, "other", "alex", ["Keep this one"])
    _fill(mem, "study", "sam", ["Sam keeps his"])
    mem.add("Alex likes tea", user_id="alex", infer=False)
    versions = mem.learning.list_playbook_versions("study", user_id="alex")
    assert len(versions) == 3

    result = mem.learning.delete_playbook("study", user_id="alex")
    assert (result["name"], result["scope"], result["strategies"], result["versions"]) == ("study", "user", 3, 3)
    assert result["playbook_id"]

    assert [p["name"] for p in mem.learning.list_playbooks(user_id="alex")] == ["other"]
    view = mem.learning.get_playbook("study", user_id="alex")
    assert (view["playbook_id"], view["version"], view["size"]) == (None, 0, 0)
    assert mem.learning.list_playbook_versions("study", user_id="alex") == []
    with pytest.raises(NotFoundError):
        mem.learning.get_playbook_version("study", 1, user_id="alex")
    space = ScopeFilter("", "alex", "")
    left = [r for r in mem.store.list(space) if r.metadata.get("playbook") == "study" or r.metadata.get("name") == "study"]
    assert left == [], "no strategy, version or header of it is active"
    deleted = mem.store.list(space, status=Status.DELETED)
    assert {r.kind for r in deleted} >= {Kind.PLAYBOOK, Kind.PLAYBOOK_VERSION}
    assert mem.learning.get_playbook("other", user_id="alex")["size"] == 1
    assert mem.learning.get_playbook("study", user_id="sam")["size"] == 1
    assert [m["memory"] for m in mem.get_all(user_id="alex")["results"]] == ["Alex likes tea"]

    # It can be made again from nothing.
    _fill(mem, "study", "alex", ["A fresh start"])
    again = mem.learning.get_playbook("study", user_id="alex")
    assert again["size"] == 1 and again["version"] == 1


def test_an_unknown_playbook_is_not_found_and_bad_names_are_refused(mem) -> None:
    _fill(mem, "study", "alex", ["Draw the problem first"])
    with pytest.raises(NotFoundError, match="playbook"):
        mem.learning.delete_playbook("nope", user_id="alex")
    with pytest.raises(NotFoundError):
        mem.learning.delete_playbook("study", user_id="sam")  # another user's name finds nothing
    with pytest.raises(ValidationError, match="scope"):
        mem.learning.delete_playbook("study", user_id="alex", scope="galaxy")
    mem.learning.delete_playbook("study", user_id="alex")
    with pytest.raises(NotFoundError):
        mem.learning.delete_playbook("study", user_id="alex")  # deleted: not found the second time


@pytest.mark.sqlite_only("the CLI on a store file")
def test_playbook_delete_on_the_command_line(backend) -> None:
    def run(*args: str, code: int = 0, input: str | None = None):
        result = CliRunner().invoke(cli, ["--db", backend.target, "--embedder", "hashing", *args], input=input, catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result

    run("playbook", "update", "study", "--user", "alex", "--pattern", "Draw the problem first")
    run("playbook", "delete", "study", "--user", "alex", input="n\n", code=1)  # asked, refused: nothing deleted
    assert json.loads(run("--json", "playbook", "get", "study", "--user", "alex").output)["size"] == 1
    out = json.loads(run("--json", "playbook", "delete", "study", "--user", "alex", "--yes").output)
    assert (out["strategies"], out["versions"]) == (1, 1)
    missing = run("playbook", "delete", "study", "--user", "alex", "--yes", code=1)
    assert "playbook not found: 'study'" in missing.output


def test_only_an_owner_of_a_shared_playbook_deletes_it(tmp_path) -> None:
    from memorist import Memory
    from memorist.errors import NotFoundError, PermissionDeniedError

    with Memory(str(tmp_path / "m.db"), embedder="hashing") as m:
        m.learning.update_playbook([{"pattern": "Retry with backoff"}], agent_id="agent_a")
        b = m.as_subject(agent_id="agent_b")
        with pytest.raises(NotFoundError):
            b.learning.delete_playbook("default", agent_id="agent_a")
        for relation in ("viewer", "editor"):
            m.relations.create(("agent", "agent_b"), relation, ("playbook", "agent_a/default"))
            with pytest.raises(PermissionDeniedError):
                b.learning.delete_playbook("default", agent_id="agent_a")
        assert m.learning.get_playbook("default", agent_id="agent_a")["strategies"]["helpful"]
        m.relations.create(("agent", "agent_b"), "owner", ("playbook", "agent_a/default"))
        b.learning.delete_playbook("default", agent_id="agent_a")
        assert m.learning.get_playbook("default", agent_id="agent_a")["version"] == 0
