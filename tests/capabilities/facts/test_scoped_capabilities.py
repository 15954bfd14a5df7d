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


def test_a_handle_s_arguments_never_reach_past_its_scope(memory) -> None:
    for user in ("carol", "dave"):
        for text in ("Likes green tea in the morning", "Likes green tea in the mornings"):
            memory.add(text, user_id=user, agent_id="tutor", infer=False, importance=0.3)
    dave = sorted(r["id"] for r in memory.get_all(user_id="dave")["results"])
    carol = memory.scope(user_id="carol", agent_id="tutor")
    # A consolidation of every user of the agent, or of every agent of the user.
    for scope in ("agent", "user"):
        with pytest.raises(ValidationError, match="scope: .* reaches past this handle's scope"):
            carol.learning.consolidate(scope=scope)
    assert sorted(r["id"] for r in memory.get_all(user_id="dave")["results"]) == dave
    assert carol.learning.consolidate(dry_run=True)["considered"] == 2  # its own memories
    assert memory.scope(user_id="carol").learning.consolidate(scope="user", dry_run=True)["considered"] == 2
    # Everyone's playbooks: read, never written from one scope.
    memory.learning.update_playbook([{"pattern": "Tenant-wide strategy"}], name="house", scope="tenant")
    bob = memory.scope(user_id="bob")
    assert [s["pattern"] for s in bob.learning.get_playbook("house", scope="tenant")["strategies"]["helpful"]] == ["Tenant-wide strategy"]
    for write in (lambda: bob.learning.update_playbook([{"pattern": "Injected"}], name="house", scope="tenant"),
                  lambda: bob.learning.delete_playbook("house", scope="tenant"),
                  lambda: bob.learning.rollback_playbook("house", 1, scope="tenant"),
                  lambda: bob.learning.create_playbook("other", scope="global")):
        with pytest.raises(ValidationError, match="scope"):
            write()
    assert [s["pattern"] for s in memory.learning.get_playbook("house", scope="tenant")["strategies"]["helpful"]] == ["Tenant-wide strategy"]
    # Another user's trajectory as a parent answers as a missing one would.
    alexs = memory.learning.start_trajectory("alex's private task", user_id="alex")
    for parent in (alexs, "0190c0de-0000-7000-8000-000000000000"):
        with pytest.raises(NotFoundError, match="trajectory not found"):
            bob.learning.start_trajectory("bob's step", parent_trajectory_id=parent)
    own = bob.learning.start_trajectory("bob's workflow")
    assert bob.learning.get_trajectory(bob.learning.start_trajectory("step", parent_trajectory_id=own))["parent_trajectory_id"] == own
    assert memory.learning.query_trajectories(user_id="alex")[0]["trajectory_id"] == alexs


def test_an_async_handle_s_arguments_never_reach_past_its_scope(backend) -> None:
    async def main() -> None:
        async with AsyncMemory(backend.target, embedder="hashing") as m:
            alexs = await m.learning.start_trajectory("alex's task", user_id="alex")
            bob = m.scope(user_id="bob", agent_id="x")
            with pytest.raises(ValidationError, match="scope"):
                await bob.learning.consolidate(scope="agent")
            with pytest.raises(NotFoundError):
                await bob.learning.start_trajectory("step", parent_trajectory_id=alexs)

    asyncio.run(main())
