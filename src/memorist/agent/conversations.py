"""Who owns which conversation of the chat service: one small table beside the
chat's own store (as the API keys are), so ownership survives a restart.

A conversation belongs to the key's user that started it; asking for it with
another user's key answers exactly as an unknown conversation would. The table also
keeps the conversation's last answer (the playbook bullets it used, its question and
text), until the learner marks it "Helpful" or "Not helpful": the mark is credited to
the bullets that answer used, which only the chat knows, so no caller can name others.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from typing import Any

from ..errors import ConfigurationError, NotFoundError, ValidationError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chat_conversations (
    conversation_id TEXT PRIMARY KEY,
    owner           TEXT NOT NULL,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    turns           INTEGER NOT NULL DEFAULT 0,
    last_answer     TEXT,
    learner         TEXT,
    tenant          TEXT
)
"""
MAX_ID_CHARS = 128


def learner_of(tenant_id: str, user_id: str) -> str:
    """The learner id of a key's ``tenant_id`` and ``user_id`` (:attr:`memorist.agent.chat.ChatUser.learner_id`):
    the user of the tutor's playbooks and of the facts, ``school/alice``; "%" and "/"
    in a tenant id are escaped, so no two callers share an id."""
    if not tenant_id:
        return user_id
    return f"{tenant_id.replace('%', '%25').replace('/', '%2F')}/{user_id}"


def _learner_of_owner(owner: str) -> str:
    """The learner of a conversation's ``owner``, "tenant\x1fuser" (ChatUser.owner)."""
    tenant, mark, user = owner.partition("\x1f")
    return learner_of(tenant, user) if mark else owner


class Conversations:
    """The conversations table of the SQLite file ``path`` (``":memory:"`` for a throwaway)."""

    def __init__(self, path: str, *, busy_timeout: float = 30.0, tenant: str = "") -> None:
        """``tenant``: the tenant of the chat's memory in this file (the learners' playbooks):
        an erasure of a learner in that tenant deletes their conversations."""
        if "://" in path:
            raise ConfigurationError(f"memorist chat keeps its conversations in a SQLite file, not at {path.split('://')[0]}:// URLs")
        self._lock = threading.Lock()
        self.tenant = tenant
        self._db = sqlite3.connect(path, timeout=busy_timeout, check_same_thread=False, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        self._db.execute(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(chat_conversations)")}
        if "last_answer" not in columns:  # a store made before the chat kept it
            self._db.execute("ALTER TABLE chat_conversations ADD COLUMN last_answer TEXT")
        for column in ("learner", "tenant"):  # nor whose learner a row is: an erasure of the learner deletes it
            if column not in columns:
                self._db.execute(f"ALTER TABLE chat_conversations ADD COLUMN {column} TEXT")
        with self._lock:  # one statement, whatever the rows
            self._db.create_function("learner_of_owner", 1, _learner_of_owner, deterministic=True)
            self._db.execute("UPDATE chat_conversations SET learner = COALESCE(learner, learner_of_owner(owner)), "
                             "tenant = COALESCE(tenant, ?) WHERE learner IS NULL OR tenant IS NULL", (tenant,))

    def claim(self, owner: str, conversation_id: str | None, *, learner: str) -> str:
        """The conversation ``conversation_id`` of ``owner`` (the learner ``learner``,
        whose erasure deletes it): started now if unknown (a new id when None);
        :class:`~memorist.errors.NotFoundError` if another owner's."""
        if conversation_id is None:
            conversation_id = uuid.uuid4().hex
        elif (not isinstance(conversation_id, str) or not conversation_id.strip() or len(conversation_id) > MAX_ID_CHARS
              or any(ord(c) < 32 for c in conversation_id)):
            raise ValidationError("conversationId", f"must be a non-empty string of at most {MAX_ID_CHARS} printable characters")
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO chat_conversations (conversation_id, owner, created_at, updated_at, learner, tenant) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, owner, now, now, learner, self.tenant),
            )
            row = self._db.execute("SELECT owner FROM chat_conversations WHERE conversation_id = ?", (conversation_id,)).fetchone()
            if row[0] != owner:
                raise NotFoundError("conversation", conversation_id)
            self._db.execute("UPDATE chat_conversations SET updated_at = ?, turns = turns + 1 WHERE conversation_id = ?", (now, conversation_id))
        return conversation_id

    def set_answer(self, owner: str, conversation_id: str, answer: dict[str, Any]) -> None:
        """Keep ``answer`` (a JSON object) as the conversation's last answer, the one a
        mark is about, in place of the one before."""
        with self._lock:
            self._db.execute("UPDATE chat_conversations SET last_answer = ? WHERE conversation_id = ? AND owner = ?",
                             (json.dumps(answer), conversation_id, owner))

    def take_answer(self, owner: str, conversation_id: str) -> dict[str, Any] | None:
        """The conversation's last answer, once: a second mark of the same answer finds
        None (the first one counted). :class:`~memorist.errors.NotFoundError` if the
        conversation is unknown or another owner's."""
        with self._lock:
            row = self._db.execute("SELECT owner, last_answer FROM chat_conversations WHERE conversation_id = ?",
                                   (conversation_id,)).fetchone()
            if row is None or row[0] != owner:
                raise NotFoundError("conversation", conversation_id)
            if row[1] is None:
                return None
            self._db.execute("UPDATE chat_conversations SET last_answer = NULL WHERE conversation_id = ?", (conversation_id,))
        answer = json.loads(row[1])
        return answer if isinstance(answer, dict) else None

    def close(self) -> None:
        with self._lock:
            self._db.close()


__all__ = ["MAX_ID_CHARS", "Conversations", "learner_of"]
