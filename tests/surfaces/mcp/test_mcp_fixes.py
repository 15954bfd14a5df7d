"""The MCP tools take what the library takes and refuse it in the library's words:
``add_memory`` takes a tool's message and a message's own metadata and time, and a
number out of its range (an importance, a rollback's seq) or a rollback target of the
wrong type is refused with the engine's one-line message naming the field, not a
validation dump of the argument model."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp.client.client import Client  # noqa: E402

from memorist import MemoristError, Memory  # noqa: E402
from memorist.mcp_server import create_server  # noqa: E402


def answers(memory: Memory, calls: list[tuple[str, dict[str, Any]]], **scope: str) -> list[tuple[bool, Any]]:
    """Each tool call's ``(is_error, text or structured content)``, on one server."""

    async def main() -> list[tuple[bool, Any]]:
        out = []
        async with Client(create_server(memory, **scope)) as client:
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                out.append((result.is_error, result.content[0].text if result.is_error else result.structured_content))
        return out

    return anyio.run(main)


def library_error(call: Callable[[], Any]) -> str:
    with pytest.raises(MemoristError) as info:
        call()
    return str(info.value)


def test_add_memory_takes_a_tool_s_message_with_its_own_metadata_and_time(memory: Memory) -> None:
    message = {"role": "tool", "content": "The weather service says Oslo is at 4 degrees", "metadata": {"source": "weather"},
               "timestamp": "2024-05-01T09:30:00Z"}
    [(failed, added)] = answers(memory, [("add_memory", {"messages": [message], "infer": False})], user_id="alex")
    assert not failed, added
    [stored] = memory.get_all(user_id="alex")["results"]
    assert stored["id"] == added["results"][0]["id"]
    assert stored["memory"] == message["content"]
    assert stored["metadata"]["source"] == "weather"
    assert stored["created_at"].startswith("2024-05-01T09:30:00")
    # The same turn through the library stores the same.
    again = memory.add([message], user_id="sam", infer=False)["results"][0]
    assert memory.get(again["id"])["metadata"] == stored["metadata"]


def test_a_message_s_time_is_judged_by_the_engine(memory: Memory) -> None:
    [(failed, text)] = answers(memory, [("add_memory", {"messages": [{"role": "user", "content": "x", "timestamp": "soon"}]})],
                               user_id="alex")
    assert failed
    assert text.endswith(library_error(lambda: memory.add([{"role": "user", "content": "x", "timestamp": "soon"}], user_id="alex")))


@pytest.mark.parametrize(
    ("tool", "arguments", "library"),
    [
        ("add_memory", {"text": "Likes tea", "importance": 2}, lambda h: h.add("Likes tea", importance=2.0)),
        ("add_memory", {"text": "Likes tea", "importance": -0.5}, lambda h: h.add("Likes tea", importance=-0.5)),
        ("consolidate_memories", {"min_importance": 3}, lambda h: h.learning.consolidate(min_importance=3.0)),
        ("consolidate_memories", {"importance_threshold": -1}, lambda h: h.learning.consolidate(importance_threshold=-1.0)),
        ("rollback", {"event_or_run_id": 0}, lambda h: h.rollback(0)),
        ("rollback", {"event_or_run_id": True}, lambda h: h.rollback(True)),
        ("rollback", {"event_or_run_id": 1.5}, lambda h: h.rollback(1.5)),
        ("rollback", {"event_or_run_id": None}, lambda h: h.rollback(None)),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else str(v) if isinstance(v, str) else "",
)
def test_a_refusal_is_the_engine_s_one_line_message_naming_the_field(memory: Memory, tool: str, arguments: dict,
                                                                     library: Callable[[Any], Any]) -> None:
    [(failed, text)] = answers(memory, [(tool, arguments)], user_id="alex")
    expected = library_error(lambda: library(memory.scope(user_id="alex")))
    assert failed
    assert text == f"Error executing tool {tool}: {expected}"
    assert "\n" not in text and "pydantic" not in text


def test_the_schema_still_states_the_ranges_and_types_for_the_model(memory: Memory) -> None:
    async def main() -> dict[str, Any]:
        async with Client(create_server(memory, user_id="alex")) as client:
            return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    schemas = anyio.run(main)
    importance = schemas["add_memory"]["properties"]["importance"]
    assert (importance["minimum"], importance["maximum"]) == (0, 1)
    for name in ("min_importance", "importance_threshold"):
        prop = schemas["consolidate_memories"]["properties"][name]
        assert (prop["minimum"], prop["maximum"]) == (0, 1)
    assert schemas["rollback"]["properties"]["event_or_run_id"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    message = schemas["add_memory"]["$defs"]["ChatMessage"]["properties"]
    assert {"metadata", "timestamp"} <= set(message)


def test_a_text_that_reads_as_json_is_remembered_as_the_text_it_is(memory: Memory) -> None:
    texts = ["null", '["a", "b"]', '{"diet": "vegan"}']
    results = answers(memory, [("add_memory", {"text": t, "infer": False}) for t in texts], user_id="alex")
    assert [failed for failed, _ in results] == [False] * len(texts), results
    assert sorted(r["memory"] for r in memory.get_all(user_id="alex")["results"]) == sorted(texts)
    # A list or an object sent as a JSON string is still read as one where the tool takes one.
    [(failed, _)] = answers(memory, [("add_memory", {"messages": '[{"role": "user", "content": "Likes jazz"}]',
                                                     "metadata": '{"source": "chat"}', "infer": False})], user_id="sam")
    assert not failed
    [stored] = memory.get_all(user_id="sam")["results"]
    assert (stored["memory"], stored["metadata"]["source"]) == ("Likes jazz", "chat")
