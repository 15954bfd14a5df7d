"""A reconciler UPDATE or DELETE is undone by memory.rollback(seq of its event): the
memory comes back exactly (text, metadata, counters, dates, id), on both backends."""

from __future__ import annotations

import pytest

from memorist import Memory
from memorist.errors import ConflictError


@pytest.fixture
def mem(backend):
    m = Memory(backend.target, embedder="hashing")
    yield m
    m.close()


def event_of(m: Memory, kind: str, user: str = "u") -> dict:
    return [e for e in m.events(user_id=user) if e["event"] == kind][-1]


def test_rolling_back_an_update_restores_the_memory_exactly(mem) -> None:
    mem.add("I live in Berlin.", user_id="u", metadata={"source": "chat"})
    before = list(mem.export(user_id="u"))
    result = mem.add("I moved, I live in Munich now.", user_id="u", metadata={"source": "mail"})
    (updated,) = [r for r in result["results"] if r["event"] == "UPDATE"]
    added = [r["id"] for r in result["results"] if r["event"] == "ADD"]
    mem.delete(added[0], user_id="u")  # the turn's own ADD is another operation; set it aside
    undone = mem.rollback(event_of(mem, "UPDATE")["seq"], user_id="u")
    assert undone["restored"] == [updated["id"]] and undone["op"] == "update"
    assert list(mem.export(user_id="u")) == before
    assert [r["memory"] for r in mem.search("where does the user live", user_id="u")["results"]] == ["Lives in Berlin"]
    with pytest.raises(ConflictError, match="already rolled back"):
        mem.rollback(event_of(mem, "UPDATE")["seq"], user_id="u")


def test_rolling_back_a_delete_brings_the_memory_back(mem) -> None:
    mem.add("I am vegetarian.", user_id="u")
    (kept,) = mem.get_all(user_id="u")["results"]
    mem.add("I am not vegetarian anymore.", user_id="u")
    assert kept["id"] not in {r["id"] for r in mem.get_all(user_id="u")["results"]}
    mem.rollback(event_of(mem, "DELETE")["seq"])
    assert mem.get(kept["id"], user_id="u") == kept


def test_an_update_changed_again_must_be_rolled_back_latest_first(mem) -> None:
    mem.add("I live in Berlin.", user_id="u")
    (memory,) = mem.get_all(user_id="u")["results"]
    first = mem.add("I live in Munich now.", user_id="u")
    assert [r["event"] for r in first["results"]] == ["UPDATE"]
    first_seq = event_of(mem, "UPDATE")["seq"]
    mem.add("I live in Hamburg now.", user_id="u")
    second_seq = event_of(mem, "UPDATE")["seq"]
    assert second_seq > first_seq
    with pytest.raises(ConflictError, match=f"event {second_seq}"):
        mem.rollback(first_seq)
    assert mem.get(memory["id"], user_id="u")["memory"] == "Lives in Hamburg now"
    mem.rollback(second_seq)
    mem.rollback(first_seq)
    assert mem.get(memory["id"], user_id="u")["memory"] == "Lives in Berlin"


def test_a_memory_id_names_no_operation(mem) -> None:
    """A rollback takes an event's seq or a run's id. A memory's id found every
    reversible change of that memory and undid them all at once, as "update <id>"."""
    from memorist.errors import NotFoundError

    mem.add("I live in Berlin.", user_id="u")
    (memory,) = mem.get_all(user_id="u")["results"]
    mem.add("I live in Munich now.", user_id="u")
    with pytest.raises(NotFoundError, match="reversible operation"):
        mem.rollback(memory["id"], user_id="u")
    assert mem.get(memory["id"], user_id="u")["memory"] == "Lives in Munich now"
    mem.rollback(event_of(mem, "UPDATE")["seq"], user_id="u")
    assert mem.get(memory["id"], user_id="u")["memory"] == "Lives in Berlin"


def test_retrievals_since_the_operation_stay_counted_after_its_rollback(mem) -> None:
    """A search counts its retrievals without an event, so a rollback's check for later
    changes cannot see them; restoring the memory whole set its count back."""
    mem.add("I live in Berlin.", user_id="u")
    (memory,) = mem.get_all(user_id="u")["results"]
    mem.add("I live in Munich now.", user_id="u")
    for _ in range(3):
        assert mem.search("where does the user live", user_id="u")["results"]
    mem.store.flush()
    mem.rollback(event_of(mem, "UPDATE")["seq"], user_id="u")
    restored = mem.store.get(memory["id"])
    assert restored.text == "Lives in Berlin" and restored.access_count == 3
