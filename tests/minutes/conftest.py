"""Fixtures of spec 003's tests: a throwaway Memory (hashing embedder, in memory)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memorist import Memory


@pytest.fixture
def m() -> Iterator[Memory]:
    memory = Memory(":memory:", embedder="hashing")
    yield memory
    memory.close()
