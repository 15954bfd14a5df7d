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


def test_a_consolidation_scope_cannot_widen_past_what_the_subject_may_write(backend) -> None:
    """``scope="agent"`` merges every memory of the agent (any user), ``scope="user"``
    every memory of the user (any agent): the subject is checked on that wider space,
    not on the ids it names. Before, a user consolidating its own space with an agent
    (or an editor of one user-and-agent space) merged, and a dry run read, other users'
    memories of that agent."""
    with Memory(backend.target, embedder="hashing") as memory:
        for text in _NOTES:
            memory.add(text, user_id="bob", agent_id="helper", infer=False, importance=0.1)
            memory.add(text, user_id="alice", agent_id="other", infer=False, importance=0.1)
        bob_before = sorted(m["memory"] for m in memory.get_all(user_id="bob")["results"])
        alice_before = sorted(m["memory"] for m in memory.get_all(user_id="alice")["results"])
        wide = {"min_importance": 0.9, "importance_threshold": 0.95}

        alice = memory.as_subject(user_id="alice")
        with pytest.raises(NotFoundError):  # bob's memories with the agent: not hers, no relation
            alice.learning.consolidate(user_id="alice", agent_id="helper", scope="agent", **wide)
        with pytest.raises(NotFoundError):
            alice.learning.consolidate(user_id="alice", agent_id="helper", scope="agent", dry_run=True, **wide)
        pair = memory.as_subject(user_id="alice", agent_id="helper")  # owns alice+helper only
        with pytest.raises((NotFoundError, PermissionDeniedError)):
            pair.learning.consolidate(scope="user", **wide)  # every agent's memories of alice
        with pytest.raises((NotFoundError, PermissionDeniedError)):
            pair.learning.consolidate(scope="agent", **wide)  # every user's memories of helper

        memory.relations.create(("user", "carol"), "editor", ("scope", "user:bob/agent:helper"))
        carol = memory.as_subject(user_id="carol")
        with pytest.raises(NotFoundError):
            carol.learning.consolidate(user_id="bob", agent_id="helper", scope="user", **wide)
        assert sorted(m["memory"] for m in memory.get_all(user_id="bob")["results"]) == bob_before
        assert sorted(m["memory"] for m in memory.get_all(user_id="alice")["results"]) == alice_before

        # What it may write, it still consolidates: its own user's every agent, an editor's exact space.
        assert alice.learning.consolidate(scope="user", **wide)["merged_count"] >= 2
        assert carol.learning.consolidate(user_id="bob", agent_id="helper", **wide)["merged_count"] >= 2
