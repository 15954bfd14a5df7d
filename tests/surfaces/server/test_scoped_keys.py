"""A key bound to a user sees only that user's memories, tier figures, minutes and
what those minutes reference: on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from memorist.server import create_app
from service_helpers import UNLIMITED, key_headers


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> str:
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else str(tmp_path / "service.db")


@pytest.fixture
def served(store):
    app = create_app(store, embedder="hashing", limits=UNLIMITED, policy="energy")
    with TestClient(app) as client:
        yield client
    app.state.service.close()


def _add(client: TestClient, headers, user: str, text: str) -> str:
    r = client.post("/api/memories/", json={"messages": text, "user_id": user, "infer": False}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["id"]


def test_a_user_key_reads_its_own_tier_figures_only(served, store) -> None:
    tenant, alex, sam = key_headers(store, "acme"), key_headers(store, "acme", "alex"), key_headers(store, "acme", "sam")
    for n in range(3):
        _add(served, tenant, "sam", f"Sam's secret number {n}")
    _add(served, tenant, "alex", "Alex likes tea")
    assert served.post("/api/tiers/maintain/", json={}, headers=tenant).status_code == 200

    whole = served.get("/api/tiers/", headers=tenant).json()
    assert whole["total"] == 4
    assert served.get("/api/tiers/", headers=alex).json()["total"] == 1
    assert served.get("/api/tiers/", headers=sam).json()["total"] == 3

    health = served.get("/api/tiers/health/", headers=alex).json()
    counts = next(c for c in health["checks"] if c["check"] == "counts")
    assert sum(counts["counts"].values()) == 1 and "1 live memories" in counts["detail"]
    last_run = next(c for c in health["checks"] if c["check"] == "last_run")
    assert "decayed" not in last_run["detail"]  # the run's counts are the tenant's
    tenant_run = next(c for c in served.get("/api/tiers/health/", headers=tenant).json()["checks"] if c["check"] == "last_run")
    assert "4 decayed" in tenant_run["detail"]


def test_a_minute_cannot_reference_another_projects_minute(served, store) -> None:
    tenant, alex = key_headers(store, "acme"), key_headers(store, "acme", "alex")
    secret = served.post("/api/minutes/", json={"event_type": "decision", "project_id": "sam",
                                                 "memory_note": "Sam's launch code is swordfish"}, headers=tenant)
    assert secret.status_code == 200, secret.text
    secret_id = secret.json()["id"]

    r = served.post("/api/minutes/", json={"event_type": "handoff", "memory_note": "see the earlier decision",
                                           "context_references": [secret_id]}, headers=alex)
    assert r.status_code == 422 and r.json()["error"]["field"] == "context_references", r.text
    assert "swordfish" not in r.text  # (a word no id holds: ids are hex digits)

    own = served.post("/api/minutes/", json={"event_type": "decision", "memory_note": "Alex picks SQLite"}, headers=alex)
    ref = served.post("/api/minutes/", json={"event_type": "handoff", "memory_note": "following up",
                                             "context_references": [own.json()["id"]]}, headers=alex)
    assert ref.status_code == 200, ref.text
    context = served.post("/api/context/", json={"agent_id": "planner", "budget_tokens": 4000}, headers=alex)
    assert context.status_code == 200, context.text
    assert "swordfish" not in context.text and "Alex picks SQLite" in context.text


def test_a_tenant_key_cannot_smuggle_a_reference_across_projects(served, store) -> None:
    # Even a tenant key cannot make project A's log carry project B's text: the
    # context window of A never shows it.
    tenant = key_headers(store, "acme")
    other = served.post("/api/minutes/", json={"event_type": "decision", "project_id": "b",
                                               "memory_note": "B's budget is 90k"}, headers=tenant).json()["id"]
    r = served.post("/api/minutes/", json={"event_type": "handoff", "project_id": "a",
                                           "context_references": [other]}, headers=tenant)
    assert r.status_code == 422, r.text
    context = served.post("/api/context/", json={"agent_id": "x", "project_id": "a"}, headers=tenant)
    assert "90k" not in context.text


def test_the_users_route_counts_memories_not_minutes_or_learning_objects(served, store) -> None:
    tenant = key_headers(store, "acme")
    _add(served, tenant, "sam", "Sam likes tea")
    for note in ("Sam picks SQLite", "Sam ships on Friday"):
        r = served.post("/api/minutes/", json={"event_type": "decision", "project_id": "sam", "memory_note": note}, headers=tenant)
        assert r.status_code == 200, r.text
    r = served.post("/api/trajectories/", json={"task_description": "fetch the records", "user_id": "sam"}, headers=tenant)
    assert r.status_code == 200, r.text
    users = {u["user_id"]: u["memories"] for u in served.get("/api/users/", headers=tenant).json()["results"]}
    assert users["sam"] == 1 == len(served.get("/api/memories/", params={"user_id": "sam"}, headers=tenant).json()["results"])
