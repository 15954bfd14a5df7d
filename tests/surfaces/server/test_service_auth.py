"""API keys on the wire: development mode, 401s, both headers, revocation,
rate limits per key, and keys that are never stored in plain text."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memorist.server import KeyStore, ServerLimits
from service_helpers import assert_error, bearer

OPEN_PATHS = ("/", "/healthz", "/openapi.json", "/docs", "/static/app.js")


def test_development_mode_needs_no_key(client: TestClient) -> None:
    r = client.post("/api/memories/", json={"messages": "Likes tea", "user_id": "alex", "infer": False})
    assert r.status_code == 200
    # a key sent to a development server is not looked at
    assert client.get("/api/memories/alex/", headers=bearer("ek_whatever_nonsense")).status_code == 200


def test_keys_are_required_once_one_exists(make_app, new_key) -> None:
    key = new_key("acme")
    with TestClient(make_app()) as c:
        for headers in ({}, bearer(""), bearer("nonsense"), bearer("ek_abcdefgh_wrong"), {"X-API-Key": "ek_zz"}, {"Authorization": "Basic abc"}):
            assert_error(c.get("/api/memories/alex/", headers=headers), 401, "unauthorized")
        # a real key id with another secret
        forged = key.rsplit("_", 1)[0] + "_" + "A" * 43
        assert_error(c.get("/api/memories/alex/", headers=bearer(forged)), 401, "unauthorized")
        for headers in (bearer(key), {"X-API-Key": key}, {"Authorization": f"bearer {key}"}):
            assert c.get("/api/memories/alex/", headers=headers).status_code == 200
        for path in OPEN_PATHS:
            assert c.get(path).status_code in (200, 404), path  # 404: no panel file in this build
            assert c.get(path).status_code != 401
        # 401 comes before the body is even looked at
        assert_error(c.post("/api/memories/", content=b"{not json", headers={"content-type": "application/json"}), 401, "unauthorized")


def test_a_new_key_switches_a_running_server_to_keys(client: TestClient, new_key) -> None:
    assert client.get("/api/users/").status_code == 200
    key = new_key("acme")
    assert_error(client.get("/api/users/"), 401, "unauthorized")
    assert client.get("/api/users/", headers=bearer(key)).status_code == 200


def test_revoking_every_key_does_not_open_the_server(make_app, new_key, store: str) -> None:
    key = new_key("acme")
    with TestClient(make_app()) as c:
        assert c.get("/api/users/", headers=bearer(key)).status_code == 200
        with KeyStore(store) as keys:
            keys.revoke(key)
        assert_error(c.get("/api/users/", headers=bearer(key)), 401, "unauthorized")
        assert_error(c.get("/api/users/"), 401, "unauthorized")


def test_require_keys_with_no_key_refuses_everything(make_app) -> None:
    with TestClient(make_app(require_keys=True)) as c:
        assert_error(c.get("/api/users/"), 401, "unauthorized")
        assert c.get("/healthz").status_code == 200


def test_a_local_development_server_refuses_other_host_names(make_app) -> None:
    """DNS rebinding: a web page whose name resolves to 127.0.0.1 must not read the memories."""
    with TestClient(make_app(local_only=True), base_url="http://localhost:6060") as c:
        assert c.get("/api/users/").status_code == 200
        for host in ("127.0.0.1:6060", "[::1]:6060", "localhost"):
            assert c.get("/api/users/", headers={"Host": host}).status_code == 200
        assert_error(c.get("/api/users/", headers={"Host": "evil.example:6060"}), 403, "forbidden")


def test_last_used_is_recorded(make_app, new_key, store: str) -> None:
    key = new_key("acme")
    app = make_app()
    with TestClient(app) as c:
        assert c.get("/api/users/", headers=bearer(key)).status_code == 200
    with KeyStore(store) as keys:
        (record,) = keys.list()
    assert record.last_used_at is not None and record.last_used_at >= record.created_at


def test_rate_limit_per_key_with_retry_after(make_app, new_key) -> None:
    one, two = new_key("acme"), new_key("acme", "alex")
    # One token a minute: the bucket cannot refill between the four requests however
    # slowly a loaded machine serves them (at 60 a minute it did, after a second).
    limits = ServerLimits(rate_per_minute=1, burst=3)
    with TestClient(make_app(limits=limits)) as c:
        for _ in range(3):
            assert c.get("/api/users/", headers=bearer(one)).status_code == 200
        r = c.get("/api/users/", headers=bearer(one))
        assert_error(r, 429, "rate_limited")
        assert int(r.headers["Retry-After"]) >= 1
        assert c.get("/api/users/", headers=bearer(two)).status_code == 200  # its own bucket
        assert c.get("/healthz").status_code == 200  # not rate limited


def test_rate_limit_per_client_in_development_mode(make_app) -> None:
    with TestClient(make_app(limits=ServerLimits(rate_per_minute=1, burst=1))) as c:
        assert c.get("/api/users/").status_code == 200
        r = c.get("/api/users/")
        assert_error(r, 429, "rate_limited")
        assert 1 <= int(r.headers["Retry-After"]) <= 60


def test_keys_are_never_stored_in_plain_text(make_app, store: str) -> None:
    with KeyStore(store) as keys:
        made = [keys.create(t, user_id=u, label="a label") for t in ("acme", "globex") for u in (None, "alice")]
    with TestClient(make_app()) as c:
        for key, _ in made:
            assert c.get("/api/users/", headers=bearer(key)).status_code == 200
    # every byte of the store (and of its write-ahead log, if one is left)
    blobs = b"".join(p.read_bytes() for p in Path(store).parent.iterdir() if p.name.startswith(Path(store).name))
    conn = sqlite3.connect(store)
    try:
        rows = conn.execute("SELECT * FROM api_keys").fetchall()
        hashes = dict(conn.execute("SELECT key_id, key_hash FROM api_keys").fetchall())
    finally:
        conn.close()
    assert len(rows) == len(made)
    for key, record in made:
        secret = key.split("_", 2)[2]
        assert key.encode() not in blobs and secret.encode() not in blobs
        assert not any(secret in str(cell) for row in rows for cell in row)
        assert hashes[record.key_id] == hashlib.sha256(key.encode()).hexdigest()


@pytest.mark.parametrize("header", ["Authorization", "X-API-Key"])
def test_a_revoked_key_is_refused_at_once(make_app, new_key, store: str, header: str) -> None:
    key = new_key("acme")
    value = f"Bearer {key}" if header == "Authorization" else key
    with TestClient(make_app()) as c:
        assert c.get("/api/users/", headers={header: value}).status_code == 200
        with KeyStore(store) as keys:
            keys.revoke(key.split("_")[1])
        assert_error(c.get("/api/users/", headers={header: value}), 401, "unauthorized")
