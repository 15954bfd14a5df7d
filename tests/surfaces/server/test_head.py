"""HEAD answers as GET does, without the body, on every route that answers GET: the
panel, the API, the documents, the health check (a monitor's `curl -I` must not get
405), in the memory service and in the chat service."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.testclient import TestClient

PATHS = ["/", "/healthz", "/api/memories/?user_id=alex", "/api/memories?user_id=alex", "/openapi.json", "/docs",
         "/api/memories/not-an-id/?user_id=alex", "/nowhere"]


def _same_but_the_body(client: TestClient, path: str, **kwargs: object) -> None:
    got, head = client.get(path, **kwargs), client.head(path, **kwargs)
    assert head.status_code == got.status_code, path
    assert head.content == b"", path
    assert head.headers.get("content-length") == got.headers.get("content-length") == str(len(got.content)), path
    assert head.headers.get("content-type") == got.headers.get("content-type"), path
    assert head.headers.get("x-content-type-options") == got.headers.get("x-content-type-options"), path


def test_every_get_answers_head_in_the_memory_service(client: TestClient) -> None:
    client.post("/api/memories/", json={"messages": "I love hiking", "user_id": "alex", "infer": False})
    for path in PATHS:
        _same_but_the_body(client, path)
    # A route with no GET answers HEAD as it answers GET: 405, naming what it allows.
    got, head = client.get("/api/memories/search/"), client.head("/api/memories/search/")
    assert head.status_code == got.status_code and head.content == b""


def test_head_needs_the_key_get_needs(make_app: Callable[..., FastAPI], new_key: Callable[..., str]) -> None:
    key = new_key("acme", "alex")
    with TestClient(make_app(require_keys=True)) as client:
        assert client.head("/api/memories/?user_id=alex").status_code == 401
        _same_but_the_body(client, "/api/memories/?user_id=alex", headers={"X-API-Key": key})
        assert client.head("/healthz").status_code == 200  # needs no key, as GET


def test_every_get_answers_head_in_the_chat_service(tmp_path) -> None:
    from memorist.agent.chat import ChatSettings, create_chat_app

    settings = ChatSettings(memory_url="http://127.0.0.1:9", memory_timeout=1.0)
    with TestClient(create_chat_app(str(tmp_path / "chat.db"), settings=settings, embedder="hashing", llm=None)) as client:
        for path in ["/", "/healthz", "/static/chat.js", "/nowhere"]:
            _same_but_the_body(client, path)
