"""The energy tier routes fuzzed from /openapi.json under the energy policy
(schemathesis, in-process): no 5xx, every answer conforms to its schema."""

from __future__ import annotations

import os

import pytest

schemathesis = pytest.importorskip("schemathesis")

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import positive_data_acceptance  # noqa: E402

from engram.server import KeyStore, ServerLimits, create_app  # noqa: E402

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "8"))
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
def app(tmp_path):
    db = str(tmp_path / "fuzz.db")
    with KeyStore(db) as keys:
        key, _ = keys.create("fuzz")
    app = create_app(db, embedder="hashing", limits=ServerLimits(rate_per_minute=0), policy="energy")
    app.state.fuzz_key = key
    with TestClient(app) as client:
        for user in ("alex", "0"):
            r = client.post("/api/memories/", json={"messages": "I love hiking", "user_id": user, "infer": False},
                            headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 200
        yield app


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_tier_routes_conform(app, method: str, path: str) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operation = schema[path][method]
    headers = {"Authorization": f"Bearer {app.state.fuzz_key}"}
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            response = case.call(headers=headers)
            assert response.status_code < 500, (case.method, case.formatted_path, case.query, case.body, response.text)
            case.validate_response(response, headers=headers, excluded_checks=[positive_data_acceptance])

        try:
            run()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE
