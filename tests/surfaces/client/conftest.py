"""Fixtures of the client tests: a development server (no keys) per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from client_live import LiveServer, live_server  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``create_app(db, embedder="hashing")`` served for the module's tests."""
    with live_server(str(tmp_path_factory.mktemp("served") / "s.db")) as server:
        yield server


@pytest.fixture
def fresh(tmp_path) -> Iterator[LiveServer]:
    """A development server on a store of its own, for one test."""
    with live_server(str(tmp_path / "fresh.db")) as server:
        yield server


@pytest.fixture
def keyed(tmp_path):
    """A service with keys: tenant "acme" (any user), one bound to user "bob", and a
    revoked one; yields the server and the keys by name."""
    from memorist.server.keys import KeyStore

    db = str(tmp_path / "keyed.db")
    with KeyStore(db) as keys:
        tenant_key, _ = keys.create("acme", label="app")
        bob_key, _ = keys.create("acme", user_id="bob", label="bob's panel")
        revoked_key, record = keys.create("acme", label="old")
        keys.revoke(record.key_id)
    with live_server(db) as server:
        yield server, {"tenant": tenant_key, "bob": bob_key, "revoked": revoked_key}
