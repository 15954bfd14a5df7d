"""Fixtures of the memory service's tests: an app over a fresh store (hashing
embedder, no rate limit unless a test asks), its TestClient, and keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from fastapi import FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from memorist.server import KeyStore, create_app  # noqa: E402
from service_helpers import UNLIMITED  # noqa: E402


@pytest.fixture
def store(tmp_path: Path) -> str:
    return str(tmp_path / "service.db")


@pytest.fixture
def make_app(store: str) -> Iterator[Callable[..., FastAPI]]:
    """``make_app(**create_app kwargs)``: an app over ``store``, closed at the end."""
    apps: list[FastAPI] = []

    def make(**kwargs: Any) -> FastAPI:
        kwargs.setdefault("embedder", "hashing")
        kwargs.setdefault("limits", UNLIMITED)
        app = create_app(kwargs.pop("db", store), **kwargs)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.state.service.close()


@pytest.fixture
def client(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    """A development server (no keys) over a fresh store."""
    with TestClient(make_app()) as c:
        yield c


@pytest.fixture
def new_key(store: str) -> Callable[..., str]:
    """``new_key(tenant, user=None)``: a key created in ``store``, as `memorist keys create` does."""

    def make(tenant: str, user: str | None = None, label: str = "") -> str:
        with KeyStore(store) as keys:
            key, _ = keys.create(tenant, user_id=user, label=label)
        return key

    return make
