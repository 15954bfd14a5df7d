"""Erasure and playbook deletion over the service: who may erase whom.

A key bound to a user erases that user only (naming another answers 404, exactly as
an unknown user, and erases nothing); a tenant key erases any user of its tenant;
tenants never cross. On SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from memorist.server import create_app
from service_helpers import UNLIMITED, assert_error, key_headers


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> str:
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else str(tmp_path / "service.db")


@pytest.fixture
def served(store):
    app = create_app(store, embedder="hashing", limits=UNLIMITED)
    with TestClient(app) as client:
        yield client
    app.state.service.close()


def _add(client: TestClient, headers, user: str, text: str) -> None:
    r = client.post("/api/memories/", json={"messages": text, "user_id": user, "infer": False}, headers=headers)
    assert r.status_code == 200, r.text


def _count(client: TestClient, headers, user: str) -> int:
    r = client.get("/api/memories/", params={"user_id": user}, headers=headers)
    assert r.status_code == 200, r.text
    return len(r.json()["results"])


def test_a_user_key_erases_itself_and_no_one_else(served, store) -> None:
    acme, alex, sam = key_headers(store, "acme"), key_headers(store, "acme", "alex"), key_headers(store, "acme", "sam")
    _add(served, acme, "alex", "Alex likes tea")
    _add(served, acme, "sam", "Sam likes coffee")

    assert_error(served.post("/api/erase/", json={"user_id": "sam"}, headers=alex), 404, "not_found")
    assert _count(served, acme, "sam") == 1, "a refused erasure erases nothing"

    preview = served.post("/api/erase/", json={"dry_run": True}, headers=alex)
    assert preview.status_code == 200, preview.text
    assert preview.json()["dry_run"] is True and preview.json()["erased"]["facts"] == 1 and preview.json()["user_id"] == "alex"
    assert _count(served, acme, "alex") == 1

    done = served.post("/api/erase/", json={}, headers=alex)  # no user named: the key's own
    assert done.status_code == 200, done.text
    assert done.json()["erased"]["facts"] == 1 and done.json()["event"] > 0
    assert _count(served, acme, "alex") == 0
    assert _count(served, sam, "sam") == 1


def test_a_tenant_key_erases_a_user_of_its_tenant_only(served, store) -> None:
    acme, globex = key_headers(store, "acme"), key_headers(store, "globex")
    _add(served, acme, "alex", "Acme's alex")
    _add(served, globex, "alex", "Globex's alex")
    r = served.post("/api/erase/", json={"user_id": "alex"}, headers=globex)
    assert r.status_code == 200 and r.json()["erased"]["facts"] == 1
    assert _count(served, globex, "alex") == 0
    assert _count(served, acme, "alex") == 1, "tenants never cross"
    assert_error(served.post("/api/erase/", json={}, headers=acme), 422, "validation_error", "user_id")
    assert_error(served.post("/api/erase/", json={"user_id": "alex", "dry_run": "yes"}, headers=acme), 422, "validation_error", "dry_run")
    assert _count(served, acme, "alex") == 1


def test_deleting_a_playbook_over_the_service(served, store) -> None:
    acme, alex, sam = key_headers(store, "acme"), key_headers(store, "acme", "alex"), key_headers(store, "acme", "sam")
    for _ in range(2):
        r = served.put("/api/playbooks/study/", json={"strategies": [{"pattern": "Draw it first"}], "user_id": "alex"}, headers=alex)
        assert r.status_code == 200, r.text
    assert_error(served.delete("/api/playbooks/study/", params={"user_id": "alex"}, headers=sam), 404, "not_found")
    assert_error(served.delete("/api/playbooks/study/", params={"scope": "tenant"}, headers=alex), 403, "forbidden", "scope")
    r = served.delete("/api/playbooks/study/", params={"user_id": "alex"}, headers=alex)
    assert r.status_code == 200, r.text
    assert r.json()["strategies"] == 1 and r.json()["versions"] >= 1 and r.json()["name"] == "study"
    assert served.get("/api/playbooks/", params={"user_id": "alex"}, headers=acme).json()["results"] == []
    assert_error(served.delete("/api/playbooks/study/", params={"user_id": "alex"}, headers=alex), 404, "not_found")


@pytest.mark.parametrize("relation", ["viewer", "editor", "owner"])
def test_a_relation_never_lets_another_user_erase(served, store, relation) -> None:
    acme, sam = key_headers(store, "acme"), key_headers(store, "acme", "sam")
    _add(served, acme, "alex", "Alex likes tea")
    r = served.post("/api/relations/", json={"subject": "user:sam", "relation": relation, "object": "scope:user:alex"}, headers=acme)
    assert r.status_code == 200, r.text
    assert _count(served, sam, "alex") == 1, "the grant lets sam read alex's memories"

    refused = served.post("/api/erase/", json={"user_id": "alex"}, headers=sam)
    assert_error(refused, 403, "forbidden")
    assert "only the owner" in refused.json()["error"]["message"]
    assert _count(served, acme, "alex") == 1, "a refused erasure erases nothing"
