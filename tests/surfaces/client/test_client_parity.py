"""memorist.Client against a live service: the same script gives the same answers as
the embedded Memory, and the same errors come back as the same classes."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

import memorist
from memorist import Client, Memory, NotFoundError, ValidationError

WHEN = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d)?$")


def script(memory: Any) -> dict[str, Any]:
    """Every call of the mem0-style API, as an application would make them."""
    out: dict[str, Any] = {}
    out["add"] = memory.add(
        [
            {"role": "user", "content": "Hi, I'm Alex. I'm a vegetarian and allergic to nuts."},
            {"role": "assistant", "content": "Hello Alex! I'll remember your dietary preferences."},
        ],
        user_id="alex",
        metadata={"session_id": "session_123", "source": "chat"},
    )
    out["add_verbatim"] = memory.add("Prefers window seats", user_id="alex", infer=False, timestamp=WHEN)
    out["add_agent"] = memory.add("Answers in French", agent_id="helper", infer=False, metadata={"n": (1, 2)})
    out["search"] = memory.search("What are my food preferences?", user_id="alex", limit=5)
    out["search_filtered"] = memory.search(
        "food", user_id="alex", filters={"source": "chat"}, threshold=-1.0, reference_time=WHEN
    )
    out["search_dated"] = memory.search(
        "seats", user_id="alex", filters={"created_at": {"lte": datetime(2024, 2, 1, tzinfo=UTC)}}
    )
    vegetarian = next(r["id"] for r in out["add"]["results"] if r["memory"] == "Is vegetarian")
    out["get"] = memory.get(vegetarian, user_id="alex")
    out["get_all"] = memory.get_all(user_id="alex", limit=10)
    out["get_all_filtered"] = memory.get_all(user_id="alex", filters={"source": "chat"})
    out["get_all_agent"] = memory.get_all(agent_id="helper")
    out["update"] = memory.update(vegetarian, "Is vegan", {"changed": True}, user_id="alex")
    out["get_updated"] = memory.get(vegetarian, user_id="alex")
    out["history"] = memory.history(vegetarian, user_id="alex")
    out["delete"] = memory.delete(vegetarian, user_id="alex")
    out["history_deleted"] = memory.history(vegetarian, user_id="alex")
    out["after_delete"] = memory.get_all(user_id="alex")
    out["events"] = memory.events(user_id="alex")
    out["events_since"] = memory.events(user_id="alex", since=2, limit=2)
    out["delete_all"] = memory.delete_all(user_id="alex")
    out["empty"] = memory.get_all(user_id="alex")
    out["erase_preview"] = memory.erase(agent_id="helper", dry_run=True)
    out["erase"] = memory.erase(agent_id="helper")
    out["erased_agent"] = memory.get_all(agent_id="helper")
    return out


def normalise(value: Any, ids: dict[str, str] | None = None) -> Any:
    """Ids by order of appearance, dates and floats by their kind: what must match
    exactly between two stores built at different moments."""
    ids = {} if ids is None else ids
    if isinstance(value, dict):
        return {k: normalise(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, ids) for v in value]
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, str) and _UUID.match(value):
        return ids.setdefault(value, f"<id{len(ids)}>")
    if isinstance(value, str) and _DATE.match(value) and not value.startswith("2024-01-15"):
        return "<date>"
    return value


def test_the_same_script_gives_the_same_answers_embedded_and_served(fresh, tmp_path):
    with Memory(str(tmp_path / "local.db"), embedder="hashing") as memory:
        local = script(memory)
    with Client(fresh.url) as memory:  # the one line that changes
        remote = script(memory)
    assert local["add"]["message"] == "Added 3 memories successfully"
    assert normalise(remote) == normalise(local)
    # Exact where exactness is owed: texts, order, the timestamp given, scores.
    assert remote["add_verbatim"]["results"][0]["memory"] == "Prefers window seats"
    assert [r["memory"] for r in remote["search"]["results"]] == [r["memory"] for r in local["search"]["results"]]
    assert [r["score"] for r in remote["search"]["results"]] == pytest.approx([r["score"] for r in local["search"]["results"]])
    verbatim = next(r for r in remote["get_all"]["results"] if r["memory"] == "Prefers window seats")
    assert verbatim["created_at"] == "2024-01-15T10:30:00+00:00"
    assert [r["memory"] for r in remote["search_dated"]["results"]] == ["Prefers window seats"]
    assert remote["get_all_agent"]["results"][0]["metadata"] == {"n": [1, 2]}
    assert remote["update"]["previous_memory"] == "Is vegetarian"
    assert [e["event"] for e in remote["history_deleted"]] == ["ADD", "UPDATE", "DELETE"]
    assert remote["delete_all"] == {"deleted": 3, "message": "Deleted 3 memories"}
    assert remote["empty"] == {"results": []}
    assert remote["erase"]["erased"]["facts"] == 1 and remote["erase"]["store"]["complete"] is True
    assert remote["erased_agent"] == {"results": []}


def test_the_async_client_and_async_memory_give_the_same_answers(fresh, tmp_path):
    import asyncio

    from memorist import AsyncClient, AsyncMemory

    class Synced:
        """The script's calls, each awaited on the running loop from a worker thread."""

        def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
            self.target, self.loop = target, loop

        def __getattr__(self, name: str) -> Any:
            call = getattr(self.target, name)
            return lambda *a, **k: asyncio.run_coroutine_threadsafe(call(*a, **k), self.loop).result(timeout=30)

    async def run(make: Any) -> dict[str, Any]:
        target = make()
        async with target:
            return await asyncio.to_thread(script, Synced(target, asyncio.get_running_loop()))

    with Memory(str(tmp_path / "local.db"), embedder="hashing") as memory:
        local = normalise(script(memory))
    assert normalise(asyncio.run(run(lambda: AsyncMemory(str(tmp_path / "aio.db"), embedder="hashing")))) == local
    assert normalise(asyncio.run(run(lambda: AsyncClient(fresh.url)))) == local


