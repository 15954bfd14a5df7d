"""Fixtures of the learning-loop tests (spec 001): Memories with a settable clock on
each storage backend (``backend``, tests/conftest.py); the fake OpenAI server is
tests/capabilities/conftest.py's."""

from __future__ import annotations

import pytest
from learning_helpers import Clock, Mapped

from memorist import Memory


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def embedder() -> Mapped:
    return Mapped()


@pytest.fixture
def mem(backend, clock):
    """A Memory (hashing embedder) whose learning loop runs on ``clock``."""
    m = Memory(backend.target, embedder="hashing")
    m.learning.clock = clock
    yield m
    m.close()


@pytest.fixture
def mapped_mem(backend, clock, embedder):
    """A Memory whose embedder's similarities the test chooses."""
    m = Memory(backend.target, embedder=embedder)
    m.learning.clock = clock
    yield m
    m.close()

