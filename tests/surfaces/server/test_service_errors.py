"""The JSON error shape: 404, 405, 413, 422 naming the field, 503, and a 500 that
never leaks what failed. Bad input is never a 500."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from memorist import Memory
from memorist.errors import CorruptStoreError, StoreError, TransientProviderError
from memorist.server import ServerLimits
from service_helpers import assert_error

MSG = {"role": "user", "content": "I like tea"}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "/api/memories/", {"messages": 5, "user_id": "a"}, "messages"),
        ("post", "/api/memories/", {"user_id": "a"}, "messages"),
        ("post", "/api/memories/", {"messages": [{"role": "user", "content": 5}], "user_id": "a"}, "messages[0].content"),
        ("post", "/api/memories/", {"messages": [{"role": "user"}], "user_id": "a"}, "messages[0].content"),
        ("post", "/api/memories/", {"messages": [MSG, {"role": "robot", "content": "x"}], "user_id": "a"}, "messages[1].role"),
        ("post", "/api/memories/", {"messages": [{"role": "user", "content": "\x00\x01"}], "user_id": "a"}, "messages[0].content"),
        ("post", "/api/memories/", {"messages": "tea\x00 time", "user_id": "a"}, "messages"),
        ("post", "/api/memories/", {"messages": [{"role": "user", "content": "tea\x00 time"}], "user_id": "a"}, "messages[0].content"),
        ("post", "/api/memories/", {"messages": "hi there", "user_id": "a", "metadata": {"k": ["x", {"y": "\x00"}]}}, "metadata"),
        ("post", "/api/memories/", {"messages": "hi there", "user_id": "a", "metadata": {"k": {"\x00": 1}}}, "metadata"),
        ("post", "/api/memories/", {"messages": [], "user_id": "a"}, "messages"),
        ("post", "/api/memories/", {"messages": "   ", "user_id": "a"}, "messages"),
        ("post", "/api/memories/", {"messages": "hi there"}, "user_id"),
        ("post", "/api/memories/", {"messages": "hi there", "user_id": ""}, "user_id"),
        ("post", "/api/memories/", {"messages": "hi there", "user_id": "x" * 300}, "user_id"),
        ("post", "/api/memories/", {"messages": "hi there", "user_id": "a\nb"}, "user_id"),
        ("post", "/api/memories/", {"messages": "hi there", "user_id": "a", "metadata": [1]}, "metadata"),
        ("post", "/api/memories/", {"messages": "hi there", "user_id": "a", "metadata": {"x": {"y": None} }, "infer": "maybe"}, "infer"),
        ("post", "/api/memories/", {"messages": "hi there", "user_id": "a", "timestamp": "yesterday-ish"}, "timestamp"),
        ("post", "/api/memories/", {"messages": "hi there", "user_id": "a", "timestamp": -5}, "timestamp"),
        ("post", "/api/memories/search/", {"user_id": "a"}, "query"),
        ("post", "/api/memories/search/", {"query": "tea", "user_id": "a", "limit": 0}, "limit"),
        ("post", "/api/memories/search/", {"query": "tea", "user_id": "a", "limit": "many"}, "limit"),
        ("post", "/api/memories/search/", {"query": "tea", "user_id": "a", "limit": 10**30}, "limit"),
        ("post", "/api/memories/search/", {"query": "tea", "user_id": "a", "threshold": 2}, "threshold"),
        ("post", "/api/memories/search/", {"query": "tea", "user_id": "a", "filters": {"x": {"bogus": 1}}}, "filters.x.bogus"),
        ("post", "/api/memories/search/", {"query": "tea", "user_id": "a", "reference_time": "not a date"}, "reference_time"),
        ("post", "/api/memories/search/", {"query": "tea"}, "user_id"),
        ("get", "/api/memories/?limit=0&user_id=a", None, "limit"),
        ("get", "/api/memories/?limit=abc&user_id=a", None, "limit"),
        ("get", "/api/memories/", None, "user_id"),
        ("get", "/api/memories/a/events/?since=-1", None, "since"),
        ("get", "/api/memories/a%01b/", None, "user_id"),
        ("get", "/api/memories/a/%01/", None, "memory_id"),
        ("put", "/api/memories/abc/?user_id=a", {"metadata": {}}, "text"),
        ("delete", "/api/memories/", None, "user_id"),
        ("delete", "/api/memories/?user_id=", None, "user_id"),
    ],
)
def test_422_names_the_field(client: TestClient, method: str, path: str, body, field: str) -> None:
    kwargs = {"json": body} if body is not None else {}
    r = client.request(method.upper(), path, **kwargs)
    error = assert_error(r, 422, "validation_error", field)
    assert not error["message"].startswith(f"{field}:")  # the field is in `field`


@pytest.mark.parametrize(
    ("method", "path", "body", "field", "message"),
    [
        ("post", "/api/memories/search/", '{"query": "x", "user_id": "a", "threshold": NaN}', "threshold", "must be a finite number, got nan"),
        ("post", "/api/memories/search/", '{"query": "x", "user_id": "a", "threshold": 2}', "threshold", "must be ≤ 1, got 2"),
        ("post", "/api/memories/search/", '{"query": "x", "user_id": "a", "limit": 0}', "limit", "must be ≥ 1, got 0"),
        ("post", "/api/memories/", '{"messages": "hi", "user_id": "a", "importance": NaN}', "importance", "must be a finite number, got nan"),
        ("post", "/api/memories/", '{"messages": "hi", "user_id": "a", "importance": 1.5}', "importance", "must be ≤ 1, got 1.5"),
        ("post", "/api/tiers/boost/", '{"memory_id": "x", "user_id": "a", "amount": Infinity}', "amount", "must be a finite number, got inf"),
        # A time is text or a number: a NaN is neither, said once (not a union's two messages).
        ("post", "/api/tiers/maintain/", '{"now": NaN}', "now", "must be a finite number, got nan"),
        # A number out of a time's range: the number's bound alone, not "should be a valid string; or ...".
        ("post", "/api/memories/", '{"messages": "hi", "user_id": "a", "timestamp": -1}', "timestamp", "must be ≥ 0, got -1"),
        ("post", "/api/memories/", '{"messages": "hi", "user_id": "a", "timestamp": true}', "timestamp", "must be a string or a number"),
        ("get", "/api/memories/?user_id=a&limit=0", None, "limit", "must be ≥ 1, got 0"),
        ("get", "/api/playbooks/helper/?scope=bogus", None, "scope", "must be one of agent, user, tenant, global, got 'bogus'"),
    ],
)
def test_a_422_says_what_the_value_must_be_and_what_it_was(make_app, method, path, body, field, message) -> None:
    """Bounds, non-finite numbers and choices in the engine's words, not the request
    parser's ("input should be less than or equal to 1" for a NaN)."""
    with TestClient(make_app(policy="energy")) as client:
        r = client.request(method.upper(), path, content=body, headers={"content-type": "application/json"})
        assert assert_error(r, 422, "validation_error", field)["message"] == message


