"""The service's consolidation and rollback routes, and importance in the add body:
a key acts in its own scope only; a rollback twice is 409; bad input is 422."""

from __future__ import annotations

from fastapi.testclient import TestClient

from service_helpers import assert_error, keyed_service

LOW = ["Plays tennis on Sundays", "Plays tennis on Sundays with Tom"]


def add(client: TestClient, text: str, headers=None, **extra) -> dict:
    response = client.post("/api/memories/", json={"messages": text, "infer": False, **extra}, headers=headers or {})
    assert response.status_code == 200, response.text
    return response.json()["results"][0]


def export(client: TestClient, user: str, headers=None) -> list[dict]:
    return client.get("/api/memories/", params={"user_id": user}, headers=headers or {}).json()["results"]


def test_consolidate_and_roll_back_over_the_service(client: TestClient) -> None:
    for text in LOW:
        add(client, text, user_id="u", importance=0.2)
    add(client, "Carries an EpiPen", user_id="u", importance=0.95)
    before = export(client, "u")
    dry = client.post("/api/memories/consolidate/", json={"user_id": "u", "dry_run": True}).json()
    assert (dry["merged_count"], dry["preserved_count"], dry["run_id"]) == (2, 1, None)
    report = client.post("/api/memories/consolidate/", json={"user_id": "u"}).json()
    assert report["merged_count"] == 2 and report["consolidated_count"] == 1
    undone = client.post("/api/memories/rollback/", json={"event_or_run_id": report["run_id"], "user_id": "u"})
    assert undone.status_code == 200 and len(undone.json()["restored"]) == 2
    assert export(client, "u") == before
    again = client.post("/api/memories/rollback/", json={"event_or_run_id": report["run_id"], "user_id": "u"})
    assert "already rolled back" in assert_error(again, 409, "conflict")["message"]
    assert_error(client.post("/api/memories/rollback/", json={"event_or_run_id": 999999, "user_id": "u"}), 404, "not_found")


def test_bad_importance_and_consolidation_settings_are_422(client: TestClient) -> None:
    for bad in (1.5, -1, "0.5", True):
        response = client.post("/api/memories/", json={"messages": "hi", "user_id": "u", "importance": bad})
        assert_error(response, 422, "validation_error", "importance")
    assert export(client, "u") == []
    bad = client.post("/api/memories/consolidate/", json={"user_id": "u", "min_importance": 2})
    assert_error(bad, 422, "validation_error", "min_importance")
    assert_error(client.post("/api/memories/consolidate/", json={}), 422, "validation_error", "user_id")


def test_a_user_key_consolidates_and_rolls_back_its_own_memories_only(store: str) -> None:
    with keyed_service(store, {"alex": ("t", "alex"), "sam": ("t", "sam")}) as (client, keys):
        for text in LOW:
            add(client, text, keys["alex"], importance=0.2)
        report = client.post("/api/memories/consolidate/", json={}, headers=keys["alex"]).json()
        assert report["merged_count"] == 2
        denied = client.post("/api/memories/rollback/", json={"event_or_run_id": report["run_id"]}, headers=keys["sam"])
        assert_error(denied, 404, "not_found")
        assert_error(client.post("/api/memories/consolidate/", json={"user_id": "alex"}, headers=keys["sam"]), 404, "not_found")
        ok = client.post("/api/memories/rollback/", json={"event_or_run_id": report["run_id"]}, headers=keys["alex"])
        assert ok.status_code == 200
