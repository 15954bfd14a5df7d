"""Fixtures of the energy tiers' tests (spec 002): a Memory under the energy policy
on a SQLite file (so the maintenance log has a place). Helpers: tiers_helpers.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from memorist import Memory


@pytest.fixture(autouse=True)
def _no_policy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORIST_POLICY", raising=False)
    monkeypatch.delenv("MEMORIST_MAINTENANCE_LOG", raising=False)


@pytest.fixture
def opened(tmp_path) -> Iterator[Callable[..., Memory]]:
    """``opened(**options)``: a Memory on the test's SQLite file, energy policy by default."""
    memories: list[Memory] = []

    def _open(**options) -> Memory:
        options.setdefault("embedder", "hashing")
        options.setdefault("policy", "energy")
        m = Memory(options.pop("path", str(tmp_path / "tiers.db")), **options)
        memories.append(m)
        return m

    yield _open
    for m in memories:
        m.close()


@pytest.fixture
def mem(opened) -> Memory:
    return opened()

