"""A subject consolidates another owner's memories only as an editor: a viewer may
preview (a dry run reads), and without a relation the space answers as a missing one.
On both backends."""

from __future__ import annotations

import pytest

from memorist import Memory
from memorist.errors import NotFoundError, PermissionDeniedError

_NOTES = ["The server restarts nightly at 2am", "The server restarts nightly at 2 am", "Server restarts nightly at 2am"]


def test_consolidating_another_agent_s_memories_needs_an_editor(backend) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        for text in _NOTES:
            memory.add(text, agent_id="agent_a", infer=False, importance=0.1)
        before = sorted(m["memory"] for m in memory.get_all(agent_id="agent_a")["results"])
        b = memory.as_subject(agent_id="agent_b")
        wide = {"agent_id": "agent_a", "min_importance": 0.9, "importance_threshold": 0.95}

        with pytest.raises(NotFoundError):
            b.learning.consolidate(**wide)
        with pytest.raises(NotFoundError):
            b.learning.consolidate(**wide, dry_run=True)
        memory.relations.create(("agent", "agent_b"), "viewer", ("scope", "agent:agent_a"))
        with pytest.raises(PermissionDeniedError):
            b.learning.consolidate(**wide)
        assert b.learning.consolidate(**wide, dry_run=True)["dry_run"] is True
        assert sorted(m["memory"] for m in memory.get_all(agent_id="agent_a")["results"]) == before, "nothing merged"

        memory.relations.create(("agent", "agent_b"), "editor", ("scope", "agent:agent_a"))
        report = b.learning.consolidate(**wide)
        assert report["merged_count"] >= 2
        assert len(memory.get_all(agent_id="agent_a")["results"]) < len(before)
