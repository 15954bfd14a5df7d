"""The energy tier routes fuzzed from /openapi.json under the energy policy
(schemathesis, in-process), on each backend: no 5xx, every answer conforms to its schema."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("schemathesis")

from service_helpers import assert_conforms, keyed_service  # noqa: E402

EXAMPLES = int(os.environ.get("MEMORIST_FUZZ_EXAMPLES", "8"))
OPERATIONS = [
    ("POST", "/api/tiers/maintain/"),
    ("POST", "/api/tiers/end-conversation/"),
    ("POST", "/api/tiers/boost/"),
    ("GET", "/api/tiers/"),
    ("GET", "/api/tiers/health/"),
    ("GET", "/api/tiers/config/"),
    ("PUT", "/api/tiers/config/"),
    ("GET", "/api/tiers/tests/"),
]


@pytest.fixture
def app(backend):
    with keyed_service(backend.target, {"fuzz": ("fuzz", None)}, policy="energy") as (client, headers):
        client.app.state.fuzz_headers = headers["fuzz"]
        for user in ("alex", "0"):
            r = client.post("/api/memories/", json={"messages": "I love hiking", "user_id": user, "infer": False}, headers=headers["fuzz"])
            assert r.status_code == 200
        yield client.app


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_tier_routes_conform(app, method: str, path: str) -> None:
    assert_conforms(app, method, path, app.state.fuzz_headers, EXAMPLES)
