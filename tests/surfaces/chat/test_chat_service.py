"""memorist chat's service: POST /api/ai/chat under the chat's keys and conversation
owners; the memory service reached over HTTP only when memoryEnabled; its decay; a
memory service that is down."""

from __future__ import annotations

import json
import time

import pytest
from chat_helpers import chat_app, free_port
from fastapi.testclient import TestClient

from memorist import Memory
from memorist.agent.chat import UNAVAILABLE
from memorist.server import KeyStore

pytestmark = pytest.mark.sqlite_only("the chat keeps its store in a SQLite file")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def say(client: TestClient, key: str, message: str, **body) -> dict:
    response = client.post("/api/ai/chat", json={"message": message, **body}, headers=bearer(key))
    assert response.status_code == 200, response.text
    return response.json()


def test_keys_and_conversation_ownership(chat_db, memory_service):
    db, keys = chat_db
    with TestClient(chat_app(db, memory_service)) as client:
        assert client.post("/api/ai/chat", json={"message": "hi"}).status_code == 401
        assert client.post("/api/ai/chat", json={"message": "hi"}, headers=bearer("ek_nope1234_" + "x" * 43)).status_code == 401
        tenant = client.post("/api/ai/chat", json={"message": "hi"}, headers=bearer(keys.tenant))
        assert tenant.status_code == 403 and "bound to no user" in tenant.json()["error"]["message"]

        first = say(client, keys.alice, "Help me multiply 12 by 5.")
        conversation = first["conversationId"]
        assert first["response"] == "12 * 5 = 60"
        assert first["metadata"]["reasoningMode"] == "react" and "ace_delta" in first["metadata"]["scratch"]
        again = say(client, keys.alice, "And 1/2 + 1/3?", conversationId=conversation)
        assert again["conversationId"] == conversation and again["response"] == "1/2 + 1/3 = 5/6"
        # Bob cannot read or write Alice's conversation: it does not exist for him.
        stolen = client.post("/api/ai/chat", json={"message": "hi", "conversationId": conversation}, headers=bearer(keys.bob))
        assert stolen.status_code == 404 and stolen.json()["error"]["field"] == "conversationId"
        assert "alice" not in stolen.text
        # A conversation id the client chose is started for its first user.
        assert say(client, keys.bob, "hello", conversationId="bobs-own")["conversationId"] == "bobs-own"
        assert client.post("/api/ai/chat", json={"message": "x", "conversationId": "bobs-own"}, headers=bearer(keys.alice)).status_code == 404


def test_memory_is_reached_over_http_only_when_enabled(chat_db, memory_service):
    db, keys = chat_db
    recorded = memory_service.recorder.requests
    with TestClient(chat_app(db, memory_service)) as client:
        off = say(client, keys.alice, "I am vegetarian and I love hiking", memoryEnabled=False)
        assert recorded == [] and off["metadata"]["memory"]["status"] == "off"

        on = say(client, keys.alice, "I am vegetarian and I love hiking", memoryEnabled=True)
        assert on["metadata"]["memory"]["status"] == "used" and on["metadata"]["memory"]["added"]
        paths = [(method, path) for method, path, _ in recorded]
        assert ("POST", "/api/memories/search/") in paths and ("POST", "/api/memories/") in paths
        assert {auth for _, _, auth in recorded} == {f"Bearer {memory_service.key}"}  # the chat's key for the memory service

        # A new conversation: the facts come back from the memory service into the tutor's context.
        later = say(client, keys.alice, "Which vegetarian food is good for hiking?", memoryEnabled=True)
        assert later["conversationId"] != on["conversationId"]
        facts = " ".join(f["text"] for f in later["metadata"]["memory"]["used"])
        assert "egetarian" in facts and "egetarian" in later["response"]
        # Bob's memories are his own.
        bob = say(client, keys.bob, "Which vegetarian food is good for hiking?", memoryEnabled=True)
        assert bob["metadata"]["memory"]["used"] == []

        before = len(recorded)
        say(client, keys.alice, "What food do I like?")  # off again: no request at all
        assert len(recorded) == before

    with Memory(memory_service.db, embedder="hashing", tenant_id="school") as memory:
        stored = memory.get_all(user_id="school/alice")["results"]
        assert stored and all(m["agent_id"] == "chat" for m in stored)
        assert memory.get_all(user_id="school/bob")["results"] == [] or all("egetarian" not in m["memory"] for m in memory.get_all(user_id="school/bob")["results"])


