"""API keys of the memory service, kept in the store's own database.

A key is ``ek_<key id>_<secret>``: the key id (8 lowercase letters and digits)
names it in lists, logs and ``memorist keys revoke``; the secret (43 URL-safe
characters, 256 random bits) is shown once, by :meth:`KeyStore.create`, and never
stored. The table ``api_keys`` holds the SHA-256 of the whole key: a key this
random needs no slow password hash, and a copy of the database (a backup, say)
gives nobody a usable key. A presented key is looked up by its id and its hash
compared in constant time. A key may be bound to a user and/or an agent: the
service acts as that subject (:class:`memorist.server.deps.Reach`).

The table lives beside Memorist's own tables. In a SQLite file it is created if
missing, on the :class:`KeyStore`'s own connection; ``memorist check`` ignores tables
it does not know, and a backup copies it with the rest. In PostgreSQL it is part of
Memorist's schema (:mod:`memorist.store.postgres.schema`), so every ``memorist serve`` process
on the database shares the keys; the :class:`KeyStore` reads it through its own
small connection pool. A table made before keys could bind an agent gains its
``agent_id`` column when a :class:`KeyStore` first opens it (either backend): the keys
it holds keep working, bound to no agent.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sqlite3
import string
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import validate
from ..errors import MemoristError, NotFoundError, StoreError, ValidationError
from ..store import redact, store_kind

PREFIX = "ek"
_ID_CHARS = 8
_ID_ALPHABET = string.ascii_lowercase + string.digits
_SECRET_BYTES = 32  # 43 URL-safe characters
_MAX_KEY_CHARS = 200
_USAGE_FLUSH_SECONDS = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id       TEXT PRIMARY KEY,
    key_hash     TEXT NOT NULL,
    tenant_id    TEXT NOT NULL,
    user_id      TEXT,
    label        TEXT NOT NULL DEFAULT '',
    created_at   REAL NOT NULL,
    revoked_at   REAL,
    last_used_at REAL,
    agent_id     TEXT
)
"""
#: A key table made before keys could bind an agent gains the column (NULL: no agent).
_ADD_AGENT = "ALTER TABLE api_keys ADD COLUMN agent_id TEXT"
_COLUMNS = "key_id, tenant_id, user_id, label, created_at, revoked_at, last_used_at, agent_id"


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def hash_key(key: str) -> str:
    """The SHA-256 (hex) under which a key is stored."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_id_of(key: str) -> str | None:
    """The key id of ``ek_<id>_<secret>``, or None if ``key`` does not have that form."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or len(parts[1]) != _ID_CHARS or not parts[2]:
        return None
    return parts[1]


@dataclass(frozen=True, slots=True)
class ApiKey:
    """What the store knows of a key (never its secret)."""

    key_id: str
    tenant_id: str
    user_id: str | None
    label: str
    created_at: float
    revoked_at: float | None = None
    last_used_at: float | None = None
    agent_id: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_item(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "label": self.label,
            "active": self.active,
            "created_at": _iso(self.created_at),
            "revoked_at": _iso(self.revoked_at),
            "last_used_at": _iso(self.last_used_at),
        }


class _Duplicate(Exception):
    """The key id is taken already."""


class _Busy(Exception):
    """Another writer held the table longer than a best-effort write waits."""


