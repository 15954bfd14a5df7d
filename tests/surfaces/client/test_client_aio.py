"""memorist.AsyncMemory and memorist.AsyncClient: Memory's calls as coroutines."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from memorist import AsyncClient, AsyncMemory, Client, Memory, NotFoundError, ValidationError

CLIENT_CALLS = ["add", "search", "get", "get_all", "update", "delete", "delete_all", "history", "events"]


def _public(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and callable(v) and not isinstance(v, classmethod)}


def test_async_memory_has_every_call_of_memory_with_its_arguments():
    assert _public(Memory) - {"close"} <= _public(AsyncMemory)
    assert inspect.signature(AsyncMemory.__init__) == inspect.signature(Memory.__init__)
    for name in _public(Memory) - {"close", "scope", "as_subject"}:  # scope() and as_subject() make handles; their calls are awaited
        method = getattr(AsyncMemory, name)
        assert inspect.iscoroutinefunction(method), name
        assert inspect.signature(method).parameters == inspect.signature(getattr(Memory, name)).parameters, name
    assert inspect.iscoroutinefunction(AsyncMemory.aclose)


def test_async_memory_forwards_memory_s_settings(tmp_path):
    from memorist import ConfigurationError
    from memorist.policies.ranking import RankingPolicy

    settings = {n for n, v in vars(Memory).items() if not n.startswith("_") and isinstance(v, property)}
    assert settings <= {n for n, v in vars(AsyncMemory).items() if isinstance(v, property)}
    for name in settings:  # assignable on the one exactly when on the other
        assert (vars(AsyncMemory)[name].fset is None) == (vars(Memory)[name].fset is None), name

    async def main():
        async with AsyncMemory(str(tmp_path / "s.db"), embedder="hashing", policy="energy") as memory:
            assert memory.energy is True
            memory.learning_config = {"trajectory_sample_rate": 0.25}
            assert memory.memory.learning_config.trajectory_sample_rate == 0.25
            assert memory.learning_config is memory.memory.learning_config
            with pytest.raises(ConfigurationError, match="unknown learning setting 'bogus'"):
                memory.learning_config = {"bogus": 1}
            assert memory.memory.learning_config.trajectory_sample_rate == 0.25
            policy = RankingPolicy()
            memory.ranking = policy
            assert memory.ranking is policy and memory.memory.ranking is policy

    asyncio.run(main())


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_the_clients_take_memory_s_arguments(cls):
    for name in CLIENT_CALLS:
        assert inspect.signature(getattr(cls, name)).parameters == inspect.signature(getattr(Memory, name)).parameters, name
        assert inspect.iscoroutinefunction(getattr(cls, name)) == (cls is AsyncClient)


def test_an_async_subject_s_calls_are_awaited_and_checked(tmp_path):
    async def main():
        async with AsyncMemory(str(tmp_path / "r.db"), embedder="hashing") as memory:
            await memory.learning.update_playbook([{"pattern": "Chunk large PDFs"}], agent_id="agent_a")
            agent_b = memory.as_subject(agent_id="agent_b")
            denied = await agent_b.learning.get_playbook("default", agent_id="agent_a")
            await memory.relations.create(("agent", "agent_b"), "viewer", ("playbook", "agent_a/default"))
            granted = await agent_b.learning.get_playbook("default", agent_id="agent_a")
            return denied["strategies"]["helpful"], [s["pattern"] for s in granted["strategies"]["helpful"]]

    assert asyncio.run(main()) == ([], ["Chunk large PDFs"])


def test_an_async_scoped_handle_awaits_its_calls(tmp_path):
    async def main():
        async with AsyncMemory(str(tmp_path / "s.db"), embedder="hashing") as memory:
            alex, sam = memory.scope(user_id="alex"), memory.scope(user_id="sam")
            added = (await alex.add("I'm a vegetarian."))["results"][0]
            assert [m["memory"] for m in (await alex.search("food"))["results"]] == ["Is vegetarian"]
            assert (await sam.get_all())["results"] == []
            with pytest.raises(NotFoundError):
                await sam.get(added["id"])

    asyncio.run(main())


def test_async_memory_serves_concurrent_tasks(tmp_path):
    async def run() -> tuple[list[dict], dict, dict]:
        async with AsyncMemory(str(tmp_path / "aio.db"), embedder="hashing") as memory:
            added = await asyncio.gather(
                *(memory.add(f"Fact number {i} about topic {i}", user_id="u", infer=False) for i in range(20))
            )
            found = await memory.search("topic 7", user_id="u", limit=3)
            listed = await memory.get_all(user_id="u")
            exported = await memory.export(user_id="u")
            assert len(exported) == 20
            assert "decay_days" in await memory.stats()
            return added, found, listed

    added, found, listed = asyncio.run(run())
    assert all(a["results"][0]["event"] == "ADD" for a in added)
    assert len(listed["results"]) == 20
    assert "Fact number 7 about topic 7" in [r["memory"] for r in found["results"]]


def test_async_memory_raises_memory_s_errors(tmp_path):
    async def run() -> None:
        memory = AsyncMemory(str(tmp_path / "aio.db"), embedder="hashing")
        try:
            with pytest.raises(ValidationError) as info:
                await memory.add("hi")
            assert info.value.field == "user_id"
            with pytest.raises(NotFoundError):
                await memory.get("nope", user_id="u")
        finally:
            await memory.aclose()

    asyncio.run(run())


def test_async_client_serves_concurrent_tasks_and_raises_the_same_errors(served):
    async def run() -> None:
        async with AsyncClient(served.url) as client:
            added = await asyncio.gather(*(client.add(f"Async fact {i}", user_id="async-u", infer=False) for i in range(10)))
            ids = [a["results"][0]["id"] for a in added]
            got = await asyncio.gather(*(client.get(i, user_id="async-u") for i in ids))
            assert sorted(g["memory"] for g in got) == sorted(f"Async fact {i}" for i in range(10))
            assert (await client.history(ids[0], user_id="async-u"))[0]["event"] == "ADD"
            with pytest.raises(NotFoundError):
                await client.get("nope", user_id="async-u")
            with pytest.raises(ValidationError) as info:
                await client.search("q", user_id="async-u", limit=0)
            assert info.value.field == "limit"
            assert (await client.delete_all(user_id="async-u"))["deleted"] == 10

    asyncio.run(run())
