"""The embedded SQLite backend: one file, WAL, real transactions.

Durability: every committed transaction's log is fsynced before the write returns
(by Memorist right after the commit, outside the write lock: see
:mod:`memorist.store.sqlite.checkpoint`), so a write that returned survives a crash
or power loss. Retrieval bookkeeping (the
access clock and per-memory touches) is the one exception: it is buffered and
written with the next write transaction, on :meth:`close`, or every few dozen
searches, because making every search an fsynced write would cost more than the
search itself; a crash loses at most that buffer, never a memory.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigurationError, CorruptStoreError, EmbedderMismatchError, MemoristError, StoreError
from ...model import EventRecord, MemoryRecord, RelationTuple, Scope, Status
from ...policies.filters import Narrowing
from ...policies.text import index_terms, query_terms, stable_token
from ...work import charge
from ..base import TOMBSTONE, Batch, Erased, ScopeFilter, Store, holds_text_of, upgraded_message, version_of
from ..codec import (
    AT,
    COLUMNS,
    FROM_MEMORIES,
    dumps,
    record_values,
    row_to_record,
    scope_key,
    speaker_of,
    stored_row,
)
from ..gate import SearchGate
from ..sql import (
    SQLITE_JSON,
    TURN_NAMED,
    USERS_SQL,
    JsonDialect,
    active_hash_sql,
    changed_by_run_sql,
    consolidated_into_sql,
    event_scope_where,
    lineage_changed_by_run_sql,
    narrowed_ids_sql,
    relation_delete_sql,
    relation_insert_sql,
    relation_payload,
    relation_row,
    relations_sql,
    scope_where,
    stats_scope,
    user_counts_sql,
    validity_where,
    with_consolidations,
)
from ..touches import FLUSH_EVERY, FLUSH_WAIT, TouchBuffer
from ..vector_index import Row, SpaceIndex, TextStats
from .check import connect_reader
from .checkpoint import BACKSTOP_PAGES, Checkpointer, LogSync
from .errors import backoff, is_busy, is_corrupt
from .index import NAMED_SINCE, IndexCache, index_entry, last_seq, log_reaches
from .schema import APPEND_ONLY, MIGRATIONS, SCHEMA_VERSION

log = logging.getLogger(__name__)
#: How many idle connections for long reads a store keeps open (see SQLiteStore._reader).
_IDLE_READERS = 4
#: A listing of at most this many rows is read under the store's lock; a longer
#: one (or one without a limit) on a connection of its own (see SQLiteStore._rows).
_SHORT_READ = 500
#: A scan of the rows for a filter (narrowed_ids) counts _SCAN_UNITS units of work
#: every _SCAN_STEPS steps of SQLite's machine (about 10 steps a row and condition:
#: a unit is a record read, about 40 times a row's check in SQL).
_SCAN_STEPS = 1000
_SCAN_UNITS = 4


class _SQLiteBatch(Batch):
    def __init__(self, store: SQLiteStore, conn: sqlite3.Connection) -> None:
        self._store = store
        self._conn = conn
        self.touched_spaces: set[int] = set()
        self._space_ids: dict[tuple[str, str, str], int] = {}
        # What the in-process vector indexes must learn once the commit succeeded.
        self.index_upserts: dict[int, list[Row]] = {}
        self.index_removals: dict[int, list[str]] = {}
        self.last_seq = 0  # the last event this transaction appended
        self.identity_dim = 0  # the vector dimension whose embedder this transaction checked

    def _space(self, scope: Scope) -> int:
        space = self._space_ids.get(scope.space)
        if space is None:
            space = self._store._space_id(self._conn, scope, create=True)
            assert space is not None
            self._space_ids[scope.space] = space
        if space not in self.touched_spaces:
            self.touched_spaces.add(space)
            self._conn.execute("UPDATE spaces SET generation = generation + 1 WHERE id = ?", (space,))
        return space

    def _append(self, op: str, space: int | None, scope: Scope, memory_id: str | None, old: str | None, new: str | None, actor: str, payload: dict[str, Any] | None) -> int:
        cur = self._conn.execute(
            "INSERT INTO events (ts, op, space_id, memory_id, run_id, actor, old_text, new_text, payload) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (time.time(), op, space, memory_id, scope.run_id, actor, old, new, dumps(payload or {})),
        )
        self.last_seq = int(cur.lastrowid or 0)
        return self.last_seq

    def _index_row(self, space: int, record: MemoryRecord, vector: np.ndarray | None, rowid: int | None = None, values: dict[str, Any] | None = None) -> None:
        """Write the vector (when given) and queue the row for the in-process index.

        Without a new vector the stored one is kept, so an edit of the text alone
        still refreshes the row's BM25 terms and times.
        """
        if rowid is None:
            rowid = self._conn.execute("SELECT rowid FROM memories WHERE id = ?", (record.id,)).fetchone()[0]
        if vector is not None:
            vector = np.ascontiguousarray(vector, dtype=np.float32)
            if self.identity_dim != vector.shape[0]:  # once a transaction: another process may have re-embedded since the last
                self._store._record_identity(self._conn, vector.shape[0])
                self.identity_dim = vector.shape[0]
            self._conn.execute(
                "INSERT OR REPLACE INTO embeddings (memory_rowid, space_id, vector) VALUES (?, ?, ?)",
                (rowid, space, vector.tobytes()),
            )
        else:
            stored = self._conn.execute("SELECT vector FROM embeddings WHERE memory_rowid = ?", (rowid,)).fetchone()
            vector = np.frombuffer(stored[0], dtype=np.float32) if stored else None
        row = index_entry(stored_row(record, values), vector, speaker_of(record.metadata))
        self.index_upserts.setdefault(space, []).append(row)

    def add(self, record: MemoryRecord, vector: np.ndarray | None, *, actor: str = "", payload: dict[str, Any] | None = None) -> None:
        space = self._space(record.scope)
        values = record_values(record)
        values["space_id"] = space
        cols = ", ".join(values)
        marks = ", ".join(f":{c}" for c in values)
        try:
            cur = self._conn.execute(f"INSERT INTO memories ({cols}) VALUES ({marks})", values)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"memory id already exists: {record.id!r}") from exc
        if record.status is Status.ACTIVE:
            self._index_row(space, record, vector, cur.lastrowid, values)
        self._append("add", space, record.scope, record.id, None, record.text, actor, payload)

    def update(self, record: MemoryRecord, vector: np.ndarray | None, *, old_text: str, op: str = "update", actor: str = "", payload: dict[str, Any] | None = None) -> None:
        space = self._space(record.scope)
        values = record_values(record)
        values["space_id"] = space
        assignments = ", ".join(f"{c} = :{c}" for c in values if c != "id")
        cur = self._conn.execute(f"UPDATE memories SET {assignments} WHERE id = :id", values)
        if cur.rowcount != 1:
            raise StoreError(f"memory not found for update: {record.id!r}")
        if record.status is not Status.ACTIVE:
            self._drop_vector(space, record.id)
        else:
            self._index_row(space, record, vector, values=values)
        self._append(op, space, record.scope, record.id, old_text, record.text, actor, payload)

    def _drop_vector(self, space: int, memory_id: str) -> None:
        self._conn.execute(
            "DELETE FROM embeddings WHERE memory_rowid = (SELECT rowid FROM memories WHERE id = ?)",
            (memory_id,),
        )
        self.index_removals.setdefault(space, []).append(memory_id)

    def delete(self, record: MemoryRecord, *, op: str = "delete", actor: str = "", payload: dict[str, Any] | None = None) -> None:
        space = self._space(record.scope)
        cur = self._conn.execute(
            "UPDATE memories SET status = 'deleted', updated_at = ? WHERE id = ? AND status != 'deleted'",
            (time.time(), record.id),
        )
        if cur.rowcount != 1:
            raise StoreError(f"memory not found for delete: {record.id!r}")
        self._drop_vector(space, record.id)
        self._append(op, space, record.scope, record.id, record.text, None, actor, payload)

    def find_active_hash(self, scope: Scope, content_hash: str) -> str | None:
        row = self._conn.execute(active_hash_sql(), (*scope.space, content_hash)).fetchone()
        return row[0] if row else None

    def event(self, op: str, scope: Scope, *, memory_id: str | None = None, old_text: str | None = None, new_text: str | None = None, actor: str = "", payload: dict[str, Any] | None = None) -> int:
        space = self._store._space_id(self._conn, scope, create=True)
        return self._append(op, space, scope, memory_id, old_text, new_text, actor, payload)

    def put_relation(self, tenant_id: str, relation: RelationTuple) -> bool:
        cur = self._conn.execute(relation_insert_sql(), (tenant_id, *relation_row(relation)))
        if cur.rowcount:
            self.event("relation_create", Scope(tenant_id, "", ""), actor="relations", payload=relation_payload(relation))
        return bool(cur.rowcount)

    def remove_relation(self, tenant_id: str, relation: RelationTuple) -> bool:
        cur = self._conn.execute(relation_delete_sql(), (tenant_id, *relation_row(relation)[:5]))
        if cur.rowcount:
            self.event("relation_delete", Scope(tenant_id, "", ""), actor="relations", payload=relation_payload(relation))
        return bool(cur.rowcount)

    # The store's reads run on this same connection, so inside the transaction they
    # see its uncommitted writes, and the write lock keeps every other writer out.
    def get_many(self, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        return self._store.get_many(memory_ids)  # always read: the transaction's own writes count

    def list_bullets(self, scope: ScopeFilter) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        return self._store.list_bullets(scope)

    def space_version(self, scope: Scope) -> int:
        return self._store.space_version(scope)

    def changes_since(self, scope: Scope, position: int) -> list[tuple[str, np.ndarray | None]] | None:
        # One writer per file: the log's order is its commit order.
        if log_reaches(self._conn, position) is None:
            return None
        space = self._store._space_id(self._conn, scope, create=False)
        if space is None:
            return []
        rows = self._conn.execute(
            f"SELECT m.id, m.status, e.vector FROM memories m LEFT JOIN embeddings e ON e.memory_rowid = m.rowid WHERE {NAMED_SINCE}",
            {"space": space, "s": position},
        ).fetchall()
        return [
            (mid, np.frombuffer(blob, dtype=np.float32) if status == "active" and blob is not None else None)
            for mid, status, blob in rows
        ]

    def advance_clock(self, scope: Scope, n: int = 1) -> int:
        space = self._store._space_id(self._conn, scope, create=True)
        if n:
            self._conn.execute("UPDATE spaces SET access_clock = access_clock + ? WHERE id = ?", (int(n), space))
        return int(self._conn.execute("SELECT access_clock FROM spaces WHERE id = ?", (space,)).fetchone()[0])


def _disk_size(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


# Waiting for another writer's lock (see SQLiteStore._begin): the first sleep, and
# the longest, between two looks at the lock.
_LOCK_POLL_FIRST = 0.001
_LOCK_POLL_CAP = 0.02
#: The page cache's ceiling per connection, in KiB (see __init__).
CACHE_KIB = 64 * 1024
#: Spaces a scope may span for its keyword ranking to be read from their in-process
#: indexes (which its vector ranking loads anyway); beyond, from the FTS5 index.
POOLED_SPACES = 64


def _store_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """Let no SQLite error (or undecodable row) out of a store read raw.

    A damaged file becomes :class:`CorruptStoreError`, anything else SQLite raises a
    :class:`StoreError` (see :meth:`SQLiteStore._error`). A stored value the
    decoders refuse (an unknown kind, a vector of a broken length) can only come
    from damage or a foreign writer: :class:`CorruptStoreError` too. Memorist's own
    errors pass unchanged, except a StoreError raised over a damaged file, which is
    made a CorruptStoreError.
    """
    return _translating(method, decode=True)


def _store_write_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """Like :func:`_store_errors` for maintenance writes, which run callers' code
    (an embedder, a progress callback): only SQLite's errors are translated."""
    return _translating(method, decode=False)