class _SQLiteKeys:
    """The table in a SQLite file, on one connection (writes take the file's lock)."""

    def __init__(self, path: str, busy_timeout: float) -> None:
        self.label = path
        self.busy_timeout = busy_timeout
        if path != ":memory:":
            self._ensure_memorist_store(path, busy_timeout)
        try:
            self._conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
            self._conn.execute(_SCHEMA)
            columns = {row[1] for row in self._conn.execute("PRAGMA table_info(api_keys)")}
            if "agent_id" not in columns:
                self._add_agent_column()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the API keys of {path}: {exc}") from exc

    def _add_agent_column(self) -> None:
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                columns = {row[1] for row in self._conn.execute("PRAGMA table_info(api_keys)")}
                if "agent_id" not in columns:  # another process may have added it meanwhile
                    self._conn.execute(_ADD_AGENT)
        except sqlite3.OperationalError as exc:
            raise StoreError(f"cannot add the agent column to the API keys of {self.label}: {exc}") from exc

    @staticmethod
    def _ensure_memorist_store(path: str, busy_timeout: float) -> None:
        """Make the file a Memorist store first: the store refuses a SQLite file that
        holds tables but no Memorist schema, so ``api_keys`` must never come first."""
        from ..store.sqlite import SQLiteStore

        if os.path.isfile(path):
            conn = sqlite3.connect(path, timeout=busy_timeout)
            try:
                known = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()[0]
            except sqlite3.Error as exc:
                raise StoreError(f"{path} is not a readable SQLite database: {exc}") from exc
            finally:
                conn.close()
            if known:
                return
        Path(path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        SQLiteStore(path, busy_timeout=busy_timeout).close()

    def read(self, sql: str, args: tuple[Any, ...], action: str) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot {action} in {self.label}: {exc}") from exc

    def write(self, sql: str, rows: list[tuple[Any, ...]], action: str, *, best_effort: bool = False) -> None:
        """``sql`` once per row, in one transaction."""
        if best_effort:
            self._conn.execute("PRAGMA busy_timeout = 100")
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(sql, rows)
        except sqlite3.IntegrityError as exc:
            raise _Duplicate from exc
        except sqlite3.Error as exc:
            if best_effort:
                raise _Busy from exc
            raise StoreError(f"cannot {action} in {self.label}: {exc}") from exc
        finally:
            if best_effort:
                self._conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")

    def close(self) -> None:
        self._conn.close()


class _PostgresKeys:
    """The table in a PostgreSQL store, through a small pool of its own."""

    def __init__(self, url: str) -> None:
        # Through the store's module: without the postgres extra, its error names it.
        from ..store.postgres import store as postgres

        self._errors = postgres.psycopg.Error
        self._unique = postgres.psycopg.errors.UniqueViolation
        self._store = postgres.PostgresStore(url, pool_size=2)  # creates the schema, the table with it
        self.label = self._store.label
        self._add_agent_column()

    def _add_agent_column(self) -> None:
        """A key table made before keys could bind an agent gains the column. Looked up
        first: ALTER TABLE would lock the table even when the column is there."""
        present = "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() " \
                  "AND table_name = 'api_keys' AND column_name = 'agent_id'"
        if self.read(present, (), "read the API keys' columns"):
            return
        with self._store.connection() as conn, conn.transaction():
            conn.execute('ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS agent_id TEXT COLLATE "C"')

    def read(self, sql: str, args: tuple[Any, ...], action: str) -> list[tuple[Any, ...]]:
        try:
            with self._store.connection() as conn:
                return conn.execute(sql.replace("?", "%s"), args).fetchall()
        except MemoristError:
            raise
        except self._errors as exc:
            raise self._store.error(exc, action) from exc

    def write(self, sql: str, rows: list[tuple[Any, ...]], action: str, *, best_effort: bool = False) -> None:
        try:
            with self._store.connection() as conn, conn.transaction():
                if best_effort:
                    conn.execute("SET LOCAL lock_timeout = 100")
                with conn.cursor() as cur:
                    cur.executemany(sql.replace("?", "%s"), rows)
        except MemoristError:
            raise
        except self._unique as exc:
            raise _Duplicate from exc
        except self._errors as exc:
            if best_effort:
                raise _Busy from exc
            raise self._store.error(exc, action) from exc

    def close(self) -> None:
        self._store.close()


class KeyStore:
    """The ``api_keys`` table of the store at ``path``: a SQLite file (``":memory:"``:
    a throwaway one) or a ``postgresql://`` URL.

    Thread-safe. Lookups are one indexed read; the time a key was last used is
    kept in memory and written at most every 30 seconds (and on :meth:`close`),
    best effort: a busy store skips the write rather than wait for it.
    """

    def __init__(self, path: str, *, busy_timeout: float = 30.0) -> None:
        self.busy_timeout = busy_timeout
        kind = store_kind(path)
        self._db: _SQLiteKeys | _PostgresKeys
        if kind == "postgresql":
            self._db = _PostgresKeys(path)
        else:
            from ..store import sqlite_path

            self._db = _SQLiteKeys(os.fspath(sqlite_path(path)), busy_timeout)
        #: The store as messages show it (a URL without its password).
        self.path = redact(path) if kind == "postgresql" else path
        self._lock = threading.Lock()
        self._used: dict[str, float] = {}
        self._flushed_at = time.monotonic()

    # keys -----------------------------------------------------------------------------
    def create(self, tenant_id: str, *, user_id: str | None = None, agent_id: str | None = None,
               label: str = "") -> tuple[str, ApiKey]:
        """A new key of ``tenant_id`` (bound to ``user_id`` and/or ``agent_id`` when given:
        it acts as that subject).

        Returns the key itself, which is stored nowhere, and its record."""
        tenant = validate.scope_id("tenant_id", tenant_id)
        if not tenant:
            raise ValidationError("tenant_id", "must not be empty")
        user = validate.scope_id("user_id", user_id)
        agent = validate.scope_id("agent_id", agent_id)
        if not isinstance(label, str) or len(label) > 200:
            raise ValidationError("label", "must be a string of at most 200 characters")
        validate.unicode("label", label)
        for _ in range(5):
            key_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_CHARS))
            key = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(_SECRET_BYTES)}"
            record = ApiKey(key_id, tenant, user, label, time.time(), agent_id=agent)
            try:
                with self._lock:
                    self._db.write(
                        "INSERT INTO api_keys (key_id, key_hash, tenant_id, user_id, agent_id, label, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(key_id, hash_key(key), tenant, user, agent, label, record.created_at)],
                        "store the new key",
                    )
            except _Duplicate:  # a key id taken already: draw again
                continue
            return key, record
        raise StoreError("could not draw an unused key id")  # pragma: no cover (36**8 ids)

    def list(self, *, include_revoked: bool = True) -> list[ApiKey]:
        """Every key, oldest first (without the revoked ones unless ``include_revoked``)."""
        sql = f"SELECT {_COLUMNS} FROM api_keys"
        if not include_revoked:
            sql += " WHERE revoked_at IS NULL"
        with self._lock:
            rows = self._read(sql + " ORDER BY created_at, key_id")
        return [ApiKey(*row) for row in rows]

    def get(self, key_id: str) -> ApiKey:
        """The key ``key_id`` (or the key id of a whole key); NotFoundError if unknown."""
        ident = key_id_of(key_id) or key_id
        with self._lock:
            rows = self._read(f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = ?", (ident,))
        if not rows:
            raise NotFoundError("API key", ident)
        return ApiKey(*rows[0])

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key (from its next request on); revoking twice changes nothing."""
        record = self.get(key_id)
        if not record.active:
            return record
        now = time.time()
        with self._lock:
            self._db.write(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", [(now, record.key_id)], "revoke the key"
            )
        return self.get(record.key_id)

    def has_active_keys(self) -> bool:
        with self._lock:
            return bool(self._read("SELECT EXISTS (SELECT 1 FROM api_keys WHERE revoked_at IS NULL)")[0][0])

    def authenticate(self, presented: str) -> ApiKey | None:
        """The active key ``presented`` is, or None (unknown, malformed or revoked)."""
        if not isinstance(presented, str) or len(presented) > _MAX_KEY_CHARS:
            return None
        key_id = key_id_of(presented)
        if key_id is None:
            return None
        with self._lock:
            rows = self._read(f"SELECT {_COLUMNS}, key_hash FROM api_keys WHERE key_id = ?", (key_id,))
        if not rows:
            return None
        *fields, stored = rows[0]
        if not hmac.compare_digest(hash_key(presented), stored):
            return None
        record = ApiKey(*fields)
        if not record.active:
            return None
        with self._lock:
            self._used[key_id] = time.time()
        return record

    # bookkeeping ------------------------------------------------------------------------
    def usage_due(self) -> bool:
        """Whether :meth:`flush_usage` has something to write and its time has come."""
        return bool(self._used) and time.monotonic() - self._flushed_at >= _USAGE_FLUSH_SECONDS

    def flush_usage(self) -> None:
        """Write when keys were last used. Best effort: skipped if the store is busy."""
        with self._lock:
            self._flushed_at = time.monotonic()
            used, self._used = self._used, {}
            if not used:
                return
            try:
                self._db.write(
                    # COALESCE/CASE, not max(): the same statement in SQLite and PostgreSQL.
                    "UPDATE api_keys SET last_used_at = CASE WHEN COALESCE(last_used_at, 0) > ? "
                    "THEN last_used_at ELSE ? END WHERE key_id = ?",
                    [(at, at, key_id) for key_id, at in used.items()],
                    "record key use",
                    best_effort=True,
                )
            except (_Busy, StoreError):
                for key_id, at in used.items():  # try again next time
                    self._used.setdefault(key_id, at)

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._db.read(sql, args, "read the API keys")

    def close(self) -> None:
        if getattr(self, "_db", None) is None:
            return
        self.flush_usage()
        with self._lock:
            self._db.close()
            self._db = None  # type: ignore[assignment]

    def __enter__(self) -> KeyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ApiKey", "KeyStore", "hash_key", "key_id_of"]
