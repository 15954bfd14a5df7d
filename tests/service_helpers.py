"""Helpers shared by the memory service's tests (tests/surfaces/server, the learning,
minutes and tiers suites of tests/capabilities, tests/store/postgres): importable from
any test folder, as this file sits beside the root conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memorist.server import KeyStore, ServerLimits, create_app

#: No rate limit: the tests that exercise it build their own limits.
UNLIMITED = ServerLimits(rate_per_minute=0, auth_failures_per_minute=0, erasures_per_minute=0)  # no rate limit of any kind

#: Spec 004's example turn.
TURN = [
    {"role": "user", "content": "I am Alex and I love hiking"},
    {"role": "assistant", "content": "Nice to meet you Alex!"},
]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def key_headers(db: str, tenant: str, user: str | None = None, agent: str | None = None) -> dict[str, str]:
    """The headers of a new key of ``tenant`` (bound to ``user``/``agent`` when given),
    created in ``db`` as `memorist keys create` does."""
    with KeyStore(db) as keys:
        key, record = keys.create(tenant, user_id=user, agent_id=agent)
    assert (record.user_id, record.agent_id) == (user, agent)
    return bearer(key)


def assert_error(response, status: int, kind: str, field: str | None = None) -> dict:
    """The response is the JSON error shape with this status, type and field."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"type", "message", "field"}, body
    assert body["error"]["type"] == kind, body
    assert body["error"]["field"] == field, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert "Traceback" not in response.text
    return body["error"]


@contextmanager
def keyed_service(db: str, keys: dict[str, tuple[str, str | None]], **app_kwargs: Any) -> Iterator[tuple[Any, dict[str, dict[str, str]]]]:
    """A TestClient over a service on ``db`` (hashing embedder, no rate limit unless
    given), and the headers of one key per name of ``keys`` (``name: (tenant, user
    or None)``), created in ``db`` as `memorist keys create` does."""
    from fastapi.testclient import TestClient

    with KeyStore(db) as store:
        headers = {name: bearer(store.create(tenant, user_id=user)[0]) for name, (tenant, user) in keys.items()}
    app_kwargs.setdefault("embedder", "hashing")
    app_kwargs.setdefault("limits", UNLIMITED)
    app = create_app(db, **app_kwargs)
    try:
        with TestClient(app) as client:
            yield client, headers
    finally:
        app.state.service.close()


def assert_conforms(app: Any, method: str, path: str, headers: dict[str, str], examples: int) -> None:
    """Fuzz one operation of ``app`` from its /openapi.json (schemathesis, in-process):
    valid and invalid requests; no 5xx, and every answer conforms to the schema.
    Not checked: that every schema-valid request is accepted, as the engine refuses
    more than a schema can say."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.checks import positive_data_acceptance

    operation = schemathesis.openapi.from_asgi("/openapi.json", app)[path][method]
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=examples, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
        def run(case) -> None:
            response = case.call(headers=headers)
            assert response.status_code < 500, (case.method, case.formatted_path, case.query, case.body, response.text)
            case.validate_response(response, headers=headers, excluded_checks=[positive_data_acceptance])

        try:
            run()
        except Unsatisfiable:  # nothing to make invalid (an operation without parameters)
            assert mode is GenerationMode.NEGATIVE
