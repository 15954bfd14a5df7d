"""Fixtures of spec 003's tests: a Memory (hashing embedder) on each storage backend
(``backend``, tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memorist import Memory


@pytest.fixture
def m(backend) -> Iterator[Memory]:
    memory = Memory(backend.target, embedder="hashing")
    yield memory
    memory.close()
