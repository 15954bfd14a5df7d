"""Fixtures of the consolidation and rollback tests: a Memory on each storage backend
(``backend``, tests/conftest.py); the fake OpenAI server for the LLM merge is
tests/capabilities/conftest.py's."""

from __future__ import annotations

import pytest

from memorist import Memory


@pytest.fixture
def mem(backend):
    m = Memory(backend.target, embedder="hashing")
    yield m
    m.close()