def test_users_of_two_tenants_with_one_name_keep_their_facts_apart(chat_db, memory_service):
    # The chat reaches the memory service with one key (one tenant there): its own
    # tenants' users must not meet in it, whatever their user ids.
    db, keys = chat_db
    with KeyStore(db) as store:
        club = store.create("club", user_id="alice")[0]
        odd = store.create("club/x", user_id="y")[0]  # would read "club/x/y", as would tenant "club" + user "x/y"
        plain = store.create("club", user_id="x/y")[0]
    with TestClient(chat_app(db, memory_service)) as client:
        say(client, keys.alice, "I am vegetarian and I love hiking", memoryEnabled=True)
        other = say(client, club, "Which vegetarian food is good for hiking?", memoryEnabled=True)
        assert other["metadata"]["memory"]["used"] == []
        assert client.get("/api/ai/memories", headers=bearer(club)).json()["results"] == []
        assert client.get("/api/ai/memories", headers=bearer(keys.alice)).json()["results"]
        say(client, odd, "I am allergic to peanuts", memoryEnabled=True)
        assert client.get("/api/ai/memories", headers=bearer(plain)).json()["results"] == []
    with Memory(memory_service.db, embedder="hashing", tenant_id="school") as memory:
        assert memory.get_all(user_id="school/alice")["results"]
        assert memory.get_all(user_id="club/alice")["results"] == []
        assert memory.get_all(user_id="club%2Fx/y")["results"]


def test_a_memory_service_that_is_down_does_not_stop_the_chat(chat_db):
    db, keys = chat_db
    with TestClient(chat_app(db, None, url=f"http://127.0.0.1:{free_port()}/api/memories")) as client:
        out = say(client, keys.alice, "Help me multiply 12 by 5.", memoryEnabled=True)
        assert out["response"].startswith("12 * 5 = 60") and UNAVAILABLE in out["response"]
        assert out["metadata"]["memory"]["status"] == "unavailable"
        drawer = client.get("/api/ai/memories", headers=bearer(keys.alice))
        assert drawer.status_code == 503 and "unavailable" in drawer.json()["error"]["message"]
        assert say(client, keys.alice, "Help me multiply 12 by 5.")["response"] == "12 * 5 = 60"  # off: unaffected


def test_memories_older_than_the_decay_window_are_not_used(chat_db, memory_service):
    db, keys = chat_db
    now = time.time()
    with Memory(memory_service.db, embedder="hashing", tenant_id="school") as memory:
        memory.add("Is learning long division", user_id="school/alice", agent_id="chat", infer=False, timestamp=now - 10 * 86400)
        memory.add("Is learning fractions", user_id="school/alice", agent_id="chat", infer=False, timestamp=now - 86400)
    with TestClient(chat_app(db, memory_service, decay_days=6)) as client:
        out = say(client, keys.alice, "What am I learning?", memoryEnabled=True)
        used = [f["text"] for f in out["metadata"]["memory"]["used"]]
        assert "Is learning fractions" in used and "Is learning long division" not in used
        listed = [m["memory"] for m in client.get("/api/ai/memories", headers=bearer(keys.alice)).json()["results"]]
        assert "Is learning fractions" in listed and "Is learning long division" not in listed


def test_the_drawer_routes_list_newest_first_search_and_delete(chat_db, memory_service):
    db, keys = chat_db
    now = time.time()
    with Memory(memory_service.db, embedder="hashing", tenant_id="school") as memory:
        for i, text in enumerate(["Likes chess", "Has a dog", "Plays violin"]):
            memory.add(text, user_id="school/alice", agent_id="chat", infer=False, timestamp=now - (3 - i) * 3600)
        memory.add("Bob's secret", user_id="school/bob", agent_id="chat", infer=False)
    with TestClient(chat_app(db, memory_service)) as client:
        rows = client.get("/api/ai/memories", headers=bearer(keys.alice)).json()["results"]
        assert [r["memory"] for r in rows] == ["Plays violin", "Has a dog", "Likes chess"]
        found = client.get("/api/ai/memories", params={"query": "dog"}, headers=bearer(keys.alice)).json()["results"]
        assert found[0]["memory"] == "Has a dog"
        assert client.delete(f"/api/ai/memories/{found[0]['id']}", headers=bearer(keys.alice)).status_code == 200
        assert [r["memory"] for r in client.get("/api/ai/memories", headers=bearer(keys.alice)).json()["results"]] == ["Plays violin", "Likes chess"]
        bobs = client.get("/api/ai/memories", headers=bearer(keys.bob)).json()["results"]
        assert client.delete(f"/api/ai/memories/{bobs[0]['id']}", headers=bearer(keys.alice)).status_code == 404


