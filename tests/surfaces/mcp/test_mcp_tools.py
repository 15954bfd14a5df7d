"""The MCP tools in process, through the SDK's own client (``mcp.Client`` connected to
the server object): schemas and descriptions, validation errors as tool errors, and
the scope the server was started with as the only scope any call reaches."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp.client.client import Client  # noqa: E402

from memorist import Memory, ValidationError  # noqa: E402
from memorist.mcp_server import create_server  # noqa: E402

TOOLS = {
    "add_memory",
    "search_memories",
    "list_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
    "erase_memories",
    "memory_history",
    # sharing what the server's subject owns
    "create_relation",
    "delete_relation",
    "list_relations",
    "check_relation",
    "consolidate_memories",
    "rollback",
}


def run(memory: Memory, body: Callable[[Client], Awaitable[None]], **scope: str) -> None:
    async def main() -> None:
        async with Client(create_server(memory, **scope)) as client:
            await body(client)

    anyio.run(main)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result
    return result.content[0].text


def test_the_tools_describe_themselves(memory: Memory) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for tool in tools.values():
            assert len(tool.description) > 60, tool.name
            # Every argument is described for the model; none is a scope id.
            for name, prop in tool.input_schema["properties"].items():
                assert prop.get("description"), (tool.name, name)
                assert name not in ("user_id", "agent_id", "run_id")
        assert tools["search_memories"].input_schema["required"] == ["query"]
        assert tools["get_memory"].annotations.read_only_hint is True
        assert tools["delete_memory"].annotations.destructive_hint is True
        assert tools["erase_memories"].annotations.destructive_hint is True
        assert tools["add_memory"].annotations.read_only_hint is False
        roles = tools["add_memory"].input_schema["$defs"]["ChatMessage"]["properties"]["role"]["enum"]
        assert roles == ["user", "assistant", "system", "tool"]

    run(memory, body, user_id="alex")


def test_add_search_update_delete_history_in_process(memory: Memory) -> None:
    async def body(client: Client) -> None:
        added = await call(
            client,
            "add_memory",
            messages=[{"role": "user", "content": "Hi, I'm Alex. I'm a vegetarian and allergic to nuts."}],
            metadata={"source": "chat"},
        )
        assert added["message"] == "Added 3 memories successfully"
        verbatim = await call(client, "add_memory", text="Prefers window seats", infer=False)
        seat = verbatim["results"][0]["id"]
        found = await call(client, "search_memories", query="window seat", limit=1)
        assert [r["id"] for r in found["results"]] == [seat]
        chat = await call(client, "search_memories", query="food", filters={"source": "chat"}, limit=10)
        assert chat["results"] and all(r["metadata"] == {"source": "chat"} for r in chat["results"])
        listed = await call(client, "list_memories", limit=2)
        assert [r["memory"] for r in listed["results"]] == ["Prefers window seats", "Allergic to nuts"]
        updated = await call(client, "update_memory", memory_id=seat, text="Prefers aisle seats", metadata={"v": 2})
        assert updated["previous_memory"] == "Prefers window seats"
        got = await call(client, "get_memory", memory_id=seat)
        assert got["memory"] == "Prefers aisle seats" and got["metadata"] == {"v": 2} and got["user_id"] == "alex"
        await call(client, "delete_memory", memory_id=seat)
        events = (await call(client, "memory_history", memory_id=seat))["results"]
        assert [e["event"] for e in events] == ["ADD", "UPDATE", "DELETE"]

    run(memory, body, user_id="alex")
    assert len(memory.get_all(user_id="alex")["results"]) == 3


def test_a_note_a_model_writes_is_remembered_without_a_model_configured(memory: Memory) -> None:
    """A model writes notes ("Allergic to penicillin"), not first-person turns: with no
    model configured nothing was stored, and the answer ("No new memories; nothing
    changed") read as "already known"."""

    async def body(client: Client) -> None:
        added = await call(client, "add_memory", text="Allergic to penicillin")
        assert [(r["event"], r["memory"]) for r in added["results"]] == [("ADD", "Allergic to penicillin")]
        again = await call(client, "add_memory", text="Allergic to penicillin.")
        assert again["results"] == [] and again["message"] == "No new memories; nothing changed"
        chat = await call(client, "add_memory", text="ok thanks")
        assert chat["results"] == [] and "No fact found" in chat["message"] and "infer=False" in chat["message"]

    run(memory, body, user_id="alex")
    assert [r["memory"] for r in memory.get_all(user_id="alex")["results"]] == ["Allergic to penicillin"]


def test_engine_errors_are_tool_errors_naming_the_field_or_id(memory: Memory) -> None:
    async def body(client: Client) -> None:
        assert "memory not found: 'no-such-id'" in await error(client, "get_memory", memory_id="no-such-id")
        assert "memory not found" in await error(client, "delete_memory", memory_id="no-such-id")
        assert "memory not found" in await error(client, "memory_history", memory_id="no-such-id")
        assert "limit: must be > 0" in await error(client, "search_memories", query="x", limit=0)
        assert "limit: must be > 0" in await error(client, "list_memories", limit=-1)
        assert "query: must not be empty" in await error(client, "search_memories", query="   ")
        assert "filters" in await error(client, "search_memories", query="x", filters={"a": {"near": 1}})
        assert "messages: give messages" in await error(client, "add_memory")
        assert "not both" in await error(client, "add_memory", text="a", messages=[{"role": "user", "content": "b"}])
        assert "messages[0].content" in await error(client, "add_memory", messages=[{"role": "user", "content": "\u200b"}])
        deep: dict[str, Any] = {}
        for _ in range(20):
            deep = {"a": deep}
        assert "metadata: " in await error(client, "add_memory", text="x", metadata=deep)
        # The field the model gave, text (before: "messages", which it never sent).
        said = await error(client, "add_memory", text="tea\x00 time", infer=False)
        assert "text: holds a NUL character" in said and "messages" not in said
        assert "NUL" in await error(client, "add_memory", text="tea time", metadata={"a": ["\x00"]}, infer=False)
        assert "NUL" in await error(client, "add_memory", text="tea time", metadata={"a\x00": 1}, infer=False)
        # The SDK checks the input schema first: a wrong type names the argument too.
        assert "messages.0.role" in await error(client, "add_memory", messages=[{"role": "bot", "content": "x"}])
        assert "memory_id" in await error(client, "get_memory")
        mid = (await call(client, "add_memory", text="Likes tea", infer=False))["results"][0]["id"]
        assert "text: must not be empty" in await error(client, "update_memory", memory_id=mid, text="")
        assert "text: holds a NUL character" in await error(client, "update_memory", memory_id=mid, text="tea\x00")
        # The server is still serving after all of that.
        assert (await call(client, "get_memory", memory_id=mid))["memory"] == "Likes tea"

    run(memory, body, user_id="alex")


def test_no_call_reaches_outside_the_configured_scope(memory: Memory) -> None:
    theirs = memory.add("Bob's secret", user_id="bob", infer=False)["results"][0]["id"]
    same_user_other_agent = memory.add("Alex via the travel agent", user_id="alex", agent_id="travel", infer=False)

    async def body(client: Client) -> None:
        # A scope id sent by the model is not an argument: it is refused by name.
        assert "user_id" in await error(client, "list_memories", user_id="bob")
        assert "user_id" in await error(client, "search_memories", query="secret", user_id="bob")
        assert (await call(client, "search_memories", query="secret"))["results"] == []
        for tool, extra in (
            ("get_memory", {}),
            ("update_memory", {"text": "pwned"}),
            ("delete_memory", {}),
            ("memory_history", {}),
        ):
            assert "user_id" in await error(client, tool, memory_id=theirs, user_id="bob", **extra)
            message = await error(client, tool, memory_id=theirs, **extra)
            assert f"memory not found: '{theirs}'" in message
        assert "user_id" in await error(client, "add_memory", text="Mine", infer=False, user_id="bob")
        added = await call(client, "add_memory", text="Mine", infer=False)
        assert memory.get(added["results"][0]["id"])["user_id"] == "alex"

    run(memory, body, user_id="alex", agent_id="shop")
    assert memory.get(theirs)["memory"] == "Bob's secret"
    assert len(memory.get_all(user_id="alex", agent_id="travel")["results"]) == 1
    assert same_user_other_agent["results"]


def test_a_scope_is_required_and_validated(memory: Memory) -> None:
    with pytest.raises(ValidationError, match="one of user_id, agent_id or run_id is required"):
        create_server(memory)
    with pytest.raises(ValidationError, match="user_id"):
        create_server(memory, user_id="a\x00b")


def test_under_the_energy_policy_end_conversation_consolidates_in_the_background(tmp_path) -> None:
    energy = Memory(str(tmp_path / "energy.db"), embedder="hashing", policy="energy")
    two_hours_ago = time.time() - 7200  # so the run has hours of decay to apply
    energy.add("Renew the TLS certificate", user_id="milo", infer=False, metadata={"type": "reminder"}, timestamp=two_hours_ago)
    energy.add("Someone else's note", user_id="ana", infer=False, timestamp=two_hours_ago)

    async def body(client: Client) -> None:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == TOOLS | {"end_conversation"}
        answer = await call(client, "end_conversation")
        assert answer["scheduled"] and answer["scopes"]["user_id"] == "milo"

    try:
        run(energy, body, user_id="milo")
        assert energy.tiers.wait(timeout=30)
        runs = [e for e in energy.events(user_id="milo") if e["event"] == "DECAY"]
        assert runs and all(e["user_id"] == "milo" for e in runs)  # this person's memories only
        assert not [e for e in energy.events(user_id="ana") if e["event"] == "DECAY"]
    finally:
        energy.close()


def test_the_default_policy_has_no_end_conversation_tool(memory: Memory) -> None:
    async def body(client: Client) -> None:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS

    run(memory, body, user_id="alex")


SHARING = {"create_relation", "delete_relation", "list_relations", "check_relation"}


@pytest.mark.parametrize(
    ("scope", "left_out"),
    [
        ({"run_id": "r1"}, SHARING | {"consolidate_memories"}),
        ({"user_id": "alex", "run_id": "r1"}, {"consolidate_memories"}),
        ({"agent_id": "shop", "run_id": "r1"}, {"consolidate_memories"}),
        ({"agent_id": "shop"}, set()),
        ({"user_id": "alex", "agent_id": "shop"}, set()),
    ],
)
def test_a_server_lists_only_the_tools_that_can_work_in_its_scope(memory: Memory, scope: dict[str, str], left_out: set[str]) -> None:
    """Before, a server of only --run listed the sharing tools and consolidate_memories,
    and every call of them failed naming user_id, an argument no tool takes."""
    memory.add("Likes tea", infer=False, **scope)

    async def body(client: Client) -> None:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS - left_out
        # What is served works in that scope.
        assert (await call(client, "search_memories", query="tea"))["results"]
        if "consolidate_memories" not in left_out:
            assert (await call(client, "consolidate_memories", dry_run=True))["merged_count"] == 0
        if not left_out & SHARING:
            assert (await call(client, "list_relations"))["results"] == []

    run(memory, body, **scope)


def test_arguments_are_taken_as_the_schema_states_them(memory: Memory) -> None:
    """Before, {"limit": "3"} was coerced to 3 although the schema says integer and the
    library refuses "3", and an argument no tool takes was silently ignored."""
    memory.add("Likes tea", user_id="alex", infer=False)

    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for tool in tools.values():
            assert tool.input_schema.get("additionalProperties") is False, tool.name
        assert tools["search_memories"].input_schema["properties"]["limit"]["type"] == "integer"
        for limit in ("3", 3.0, True):
            said = await error(client, "search_memories", query="tea", limit=limit)
            assert "limit" in said and "integer" in said
        with pytest.raises(ValidationError, match="limit: must be a whole number"):
            memory.search("tea", user_id="alex", limit="3")
        assert len((await call(client, "search_memories", query="tea", limit=3))["results"]) == 1
        assert "infer" in await error(client, "add_memory", text="Likes coffee", infer="false")
        said = await error(client, "search_memories", query="tea", user_id="bob", top_k=2)
        assert "user_id" in said and "top_k" in said and "Extra inputs are not permitted" in said
        assert "bogus" in await error(client, "list_memories", bogus=1)
        # Claude Desktop sends lists as JSON text: still taken.
        added = await call(client, "add_memory", messages='[{"role": "user", "content": "Likes jazz"}]', infer=False)
        assert [r["memory"] for r in added["results"]] == ["Likes jazz"]

    run(memory, body, user_id="alex")


def test_a_bad_text_is_named_text(memory: Memory) -> None:
    """Before, add_memory {"text": "a\\u0000b"} answered "messages: holds a NUL
    character", naming an argument the model never sent."""
    async def body(client: Client) -> None:
        for text in ("a\x00b", "x" * 200_001):
            said = await error(client, "add_memory", text=text, infer=False)
            assert "text: " in said and "messages" not in said, said
        said = await error(client, "add_memory", messages=[{"role": "user", "content": "a\x00b"}], infer=False)
        assert "messages[0].content" in said

    run(memory, body, user_id="alex")
