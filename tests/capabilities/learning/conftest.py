"""Fixtures of the learning-loop tests (spec 001): Memories with a settable clock on
each storage backend (``backend``, tests/conftest.py); the fake OpenAI server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))  # fake_openai

from learning_helpers import Clock, Mapped  # noqa: E402

from memorist import Memory  # noqa: E402


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


@pytest.fixture(scope="session")
def fake_server():
    from fake_openai import FakeOpenAIServer

    server = FakeOpenAIServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_openai(fake_server, monkeypatch):
    fake_server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.base_url)
    yield fake_server
    fake_server.reset()
