"""The memory tools every framework integration wraps (memorist.integrations._tools):
one scope, JSON answers, model-fixable errors that name the argument, nothing lost."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from memorist import AsyncMemory, ConfigurationError, Memory, NotFoundError, ValidationError
from memorist.integrations._tools import MAX_LIST, MAX_SEARCH, TOOL_NAMES, MemoryTools, check_names


@pytest.fixture
def mem(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        yield memory


def texts(memory, **scope):
    return sorted(m["memory"] for m in memory.get_all(**scope)["results"])


def test_the_tools_remember_find_correct_and_forget_in_their_scope(mem):
    sam = MemoryTools(mem, user_id="sam")
    added = json.loads(sam.add("Has a cat named Miso"))
    assert [r["event"] for r in added["results"]] == ["ADD"] and "Added 1 memory" in added["message"]
    sam.add("Is vegetarian", importance=0.9)
    found = json.loads(sam.search("cat named Miso", limit=1))["results"]
    assert [r["memory"] for r in found] == ["Has a cat named Miso"]
    assert set(found[0]) >= {"id", "memory", "created_at", "similarity"} and 0 < found[0]["similarity"] <= 1
    listed = json.loads(sam.list())["results"]
    assert [r["memory"] for r in listed] == ["Is vegetarian", "Has a cat named Miso"]  # newest first
    cat = found[0]["id"]
    updated = json.loads(sam.update(cat, "Has a cat named Miso and a dog named Rex"))
    assert updated["previous_memory"] == "Has a cat named Miso" and updated["event"] == "UPDATE"
    deleted = json.loads(sam.delete(cat))
    assert deleted == {"id": cat, "memory": "Has a cat named Miso and a dog named Rex", "event": "DELETE"}
    assert texts(mem, user_id="sam") == ["Is vegetarian"]
    assert mem.get_all(user_id="sam")["results"][0]["importance"] == pytest.approx(0.9)


def test_a_model_cannot_leave_the_scope_of_its_tools(mem):
    ann = mem.add("Has two dogs", user_id="ann", infer=False)["results"][0]["id"]
    sam = MemoryTools(mem, user_id="sam")
    sam.add("Has a cat named Miso")
    assert [r["memory"] for r in json.loads(sam.search("dogs", limit=10))["results"]] == ["Has a cat named Miso"]
    assert "Has two dogs" not in sam.list(limit=100)
    for call in (lambda: sam.delete(ann), lambda: sam.update(ann, "Has no dogs")):
        with pytest.raises(NotFoundError):
            call()
    assert texts(mem, user_id="ann") == ["Has two dogs"]


def test_an_exact_repeat_is_remembered_once(mem):
    sam = MemoryTools(mem, user_id="sam")
    first = json.loads(sam.add("Has a cat named Miso"))["results"][0]
    again = json.loads(sam.add("  has a cat   named MISO "))
    assert again["results"] == [{"id": first["id"], "memory": "Has a cat named Miso", "event": "NONE"}]
    assert "Already remembered" in again["message"]
    sam.add("Has a cat named Miso, who is 3")  # not a repeat: a new memory
    assert texts(mem, user_id="sam") == ["Has a cat named Miso", "Has a cat named Miso, who is 3"]


def test_infer_runs_the_extractor_and_metadata_is_kept(mem):
    tools = MemoryTools(mem.scope(user_id="sam", agent_id="chef"), infer=True, metadata={"source": "agent"})
    result = json.loads(tools.add("I'm a vegetarian."))
    assert [r["memory"] for r in result["results"]] == ["Is vegetarian"]
    row = mem.get_all(user_id="sam", agent_id="chef")["results"][0]
    assert row["metadata"] == {"source": "agent"}
    assert json.loads(tools.search("vegetarian"))["results"][0]["metadata"] == {"source": "agent"}


@pytest.mark.parametrize(("call", "field"), [
    (lambda t: t.search(""), "query"),
    (lambda t: t.search("   "), "query"),
    (lambda t: t.search(42), "query"),
    (lambda t: t.search("cat", limit=0), "limit"),
    (lambda t: t.search("cat", limit=MAX_SEARCH + 1), "limit"),
    (lambda t: t.search("cat", limit=True), "limit"),
    (lambda t: t.search("cat", limit="5"), "limit"),
    (lambda t: t.list(limit=MAX_LIST + 1), "limit"),
    (lambda t: t.add(""), "text"),
    (lambda t: t.add(None), "text"),
    (lambda t: t.add("x" * 10_000_000), "text"),
    (lambda t: t.add("Likes tea", importance=2), "importance"),
    (lambda t: t.add("Likes tea", importance="high"), "importance"),
    (lambda t: t.update("", "x"), "memory_id"),
    (lambda t: t.update("some-id", ""), "text"),
    (lambda t: t.delete(None), "memory_id"),
])
def test_bad_arguments_name_the_argument_and_change_nothing(memory, call, field):
    tools = MemoryTools(memory, user_id="sam")
    tools.add("Has a cat named Miso")
    before = memory.get_all(user_id="sam")
    with pytest.raises(ValidationError) as caught:
        call(tools)
    assert caught.value.field == field
    assert memory.get_all(user_id="sam") == before


def test_an_unknown_id_is_not_found(memory):
    tools = MemoryTools(memory, user_id="sam")
    with pytest.raises(NotFoundError, match="no-such-id"):
        tools.delete("no-such-id")


def test_a_tool_set_is_made_for_exactly_one_scope(memory):
    with pytest.raises(ValidationError, match="one of user_id, agent_id or run_id is required"):
        MemoryTools(memory)
    with pytest.raises(ValidationError, match="scoped already") as caught:
        MemoryTools(memory.scope(user_id="sam"), user_id="ann")
    assert caught.value.field == "user_id"
    with pytest.raises(ValidationError, match="must be a Memorist Memory"):
        MemoryTools("app.db", user_id="sam")
    with pytest.raises(ValidationError, match="infer"):
        MemoryTools(memory, user_id="sam", infer="yes")
    assert MemoryTools(memory, agent_id="chef", run_id="r1").scope == {"user_id": None, "agent_id": "chef", "run_id": "r1"}


def test_include_names_known_tools_in_their_order():
    assert check_names(None) == TOOL_NAMES
    assert check_names(["delete_memory", "search_memories"]) == ("search_memories", "delete_memory")
    with pytest.raises(ValidationError, match="unknown tool 'forget'"):
        check_names(["search_memories", "forget"])
    with pytest.raises(ValidationError, match="list of tool names"):
        check_names("search_memories")
    with pytest.raises(ValidationError, match="names no tool"):
        check_names([])


def test_the_async_calls_await_an_async_memory_and_thread_a_sync_one(tmp_path):
    async def main():
        async with AsyncMemory(str(tmp_path / "a.db"), embedder="hashing") as memory:
            tools = MemoryTools(memory, user_id="sam")
            assert tools.is_async
            await tools.aadd("Has a cat named Miso")
            again = json.loads(await tools.aadd("Has a cat named Miso"))
            found = json.loads(await tools.asearch("cat"))["results"]
            with pytest.raises(ConfigurationError, match="asynchronously"):
                tools.search("cat")
            return again, found

    again, found = asyncio.run(main())
    assert again["results"][0]["event"] == "NONE" and [r["memory"] for r in found] == ["Has a cat named Miso"]

    with Memory(str(tmp_path / "s.db"), embedder="hashing") as memory:
        tools = MemoryTools(memory, user_id="sam")
        asyncio.run(tools.aadd("Is vegetarian"))
        listed = json.loads(asyncio.run(tools.alist()))["results"]
        assert [r["memory"] for r in listed] == ["Is vegetarian"]
        asyncio.run(tools.adelete(listed[0]["id"]))
        assert memory.get_all(user_id="sam")["results"] == []


def test_the_tools_work_over_a_served_memorist(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "surfaces" / "client"))
    from client_live import live_server

    from memorist import Client

    with live_server(str(tmp_path / "served.db")) as server, Client(server.url) as client:
        sam = MemoryTools(client, user_id="sam")
        added = json.loads(sam.add("Has a cat named Miso"))["results"][0]
        assert json.loads(sam.add("Has a cat named Miso"))["results"][0]["event"] == "NONE"
        assert [r["id"] for r in json.loads(sam.search("cat"))["results"]] == [added["id"]]
        with pytest.raises(NotFoundError):
            MemoryTools(client, user_id="ann").delete(added["id"])
        assert json.loads(asyncio.run(sam.adelete(added["id"])))["event"] == "DELETE"
        assert client.get_all(user_id="sam")["results"] == []