def test_the_memory_management_url_of_spec_004_is_taken_as_the_base(served):
    for url in (f"{served.url}/api/memories", f"{served.url}/api/memories/", f"{served.url}/"):
        with Client(url) as client:
            assert client.base_url == served.url
            client.add("Likes tea", user_id="spec4", infer=False)
            assert client.get_all(user_id="spec4")["results"][0]["memory"] == "Likes tea"
            client.delete_all(user_id="spec4")


def test_ids_are_sent_as_one_path_segment(served):
    with Client(served.url) as client:
        user = "Ünïcode user %41?#&"
        added = client.add("Owns a bike", user_id=user, infer=False)["results"][0]
        assert client.get(added["id"], user_id=user)["user_id"] == user
        assert client.history(added["id"], user_id=user)[0]["event"] == "ADD"
        assert client.events(user_id=user)[-1]["user_id"] == user
        # A user id a path segment cannot carry goes in the query: another user's
        # memory is not found, as in Memory; a memory id holding "/" cannot be sent.
        with pytest.raises(NotFoundError):
            client.get(added["id"], user_id="a/b")
        with pytest.raises(ValidationError) as info:
            client.get("a/b", user_id=user)
        assert info.value.field == "memory_id"


# errors -------------------------------------------------------------------------------------
def _errors() -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    long_text = "x" * 100_001
    return [
        # checked by the client first, exactly as Memory checks them
        ("add", ("hi",), {}),
        ("add", ([],), {"user_id": "u"}),
        ("add", ([{"role": "bot", "content": "x"}],), {"user_id": "u"}),
        ("add", ("hi",), {"user_id": "u", "metadata": {"x": float("nan")}}),
        ("add", ("hi",), {"user_id": "u", "infer": "yes"}),
        ("add", ("hi",), {"user_id": "u", "timestamp": "yesterday"}),
        ("add", ("hi",), {"user_id": "u\x00"}),
        ("search", ("",), {"user_id": "u"}),
        ("search", ("q",), {"user_id": "u", "limit": 0}),
        ("search", ("q",), {"user_id": "u", "threshold": 2}),
        ("search", ("q",), {"user_id": "u", "filters": ["source"]}),
        ("get_all", (), {"user_id": "u", "limit": -1}),
        ("delete_all", (), {}),
        ("erase", (), {}),
        ("erase", (), {"user_id": "u", "dry_run": "yes"}),
        ("update", ("", "text"), {"user_id": "u"}),
        ("events", (), {"user_id": "u", "since": -1}),
        # judged by the service (lengths, filters, ownership) and decoded
        ("add", (long_text,), {"user_id": "u"}),
        ("search", (long_text,), {"user_id": "u"}),
        ("search", ("q",), {"user_id": "u", "filters": {"source": {"bogus": 1}}}),
        ("search", ("q",), {"user_id": "u", "filters": {"AND": "x"}}),
        ("get", ("no-such-id",), {"user_id": "u"}),
        ("update", ("no-such-id", "text"), {"user_id": "u"}),
        # Memory looks the memory up before it judges the text: a missing one is not found
        ("update", ("no-such-id", ""), {"user_id": "u"}),
        ("update", ("no-such-id", "x" * 100_001), {"user_id": "u"}),
        ("update", ("no-such-id", "a\x00b"), {"user_id": "u"}),
        # filters that are not JSON data: Memory's check names the part
        ("search", ("q",), {"user_id": "u", "filters": {"a": object()}}),
        ("search", ("q",), {"user_id": "u", "filters": {"OR": [{"a": {"in": [float("nan")]}}]}}),
        ("get_all", (), {"user_id": "u", "filters": {"a": {"gte": object()}}}),
        ("delete", ("no-such-id",), {"user_id": "u"}),
        ("history", ("no-such-id",), {"user_id": "u"}),
    ]


