"""The service fuzzed from its own /openapi.json (schemathesis, in-process over ASGI):
for every operation, valid and invalid requests; no 5xx, and every answer conforms
to the schema (status code, content type, headers, body). Not checked: that
every schema-valid request is accepted, as the engine refuses more than a schema
can say (blank text, control characters, a request naming no scope). Bounded to a few
seconds; a longer run sets MEMORIST_FUZZ_EXAMPLES (examples per operation and mode)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("schemathesis")

from memorist.server import create_app  # noqa: E402
from service_helpers import assert_conforms, keyed_service  # noqa: E402

EXAMPLES = int(os.environ.get("MEMORIST_FUZZ_EXAMPLES", "8"))


def _operations() -> list[tuple[str, str]]:
    app = create_app(":memory:", embedder="hashing")
    try:
        paths = app.openapi()["paths"]
    finally:
        app.state.service.close()
    return [(method.upper(), path) for path, item in paths.items() for method in item]


@pytest.fixture
def app(tmp_path):
    with keyed_service(str(tmp_path / "fuzz.db"), {"fuzz": ("fuzz", None)}) as (client, headers):
        client.app.state.fuzz_headers = headers["fuzz"]
        for user in ("alex", "0", "a"):  # memories for the by-user routes to find
            r = client.post("/api/memories/", json={"messages": "I love hiking in the Alps", "user_id": user}, headers=headers["fuzz"])
            assert r.status_code == 200
        yield client.app


@pytest.mark.parametrize(("method", "path"), _operations())
def test_openapi_conformance(app, method: str, path: str) -> None:
    assert_conforms(app, method, path, app.state.fuzz_headers, EXAMPLES)