def test_422_for_an_update_to_blank_text(client: TestClient) -> None:
    r = client.post("/api/memories/", json={"messages": "Likes tea", "user_id": "a", "infer": False})
    memory_id = r.json()["results"][0]["id"]
    for text in ("", " \n", "\u200b"):
        r = client.put(f"/api/memories/{memory_id}/?user_id=a", json={"text": text})
        assert_error(r, 422, "validation_error", "text")


def test_422_for_bodies_that_are_not_json_objects(client: TestClient) -> None:
    r = client.post("/api/memories/", content=b"{not json", headers={"content-type": "application/json"})
    assert "not valid JSON" in assert_error(r, 422, "validation_error", "body")["message"]
    r = client.post("/api/memories/", json=[1, 2])
    assert_error(r, 422, "validation_error", "body")
    r = client.post("/api/memories/", content=b'{"messages": "hi", "user_id": "a"}', headers={"content-type": "text/plain"})
    assert "Content-Type: application/json" in assert_error(r, 422, "validation_error", "body")["message"]
    r = client.post("/api/memories/")
    assert_error(r, 422, "validation_error", "body")


def test_a_nul_in_text_or_metadata_is_a_422_that_says_so(client: TestClient) -> None:
    for body in (
        {"messages": "tea\x00 time", "user_id": "a", "infer": False},
        {"messages": "tea time", "user_id": "a", "infer": False, "metadata": {"a": {"b": "c\x00"}}},
    ):
        r = client.post("/api/memories/", json=body)
        assert "NUL character (U+0000)" in r.json()["error"]["message"], r.text
    r = client.post("/api/memories/", json={"messages": "tea time", "user_id": "a", "infer": False})
    memory_id = r.json()["results"][0]["id"]
    r = client.put(f"/api/memories/{memory_id}/?user_id=a", json={"text": "coffee\x00"})
    assert "NUL" in assert_error(r, 422, "validation_error", "text")["message"]
    assert client.get(f"/api/memories/a/{memory_id}/").json()["memory"] == "tea time"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"messages": [' + b"[" * 3000 + b"]" * 3000 + b'], "user_id": "a"}', "nest too deep"),
        (b'{"messages": "hi", "user_id": "a", "metadata": {"k": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}", "nest too deep"),
        (b'{"messages": "hi", "user_id": "a", "metadata": {"n": ' + b"9" * 5000 + b"}}", "number too large (5,000 digits)"),
        (b'{"messages": "hi", "user_id": "a", "timestamp": -' + b"1" * 4301 + b"}", "number too large"),
        (b'{"messages": "caf\xe9", "user_id": "a"}', "UTF-8"),
    ],
)
def test_an_unreadable_body_is_a_422_that_says_what_was_wrong(client: TestClient, body: bytes, says: str) -> None:
    r = client.post("/api/memories/", content=body, headers={"content-type": "application/json"})
    message = assert_error(r, 422, "validation_error", "body")["message"]
    assert says in message, message
    if says != "UTF-8":
        assert "UTF-8" not in message
    assert client.get("/api/memories/?user_id=a").json()["results"] == []


