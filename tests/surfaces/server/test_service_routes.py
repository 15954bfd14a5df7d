"""Every route of docs/service-contract.md, its shapes, with and without the trailing slash."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from memorist.errors import StoreError
from service_helpers import TURN, assert_error

ITEM_KEYS = {"id", "memory", "user_id", "agent_id", "run_id", "created_at", "updated_at", "metadata", "kind", "memory_class"}
EVENT_KEYS = {"seq", "event", "memory_id", "old_memory", "new_memory", "created_at", "actor", "tenant_id", "user_id", "agent_id", "run_id", "payload"}


def slash(path: str, with_slash: bool) -> str:
    """``path`` (written with its trailing slash) with or without it, query kept."""
    base, sep, query = path.partition("?")
    base = base if with_slash else base.rstrip("/")
    return base + sep + query


def add(client: TestClient, text: str, user: str = "alex", **extra) -> dict:
    r = client.post("/api/memories/", json={"messages": text, "user_id": user, "infer": False, **extra})
    assert r.status_code == 200, r.text
    return r.json()["results"][0]


@pytest.mark.parametrize("with_slash", [True, False], ids=["slash", "no-slash"])
def test_every_route_and_shape(client: TestClient, with_slash: bool) -> None:
    p = lambda path: slash(path, with_slash)  # noqa: E731

    # add (spec 004 §1): the results and the message
    r = client.post(p("/api/memories/"), json={"messages": TURN, "user_id": "alex", "metadata": {"source": "chat"}})
    assert r.status_code == 200 and not r.history  # no redirect
    body = r.json()
    assert set(body) == {"results", "message"}
    assert [set(x) >= {"id", "memory", "event"} for x in body["results"]] == [True] * len(body["results"])
    assert {x["event"] for x in body["results"]} == {"ADD"}
    assert body["message"] == f"Added {len(body['results'])} memories successfully"
    assert {x["memory"] for x in body["results"]} == {"Name is Alex", "Loves hiking"}

    # search (§2)
    r = client.post(p("/api/memories/search/"), json={"query": "outdoor activities hiking", "user_id": "alex", "limit": 3})
    assert r.status_code == 200 and not r.history
    results = r.json()["results"]
    assert 1 <= len(results) <= 3
    assert set(results[0]) >= ITEM_KEYS and "score" in results[0]
    assert results[0]["memory"] == "Loves hiking"
    assert results[0]["metadata"] == {"source": "chat"}

    # get all (§3): newest first, same item shape
    newest = add(client, "Prefers dark mode")
    r = client.get(p("/api/memories/alex/?limit=100"))
    assert r.status_code == 200 and not r.history
    items = r.json()["results"]
    assert [i["id"] for i in items][0] == newest["id"]
    assert all(set(i) >= ITEM_KEYS for i in items) and len(items) == 3
    assert [i["created_at"] for i in items] == sorted((i["created_at"] for i in items), reverse=True)
    assert client.get(p("/api/memories/alex/?limit=1")).json()["results"][0]["id"] == newest["id"]

    # the same list through the query form
    r = client.get(p("/api/memories/?user_id=alex"))
    assert [i["id"] for i in r.json()["results"]] == [i["id"] for i in items]
    # filtered alike by both paths (the user's path once ignored them)
    chat = {"filters": '{"source": "chat"}'}
    by_user = client.get(p("/api/memories/alex/"), params=chat).json()["results"]
    assert {i["memory"] for i in by_user} == {"Name is Alex", "Loves hiking"}
    assert by_user == client.get(p("/api/memories/"), params={"user_id": "alex", **chat}).json()["results"]
    assert_error(client.get(p("/api/memories/alex/"), params={"filters": "garbage"}), 422, "validation_error", "filters")

    # one memory, its update, its history
    r = client.get(p(f"/api/memories/alex/{newest['id']}/"))
    assert r.status_code == 200 and r.json()["memory"] == "Prefers dark mode" and set(r.json()) >= ITEM_KEYS
    r = client.put(p(f"/api/memories/{newest['id']}/?user_id=alex"), json={"text": "Prefers light mode", "metadata": {"k": 1}})
    assert r.status_code == 200
    assert r.json() == {"id": newest["id"], "memory": "Prefers light mode", "event": "UPDATE", "previous_memory": "Prefers dark mode"}
    assert client.get(p(f"/api/memories/alex/{newest['id']}/")).json()["metadata"] == {"k": 1}
    r = client.get(p(f"/api/memories/alex/{newest['id']}/history/"))
    history = r.json()["results"]
    assert [e["event"] for e in history] == ["ADD", "UPDATE"]
    assert all(set(e) == EVENT_KEYS for e in history)
    assert history[1]["old_memory"] == "Prefers dark mode" and history[1]["new_memory"] == "Prefers light mode"

    # the user's event log
    r = client.get(p("/api/memories/alex/events/"))
    events = r.json()["results"]
    assert events[0]["event"] == "TURN" and [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    since = events[-2]["seq"]
    assert [e["seq"] for e in client.get(p(f"/api/memories/alex/events/?since={since}")).json()["results"]] == [events[-1]["seq"]]
    assert len(client.get(p("/api/memories/alex/events/?limit=2")).json()["results"]) == 2

    # users of the tenant
    add(client, "Likes tea", user="sam")
    r = client.get(p("/api/users/"))
    assert r.json() == {"results": [{"user_id": "alex", "memories": 3}, {"user_id": "sam", "memories": 1}]}

    # delete one (§4), then it is gone everywhere but in its history
    r = client.delete(p(f"/api/memories/{newest['id']}/?user_id=alex"))
    assert r.status_code == 200
    assert r.json() == {"id": newest["id"], "memory": "Prefers light mode", "event": "DELETE", "message": "Memory deleted successfully"}
    assert_error(client.get(p(f"/api/memories/alex/{newest['id']}/")), 404, "not_found")
    assert [e["event"] for e in client.get(p(f"/api/memories/alex/{newest['id']}/history/")).json()["results"]][-1] == "DELETE"

    # delete all (§5)
    r = client.delete(p("/api/memories/?user_id=alex"))
    assert r.json() == {"deleted": 2, "message": "Deleted 2 memories"}
    assert client.get(p("/api/memories/alex/")).json() == {"results": []}
    assert client.get(p("/api/memories/sam/")).json()["results"][0]["memory"] == "Likes tea"


def test_healthz_panel_and_docs(client: TestClient, new_key) -> None:
    for path in ("/healthz", "/healthz/"):
        r = client.get(path)
        assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["version"]
    schema = client.get("/openapi.json").json()
    paths = set(schema["paths"])
    assert "/api/memories/" in paths and "/api/memories/search/" in paths
    assert not any(p.startswith("/api") and not p.endswith("/") for p in paths)  # one form documented
    add_body = schema["paths"]["/api/memories/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert add_body["$ref"].endswith("/AddRequest")
    # a development server documents no key; one with keys documents both headers
    assert "securitySchemes" not in schema["components"]
    assert not any("security" in op for item in schema["paths"].values() for op in item.values())
    assert client.get("/docs").status_code == 200
    new_key("acme")
    schema = client.get("/openapi.json").json()
    assert {"HTTPBearer", "APIKeyHeader"} <= set(schema["components"]["securitySchemes"])
    assert schema["paths"]["/api/memories/"]["post"]["security"] == [{"HTTPBearer": []}, {"APIKeyHeader": []}]
    # GET by user and PUT/DELETE by memory share one path template, as OpenAPI requires
    assert set(schema["paths"]["/api/memories/{id}/"]) == {"get", "put", "delete"}


def test_panel_is_served_and_an_empty_folder_still_works(client: TestClient, make_app, tmp_path, monkeypatch) -> None:
    import memorist.server.app as server_app

    if server_app.STATIC_DIR.joinpath("index.html").is_file():
        r = client.get("/")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    empty = tmp_path / "static"
    empty.mkdir()
    monkeypatch.setattr(server_app, "STATIC_DIR", empty)
    with TestClient(make_app(db=str(tmp_path / "other.db"))) as c:
        assert_error(c.get("/"), 404, "not_found")
        assert c.get("/static/app.js").status_code == 404
        assert c.get("/healthz").status_code == 200
    monkeypatch.setattr(server_app, "STATIC_DIR", tmp_path / "missing")
    with TestClient(make_app(db=str(tmp_path / "third.db"))) as c:
        assert_error(c.get("/"), 404, "not_found")
        assert c.get("/static/app.js").status_code == 404


def test_add_verbatim_with_scope_metadata_and_timestamp(client: TestClient) -> None:
    r = client.post(
        "/api/memories",
        json={
            "messages": [{"role": "user", "content": "We moved to Lisbon", "name": "Ana", "metadata": {"mood": "happy"}}],
            "agent_id": "planner",
            "run_id": "r1",
            "infer": False,
            "timestamp": "2024-01-15T10:30:00Z",
            "metadata": {"source": "chat"},
        },
    )
    assert r.status_code == 200, r.text
    item = client.get("/api/memories/?agent_id=planner&run_id=r1").json()["results"][0]
    assert item["memory"] == "We moved to Lisbon" and item["agent_id"] == "planner" and item["run_id"] == "r1"
    assert item["created_at"].startswith("2024-01-15T10:30:00")
    assert item["metadata"]["source"] == "chat" and item["metadata"]["mood"] == "happy"


def test_search_filters_and_threshold(client: TestClient) -> None:
    add(client, "Loves hiking in the Alps", metadata={"source": "sport"})
    add(client, "Loves hiking trips", metadata={"source": "travel"})
    r = client.post("/api/memories/search", json={"query": "hiking", "user_id": "alex", "filters": {"source": "travel"}})
    assert [i["memory"] for i in r.json()["results"]] == ["Loves hiking trips"]
    r = client.post("/api/memories/search", json={"query": "hiking", "user_id": "alex", "threshold": 1.0})
    assert r.json() == {"results": []}


def test_decay_applies_to_every_read_route(make_app, store: str) -> None:
    from memorist import Memory

    with Memory(store, embedder="hashing") as m:
        old = m.add("An old fact about Lisbon", user_id="alex", infer=False, timestamp="2020-01-01T00:00:00Z")["results"][0]["id"]
        m.add("A new fact about Porto", user_id="alex", infer=False)
    with TestClient(make_app(decay_days=6)) as c:
        assert [i["memory"] for i in c.get("/api/memories/alex/").json()["results"]] == ["A new fact about Porto"]
        assert [i["memory"] for i in c.get("/api/memories/?user_id=alex").json()["results"]] == ["A new fact about Porto"]
        found = c.post("/api/memories/search/", json={"query": "fact Lisbon", "user_id": "alex"}).json()["results"]
        assert "An old fact about Lisbon" not in [i["memory"] for i in found]
        assert_error(c.get(f"/api/memories/alex/{old}/"), 404, "not_found")
        assert c.get("/api/users/").json()["results"] == [{"user_id": "alex", "memories": 1}]


def test_decay_days_from_the_environment(make_app, store: str, monkeypatch) -> None:
    from memorist import Memory

    with Memory(store, embedder="hashing") as m:
        m.add("An old fact", user_id="alex", infer=False, timestamp="2020-01-01T00:00:00Z")
    monkeypatch.setenv("MEMORY_DECAY_DAYS", "6")
    with TestClient(make_app()) as c:
        assert c.get("/api/memories/alex/").json() == {"results": []}
    monkeypatch.setenv("MEMORY_DECAY_DAYS", "0")
    with TestClient(make_app()) as c:
        assert len(c.get("/api/memories/alex/").json()["results"]) == 1


def test_a_memory_called_events_is_shadowed_by_the_event_log(client: TestClient, store: str) -> None:
    """Documented: GET /api/memories/{user}/events/ is the event log, whatever the ids."""
    r = client.get("/api/memories/alex/events/")
    assert r.status_code == 200 and r.json() == {"results": []}


def test_one_tenant_memory_per_app_is_reused_and_closed(make_app) -> None:
    app = make_app()
    with TestClient(app) as c:
        add(c, "Likes tea")
        add(c, "Likes coffee")
        service = app.state.service
        assert service.tenants.open() == [""]
        first = service.tenants.get("")
    assert service.tenants.open() == []  # the lifespan closed it
    with pytest.raises(StoreError):
        first.get_all(user_id="alex")
