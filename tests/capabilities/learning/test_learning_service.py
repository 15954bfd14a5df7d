"""The learning routes of the memory service: trajectories, reflections and playbooks
under the same keys and tenants as the memory routes, on each backend."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from service_helpers import keyed_service  # noqa: E402


@pytest.fixture
def service(backend):
    keys = {"acme": ("acme", None), "acme-alice": ("acme", "alice"), "globex": ("globex", None)}
    with keyed_service(backend.target, keys) as served:
        yield served


def test_the_whole_loop_over_http(service) -> None:
    client, keys = service
    acme = keys["acme"]
    r = client.post("/api/trajectories/", json={"task_description": "Fetch users", "task_type": "api_call", "agent_id": "bot"}, headers=acme)
    assert r.status_code == 200, r.text
    tid = r.json()["trajectory_id"]
    for step in ({"step_type": "decision", "description": "Back off on HTTP 429"}, {"step_type": "observation", "description": "Done"}):
        assert client.post(f"/api/trajectories/{tid}/steps", json={**step, "agent_id": "bot"}, headers=acme).status_code == 200
    done = client.post(f"/api/trajectories/{tid}/complete/", json={"status": "success", "metrics": {"tokens": 10}}, headers=acme)
    assert done.status_code == 200 and done.json()["status"] == "success"
    assert [t["trajectory_id"] for t in client.get("/api/trajectories/?agent_id=bot", headers=acme).json()["results"]] == [tid]
    assert len(client.get(f"/api/trajectories/{tid}/", headers=acme).json()["steps"]) == 2
    reflection = client.post(f"/api/trajectories/{tid}/reflect/", json={}, headers=acme).json()
    assert reflection["insights"]["successful_patterns"] == ["Back off on HTTP 429"]
    curated = client.post("/api/playbooks/api_client/curate/", json={"reflections": [reflection["memory_id"]], "agent_id": "bot"}, headers=acme)
    assert curated.status_code == 200 and [s["pattern"] for s in curated.json()["added"]] == ["Back off on HTTP 429"]
    playbook = client.get("/api/playbooks/api_client/?agent_id=bot", headers=acme).json()
    assert playbook["version"] == 1 and playbook["strategies"]["helpful"][0]["pattern"] == "Back off on HTTP 429"
    updated = client.put("/api/playbooks/api_client/", json={"strategies": [{"category": "harmful", "pattern": "Retry at once"}], "agent_id": "bot"}, headers=acme)
    assert updated.status_code == 200 and updated.json()["version"] == 2
    assert [v["version"] for v in client.get("/api/playbooks/api_client/versions/?agent_id=bot", headers=acme).json()["results"]] == [1, 2]
    assert client.get("/api/playbooks/api_client/versions/1/?agent_id=bot", headers=acme).json()["strategies"]["harmful"] == []
    back = client.post("/api/playbooks/api_client/rollback/", json={"version": 1, "agent_id": "bot"}, headers=acme)
    assert back.status_code == 200 and back.json()["version"] == 3
    assert [p["name"] for p in client.get("/api/playbooks/?agent_id=bot", headers=acme).json()["results"]] == ["api_client"]
    batch = client.post("/api/reflections/batch/", json={"agent_id": "bot", "min_trajectories": 1}, headers=acme)
    assert batch.status_code == 200 and batch.json()["results"][0]["trajectory_count"] == 1
    # The fact routes never see any of it.
    assert client.get("/api/memories/?agent_id=bot", headers=acme).json()["results"] == []


def test_tenants_and_user_bound_keys(service) -> None:
    client, keys = service
    tid = client.post("/api/trajectories/", json={"task_description": "Acme task", "user_id": "bob"}, headers=keys["acme"]).json()["trajectory_id"]
    other_tenant = client.get(f"/api/trajectories/{tid}/", headers=keys["globex"])
    assert other_tenant.status_code == 404 and other_tenant.json()["error"]["message"] == f"trajectory not found: '{tid}'"
    assert client.get(f"/api/trajectories/{tid}/", headers=keys["acme-alice"]).status_code == 404  # bob's, not alice's
    assert client.get(f"/api/trajectories/{tid}/?user_id=bob", headers=keys["acme-alice"]).status_code == 404
    mine = client.post("/api/trajectories/", json={"task_description": "Alice task"}, headers=keys["acme-alice"]).json()["trajectory_id"]
    assert client.get(f"/api/trajectories/{mine}/", headers=keys["acme-alice"]).json()["user_id"] == "alice"
    assert [t["trajectory_id"] for t in client.get("/api/trajectories/", headers=keys["acme-alice"]).json()["results"]] == [mine]
    # A user-bound key writes its user's playbooks, reads the tenant's, never writes them.
    tip = {"strategies": [{"pattern": "Say hello"}]}
    assert client.put("/api/playbooks/greet/", json={**tip, "scope": "tenant"}, headers=keys["acme"]).status_code == 200
    refused = client.put("/api/playbooks/greet/", json={**tip, "scope": "tenant"}, headers=keys["acme-alice"])
    assert refused.status_code == 403 and refused.json()["error"]["field"] == "scope"
    assert client.get("/api/playbooks/greet/?scope=tenant", headers=keys["acme-alice"]).json()["size"] == 1
    assert client.put("/api/playbooks/greet/", json=tip, headers=keys["acme-alice"]).json()["user_id"] == "alice"
    assert client.get("/api/playbooks/greet/?scope=tenant", headers=keys["globex"]).json()["size"] == 0
    assert client.put("/api/playbooks/greet/", json={**tip, "user_id": "bob"}, headers=keys["acme-alice"]).status_code == 404


def test_bad_input_is_422_with_the_field(service) -> None:
    client, keys = service
    acme = keys["acme"]
    tid = client.post("/api/trajectories/", json={"task_description": "t"}, headers=acme).json()["trajectory_id"]
    bad = client.post(f"/api/trajectories/{tid}/complete/", json={"status": "done"}, headers=acme)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "status"
    blank = client.post("/api/trajectories/", json={"task_description": "   "}, headers=acme)
    assert blank.status_code == 422 and blank.json()["error"]["field"] == "task_description"
    wrong = client.put("/api/playbooks/p/", json={"strategies": [{"pattern": "x", "category": "maybe"}]}, headers=acme)
    assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "strategies[0].category"
    running = client.post(f"/api/trajectories/{tid}/reflect/", json={}, headers=acme)
    assert running.status_code == 422
    assert client.post("/api/playbooks/p/rollback/", json={"version": 3}, headers=acme).status_code == 404
    assert client.get("/api/trajectories/", headers={}).status_code == 401
