"""Equal scores: the same memory said to two agents ranks the same on SQLite and
PostgreSQL, with the same score, in the order written."""

from __future__ import annotations

import pytest

from memorist import Memory


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path) -> str:
    return str(tmp_path / "m.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")


def test_a_memory_said_to_two_agents_ties_and_ranks_in_the_order_written(target):
    memory = Memory(target, embedder="hashing")
    try:
        when = "2024-03-01T12:00:00Z"
        first = memory.add("Likes jazz records", user_id="kim", agent_id="coach", infer=False, timestamp=when)["results"][0]["id"]
        second = memory.add("Likes jazz records", user_id="kim", infer=False, timestamp=when)["results"][0]["id"]
        memory.add("Plays chess on Sundays", user_id="kim", agent_id="zeta", infer=False, timestamp=when)
        hits = memory.search("jazz records", user_id="kim", limit=3)["results"]
        assert [h["id"] for h in hits[:2]] == [first, second]
        assert hits[0]["score"] == hits[1]["score"]  # equal in every ranking: equal credit
        assert memory.search("jazz records", user_id="kim", limit=1)["results"][0]["id"] == first
    finally:
        memory.close()
