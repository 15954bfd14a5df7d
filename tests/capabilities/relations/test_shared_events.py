"""The event log of another owner's space, read through a relation: a viewer of a user's
memories reads the events of those memories, not the owner's minutes, playbooks,
trajectories or searches, and pages through them as the owner pages through all."""

from __future__ import annotations

from memorist import Memory


def _bob_with_everything(mem: Memory) -> list[str]:
    ids = [mem.add(f"Bob likes coffee number {i}", user_id="bob", infer=False)["results"][0]["id"] for i in range(5)]
    mem.minutes.record("task_assigned", agent_id="bot", project_id="bob", memory_note="SECRET project minute")
    mem.learning.update_playbook([{"pattern": "SECRET strategy of bob"}], user_id="bob")
    run = mem.learning.start_trajectory("SECRET task of bob", user_id="bob")
    mem.learning.complete_trajectory(run, "success")
    mem.search("SECRET query of bob", user_id="bob")
    mem.update(ids[0], "Bob likes tea")
    mem.delete(ids[1])
    return ids


def test_a_viewer_reads_the_events_of_the_memories_only(mem) -> None:
    ids = _bob_with_everything(mem)
    alice = mem.as_subject(user_id="alice")
    assert alice.events(user_id="bob") == []  # no grant: as a space with no events
    mem.relations.create(("user", "alice"), "viewer", ("scope", "user:bob"))

    shared = alice.events(user_id="bob")
    own = mem.events(user_id="bob")
    assert "SECRET" in str(own)  # the owner reads everything
    assert "SECRET" not in str(shared)
    assert {e["memory_id"] for e in shared} == set(ids)
    assert [e["event"] for e in shared if e["memory_id"] == ids[0]] == ["ADD", "UPDATE"]
    assert [e["event"] for e in shared if e["memory_id"] == ids[1]] == ["ADD", "DELETE"]
    # the same events, in the owner's order
    assert shared == [e for e in own if e in shared]


def test_a_viewer_pages_through_the_shared_events_to_the_end(mem) -> None:
    _bob_with_everything(mem)
    for i in range(12):  # a long run of events the viewer may not read
        mem.search(f"SECRET query {i}", user_id="bob")
    mem.add("Bob likes cake", user_id="bob", infer=False)
    mem.relations.create(("user", "alice"), "viewer", ("scope", "user:bob"))
    alice = mem.as_subject(user_id="alice")
    everything = alice.events(user_id="bob")

    paged, since = [], 0
    while page := alice.events(user_id="bob", since=since, limit=2):
        assert len(page) <= 2
        paged += page
        since = page[-1]["seq"]
    assert paged == everything
    assert paged[-1]["new_memory"] == "Bob likes cake"  # past the searches the filter leaves out
