"""Memorist's memory tools in the OpenAI Agents SDK: real agent runs (``Runner``) against
the fake OpenAI server speaking the Responses API, the model calling the tools."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest
from agents import Agent, FunctionTool, OpenAIResponsesModel, RunConfig, Runner
from fake_openai import Request, text, tool_calls
from openai import AsyncOpenAI

from memorist import AsyncMemory, Memory, ValidationError
from memorist.integrations.openai_agents import TOOL_NAMES, memory_tools, remember_run

# The runs never send traces to OpenAI's dashboard (the tests reach no network).
CONFIG = RunConfig(tracing_disabled=True)


def agent(tools):
    # A client of its own: the SDK's shared one would outlive the event loop of its run.
    model = OpenAIResponsesModel(model="gpt-5-mini", openai_client=AsyncOpenAI())
    return Agent(name="Assistant", instructions="Use your memory.", model=model, tools=tools)


def outputs(fake, i=-1):
    """The tool outputs the i-th request to the model sent back."""
    return fake.calls("responses")[i].tool_outputs()


def found_in(body):
    """The memories the search_memories outputs of a request to the model hold."""
    return [r["memory"] for out in Request("/v1/responses", {}, body).tool_outputs() for r in json.loads(out)["results"]]


@pytest.fixture
def mem(backend):
    with Memory(backend.target, embedder="hashing") as memory:
        yield memory


def test_the_model_sees_typed_documented_strict_tools(memory):
    tools = memory_tools(memory, user_id="sam")
    assert all(isinstance(t, FunctionTool) for t in tools)
    assert tuple(t.name for t in tools) == TOOL_NAMES
    by = {t.name: t for t in tools}
    search = by["search_memories"].params_json_schema
    assert search["properties"]["query"]["type"] == "string"
    assert search["properties"]["limit"] | {"description": ""} == {
        "type": "integer", "minimum": 1, "maximum": 50, "default": 5, "title": "Limit", "description": ""}
    assert all(p.get("description") for t in tools for p in t.params_json_schema["properties"].values())
    assert all(t.strict_json_schema and t.params_json_schema["additionalProperties"] is False for t in tools)
    assert by["add_memory"].params_json_schema["properties"]["importance"]["anyOf"][1] == {"type": "null"}
    assert "search_memories" in by["update_memory"].description and "Search" in by["search_memories"].description
    assert [t.name for t in memory_tools(memory, user_id="sam", include=["search_memories"])] == ["search_memories"]


def test_an_agent_remembers_then_answers_from_memory(fake_openai, mem):
    fake_openai.script(
        "responses",
        tool_calls(("add_memory", {"text": "Is vegetarian", "importance": None}),
                   ("add_memory", {"text": "Is allergic to peanuts", "importance": 0.9})),
        text("Noted."),
        tool_calls(("search_memories", {"query": "dietary restrictions", "limit": 5})),
        lambda body: text("Dinner: " + "; ".join(sorted(found_in(body)))),
    )
    tools = memory_tools(mem, user_id="sam")
    first = Runner.run_sync(agent(tools), "I'm vegetarian and allergic to peanuts.", run_config=CONFIG)
    assert first.final_output == "Noted."
    assert sorted(m["memory"] for m in mem.get_all(user_id="sam")["results"]) == ["Is allergic to peanuts", "Is vegetarian"]
    second = Runner.run_sync(agent(tools), "What should I cook tonight?", run_config=CONFIG)
    # The final answer is made from what search_memories returned from the store.
    assert second.final_output == "Dinner: Is allergic to peanuts; Is vegetarian"
    sent = fake_openai.calls("responses")
    assert [t["name"] for t in sent[0].body["tools"]] == list(TOOL_NAMES)
    assert all(t["strict"] for t in sent[0].body["tools"])


def test_corrections_and_forgetting_go_through_the_tools(fake_openai, memory):
    old = memory.add("Lives in Paris", user_id="sam", infer=False)["results"][0]["id"]
    gone = memory.add("Likes jazz", user_id="sam", infer=False)["results"][0]["id"]
    fake_openai.script(
        "responses",
        tool_calls(("list_memories", {"limit": 20})),
        lambda body: tool_calls(("update_memory", {"memory_id": old, "text": "Lives in Lyon"}),
                                ("delete_memory", {"memory_id": gone})),
        text("Done."),
    )
    result = Runner.run_sync(agent(memory_tools(memory, user_id="sam")), "I moved to Lyon; forget the jazz.", run_config=CONFIG)
    assert result.final_output == "Done."
    listed = json.loads(outputs(fake_openai, 1)[0])["results"]
    assert {r["id"] for r in listed} == {old, gone}
    updated, deleted = (json.loads(o) for o in outputs(fake_openai)[-2:])
    assert updated["previous_memory"] == "Lives in Paris" and deleted["event"] == "DELETE"
    assert [m["memory"] for m in memory.get_all(user_id="sam")["results"]] == ["Lives in Lyon"]
    assert [e["event"] for e in memory.history(old, user_id="sam")] == ["ADD", "UPDATE"]


def test_bad_calls_answer_the_model_a_clear_error_and_lose_nothing(fake_openai, memory):
    kept = memory.add("Has a cat named Miso", user_id="sam", infer=False)["results"][0]["id"]
    ann = memory.add("Has two dogs", user_id="ann", infer=False)["results"][0]["id"]
    fake_openai.script(
        "responses",
        tool_calls(
            ("search_memories", {"query": "", "limit": 5}),
            ("search_memories", {"query": "cat", "limit": "many"}),
            ("search_memories", {"query": "cat", "limit": 500}),
            ("search_memories", "{not json"),
            ("add_memory", {"text": "   ", "importance": None}),
            ("delete_memory", {"memory_id": "no-such-id"}),
            ("delete_memory", {"memory_id": ann}),
            ("delete_memory", {}),
        ),
        text("Sorry."),
    )
    result = Runner.run_sync(agent(memory_tools(memory, user_id="sam")), "hi", run_config=CONFIG)
    assert result.final_output == "Sorry."
    answers = outputs(fake_openai)
    assert len(answers) == 8 and all(a.startswith("Error: ") for a in answers)
    empty, wrong_type, too_many, broken, blank, unknown, others, missing = answers
    assert "query: must be a non-empty text" in empty
    assert "invalid arguments for search_memories: limit: Input should be a valid integer" in wrong_type and "'many'" in wrong_type
    assert "limit: Input should be less than or equal to 50" in too_many
    assert "arguments of search_memories are not valid JSON" in broken
    assert "text: must be a non-empty fact" in blank
    assert "memory not found: 'no-such-id'" in unknown
    assert f"memory not found: '{ann}'" in others  # another user's memory is as good as missing
    assert "memory_id: Field required" in missing
    assert [m["id"] for m in memory.get_all(user_id="sam")["results"]] == [kept]
    assert [m["id"] for m in memory.get_all(user_id="ann")["results"]] == [ann]


def test_arguments_of_the_wrong_type_are_refused_not_converted(fake_openai, memory):
    kept = memory.add("Has a cat named Miso", user_id="sam", infer=False)["results"][0]["id"]
    fake_openai.script(
        "responses",
        tool_calls(
            ("list_memories", {"limit": "5"}),
            ("list_memories", {"limit": True}),
            ("list_memories", {"limit": 2.0}),
            ("search_memories", {"query": "cat", "limit": "3"}),
            ("search_memories", {"query": 7, "limit": 3}),
            ("add_memory", {"text": "Likes tea", "importance": True}),
            ("add_memory", {"text": "Likes tea", "importance": "0.5"}),
            ("update_memory", {"memory_id": kept, "text": 5}),
            ("delete_memory", {"memory_id": 12}),
        ),
        text("Sorry."),
    )
    result = Runner.run_sync(agent(memory_tools(memory, user_id="sam")), "hi", run_config=CONFIG)
    assert result.final_output == "Sorry."
    answers = outputs(fake_openai)
    assert len(answers) == 9 and all(a.startswith("Error: invalid arguments for ") for a in answers)
    assert [a.split(": ", 3)[2] for a in answers] == ["limit"] * 4 + ["query", "importance", "importance", "text", "memory_id"]
    assert "limit: Input should be a valid integer (got '5')" in answers[0]
    assert "limit: Input should be a valid integer (got True)" in answers[1]
    assert "importance: Input should be a valid number (got True)" in answers[5]
    assert [(m["id"], m["memory"]) for m in memory.get_all(user_id="sam")["results"]] == [(kept, "Has a cat named Miso")]


def test_a_failing_store_is_not_shown_to_the_model(fake_openai, tmp_path):
    memory = Memory(str(tmp_path / "m.db"), embedder="hashing")
    tools = memory_tools(memory, user_id="sam")
    memory.close()
    fake_openai.script("responses", tool_calls(("search_memories", {"query": "cat", "limit": 5})), text("ok"))
    Runner.run_sync(agent(tools), "hi", run_config=CONFIG)
    # The SDK's default answer for an error the model cannot fix; the details are logged.
    assert outputs(fake_openai) == ["An error occurred while running the tool. Please try again."]


def test_remember_run_keeps_the_exchange(fake_openai, mem):
    fake_openai.script("responses", text("Nice to meet you, Sam!"))
    result = Runner.run_sync(agent([]), "Hi, I'm a vegetarian and I live in Lyon.", run_config=CONFIG)
    added = remember_run(mem, result, user_id="sam", metadata={"source": "chat"})
    assert sorted(r["memory"] for r in added["results"]) == ["Is vegetarian", "Lives in Lyon"]
    assert all(m["metadata"] == {"source": "chat"} for m in mem.get_all(user_id="sam")["results"])
    [turn] = [e for e in mem.events(user_id="sam") if e["event"] == "TURN"]
    assert turn["payload"]["messages"] == [
        {"role": "user", "content": "Hi, I'm a vegetarian and I live in Lyon."},
        {"role": "assistant", "content": "Nice to meet you, Sam!"},
    ]
    with pytest.raises(ValidationError, match="result: must be the result of Runner.run"):
        remember_run(mem, "Hi", user_id="sam")


def test_an_async_memory_serves_the_tools_of_an_async_run(fake_openai, tmp_path):
    fake_openai.script(
        "responses",
        tool_calls(("add_memory", {"text": "Is vegetarian", "importance": None})),
        tool_calls(("search_memories", {"query": "vegetarian", "limit": 3})),
        text("ok"),
    )

    async def main():
        async with AsyncMemory(str(tmp_path / "a.db"), embedder="hashing") as memory:
            await Runner.run(agent(memory_tools(memory, user_id="sam")), "I'm vegetarian.", run_config=CONFIG)
            return await memory.get_all(user_id="sam")

    assert [m["memory"] for m in asyncio.run(main())["results"]] == ["Is vegetarian"]
    assert json.loads(outputs(fake_openai)[-1])["results"][0]["memory"] == "Is vegetarian"


def test_bad_construction_is_refused(memory):
    with pytest.raises(ValidationError, match="one of user_id, agent_id or run_id"):
        memory_tools(memory)
    with pytest.raises(ValidationError, match="unknown tool 'forget'"):
        memory_tools(memory, user_id="sam", include=["forget"])


def test_without_the_sdk_the_error_names_the_extra():
    code = "import sys; sys.modules['agents'] = None\nimport memorist.integrations.openai_agents"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "MissingDependencyError" in done.stderr and "pip install 'memorist[openai-agents]'" in done.stderr
    ok = subprocess.run([sys.executable, "-c", "import sys; sys.modules['agents'] = None\nimport memorist; print('ok')"],
                        capture_output=True, text=True, timeout=120)
    assert ok.stdout.strip() == "ok", ok.stderr


def test_repeats_called_at_once_are_remembered_once(fake_openai, memory, monkeypatch):
    # The SDK runs a turn's tool calls concurrently: the look for a repeat and the write are
    # one step. A slow write leaves every call time to look before the first one writes.
    add = memory.add

    def slow_add(*args, **kwargs):
        time.sleep(0.2)
        return add(*args, **kwargs)

    monkeypatch.setattr(memory, "add", slow_add)
    fake_openai.script("responses", tool_calls(*[("add_memory", {"text": "Is vegetarian", "importance": None})] * 4), text("ok"))
    Runner.run_sync(agent(memory_tools(memory, user_id="sam")), "I'm vegetarian.", run_config=CONFIG)
    events = sorted(json.loads(o)["results"][0]["event"] for o in outputs(fake_openai))
    assert events == ["ADD", "NONE", "NONE", "NONE"]
    assert [m["memory"] for m in memory.get_all(user_id="sam")["results"]] == ["Is vegetarian"]
