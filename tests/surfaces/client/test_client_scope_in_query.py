"""Reading one memory, its history and a scope's events over the service when a URL
path cannot carry the user id (the chat's users are "tenant/user") or the scope has
no user (an agent's memories): the routes that take every id in the query, through
memorist.Client as through the embedded Memory, and under keys bound to a user."""

from __future__ import annotations

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