@pytest.mark.parametrize(("call", "args", "kwargs"), _errors(), ids=lambda v: v if isinstance(v, str) else None)
def test_errors_come_back_as_the_classes_memory_raises(served, tmp_path, call, args, kwargs):
    with Memory(str(tmp_path / "local.db"), embedder="hashing") as memory, pytest.raises(memorist.MemoristError) as local:
        getattr(memory, call)(*args, **kwargs)
    with Client(served.url) as client, pytest.raises(memorist.MemoristError) as remote:
        getattr(client, call)(*args, **kwargs)
    assert type(remote.value) is type(local.value)
    assert str(remote.value) == str(local.value)
    if isinstance(local.value, ValidationError):
        assert remote.value.field == local.value.field


def test_a_memory_of_another_user_is_not_found_like_a_missing_one(served):
    with Client(served.url) as client:
        mine = client.add("Plays chess", user_id="owner", infer=False)["results"][0]["id"]
        for call in (client.get, client.history):
            with pytest.raises(NotFoundError) as info:
                call(mine, user_id="intruder")
            assert str(info.value) == f"memory not found: {mine!r}"
        with pytest.raises(NotFoundError):
            client.update(mine, "Plays go", user_id="intruder")
        with pytest.raises(NotFoundError):
            client.delete(mine, user_id="intruder")
        assert client.get(mine, user_id="owner")["memory"] == "Plays chess"


def test_get_and_history_keep_memory_s_ownership_rule_for_agent_and_run(fresh, tmp_path):
    with Memory(str(tmp_path / "local.db"), embedder="hashing") as memory, Client(fresh.url) as client:
        for target in (memory, client):
            mid = target.add("Speaks Dutch", user_id="u", agent_id="a1", run_id="r1", infer=False)["results"][0]["id"]
            assert target.get(mid, user_id="u", agent_id="a1", run_id="r1")["memory"] == "Speaks Dutch"
            assert target.history(mid, user_id="u", agent_id="a1")[0]["event"] == "ADD"
            for ids in ({"agent_id": "a2"}, {"run_id": "r2"}, {"agent_id": "a1", "run_id": "r2"}):
                for call in (target.get, target.history):
                    with pytest.raises(NotFoundError) as info:
                        call(mid, user_id="u", **ids)
                    assert str(info.value) == f"memory not found: {mid!r}"
