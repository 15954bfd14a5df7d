"""Fixtures of the LLM tests: the fake OpenAI server and Memories that use it."""

from __future__ import annotations

import pytest
from fake_openai import FakeOpenAIServer


@pytest.fixture(scope="session")
def fake_server():
    server = FakeOpenAIServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_openai(fake_server, monkeypatch):
    """The fake server, emptied, with the SDK's own variables pointing at it."""
    fake_server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.base_url)
    yield fake_server
    fake_server.reset()


@pytest.fixture
def waits() -> list[float]:
    """Pass ``sleep=waits.append`` to an LLM: its backoff waits are recorded, not slept."""
    return []