def _translating(method: Callable[..., Any], *, decode: bool) -> Callable[..., Any]:
    name = method.__name__.strip("_").replace("_", " ")
    decode_errors: tuple[type[BaseException], ...] = (KeyError, ValueError) if decode else ()

    @functools.wraps(method)
    def wrapper(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except CorruptStoreError:
            raise
        except StoreError as exc:
            if is_corrupt(exc):
                raise CorruptStoreError(f"{exc}; the file is damaged: run `memorist check`") from exc
            raise
        except MemoristError:
            raise
        except sqlite3.Error as exc:
            raise self._error(exc, name) from exc
        except AttributeError as exc:
            if getattr(self, "_conn", None) is None:  # close() dropped the connection
                raise StoreError(f"{self.path} is closed") from exc
            raise
        except UnicodeEncodeError as exc:  # an argument SQLite cannot take, not a stored row
            raise StoreError(f"{self.path}: {name} failed: {exc}") from exc
        except decode_errors as exc:
            raise CorruptStoreError(
                f"{self.path}: a stored row cannot be decoded in {name} ({type(exc).__name__}: {exc}); "
                "the file is damaged or was written by something else: run `memorist check`"
            ) from exc

    return wrapper


def _stored_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
    """Of ``ids``, those with a row in ``memories``."""
    found: set[str] = set()
    for start in range(0, len(ids), _SHORT_READ):
        part = ids[start:start + _SHORT_READ]
        marks = ",".join("?" * len(part))
        found.update(row[0] for row in conn.execute(f"SELECT id FROM memories WHERE id IN ({marks})", part))
    return found


#: Tables other parts of Memorist keep in a SQLite store's file (the chat's
#: conversations, with the learner's last question and answer), and the columns naming
#: the user and the tenant each row is of: an erasure of that user (no agent, no run) in
#: that tenant deletes its rows.
ERASED_BESIDE = (("chat_conversations", "learner", "tenant"),)


def _erase_beside(conn: sqlite3.Connection, owners: Sequence[ScopeFilter]) -> int:
    users = sorted({(o.tenant_id, o.user_id) for o in owners if o.user_id is not None and o.agent_id is None and o.run_id is None})
    deleted = 0
    for table, user_column, tenant_column in ERASED_BESIDE if users else ():
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is None:
            continue
        for tenant, user in users:
            deleted += conn.execute(f"DELETE FROM {table} WHERE {user_column} = ? AND COALESCE({tenant_column}, '') = ?",
                                    (user, tenant)).rowcount
    return deleted


def _erased_rows(owned: list[tuple[str, list[Any]]], changed_by_runs: Sequence[str]) -> Iterator[tuple[str, str, list[Any]]]:
    """What an erasure removes, as (the condition on ``memories``, on ``events``, their
    arguments): each owner's rows (:meth:`SQLiteStore._owned`), then the memories of
    ``changed_by_runs`` by id, 500 at a time."""
    for where, args in owned:
        yield where, where, args
    for start in range(0, len(changed_by_runs), 500):
        ids = list(changed_by_runs[start : start + 500])
        marks = ",".join("?" * len(ids))
        yield f"id IN ({marks})", f"memory_id IN ({marks})", ids


#: Seconds the interpreter's exit waits for a store's lock to write its index files.
_EXIT_WAIT = 5.0
#: Stores open in this process: those a script leaves open still write their large
#: scopes' index files when the interpreter exits (see _save_open_stores).
_OPEN: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()


@atexit.register
def _save_open_stores() -> None:
    """At the interpreter's exit, write the index files of the stores left open (a
    script that never calls ``close()``), as closing them would. Only the process
    that opened a store: a forked child must not use its parent's connection."""
    for store in list(_OPEN):
        # A thread still writing (or stuck waiting for another process's lock) must not
        # hold the exit up for long: its store then writes no file.
        if store._pid == os.getpid() and store._lock.acquire(timeout=_EXIT_WAIT):
            try:
                if getattr(store, "_conn", None) is not None and store._log_failed is None:
                    store._save_index_files()
            finally:
                store._lock.release()


class SQLiteStore(Store):
    """Memorist's default store: a single SQLite file (or ``":memory:"``)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0, index_files: bool = True) -> None:
        self.path = str(path) if str(path) == ":memory:" else str(Path(path).expanduser())
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float) or not 0 <= busy_timeout <= 86_400:
            raise ConfigurationError(f"busy_timeout must be seconds from 0 to 86400, got {busy_timeout!r}")
        #: Seconds a write waits for another connection's write lock before failing.
        self.busy_timeout = float(busy_timeout)
        if self.path != ":memory:":
            parent = Path(self.path).resolve().parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the store's folder {parent}: {exc}") from exc
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._bound: tuple[str, int] | None = None
        self._indexes = IndexCache(self.path, files=index_files)
        _OPEN.add(self)
        self._touches = TouchBuffer()
        self._checkpointer = Checkpointer(self.path) if self.path != ":memory:" else None
        self._log_sync: LogSync | None = None  # set once the file is known to be in WAL mode
        self._log_failed: StoreError | None = None  # a commit whose log could not be synced
        self._refused: str | None = None  # why this store takes no write (refuse_writes)
        # What reads learnt of the spaces table (ids and generations), valid while
        # nothing is committed: this connection's commits clear it, and SQLite's
        # data_version tells when another connection committed.
        self._space_cache: dict[tuple[str, str | None, str | None], list[tuple[int, int]]] = {}
        self._data_version = -1
        # Each thread's depth of reading() blocks: inside, the cache was checked once.
        self._reading = threading.local()
        self._gate = SearchGate()
        self._readers: list[sqlite3.Connection] = []  # idle connections for long reads (_reader)
        self._file = ""  # the database file's absolute path ("" in memory)
        try:
            # The busy timeout covers what waits inside SQLite (opening, reads during
            # another process's WAL recovery); writes wait in _begin.
            self._conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            # Check what the file is before changing anything in it: a foreign
            # database must be left exactly as it was.
            self.schema_version()
            # Switching a new file to WAL needs its exclusive lock, and SQLite does
            # not wait for it (the connection already reads): wait here.
            self._when_unlocked("PRAGMA journal_mode = WAL")
            database = self._conn.execute("SELECT file FROM pragma_database_list WHERE name = 'main'").fetchone()[0]
            # Where the file is, whatever the working directory becomes (connections
            # for long reads open it there; none in memory).
            self._file = database
            if database and self._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                # NORMAL syncs the log at checkpoints only; every commit's sync is
                # LogSync's, taken once the write lock is free (checkpoint.py).
                self._log_sync = LogSync(database)
                self._conn.execute("PRAGMA synchronous = NORMAL")
            else:  # no log of its own to sync (in memory, or a file system without WAL)
                self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            # Checkpoints are the thread's (checkpoint.py); this is the backstop.
            self._conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
            # Room for the index pages a large scope's writes touch (SQLite's default
            # is 2 MiB); a ceiling, filled only as pages are read.
            self._conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            if is_busy(exc):  # another process kept the file locked (creating it, say)
                raise self._error(exc, "open") from exc
            raise CorruptStoreError(f"{self.path} is not a readable Memorist store: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise

    # schema ----------------------------------------------------------------------
    def schema_version(self) -> int:
        # One statement, one snapshot: a process creating the store at this moment
        # must not be seen half-way (tables but no meta yet).
        has_meta, others = self._conn.execute(
            "SELECT count(*) FILTER (WHERE name = 'meta'), count(*) FROM sqlite_master WHERE type = 'table'"
        ).fetchone()
        if not has_meta:
            if others:
                raise CorruptStoreError(f"{self.path} is a SQLite database but not a Memorist store")
            return 0
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError as exc:  # a table named meta, not Memorist's
            raise CorruptStoreError(f"{self.path} is a SQLite database but not a Memorist store ({exc})") from exc
        return version_of(row[0], self.path) if row else 0

    def _migrate(self, target: int = SCHEMA_VERSION) -> None:
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise CorruptStoreError(
                f"{self.path} has schema version {current}, newer than this Memorist "
                f"understands ({SCHEMA_VERSION}); upgrade memorist"
            )
        for version in range(current + 1, target + 1):
            with self._write() as conn:
                # Another process opening the same new file may have migrated it
                # between the read above and this write lock.
                if self.schema_version() >= version:
                    continue
                # executescript would commit on its own; run statement by statement
                # so a failing migration rolls back whole.
                step = MIGRATIONS[version - 1]
                if callable(step):
                    step(conn)
                else:
                    for statement in _split_sql(step):
                        conn.execute(statement)
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(version),),
                )

    # transactions ----------------------------------------------------------------
    @contextmanager
    def _write(self, *, sync: bool = True, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction. Once it committed, its log is synced; if that
        fails, :class:`_Unflushed` (a :class:`StoreError`) is raised after the
        commit, and the store takes no further write (see checkpoint.py).

        ``sync=False``: left for the next write's sync (or a checkpoint, or the
        close) to put on disk; only for what a crash may lose anyway.
        ``wait=False``: SQLite's busy error at once if another connection holds
        the write lock, instead of waiting up to ``busy_timeout``."""
        with self._lock:
            self._require_open()
            if self._log_failed is not None:
                raise StoreError(f"{self._log_failed} Close the store and open it again to write.")
            if self._refused is not None:
                raise StoreError(f"{self.path} takes no write: {self._refused}")
            self._begin(wait=wait)
            try:
                self._not_upgraded()
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
            finally:
                # Reads inside the transaction may have cached what it changed.
                self._space_cache.clear()
            if self._checkpointer is not None:
                self._checkpointer.committed()
            # The write lock is free now: other writers go on during the sync.
            if sync:
                self._sync_log()

    def _not_upgraded(self) -> None:
        """Inside a write: refuse it, and every later one (:meth:`refuse_writes`), when
        a newer Memorist has migrated the store since this process opened it (one
        indexed read): it would write the old format."""
        version = self.schema_version()  # (0 while the store is being made: its first migration)
        if version > SCHEMA_VERSION:
            self._refused = upgraded_message(self.path, version, SCHEMA_VERSION)
            raise StoreError(self._refused)  # and every later write; reads go on, their bookkeeping dropped

    def _sync_log(self) -> None:
        if self._log_sync is None:
            return
        try:
            self._log_sync.sync()
        except OSError as exc:
            self._log_failed = _Unflushed(f"{self.path}: a write committed but its log could not be flushed to disk ({exc}).")
            raise self._log_failed from exc

    def _require_open(self) -> None:
        if getattr(self, "_conn", None) is None:
            raise StoreError(f"{self.path} is closed")

    def _begin(self, *, wait: bool = True) -> None:
        """``BEGIN IMMEDIATE``: take the write lock, waiting up to ``busy_timeout``.

        Not with SQLite's own busy handler: it sleeps longer and longer between
        looks at the lock (100 ms from the 12th on), so under steady contention
        (several processes importing in batches) a waiting writer rarely looks in
        the short gap between two transactions of another process and can be
        starved past any timeout, while the others take turns. Here a waiting
        writer looks again after short jittered sleeps growing from 1 ms to 20 ms:
        every waiter has about the same chance at each gap.
        """
        self._when_unlocked("BEGIN IMMEDIATE", wait=wait)

    def _when_unlocked(self, sql: str, *, wait: bool = True) -> None:
        """Run ``sql``, trying again while another connection holds the lock it
        needs, for up to ``busy_timeout`` (see :meth:`_begin`; only once without
        ``wait``)."""
        conn = self._conn
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            deadline = time.monotonic() + (self.busy_timeout if wait else 0.0)
            attempt = 0
            while True:
                try:
                    conn.execute(sql)
                    return
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc) or time.monotonic() >= deadline:
                        raise
                time.sleep(min(backoff(attempt, first=_LOCK_POLL_FIRST, cap=_LOCK_POLL_CAP), max(0.0, deadline - time.monotonic())))
                attempt += 1
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")

    def _rollback(self) -> None:
        """Undo the open transaction, if SQLite has not already (it does after some
        errors); a failing rollback must not hide the error that caused it."""
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _error(self, exc: BaseException, action: str) -> StoreError:
        """The Memorist error for a SQLite failure of ``action`` (a few words)."""
        if is_corrupt(exc):
            return CorruptStoreError(
                f"{self.path} is damaged ({exc}; during {action}): run `memorist check`, "
                "and restore a backup (`memorist backup`) if it confirms the damage"
            )
        if is_busy(exc):
            return StoreError(
                f"{self.path}: {action} failed: another process kept the database locked "
                f"for more than the busy timeout ({self.busy_timeout:g} s; setting busy_timeout "
                "or MEMORIST_BUSY_TIMEOUT)"
            )
        return StoreError(f"{self.path}: {action} failed: {exc}")

    @contextmanager
    def transaction(self) -> Iterator[Batch]:
        with self._lock:
            try:
                with self._write() as conn:
                    flushed = self._flush_touches(conn)
                    batch = _SQLiteBatch(self, conn)
                    yield batch
                    generations = self._generations(conn, batch.touched_spaces)
            except _Unflushed:
                self._touches.taken(flushed)  # committed: not to be written again
                self._indexes.clear()
                raise
            except sqlite3.Error as exc:
                self._indexes.clear()
                raise self._error(exc, "write") from exc
            # Only a committed flush empties the buffer: a rolled-back transaction
            # must not lose the retrievals recorded before it.
            self._touches.taken(flushed)
            self._indexes.apply(generations, batch.index_upserts, batch.index_removals, batch.last_seq)

    def _generations(self, conn: sqlite3.Connection, spaces: set[int]) -> dict[int, int]:
        if not spaces:
            return {}
        marks = ",".join("?" * len(spaces))
        rows = conn.execute(f"SELECT id, generation FROM spaces WHERE id IN ({marks})", tuple(spaces))
        return dict(rows.fetchall())

    # spaces ----------------------------------------------------------------------
    def _space_id(self, conn: sqlite3.Connection, scope: Scope, *, create: bool) -> int | None:
        row = conn.execute(
            "SELECT id FROM spaces WHERE tenant_id = ? AND user_id = ? AND agent_id = ?", scope.space
        ).fetchone()
        if row:
            return int(row[0])
        if not create:
            return None
        # Ids are never reused, not even after a reset (see reset): another process's
        # index of a space removed by it must not pass for the new space's.
        cur = conn.execute(
            "INSERT INTO spaces (id, tenant_id, user_id, agent_id, created_at) VALUES ("
            "(SELECT max(COALESCE(max(id), 0), "
            "COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'space_id_floor'), 0)) + 1 FROM spaces), "
            "?, ?, ?, ?)",
            (*scope.space, time.time()),
        )
        return int(cur.lastrowid or 0)

    @contextmanager
    def reading(self) -> Iterator[None]:
        # Under the store's lock, so that searches at once run one after the other
        # (each ends sooner than if all shared the interpreter), but for what grows
        # with the caller's request: the search lets the store go (``released``)
        # while it checks a filter, decodes many rows or fuses a large pool, and
        # reads many rows a few hundred at a time. Held throughout, a costly search
        # made every other call of the store wait for seconds.
        # An erasure waits for the searches under way, and new ones for it (gate.py).
        depth = getattr(self._reading, "depth", 0)
        # (Not again in a nested group, nor in a write transaction of this thread: an
        # erasure waiting for the searches would wait for it, and it for the erasure.)
        held = not depth and self._lock._is_owned()  # type: ignore[attr-defined]
        ungated = getattr(self._reading, "ungated", False)
        with self._gate.search() if not (depth or held) else nullcontext(), self._lock:
            self._require_open()
            self._check_data_version()
            self._reading.depth = depth + 1
            # Outside the gate, the group must not let the store go: an erasure
            # could run meanwhile.
            self._reading.ungated = ungated or held
            try:
                yield
            finally:
                self._reading.depth = depth
                self._reading.ungated = ungated

    @contextmanager
    def released(self) -> Iterator[None]:
        if getattr(self._reading, "ungated", False):
            yield  # (see reading)
            return
        with self._lock, self._unlocked():
            yield

    @contextmanager
    def _unlocked(self) -> Iterator[None]:
        """Let go of the store's lock, however deeply this thread holds it, and take it
        back: while a search multiplies a large space's vectors (arrays it holds, which
        writers never change in place, see ``SpaceIndex.search``), other threads use
        the store, so the searches of one process share the cores.

        Not inside a write transaction: another thread's statements would join it.
        """
        if self._conn.in_transaction:
            yield
            return
        state = self._lock._release_save()  # type: ignore[attr-defined]  # as threading.Condition does
        try:
            yield
        finally:
            self._lock._acquire_restore(state)  # type: ignore[attr-defined]
        self._require_open()  # closed meanwhile: say so, as any later call would

    def _check_data_version(self) -> None:
        """Forget the cached spaces if another connection committed since the last look."""
        version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._data_version = version
            self._space_cache.clear()

    def _spaces(self, scope: ScopeFilter) -> list[tuple[int, int]]:
        """``(space_id, generation)`` of every space the filter can see.

        Answers are cached until the database changes: this connection's commits
        clear the cache, and SQLite's data_version tells when another connection
        committed (checked once per :meth:`reading` block, else on every call).
        """
        if not getattr(self._reading, "depth", 0):
            self._check_data_version()
        key = (scope.tenant_id, scope.user_id, scope.agent_id)
        spaces = self._space_cache.get(key)
        if spaces is None:
            sql = "SELECT id, generation FROM spaces WHERE tenant_id = ?"
            args: list[Any] = [scope.tenant_id]
            if scope.user_id is not None:
                sql += " AND user_id = ?"
                args.append(scope.user_id)
            if scope.agent_id is not None:
                sql += " AND agent_id = ?"
                args.append(scope.agent_id)
            spaces = [(int(a), int(b)) for a, b in self._conn.execute(sql, args).fetchall()]
            if len(self._space_cache) >= 1024:
                self._space_cache.clear()
            self._space_cache[key] = spaces
        return spaces

    # embedder identity -----------------------------------------------------------
    @_store_errors
    def embedder_identity(self) -> tuple[str, int] | None:
        with self._lock:
            rows = dict(
                self._conn.execute(
                    "SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dim')"
                ).fetchall()
            )
        if "embedder_name" not in rows:
            return None
        return rows["embedder_name"], int(rows["embedder_dim"])

    def bind_embedder(self, name: str, dim: int) -> None:
        self._bound = (name, dim)

    def _record_identity(self, conn: sqlite3.Connection, dim: int) -> None:
        """Inside a write: record the bound identity if the store has none yet; refuse
        vectors of another one (read in each write: another process may re-embed the
        store while this one is open)."""
        rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dim')").fetchall())
        bound = self._bound
        if "embedder_name" in rows:
            stored = (rows["embedder_name"], int(rows["embedder_dim"]))
            if stored[1] != dim or (bound is not None and stored != bound):
                raise EmbedderMismatchError(
                    f"{self.path} holds vectors of {stored[0]} ({stored[1]} dims); "
                    f"refusing to write vectors of {bound[0] if bound else 'another embedder'} ({dim} dims)"
                )
            return
        if bound is None or bound[1] != dim:
            raise StoreError(f"{self.path}: no embedder bound for a {dim}-dim vector; call bind_embedder first")
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('embedder_name', ?)", (bound[0],))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('embedder_dim', ?)", (str(dim),))

    @_store_write_errors
    def set_embedder_identity(self, name: str, dim: int) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('embedder_name', ?)", (name,))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('embedder_dim', ?)", (str(dim),))

    # reads -----------------------------------------------------------------------
    @_store_errors
    def get(self, memory_id: str) -> MemoryRecord | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {COLUMNS} {FROM_MEMORIES} WHERE m.id = ?", (memory_id,)).fetchone()
        return row_to_record(row) if row else None

    @_store_errors
    def get_many(
        self, memory_ids: Sequence[str], *, scope: ScopeFilter | None = None, exact_access: bool = True
    ) -> dict[str, MemoryRecord]:
        """Memories by id, whatever their status.

        With a ``scope`` and ``exact_access=False`` (a search that shows its results
        and ranks by nothing that reads access bookkeeping), the live memories of the
        scope's loaded indexes are decoded from the rows they hold, with no read:
        every field is current except the access counts and last-access marks,
        which may lag behind retrievals (they change without a new index generation).
        A space loaded from the store holds a row once it has been read here.
        """
        ids = list(dict.fromkeys(memory_ids))
        # Many rows are read under the store's lock 500 at a time, letting it go in
        # between (even inside a search's reading group), and decoded without it:
        # decoding 100,000 took 3 s, the store's other callers waiting.
        with self.released() if len(ids) > 500 else nullcontext():
            return self._get_many(ids, scope, exact_access)

    def _get_many(self, ids: list[str], scope: ScopeFilter | None, exact_access: bool) -> dict[str, MemoryRecord]:
        indexes: list[SpaceIndex] = []  # (current ones, to keep what is read)
        rows: list[Any] = []
        with self._lock:
            if scope is not None and not exact_access:
                # Only indexes already loaded and current: a read never loads one.
                indexes = [
                    index
                    for space, generation in self._spaces(scope)
                    if (index := self._indexes.current(space, generation)) is not None
                ]
                unread = []
                for mid in ids:
                    for index in indexes:
                        stored = index.stored(mid)
                        if stored is not None:
                            rows.append(stored)
                            break
                    else:
                        unread.append(mid)
                ids = unread
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            with self._lock:
                read = self._conn.execute(f"SELECT {COLUMNS} {FROM_MEMORIES} WHERE m.id IN ({marks})", chunk).fetchall()
                if indexes and not self._conn.in_transaction:
                    # A space loaded from the store holds no stored columns until its
                    # results are shown: these are current (read under the lock, and no
                    # write of ours pending that a rollback could undo), so the next
                    # showing reads nothing.
                    for row in read:
                        if row[AT["status"]] == "active":
                            for index in indexes:
                                index.keep_stored(row[0], row)
            rows += read
        return {row[0]: row_to_record(row) for row in rows}

    @_store_errors
    def list(self, scope: ScopeFilter, *, limit: int | None = None, cutoff: float | None = None, now: float | None = None, status: Status = Status.ACTIVE, until: float | None = None) -> list[MemoryRecord]:
        where, args = scope_where(scope)
        where += " AND m.status = ?"
        args.append(status.value)
        if until is not None:
            where += " AND m.created_at <= ?"
            args.append(until)
        valid, valid_args = validity_where(cutoff, now)
        where += valid
        args += valid_args
        sql = f"SELECT {COLUMNS} {FROM_MEMORIES} WHERE {where} ORDER BY m.created_at DESC, m.rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [row_to_record(r) for r in self._rows(sql, args, limit)]

    def _rows(self, sql: str, args: Sequence[Any], limit: int | None) -> list[Any]:
        """The rows of a listing, decoded by the caller after the lock (a whole
        scope's decoding held the store for seconds); a long one read on a
        connection of its own, without the lock, so that other callers go on."""
        if limit is not None and limit <= _SHORT_READ:
            with self._lock:
                return self._conn.execute(sql, args).fetchall()
        with self._reader() as conn:
            return conn.execute(sql, args).fetchall()

    @_store_errors
    def narrowed_ids(
        self, scope: ScopeFilter, narrowing: Narrowing, *, cutoff: float | None, now: float, limit: int
    ) -> list[str] | None:
        query = narrowed_ids_sql(scope, narrowing, _JSON, cutoff=cutoff, now=now, limit=limit)
        if query is None:
            return None
        # Every row of the scope is read (tens of milliseconds at 100,000): on a
        # connection of its own, with the store's lock let go, so that the store's
        # other reads go on meanwhile; counted on the call's work meter as it goes,
        # and stopped there if the call is given up.
        given_up: list[BaseException] = []

        def progress() -> int:
            try:
                charge(_SCAN_UNITS)
            except BaseException as exc:  # the meter's cancellation, kept for the caller
                given_up.append(exc)
                return 1  # interrupts the statement
            return 0

        with self._reader() as conn:
            conn.set_progress_handler(progress, _SCAN_STEPS)
            try:
                rows = conn.execute(*query).fetchall()
            except sqlite3.OperationalError as exc:
                if given_up:
                    raise given_up[0] from None
                if is_busy(exc) or is_corrupt(exc):
                    raise
                # A row whose metadata SQLite's JSON functions cannot read (or a
                # condition too deep for its parser): the filter checks every memory.
                log.debug("a filter's narrowing was not checked: %s", exc)
                return None
            finally:
                conn.set_progress_handler(None, 0)
        return None if len(rows) > limit else [row[0] for row in rows]

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A connection for a long read that needs no lock of the store's: one of
        the idle ones, or a new one, with the store's lock let go while it is used.
        The store's own connection, under its lock, when another would not see the
        same rows: in memory, inside a transaction of this store, or in a child
        process."""
        with self._lock:
            if self._conn is None:
                raise StoreError(f"{self.path} is closed")
            shared = not self._file or self._conn.in_transaction or self._pid != os.getpid()
            if shared:
                yield self._conn
                return
            conn = self._readers.pop() if self._readers else None
        if conn is None:
            try:
                conn = connect_reader(self._file, self.busy_timeout)
            except sqlite3.Error as exc:
                raise self._error(exc, "read") from exc
        try:
            # The store's lock let go meanwhile, however deeply this thread holds it
            # (a search holds it throughout): the read needs nothing of it.
            with self._lock, self._unlocked():
                yield conn
        finally:
            with self._lock:
                if self._conn is not None and len(self._readers) < _IDLE_READERS:
                    self._readers.append(conn)
                    conn = None
            if conn is not None:
                conn.close()

    @_store_errors
    def find_by_hash(self, scope: ScopeFilter, content_hash: str) -> list[MemoryRecord]:
        where, args = scope_where(scope)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {COLUMNS} {FROM_MEMORIES} WHERE {where} AND m.status = 'active' AND m.content_hash = ?",
                (*args, content_hash),
            ).fetchall()
        return [row_to_record(r) for r in rows]

    @_store_errors
    def ids_with_prefix(
        self, tenant_id: str, prefix: str, *, include_deleted: bool = False, limit: int = 2, user_id: str | None = None,
        agent_id: str | None = None, run_id: str | None = None,
    ) -> list[str]:
        # A range, not LIKE: ids may hold % or _, and the range uses the id index.
        where, args = scope_where(ScopeFilter(tenant_id, user_id, agent_id, run_id))
        where += " AND m.id >= ? AND m.id < ?"
        if not include_deleted:
            where += " AND m.status != 'deleted'"
        with self._lock:
            rows = self._conn.execute(
                f"SELECT m.id {FROM_MEMORIES} WHERE {where} ORDER BY m.id LIMIT ?", (*args, prefix, prefix + "\U0010ffff", limit)
            ).fetchall()
        return [r[0] for r in rows]

    @_store_errors
    def user_counts(
        self, tenant_id: str, *, now: float, cutoff: float | None = None, only: str | None = None, limit: int = 1000,
        agent: str | None = None,
    ) -> dict[str, int]:
        sql, args = user_counts_sql(tenant_id, now=now, cutoff=cutoff, only=only, limit=limit, agent=agent)
        with self._lock:
            return {user: int(n) for user, n in self._conn.execute(sql, args).fetchall()}

    @_store_errors
    def relations(self, tenant_id: str, *, subjects: Sequence[tuple[str, str]] | None = None, relations: Sequence[str] | None = None,
                  objects: Sequence[tuple[str, str]] | None = None, object_like: Sequence[tuple[str, str]] | None = None,
                  limit: int = 1000) -> list[RelationTuple]:
        sql, args = relations_sql(tenant_id, subjects=subjects, relations=relations, objects=objects, object_like=object_like,
                                  limit=limit)
        with self._lock:
            return [RelationTuple(*row) for row in self._conn.execute(sql, args).fetchall()]

    @_store_errors
    def count(self, scope: ScopeFilter) -> int:
        where, args = scope_where(scope)
        with self._lock:
            return int(self._conn.execute(f"SELECT count(*) {FROM_MEMORIES} WHERE {where} AND m.status = 'active'", args).fetchone()[0])

    # playbooks -----------------------------------------------------------------------
    @_store_errors
    def list_bullets(self, scope: ScopeFilter) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        where, args = scope_where(scope)
        sql = (
            f"SELECT {COLUMNS}, e.vector {FROM_MEMORIES} LEFT JOIN embeddings e ON e.memory_rowid = m.rowid "
            f"WHERE {where} AND m.status = 'active' AND m.section != '' ORDER BY m.created_at, m.rowid"
        )
        with self._lock:
            rows = self._conn.execute(sql, args).fetchall()
        return [
            (row_to_record(r[:-1]), None if r[-1] is None else np.frombuffer(r[-1], dtype=np.float32))
            for r in rows
        ]

    @_store_errors
    def log_position(self) -> int:
        with self._lock:
            return last_seq(self._conn)

    @_store_errors
    def space_version(self, scope: Scope) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT id, generation FROM spaces WHERE tenant_id = ? AND user_id = ? AND agent_id = ?", scope.space
            ).fetchone()
        # The space id is part of it: a space deleted by reset() and created again
        # must not look like the one a reader loaded before.
        return 0 if row is None else (int(row[0]) << 32) + int(row[1])

    # vector search -----------------------------------------------------------------
    def _index(self, space: int, generation: int) -> SpaceIndex:
        """The space's in-process index, current to ``generation`` (see :class:`IndexCache`).
        One that is (re)loaded is first checked to hold the bound embedder's vectors:
        another process may have re-embedded the store since this one opened it."""
        if self._bound is not None and self._indexes.current(space, generation) is None:
            stored = self.embedder_identity()
            if stored is not None and stored != self._bound:
                raise EmbedderMismatchError(
                    f"{self.path} holds vectors of {stored[0]} ({stored[1]} dims) now (re-embedded since it was opened); "
                    f"this process embeds with {self._bound[0]} ({self._bound[1]} dims): open it again with {stored[0]}"
                )
        return self._indexes.get(self._conn, space, generation, self._dim)

    def _dim(self) -> int:
        identity = self.embedder_identity()
        return identity[1] if identity else 0

    @_store_errors
    def speakers(self, scope: ScopeFilter) -> set[str]:
        with self._lock:
            names: set[str] = set()
            for space, generation in self._spaces(scope):
                names |= self._index(space, generation).speakers()
            return names

    @_store_errors
    def vector_search(
        self,
        scope: ScopeFilter,
        vector: np.ndarray,
        *,
        k: int | None,
        cutoff: float | None,
        now: float,
        window: tuple[float, float] | None = None,
        speaker: str | None = None,
    ) -> list[tuple[str, float]]:
        with self._lock:
            hits: list[tuple[str, float]] = []
            spaces = self._spaces(scope)
            for space, generation in spaces:
                index = self._index(space, generation)
                if index.dim == 0:
                    # No vector stored yet anywhere (a space made by turns that gave
                    # no memory): nothing to find, not a dimension mismatch.
                    continue
                if index.dim != vector.shape[0]:
                    raise StoreError(
                        f"query vector has {vector.shape[0]} dims but the store's vectors have {index.dim}"
                    )
                hits.extend(
                    index.search(
                        vector, k=k, run_id=scope.run_id, cutoff=cutoff, now=now, window=window, speaker=speaker, unlocked=self._unlocked
                    )
                )
        if len(spaces) > 1:
            hits = self._best_first(hits)
            if k is not None:
                hits = hits[:k]
        return hits

    def _best_first(self, hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """Hits of several spaces, best first; equal scores in the order the memories
        were written (their rowid), as PostgreSQL orders them (each space's own list
        is already so: a user's memory said to two agents ranks the same on both)."""
        scores = Counter(score for _, score in hits)
        tied = [mid for mid, score in hits if scores[score] > 1]
        written: dict[str, int] = {}
        if tied:
            with self._lock:
                written = dict(self._conn.execute(
                    "SELECT m.id, m.rowid FROM json_each(?) j JOIN memories m ON m.id = j.value", (json.dumps(tied),)
                ).fetchall())
        return sorted(hits, key=lambda h: (-h[1], written.get(h[0], 0)))

    @_store_errors
    def similarities(self, scope: ScopeFilter, vector: np.ndarray, memory_ids: Sequence[str]) -> dict[str, float]:
        return self._per_row(
            scope, memory_ids, lambda index, ids: index.similarities(vector, ids) if index.dim == vector.shape[0] else {}
        )

    @_store_errors
    def created_times(self, scope: ScopeFilter, memory_ids: Sequence[str]) -> dict[str, float]:
        return self._per_row(scope, memory_ids, lambda index, ids: index.created_times(ids))

    def _per_row(
        self, scope: ScopeFilter, memory_ids: Sequence[str], read: Callable[[SpaceIndex, list[str]], dict[str, float]]
    ) -> dict[str, float]:
        """``read`` of each space's index for the ids not found yet, of the scope's
        spaces in turn (its run only, with a ``run_id``)."""
        wanted = list(memory_ids)
        found: dict[str, float] = {}
        with self._lock:
            for space, generation in self._spaces(scope):
                if len(found) == len(wanted):
                    break
                index = self._index(space, generation)
                found.update(index.in_run(read(index, [m for m in wanted if m not in found]), scope.run_id))
        return found

    @_store_errors
    def text_search(self, scope: ScopeFilter, query: str, *, k: int, cutoff: float | None, now: float) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        with self._lock:
            spaces = self._spaces(scope)
            if len(spaces) == 1:
                # The common case, one user's space: BM25 on the in-process index.
                index = self._index(*spaces[0])
                return index.search_text(index_terms(query), k=k, run_id=scope.run_id, cutoff=cutoff, now=now)
            if 1 < len(spaces) <= POOLED_SPACES:
                # A few spaces (a user's memories with each of its agents, say): each
                # in-process index scored with the statistics of all of them, so the
                # scores compare and are those of one index holding every row.
                terms = index_terms(query)
                indexes = [self._index(*space) for space in spaces]
                stats = TextStats.pooled([index.text_stats(terms) for index in indexes])
                hits = [hit for index in indexes for hit in index.search_text(
                    terms, k=k, run_id=scope.run_id, cutoff=cutoff, now=now, stats=stats)]
                return self._best_first(hits)[:k]
        if not spaces:
            return []
        # A scope spanning many spaces (an agent across all its users, say) asks
        # the durable FTS5 index instead of loading every space into memory.
        return self._fts_search(scope, query_terms(query), k=k, cutoff=cutoff, now=now)

    @_store_errors
    def _fts_search(self, scope: ScopeFilter, terms: Sequence[str], *, k: int, cutoff: float | None, now: float) -> list[tuple[str, float]]:
        if not terms:
            return []
        scope_terms = [stable_token("t", scope.tenant_id)]
        for prefix, value in (("u", scope.user_id), ("a", scope.agent_id), ("r", scope.run_id)):
            if value is not None:
                scope_terms.append(stable_token(prefix, value))
        words = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        match = "scope_key : (" + " AND ".join(scope_terms) + ") AND search_text : (" + words + ")"
        sql = (
            "SELECT m.id, bm25(memories_fts, 1.0, 0.0) AS rank FROM memories_fts "
            "JOIN memories m ON m.rowid = memories_fts.rowid "
            "WHERE memories_fts MATCH ? AND m.status = 'active' AND (m.valid_to IS NULL OR m.valid_to > ?)"
        )
        args: list[Any] = [match, now]
        if cutoff is not None:
            sql += " AND COALESCE(m.updated_at, m.created_at) >= ?"
            args.append(cutoff)
        sql += " ORDER BY rank, m.rowid LIMIT ?"
        args.append(k)
        with self._lock:
            try:
                rows = self._conn.execute(sql, args).fetchall()
            except sqlite3.OperationalError as exc:
                raise StoreError(f"full-text search failed for terms {list(terms)!r}: {exc}") from exc
        # FTS5's bm25() is negative (lower is better); report the usual positive form.
        return [(r[0], -float(r[1])) for r in rows]

    # history -----------------------------------------------------------------------
    def _events(self, where: str, args: Sequence[Any], limit: int | None = None, *, newest_first: bool = False) -> list[EventRecord]:
        sql = (
            "SELECT e.seq, e.ts, e.op, e.memory_id, e.run_id, e.actor, e.old_text, e.new_text, "
            "e.payload, s.tenant_id, s.user_id, s.agent_id FROM events e "
            f"LEFT JOIN spaces s ON s.id = e.space_id WHERE {where} ORDER BY e.seq{' DESC' if newest_first else ''}"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._rows(sql, args, limit)
        return [
            EventRecord(
                seq=r[0], ts=r[1], op=r[2], memory_id=r[3],
                scope=Scope(r[9] or "", r[10] or "", r[11] or "", r[4]),
                actor=r[5], old_text=r[6], new_text=r[7], payload=json.loads(r[8]),
            )
            for r in rows
        ]

    @_store_errors
    def history(self, memory_id: str) -> list[EventRecord]:
        return self._events("e.memory_id = ?", (memory_id,))

    @_store_errors
    def events(self, scope: ScopeFilter | None = None, *, since: int = 0, limit: int | None = None, ops: Sequence[str] | None = None,
               newest_first: bool = False, before: int | None = None) -> list[EventRecord]:
        where, args = "e.seq > ?", [since]
        if before is not None:
            where, args = where + " AND e.seq < ?", [*args, before]
        where, args = event_scope_where(where, args, scope)
        if ops:
            where += f" AND e.op IN ({','.join('?' * len(ops))})"
            args.extend(ops)
        return self._events(where, args, limit, newest_first=newest_first)

    @_store_errors
    def pending_turns(self, scope: ScopeFilter | None = None, *, limit: int | None = None) -> list[EventRecord]:
        # One query; the resolving event is looked up in its space from the turn on
        # (the events_space index), so the cost grows with pending turns, not the log.
        where = (
            "e.op = 'turn' AND json_extract(e.payload, '$.pending') = 1 AND NOT EXISTS ("
            "SELECT 1 FROM events p WHERE p.space_id IS e.space_id AND p.seq > e.seq "
            "AND p.op = 'turn_processed' AND json_extract(p.payload, '$.turn_event') = e.seq)"
        )
        where, args = event_scope_where(where, [], scope)
        return self._events(where, args, limit)

    @_store_errors
    def stats(self, tenant_id: str | None = None) -> dict[str, Any]:
        of, args = stats_scope(tenant_id, "?")
        with self._lock:
            q = self._conn.execute
            by_status = dict(q(f"SELECT m.status, count(*) FROM memories m WHERE {of('m')} GROUP BY m.status", args).fetchall())
            by_kind = dict(q(f"SELECT m.kind, count(*) FROM memories m WHERE m.status = 'active' AND {of('m')} GROUP BY m.kind", args).fetchall())
            identity = self.embedder_identity()
            return {
                "path": self.path,
                "schema_version": self.schema_version(),
                "memories": by_status.get("active", 0),
                "deleted": by_status.get("deleted", 0),
                "archived": by_status.get("archived", 0),
                "by_kind": by_kind,
                "users": q(USERS_SQL + f" AND {of('s', space=True)}", args).fetchone()[0],
                "spaces": q(f"SELECT count(*) FROM spaces s WHERE {of('s', space=True)}", args).fetchone()[0],
                "events": q(f"SELECT count(*) FROM events e WHERE {of('e')}", args).fetchone()[0],
                "embedder": identity[0] if identity else None,
                "dim": identity[1] if identity else None,
                # The write-ahead log holds recent commits until a checkpoint: the
                # store's size on disk is both files.
                "size_bytes": _disk_size(self.path) if self.path != ":memory:" else None,
            }

    # access clock --------------------------------------------------------------------
    def touch(self, records: Sequence[MemoryRecord], *, query: str = "") -> None:
        if not records:
            return
        with self._lock:
            by_space: dict[tuple[str, str, str], list[MemoryRecord]] = {}
            for r in records:
                by_space.setdefault(r.scope.space, []).append(r)
            for (tenant, user, agent), recs in by_space.items():
                spaces = self._spaces(ScopeFilter(tenant, user, agent))
                if spaces:
                    self._touches.record(spaces[0][0], recs, query)
            if len(self._touches) >= FLUSH_EVERY:
                # Buffered retrievals are lost in a crash until written, so this write
                # need not wait for the disk: the next write's sync covers it. A search
                # that synced here waited behind whatever the disk was flushing (up to
                # a second right after a bulk load, bench/RESULTS.md). Nor for another
                # process's write (an import's batch): they stay buffered for a later
                # search, unless FLUSH_WAIT of them are.
                self._flush(sync=False, wait=len(self._touches) >= FLUSH_WAIT)

    def _flush_touches(self, conn: sqlite3.Connection) -> int:
        """Write buffered retrievals (see :mod:`memorist.store.touches`): clock advance,
        per-memory touch, retrieve events. Returns how many buffered retrievals were
        written; the caller forgets them once the transaction committed."""
        flushed = len(self._touches)
        if not flushed:
            return 0
        gone = set()
        for space, count in self._touches.spaces().items():
            conn.execute("UPDATE spaces SET access_clock = access_clock + ? WHERE id = ?", (count, space))
            row = conn.execute("SELECT access_clock FROM spaces WHERE id = ?", (space,)).fetchone()
            if row is None:  # another process reset the store: its memories are gone too
                gone.add(space)
                continue
            clock = row[0]
            for cls, rows in self._touches.stamps(space, int(clock)).items():
                # The column name comes from the fixed class list, never from input.
                conn.executemany(
                    f"UPDATE memories SET access_count = access_count + ?, last_access_{cls} = MAX(last_access_{cls}, ?) WHERE id = ?",
                    rows,
                )
        conn.executemany(
            "INSERT INTO events (ts, op, space_id, payload) VALUES (?, 'retrieve', ?, ?)",
            [entry for entry in self._touches.log_entries(lambda ids: _stored_ids(conn, ids)) if entry[1] not in gone],
        )
        return flushed

    @_store_errors
    def access_clock(self, scope: Scope) -> int:
        with self._lock:
            space = self._space_id(self._conn, scope, create=False)
            if space is None:
                return 0
            stored = self._conn.execute("SELECT access_clock FROM spaces WHERE id = ?", (space,)).fetchone()[0]
            return int(stored) + self._touches.pending(space)

    def refuse_writes(self, reason: str) -> None:
        """Take no more writes (each raises a :class:`StoreError` naming ``reason``),
        for a store known to be damaged: reads go on, nothing is written into it, and
        the retrieval bookkeeping of reads is dropped."""
        with self._lock:
            self._refused = reason

    @property
    def refused(self) -> str | None:
        """Why this store takes no write, or None."""
        return self._refused

    def buffered_uses(self, memory_id: str) -> int:
        with self._lock:
            return self._touches.uses(memory_id)

    def flush(self, *, sync: bool = True) -> None:
        """Write buffered retrieval bookkeeping now (``sync``: on disk before returning)."""
        self._flush(sync=sync, wait=True)

    def _flush(self, *, sync: bool, wait: bool) -> None:
        """:meth:`flush`; without ``wait``, nothing is written while another
        connection holds the write lock (the retrievals stay buffered)."""
        with self._lock:
            if self._refused is not None:
                self._touches.taken(len(self._touches))  # a damaged store: reads write nothing
                return
            if len(self._touches):
                try:
                    with self._write(sync=sync, wait=wait) as conn:
                        flushed = self._flush_touches(conn)
                except _Unflushed:
                    self._touches.taken(flushed)  # committed: not to be written again
                    raise
                except sqlite3.Error as exc:
                    if not wait and is_busy(exc):
                        return  # another connection is writing: later
                    raise self._error(exc, "writing retrieval bookkeeping") from exc
                except StoreError:
                    if self._refused is None:
                        raise
                    self._touches.taken(len(self._touches))  # found upgraded meanwhile: reads write nothing
                    return
                self._touches.taken(flushed)

    # maintenance -------------------------------------------------------------------
    @_store_write_errors
    def reindex(self, embed: Callable[[list[str]], np.ndarray] | None = None, *, name: str | None = None, dim: int | None = None, progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
        with self._lock:
            self.flush()
            self._indexes.clear()
            with self._write() as conn:
                # Not FTS5's 'rebuild': it would index deleted rows too.
                conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
                conn.execute(
                    "INSERT INTO memories_fts (rowid, search_text, scope_key) "
                    "SELECT rowid, search_text, scope_key FROM memories WHERE status = 'active'"
                )
                # Other processes holding indexes of these spaces must reload them.
                conn.execute("UPDATE spaces SET generation = generation + 1")
            re_embedded = 0
            if embed is not None:
                with self._write() as conn:
                    # Read inside the write: a memory another process commits before it
                    # would lose its vector to the DELETE below, and never be re-embedded.
                    rows = conn.execute(
                        "SELECT rowid, space_id, search_text FROM memories WHERE status = 'active' ORDER BY rowid"
                    ).fetchall()
                    conn.execute("DELETE FROM embeddings")
                    conn.execute("UPDATE spaces SET generation = generation + 1")
                    for start in range(0, len(rows), 256):
                        chunk = rows[start : start + 256]
                        vectors = np.asarray(embed([r[2] for r in chunk]), dtype=np.float32)
                        conn.executemany(
                            "INSERT INTO embeddings (memory_rowid, space_id, vector) VALUES (?, ?, ?)",
                            [(r[0], r[1], vectors[i].tobytes()) for i, r in enumerate(chunk)],
                        )
                        re_embedded += len(chunk)
                        if progress:
                            progress(re_embedded, len(rows))
                    if name is not None and dim is not None:
                        conn.execute("INSERT OR REPLACE INTO meta VALUES ('embedder_name', ?)", (name,))
                        conn.execute("INSERT OR REPLACE INTO meta VALUES ('embedder_dim', ?)", (str(dim),))
                    conn.execute("INSERT INTO events (ts, op, payload) VALUES (?, 'reindex', ?)", (time.time(), dumps({"embedder": name, "re_embedded": re_embedded})))
            self._indexes.remove_files()  # of the old vectors
            if embed is not None and name is not None and dim is not None:
                self._bound = (name, dim)  # the store is the new embedder's, and so is this process's writing
            indexed = self._conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0]
            return {"indexed": int(indexed), "re_embedded": re_embedded}

    @_store_write_errors
    def adopt(self, moves: Sequence[tuple[str, str]], *, user_id: str | None = None, actor: str = "",
              payload: dict[str, Any] | None = None) -> dict[str, int]:
        with self._lock:
            self.flush()
            with self._write() as conn:
                counts = {"memories": 0, "spaces": 0, "merged": 0}
                for source, target in moves:
                    sql = "SELECT id, user_id, agent_id FROM spaces WHERE tenant_id = ?"
                    args: list[Any] = [source]
                    if user_id is not None:
                        sql += " AND user_id = ?"
                        args.append(user_id)
                    for space, user, agent in conn.execute(sql + " ORDER BY id", args).fetchall():
                        n = conn.execute("SELECT count(*) FROM memories WHERE space_id = ?", (space,)).fetchone()[0]
                        if not n:
                            continue  # nothing it owns: its events stay where they are
                        owner = Scope(target, user, agent)
                        into = self._space_id(conn, owner, create=False)
                        if into is None and (user or agent):
                            # The space itself changes tenant: its memories, vectors and events follow.
                            conn.execute("UPDATE spaces SET tenant_id = ?, generation = generation + 1 WHERE id = ?", (target, space))
                            into = space
                            counts["spaces"] += 1
                        else:
                            # The target exists (or this is the tenant's own space, which
                            # holds the tenant's configuration): the memories move into it.
                            into = into if into is not None else self._space_id(conn, owner, create=True)
                            conn.execute("UPDATE memories SET space_id = ? WHERE space_id = ?", (into, space))
                            conn.execute("UPDATE embeddings SET space_id = ? WHERE space_id = ?", (into, space))
                            conn.execute("UPDATE spaces SET generation = generation + 1 WHERE id IN (?, ?)", (space, into))
                            counts["merged"] += 1
                        rows = conn.execute("SELECT rowid, run_id FROM memories WHERE space_id = ?", (into,)).fetchall()
                        conn.executemany(
                            "UPDATE memories SET scope_key = ? WHERE rowid = ?",
                            [(scope_key(Scope(target, user, agent, run)), rowid) for rowid, run in rows],
                        )
                        counts["memories"] += int(n)
                if counts["memories"]:  # a run that moved nothing leaves no trace
                    target_space = self._space_id(conn, Scope(moves[0][1]), create=True)
                    conn.execute(
                        "INSERT INTO events (ts, op, space_id, actor, payload) VALUES (?, 'adopt', ?, ?, ?)",
                        (time.time(), target_space, actor, dumps({**(payload or {}), **counts})),
                    )
            self._indexes.clear()
            self._indexes.remove_files()  # the moved memories' files are read from the store again
            return counts

    @_store_write_errors
    def reset(self) -> None:
        with self._lock:
            self._touches.clear()
            with self._write() as conn:
                conn.execute("DROP TRIGGER IF EXISTS events_no_update")
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) SELECT 'space_id_floor', max(COALESCE(max(id), 0), "
                    "COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'space_id_floor'), 0)) FROM spaces"
                )
                for table in ("embeddings", "memories", "events", "spaces", "relations"):
                    conn.execute(f"DELETE FROM {table}")
                conn.execute("DELETE FROM meta WHERE key IN ('embedder_name', 'embedder_dim')")
                # Event seqs are never reused (readers and indexes keep positions in
                # the log), so the sequence is not reset with it.
                conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
                conn.execute(APPEND_ONLY)
            self._indexes.clear()
            self._indexes.remove_files()

    @_store_write_errors
    def erase(
        self,
        owners: Sequence[ScopeFilter],
        *,
        dry_run: bool = False,
        log: Scope | None = None,
        describe: Callable[[Erased], dict[str, Any]] | None = None,
    ) -> Erased:
        with self._gate.erasure() if not dry_run else nullcontext(), self._lock:
            if dry_run:
                owned = self._owned(self._conn, owners)
                changed_by_runs = self._changed_by_runs(self._conn, owned)
                counts = self._erased(self._conn, owned, changed_by_runs)
                wider = self._wider(self._conn, owners, frozenset(changed_by_runs))
                return Erased(counts.memories, counts.vectors, counts.events + len(wider), counts.spaces)
            self.flush()  # buffered retrievals of the owner's spaces are logged now, then blanked
            # Deleted cells and freed pages are overwritten with zeros as they go;
            # VACUUM below rewrites the rest (pages freed before, without it).
            self._conn.execute("PRAGMA secure_delete = ON")
            try:
                with self._write() as conn:
                    owned = self._owned(conn, owners)
                    changed_by_runs = self._changed_by_runs(conn, owned)
                    counts = self._erased(conn, owned, changed_by_runs)
                    changed = 0
                    # The owners' rows, and the memories of other runs that a turn of an
                    # erased run changed or deleted (they hold its words: whole, with
                    # their history).
                    for of_memories, of_events, args in _erased_rows(owned, changed_by_runs):
                        conn.execute(f"DELETE FROM embeddings WHERE memory_rowid IN (SELECT rowid FROM memories WHERE {of_memories})", args)
                        changed += conn.execute(f"DELETE FROM memories WHERE {of_memories}", args).rowcount
                        changed += conn.execute(
                            f"UPDATE events SET old_text = NULL, new_text = NULL, payload = ? WHERE {of_events} "
                            "AND NOT (old_text IS NULL AND new_text IS NULL AND payload IS ?)",
                            (TOMBSTONE, *args, TOMBSTONE),
                        ).rowcount
                    # Copies of the owner's memories logged beyond its spaces (the undo
                    # snapshots of an operation run over a wider scope) go too.
                    wider = self._wider(conn, owners, frozenset(changed_by_runs))
                    for seq in wider:
                        changed += conn.execute(
                            "UPDATE events SET old_text = NULL, new_text = NULL, payload = ? WHERE seq = ?", (TOMBSTONE, seq)
                        ).rowcount
                    counts = Erased(counts.memories, counts.vectors, counts.events + len(wider), counts.spaces)
                    changed += _erase_beside(conn, owners)
                    spaces = sorted({space for _, args in owned for space in args if isinstance(space, int)})
                    for start in range(0, len(spaces), 500):  # other processes' indexes of them reload
                        chunk = spaces[start : start + 500]
                        conn.execute(f"UPDATE spaces SET generation = generation + 1 WHERE id IN ({','.join('?' * len(chunk))})", chunk)
                    # The full-text index keeps removed terms in older segments until
                    # they are merged: merge them all now.
                    conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
                    # Logged even without ``log`` (then in no space): the event is what
                    # tells other processes that their indexes of these spaces hold
                    # memories no later event names (log_reaches).
                    space = None if log is None else self._space_id(conn, log, create=True)
                    cur = conn.execute(
                        "INSERT INTO events (ts, op, space_id, run_id, actor, payload) VALUES (?, 'erase', ?, ?, 'erase', ?)",
                        (time.time(), space, "" if log is None else log.run_id, dumps(describe(counts) if describe else {})),
                    )
                    seq = None if log is None else int(cur.lastrowid or 0)
            finally:
                self._indexes.clear()
                self._indexes.remove_files()  # they hold the erased memories' ids, terms and vectors
                self._conn.execute("PRAGMA secure_delete = OFF")
            return Erased(counts.memories, counts.vectors, counts.events, counts.spaces, seq, self._scrub(vacuum=changed > 0))

    def _scrub(self, *, vacuum: bool = True) -> dict[str, Any]:
        """After an erasure: rewrite the file from its live rows (no free page or
        free space inside a page keeps old bytes) and checkpoint the log into it,
        truncating the log to nothing. A reader of another connection may hold the
        log for a while: the checkpoint is tried again until ``busy_timeout``.
        Without ``vacuum`` (the erasure changed no row: an owner erased before, or
        none), only the checkpoint: rewriting the file again would scrub nothing."""
        try:
            if vacuum:
                self._conn.execute("VACUUM")
        except sqlite3.Error as exc:  # the erasure committed; only its scrub waits (said, not raised)
            return {"complete": False, "vacuum": f"not done ({exc}): run VACUUM on the store"}
        if self.path == ":memory:":
            return {"complete": True, "vacuum": vacuum, "log": "none (in memory)"}
        deadline = time.monotonic() + self.busy_timeout
        attempt = 0
        while True:
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return {"complete": True, "vacuum": vacuum, "log": "checkpointed and truncated"}
            if time.monotonic() >= deadline:
                return {"complete": False, "vacuum": vacuum,
                        "log": "not truncated: another connection kept reading it; the erased text leaves it at the next checkpoint"}
            time.sleep(backoff(attempt, first=_LOCK_POLL_FIRST, cap=0.2))
            attempt += 1

    @staticmethod
    def _wider(conn: sqlite3.Connection, owners: Sequence[ScopeFilter], memories: Collection[str] = ()) -> list[int]:
        """Events outside the owners' spaces that keep a copy of their memories, or of
        ``memories`` (other runs' memories an erased run changed), other than those
        memories' own events (:func:`~memorist.store.base.holds_text_of`)."""
        rows = conn.execute(
            "SELECT e.seq, e.memory_id, e.payload, s.tenant_id, s.user_id, s.agent_id, e.run_id FROM events e JOIN spaces s ON s.id = e.space_id "
            f"WHERE s.tenant_id IN ({','.join('?' * len(owners))}) AND e.payload LIKE '%\"undo\"%'",
            [o.tenant_id for o in owners],
        )
        return [
            seq for seq, memory, payload, *where in rows
            if not any(o.matches(Scope(*where)) for o in owners) and memory not in memories and holds_text_of(json.loads(payload), owners, memories)
        ]

    @staticmethod
    def _owned(conn: sqlite3.Connection, owners: Sequence[ScopeFilter]) -> list[tuple[str, list[Any]]]:
        """For each owner with a space, the condition (on a table with ``space_id`` and
        ``run_id``: memories, events) that keeps its rows, with its arguments."""
        out = []
        for owner in owners:
            sql, args = "SELECT id FROM spaces WHERE tenant_id = ?", [owner.tenant_id]
            for column, value in (("user_id", owner.user_id), ("agent_id", owner.agent_id)):
                if value is not None:
                    sql += f" AND {column} = ?"
                    args.append(value)
            spaces = [int(r[0]) for r in conn.execute(sql, args)]
            for start in range(0, len(spaces), 500):
                chunk: list[Any] = spaces[start : start + 500]
                where = f"space_id IN ({','.join('?' * len(chunk))})"
                if owner.run_id is not None:
                    where += " AND run_id = ?"
                    chunk = [*chunk, owner.run_id]
                out.append((where, chunk))
        return out

    @staticmethod
    def _changed_by_runs(conn: sqlite3.Connection, owned: list[tuple[str, list[Any]]]) -> list[str]:
        """The memories of other runs that a turn of an owner's run changed or deleted
        (their events name that turn), and those they were consolidated into since:
        they hold what was said in it."""
        found: list[str] = []
        for where, args in owned:
            if "run_id" in where:
                spaces, run = args[:-1], args[-1]
                marks = ",".join("?" * len(spaces))
                found += [r[0] for r in conn.execute(changed_by_run_sql("?", f"IN ({marks})", json=SQLITE_JSON), (*spaces, run, TURN_NAMED, *spaces, run))]
                found += [r[0] for r in conn.execute(lineage_changed_by_run_sql("?", f"IN ({marks})", postgres=False), (*spaces, run))]

        def into(ids: list[str]) -> list[str | None]:
            out: list[str | None] = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                out += [r[0] for r in conn.execute(consolidated_into_sql(f"IN ({','.join('?' * len(chunk))})", postgres=False), chunk)]
            return out

        return with_consolidations(found, into)

    @staticmethod
    def _erased(conn: sqlite3.Connection, owned: list[tuple[str, list[Any]]], changed_by_runs: Sequence[str] = ()) -> Erased:
        memories: dict[tuple[str, str, bool], int] = {}
        vectors = events = 0
        spaces: set[int] = set()
        for where, of_events, args in _erased_rows(owned, changed_by_runs):
            spaces.update(a for a in args if isinstance(a, int))
            rows = conn.execute(
                "SELECT (SELECT tenant_id FROM spaces WHERE id = space_id), kind, section != '', count(*) "
                f"FROM memories WHERE {where} GROUP BY space_id, kind, section != ''",
                args,
            )
            for tenant, kind, bullet, n in rows:
                key = (tenant, kind, bool(bullet))
                memories[key] = memories.get(key, 0) + int(n)
            vectors += conn.execute(f"SELECT count(*) FROM embeddings WHERE memory_rowid IN (SELECT rowid FROM memories WHERE {where})", args).fetchone()[0]
            events += conn.execute(f"SELECT count(*) FROM events WHERE {of_events}", args).fetchone()[0]
        return Erased(memories, int(vectors), int(events), len(spaces))

    def close(self) -> None:
        with self._lock:
            if getattr(self, "_conn", None) is None:
                return
            try:
                if self._log_failed is None:  # else no write is taken: the bookkeeping is dropped
                    self.flush()
                    self._save_index_files()
            finally:
                if self._checkpointer is not None:
                    self._checkpointer.close()
                if self._log_sync is not None:
                    # Before the connection: an open descriptor would keep SQLite
                    # (on Windows) from removing the log when the last one closes.
                    self._log_sync.close()
                self._conn.close()
                self._conn = None  # type: ignore[assignment]
                if self._pid == os.getpid():  # (a child leaves its parent's connections alone)
                    for reader in self._readers:
                        reader.close()
                self._readers.clear()
                self._indexes.clear()

    def _save_index_files(self) -> None:
        """Write large spaces' index files (see IndexCache.save): a cache, so a failure
        is logged, never raised from close."""
        try:
            self._indexes.save(self._conn)
        except Exception as exc:  # whatever it was, the store itself is intact
            log.warning("index files not written on close: %s: %s", type(exc).__name__, exc)


class _Unflushed(StoreError):
    """A transaction committed but its log could not be synced (see ``_write``)."""


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements, keeping trigger bodies whole."""
    statements, current = [], []
    for line in script.splitlines():
        if line.strip().startswith("--") or not line.strip():
            continue
        current.append(line)
        joined = "\n".join(current)
        if sqlite3.complete_statement(joined):
            statements.append(joined.strip())
            current = []
    if current:
        statements.append("\n".join(current).strip())
    return statements


def _json_path(key: str) -> str | None:
    """The JSON path naming a metadata key; None for one a path cannot name (holding
    a double quote, a backslash or a character that is not printable)."""
    return None if '"' in key or "\\" in key or not key.isprintable() else f'$."{key}"'


#: Metadata keys in SQLite's JSON functions (a value read as a number is a number,
#: as text text, so one expression serves both).
_JSON = JsonDialect(
    path=_json_path, value="json_extract(m.metadata, ?)", text="json_extract(m.metadata, ?)",
    kind="json_type(m.metadata, ?)", string="text", numbers="'integer', 'real'", boolean="json_type(m.metadata, ?) = '{b}'",
    number="?", number_arg=float, collate="", mark="?", octets="length(CAST({t} AS BLOB))",
)
