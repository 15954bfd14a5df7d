"""The chat's turns: a "Helpful" / "Not helpful" mark credited to the answer it was
given on, a save that failed partway said so, a message refused before its
conversation is claimed, a memory service answering unreadable rows."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from memorist.agent.chat import UNAVAILABLE, ChatSettings, create_chat_app
from memorist.llm.testing import ScriptedLLM
from memorist.roles.llm import LLMExtractor
from memorist.server import KeyStore

MEMORY_URL = "http://memory.test/api/memories"


@pytest.fixture
def keys(tmp_path):
    db = str(tmp_path / "chat.db")
    with KeyStore(db) as store:
        alice, bob = store.create("school", user_id="alice")[0], store.create("school", user_id="bob")[0]
    return db, {"Authorization": f"Bearer {alice}"}, {"Authorization": f"Bearer {bob}"}


def chat(db: str, handler=None, **kwargs) -> TestClient:
    settings = ChatSettings(memory_url=MEMORY_URL, memory_api_key="k", memory_timeout=2.0, rate_per_minute=0)
    transport = httpx.MockTransport(handler) if handler else None
    return TestClient(create_chat_app(db, settings=settings, embedder="hashing", llm=None, memory_transport=transport, **kwargs),
                      raise_server_exceptions=False)


FRACTIONS = "How do I add fractions with different denominators, like 1/4 + 1/6?"


def _counts(client: TestClient) -> dict[str, tuple[int, int]]:
    playbook = client.app.state.chat.tutor.playbook
    return {b.id: (b.helpful, b.harmful) for b in playbook.bullets("school/alice")}


def test_a_mark_counts_for_the_bullets_of_the_answer_it_was_given_on(keys):
    """Before, "Not helpful" on an answer about fractions, sent with the next message
    (about triangles), counted against the triangle bullets that message used."""
    db, alice, _ = keys
    with chat(db) as client:
        say = lambda body: client.post("/api/ai/chat", json=body, headers=alice).json()  # noqa: E731
        say({"message": "I get confused adding fractions with different denominators. Remind me that 1/2 becomes 3/6.",
             "feedback": "Converting fractions to a common denominator first helped!"})
        say({"message": "I struggle with the area of a triangle. Remind me it is half of base times height.",
             "feedback": "Drawing the triangle inside a rectangle helped!"})
        first = say({"message": FRACTIONS})
        fractions = first["metadata"]["scratch"]["injected_ids"]
        before = _counts(client)
        second = say({"message": "How do I find the area of a triangle?", "conversationId": first["conversationId"],
                      "outcome": "failure"})
        triangles = second["metadata"]["scratch"]["injected_ids"]
        assert fractions and triangles and not set(fractions) & set(triangles)
        after = _counts(client)
        assert second["metadata"]["outcome"]["bullets"] == fractions
        for bullet in fractions:
            assert after[bullet] == (before[bullet][0], before[bullet][1] + 1)
        for bullet in triangles:
            assert after[bullet] == before[bullet]

        # The conversation's last answer is marked on its own, once.
        marked = client.post("/api/ai/chat/outcome", json={"conversationId": first["conversationId"], "outcome": "success"},
                             headers=alice)
        assert marked.status_code == 200 and marked.json()["applied"] is True
        assert marked.json()["bullets"] == triangles
        for bullet in triangles:
            assert _counts(client)[bullet] == (after[bullet][0] + 1, after[bullet][1])
        again = client.post("/api/ai/chat/outcome", json={"conversationId": first["conversationId"], "outcome": "success"},
                            headers=alice)
        assert again.json()["applied"] is False and _counts(client)[triangles[0]] == (after[triangles[0]][0] + 1, after[triangles[0]][1])


def test_a_mark_cannot_reach_another_users_conversation(keys):
    db, alice, bob = keys
    with chat(db) as client:
        client.post("/api/ai/chat", json={"message": "I get confused with fractions.", "feedback": "Pizza slices helped!"},
                    headers=alice)
        answer = client.post("/api/ai/chat", json={"message": "How do fractions work?"}, headers=alice).json()
        body = {"conversationId": answer["conversationId"], "outcome": "failure"}
        refused = client.post("/api/ai/chat/outcome", json=body, headers=bob)
        assert refused.status_code == 404 and refused.json()["error"]["field"] == "conversationId"
        assert client.post("/api/ai/chat/outcome", json=body, headers=alice).json()["applied"] is True  # alice's to mark


def test_a_message_of_nothing_visible_is_refused_before_its_conversation_is_claimed(keys):
    """Before, a zero-width space was refused naming "query", after the conversation
    id had been claimed: another user got 404 on it."""
    db, alice, bob = keys
    with chat(db) as client:
        refused = client.post("/api/ai/chat", json={"message": "\u200b", "conversationId": "shared-room"}, headers=alice)
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "message"
        taken = client.post("/api/ai/chat", json={"message": "Hello, I need help with fractions", "conversationId": "shared-room"},
                            headers=bob)
        assert taken.status_code == 200 and taken.json()["conversationId"] == "shared-room"


def test_a_save_that_fails_partway_says_what_was_remembered(keys):
    """Before, the first fact was stored, then the reply said "this turn was not
    remembered" and listed nothing."""
    db, alice, _ = keys
    adds: list[str] = []

    def memory_service(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/search/"):
            return httpx.Response(200, json={"results": []})
        adds.append(request.content.decode())
        if len(adds) == 2:
            raise httpx.ConnectError("memory service went away", request=request)
        return httpx.Response(200, json={"results": [{"id": f"m{len(adds)}", "memory": "Is vegetarian", "event": "ADD"}]})

    extractor = LLMExtractor(ScriptedLLM(default={"facts": [{"text": "Is vegetarian"}, {"text": "Allergic to peanuts"},
                                                            {"text": "Lives in Oslo"}]}))
    with chat(db, memory_service, extractor=extractor) as client:
        out = client.post("/api/ai/chat", json={"message": "I'm a vegetarian from Oslo, allergic to peanuts.", "memoryEnabled": True},
                          headers=alice).json()
    memory = out["metadata"]["memory"]
    assert memory["status"] == "partial" and "only part of it was remembered" in memory["message"]
    assert [m["memory"] for m in memory["added"]] == ["Is vegetarian"]
    assert out["response"].endswith(f"({memory['message']})") and UNAVAILABLE not in out["response"]


def test_a_memory_service_answering_unreadable_rows_is_unavailable_not_an_error(keys):
    """Before, a search row without created_at made the message a 500."""
    db, alice, _ = keys
    row = {"id": "x", "memory": "Likes pizza", "score": 0.9, "metadata": {}, "user_id": "school/alice", "agent_id": "chat"}
    with chat(db, lambda request: httpx.Response(200, json={"results": [row]})) as client:
        answered = client.post("/api/ai/chat", json={"message": "What is 2+2?", "memoryEnabled": True}, headers=alice)
    assert answered.status_code == 200, answered.text
    assert answered.json()["metadata"]["memory"]["status"] == "unavailable"
    assert answered.json()["response"] == f"2+2 = 4\n\n({UNAVAILABLE})"


def test_a_mark_the_playbook_could_not_take_stays_to_be_marked_again(keys, monkeypatch):
    """The playbook's store failing under a mark failed the message it came with, and
    the answer's mark was used up."""
    from memorist.ace.playbook import PlaybookTurn
    from memorist.errors import StoreError

    db, alice, _ = keys
    with chat(db) as client:
        first = client.post("/api/ai/chat", json={"message": FRACTIONS}, headers=alice).json()
        learn = PlaybookTurn.learn

        def failing(self, *args, **kwargs):
            if kwargs.get("question") == "":  # the mark's learning, not a turn's
                raise StoreError("the store is busy")
            return learn(self, *args, **kwargs)

        monkeypatch.setattr(PlaybookTurn, "learn", failing)
        refused = client.post("/api/ai/chat/outcome", json={"conversationId": first["conversationId"], "outcome": "success"},
                              headers=alice)
        assert refused.status_code == 200 and refused.json()["applied"] is False and "busy" in refused.json()["error"]
        monkeypatch.setattr(PlaybookTurn, "learn", learn)
        again = client.post("/api/ai/chat/outcome", json={"conversationId": first["conversationId"], "outcome": "success"},
                            headers=alice)
        assert again.json()["applied"] is True


def test_erasing_a_learner_takes_their_conversations_last_answer_from_the_chats_file(keys):
    """The chat keeps a conversation's last question and answer, to be marked, in its
    own file: an erasure of the learner left them there (and in the file's pages)."""
    import sqlite3
    from pathlib import Path

    from memorist import Memory

    db, alice, bob = keys
    with chat(db) as client:
        for headers, words in ((alice, "Vrendalquist"), (bob, "Quorbleton")):
            assert client.post("/api/ai/chat", json={"message": f"I failed my {words} exam, explain derivatives",
                                                     "memoryEnabled": False}, headers=headers).status_code == 200
    with Memory(db, embedder="hashing") as memory:
        memory.erase(user_id="school/alice")
    with sqlite3.connect(db) as conn:
        assert [row[0] for row in conn.execute("SELECT learner FROM chat_conversations")] == ["school/bob"]
    data = b"".join(Path(name).read_bytes() for name in (db, db + "-wal") if Path(name).exists())
    assert b"Vrendalquist" not in data and b"Quorbleton" in data


def test_conversations_kept_before_their_learner_was_recorded_are_erased_with_them(tmp_path):
    import sqlite3

    from memorist import Memory
    from memorist.agent.conversations import Conversations

    db = str(tmp_path / "old.db")
    Memory(db, embedder="hashing").close()  # the chat's store, with its table as an older chat made it
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE chat_conversations (conversation_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                     "created_at REAL NOT NULL, updated_at REAL NOT NULL, turns INTEGER NOT NULL DEFAULT 0, last_answer TEXT)")
        conn.executemany("INSERT INTO chat_conversations VALUES (?, ?, 0, 0, 1, ?)",
                         [("c1", "school\x1falice", '{"question": "secret"}'), ("c2", "\x1fdefault", "{}"), ("c3", "a/b\x1fcarol", "{}")])
    Conversations(db).close()
    with sqlite3.connect(db) as conn:
        assert dict(conn.execute("SELECT conversation_id, learner FROM chat_conversations")) == {
            "c1": "school/alice", "c2": "default", "c3": "a%2Fb/carol"}
    with Memory(db, embedder="hashing") as memory:
        memory.erase(user_id="school/alice")
    with sqlite3.connect(db) as conn:
        assert [row[0] for row in conn.execute("SELECT conversation_id FROM chat_conversations ORDER BY 1")] == ["c2", "c3"]


def test_an_erasure_in_another_tenant_leaves_the_chats_learner_of_that_id(tmp_path):
    """The chat's learners are users of its own memory's tenant: an erasure of "alice"
    in another tenant of the file deleted the chat learner "alice"'s conversations."""
    import sqlite3

    from memorist import Memory
    from memorist.agent.conversations import Conversations

    db = str(tmp_path / "chat.db")
    Memory(db, embedder="hashing").close()
    conversations = Conversations(db)
    conversations.claim("\x1falice", "c1", learner="alice")
    conversations.close()
    with Memory(db, embedder="hashing", tenant_id="club") as club:
        club.erase(user_id="alice")
    with sqlite3.connect(db) as conn:
        assert [row[0] for row in conn.execute("SELECT conversation_id FROM chat_conversations")] == ["c1"]
    with Memory(db, embedder="hashing") as own:
        own.erase(user_id="alice")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM chat_conversations").fetchone()[0] == 0

