"""By-id calls act only on what the caller owns (issue 10, item 8).

A memory outside the caller's scope answers exactly like a missing id, so a
caller cannot even learn that it exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memorist import Memory, NotFoundError


@pytest.fixture
def m(tmp_path: Path) -> Memory:
    memory = Memory(str(tmp_path / "m.db"), embedder="hashing")
    yield memory
    memory.close()


def alice_memory(m: Memory) -> str:
    return m.add("My name is Alice.", user_id="alice", agent_id="helper", run_id="r1")["results"][0]["id"]


def not_found_message(call) -> str:
    with pytest.raises(NotFoundError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda m, mid, **ids: m.get(mid, **ids),
        lambda m, mid, **ids: m.update(mid, "Name is Mallory", **ids),
        lambda m, mid, **ids: m.delete(mid, **ids),
        lambda m, mid, **ids: m.history(mid, **ids),
    ],
    ids=["get", "update", "delete", "history"],
)
@pytest.mark.parametrize(
    "ids",
    [{"user_id": "bob"}, {"agent_id": "other"}, {"run_id": "r2"}, {"user_id": "alice", "run_id": "r2"}],
)
def test_a_memory_outside_the_callers_scope_is_not_found(m: Memory, call, ids) -> None:
    mid = alice_memory(m)
    before = m.events(user_id="alice")
    missing = "00000000-0000-0000-0000-000000000000"
    # Same error, same wording as for an id that does not exist.
    assert not_found_message(lambda: call(m, mid, **ids)) == not_found_message(lambda: call(m, missing, **ids)).replace(missing, mid)
    assert m.get(mid, user_id="alice")["memory"] == "Name is Alice"
    assert m.events(user_id="alice") == before


def test_the_owner_reaches_its_memory_through_every_by_id_call(m: Memory) -> None:
    mid = alice_memory(m)
    assert m.get(mid, user_id="alice", agent_id="helper", run_id="r1")["memory"] == "Name is Alice"
    assert m.update(mid, "Name is Alice Smith", user_id="alice")["event"] == "UPDATE"
    assert m.delete(mid, agent_id="helper")["event"] == "DELETE"
    assert [e["event"] for e in m.history(mid, user_id="alice")] == ["ADD", "UPDATE", "DELETE"]
    with pytest.raises(NotFoundError):
        m.history(mid, user_id="bob")


def test_another_tenant_never_sees_the_memory(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with Memory(path, embedder="hashing", tenant_id="acme") as acme:
        mid = alice_memory(acme)
    with Memory(path, embedder="hashing", tenant_id="globex") as globex:
        for call in (globex.get, globex.delete, globex.history):
            with pytest.raises(NotFoundError):
                call(mid, user_id="alice")
        with pytest.raises(NotFoundError):
            globex.update(mid, "taken over", user_id="alice")
    with Memory(path, embedder="hashing", tenant_id="acme") as acme:
        assert acme.get(mid, user_id="alice")["memory"] == "Name is Alice"


@pytest.mark.parametrize("link", ["promoted_from", "promoted_to"])
def test_an_imported_lineage_never_reaches_another_scope(tmp_path: Path, link: str) -> None:
    """A promotion keeps the scope. An imported memory whose lineage names another
    user's (or tenant's) memory showed that memory's history, text included, to its
    owner, or was read as that memory (and its own history not found)."""
    import json

    path = str(tmp_path / "m.db")
    with Memory(path, embedder="hashing", tenant_id="acme") as acme:
        secret = acme.add("The merger target is Globex", user_id="ceo", infer=False)["results"][0]["id"]
    with Memory(path, embedder="hashing") as m:
        pin = m.add("Alex's bank PIN is 4471", user_id="alex", infer=False)["results"][0]["id"]
        for n, source in enumerate((pin, secret)):
            mid = f"00000000-0000-0000-0000-00000000000{n}"
            line = {"type": "memory", "id": mid, "memory": "Carol likes tea", "user_id": "carol",
                    "created_at": "2024-01-01T00:00:00+00:00", "lineage": {link: source}}
            if link == "promoted_to":
                line["status"] = "archived"
            (tmp_path / "in.jsonl").write_text(json.dumps(line) + "\n")
            assert m.import_(str(tmp_path / "in.jsonl"))["added"] == 1
            shown = json.dumps(m.history(mid, user_id="carol"))
            assert "Carol likes tea" in shown and "4471" not in shown and "Globex" not in shown


def test_without_ids_a_by_id_call_spans_the_tenant(m: Memory) -> None:
    # The single-user pattern keeps working: no ids, the tenant is the only bound.
    mid = alice_memory(m)
    assert m.get(mid)["memory"] == "Name is Alice"


def test_the_cli_by_id_commands_take_the_callers_ids(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memorist.cli import cli

    db = str(tmp_path / "cli.db")
    with Memory(db, embedder="hashing") as memory:
        mid = alice_memory(memory)
    runner = CliRunner()
    for command in (["get", mid], ["history", mid], ["update", mid, "Name is Mallory"], ["delete", mid]):
        other = runner.invoke(cli, [*command, "--user", "bob", "--db", db, "--embedder", "hashing"])
        assert other.exit_code != 0 and "not found" in other.output
    own = runner.invoke(cli, ["get", mid, "--user", "alice", "--db", db, "--embedder", "hashing", "--json"])
    assert own.exit_code == 0, own.output
    assert '"Name is Alice"' in own.output


def test_a_tenants_stats_count_its_own_memories_only(backend) -> None:
    """In a store tenants share (the service's), a tenant's stats counted every
    tenant's memories, users and events, and others' test memories."""
    with Memory(backend.target, embedder="hashing", tenant_id="t1", policy="energy") as t1, \
            Memory(backend.target, embedder="hashing", tenant_id="t2", policy="energy") as t2:
        t1.add("Likes green tea", user_id="a", infer=False)
        t1.add("Near expiry", user_id="a", infer=False, test=True)
        for i in range(5):
            t2.add(f"Secret number {i}", user_id=f"u{i}", infer=False)
        for i in range(3):
            t2.add(f"Test number {i}", user_id="x", infer=False, test=True)
        one, two = t1.stats(), t2.stats()
        assert (one["tenant_id"], one["memories"], one["users"], one["test_memories"], one["by_kind"]) == ("t1", 1, 1, 1, {"fact": 1})
        assert (two["tenant_id"], two["memories"], two["users"], two["test_memories"]) == ("t2", 5, 5, 3)
        assert one["events"] < two["events"] and one["path"] == two["path"]
