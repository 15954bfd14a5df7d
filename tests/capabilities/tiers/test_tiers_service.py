"""The energy tiers' routes (memorist.server.tiers) through FastAPI's TestClient: a
service under the energy policy, keys binding tenants and users, the default policy;
on each backend."""

from __future__ import annotations

import math
import time

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402
from tiers_helpers import at  # noqa: E402

from memorist.server import create_app  # noqa: E402
from service_helpers import UNLIMITED, key_headers  # noqa: E402


@pytest.fixture
def store(backend) -> str:
    return backend.target


@pytest.fixture
def served(store):
    apps = []

    def make(**kwargs):
        kwargs.setdefault("embedder", "hashing")
        kwargs.setdefault("limits", UNLIMITED)
        kwargs.setdefault("policy", "energy")
        app = create_app(store, **kwargs)
        apps.append(app)
        return TestClient(app)

    yield make
    for app in apps:
        app.state.service.close()


def _add(client, text: str, headers=None, **body) -> str:
    r = client.post("/api/memories/", json={"messages": text, "user_id": "alex", "infer": False, **body}, headers=headers or {})
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["id"]


def test_maintain_boost_status_health_config(served):
    with served() as client:
        mid = _add(client, "Renew the TLS certificate", metadata={"type": "reminder"}, timestamp=at(0))
        listed = client.get("/api/memories/", params={"user_id": "alex"}).json()["results"]
        assert (listed[0]["energy_at_last_decay"], listed[0]["tier"]) == (2.5, "working")
        boosted = client.post("/api/tiers/boost/", json={"memory_id": mid, "user_id": "alex", "now": at(0)})
        assert boosted.status_code == 200 and boosted.json()["energy"] == 3.5
        run = client.post("/api/tiers/maintain/", json={"now": at(0)})
        assert run.status_code == 200 and run.json()["promoted"] == 1
        status = client.get("/api/tiers/").json()
        assert status["tiers"]["short_term"]["count"] == 1 and status["archived"] == 1
        health = client.get("/api/tiers/health/").json()
        assert health["healthy"]
        # Whether runs are logged, never where: a server path is no client's business.
        log = next(c for c in health["checks"] if c["check"] == "log")
        assert "/" not in log["detail"], log
        assert client.get("/api/tiers/config/").json()["persisted"]
        put = client.put("/api/tiers/config/", json={"changes": {"decay_batch": 5}})
        assert put.status_code == 200 and put.json()["config"]["decay_batch"] == 5
        bad = client.put("/api/tiers/config/", json={"changes": {"decay_batch": 0}})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "tiers.decay_batch"
        missing = client.post("/api/tiers/boost/", json={"memory_id": "nope"})
        assert missing.status_code == 404


def test_end_of_conversation_is_accepted_and_runs_in_the_background(served):
    with served() as client:
        _add(client, "Had pasta for lunch", timestamp=at(0))
        answer = client.post("/api/tiers/end-conversation/", json={"user_id": "alex", "run_id": "c1", "now": at(10)})
        assert answer.status_code == 202 and answer.json()["scheduled"]
        assert client.app.state.service.tenants.get("").tiers.wait(timeout=10)
        assert client.get("/api/memories/", params={"user_id": "alex"}).json()["results"] == []  # expired
        assert client.get("/api/tiers/").json()["expired"] == 1


def test_test_memories_over_the_service(served):
    with served() as client:
        _add(client, "A real memory", timestamp=at(0))
        _add(client, "A test memory", metadata={"is_test": True, "energy": 0.05}, timestamp=at(0))
        assert len(client.get("/api/memories/", params={"user_id": "alex"}).json()["results"]) == 1
        tests = client.get("/api/tiers/tests/", params={"user_id": "alex"}).json()["results"]
        assert [t["memory"] for t in tests] == ["A test memory"] and tests[0]["is_test"]
        run = client.post("/api/tiers/maintain/", json={"test_only": True, "now": at(0)}).json()
        assert run["expired"] == 1 and run["memories"] == 1
        assert client.get("/api/users/").json()["results"] == [{"user_id": "alex", "memories": 1}]


def test_keys_bind_tenants_and_users(served, store):
    tenant = key_headers(store, "acme")
    bound = key_headers(store, "acme", "alex")
    other = key_headers(store, "globex")
    with served() as client:
        mid = _add(client, "Renew the TLS certificate", headers=tenant, timestamp=at(0))
        assert client.get("/api/tiers/").status_code == 401
        # Another tenant cannot boost it; a key bound to another user neither.
        assert client.post("/api/tiers/boost/", json={"memory_id": mid}, headers=other).status_code == 404
        bob = key_headers(store, "acme", "bob")
        assert client.post("/api/tiers/boost/", json={"memory_id": mid}, headers=bob).status_code == 404
        assert client.post("/api/tiers/boost/", json={"memory_id": mid}, headers=bound).status_code == 200
        # A user-bound key maintains its user only and cannot change the tenant's configuration.
        run = client.post("/api/tiers/maintain/", json={"now": at(1)}, headers=bound).json()
        assert run["scopes"]["user_id"] == "alex" and run["scopes"]["tenant_id"] == "acme"
        assert client.put("/api/tiers/config/", json={"changes": {"decay_batch": 5}}, headers=bound).status_code == 403
        assert client.post("/api/tiers/maintain/", json={"user_id": "bob"}, headers=bound).status_code == 404
        assert client.get("/api/tiers/", headers=other).json()["total"] == 0


