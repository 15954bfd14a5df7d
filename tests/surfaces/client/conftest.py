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
