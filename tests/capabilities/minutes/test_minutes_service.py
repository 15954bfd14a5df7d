"""Spec 003's routes of the memory service: minutes, context, evaluation and a PAIR
round, under the same keys and tenants as the other routes; on each backend."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from service_helpers import keyed_service  # noqa: E402


@pytest.fixture
def service(backend):
    keys = {"acme": ("acme", None), "acme-apollo": ("acme", "apollo"), "globex": ("globex", None)}
    with keyed_service(backend.target, keys) as served:
        yield served


def test_minutes_context_evaluation_and_pair_over_http(service):
    client, keys = service
    acme = keys["acme"]
    r = client.post("/api/minutes/", json={"event_type": "status", "agent_id": "tester", "project_id": "apollo",
                                           "memory_note": "ancient standup", "timestamp": "2020-01-01T00:00:00Z"}, headers=acme)
    assert r.status_code == 200, r.text
    old = r.json()
    r = client.post("/api/minutes/", json={
        "event_type": "task_completed", "agent_id": "coder", "project_id": "apollo",
        "memory_note": "Writing unit tests first caught the bug", "data": {"success_criteria_met": 95},
        "insights": [{"type": "capability", "finding": "coder writes good tests", "confidence": 0.8}],
    }, headers=acme)
    assert r.status_code == 200, r.text
    new = r.json()
    assert new["category"] == "project_knowledge" and [i["type"] for i in new["insights"]] == ["capability", "outcome"]

    recent = client.get("/api/minutes", params={"project_id": "apollo", "n": 10}, headers=acme).json()["results"]
    assert [m["id"] for m in recent] == [old["id"], new["id"]]
    page = client.get("/api/minutes/history/", params={"project_id": "apollo", "limit": 1}, headers=acme).json()
    assert [m["id"] for m in page["minutes"]] == [old["id"]] and page["next"] == old["seq"]
    assert client.get(f"/api/minutes/{new['id']}/", headers=acme).json()["indexed"] is True

    r = client.post("/api/evaluate/", json={"project_id": "apollo", "dry_run": True}, headers=acme)
    assert r.status_code == 200 and r.json()["pruned"] == 1 and r.json()["event_seq"] is None
    r = client.post("/api/evaluate/", json={"project_id": "apollo"}, headers=acme)
    assert r.json()["removed"][0]["id"] == old["id"] and r.json()["event_seq"] is not None
    assert client.get(f"/api/minutes/{old['id']}/", headers=acme).json()["indexed"] is False

    hits = client.post("/api/minutes/search/", json={"query": "unit tests", "project_id": "apollo"}, headers=acme).json()["results"]
    assert [h["id"] for h in hits] == [new["id"]]
    assert client.post("/api/minutes/reindex/", json={"project_id": "apollo"}, headers=acme).json()["restored"] == 1

    window = client.post("/api/context/", json={"agent_id": "coder", "task": "unit tests", "project_id": "apollo", "budget_tokens": 400},
                         headers=acme).json()
    assert window["tokens"] <= 400 and window["counts"]["recent"] == 2 and "caught the bug" in window["text"]

    r = client.post("/api/pair/", json={"task": "Write the parser", "criteria": "Has unit tests", "output": "def parse(): pass",
                                        "project_id": "apollo", "agent_id": "coder"}, headers=acme)
    assert r.status_code == 200, r.text
    round_ = r.json()
    assert round_["met"] is False and round_["improvements"][0]["memories"][0]["id"] == new["id"]


def test_tenants_and_user_bound_keys(service):
    client, keys = service
    r = client.post("/api/minutes/", json={"event_type": "status", "project_id": "apollo", "memory_note": "acme only"}, headers=keys["acme"])
    mid = r.json()["id"]
    # another tenant: the minute does not exist there
    assert client.get(f"/api/minutes/{mid}/", headers=keys["globex"]).status_code == 404
    assert client.get("/api/minutes/", params={"project_id": "apollo"}, headers=keys["globex"]).json()["results"] == []
    # a key bound to the user "apollo" is the project apollo: its minutes, no other project's
    bound = keys["acme-apollo"]
    assert [m["id"] for m in client.get("/api/minutes/", headers=bound).json()["results"]] == [mid]
    assert client.get("/api/minutes/", params={"project_id": "zeus"}, headers=bound).status_code == 404
    other = client.post("/api/minutes/", json={"event_type": "status", "project_id": "zeus"}, headers=keys["acme"]).json()["id"]
    assert client.get(f"/api/minutes/{other}/", headers=bound).status_code == 404
    written = client.post("/api/minutes/", json={"event_type": "status"}, headers=bound).json()
    assert written["project_id"] == "apollo"
    assert client.get("/api/minutes/", headers={}).status_code == 401


def test_bad_input_is_422_naming_the_field(service):
    client, keys = service
    acme = keys["acme"]
    r = client.post("/api/minutes/", json={"event_type": "status", "context_references": ["nope"]}, headers=acme)
    assert r.status_code == 422 and r.json()["error"]["field"] == "context_references"
    r = client.post("/api/minutes/", json={"event_type": "status", "category": "gossip"}, headers=acme)
    assert r.status_code == 422
    r = client.post("/api/context/", json={"agent_id": "coder", "budget_tokens": 0}, headers=acme)
    assert r.status_code == 422
    r = client.post("/api/pair/", json={"task": " ", "criteria": "c", "output": "o"}, headers=acme)
    assert r.status_code == 422 and r.json()["error"]["field"] == "task"
    assert client.get("/api/minutes/nope/", headers=acme).status_code == 404
    for insight, field in (({"finding": "ok\u0000bad"}, "insights[0].finding"), ({"finding": "ok", "contexts": ["a\u0000b"]}, "insights[0].contexts[0]"),
                           ({"finding": "y" * 4001}, "insights[0].finding")):
        r = client.post("/api/minutes/", json={"event_type": "status", "insights": [{"type": "outcome", **insight}]}, headers=acme)
        assert r.status_code == 422 and r.json()["error"]["field"] == field
    r = client.put("/api/playbooks/p/", json={"strategies": [{"pattern": "x", "examples": ["t\u00001"]}]}, headers=acme)
    assert r.status_code == 422 and r.json()["error"]["field"] == "strategies[0].examples[0]"


def test_context_and_evaluate_take_now_and_the_future_or_a_bad_outcome_is_a_422(service):
    client, keys = service
    acme = keys["acme"]
    for note, when in (("two days ago", "-2d"), ("an hour ago", "-1h")):
        r = client.post("/api/minutes/", json={"event_type": "status", "project_id": "apollo", "memory_note": note,
                                               "timestamp": when}, headers=acme)
        assert r.status_code == 200, r.text
    r = client.post("/api/context/", json={"agent_id": "coder", "project_id": "apollo", "now": "-1d"}, headers=acme)
    assert r.status_code == 200 and [x["memory_note"] for x in r.json()["sections"]["recent"]] == ["two days ago"]
    r = client.post("/api/context/", json={"agent_id": "coder", "project_id": "apollo"}, headers=acme)
    assert [x["memory_note"] for x in r.json()["sections"]["recent"]] == ["two days ago", "an hour ago"]
    r = client.post("/api/evaluate/", json={"project_id": "apollo", "dry_run": True, "now": "-1d"}, headers=acme)
    assert r.status_code == 200 and r.json()["in_log"] == 1
    r = client.post("/api/context/", json={"agent_id": "coder", "project_id": "apollo", "now": "whenever"}, headers=acme)
    assert r.status_code == 422 and r.json()["error"]["field"] == "now"
    r = client.post("/api/minutes/", json={"event_type": "status", "project_id": "apollo", "timestamp": "+1d"}, headers=acme)
    assert r.status_code == 422 and "in the future" in r.json()["error"]["message"] and r.json()["error"]["field"] == "timestamp"
    r = client.post("/api/minutes/", json={"event_type": "done", "project_id": "apollo", "data": {"success_criteria_met": 250}},
                    headers=acme)
    assert r.status_code == 422 and r.json()["error"]["field"] == "data.success_criteria_met"
    assert len(client.get("/api/minutes", params={"project_id": "apollo"}, headers=acme).json()["results"]) == 2
