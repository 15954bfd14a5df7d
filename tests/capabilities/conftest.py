"""Fixtures every capability's tests share: the fake OpenAI server (tests/capabilities/llm/fake_openai.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "llm"))  # fake_openai, for every capability's tests

from fake_openai import FakeOpenAIServer  # noqa: E402


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
