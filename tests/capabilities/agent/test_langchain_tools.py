"""Memorist's memory tools as LangChain tools: invoked directly (sync and async), as a
model's tool calls, and through langchain-openai's chat model against the fake server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from fake_openai import text, tool_calls
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from memorist import AsyncMemory, ConfigurationError, Memory, ValidationError
from memorist.integrations.langchain import (
    TOOL_NAMES,
    AddMemoryTool,
    DeleteMemoryTool,
    SearchMemoriesTool,
    memory_tools,
)


@pytest.fixture
def mem(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        yield memory


def by_name(tools):
    return {t.name: t for t in tools}


def test_they_are_base_tools_with_pydantic_schemas(memory):
    tools = memory_tools(memory, user_id="sam")
    assert all(isinstance(t, BaseTool) for t in tools) and tuple(t.name for t in tools) == TOOL_NAMES
    search = convert_to_openai_tool(by_name(tools)["search_memories"])["function"]
    assert search["name"] == "search_memories" and "most relevant first" in search["description"]
    params = search["parameters"]
    assert params["required"] == ["query"]
    assert params["properties"]["query"]["type"] == "string" and params["properties"]["query"]["description"]
    limit = params["properties"]["limit"]
    assert (limit["type"], limit["minimum"], limit["maximum"], limit["default"]) == ("integer", 1, 50, 5)
    add = by_name(tools)["add_memory"].tool_call_schema.model_json_schema()
    assert add["required"] == ["text"] and add["properties"]["importance"]["anyOf"][0]["maximum"] == 1
    assert [t.name for t in memory_tools(memory, user_id="sam", include=["delete_memory", "add_memory"])] == [
        "add_memory", "delete_memory"]


def test_invoke_and_ainvoke_remember_find_and_forget(mem):
    tools = by_name(memory_tools(mem, user_id="sam"))
    added = json.loads(tools["add_memory"].invoke({"text": "Has a cat named Miso"}))["results"][0]
    assert added["event"] == "ADD"
    again = json.loads(asyncio.run(tools["add_memory"].ainvoke({"text": "Has a cat named Miso"})))
    assert again["results"] == [{"id": added["id"], "memory": "Has a cat named Miso", "event": "NONE"}]
    asyncio.run(tools["add_memory"].ainvoke({"text": "Is vegetarian", "importance": 0.9}))
    found = json.loads(tools["search_memories"].invoke({"query": "cat", "limit": 1}))["results"]
    assert [r["memory"] for r in found] == ["Has a cat named Miso"]
    found_async = json.loads(asyncio.run(tools["search_memories"].ainvoke({"query": "cat", "limit": 1})))["results"]
    assert found_async == found
    listed = json.loads(tools["list_memories"].invoke({}))["results"]
    assert [r["memory"] for r in listed] == ["Is vegetarian", "Has a cat named Miso"]
    moved = json.loads(tools["update_memory"].invoke({"memory_id": added["id"], "text": "Has a cat named Mochi"}))
    assert moved["previous_memory"] == "Has a cat named Miso"
    gone = json.loads(asyncio.run(tools["delete_memory"].ainvoke({"memory_id": added["id"]})))
    assert gone["event"] == "DELETE"
    assert [m["memory"] for m in mem.get_all(user_id="sam")["results"]] == ["Is vegetarian"]


def test_one_tool_can_be_made_alone_over_a_memory_or_a_scoped_handle(memory):
    AddMemoryTool(memory, user_id="sam").invoke({"text": "Likes tea"})
    AddMemoryTool(memory.scope(user_id="ann")).invoke({"text": "Likes coffee"})
    sam = SearchMemoriesTool(memory, user_id="sam")
    assert [r["memory"] for r in json.loads(sam.invoke({"query": "likes", "limit": 10}))["results"]] == ["Likes tea"]
    with pytest.raises(ValidationError, match="one of user_id, agent_id or run_id"):
        SearchMemoriesTool(memory)


@pytest.mark.parametrize(("tool", "args", "said"), [
    ("search_memories", {"query": ""}, "Error: query: must be a non-empty text"),
    ("search_memories", {"query": "cat", "limit": "many"}, "Error: invalid arguments for search_memories: limit: Input should be a valid integer"),
    ("search_memories", {"query": "cat", "limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("search_memories", {"limit": 3}, "Error: invalid arguments for search_memories: query: Field required"),
    ("add_memory", {"text": "  "}, "Error: text: must be a non-empty fact"),
    ("add_memory", {"text": "Likes tea", "importance": 3}, "importance: Input should be less than or equal to 1"),
    ("update_memory", {"memory_id": "no-such-id", "text": "x"}, "Error: memory not found: 'no-such-id'"),
    ("delete_memory", {"memory_id": "no-such-id"}, "Error: memory not found: 'no-such-id'"),
    ("list_memories", {"limit": 1000}, "limit: Input should be less than or equal to 100"),
    # Wrong types are refused as they are, never converted (lax pydantic took these).
    ("search_memories", {"query": "cat", "limit": True}, "Error: invalid arguments for search_memories: limit: Input should be a valid integer (got True)"),
    ("search_memories", {"query": "cat", "limit": "3"}, "limit: Input should be a valid integer (got '3')"),
    ("search_memories", {"query": "cat", "limit": 2.0}, "limit: Input should be a valid integer (got 2.0)"),
    ("list_memories", {"limit": False}, "limit: Input should be a valid integer (got False)"),
    ("list_memories", {"limit": "5"}, "limit: Input should be a valid integer (got '5')"),
    ("add_memory", {"text": "Likes tea", "importance": True}, "importance: Input should be a valid number (got True)"),
    ("add_memory", {"text": "Likes tea", "importance": "0.5"}, "importance: Input should be a valid number (got '0.5')"),
    ("add_memory", {"text": b"Likes tea"}, "text: Input should be a valid string"),
    ("update_memory", {"memory_id": b"id", "text": "x"}, "memory_id: Input should be a valid string"),
])
def test_bad_input_is_an_answer_the_model_reads_and_loses_nothing(memory, tool, args, said):
    kept = memory.add("Has a cat named Miso", user_id="sam", infer=False)["results"][0]["id"]
    tools = by_name(memory_tools(memory, user_id="sam"))
    assert said in tools[tool].invoke(args)
    assert said in asyncio.run(tools[tool].ainvoke(args))
    message = tools[tool].invoke({"name": tool, "args": args, "id": "call_1", "type": "tool_call"})
    assert isinstance(message, ToolMessage) and message.status == "error" and said in message.content
    assert [m["id"] for m in memory.get_all(user_id="sam")["results"]] == [kept]



def test_a_time_no_date_holds_is_remembered_and_searched(memory):
    """Before, the add tool's repeat check and a model's search call raised
    OverflowError on "4500 years ago": the fact could never be stored."""
    tools = by_name(memory_tools(memory, user_id="sam"))
    said = tools["add_memory"].invoke({"text": "The pyramids near our hotel were built 4500 years ago"})
    assert json.loads(said)["results"][0]["event"] == "ADD"
    call = {"name": "search_memories", "args": {"query": "what happened 5000 years ago"}, "id": "call_1", "type": "tool_call"}
    message = tools["search_memories"].invoke(call)
    assert isinstance(message, ToolMessage) and message.status == "success"
    assert [r["memory"] for r in json.loads(message.content)["results"]] == ["The pyramids near our hotel were built 4500 years ago"]

def test_another_users_memory_is_out_of_reach(memory):
    ann = memory.add("Has two dogs", user_id="ann", infer=False)["results"][0]["id"]
    delete = DeleteMemoryTool(memory, user_id="sam")
    assert delete.invoke({"memory_id": ann}) == f"Error: memory not found: '{ann}'"
    assert memory.get(ann, user_id="ann")["memory"] == "Has two dogs"


def test_a_chat_model_calls_the_tools_through_langchain_openai(fake_openai, mem):
    from langchain_openai import ChatOpenAI

    fake_openai.script(
        "chat",
        tool_calls(("add_memory", {"text": "Is vegetarian"})),
        tool_calls(("search_memories", {"query": "diet", "limit": 3})),
        lambda body: text("Remembered: " + "; ".join(
            r["memory"] for out in fake_openai.calls("chat")[-1].tool_outputs()[-1:] for r in json.loads(out)["results"])),
    )
    tools = memory_tools(mem, user_id="sam")
    model = ChatOpenAI(model="gpt-5-mini").bind_tools(tools)  # OPENAI_BASE_URL: the fake server
    messages = [HumanMessage("I'm vegetarian. What do you know about my diet?")]
    for _ in range(5):
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            break
        messages += [by_name(tools)[call["name"]].invoke(call) for call in reply.tool_calls]
    assert reply.content == "Remembered: Is vegetarian"
    assert [m["memory"] for m in mem.get_all(user_id="sam")["results"]] == ["Is vegetarian"]
    sent = fake_openai.calls("chat")[0].body["tools"]
    assert [t["function"]["name"] for t in sent] == list(TOOL_NAMES)
    assert sent[0]["function"]["parameters"]["properties"]["limit"]["maximum"] == 50


def test_an_async_memory_serves_ainvoke(tmp_path):
    async def main():
        async with AsyncMemory(str(tmp_path / "a.db"), embedder="hashing") as memory:
            tools = by_name(memory_tools(memory, user_id="sam"))
            await tools["add_memory"].ainvoke({"text": "Is vegetarian"})
            found = json.loads(await tools["search_memories"].ainvoke({"query": "vegetarian"}))
            with pytest.raises(ConfigurationError, match=r"async memory: call them asynchronously \(ainvoke\)"):
                tools["search_memories"].invoke({"query": "vegetarian"})  # a programming error, raised
            return found

    found = asyncio.run(main())
    assert [r["memory"] for r in found["results"]] == ["Is vegetarian"]


def test_without_langchain_the_error_names_the_extra():
    code = "import sys; sys.modules['langchain_core'] = None\nimport memorist.integrations.langchain"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "MissingDependencyError" in done.stderr and "pip install 'memorist[langchain]'" in done.stderr


def test_a_langgraph_agent_runs_them_in_its_tool_node(fake_openai, memory):
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    memory.add("Is vegetarian", user_id="sam", infer=False)
    fake_openai.script(
        "chat",
        tool_calls(("search_memories", {"query": "diet", "limit": "many"}), ("search_memories", {"query": "diet"})),
        text("done"),
    )
    tools = memory_tools(memory, user_id="sam")
    model = ChatOpenAI(model="gpt-5-mini").bind_tools(tools)
    graph = (
        StateGraph(MessagesState)
        .add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
        .add_node("tools", ToolNode(tools))
        .add_edge(START, "model")
        .add_conditional_edges("model", tools_condition)
        .add_edge("tools", "model")
        .compile()
    )
    final = graph.invoke({"messages": [HumanMessage("What do I eat?")]})
    wrong, right = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert wrong.status == "error" and "limit: Input should be a valid integer" in wrong.content
    assert right.status == "success" and json.loads(right.content)["results"][0]["memory"] == "Is vegetarian"
    assert final["messages"][-1].content == "done"
