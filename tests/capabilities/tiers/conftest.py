"""Fixtures of the energy tiers' tests (spec 002): Memories under the energy policy on
each storage backend (``backend``, tests/conftest.py). Helpers: tiers_helpers.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from memorist import Memory


@pytest.fixture(autouse=True)
def _no_policy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORIST_POLICY", raising=False)
    monkeypatch.delenv("MEMORIST_MAINTENANCE_LOG", raising=False)


@pytest.fixture
def opened(backend) -> Iterator[Callable[..., Memory]]:
    """``opened(**options)``: a Memory of the test's store (another with ``target=``),
    energy policy by default. Each call is another connection, as another process's."""
    memories: list[Memory] = []

    def _open(**options) -> Memory:
        options.setdefault("embedder", "hashing")
        options.setdefault("policy", "energy")
        m = Memory(options.pop("target", backend.target), **options)
        memories.append(m)
        return m

    yield _open
    for m in memories:
        m.close()


@pytest.fixture
def mem(opened) -> Memory:
    return opened()

