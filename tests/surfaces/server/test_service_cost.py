"""What one request may cost the service: costly filters refused by their bound,
work charged to the caller's bucket, work given up when the client leaves, wrong
keys limited per address, development clients told apart, and the documentation
pages served from the package under a content-security policy."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from memorist.server import ServerLimits
from service_helpers import TURN, assert_error, bearer


def test_a_filter_over_the_bound_is_a_422_naming_filters(client: TestClient) -> None:
    client.post("/api/memories/", json={"messages": TURN, "user_id": "alex"})
    flt = {"OR": [{"cat": f"x{i}"} for i in range(40_000)]}
    r = client.post("/api/memories/search/", json={"query": "hiking", "user_id": "alex", "filters": flt})
    error = assert_error(r, 422, "validation_error", "filters")
    assert "1,000 conditions" in error["message"]
    r = client.post("/api/memories/search/", json={"query": "hiking", "user_id": "alex", "filters": {"OR": flt["OR"][:900]}})
    assert r.status_code == 200, r.text


def test_costly_requests_drain_the_bucket_faster_than_cheap_ones(make_app: Any) -> None:
    app = make_app(limits=ServerLimits(rate_per_minute=60, burst=100))
    with TestClient(app) as c:
        for i in range(300):
            c.post("/api/memories/", json={"messages": [{"role": "user", "content": f"fact {i} about tea"}], "user_id": "u", "infer": False})
        limiter = app.state.service.limiter
        limiter._buckets.clear()
        # (999 keys: an OR of one key's values is checked as one 'in', and cheap)
        costly = {"OR": [{f"cat{i}": "x"} for i in range(999)]}
        assert c.post("/api/memories/search/", json={"query": "tea", "user_id": "u", "filters": costly}).status_code == 200
        (bucket,) = limiter._buckets
        tokens_after_costly = limiter._buckets[bucket][0]
        limiter._buckets.clear()
        assert c.post("/api/memories/search/", json={"query": "tea", "user_id": "u"}).status_code == 200
        tokens_after_cheap = limiter._buckets[bucket][0]
    # a plain search costs about its one token; 999 conditions checked against each
    # candidate cost ten times that and more
    assert tokens_after_cheap > 98.5
    assert tokens_after_costly < 100 - 10


def test_a_search_whose_client_left_is_given_up(make_app: Any) -> None:
    app = make_app()
    with TestClient(app) as c:  # runs the lifespan
        for i in range(50):
            c.post("/api/memories/", json={"messages": [{"role": "user", "content": f"fact {i}"}], "user_id": "u", "infer": False})
        body = json.dumps({"query": "fact", "user_id": "u", "filters": {"OR": [{"cat": "x"}]}}).encode()
        sent: list[dict[str, Any]] = []
        messages = [{"type": "http.request", "body": body, "more_body": False}, {"type": "http.disconnect"}]

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop(0)
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
                 "path": "/api/memories/search/", "raw_path": b"/api/memories/search/", "query_string": b"", "root_path": "",
                 "headers": [(b"host", b"localhost"), (b"content-type", b"application/json")], "client": ("127.0.0.1", 5),
                 "server": ("127.0.0.1", 80)}
        asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 499, sent


def test_wrong_keys_are_limited_per_address_without_locking_out_the_holder(make_app: Any, new_key: Any) -> None:
    key = new_key("acme")
    app = make_app(limits=ServerLimits(rate_per_minute=0, auth_failures_per_minute=5))
    with TestClient(app, client=("10.1.1.1", 1000)) as attacker, TestClient(app, client=("10.2.2.2", 1000)) as holder:
        for _ in range(5):
            assert attacker.get("/api/users/", headers=bearer("ek_wrong")).status_code == 401
        r = attacker.get("/api/users/", headers=bearer("ek_wrong"))
        assert_error(r, 429, "rate_limited")
        assert int(r.headers["Retry-After"]) >= 1
        assert attacker.get("/api/users/", headers=bearer(key + "x")).status_code == 429
        assert holder.get("/api/users/", headers=bearer(key)).status_code == 200
        # A valid key from the same address is served: behind a proxy every client
        # shares one address, and one client's wrong (or revoked) key sent again and
        # again locked every other client out.
        assert attacker.get("/api/users/", headers=bearer(key)).status_code == 200
        assert attacker.get("/api/users/", headers=bearer("ek_wrong")).status_code == 429


def test_development_clients_on_loopback_have_a_bucket_each(make_app: Any) -> None:
    app = make_app(limits=ServerLimits(rate_per_minute=1, burst=2))
    with TestClient(app, client=("127.0.0.1", 1)) as c:
        for _ in range(2):
            assert c.get("/api/users/", headers={"User-Agent": "script"}).status_code == 200
        assert c.get("/api/users/", headers={"User-Agent": "script"}).status_code == 429
        assert c.get("/api/users/", headers={"User-Agent": "Mozilla/5.0 panel"}).status_code == 200


def test_docs_are_served_from_the_package_under_a_content_security_policy(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN, no absolute URL
    for asset in ("/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css", "/docs-assets/redoc.standalone.js", "/static/docs.js"):
        assert client.get(asset).status_code == 200, asset
    assert "redoc.standalone.js" in client.get("/redoc").text
    for path in ("/", "/docs", "/healthz", "/api/users/", "/static/app.js", "/nowhere"):
        r = client.get(path)
        policy = r.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe-eval" not in policy, path
        assert r.headers["x-frame-options"] == "DENY"
    assert "unsafe-inline" not in client.get("/").headers["content-security-policy"].split("style-src")[1].split(";")[0]


def test_the_docs_page_has_no_inline_script() -> None:
    from memorist.server import app as server_app

    assert "<script>" not in server_app._DOCS_PAGE
    assert (Path(server_app.STATIC_DIR) / "docs.js").is_file()


def _scope(method: str, path: str) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"localhost")], "client": ("127.0.0.1", 5), "server": ("127.0.0.1", 80)}


def test_requests_beyond_the_concurrency_limit_are_503_and_health_still_answers(make_app: Any) -> None:
    app = make_app(limits=ServerLimits(rate_per_minute=0, max_concurrency=1))

    async def scenario() -> list[int]:
        release = asyncio.Event()
        statuses: list[int] = []

        def call(path: str, *, hold: bool = False) -> Any:
            delivered = False

            async def receive() -> dict[str, Any]:
                nonlocal delivered
                if not delivered:
                    delivered = True
                    return {"type": "http.request", "body": b"", "more_body": False}
                await asyncio.sleep(3600)
                return {"type": "http.disconnect"}

            async def send(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    statuses.append(message["status"])
                    if hold:  # a client slow to take its answer keeps its request at work
                        await release.wait()

            return app(_scope("GET", path), receive, send)

        first = asyncio.ensure_future(call("/api/users/", hold=True))
        while not statuses:
            await asyncio.sleep(0.01)
        await call("/api/users/")
        await call("/healthz")
        release.set()
        await first
        await call("/api/users/")
        return statuses

    with TestClient(app):  # the lifespan
        assert asyncio.run(scenario()) == [200, 503, 200, 200]


def test_erasures_are_limited_per_key_as_each_rewrites_the_store(make_app: Any, new_key: Any) -> None:
    """Each erasure rewrites the whole store (VACUUM), holding every tenant's writes:
    a user-bound key repeating add and erase held them again and again."""
    bob, ann = new_key("acme", user="bob"), new_key("acme", user="ann")
    app = make_app(limits=ServerLimits(rate_per_minute=0, erasures_per_minute=2))
    with TestClient(app) as client:
        for _ in range(3):  # dry runs count nothing and are never limited
            assert client.post("/api/erase/", json={"dry_run": True}, headers=bearer(bob)).status_code == 200
        for _ in range(2):
            assert client.post("/api/memories/", json={"messages": "hello", "infer": False}, headers=bearer(bob)).status_code == 200
            assert client.post("/api/erase/", json={}, headers=bearer(bob)).status_code == 200
        client.post("/api/memories/", json={"messages": "kept", "infer": False}, headers=bearer(bob))
        r = client.post("/api/erase/", json={}, headers=bearer(bob))
        assert_error(r, 429, "rate_limited")
        assert "erasures" in r.json()["error"]["message"] and int(r.headers["Retry-After"]) >= 1
        assert [m["memory"] for m in client.get("/api/memories/", headers=bearer(bob)).json()["results"]] == ["kept"]  # nothing erased
        assert client.post("/api/erase/", json={}, headers=bearer(ann)).status_code == 200  # another key has its own
    unlimited = make_app(limits=ServerLimits(rate_per_minute=0, erasures_per_minute=0))
    with TestClient(unlimited) as client:
        for _ in range(4):
            assert client.post("/api/erase/", json={}, headers=bearer(bob)).status_code == 200
