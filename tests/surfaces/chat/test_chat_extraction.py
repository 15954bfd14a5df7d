"""Spec 004's extraction model in the chat: with OPENAI_API_KEY set, gpt-5-mini on
the Responses API (the official SDK against the fake server) extracts the turn's facts,
and the chat sends those facts to the memory service."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from chat_helpers import chat_app
from fastapi.testclient import TestClient

from memorist import Memory

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "capabilities" / "llm"))  # fake_openai

from fake_openai import FakeOpenAIServer, text  # noqa: E402

pytestmark = pytest.mark.sqlite_only("the chat keeps its store in a SQLite file")


@pytest.fixture
def fake_openai(monkeypatch):
    server = FakeOpenAIServer().start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    yield server
    server.stop()


def test_gpt_5_mini_extracts_the_facts_the_chat_sends(fake_openai, chat_db, memory_service):
    db, keys = chat_db
    fake_openai.script("responses", text('{"facts": ["Is vegetarian", "Goes hiking every weekend"]}'))
    with TestClient(chat_app(db, memory_service)) as client:
        out = client.post("/api/ai/chat", json={"message": "I'm vegetarian and hike every weekend", "memoryEnabled": True},
                          headers={"Authorization": f"Bearer {keys.alice}"}).json()
    assert out["metadata"]["memory"]["status"] == "used"
    call = fake_openai.calls("responses")[0]
    assert call.body["model"] == "gpt-5-mini"
    assert "vegetarian and hike every weekend" in str(call.body["input"])
    with Memory(memory_service.db, embedder="hashing", tenant_id="school") as memory:
        stored = {m["memory"] for m in memory.get_all(user_id="school/alice")["results"]}
    assert {"Is vegetarian", "Goes hiking every weekend"} <= stored


def test_without_a_key_the_memory_service_extracts(chat_db, memory_service):
    db, keys = chat_db
    with TestClient(chat_app(db, memory_service)) as client:
        assert client.app.state.chat.extractor is None
        client.post("/api/ai/chat", json={"message": "I am allergic to nuts", "memoryEnabled": True},
                    headers={"Authorization": f"Bearer {keys.alice}"})
    with Memory(memory_service.db, embedder="hashing", tenant_id="school") as memory:
        assert any("nuts" in m["memory"] for m in memory.get_all(user_id="school/alice")["results"])
