"""The sharing tools of the MCP server act as its configured agent: it shares what it
owns, and nothing else."""

from __future__ import annotations

import pytest

from memorist import Memory, PermissionDeniedError
from memorist.mcp_server import check_relation, create_relation, delete_relation, list_relations


def test_the_server_s_agent_shares_its_own_playbook_only() -> None:
    with Memory(":memory:", embedder="hashing") as memory:
        agent_a, agent_b = memory.scope(agent_id="agent_a"), memory.scope(agent_id="agent_b")
        memory.learning.update_playbook([{"pattern": "Chunk large PDFs"}], agent_id="agent_a")
        assert create_relation(agent_a, "agent:agent_b", "viewer", "playbook:agent_a/default")["changed"] is True
        assert check_relation(agent_b, "agent:agent_b", "viewer", "playbook:agent_a/default")["allowed"] is True
        assert [r["object"] for r in list_relations(agent_b)["results"]] == [["playbook", "agent_a/default"]]
        reader = memory.as_subject(agent_id="agent_b")
        assert reader.learning.get_playbook("default", agent_id="agent_a")["strategies"]["helpful"][0]["pattern"] == "Chunk large PDFs"
        with pytest.raises(PermissionDeniedError):
            create_relation(agent_b, "agent:agent_b", "editor", "playbook:agent_a/default")
        assert delete_relation(agent_a, "agent:agent_b", "viewer", "playbook:agent_a/default")["changed"] is True
        assert reader.learning.get_playbook("default", agent_id="agent_a")["strategies"]["helpful"] == []
