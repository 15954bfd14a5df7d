"""Helpers shared by the memory service's tests."""

from __future__ import annotations

from engram.server import ServerLimits

#: No rate limit: the tests that exercise it build their own limits.
UNLIMITED = ServerLimits(rate_per_minute=0)

#: Spec 004's example turn.
TURN = [
    {"role": "user", "content": "I am Alex and I love hiking"},
    {"role": "assistant", "content": "Nice to meet you Alex!"},
]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


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