def test_bad_requests_name_the_field(chat_db, memory_service):
    db, keys = chat_db
    with TestClient(chat_app(db, memory_service)) as client:
        for body, field in (
            ({}, "message"),
            ({"message": ""}, "message"),
            ({"message": "x" * 10_001}, "message"),
            ({"message": "hi", "memoryEnabled": "maybe"}, "memoryEnabled"),
            ({"message": "hi", "conversationHistory": [{"role": "user", "content": "x"}] * 51}, "conversationHistory"),
            ({"message": "hi", "conversationHistory": [{"role": "robot", "content": "x"}]}, "conversationHistory[0].role"),
            ({"message": "hi", "conversationId": "\n"}, "conversationId"),
        ):
            response = client.post("/api/ai/chat", json=body, headers=bearer(keys.alice))
            assert response.status_code == 422, (body, response.text)
            assert response.json()["error"]["field"] == field, (body, response.json())
        assert memory_service.recorder.requests == []


def test_a_chat_store_without_keys_is_a_local_development_server(tmp_path, memory_service):
    with TestClient(chat_app(str(tmp_path / "dev.db"), memory_service, local_only=True), base_url="http://127.0.0.1") as client:
        out = client.post("/api/ai/chat", json={"message": "Help me multiply 12 by 5."}).json()
        assert out["metadata"]["scratch"]["learner_id"] == "default"
    with TestClient(chat_app(str(tmp_path / "dev2.db"), memory_service, local_only=True), base_url="http://evil.example") as client:
        assert client.post("/api/ai/chat", json={"message": "hi"}).status_code == 403


def test_a_body_too_large_is_refused_before_it_is_read(chat_db, memory_service):
    db, keys = chat_db
    with TestClient(chat_app(db, memory_service)) as client:
        huge = b'{"message": "' + b"x" * 2_000_000 + b'"}'
        response = client.post("/api/ai/chat", content=huge, headers={**bearer(keys.alice), "Content-Type": "application/json"})
        assert response.status_code == 413 and "larger than" in response.json()["error"]["message"]


def test_one_load_of_the_playbook_per_request(chat_db, memory_service, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="memorist")
    db, keys = chat_db
    with TestClient(chat_app(db, memory_service)) as client:
        for message in ("Help me multiply 12 by 5.", "I get confused by fractions", "What is the best way to practice?"):
            caplog.clear()
            say(client, keys.alice, message, memoryEnabled=True)
            assert sum(r.getMessage().startswith("[ACE Memory] Loaded") for r in caplog.records) == 1


def test_each_user_has_a_rate(chat_db, memory_service):
    db, keys = chat_db
    with TestClient(chat_app(db, memory_service, rate=1.0, burst=2)) as client:
        for _ in range(2):
            say(client, keys.alice, "Help me multiply 12 by 5.")
        refused = client.post("/api/ai/chat", json={"message": "hi"}, headers=bearer(keys.alice))
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        say(client, keys.bob, "Help me multiply 12 by 5.")  # another user's bucket


def test_a_hostile_message_or_conversation_id_cannot_forge_a_log_line(chat_db, memory_service, caplog):
    """Before, a message or a conversation id holding a line break wrote a line of its
    own choosing into the chat's log (a forged "[Chat] user=..." record)."""
    db, keys = chat_db
    forged = "\n[Chat] user=admin conversation=x memory=used mode=cot"
    with TestClient(chat_app(db, memory_service)) as client, caplog.at_level("INFO"):
        say(client, keys.alice, "Help me multiply 12 by 5." + forged)
        bad = client.post("/api/ai/chat", json={"message": "hi", "conversationId": "c" + forged}, headers=bearer(keys.alice))
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "conversationId"
    lines = [line for record in caplog.records for line in record.getMessage().splitlines()]
    assert lines and not any(line.startswith("[Chat] user=admin") for line in lines)


