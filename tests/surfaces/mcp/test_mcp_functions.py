"""The MCP tools are functions of the scoped handle: callable as they are, and served by
create_server with the handle bound (the SDK reads the rest of each signature)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

pytest.importorskip("mcp.server.mcpserver")

from memorist import Memory, NotFoundError, mcp_server  # noqa: E402


def test_each_tool_is_a_function_of_the_handle_and_served_without_it(memory: Memory) -> None:
    for fn, _ in mcp_server.TOOLS:
        assert next(iter(inspect.signature(fn).parameters)) == "handle", fn.__name__
    served = {t.name: t for t in asyncio.run(mcp_server.create_server(memory, user_id="alex").list_tools())}
    plain = [fn.__name__ for fn, hints in mcp_server.TOOLS if not hints.energy]
    assert list(served) == plain
    for fn, _ in mcp_server.TOOLS:
        if fn.__name__ in served:
            declared = [p for p in inspect.signature(fn).parameters if p != "handle"]
            assert list(served[fn.__name__].input_schema["properties"]) == declared


def test_a_tool_called_directly_acts_in_its_handle_s_scope(memory: Memory) -> None:
    alex, sam = memory.scope(user_id="alex"), memory.scope(user_id="sam")
    added = mcp_server.add_memory(alex, text="I'm a vegetarian.")["results"][0]
    assert [m["memory"] for m in mcp_server.search_memories(alex, "food")["results"]] == ["Is vegetarian"]
    assert mcp_server.list_memories(sam)["results"] == []
    with pytest.raises(NotFoundError):
        mcp_server.get_memory(sam, added["id"])
    assert mcp_server.delete_memory(alex, added["id"])["event"] == "DELETE"
    assert [e["event"] for e in mcp_server.memory_history(alex, added["id"])["results"]] == ["ADD", "DELETE"]


def test_end_conversation_is_served_under_the_energy_policy_only(tmp_path) -> None:
    with Memory(str(tmp_path / "e.db"), embedder="hashing", policy="energy") as memory:
        tools = [t.name for t in asyncio.run(mcp_server.create_server(memory, run_id="r1").list_tools())]
        assert tools[-1] == "end_conversation"
        answer = mcp_server.end_conversation(memory.scope(run_id="r1"))
        assert answer["scheduled"] is True and answer["scopes"]["run_id"] == "r1"
        memory.tiers.wait(10)


def test_erase_memories_forgets_the_handle_s_scope_only(memory: Memory) -> None:
    alex, sam = memory.scope(user_id="alex"), memory.scope(user_id="sam")
    mcp_server.add_memory(alex, text="I'm a vegetarian.")
    mcp_server.add_memory(sam, text="I'm a vegan.")
    preview = mcp_server.erase_memories(alex, dry_run=True)
    assert preview["dry_run"] is True and preview["erased"]["facts"] == 1 and preview["user_id"] == "alex"
    assert mcp_server.list_memories(alex)["results"]
    assert mcp_server.erase_memories(alex)["erased"]["facts"] == 1
    assert mcp_server.list_memories(alex)["results"] == []
    assert [m["memory"] for m in mcp_server.list_memories(sam)["results"]] == ["Is vegan"]
