"""Fixtures of the chat's tests: a keyed memory service (recorded), the chat's
store with two user keys and a tenant key, and the chat app."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from chat_helpers import Recorder, live

from memorist.server import KeyStore, create_app


@dataclass
class MemoryService:
    url: str
    key: str
    recorder: Recorder
    db: str


@pytest.fixture
def memory_service(tmp_path):
    db = str(tmp_path / "memory.db")
    with KeyStore(db) as keys:
        key, _ = keys.create("school", label="the chat")
    recorder = Recorder(create_app(db, embedder="hashing"))
    with live(recorder) as server:
        yield MemoryService(f"{server.url}/api/memories", key, recorder, db)


@dataclass
class ChatKeys:
    alice: str
    bob: str
    tenant: str


@pytest.fixture
def chat_db(tmp_path) -> tuple[str, ChatKeys]:
    db = str(tmp_path / "chat.db")
    with KeyStore(db) as keys:
        made = ChatKeys(keys.create("school", user_id="alice")[0], keys.create("school", user_id="bob")[0], keys.create("school")[0])
    return db, made