def test_a_user_bound_key_s_status_tells_no_figure_of_other_users(served, store):
    tenant = key_headers(store, "acme")
    alice, bob = key_headers(store, "acme", "alice"), key_headers(store, "acme", "bob")
    with served() as client:
        for text in ("Renew the TLS certificate", "Call the plumber", "Water the plants"):
            r = client.post("/api/memories/", json={"messages": text, "infer": False, "timestamp": at(0)}, headers=bob)
            assert r.status_code == 200, r.text
        assert client.post("/api/tiers/maintain/", json={"now": at(1)}, headers=bob).status_code == 200
        mine = client.get("/api/tiers/", headers=alice).json()
        assert mine["total"] == 0
        assert mine["last_run"] is None  # the run was bob's: alice is not told of it
        assert set(mine["background"]) == {"running", "waiting"}  # no tenant-wide run figures
        health = client.get("/api/tiers/health/", headers=alice).json()
        assert next(c["detail"] for c in health["checks"] if c["check"] == "last_run") == "no maintenance run yet"
        # A run of the whole tenant reached her: told, without its counts (of everyone's).
        r = client.post("/api/tiers/maintain/", json={"now": at(2)}, headers=tenant)
        assert r.status_code == 200, r.text
        mine = client.get("/api/tiers/", headers=alice).json()
        assert mine["last_run"]["run"] == r.json()["run"] and "counts" not in mine["last_run"]
        health = client.get("/api/tiers/health/", headers=alice).json()
        assert "decayed" not in next(c["detail"] for c in health["checks"] if c["check"] == "last_run")
        # The tenant's key sees the whole run.
        whole = client.get("/api/tiers/", headers=tenant).json()
        assert whole["last_run"]["counts"]["memories"] == 3 and "failures" in whole["background"]
        assert whole["last_run"]["run"] == r.json()["run"]


def test_the_default_policy_answers_400(served):
    with served(policy="default") as client:
        r = client.post("/api/tiers/maintain/", json={})
        assert r.status_code == 400 and "--policy energy" in r.json()["error"]["message"]
        assert client.get("/api/tiers/").status_code == 400
        mid = _add(client, "Plain memory")
        assert "energy" not in client.get(f"/api/memories/alex/{mid}/").json()


def test_status_and_health_take_now_and_items_show_the_energy_now(served):
    with served() as client:
        mid = _add(client, "Renew the TLS certificate", metadata={"energy": 4.0}, timestamp="-2h")
        got = client.get(f"/api/memories/alex/{mid}/").json()
        assert got["energy_at_last_decay"] == 4.0 and got["energy"] == pytest.approx(4.0 * math.exp(-1.0), abs=1e-3)
        now = client.get("/api/tiers/").json()["tiers"]["working"]
        assert now["energy_max"] == pytest.approx(got["energy"], abs=1e-3)
        later = client.get("/api/tiers/", params={"now": "+10h"}).json()
        assert later["tiers"]["working"]["energy_max"] == pytest.approx(4.0 * math.exp(-0.5 * 12), abs=1e-3)
        assert later["now"][:13] == time.strftime("%Y-%m-%dT%H", time.gmtime(time.time() + 36_000))
        assert client.get("/api/tiers/", params={"now": at(0)}).json()["now"].startswith("2026-01-01T00:00")
        health = client.get("/api/tiers/health/", params={"now": "+10h"}).json()
        due = next(c for c in health["checks"] if c["check"] == "due")
        assert due["expiries"] == 1  # 4.0 * e^-6 is below 0.1 ten hours from now
        r = client.get("/api/tiers/", params={"now": "soon"})
        assert r.status_code == 422 and r.json()["error"]["field"] == "now"
        r = client.post("/api/tiers/boost/", json={"memory_id": mid, "user_id": "alex", "amount": 2e9})
        assert r.status_code == 422 and "1000000000" in r.json()["error"]["message"].replace(",", "")


def test_an_offset_typed_unencoded_in_the_query_string_is_taken(served):
    # curl 'host/api/tiers/?now=+10h', as documented: the '+' arrives as a space.
    with served() as client:
        _add(client, "Renew the TLS certificate", metadata={"energy": 4.0})
        for url in ("/api/tiers/?now=+10h", "/api/tiers/?now=%2B10h"):
            r = client.get(url)
            assert r.status_code == 200, r.text
            assert r.json()["now"][:13] == time.strftime("%Y-%m-%dT%H", time.gmtime(time.time() + 36_000))
        health = client.get("/api/tiers/health/?now=+10h")
        assert health.status_code == 200 and next(c for c in health.json()["checks"] if c["check"] == "due")["expiries"] == 1
        assert client.get("/api/trajectories/?since=+1d").json()["results"] == []  # none started from tomorrow on
        # Only an offset: a space before anything else is still refused, naming the parameter.
        for bad in ("/api/tiers/?now=+10", "/api/tiers/?now=%2010%20h%20x", "/api/tiers/?now=+2026-01-01"):
            r = client.get(bad)
            assert r.status_code == 422 and r.json()["error"]["field"] == "now", bad

