"""The service fuzzed from its own /openapi.json (schemathesis, in-process over ASGI):
for every operation, valid and invalid requests; no 5xx, and every answer conforms
to the schema (status code, content type, headers, body). Not checked: that
every schema-valid request is accepted, as the engine refuses more than a schema
can say (blank text, control characters, a request naming no scope). Bounded to a few
seconds; a longer run sets ENGRAM_FUZZ_EXAMPLES (examples per operation and mode)."""

from __future__ import annotations

import os

import pytest

schemathesis = pytest.importorskip("schemathesis")

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import positive_data_acceptance  # noqa: E402
from service_helpers import UNLIMITED, bearer  # noqa: E402

from engram.server import KeyStore, create_app  # noqa: E402

EXAMPLES = int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "8"))


def _operations() -> list[tuple[str, str]]:
    app = create_app(":memory:", embedder="hashing")
    try:
        paths = app.openapi()["paths"]
    finally:
        app.state.service.close()
    return [(method.upper(), path) for path, item in paths.items() for method in item]


@pytest.fixture
def app(tmp_path):
    db = str(tmp_path / "fuzz.db")
    with KeyStore(db) as keys:
        key, _ = keys.create("fuzz")
    app = create_app(db, embedder="hashing", limits=UNLIMITED)
    app.state.fuzz_key = key
    with TestClient(app) as client:  # memories for the by-user routes to find
        for user in ("alex", "0", "a"):
            r = client.post("/api/memories/", json={"messages": "I love hiking in the Alps", "user_id": user}, headers=bearer(key))
            assert r.status_code == 200
        yield app


@pytest.mark.parametrize(("method", "path"), _operations())
def test_openapi_conformance(app, method: str, path: str) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operation = schema[path][method]
    headers = bearer(app.state.fuzz_key)
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            response = case.call(headers=headers)
            assert response.status_code < 500, (case.method, case.formatted_path, case.query, case.body, response.text)
            case.validate_response(response, headers=headers, excluded_checks=[positive_data_acceptance])

        try:
            run()
        except Unsatisfiable:  # nothing to make invalid (an operation without parameters)
            assert mode is GenerationMode.NEGATIVE
