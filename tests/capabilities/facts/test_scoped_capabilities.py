"""A scoped handle's capabilities (``memory.scope(...).tiers``, ``.learning``,
``.minutes``): each call of one scope, with the handle's ids, reaching nothing of
another scope; on every storage backend."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from memorist import AsyncMemory, Memory, NotFoundError, ValidationError
from memorist.api import SCOPED_CALLS
from memorist.capabilities import LEARNING_CALLS, Minutes, Tiers


@pytest.fixture
def memory(backend):
    m = Memory(backend.target, embedder="hashing", policy="energy")
    yield m
    m.close()


def test_the_scoped_calls_are_the_capabilities_calls_that_take_the_ids() -> None:
    declared = {"learning": LEARNING_CALLS, "tiers": Tiers.CALLS, "minutes": Minutes.CALLS}
    with Memory(":memory:", embedder="hashing", policy="energy") as m:
        for capability, calls in declared.items():
            ids = {"learning": {"user_id", "agent_id"}, "tiers": {"user_id", "agent_id", "run_id"}, "minutes": {"project_id"}}[capability]
            of_a_scope = {n for n in calls if ids <= set(inspect.signature(getattr(getattr(m, capability), n)).parameters)}
            assert set(SCOPED_CALLS[capability]) - {"get"} == of_a_scope, capability
            assert set(SCOPED_CALLS[capability]) <= set(calls)


def test_the_learning_loop_of_a_handle_is_its_user_s(memory) -> None:
    alex, sam = memory.scope(user_id="alex"), memory.scope(user_id="sam")
    tid = alex.learning.start_trajectory("book a table", "api_call")
    alex.learning.log_step(tid, "action", "called the API")
    assert alex.learning.complete_trajectory(tid, "success")["status"] == "success"
    assert memory.learning.get_trajectory(tid, user_id="alex")["trajectory_id"] == tid
    with pytest.raises(NotFoundError):
        sam.learning.get_trajectory(tid)
    assert [t["trajectory_id"] for t in alex.learning.query_trajectories()] == [tid]
    assert sam.learning.query_trajectories() == []
    # arguments after a positional id land where they belong (batch_reflect's first is agent_id)
    [reflection] = alex.learning.batch_reflect(None, "api_call", 1)
    assert (reflection["task_type"], reflection["trajectory_ids"]) == ("api_call", [tid])
    assert sam.learning.batch_reflect(None, "api_call", 1) == []
    alex.learning.update_playbook([{"category": "helpful", "pattern": "check the date first"}], "booking")
    assert alex.learning.get_playbook("booking")["version"] == 1
    assert sam.learning.get_playbook("booking")["version"] == 0
    with pytest.raises(TypeError, match="takes no user_id"):
        alex.learning.get_playbook("booking", user_id="sam")
    with pytest.raises(ValidationError, match="run_id"):
        memory.scope(user_id="alex", run_id="r1").learning  # noqa: B018 (a run has no learning loop)


def test_the_minutes_of_a_handle_are_its_project_s(memory) -> None:
    apollo, gemini = memory.scope(user_id="apollo"), memory.scope(user_id="gemini")
    minute = apollo.minutes.record("decision", agent_id="planner", memory_note="Apollo launches on Monday")
    assert minute["project_id"] == "apollo"
    assert apollo.minutes.get(minute["id"])["id"] == minute["id"]
    with pytest.raises(NotFoundError, match="minute"):
        gemini.minutes.get(minute["id"])
    assert [m["id"] for m in apollo.minutes.recent(10)] == [minute["id"]]
    assert gemini.minutes.recent(10) == [] and gemini.minutes.by_ids([minute["id"]]) == []
    assert "Monday" in apollo.minutes.build_context("planner", "launch").text
    assert "Monday" not in gemini.minutes.build_context("planner", "launch").text
    for handle in (memory.scope(agent_id="planner"), memory.scope(user_id="apollo", run_id="r1")):
        with pytest.raises(ValidationError, match="project"):
            handle.minutes  # noqa: B018 (names no project)


def test_the_tiers_of_a_handle_are_its_memories_and_not_the_tenant_s_configuration(memory) -> None:
    alex = memory.scope(user_id="alex")
    added = alex.add("Alex likes tea", infer=False)["results"][0]["id"]
    memory.add("Sam likes coffee", user_id="sam", infer=False)
    assert alex.tiers.status()["total"] == 1 and memory.tiers.status()["total"] == 2
    assert alex.tiers.boost(added, 2.0)["id"] == added
    with pytest.raises(NotFoundError):
        memory.scope(user_id="sam").tiers.boost(added)
    assert alex.tiers.maintain()["memories"] == 1
    with pytest.raises(AttributeError, match="not a call of one scope"):
        alex.tiers.config  # noqa: B018
    assert "config" not in dir(alex.tiers) and "maintain" in dir(alex.tiers)


def test_an_async_handle_awaits_its_capabilities_calls(backend) -> None:
    async def main() -> None:
        async with AsyncMemory(backend.target, embedder="hashing") as memory:
            apollo, gemini = memory.scope(user_id="apollo"), memory.scope(user_id="gemini")
            minute = await apollo.minutes.record("decision", memory_note="Apollo launches on Monday")
            assert (await apollo.minutes.get(minute["id"]))["id"] == minute["id"]
            with pytest.raises(NotFoundError):
                await gemini.minutes.get(minute["id"])
            tid = await apollo.learning.start_trajectory("plan the launch")
            assert (await apollo.learning.get_trajectory(tid))["trajectory_id"] == tid

    asyncio.run(main())
