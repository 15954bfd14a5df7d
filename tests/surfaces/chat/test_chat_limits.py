"""What one user, a slow model, a large body or a failing memory service can do to the
chat: a user's requests at work at once are bounded (others, the page and the health
check do not wait behind them), a body streamed past the limit is a 413, and the memory
drawer reports the memory service's refusals as the chat's, not the caller's."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from chat_helpers import live
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from memorist.agent.chat import ChatSettings, create_chat_app
from memorist.llm.base import LLM, LLMRequest, LLMResponse

pytestmark = pytest.mark.sqlite_only("the chat keeps its store in a SQLite file")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Gate(LLM):
    """A model that answers only once the test opens the gate."""

    provider = "gate"

    def __init__(self) -> None:
        super().__init__("gate", timeout=60, max_retries=0)
        self.waiting = threading.Semaphore(0)
        self.open = threading.Event()

    def _generate(self, request: LLMRequest) -> LLMResponse:
        self.waiting.release()
        self.open.wait(60)
        return LLMResponse("Answer: 12 times 5 is 60.")


def test_one_users_requests_at_work_are_bounded_and_others_do_not_wait(chat_db, memory_service):
    db, keys = chat_db
    gate = Gate()
    settings = ChatSettings(memory_url=memory_service.url, memory_api_key=memory_service.key, rate_per_minute=0,
                            max_concurrency=3, max_per_user=2)
    with live(create_chat_app(db, settings=settings, embedder="hashing", llm=gate)) as server, \
            httpx.Client(base_url=server.url, timeout=60) as http, ThreadPoolExecutor(4) as pool:
        def say(key: str) -> httpx.Response:
            return http.post("/api/ai/chat", json={"message": "Help me multiply 12 by 5."}, headers=bearer(key))

        held = [pool.submit(say, keys.alice) for _ in range(2)]
        for _ in held:
            assert gate.waiting.acquire(timeout=30)  # both of alice's messages are with the model
        third = say(keys.alice)
        assert third.status_code == 429 and third.headers["retry-after"] == "1"
        assert "2 requests at work" in third.json()["error"]["message"]
        # Another user is not held back by alice's, and neither are the page and the health check.
        bobs = pool.submit(say, keys.bob)
        assert gate.waiting.acquire(timeout=30)
        assert http.get("/healthz", timeout=5).json() == {"status": "ok"}
        assert http.get("/", timeout=5).status_code == 200
        full = say(keys.bob)  # the chat's 3 are at work
        assert full.status_code == 503 and "limit of 3 requests" in full.json()["error"]["message"]
        gate.open.set()
        assert [f.result().status_code for f in [*held, bobs]] == [200, 200, 200]
        assert say(keys.alice).status_code == 200  # answered: counted out


@pytest.mark.parametrize(("name", "value"), [("max_concurrency", 0), ("max_per_user", 0), ("max_per_user", 40), ("max_concurrency", 1.5)])
def test_bad_concurrency_settings_are_refused_naming_them(name, value):
    with pytest.raises(ValueError, match=name):
        ChatSettings(**{name: value})


def test_a_body_streamed_past_the_limit_is_a_413_not_bad_json(chat_db, memory_service):
    db, keys = chat_db
    settings = ChatSettings(memory_url=memory_service.url, memory_api_key=memory_service.key)
    with TestClient(create_chat_app(db, settings=settings, embedder="hashing", llm=None)) as client:
        chunks = iter([b'{"message": "', *([b"x" * 65_536] * 20), b'"}'])  # no Content-Length
        response = client.post("/api/ai/chat", content=chunks, headers={**bearer(keys.alice), "Content-Type": "application/json"})
        assert response.status_code == 413, response.text
        assert "larger than 1,048,576 bytes" in response.json()["error"]["message"]
        small = iter([b'{"message": ', b'"Help me multiply 12 by 5."}'])  # streamed, within the limit
        response = client.post("/api/ai/chat", content=small, headers={**bearer(keys.alice), "Content-Type": "application/json"})
        assert response.status_code == 200 and response.json()["response"] == "12 * 5 = 60"


@pytest.mark.parametrize(("status", "headers"), [(429, {"Retry-After": "7"}), (403, {}), (401, {}), (422, {}), (409, {})])
def test_the_memory_services_refusals_are_the_chats_not_the_callers(chat_db, status, headers):
    """A key the memory service refuses, or a request of the chat's it finds bad, is the
    chat's configuration: the caller gets a 503, never the service's 403 or a 422
    naming a user_id it never sent, nor a 503 blaming a model provider."""
    db, keys = chat_db
    refusing = FastAPI()

    @refusing.api_route("/{path:path}", methods=["GET", "POST", "DELETE"])
    def refuse(path: str) -> JSONResponse:
        kind = {429: "rate_limited", 403: "forbidden", 401: "unauthorized", 422: "validation_error", 409: "conflict"}[status]
        body = {"error": {"type": kind, "message": "no", **({"field": "user_id"} if status == 422 else {})}}
        return JSONResponse(body, status_code=status, headers=headers)

    with live(refusing) as service:
        settings = ChatSettings(memory_url=f"{service.url}/api/memories", memory_api_key="k", memory_timeout=5.0)
        with TestClient(create_chat_app(db, settings=settings, embedder="hashing", llm=None)) as client:
            for response in (client.get("/api/ai/memories", headers=bearer(keys.alice)),
                             client.delete("/api/ai/memories/0b1c2d3e-0000-4000-8000-000000000000", headers=bearer(keys.alice))):
                assert response.status_code == 503, response.text
                message = response.json()["error"]["message"]
                assert "long-term memory is unavailable" in message and "provider" not in message
                assert "field" not in response.json()["error"] or response.json()["error"]["field"] != "user_id"
                if status == 429:
                    assert float(response.headers["retry-after"]) >= 1
            # The chat itself still answers.
            out = client.post("/api/ai/chat", json={"message": "Help me multiply 12 by 5."}, headers=bearer(keys.alice))
            assert out.status_code == 200 and out.json()["response"] == "12 * 5 = 60"
