"""memorist.Client where the wire differs from the library: filters too long for the
listing route's URL are a ValidationError naming ``filters`` (never an httpx error), and
``events()`` without an id is sent as every other call is (a user-bound key reads its
user's log)."""

from __future__ import annotations

import asyncio
import json

import pytest

from memorist import AsyncClient, Client, MemoristError, Memory, ValidationError


def _tags(n: int, width: int) -> dict:
    """A valid filter of ``n`` conditions: ``tag`` in n values of ``width`` characters."""
    return {"tag": {"in": ["t-7", *(f"t-{i}" + "x" * width for i in range(n - 1))]}}


def test_filters_too_long_for_the_listing_url_are_a_validation_error_naming_filters(served, tmp_path) -> None:
    big = _tags(900, 60)  # ~60 KB of JSON: more than a URL holds once encoded
    assert len(json.dumps(big)) < 65_536
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as memory:
        memory.add("tagged", user_id="alex", infer=False, metadata={"tag": "t-7"})
        assert len(memory.get_all(user_id="alex", filters=big)["results"]) == 1  # the library takes it
    with Client(served.url) as client:
        client.add("tagged", user_id="alex", infer=False, metadata={"tag": "t-7"})
        with pytest.raises(ValidationError) as info:
            client.get_all(user_id="alex", filters=big)
        assert info.value.field == "filters"
        assert "search" in str(info.value) and "65,536" in str(info.value)
        # search sends them in its body: the same filter works there
        assert [r["memory"] for r in client.search("tagged", user_id="alex", filters=big)["results"]] == ["tagged"]
        # a long filter the URL can carry still goes
        assert [r["memory"] for r in client.get_all(user_id="alex", filters=_tags(900, 10))["results"]] == ["tagged"]

    async def asynchronous() -> None:
        async with AsyncClient(served.url) as client:
            with pytest.raises(ValidationError) as info:
                await client.get_all(user_id="alex", filters=big)
            assert info.value.field == "filters"

    asyncio.run(asynchronous())


def test_a_url_the_client_cannot_build_is_a_memorist_error(served) -> None:
    from memorist.client import _Call, _object

    with Client(served.url) as client:
        call = _Call("GET", "/api/memories/", {"filters": "x" * 70_000}, None, _object)
        with pytest.raises(MemoristError) as info:
            client._send(call)
        assert isinstance(info.value, ValidationError)


def test_events_without_an_id_are_the_bound_key_s_user_s(keyed) -> None:
    server, keys = keyed
    with Client(server.url, api_key=keys["bob"]) as bob:
        bob.add("Likes rock", user_id="bob", infer=False)
        mine = bob.events(user_id="bob")
        assert mine and {e["user_id"] for e in mine} == {"bob"}
        assert bob.events() == mine
        assert bob.events(limit=1) == mine[:1]

    async def asynchronous() -> None:
        async with AsyncClient(server.url, api_key=keys["bob"]) as client:
            assert await client.events() == mine

    asyncio.run(asynchronous())


def test_events_without_an_id_from_a_tenant_key_are_refused_as_memory_refuses_them(keyed, tmp_path) -> None:
    server, keys = keyed
    with Memory(str(tmp_path / "m.db"), embedder="hashing") as memory, pytest.raises(ValidationError) as expected:
        memory.events()
    with Client(server.url, api_key=keys["tenant"]) as client, pytest.raises(ValidationError) as info:
        client.events()
    assert (info.value.field, str(info.value)) == (expected.value.field, str(expected.value))
