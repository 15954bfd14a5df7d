"""Reading one memory, its history and a scope's events over the service when a URL
path cannot carry the user id (the chat's users are "tenant/user") or the scope has
no user (an agent's memories): the routes that take every id in the query, through
memorist.Client as through the embedded Memory, and under keys bound to a user."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from client_live import live_server

from memorist import Client, Memory, NotFoundError


@pytest.fixture
def store(tmp_path):
    db = str(tmp_path / "s.db")
    from memorist.server.keys import KeyStore

    with KeyStore(db) as keys:
        made = {name: keys.create("acme", user_id=user)[0] for name, user in (("tenant", None), ("alice", "school/alice"), ("bob", "bob"))}
    with Memory(db, embedder="hashing", tenant_id="acme") as memory:
        ids = {
            "alice": memory.add("Likes chess", user_id="school/alice", agent_id="chat", infer=False)["results"][0]["id"],
            "bot": memory.add("Retry on 429", agent_id="bot", infer=False)["results"][0]["id"],
            "dots": memory.add("A user named ..", user_id="..", infer=False)["results"][0]["id"],
        }
        memory.update(ids["alice"], "Likes chess and go", user_id="school/alice", agent_id="chat")
        local = {
            "get": memory.get(ids["alice"], user_id="school/alice"),
            "history": memory.history(ids["alice"], user_id="school/alice"),
            "events": memory.events(user_id="school/alice"),
            "bot": memory.get(ids["bot"], agent_id="bot"),
            "bot events": memory.events(agent_id="bot"),
        }
    with live_server(db) as server:
        yield server, made, ids, local


def test_a_user_id_with_a_slash_and_a_scope_without_a_user_read_as_in_memory(store):
    server, keys, ids, local = store
    with Client(server.url, api_key=keys["tenant"]) as client:
        assert client.get(ids["alice"], user_id="school/alice") == local["get"]
        assert client.get(ids["alice"], user_id="school/alice", agent_id="chat") == local["get"]
        assert client.history(ids["alice"], user_id="school/alice") == local["history"]
        assert [e["event"] for e in client.history(ids["alice"], user_id="school/alice")] == ["ADD", "UPDATE"]
        assert client.events(user_id="school/alice") == local["events"]
        assert client.get(ids["bot"], agent_id="bot") == local["bot"]
        assert client.events(agent_id="bot") == local["bot events"]
        assert client.get(ids["dots"], user_id="..")["memory"] == "A user named .."
        # Another scope's memory is not found, as in Memory.
        for call in (lambda: client.get(ids["alice"], user_id="school/bob"),
                     lambda: client.get(ids["alice"], user_id="school/alice", agent_id="other"),
                     lambda: client.history(ids["bot"], user_id="school/alice"),
                     lambda: client.get(ids["bot"], agent_id="bot", run_id="r1")):
            with pytest.raises(NotFoundError):
                call()


def test_a_key_bound_to_a_user_reads_only_its_user_by_the_query_routes(store):
    server, keys, ids, _ = store
    with Client(server.url, api_key=keys["alice"]) as alice:
        assert alice.get(ids["alice"], user_id="school/alice")["memory"] == "Likes chess and go"
        assert len(alice.events(user_id="school/alice")) >= 2
    with Client(server.url, api_key=keys["bob"]) as bob:
        with pytest.raises(NotFoundError):
            bob.get(ids["alice"], user_id="school/alice")
        with pytest.raises(NotFoundError):
            bob.history(ids["alice"], user_id="school/alice")
        assert bob.events(user_id="bob") == []
    # Over plain HTTP, the same answers.
    headers = {"Authorization": f"Bearer {keys['bob']}"}
    answer = httpx.get(f"{server.url}/api/memory/{ids['alice']}/", params={"user_id": "school/alice"}, headers=headers)
    assert answer.status_code == 404
    answer = httpx.get(f"{server.url}/api/events/", params={"user_id": "school/alice"}, headers=headers)
    assert answer.status_code == 404
    answer = httpx.get(f"{server.url}/api/events/", headers={"Authorization": f"Bearer {keys['tenant']}"})
    assert answer.status_code == 422 and answer.json()["error"]["field"] == "user_id"  # one id at least



def test_a_log_longer_than_a_page_is_read_whole_by_the_client_and_a_page_by_http(tmp_path):
    """The events routes answer a page (1,000) unless asked for more: a request naming
    no limit returned the whole log (101,000 events: 42 MB, 2.2 s, the tenant waiting).
    The client reads the whole log a page at a time, as Memory.events gives it."""
    from memorist.api import EVENTS_PAGE

    db = str(tmp_path / "log.db")
    with Memory(db, embedder="hashing") as memory:
        for start in range(0, EVENTS_PAGE + 150, 500):
            memory.add([{"role": "user", "content": f"note {i}"} for i in range(start, start + 500)], user_id="u/x", infer=False)
            memory.add([{"role": "user", "content": f"note {i}"} for i in range(start, start + 500)], user_id="plain", infer=False)
        local = {user: memory.events(user_id=user) for user in ("u/x", "plain")}
        since = local["plain"][10]["seq"]
        local_since = memory.events(user_id="plain", since=since, limit=5)
    assert all(len(events) > EVENTS_PAGE for events in local.values())
    with live_server(db) as server, Client(server.url) as client:
        for user in ("u/x", "plain"):  # the query route and the path route
            assert client.events(user_id=user) == local[user]
        assert client.events(user_id="plain", since=since, limit=5) == local_since
        page = httpx.get(f"{server.url}/api/memories/plain/events/").json()["results"]
        assert page == local["plain"][:EVENTS_PAGE]
        more = httpx.get(f"{server.url}/api/events/", params={"user_id": "u/x", "limit": EVENTS_PAGE + 5000}).json()["results"]
        assert more == local["u/x"]

        async def read_async() -> list:
            from memorist import AsyncClient

            async with AsyncClient(server.url) as aclient:
                return await aclient.events(user_id="u/x")

        assert asyncio.run(read_async()) == local["u/x"]