def test_text_limits_are_configurable(make_app) -> None:
    with TestClient(make_app(limits=ServerLimits(rate_per_minute=0, max_text_chars=20))) as c:
        r = c.post("/api/memories/", json={"messages": [{"role": "user", "content": "x" * 21}], "user_id": "a"})
        assert "limit is 20" in assert_error(r, 422, "validation_error", "messages[0].content")["message"]
        r = c.post("/api/memories/search/", json={"query": "y" * 21, "user_id": "a"})
        assert_error(r, 422, "validation_error", "query")


def test_hostile_input_is_never_a_500(client: TestClient) -> None:
    bodies = [
        b'{"messages": "\\ud800 lone", "user_id": "a"}',
        b'{"messages": "fine text", "user_id": "\\ud800"}',
        b'{"messages": "fine text", "user_id": "a", "metadata": {"n": NaN}}',
        b'{"messages": "fine text", "user_id": "a", "metadata": {"n": Infinity}}',
        b'{"messages": "fine text", "user_id": "a", "metadata": {"n": 1e999}}',
        b'{"messages": "fine text", "user_id": "a", "metadata": {"n": 123456789012345678901234567890}}',
        b'{"messages": "fine text", "user_id": "a", "timestamp": 1e308}',
        b'{"messages": "fine text", "user_id": "a", "timestamp": NaN}',
        b'{"messages": "fine text", "user_id": "a", "metadata": ' + b'{"a":' * 40 + b"1" + b"}" * 40 + b"}",
        b'{"messages": [' + b"[" * 3000 + b"]" * 3000 + b'], "user_id": "a"}',
        b'{"query": "tea", "user_id": "a", "threshold": NaN}',
        b'{"query": "tea", "user_id": "a", "filters": {"OR": ' + b"[" * 50 + b"]" * 50 + b"}}",
    ]
    for body in bodies:
        path = "/api/memories/search/" if b'"query"' in body else "/api/memories/"
        r = client.post(path, content=body, headers={"content-type": "application/json"})
        assert 400 <= r.status_code < 500, (body[:80], r.status_code, r.text)
        assert_error(r, r.status_code, r.json()["error"]["type"], r.json()["error"]["field"])


