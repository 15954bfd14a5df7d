"""The relation tests' store: a Memory on each backend (the ``backend`` fixture)."""

from __future__ import annotations

import pytest

from memorist import Memory


@pytest.fixture
def mem(backend):
    m = Memory(backend.target, embedder="hashing")
    yield m
    m.close()