def test_a_nul_or_a_lone_surrogate_is_refused_naming_the_field(chat_db, memory_service):
    """Before, a message holding U+0000 sent with memory on was answered with "Long-term
    memory is unavailable right now" (the memory service had refused the text)."""
    db, keys = chat_db
    with TestClient(chat_app(db, memory_service)) as client:
        nul = "NUL character (U+0000)"
        for body, field, says in (
            ({"message": "I like tea\x00 and cake", "memoryEnabled": True}, "message", nul),
            ({"message": "I like tea\x00 and cake"}, "message", nul),
            ({"message": "bad \ud800 text", "memoryEnabled": True}, "message", "valid string"),
            ({"message": "hi", "conversationHistory": [{"role": "user", "content": "a\x00b"}], "memoryEnabled": True},
             "conversationHistory[0].content", nul),
            ({"message": "hi", "feedback": "nice\x00", "memoryEnabled": True}, "feedback", nul),
        ):
            # As JSON escapes (\u0000, \ud800), as a browser sends them.
            response = client.post("/api/ai/chat", content=json.dumps(body), headers={**bearer(keys.alice), "Content-Type": "application/json"})
            assert response.status_code == 422, (body, response.text)
            error = response.json()["error"]
            assert error["field"] == field and says in error["message"], (body, error)
        assert memory_service.recorder.requests == []  # refused before anything was sent
        assert say(client, keys.alice, "I like tea and cake", memoryEnabled=True)["metadata"]["memory"]["status"] == "used"


def test_the_docs_are_served_by_the_chat_and_every_answer_has_the_security_headers(chat_db, memory_service):
    """Before, /docs loaded Swagger UI from cdn.jsdelivr.net and a favicon from
    fastapi.tiangolo.com, and no answer carried a content-security policy or
    X-Frame-Options (the page keeps an API key in sessionStorage)."""
    db, keys = chat_db
    with TestClient(chat_app(db, memory_service)) as client:
        docs = client.get("/docs")
        assert docs.status_code == 200 and "swagger-ui" in docs.text
        assert "http" not in docs.text.replace("http-equiv", "")  # no CDN, no absolute URL
        for asset in ("/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css", "/docs-assets/docs.js",
                      "/docs-assets/favicon.png", "/openapi.json"):
            assert client.get(asset).status_code == 200, asset
        assert "/api/ai/chat" in client.get("/openapi.json").json()["paths"]
        huge = b'{"message": "' + b"x" * 2_000_000 + b'"}'
        answers = [client.get(path) for path in ("/", "/docs", "/redoc", "/healthz", "/static/chat.js", "/api/ai/memories", "/nowhere")]
        answers.append(client.post("/api/ai/chat", content=huge, headers={**bearer(keys.alice), "Content-Type": "application/json"}))
        for r in answers:
            policy = r.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, r.url
            assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff", r.url
        assert "unsafe-inline" not in client.get("/").headers["content-security-policy"]


def test_the_reply_without_a_model_points_at_what_the_page_offers(chat_db, memory_service):
    """Before, it told the user to use a "feedback" field the page does not have."""
    db, keys = chat_db
    with TestClient(chat_app(db, memory_service)) as client:
        reply = say(client, keys.alice, "Tell me about volcanoes")["response"]
        assert '"Helpful" or "Not helpful"' in reply and '"feedback" field' not in reply
        page = client.get("/").text
        assert ">Helpful</button>" in page and ">Not helpful</button>" in page


def test_the_chats_model_is_bounded_by_its_settings_and_a_failure_is_named(chat_db, memory_service, monkeypatch):
    from memorist.agent.chat import ChatSettings, create_chat_app

    db, keys = chat_db
    monkeypatch.setenv("MEMORIST_LLM", "openai-compatible:fake")
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    settings = ChatSettings(memory_url=memory_service.url, model_timeout=4.0, model_retries=0)
    with TestClient(create_chat_app(db, settings=settings, embedder="hashing")) as client:
        llm = client.app.state.chat.tutor.llm
        assert (llm.name, llm.timeout, llm.max_retries) == ("openai-compatible:fake", 4.0, 0)
        out = say(client, keys.alice, "Why do we flip the second fraction when dividing?")
    assert out["metadata"]["mode"] == "deterministic" and out["metadata"]["scratch"]["model_error"] == "it could not be reached"
    assert out["response"].startswith("The language model could not answer (it could not be reached)")