def test_404_and_405_shapes(client: TestClient) -> None:
    assert_error(client.get("/api/memories/alex/no-such-id/"), 404, "not_found")
    assert client.get("/api/memories/alex/no-such-id/").json()["error"]["message"] == "memory not found: 'no-such-id'"
    assert_error(client.delete("/api/memories/no-such-id/?user_id=alex"), 404, "not_found")
    assert_error(client.put("/api/memories/no-such-id/", json={"text": "x"}), 404, "not_found")
    assert_error(client.get("/api/memories/alex/no-such-id/history/"), 404, "not_found")
    assert_error(client.get("/api/nowhere/"), 404, "not_found")
    assert_error(client.get("/nowhere"), 404, "not_found")
    r = client.patch("/api/memories/")
    assert_error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "DELETE, GET, POST"


@pytest.mark.parametrize(("path", "allow"), [
    ("/api/memories/search/", "POST"),
    ("/api/minutes/search/", "POST"),  # not the GET of /api/minutes/{minute_id}/, which matches it too
    ("/api/minutes/reindex/", "POST"),
    ("/api/minutes/history/", "GET"),
    ("/api/minutes/some-minute-id/", "GET"),
])
def test_405_names_the_methods_of_the_path_the_url_names(client: TestClient, path: str, allow: str) -> None:
    r = client.options(path)
    assert_error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == allow


def test_413_for_a_large_body_declared_or_not(make_app) -> None:
    limits = ServerLimits(rate_per_minute=0, max_body_bytes=1000)
    with TestClient(make_app(limits=limits)) as c:
        big = {"messages": "x" * 2000, "user_id": "a"}
        assert_error(c.post("/api/memories/", json=big), 413, "payload_too_large", "body")

        def chunks():  # no Content-Length: the bytes received are counted
            for _ in range(20):
                yield b" " * 100

        r = c.post("/api/memories/", content=chunks(), headers={"content-type": "application/json"})
        assert_error(r, 413, "payload_too_large", "body")
        # a Content-Length that understates the body is caught by counting too
        r = c.post("/api/memories/", content=b" " * 1500, headers={"content-type": "application/json", "content-length": "10"})
        assert r.status_code in (400, 413, 422)
        assert c.post("/api/memories/", json={"messages": "x" * 500, "user_id": "a", "infer": False}).status_code == 200


def test_413_for_too_many_messages(make_app) -> None:
    with TestClient(make_app(limits=ServerLimits(rate_per_minute=0, max_messages=3))) as c:
        r = c.post("/api/memories/", json={"messages": [MSG] * 4, "user_id": "a"})
        assert "limit is 3" in assert_error(r, 413, "payload_too_large", "messages")["message"]
        assert c.post("/api/memories/", json={"messages": [MSG] * 3, "user_id": "a"}).status_code == 200


def test_a_500_never_leaks(client: TestClient, monkeypatch, caplog) -> None:
    def broken(self, **kwargs):
        raise RuntimeError("secret detail /srv/private/path")

    monkeypatch.setattr(Memory, "get_all", broken)
    with caplog.at_level(logging.ERROR, logger="memorist.server"):
        r = client.get("/api/memories/alex/")
    error = assert_error(r, 500, "internal")
    assert "secret" not in r.text and "/srv" not in r.text and "RuntimeError" not in r.text
    assert "secret detail" in caplog.text  # logged server-side, with the traceback
    assert any(rec.exc_info for rec in caplog.records)
    assert error["message"].startswith("internal error")
    assert client.get("/healthz").status_code == 200  # the server lives on


@pytest.mark.parametrize(
    ("exc", "retry"),
    [
        (StoreError("/srv/private/memorist.db: write failed: database is locked"), None),
        (CorruptStoreError("/srv/private/memorist.db is damaged"), None),
        (TransientProviderError("upstream 429 from https://api.example", retry_after=7), "7"),
    ],
)
def test_503_when_the_store_or_a_provider_fails(client: TestClient, monkeypatch, exc, retry) -> None:
    def failing(self, *args, **kwargs):
        raise exc

    monkeypatch.setattr(Memory, "search", failing)
    r = client.post("/api/memories/search/", json={"query": "tea", "user_id": "a"})
    assert_error(r, 503, "unavailable")
    assert "/srv" not in r.text and "example" not in r.text
    assert r.headers.get("Retry-After") == retry
