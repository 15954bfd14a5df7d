"""The MCP tools consolidate_memories and rollback, in the server's scope only."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp.client.client import Client  # noqa: E402

from memorist import Memory  # noqa: E402
from memorist.mcp_server import create_server  # noqa: E402


def call(memory: Memory, tool: str, *, user_id: str = "u", **arguments: Any) -> tuple[bool, Any]:
    async def main() -> tuple[bool, Any]:
        async with Client(create_server(memory, user_id=user_id)) as client:
            result = await client.call_tool(tool, arguments)
            return result.is_error, (result.content[0].text if result.is_error else json.loads(result.content[0].text))

    return anyio.run(main)


def test_an_agent_consolidates_its_person_s_memories_and_undoes_it(tmp_path) -> None:
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as memory:
        for text in ("Plays tennis on Sundays", "Plays tennis on Sundays with Tom"):
            memory.add(text, user_id="u", infer=False, importance=0.2)
            memory.add(text, user_id="other", infer=False, importance=0.2)
        failed, report = call(memory, "consolidate_memories", dry_run=True)
        assert not failed and report["merged_count"] == 2 and report["run_id"] is None
        failed, report = call(memory, "consolidate_memories")
        assert not failed and report["merged_count"] == 2
        assert len(memory.get_all(user_id="other")["results"]) == 2  # another person's memories are not the server's
        failed, message = call(memory, "rollback", user_id="other", event_or_run_id=report["run_id"])
        assert failed and "not found" in message
        failed, undone = call(memory, "rollback", event_or_run_id=report["run_id"])
        assert not failed and len(undone["restored"]) == 2
        failed, message = call(memory, "rollback", event_or_run_id=report["run_id"])
        assert failed and "already rolled back" in message
        failed, message = call(memory, "add_memory", text="Has a cat", importance=3)
        assert failed and "importance" in message
