"""Fixtures of the consolidation and rollback tests: a Memory on each storage backend
(``backend``, tests/conftest.py), and the fake OpenAI server for the LLM merge."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))  # fake_openai

from fake_openai import FakeOpenAIServer  # noqa: E402

from memorist import Memory  # noqa: E402


@pytest.fixture
def mem(backend):
    m = Memory(backend.target, embedder="hashing")
    yield m
    m.close()


@pytest.fixture(scope="session")
def fake_server():
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
