"""The PostgreSQL + pgvector backend: one database shared by many processes and machines.

``Memory("postgresql://user:password@host/db")`` (or ``memorist --db``, ``MEMORIST_DB``,
``memorist serve --db``) opens it; the ``postgres`` extra installs psycopg 3 and its
pool. The server needs the pgvector extension (0.5 or newer). Options, as keyword
arguments or URL query parameters (which libpq never sees): ``pool_size`` (most
connections, 8), ``pool_min`` (kept open, 1), ``schema`` (the PostgreSQL schema of
Memorist's tables, ``memorist``), ``lock_timeout`` (seconds a writer waits for another
one, 30), ``pool_timeout`` (seconds a call waits for a pooled connection while all are
busy, 30; with the server down it fails after about a second, naming why),
``text_index_above`` and ``text_index_rows`` (the in-process index, text
and vectors, of large spaces, see Full text below; 0 turns it off).

How the contract's rules are kept (see :mod:`memorist.store.base`):

- **Isolation.** Every :meth:`PostgresStore.transaction` is one PostgreSQL
  transaction on one pooled connection. Its first read or write of a space takes a
  transaction-scoped advisory lock on a 64-bit hash of the space (tenant, user,
  agent) *before* reading anything of it, so a writer that reads the space's version
  or candidates decides on the space as it is when it commits, whichever process or
  machine the other writers run on. A batch's reads run on its connection and see
  its own writes. Two batches that each write several spaces can deadlock;
  PostgreSQL then rolls one back and it fails with a :class:`StoreError` (nothing of
  it was written). It is not retried here: the transaction's body is the caller's
  code, which this store cannot run again. Single-space batches (every ``add``,
  ``update``, ``delete``, learning step) never deadlock: each holds one space lock.
- **Reads** outside a transaction run in autocommit mode; the reads of one search
  (:meth:`PostgresStore.reading`) share one repeatable-read snapshot, so a search sees
  each transaction whole or not at all; one that lets its connection go for a while
  (:meth:`PostgresStore.released`: a costly filter's checks) reads on from a new one,
  and keeps only what is still active and in its scope.
- **Vectors** are pgvector values in an untyped column (the dimension is known only
  once the store's embedder wrote its first vector). A scope of at most
  ``exact_below`` vectors (20,000) is searched exactly: a distance for each of its
  rows, reached through the space index, so it returns what SQLite returns. A
  larger space gets its own HNSW index, built in the background by the first search
  that needs it (or at once by :meth:`PostgresStore.build_indexes`); until it is
  ready that space is searched exactly, and no add waits for a graph insert
  (:mod:`memorist.store.postgres.hnsw` tells how, and why one index per space). If
  the validity filter leaves fewer than ``k`` of an index's candidates, the exact
  search answers. A space of ``text_index_above`` memories or more is searched by
  this process's in-process index instead (Full text below), vectors included.
  Scores are cosine similarities; stored vectors are unit length (every Memorist
  embedder normalises), so the exact path's inner product is the cosine; the HNSW
  path reports ``1 - cosine distance``.
- **Full text** is a ``tsvector`` of the stemmed terms SQLite's index holds, ranked
  by BM25 computed in the database with SQLite's formula and statistics. A space of
  ``text_index_above`` active memories (10,000) or more is ranked instead by an
  in-process index of this process, which holds the space's vectors too, kept
  current from the event log whoever wrote, same scores; at most
  ``text_index_rows`` memories (1,000,000) are held that way per store
  (:mod:`memorist.store.postgres.text` tells how, and why not ``ts_rank``).
- **Retrieval bookkeeping** (access clock, touches) is buffered as in SQLite
  (:mod:`memorist.store.touches`) and written in its own short transaction before the
  next write, under a short lock timeout: when other writers hold those spaces it
  stays buffered for the next time instead of waiting (or deadlocking) with them.
- **Errors**: every database error is a :class:`StoreError` (a database from a newer
  Memorist, or a schema holding someone else's tables, a :class:`CorruptStoreError`);
  messages show the URL without its password.
- **Text** holding NUL characters (PostgreSQL text cannot) is stored with a
  reversible escape and read back unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import re
import struct
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext, suppress
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import numpy as np

from ...errors import (
    ConfigurationError,
    CorruptStoreError,
    EmbedderMismatchError,
    MemoristError,
    MissingDependencyError,
    StoreError,
)
from ...model import EventRecord, MemoryRecord, RelationTuple, Scope, Status
from ...policies.filters import Narrowing
from .. import redact
from ..base import TOMBSTONE, Batch, Erased, ScopeFilter, Store, holds_text_of, upgraded_message, version_of
from ..codec import AT, COLUMNS, FROM_MEMORIES, dumps, record_values, row_to_record, speaker_of
from ..gate import SearchGate
from ..sql import (
    POSTGRES_JSON,
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
from ..touches import FLUSH_EVERY, TouchBuffer
from ..vector_index import SpaceIndex
from . import hnsw
from . import schema as pg_schema
from .text import (
    BM25,
    TEXT_INDEX_ABOVE,
    TEXT_INDEX_ROWS,
    VECTORS_REWRITTEN,
    Space,
    TextIndexes,
    full_text,
    one_space,
    query_terms,
    snapshot,
    tsquery,
)

try:
    import psycopg
    import psycopg_pool
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format
except ImportError as _exc:  # pragma: no cover - exercised without the extra
    raise MissingDependencyError(
        f"PostgreSQL stores need the postgres extra: pip install 'memorist[postgres]' ({_exc})"
    ) from _exc

M = "%s"  # psycopg's parameter mark, for the shared SQL builders
_T = TypeVar("_T")

#: How long buffered retrievals wait for other writers' space locks before they
#: stay buffered for the next write.
_TOUCH_LOCK_TIMEOUT_MS = 200
_OPTIONS = ("pool_size", "pool_min", "schema", "lock_timeout", "pool_timeout", "text_index_above", "text_index_rows")

# PostgreSQL text cannot hold NUL: such text is stored with NUL as ESC "0" and ESC
# itself as ESC "1" (ESC is a noncharacter that real text does not use).
_ESC = "\U0010fffe"
_UNESCAPE = re.compile(_ESC + "([01])")
_TEXT_AT = tuple(AT[c] for c in ("text", "search_text", "topic", "concept", "section"))


def _escape(text: str | None) -> str | None:
    if text is None or ("\x00" not in text and _ESC not in text):
        return text
    return text.replace(_ESC, _ESC + "1").replace("\x00", _ESC + "0")


def _unescape(text: Any) -> Any:
    if not isinstance(text, str) or _ESC not in text:
        return text
    return _UNESCAPE.sub(lambda m: "\x00" if m.group(1) == "0" else _ESC, text)


def _record(row: Sequence[Any]) -> MemoryRecord:
    if any(isinstance(row[i], str) and _ESC in row[i] for i in _TEXT_AT):
        row = list(row)
        for i in _TEXT_AT:
            row[i] = _unescape(row[i])
    return row_to_record(tuple(row))


# vectors -----------------------------------------------------------------------------
def _vector_adapters(oid: int) -> tuple[type[Dumper], type[Loader], type[Loader]]:
    """psycopg adapters between float32 numpy arrays and pgvector's ``vector``."""

    class VectorDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            array = np.asarray(obj, dtype=">f4")
            return struct.pack(">HH", array.shape[0], 0) + array.tobytes()

    VectorDumper.oid = oid

    class VectorBinaryLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> np.ndarray:
            return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)

    class VectorTextLoader(Loader):
        format = Format.TEXT

        def load(self, data: Any) -> np.ndarray:
            text = bytes(data).decode("ascii").strip("[]")
            return np.array([float(x) for x in text.split(",")] if text else [], dtype=np.float32)

    return VectorDumper, VectorBinaryLoader, VectorTextLoader


# options and messages ----------------------------------------------------------------
logger = logging.getLogger(__name__)

#: Seconds a health check waits for the database to accept a connection.
_PING_TIMEOUT = 2
#: Seconds a call waits for a pooled connection before it asks whether the server
#: answers at all (a connection of its own): down, the call fails then, with the reason.
_FIRST_WAIT = 1.0
#: Seconds one such answer stands for the other calls waiting meanwhile.
_PROBE_FOR = 1.0


def _split_url(url: str) -> tuple[str, dict[str, str], str | None]:
    """libpq's URL (Memorist's own query parameters taken out), those parameters, and
    the password the URL holds (to keep it out of every message)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError as exc:  # "Invalid IPv6 URL", a port that is no number
        raise ConfigurationError(f"not a valid PostgreSQL URL: {exc}") from None
    scheme = "postgresql" if parts.scheme.lower() in ("postgresql+psycopg", "postgres", "postgresql") else parts.scheme
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in _OPTIONS}
    for key, value in query:
        if key == "password" and value:
            password = value
    rest = urlencode([(k, v) for k, v in query if k not in _OPTIONS]) if ours else parts.query
    conninfo = urlunsplit((scheme, parts.netloc, parts.path, rest, parts.fragment))
    if not parts.netloc:
        # urlunsplit drops the "//" of an empty host ("postgresql:///db?host=/run/pg"),
        # which libpq then cannot read.
        conninfo = conninfo.replace(f"{scheme}:", f"{scheme}://", 1)
    return conninfo, ours, unquote(password) if password else None


def _positive_int(name: str, value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if isinstance(value, bool) or number < 1 or (isinstance(value, float) and not value.is_integer()):
        raise ConfigurationError(f"{name} must be a whole number of at least 1, got {value!r}")
    return number


def _seconds(name: str, value: Any, low: float, high: float) -> float:
    """A number of seconds from ``low`` to ``high``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not low <= number <= high:
        raise ConfigurationError(f"{name} must be seconds from {low:g} to {high:g}, got {value!r}")
    return number


def _count(name: str, value: Any) -> int:
    """A whole number of at least 0 (0 turns the feature off)."""
    return 0 if value in (0, "0") else _positive_int(name, value)


class _Local(threading.local):
    conn: Any = None  # the connection this thread's reads use (a transaction's, a reading block's)
    batch: _PostgresBatch | None = None
    reading = False  # conn holds a reading block's snapshot
    spaces: dict[tuple[str, tuple[Any, ...]], Space | None] | None = None  # one_space's answers in that snapshot
    snapshot: ExitStack | None = None  # a reading block's hold on its pooled connection


def _translating(action: str, *, decode: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Let no database error out of a store method raw (see :meth:`PostgresStore._error`).

    With ``decode``, a stored value the decoders refuse (an unknown kind, say) can
    only come from damage or a foreign writer: a :class:`CorruptStoreError`."""
    decode_errors: tuple[type[BaseException], ...] = (KeyError, ValueError) if decode else ()

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(self: PostgresStore, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except MemoristError:
                raise
            except psycopg.Error as exc:
                raise self._error(exc, action) from exc
            except decode_errors as exc:
                raise CorruptStoreError(
                    f"{self.label}: a stored row cannot be decoded in {action} ({type(exc).__name__}: {exc}); "
                    "it was damaged or written by something else"
                ) from exc

        return wrapper

    return wrap


class _PostgresBatch(Batch):
    """The writes (and reads) of one transaction, on its connection."""

    def __init__(self, store: PostgresStore, conn: Any) -> None:
        self._store = store
        self._conn = conn
        self._locked: set[tuple[str, str, str]] = set()
        self._ids: dict[tuple[str, str, str], int] = {}
        self._bumped: set[tuple[str, str, str]] = set()
        #: Memories written per space id (adds, updates, deletes): see TextIndexes.after_write.
        self.written: dict[int, int] = {}
        self.identity_dim = 0  # the vector dimension whose embedder this transaction checked

    # spaces: the lock first, then anything read or written ----------------------------
    def _lock(self, space: tuple[str, str, str]) -> None:
        if space not in self._locked:
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._store._space_key(space),))
            self._locked.add(space)

    def _lock_all(self, spaces: Sequence[tuple[str, str, str]]) -> None:
        # In one order, so two batches locking the same spaces here cannot deadlock.
        for space in sorted(set(spaces) - self._locked):
            self._lock(space)

    def _space(self, scope: Scope, *, bump: bool = True) -> int:
        """The space's id, created if missing; a write (``bump``) moves its version."""
        space = scope.space
        self._lock(space)
        known = self._ids.get(space)
        if known is not None and (not bump or space in self._bumped):
            return known
        if bump:
            row = self._conn.execute(
                "UPDATE spaces SET generation = generation + 1 WHERE tenant_id = %s AND user_id = %s AND agent_id = %s RETURNING id",
                space,
            ).fetchone()
        else:
            row = self._conn.execute(
                "SELECT id FROM spaces WHERE tenant_id = %s AND user_id = %s AND agent_id = %s", space
            ).fetchone()
        if row is None:
            row = self._conn.execute(
                "INSERT INTO spaces (tenant_id, user_id, agent_id, created_at, generation) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (tenant_id, user_id, agent_id) DO UPDATE SET generation = spaces.generation + EXCLUDED.generation "
                "RETURNING id",
                (*space, time.time(), int(bump)),
            ).fetchone()
        if bump:
            self._bumped.add(space)
        self._ids[space] = int(row[0])
        return self._ids[space]

    def _written(self, scope: Scope) -> int:
        """:meth:`_space` for a memory's write, counted."""
        space = self._space(scope)
        self.written[space] = self.written.get(space, 0) + 1
        return space

    def _append(self, op: str, space: int | None, scope: Scope, memory_id: str | None, old: str | None, new: str | None, actor: str, payload: dict[str, Any] | None) -> int:
        row = self._conn.execute(
            "INSERT INTO events (ts, op, space_id, memory_id, run_id, actor, old_text, new_text, payload) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING seq",
            (time.time(), op, space, memory_id, scope.run_id, actor, _escape(old), _escape(new), dumps(payload or {})),
        ).fetchone()
        return int(row[0])

    def _put_vector(self, rowid: int, space: int, vector: np.ndarray) -> None:
        vector = np.ascontiguousarray(vector, dtype=np.float32)
        if self.identity_dim != vector.shape[0]:  # once a transaction: another process may have re-embedded since the last
            self._store._record_identity(self._conn, vector.shape[0])
            self.identity_dim = vector.shape[0]
        self._conn.execute(
            "INSERT INTO embeddings (memory_rowid, space_id, vector) VALUES (%s, %s, %b) "
            "ON CONFLICT (memory_rowid) DO UPDATE SET vector = EXCLUDED.vector, space_id = EXCLUDED.space_id",
            (rowid, space, vector),
        )

    # writes ------------------------------------------------------------------------
    def add(self, record: MemoryRecord, vector: np.ndarray | None, *, actor: str = "", payload: dict[str, Any] | None = None) -> None:
        space = self._written(record.scope)
        row = self._conn.execute(_INSERT_MEMORY, _memory_values(record, space)).fetchone()
        if row is None:
            raise StoreError(f"memory id already exists: {record.id!r}")
        if record.status is Status.ACTIVE and vector is not None:
            self._put_vector(int(row[0]), space, vector)
        self._append("add", space, record.scope, record.id, None, record.text, actor, payload)

    def update(self, record: MemoryRecord, vector: np.ndarray | None, *, old_text: str, op: str = "update", actor: str = "", payload: dict[str, Any] | None = None) -> None:
        space = self._written(record.scope)
        row = self._conn.execute(_UPDATE_MEMORY, _memory_values(record, space)).fetchone()
        if row is None:
            raise StoreError(f"memory not found for update: {record.id!r}")
        rowid, old_space = int(row[0]), int(row[1])
        if record.status is not Status.ACTIVE:
            self._conn.execute("DELETE FROM embeddings WHERE memory_rowid = %s", (rowid,))
        elif vector is not None:
            self._put_vector(rowid, space, vector)
        elif old_space != space:  # the stored vector follows its memory
            self._conn.execute("UPDATE embeddings SET space_id = %s WHERE memory_rowid = %s", (space, rowid))
        self._append(op, space, record.scope, record.id, old_text, record.text, actor, payload)

    def delete(self, record: MemoryRecord, *, op: str = "delete", actor: str = "", payload: dict[str, Any] | None = None) -> None:
        space = self._written(record.scope)
        row = self._conn.execute(
            "UPDATE memories SET status = 'deleted', updated_at = %s, terms = '', term_count = 0 "
            "WHERE id = %s AND status <> 'deleted' RETURNING rowid",
            (time.time(), record.id),
        ).fetchone()
        if row is None:
            raise StoreError(f"memory not found for delete: {record.id!r}")
        self._conn.execute("DELETE FROM embeddings WHERE memory_rowid = %s", (row[0],))
        self._append(op, space, record.scope, record.id, record.text, None, actor, payload)

    def find_active_hash(self, scope: Scope, content_hash: str) -> str | None:
        self._lock(scope.space)
        row = self._conn.execute(active_hash_sql("%s"), (*scope.space, content_hash)).fetchone()
        return row[0] if row else None

    def event(self, op: str, scope: Scope, *, memory_id: str | None = None, old_text: str | None = None, new_text: str | None = None, actor: str = "", payload: dict[str, Any] | None = None) -> int:
        space = self._space(scope, bump=False)
        return self._append(op, space, scope, memory_id, old_text, new_text, actor, payload)

    def put_relation(self, tenant_id: str, relation: RelationTuple) -> bool:
        cur = self._conn.execute(relation_insert_sql("%s"), (tenant_id, *relation_row(relation)))
        if cur.rowcount:
            self.event("relation_create", Scope(tenant_id, "", ""), actor="relations", payload=relation_payload(relation))
        return bool(cur.rowcount)

    def remove_relation(self, tenant_id: str, relation: RelationTuple) -> bool:
        cur = self._conn.execute(relation_delete_sql("%s"), (tenant_id, *relation_row(relation)[:5]))
        if cur.rowcount:
            self.event("relation_delete", Scope(tenant_id, "", ""), actor="relations", payload=relation_payload(relation))
        return bool(cur.rowcount)

    # reads inside the transaction: locked first, on this connection --------------------
    def get_many(self, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        ids = _lookup_ids(memory_ids)
        if not ids:
            return {}
        rows = self._store._rows_by_id(self._conn, ids)
        spaces = {(r[AT["tenant_id"]], r[AT["user_id"]], r[AT["agent_id"]]) for r in rows}
        if spaces - self._locked:
            # A memory never changes space: lock the spaces just learnt, then read
            # again, so what is returned is what no other writer can change now.
            self._lock_all(list(spaces))
            rows = self._store._rows_by_id(self._conn, ids)
        return {r[0]: _record(r) for r in rows}

    def list_bullets(self, scope: ScopeFilter) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        if scope.user_id is not None and scope.agent_id is not None:
            spaces = [(scope.tenant_id, scope.user_id, scope.agent_id)]
        else:
            where, args = _space_filter(scope)
            spaces = [tuple(r) for r in self._conn.execute(f"SELECT s.tenant_id, s.user_id, s.agent_id FROM spaces s WHERE {where}", args)]
        self._lock_all(spaces)  # type: ignore[arg-type]
        return self._store._bullets(self._conn, scope)

    def space_version(self, scope: Scope) -> int:
        self._lock(scope.space)
        return self._store._space_version(self._conn, scope)

    def advance_clock(self, scope: Scope, n: int = 1) -> int:
        space = self._space(scope, bump=False)
        if n:
            row = self._conn.execute("UPDATE spaces SET access_clock = access_clock + %s WHERE id = %s RETURNING access_clock", (int(n), space)).fetchone()
        else:
            row = self._conn.execute("SELECT access_clock FROM spaces WHERE id = %s", (space,)).fetchone()
        # Retrievals still buffered (their flush found the space busy) count too.
        return int(row[0]) + self._store._pending_touches(scope.space)


def _memory_values(record: MemoryRecord, space: int) -> dict[str, Any]:
    values = record_values(record)
    del values["scope_key"]  # SQLite's full-text scope tokens; PostgreSQL joins spaces
    for column in ("text", "search_text", "topic", "concept", "section"):
        values[column] = _escape(values[column])
    values["space_id"] = space
    values["speaker"] = _escape(speaker_of(record.metadata))
    # Only active memories are searched: the others keep no terms (and count for no
    # space's BM25 statistics, see the memories triggers).
    values["terms"], values["term_count"] = full_text(record.search_text or record.text) if record.status is Status.ACTIVE else ("", 0)
    return values


def _sql_columns() -> list[str]:
    probe = MemoryRecord(id="", scope=Scope(), text="", created_at=0.0, content_hash="")
    return list(_memory_values(probe, 0))


_MEMORY_COLUMNS = _sql_columns()
_INSERT_MEMORY = (
    f"INSERT INTO memories ({', '.join(_MEMORY_COLUMNS)}) VALUES ("
    + ", ".join(f"%({c})s::tsvector" if c == "terms" else f"%({c})s" for c in _MEMORY_COLUMNS)
    + ") ON CONFLICT (id) DO NOTHING RETURNING rowid"
)
_UPDATE_MEMORY = (
    "WITH old AS (SELECT rowid, space_id FROM memories WHERE id = %(id)s) UPDATE memories m SET "
    + ", ".join(f"{c} = %({c})s::tsvector" if c == "terms" else f"{c} = %({c})s" for c in _MEMORY_COLUMNS if c != "id")
    + " FROM old WHERE m.rowid = old.rowid RETURNING m.rowid, old.space_id"
)
_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
# Active memories by id, found through the id's index before anything else is joined:
# right after a bulk load the planner's statistics are those of a small table, and it
# walked the whole space by its index instead (60 ms at 100,000 memories).
_BY_ID_FIRST = "WITH wanted AS MATERIALIZED (SELECT * FROM memories WHERE id = ANY(%s) AND status = 'active')"
_EVENT_COLUMNS = (
    "SELECT e.seq, e.ts, e.op, e.memory_id, e.run_id, e.actor, e.old_text, e.new_text, "
    "e.payload, s.tenant_id, s.user_id, s.agent_id FROM events e LEFT JOIN spaces s ON s.id = e.space_id"
)


def _lookup_ids(memory_ids: Sequence[str]) -> list[str]:
    """Distinct ids worth looking up (an id holding NUL names no stored memory)."""
    return [m for m in dict.fromkeys(memory_ids) if isinstance(m, str) and "\x00" not in m]


def _space_filter(scope: ScopeFilter) -> tuple[str, list[Any]]:
    """The condition on ``spaces s`` keeping the spaces ``scope`` can see (its run
    aside: runs are memories' column)."""
    sql, args = "s.tenant_id = %s", [scope.tenant_id]
    for column, value in (("s.user_id", scope.user_id), ("s.agent_id", scope.agent_id)):
        if value is not None:
            sql += f" AND {column} = %s"
            args.append(value)
    return sql, args


class PostgresStore(Store):
    """Memorist's store in a PostgreSQL database with pgvector (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int | None = None,
        pool_min: int | None = None,
        schema: str | None = None,
        lock_timeout: float | None = None,
        pool_timeout: float | None = None,
        connect_timeout: float = 10.0,
        exact_below: int = hnsw.EXACT_BELOW,
        ef_search: int = hnsw.EF_SEARCH,
        text_index_above: int | None = None,
        text_index_rows: int | None = None,
    ) -> None:
        if not isinstance(url, str):
            raise ConfigurationError(f"a PostgreSQL store is named by a URL, got {type(url).__name__}")
        conninfo, in_url, password = _split_url(url)
        self._password = password
        #: The URL as messages show it (no password); also ``path`` (Memory's repr, stats).
        self.label = self._scrub(redact(url))
        self.path = self.label
        self.url = url
        size = _positive_int("pool_size", pool_size if pool_size is not None else in_url.get("pool_size", 8))
        least = _positive_int("pool_min", pool_min if pool_min is not None else in_url.get("pool_min", 1))
        if least > size:
            raise ConfigurationError(f"pool_min ({least}) must not exceed pool_size ({size})")
        self.schema = schema if schema is not None else in_url.get("schema", pg_schema.DEFAULT_SCHEMA)
        if not isinstance(self.schema, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", self.schema):
            raise ConfigurationError(f"schema must be a PostgreSQL name (letters, digits, _), got {self.schema!r}")
        self.lock_timeout = _seconds("lock_timeout", lock_timeout if lock_timeout is not None else in_url.get("lock_timeout", 30), 0, 86_400)
        self.pool_timeout = _seconds("pool_timeout", pool_timeout if pool_timeout is not None else in_url.get("pool_timeout", 30), 0.1, 3_600)
        self._probe_lock = threading.Lock()
        self._probed: tuple[float, str | None] = (-math.inf, None)  # (when, why the server did not answer)
        exact_below, ef_search = int(exact_below), int(ef_search)
        self.pool_size = size
        above = _count("text_index_above", text_index_above if text_index_above is not None else in_url.get("text_index_above", TEXT_INDEX_ABOVE))
        most = _count("text_index_rows", text_index_rows if text_index_rows is not None else in_url.get("text_index_rows", TEXT_INDEX_ROWS))
        self._text = TextIndexes(self.label, self._pool_connection, _unescape, above=above, max_rows=most)
        self._local = _Local()
        self._bound: tuple[str, int] | None = None
        self._touches = TouchBuffer()
        self._flushing: TouchBuffer | None = None  # taken from _touches by a flush not yet committed
        self._touch_lock = threading.RLock()  # _touches and _flushing
        self._flush_lock = threading.Lock()  # one flush at a time (taken before _touch_lock)
        self._gate = SearchGate()
        self._pool: Any = None
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in conninfo:
            kwargs["connect_timeout"] = max(1, int(connect_timeout))
        self._conninfo, self._connect_kwargs = conninfo, kwargs
        # One connection first: a wrong URL or a refusing server fails here, with the
        # server's own words, instead of as a pool timeout later.
        try:
            with psycopg.connect(conninfo, **kwargs) as conn:
                self._search_path = pg_schema.migrate(conn, self.schema, self.label)
                conn.execute(f"SET search_path TO {self._search_path}")
                oid = conn.execute("SELECT 'vector'::regtype::oid").fetchone()[0]
        except MemoristError:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"cannot open {self.label}: {self._scrub(str(exc).strip())}") from exc
        self._adapters = _vector_adapters(int(oid))
        self._hnsw = hnsw.HnswIndexes(
            self.label,
            self.schema,
            self._search_path,
            connect=self._own_connection,
            is_open=lambda: self._pool is not None,
            scrub=self._scrub,
            exact_below=exact_below,
            ef_search=ef_search,
        )
        self._pool = psycopg_pool.ConnectionPool(
            conninfo,
            min_size=least,
            max_size=size,
            kwargs=kwargs,
            configure=self._configure,
            # A connection the server ended (a restart, a terminated session) is found
            # when it is taken, not by the request it was given to.
            check=psycopg_pool.ConnectionPool.check_connection,
            open=False,
            name=f"memorist:{self.schema}",
        )
        self._pool.open(wait=False)

    @property
    def exact_below(self) -> int:
        """Spaces of at most this many vectors are searched exactly; larger ones get
        an HNSW index (:mod:`memorist.store.postgres.hnsw`)."""
        return self._hnsw.exact_below

    @exact_below.setter
    def exact_below(self, value: int) -> None:
        self._hnsw.exact_below = value

    @property
    def ef_search(self) -> int:
        """The least ``hnsw.ef_search`` of this store's HNSW searches."""
        return self._hnsw.ef_search

    @ef_search.setter
    def ef_search(self, value: int) -> None:
        self._hnsw.ef_search = value

    # connections -----------------------------------------------------------------------
    def _configure(self, conn: Any) -> None:
        conn.execute(f"SET search_path TO {self._search_path}")
        conn.execute(f"SET lock_timeout = {int(self.lock_timeout * 1000)}")
        dumper, binary_loader, text_loader = self._adapters
        conn.adapters.register_dumper(np.ndarray, dumper)
        conn.adapters.register_loader(dumper.oid, binary_loader)
        conn.adapters.register_loader(dumper.oid, text_loader)

    def _scrub(self, text: str) -> str:
        if self._password:
            text = text.replace(self._password, "***")
        return re.sub(r"(password=)\S+", r"\1***", text)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """The connection this thread reads on: its transaction's or reading block's,
        else one from the pool for this call."""
        conn = self._local.conn
        if conn is not None:
            yield conn
            return
        with self._pool_connection() as conn:
            yield conn

    @contextmanager
    def _pool_connection(self) -> Iterator[Any]:
        pool = self._pool
        if pool is None:
            raise StoreError(f"{self.label} is closed")
        with ExitStack() as stack:
            first = min(_FIRST_WAIT, self.pool_timeout)
            try:
                conn = stack.enter_context(pool.connection(timeout=first))
            except psycopg_pool.PoolTimeout:
                # Every connection busy, or none can be made: a server that is down
                # fails the call now, with its reason, not after the whole timeout.
                down = self._down()
                if down is not None:
                    raise StoreError(f"{self.label}: no database connection: the server does not answer: {down}") from None
                if self.pool_timeout <= first:
                    raise
                conn = stack.enter_context(pool.connection(timeout=self.pool_timeout - first))
            yield conn

    def _down(self) -> str | None:
        """Why the server does not answer a connection of its own (None: it does),
        asked at most once a ``_PROBE_FOR`` for all the calls waiting."""
        with self._probe_lock:
            at, why = self._probed
            if time.monotonic() - at < _PROBE_FOR:
                return why
            try:
                with psycopg.connect(self._conninfo, **{**self._connect_kwargs, "connect_timeout": _PING_TIMEOUT}):
                    why = None
            except Exception as exc:
                # A server that answers with an error of its own (libpq's "FATAL:" line:
                # too many connections, a refused login) is up: the call waits for the
                # pool as long as it may. Down is no answer at all.
                answered = getattr(exc, "sqlstate", None) or "FATAL:" in str(exc)
                why = None if answered else self._scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            self._probed = (time.monotonic(), why)
            return why

    def _own_connection(self) -> Any:
        """A connection of its own, outside the pool (for work that takes long, such
        as an index build)."""
        return psycopg.connect(self._conninfo, **self._connect_kwargs)

    def unreachable(self) -> str | None:
        if self._pool is None:
            return f"{self.label} is closed"
        try:
            # A connection of its own, not the pool's: a pool busy with requests is no
            # sign of a database that does not answer.
            with psycopg.connect(self._conninfo, **{**self._connect_kwargs, "connect_timeout": _PING_TIMEOUT}) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:  # the server down or refusing connections
            # The details (the server's address among them) to the log, not to whoever asks.
            logger.warning("%s", self._error(exc, "checking the database"))
            return "the database does not answer (the service's log says why)"
        return None

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled psycopg connection (autocommit, on the store's schema) for tables
        kept beside Memorist's, such as the memory service's API keys. Its errors are
        the caller's to translate (:meth:`error`)."""
        with self._pool_connection() as conn:
            yield conn

    def error(self, exc: BaseException, action: str) -> StoreError:
        """The :class:`StoreError` for a database failure of ``action``, as this store
        reports its own (no password in it)."""
        return self._error(exc, action)

    def _error(self, exc: BaseException, action: str) -> StoreError:
        """The Memorist error for a database failure of ``action`` (a few words)."""
        message = self._scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        if isinstance(exc, psycopg_pool.PoolTimeout):
            return StoreError(
                f"{self.label}: {action} failed: no database connection within the pool's timeout "
                f"(pool_size {self.pool_size}; is the server up?): {message}"
            )
        if isinstance(exc, psycopg_pool.PoolClosed):
            return StoreError(f"{self.label} is closed")
        if isinstance(exc, psycopg.errors.DeadlockDetected):
            return StoreError(
                f"{self.label}: {action} failed: it deadlocked with another writer and PostgreSQL rolled it "
                "back (nothing of it was written); run it again"
            )
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return StoreError(
                f"{self.label}: {action} failed: another writer held the space (or an erasure rewrote the "
                f"store's tables) for more than the lock timeout ({self.lock_timeout:g} s; lock_timeout in the URL)"
            )
        if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
            return CorruptStoreError(f"{self.label}: {action} failed: the Memorist schema {self.schema!r} is damaged or was dropped: {message}")
        return StoreError(f"{self.label}: {action} failed: {message}")

    def _require_open(self) -> None:
        if self._pool is None:
            raise StoreError(f"{self.label} is closed")

    def _space_key(self, space: tuple[str, str, str]) -> int:
        return _space_lock_key(self.schema, *space)

    # schema ----------------------------------------------------------------------------
    @_translating("reading the schema version")
    def schema_version(self) -> int:
        with self._connection() as conn:
            return pg_schema.schema_version(conn, self.schema, self.label)

    # transactions ----------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[Batch]:
        if self._local.batch is not None:
            raise StoreError(f"{self.label}: transactions do not nest")
        try:
            if self._local.reading:
                # Inside a reading block: write on its connection, then read on from
                # a snapshot that holds the write.
                conn = self._local.conn
                conn.execute("ROLLBACK")
                self._local.reading = False
                try:
                    yield from self._transaction(conn)
                finally:
                    conn.execute(_SNAPSHOT)
                    self._local.conn, self._local.reading, self._local.spaces = conn, True, {}
            else:
                with self._pool_connection() as conn:
                    yield from self._transaction(conn)
        except MemoristError:
            raise
        except psycopg.Error as exc:
            raise self._error(exc, "write") from exc

    def _transaction(self, conn: Any) -> Iterator[Batch]:
        # Buffered retrievals are written first, in their own transaction, unless a
        # flush is writing them already (they stay buffered then): a write never
        # waits for bookkeeping.
        if self._flush_lock.acquire(blocking=False):
            try:
                self._write_touches(conn)
            finally:
                self._flush_lock.release()
        self._local.conn = conn
        try:
            with conn.transaction():
                # A newer Memorist may have migrated the store since this process opened
                # it: this one would write the old format.
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = version_of(row[0], self.label) if row else 0
                if version > pg_schema.SCHEMA_VERSION:
                    raise StoreError(upgraded_message(self.label, version, pg_schema.SCHEMA_VERSION))
                batch = _PostgresBatch(self, conn)
                self._local.batch = batch
                yield batch
        finally:
            self._local.conn = None
            self._local.batch = None
        if batch.written:
            self._text.after_write(conn, batch.written)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One snapshot for the reads of a search (a read-only repeatable-read
        transaction on one connection), given back to the pool while the search works
        on what it read for as long as its request makes it (:meth:`released`)."""
        if self._local.conn is not None:
            yield
            return
        try:
            # An erasure waits for the searches under way, and new ones for it (gate.py).
            with self._gate.search():
                self._take_snapshot()
                try:
                    yield
                finally:
                    self._give_snapshot()
        except MemoristError:
            raise
        except psycopg.Error as exc:
            raise self._error(exc, "search") from exc

    @contextmanager
    def released(self) -> Iterator[None]:
        """Inside a reading block, its connection goes back to the pool meanwhile (a
        costly filter's checks held one of the pool's connections for up to a second),
        and the reads after it take a new snapshot: as on SQLite, what a search reads
        next may be newer, and it keeps only what is still active and in its scope."""
        if self._local.snapshot is None or not self._local.reading:  # no reading block, or inside a transaction
            yield
            return
        self._give_snapshot()
        yield  # what it raises ends the search: no snapshot is taken again for it
        try:
            self._take_snapshot()
        except psycopg.Error as exc:
            raise self._error(exc, "search") from exc

    def _take_snapshot(self) -> None:
        stack = ExitStack()
        conn = stack.enter_context(self._pool_connection())
        try:
            conn.execute(_SNAPSHOT)
        except BaseException:
            stack.close()
            raise
        self._local.conn, self._local.reading, self._local.spaces, self._local.snapshot = conn, True, {}, stack

    def _give_snapshot(self) -> None:
        conn, stack = self._local.conn, self._local.snapshot
        self._local.conn, self._local.reading, self._local.spaces, self._local.snapshot = None, False, None, None
        if stack is None:
            return
        with suppress(psycopg.Error):
            conn.execute("ROLLBACK")
        stack.close()

    # embedder identity -----------------------------------------------------------------
    @_translating("reading the embedder identity")
    def embedder_identity(self) -> tuple[str, int] | None:
        with self._connection() as conn:
            rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dim')").fetchall())
        if "embedder_name" not in rows:
            return None
        return rows["embedder_name"], int(rows["embedder_dim"])

    def bind_embedder(self, name: str, dim: int) -> None:
        self._bound = (name, dim)

    def _record_identity(self, conn: Any, dim: int) -> None:
        """Inside a write: record the bound identity (and build the vector index for
        its dimension) if the store has none yet; refuse vectors of another one. Read
        in each write, under the lock a re-embedding waits for (it locks the table
        against writers): another process may re-embed the store while this one is
        open, and not between this read and the commit."""
        conn.execute("LOCK TABLE embeddings IN ROW EXCLUSIVE MODE")
        stored = self._stored_identity(conn)
        if stored is None:
            # The first vector of the store: one writer records it, the others wait
            # and then find it recorded.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.lock_key("memorist", self.schema, "identity"),))
            stored = self._stored_identity(conn)
        bound = self._bound
        if stored is not None:
            if stored[1] != dim or (bound is not None and stored != bound):
                raise EmbedderMismatchError(
                    f"{self.label} holds vectors of {stored[0]} ({stored[1]} dims); "
                    f"refusing to write vectors of {bound[0] if bound else 'another embedder'} ({dim} dims)"
                )
            return
        if bound is None or bound[1] != dim:
            raise StoreError(f"{self.label}: no embedder bound for a {dim}-dim vector; call bind_embedder first")
        self._write_identity(conn, bound[0], dim)

    @staticmethod
    def _stored_identity(conn: Any) -> tuple[str, int] | None:
        rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dim')").fetchall())
        return (rows["embedder_name"], int(rows["embedder_dim"])) if "embedder_name" in rows else None

    @staticmethod
    def _write_identity(conn: Any, name: str, dim: int) -> None:
        pg_schema.set_meta(conn, embedder_name=name, embedder_dim=str(dim))
        # Indexes of another dimension index nothing the searches can ask for now.
        hnsw.drop_vector_indexes(conn, keep_dim=dim)

    @_translating("recording the embedder identity", decode=False)
    def set_embedder_identity(self, name: str, dim: int) -> None:
        with self._pool_connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.lock_key("memorist", self.schema, "identity"),))
            self._write_identity(conn, name, dim)

    # reads -----------------------------------------------------------------------------
    def _rows_by_id(self, conn: Any, ids: list[str]) -> list[tuple[Any, ...]]:
        return conn.execute(f"SELECT {COLUMNS} {FROM_MEMORIES} WHERE m.id = ANY(%s)", (ids,)).fetchall()

    @_translating("get")
    def get(self, memory_id: str) -> MemoryRecord | None:
        if not _lookup_ids([memory_id]):
            return None
        with self._connection() as conn:
            row = conn.execute(f"SELECT {COLUMNS} {FROM_MEMORIES} WHERE m.id = %s", (memory_id,)).fetchone()
        return _record(row) if row else None

    @_translating("get many")
    def get_many(self, memory_ids: Sequence[str], *, scope: ScopeFilter | None = None, exact_access: bool = True) -> dict[str, MemoryRecord]:
        # The hints let an in-process index answer; this store always reads (one query).
        ids = _lookup_ids(memory_ids)
        if not ids:
            return {}
        with self._connection() as conn:
            rows = self._rows_by_id(conn, ids)
        return {r[0]: _record(r) for r in rows}

    @_translating("list")
    def list(self, scope: ScopeFilter, *, limit: int | None = None, cutoff: float | None = None, now: float | None = None, status: Status = Status.ACTIVE, until: float | None = None) -> list[MemoryRecord]:
        keep, keep_args = "m.status = %s", [status.value]
        if scope.run_id is not None:
            keep += " AND m.run_id = %s"
            keep_args.append(scope.run_id)
        if until is not None:
            keep += " AND m.created_at <= %s"
            keep_args.append(until)
        valid, valid_args = validity_where(cutoff, now, M)
        keep += valid
        keep_args += valid_args
        order = "ORDER BY m.created_at DESC, m.rowid DESC"
        if limit is None:
            where, args = scope_where(scope, M)
            sql, args = f"SELECT {COLUMNS} {FROM_MEMORIES} WHERE {where} AND {keep} {order}", [*args, *keep_args]
        else:
            # The newest of each space first, read in the order of its index on
            # (space_id, status, created_at): joined to its spaces, the planner read
            # and sorted the whole scope for the newest (60 ms at 100k memories).
            spaces, space_args = _space_filter(scope)
            sql = (
                f"SELECT {COLUMNS} FROM spaces s CROSS JOIN LATERAL (SELECT * FROM memories m "
                f"WHERE m.space_id = s.id AND {keep} {order} LIMIT %s) m WHERE {spaces} {order} LIMIT %s"
            )
            args = [*keep_args, int(limit), *space_args, int(limit)]
        with self._connection() as conn:
            return [_record(r) for r in conn.execute(sql, args)]

    @_translating("narrowing a filter")
    def narrowed_ids(
        self, scope: ScopeFilter, narrowing: Narrowing, *, cutoff: float | None, now: float, limit: int
    ) -> list[str] | None:
        query = narrowed_ids_sql(scope, narrowing, _JSONB, cutoff=cutoff, now=now, limit=limit)
        if query is None:
            return None
        with self._connection() as conn:
            if conn.info.server_version < 160000:  # pg_input_is_valid came with PostgreSQL 16
                return None
            try:
                with conn.transaction():  # a savepoint inside a reading block's transaction
                    rows = conn.execute(*query).fetchall()
            except (psycopg.DataError, psycopg.errors.ProgramLimitExceeded, psycopg.errors.StatementTooComplex) as exc:
                logger.debug("a filter's narrowing was not checked: %s", exc)
                return None
        return None if len(rows) > limit else [row[0] for row in rows]

    @_translating("find by hash")
    def find_by_hash(self, scope: ScopeFilter, content_hash: str) -> list[MemoryRecord]:
        where, args = scope_where(scope, M)
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT {COLUMNS} {FROM_MEMORIES} WHERE {where} AND m.status = 'active' AND m.content_hash = %s",
                (*args, content_hash),
            ).fetchall()
        return [_record(r) for r in rows]

    @_translating("ids with prefix")
    def ids_with_prefix(
        self, tenant_id: str, prefix: str, *, include_deleted: bool = False, limit: int = 2, user_id: str | None = None,
        agent_id: str | None = None, run_id: str | None = None,
    ) -> list[str]:
        if "\x00" in prefix:
            return []
        # A range on the id index ("C" collation: code point order), as in SQLite.
        where, args = scope_where(ScopeFilter(tenant_id, user_id, agent_id, run_id), M)
        where += " AND m.id >= %s AND m.id < %s"
        if not include_deleted:
            where += " AND m.status <> 'deleted'"
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT m.id {FROM_MEMORIES} WHERE {where} ORDER BY m.id LIMIT %s",
                (*args, prefix, prefix + "\U0010ffff", limit),
            ).fetchall()
        return [r[0] for r in rows]

    @_translating("user counts")
    def user_counts(self, tenant_id: str, *, now: float, cutoff: float | None = None, only: str | None = None, limit: int = 1000,
                    agent: str | None = None) -> dict[str, int]:
        sql, args = user_counts_sql(tenant_id, now=now, cutoff=cutoff, only=only, limit=limit, mark="%s", agent=agent)
        with self._connection() as conn:
            return {user: int(n) for user, n in conn.execute(sql, args).fetchall()}

    @_translating("read relations")
    def relations(self, tenant_id: str, *, subjects: Sequence[tuple[str, str]] | None = None, relations: Sequence[str] | None = None,
                  objects: Sequence[tuple[str, str]] | None = None, object_like: Sequence[tuple[str, str]] | None = None,
                  limit: int = 1000) -> list[RelationTuple]:
        sql, args = relations_sql(tenant_id, subjects=subjects, relations=relations, objects=objects, object_like=object_like,
                                  limit=limit, mark="%s")
        with self._connection() as conn:
            return [RelationTuple(*row) for row in conn.execute(sql, args).fetchall()]

    @_translating("count")
    def count(self, scope: ScopeFilter) -> int:
        where, args = scope_where(scope, M)
        with self._connection() as conn:
            return int(conn.execute(f"SELECT count(*) {FROM_MEMORIES} WHERE {where} AND m.status = 'active'", args).fetchone()[0])

    # playbooks -------------------------------------------------------------------------
    def _bullets(self, conn: Any, scope: ScopeFilter) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        where, args = scope_where(scope, M)
        rows = conn.execute(
            f"SELECT {COLUMNS}, e.vector {FROM_MEMORIES} LEFT JOIN embeddings e ON e.memory_rowid = m.rowid "
            f"WHERE {where} AND m.status = 'active' AND m.section <> '' ORDER BY m.created_at, m.rowid",
            args,
            binary=True,
        ).fetchall()
        return [(_record(r[:-1]), r[-1]) for r in rows]

    @_translating("list bullets")
    def list_bullets(self, scope: ScopeFilter) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        with self._connection() as conn:
            return self._bullets(conn, scope)

    @staticmethod
    def _space_version(conn: Any, scope: Scope) -> int:
        row = conn.execute(
            "SELECT id, generation FROM spaces WHERE tenant_id = %s AND user_id = %s AND agent_id = %s", scope.space
        ).fetchone()
        # The space id is part of it: a space deleted by reset() and created again
        # must not look like the one a reader loaded before.
        return 0 if row is None else (int(row[0]) << 32) + int(row[1])

    @_translating("space version")
    def space_version(self, scope: Scope) -> int:
        with self._connection() as conn:
            return self._space_version(conn, scope)

    # vector search -----------------------------------------------------------------------
    @_translating("vector search")
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
        query = np.ascontiguousarray(vector, dtype=np.float32)
        spaces, space_args = _space_filter(scope)
        with self._connection() as conn:

            def nearest(index: SpaceIndex, unlocked: Callable[[], AbstractContextManager[Any]]) -> list[tuple[str, float]] | None:
                if index.dim != query.shape[0]:
                    return None  # SQL answers (and says what is wrong)
                return index.search(
                    query, k=k, run_id=scope.run_id, cutoff=cutoff, now=now, window=window, speaker=speaker, unlocked=unlocked
                )

            hits = self._from_index(conn, scope, nearest)
            if hits is not None:
                return hits
            dim, name, in_scope, large, in_large = conn.execute(
                "SELECT (SELECT value FROM meta WHERE key = 'embedder_dim'), (SELECT value FROM meta WHERE key = 'embedder_name'), "
                "COALESCE(sum(s.vectors), 0), "
                "COALESCE(array_agg(ARRAY[s.id, s.vectors]) FILTER (WHERE s.vectors > %s), '{}'), "
                f"COALESCE(sum(s.vectors) FILTER (WHERE s.vectors > %s), 0) FROM spaces s WHERE {spaces}",
                [self.exact_below, self.exact_below, *space_args],
            ).fetchone()
            if not in_scope or dim is None:
                return []  # no vector stored in the scope: nothing to find
            if name is not None:
                self._same_embedder(name, dim)
            dim = int(dim)
            if dim != query.shape[0]:
                raise StoreError(f"query vector has {query.shape[0]} dims but the store's vectors have {dim}")
            filters, filter_args = validity_where(cutoff, now, M)
            if window is not None:
                filters += " AND m.created_at >= %s AND m.created_at < %s"
                filter_args += [window[0], window[1]]
            if speaker is not None:
                filters += " AND m.speaker = %s"
                filter_args.append(_escape(speaker))
            where, args = scope_where(scope, M)
            where += filters
            args += filter_args
            # Time windows, speakers and runs narrow the scope through their own
            # indexes: exact. So is a query vector of zeros (no cosine to rank by).
            if k is None or window is not None or speaker is not None or scope.run_id is not None or not np.any(query):
                return self._exact(conn, query, where, args, k)
            size = {int(space_id): int(n) for space_id, n in large}
            # A space this process is loading into its in-process index is searched
            # exactly meanwhile: an HNSW build would only compete with the load (and
            # its searches) for the cores, for an index its searches will not use.
            indexed = self._hnsw.ready(conn, dim, list(size), build=[i for i in size if not self._text.loading(i)]) if size else {}
            hits: list[tuple[str, float]] = []
            for space_id, watermark in indexed.items():
                found = self._hnsw.search(conn, dim, space_id, watermark, query, filters, filter_args, k, size[space_id])
                if len(found) < k:  # the validity filter left too few of the index's candidates
                    return self._exact(conn, query, where, args, k)
                hits += found
            if not indexed:
                nearest = self._nearest(conn, query, spaces, space_args, filters, filter_args, k, int(in_scope))
                return nearest if nearest is not None else self._exact(conn, query, where, args, k)
            if len(indexed) < len(size) or in_large < in_scope:
                # The scope's other spaces (small, or with no index ready yet), exactly.
                hits += self._exact(conn, query, where + " AND m.space_id <> ALL(%s)", [*args, list(indexed)], k)
            return sorted(hits, key=lambda h: -h[1])[:k]

    @staticmethod
    def _nearest(conn: Any, query: np.ndarray, spaces: str, space_args: list[Any], filters: str, filter_args: list[Any], k: int, in_scope: int) -> list[tuple[str, float]] | None:
        """Exact search reading the scope's vectors alone, then only the memories
        that may be returned: about twice as fast as joining every memory first
        (bench/RESULTS.md). None when the validity filter left fewer than ``k`` of
        the candidates while more vectors were left unread."""
        fetch = 2 * k + 16
        rows = conn.execute(
            "SELECT m.id, c.score FROM ("
            "SELECT e.memory_rowid, -(e.vector <#> %b) AS score FROM embeddings e "
            "WHERE e.space_id IN (SELECT s.id FROM spaces s WHERE " + spaces + ") "
            "ORDER BY score DESC, e.memory_rowid LIMIT %s"
            ") c JOIN memories m ON m.rowid = c.memory_rowid WHERE m.status = 'active'" + filters + " "
            "ORDER BY c.score DESC, m.rowid LIMIT %s",
            [query, *space_args, fetch, *filter_args, k],
        ).fetchall()
        if len(rows) < k and in_scope > fetch:
            return None
        return [(mid, float(score)) for mid, score in rows]

    @staticmethod
    def _exact(conn: Any, query: np.ndarray, where: str, args: list[Any], k: int | None) -> list[tuple[str, float]]:
        # The inner product, not the indexed cosine expression: no HNSW index is
        # used here, and for unit vectors the two are the same number.
        sql = (
            "SELECT m.id, -(e.vector <#> %b) AS score FROM memories m JOIN spaces s ON s.id = m.space_id "
            f"JOIN embeddings e ON e.memory_rowid = m.rowid WHERE {where} AND m.status = 'active' "
            "ORDER BY score DESC, m.rowid"
        )
        params: list[Any] = [query, *args]
        if k is not None:
            sql += " LIMIT %s"
            params.append(int(k))
        return [(mid, float(score)) for mid, score in conn.execute(sql, params)]

    @_translating("building vector indexes", decode=False)
    def build_indexes(self) -> list[int]:
        """Build now, and wait for, the HNSW index of every space holding more than
        ``exact_below`` vectors that has none, and put every row added since in its
        space's graph; returns the indexed spaces' ids. Searches have this done in
        the background; a bulk load calls it to have the indexes ready."""
        with self._pool_connection() as conn:
            return self._hnsw.maintain(conn, wait=True)[0]

    @_translating("similarities")
    def similarities(self, scope: ScopeFilter, vector: np.ndarray, memory_ids: Sequence[str]) -> dict[str, float]:
        ids = _lookup_ids(memory_ids)
        if not ids:
            return {}
        query = np.ascontiguousarray(vector, dtype=np.float32)
        with self._connection() as conn:
            found = self._from_index(
                conn, scope, lambda index, _: index.in_run(index.similarities(query, ids), scope.run_id) if index.dim == query.shape[0] else None
            )
            if found is not None:
                return found
            where, args = scope_where(scope, M)
            rows = conn.execute(
                f"{_BY_ID_FIRST} SELECT m.id, -(e.vector <#> %b) FROM wanted m JOIN spaces s ON s.id = m.space_id "
                f"JOIN embeddings e ON e.memory_rowid = m.rowid WHERE {where} AND vector_dims(e.vector) = %s",
                [ids, query, *args, query.shape[0]],
            ).fetchall()
        return {mid: float(score) for mid, score in rows}

    @_translating("created times")
    def created_times(self, scope: ScopeFilter, memory_ids: Sequence[str]) -> dict[str, float]:
        ids = _lookup_ids(memory_ids)
        if not ids:
            return {}
        with self._connection() as conn:
            found = self._from_index(conn, scope, lambda index, _: index.in_run(index.created_times(ids), scope.run_id))
            if found is not None:
                return found
            where, args = scope_where(scope, M)
            rows = conn.execute(
                f"{_BY_ID_FIRST} SELECT m.id, m.created_at FROM wanted m JOIN spaces s ON s.id = m.space_id WHERE {where}",
                [ids, *args],
            ).fetchall()
        return {mid: float(created) for mid, created in rows}

    def _from_index(
        self, conn: Any, scope: ScopeFilter, read: Callable[[SpaceIndex, Callable[[], AbstractContextManager[Any]]], _T | None]
    ) -> _T | None:
        """``read(index, unlocked)`` of the one space ``scope`` sees, from its in-process
        index (memorist.store.postgres.text) in one snapshot; None when SQL answers,
        always inside a write transaction (the indexes hold committed writes only)."""
        if not self._text.enabled or self._local.batch is not None:
            return None
        with snapshot(conn):
            found = self._one_space(conn, scope)
            if found is not None and found.embedder is not None and found.vectors[0] is not None:
                self._same_embedder(found.embedder, found.vectors[0])
            return self._text.read(conn, found, read)

    def _same_embedder(self, name: str, dim: Any) -> None:
        """Refuse a search of vectors another process re-embedded with another model
        since this one bound its own: its query's vector is of the old model."""
        if self._bound is not None and (name, int(dim)) != self._bound:
            raise EmbedderMismatchError(
                f"{self.label} holds vectors of {name} ({int(dim)} dims) now (re-embedded since it was opened); "
                f"this process embeds with {self._bound[0]} ({self._bound[1]} dims): open it again with {name}"
            )

    def _one_space(self, conn: Any, scope: ScopeFilter) -> Space | None:
        """The one space ``scope`` sees (None: none or several), as ``conn``'s snapshot
        holds it; read once per reading block (a search asks for it several times)."""
        spaces, args = _space_filter(scope)
        key = (spaces, tuple(args))
        cache = self._local.spaces if self._local.reading and conn is self._local.conn else None
        if cache is not None and key in cache:
            return cache[key]
        found = one_space(conn, spaces, args)
        if cache is not None:
            cache[key] = found
        return found

    @_translating("speakers")
    def speakers(self, scope: ScopeFilter) -> set[str]:
        spaces, args = _space_filter(scope)
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT DISTINCT m.speaker {FROM_MEMORIES} WHERE {spaces} AND m.status = 'active' AND m.speaker <> ''", args
            ).fetchall()
        return {_unescape(r[0]) for r in rows}

    # full text ---------------------------------------------------------------------------
    @_translating("text search")
    def text_search(self, scope: ScopeFilter, query: str, *, k: int, cutoff: float | None, now: float) -> list[tuple[str, float]]:
        terms = query_terms(query)
        if not terms:
            return []
        spaces, space_args = _space_filter(scope)
        with self._connection() as conn:
            hits = self._from_index(conn, scope, lambda index, _: index.search_text(terms, k=int(k), run_id=scope.run_id, cutoff=cutoff, now=now))
            if hits is not None:
                return hits
            keep, keep_args = validity_where(cutoff, now, M)
            if scope.run_id is not None:
                keep += " AND m.run_id = %s"
                keep_args.append(scope.run_id)
            rows = conn.execute(BM25.format(spaces=spaces, keep=keep), [*space_args, *space_args, tsquery(terms), terms, *keep_args, int(k)]).fetchall()
        return [(mid, float(score)) for mid, score in rows]

    @_translating("loading a full-text index")
    def load_text_index(self, scope: ScopeFilter) -> bool:
        """Load now the in-process full-text index of the one space ``scope`` names,
        whatever its size within ``text_index_rows``; True when its searches are
        ranked in process from now on. Searches load large spaces by themselves (a
        very large one in the background); this warms one ahead of them."""
        spaces, space_args = _space_filter(scope)
        with self._connection() as conn:
            return self._text.load(conn, spaces, space_args)

    # history ---------------------------------------------------------------------------
    def _events(self, where: str, args: Sequence[Any], limit: int | None = None, *, newest_first: bool = False) -> list[EventRecord]:
        sql = f"{_EVENT_COLUMNS} WHERE {where} ORDER BY e.seq{' DESC' if newest_first else ''}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._connection() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [
            EventRecord(
                seq=r[0], ts=r[1], op=r[2], memory_id=r[3],
                scope=Scope(r[9] or "", r[10] or "", r[11] or "", r[4]),
                actor=r[5], old_text=_unescape(r[6]), new_text=_unescape(r[7]), payload=json.loads(r[8]),
            )
            for r in rows
        ]

    @_translating("history")
    def history(self, memory_id: str) -> list[EventRecord]:
        if not _lookup_ids([memory_id]):
            return []
        return self._events("e.memory_id = %s", (memory_id,))

    @_translating("events")
    def events(self, scope: ScopeFilter | None = None, *, since: int = 0, limit: int | None = None, ops: Sequence[str] | None = None,
               newest_first: bool = False, before: int | None = None) -> list[EventRecord]:
        where, args = "e.seq > %s", [since]
        if before is not None:
            where, args = where + " AND e.seq < %s", [*args, before]
        where, args = event_scope_where(where, args, scope, M)
        if ops:
            where += " AND e.op = ANY(%s)"
            args.append(list(ops))
        return self._events(where, args, limit, newest_first=newest_first)

    @_translating("pending turns")
    def pending_turns(self, scope: ScopeFilter | None = None, *, limit: int | None = None) -> list[EventRecord]:
        # One query, as in SQLite: a pending turn is resolved by a later
        # turn_processed event of its space naming it (both on the turns index).
        where = (
            "e.op = 'turn' AND (e.payload::json ->> 'pending') = 'true' AND NOT EXISTS ("
            "SELECT 1 FROM events p WHERE p.space_id IS NOT DISTINCT FROM e.space_id AND p.seq > e.seq "
            "AND p.op = 'turn_processed' AND (p.payload::json ->> 'turn_event') = e.seq::text)"
        )
        where, args = event_scope_where(where, [], scope, M)
        return self._events(where, args, limit)

    @_translating("stats")
    def stats(self, tenant_id: str | None = None) -> dict[str, Any]:
        identity = self.embedder_identity()
        of, args = stats_scope(tenant_id, "%s")
        with self._connection() as conn:
            q = conn.execute
            by_status = dict(q(f"SELECT m.status, count(*) FROM memories m WHERE {of('m')} GROUP BY m.status", args).fetchall())
            by_kind = dict(q(f"SELECT m.kind, count(*) FROM memories m WHERE m.status = 'active' AND {of('m')} GROUP BY m.kind", args).fetchall())
            users = q(USERS_SQL + f" AND {of('s', space=True)}", args).fetchone()[0]
            spaces = q(f"SELECT count(*) FROM spaces s WHERE {of('s', space=True)}", args).fetchone()[0]
            events = q(f"SELECT count(*) FROM events e WHERE {of('e')}", args).fetchone()[0]
            size = q(
                "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                (self.schema,),
            ).fetchone()[0]
            version = pg_schema.schema_version(conn, self.schema, self.label)
        return {
            "path": self.label,
            "schema_version": version,
            "memories": int(by_status.get("active", 0)),
            "deleted": int(by_status.get("deleted", 0)),
            "archived": int(by_status.get("archived", 0)),
            "by_kind": {k: int(v) for k, v in by_kind.items()},
            "users": int(users),
            "spaces": int(spaces),
            "events": int(events),
            "embedder": identity[0] if identity else None,
            "dim": identity[1] if identity else None,
            # Memorist's tables and their indexes (the database may hold others).
            "size_bytes": int(size),
            # This process's in-process full-text indexes of large spaces.
            "text_indexes": self._text.stats(),
        }

    # access clock ------------------------------------------------------------------------
    def touch(self, records: Sequence[MemoryRecord], *, query: str = "") -> None:
        if not records:
            return
        with self._touch_lock:
            by_space: dict[tuple[str, str, str], list[MemoryRecord]] = {}
            for r in records:
                by_space.setdefault(r.scope.space, []).append(r)
            for space, recs in by_space.items():
                self._touches.record(space, recs, query)
            due = len(self._touches) >= FLUSH_EVERY
        if due:
            self._flush_behind()

    def _flush_behind(self) -> None:
        """Write the buffered retrievals from another thread, unless a flush is under
        way: the search that filled the buffer returns without waiting for the write
        (~10 ms for a few hundred touches at 100,000 memories), and searches meanwhile
        buffer theirs without waiting either (bench/RESULTS.md)."""
        if self._pool is None or not self._flush_lock.acquire(blocking=False):
            return  # closed, or a flush under way: the next one writes the rest
        try:
            threading.Thread(target=self._flush_held, name="memorist-touches", daemon=True).start()
        except BaseException:
            self._flush_lock.release()
            raise

    def _flush_held(self) -> None:
        """A background flush, with ``_flush_lock`` taken for it; what it cannot write
        stays buffered for the next flush or write."""
        try:
            if self._pool is not None:
                self._write_touches()
        except Exception as exc:  # noqa: BLE001 (bookkeeping: the next flush tries again)
            error = exc if isinstance(exc, MemoristError) else self._error(exc, "writing retrieval bookkeeping")
            logger.warning("%s (kept for the next write)", error)
        finally:
            self._flush_lock.release()

    def _write_touches(self, conn: Any = None) -> None:
        """Write what is buffered (on ``conn``, else a pool connection) without holding
        ``_touch_lock`` meanwhile (searches go on buffering); what was not committed is
        buffered again, in front of what came since. Call with ``_flush_lock`` held."""
        with self._touch_lock:
            if not len(self._touches):
                return
            taking, self._touches = self._touches, TouchBuffer()
            self._flushing = taking

        def committed() -> None:  # with _touch_lock held: no reader counts them twice
            self._flushing = None

        try:
            with self._pool_connection() if conn is None else nullcontext(conn) as using:
                self._flush_touches(using, taking, committed=committed)
        finally:
            with self._touch_lock:
                if self._flushing is taking:
                    self._flushing = None
                    taking.absorb(self._touches)
                    self._touches = taking

    def _pending_touches(self, space: tuple[str, str, str]) -> int:
        with self._touch_lock:
            return self._touches.pending(space) + (self._flushing.pending(space) if self._flushing is not None else 0)

    def _flush_touches(self, conn: Any, buffer: TouchBuffer, *, committed: Callable[[], None] | None = None) -> int:
        """Write the retrievals ``buffer`` holds in their own transaction (see
        :mod:`memorist.store.touches`); returns how many were written, 0 when the
        spaces were busy. ``committed()`` is called once the transaction committed,
        with ``_touch_lock`` held from before the commit.

        The spaces' writer locks are taken, never waited for (a space a writer holds:
        0): a writer adds nothing to the counts it read, it writes them back, so a
        flush committing between its read and its write would be lost."""
        flushed = len(buffer)
        if not flushed:
            return 0
        counts = buffer.spaces()
        keys = list(counts)
        try:
            with ExitStack() as held, conn.transaction():
                # Bookkeeping, not a memory: it need not wait for the disk, nor for
                # writers that hold these spaces.
                conn.execute(f"SET LOCAL lock_timeout = {_TOUCH_LOCK_TIMEOUT_MS}")
                conn.execute("SET LOCAL synchronous_commit = off")
                # Never waited for: a writer may hold one and wait for another this
                # flush would hold (writers lock spaces as they use them).
                free = conn.execute(
                    "SELECT bool_and(pg_try_advisory_xact_lock(k)) FROM unnest(%s::bigint[]) AS k",
                    ([self._space_key(space) for space in keys],),
                ).fetchone()[0]
                if not free:
                    raise _Busy
                rows = conn.execute(
                    "SELECT s.id, s.tenant_id, s.user_id, s.agent_id FROM spaces s "
                    "JOIN unnest(%s::text[], %s::text[], %s::text[]) AS t(tenant_id, user_id, agent_id) "
                    "ON s.tenant_id = t.tenant_id AND s.user_id = t.user_id AND s.agent_id = t.agent_id "
                    "ORDER BY s.id FOR UPDATE OF s",
                    ([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]),
                ).fetchall()
                ids: dict[Any, int] = {}
                with conn.cursor() as cur:
                    for space_id, tenant, user, agent in rows:
                        key = (tenant, user, agent)
                        ids[key] = int(space_id)
                        clock = conn.execute(
                            "UPDATE spaces SET access_clock = access_clock + %s WHERE id = %s RETURNING access_clock",
                            (counts[key], space_id),
                        ).fetchone()[0]
                        for cls, stamps in buffer.stamps(key, int(clock)).items():
                            stamps = [s for s in stamps if "\x00" not in s[2]]
                            if stamps:
                                # One statement per class; the column name comes from the
                                # fixed class list, never from input.
                                touches, marks, memory_ids = (list(c) for c in zip(*stamps, strict=True))
                                cur.execute(
                                    f"UPDATE memories m SET access_count = m.access_count + v.n, "
                                    f"last_access_{cls} = GREATEST(m.last_access_{cls}, v.stamp) "
                                    "FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) AS v(n, stamp, id) WHERE m.id = v.id",
                                    (touches, marks, memory_ids),
                                )

                    def stored(wanted: list[str]) -> set[str]:  # an erasure elsewhere may have taken them since
                        return {row[0] for row in conn.execute("SELECT id FROM memories WHERE id = ANY(%s::text[])", (wanted,))}

                    entries = [(ts, ids[key], payload) for ts, key, payload in buffer.log_entries(stored) if key in ids]
                    if entries:
                        cur.executemany("INSERT INTO events (ts, op, space_id, payload) VALUES (%s, 'retrieve', %s, %s)", entries)
                if committed is not None:
                    held.enter_context(self._touch_lock)  # let go after the commit and committed()
                    held.push(lambda kind, *_: committed() if kind is None else None)
        except (_Busy, psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected, psycopg.errors.QueryCanceled):
            return 0
        return flushed

    @_translating("access clock")
    def access_clock(self, scope: Scope) -> int:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT access_clock FROM spaces WHERE tenant_id = %s AND user_id = %s AND agent_id = %s", scope.space
            ).fetchone()
        if row is None:
            return 0
        return int(row[0]) + self._pending_touches(scope.space)

    def buffered_uses(self, memory_id: str) -> int:
        with self._touch_lock:
            return self._touches.uses(memory_id) + (self._flushing.uses(memory_id) if self._flushing is not None else 0)

    @_translating("writing retrieval bookkeeping", decode=False)
    def flush(self) -> None:
        """Write buffered retrieval bookkeeping now (unless the spaces are busy), after
        the flush under way in the background, if any."""
        with self._flush_lock:
            self._write_touches()

    # maintenance -------------------------------------------------------------------------
    @_translating("reindex", decode=False)
    def reindex(self, embed: Callable[[list[str]], np.ndarray] | None = None, *, name: str | None = None, dim: int | None = None, progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
        self.flush()
        re_embedded = 0
        with self._pool_connection() as conn:
            with conn.transaction():
                # Writers wait (readers do not) while the terms are written again.
                conn.execute("LOCK TABLE memories, embeddings IN SHARE ROW EXCLUSIVE MODE")
                conn.execute("UPDATE memories SET terms = '', term_count = 0 WHERE status <> 'active' AND (terms <> '' OR term_count <> 0)")
                with conn.cursor(name="memorist_reindex") as rows, conn.cursor() as cur:
                    rows.itersize = 2000
                    rows.execute("SELECT rowid, search_text FROM memories WHERE status = 'active' ORDER BY rowid")
                    rewrite = (
                        "UPDATE memories m SET terms = v.terms::tsvector, term_count = v.n "
                        "FROM unnest(%s::bigint[], %s::text[], %s::int[]) AS v(rowid, terms, n) WHERE m.rowid = v.rowid"
                    )
                    chunk: list[tuple[int, str, int]] = []
                    for rowid, text in rows:
                        chunk.append((rowid, *full_text(_unescape(text))))
                        if len(chunk) >= 2000:
                            cur.execute(rewrite, [list(column) for column in zip(*chunk, strict=True)])
                            chunk = []
                    if chunk:
                        cur.execute(rewrite, [list(column) for column in zip(*chunk, strict=True)])
                conn.execute("UPDATE spaces SET generation = generation + 1")
            if embed is not None:
                with conn.transaction():
                    conn.execute("LOCK TABLE memories, embeddings IN SHARE ROW EXCLUSIVE MODE")
                    rows = conn.execute(
                        "SELECT rowid, space_id, search_text FROM memories WHERE status = 'active' ORDER BY rowid"
                    ).fetchall()
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (pg_schema.lock_key("memorist", self.schema, "identity"),))
                    # The indexes are built again once the vectors are in (faster than
                    # row by row). Searches wait meanwhile: the old vectors cannot
                    # answer the new embedder's queries.
                    hnsw.drop_vector_indexes(conn)
                    conn.execute("TRUNCATE embeddings")
                    conn.execute("UPDATE spaces SET vectors = 0, generation = generation + 1")
                    with conn.cursor() as cur:
                        for start in range(0, len(rows), 256):
                            chunk = rows[start : start + 256]
                            vectors = np.asarray(embed([_unescape(r[2]) for r in chunk]), dtype=np.float32)
                            cur.executemany(
                                "INSERT INTO embeddings (memory_rowid, space_id, vector) VALUES (%s, %s, %b)",
                                [(r[0], r[1], vectors[i]) for i, r in enumerate(chunk)],
                            )
                            re_embedded += len(chunk)
                            if progress:
                                progress(re_embedded, len(rows))
                    if name is not None and dim is not None:
                        self._write_identity(conn, name, dim)
                    seq = conn.execute(
                        "INSERT INTO events (ts, op, payload) VALUES (%s, 'reindex', %s) RETURNING seq",
                        (time.time(), dumps({"embedder": name, "re_embedded": re_embedded})),
                    ).fetchone()[0]
                    # Every process's in-process indexes reload (no event of a space names these vectors).
                    pg_schema.set_meta(conn, **{VECTORS_REWRITTEN: str(seq)})
            indexed = conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0]
        if embed is not None and name is not None and dim is not None:
            self._bound = (name, dim)  # the store is the new embedder's, and so is this process's writing
        self.build_indexes()  # the large spaces' HNSW indexes, missing or damaged ones too
        return {"indexed": int(indexed), "re_embedded": re_embedded}

    @_translating("adopting records", decode=False)
    def adopt(self, moves: Sequence[tuple[str, str]], *, user_id: str | None = None, actor: str = "",
              payload: dict[str, Any] | None = None) -> dict[str, int]:
        counts = {"memories": 0, "spaces": 0, "merged": 0}
        with self.transaction() as batch:
            assert isinstance(batch, _PostgresBatch)
            conn = batch._conn
            for source, target in moves:
                sql = "SELECT id, user_id, agent_id FROM spaces WHERE tenant_id = %s"
                args: list[Any] = [source]
                if user_id is not None:
                    sql += " AND user_id = %s"
                    args.append(user_id)
                for space, user, agent in conn.execute(sql + " ORDER BY id", args).fetchall():
                    # Writers of either space wait (the advisory locks every write takes).
                    batch._lock_all([(source, user, agent), (target, user, agent)])
                    n = conn.execute("SELECT count(*) FROM memories WHERE space_id = %s", (space,)).fetchone()[0]
                    if not n:
                        continue  # nothing it owns: its events stay where they are
                    row = conn.execute(
                        "SELECT id FROM spaces WHERE tenant_id = %s AND user_id = %s AND agent_id = %s", (target, user, agent)
                    ).fetchone()
                    if row is None and (user or agent):
                        # The space itself changes tenant: its memories, vectors and events follow.
                        conn.execute("UPDATE spaces SET tenant_id = %s, generation = generation + 1 WHERE id = %s", (target, space))
                        counts["spaces"] += 1
                    else:
                        # The target exists (or this is the tenant's own space, which holds
                        # the tenant's configuration): the memories move into it.
                        into = int(row[0]) if row is not None else batch._space(Scope(target, user, agent))
                        conn.execute("UPDATE memories SET space_id = %s WHERE space_id = %s", (into, space))
                        conn.execute("UPDATE embeddings SET space_id = %s WHERE space_id = %s", (into, space))
                        conn.execute("UPDATE spaces SET generation = generation + 1 WHERE id IN (%s, %s)", (space, into))
                        counts["merged"] += 1
                    counts["memories"] += int(n)
            if counts["memories"]:  # a run that moved nothing leaves no trace
                batch.event("adopt", Scope(moves[0][1]), actor=actor, payload={**(payload or {}), **counts})
        self._text.forget()
        return counts

    @_translating("reset", decode=False)
    def reset(self) -> None:
        with self._flush_lock, self._touch_lock:
            self._touches.clear()
        with self._pool_connection() as conn, conn.transaction():
            # Event seqs and space ids are never reused (readers keep positions in the
            # log and space versions), so the sequences go on.
            conn.execute("TRUNCATE embeddings, memories, events, spaces, relations")
            conn.execute("DELETE FROM meta WHERE key IN ('embedder_name', 'embedder_dim')")
            hnsw.drop_vector_indexes(conn)
        self._text.forget()

    @_translating("erase", decode=False)
    def erase(
        self,
        owners: Sequence[ScopeFilter],
        *,
        dry_run: bool = False,
        log: Scope | None = None,
        describe: Callable[[Erased], dict[str, Any]] | None = None,
    ) -> Erased:
        # The searches under way end first, and new ones wait for the erasure (gate.py).
        with self._gate.erasure() if not dry_run else nullcontext():
            return self._erase(owners, dry_run=dry_run, log=log, describe=describe)

    def _erase(
        self,
        owners: Sequence[ScopeFilter],
        *,
        dry_run: bool,
        log: Scope | None,
        describe: Callable[[Erased], dict[str, Any]] | None,
    ) -> Erased:
        if not dry_run:
            # Buffered retrievals are logged now, to be blanked with the rest, after the
            # flush under way, if any (it would log the owners' queries after the
            # blanking). What cannot be written now stays buffered until the erasure
            # commits, below.
            with self._flush_lock:
                self._write_touches()
        with self._pool_connection() as conn:
            if dry_run:
                with conn.transaction():
                    owned = self._owned(conn, owners)
                    changed_by_runs = self._changed_by_runs(conn, owned)
                    counts = self._erased(conn, owned, changed_by_runs)
                    wider = self._wider(conn, owners, frozenset(changed_by_runs))
                    return Erased(counts.memories, counts.vectors, counts.events + len(wider), counts.spaces)
            with conn.transaction():
                owned = self._owned(conn, owners, lock=True)
                changed_by_runs = self._changed_by_runs(conn, owned)
                counts = self._erased(conn, owned, changed_by_runs)
                changed = 0
                for spaces, run in owned:
                    where, args = "space_id = ANY(%s)", [spaces]
                    if run is not None:
                        where += " AND run_id = %s"
                        args.append(run)
                    conn.execute(f"DELETE FROM embeddings WHERE memory_rowid IN (SELECT rowid FROM memories WHERE {where})", args)
                    changed += conn.execute(f"DELETE FROM memories WHERE {where}", args).rowcount
                    changed += conn.execute(
                        f"UPDATE events SET old_text = NULL, new_text = NULL, payload = %s WHERE {where} "
                        "AND NOT (old_text IS NULL AND new_text IS NULL AND payload IS NOT DISTINCT FROM %s)",
                        [TOMBSTONE, *args, TOMBSTONE],
                    ).rowcount
                    conn.execute("UPDATE spaces SET generation = generation + 1 WHERE id = ANY(%s)", (spaces,))
                # Memories of other runs that a turn of an erased run changed or
                # deleted hold its words: they go whole, with their history.
                if changed_by_runs:
                    conn.execute("DELETE FROM embeddings WHERE memory_rowid IN (SELECT rowid FROM memories WHERE id = ANY(%s))", (changed_by_runs,))
                    changed += conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (changed_by_runs,)).rowcount
                    changed += conn.execute(
                        "UPDATE events SET old_text = NULL, new_text = NULL, payload = %s WHERE memory_id = ANY(%s) "
                        "AND NOT (old_text IS NULL AND new_text IS NULL AND payload IS NOT DISTINCT FROM %s)",
                        (TOMBSTONE, changed_by_runs, TOMBSTONE),
                    ).rowcount
                # Copies of the owner's memories logged beyond its spaces (the undo
                # snapshots of an operation run over a wider scope) go too.
                wider = self._wider(conn, owners, frozenset(changed_by_runs))
                if wider:
                    changed += conn.execute(
                        "UPDATE events SET old_text = NULL, new_text = NULL, payload = %s WHERE seq = ANY(%s) "
                        "AND NOT (old_text IS NULL AND new_text IS NULL AND payload = %s)",
                        (TOMBSTONE, wider, TOMBSTONE),
                    ).rowcount
                    counts = Erased(counts.memories, counts.vectors, counts.events + len(wider), counts.spaces)
                if changed:
                    # Owed until the tables are rewritten: a process that dies between
                    # this commit and the scrub leaves the text in dead row versions,
                    # and the next erasure (even one changing no row) rewrites them.
                    pg_schema.set_meta(conn, scrub_owed=str(time.time()))
                else:
                    changed = conn.execute("SELECT 1 FROM meta WHERE key = 'scrub_owed'").fetchone() is not None
                # Logged even without ``log`` (then in no space): the event is what tells
                # other processes that their text indexes hold memories no later event names.
                space = None if log is None else _PostgresBatch(self, conn)._space(log, bump=False)
                logged = int(conn.execute(
                    "INSERT INTO events (ts, op, space_id, run_id, actor, payload) VALUES (%s, 'erase', %s, %s, 'erase', %s) RETURNING seq",
                    (time.time(), space, "" if log is None else log.run_id, dumps(describe(counts) if describe else {})),
                ).fetchone()[0])
                seq = None if log is None else logged
            with self._touch_lock:
                # The owners' retrievals still buffered (their spaces were busy above,
                # or searches made them during the erasure) go: a flush after an owner
                # came back would log their queries. The others' stay.
                self._touches.drop(lambda space: any(_owns(owner, space) for owner in owners))
            for spaces, _ in owned:
                for space in spaces:
                    self._text.forget(space)
            # An erasure that changed no row (an owner erased before, or none) has
            # nothing to scrub, unless an earlier one's scrub is still owed.
            scrub = self._scrub_tables(conn) if changed else {"complete": True, "vacuum": "not needed (no row changed)"}
            if changed and scrub["complete"]:
                conn.execute("DELETE FROM meta WHERE key = 'scrub_owed'")
        return Erased(counts.memories, counts.vectors, counts.events, counts.spaces, seq, scrub)

    @staticmethod
    def _wider(conn: Any, owners: Sequence[ScopeFilter], memories: Collection[str] = ()) -> list[int]:
        """Events outside the owners' spaces that keep a copy of their memories, or of
        ``memories`` (other runs' memories an erased run changed), other than those
        memories' own events (:func:`~memorist.store.base.holds_text_of`)."""
        rows = conn.execute(
            "SELECT e.seq, e.memory_id, e.payload, s.tenant_id, s.user_id, s.agent_id, e.run_id FROM events e JOIN spaces s ON s.id = e.space_id "
            "WHERE s.tenant_id = ANY(%s) AND e.payload LIKE %s",
            ([o.tenant_id for o in owners], '%"undo"%'),
        ).fetchall()
        return [
            int(seq) for seq, memory, payload, *where in rows
            if not any(o.matches(Scope(*where)) for o in owners) and memory not in memories and holds_text_of(json.loads(payload), owners, memories)
        ]

    def _owned(self, conn: Any, owners: Sequence[ScopeFilter], *, lock: bool = False) -> list[tuple[list[int], str | None]]:
        """For each owner with a space: its spaces' ids and its run (None: every run).
        With ``lock``, the spaces are locked as a writer's are (in one order)."""
        out = []
        for owner in owners:
            where, args = "tenant_id = %s", [owner.tenant_id]
            for column, value in (("user_id", owner.user_id), ("agent_id", owner.agent_id)):
                if value is not None:
                    where += f" AND {column} = %s"
                    args.append(value)
            rows = conn.execute(f"SELECT id, tenant_id, user_id, agent_id FROM spaces WHERE {where} ORDER BY id", args).fetchall()
            if not rows:
                continue
            if lock:
                for key in sorted(self._space_key((r[1], r[2], r[3])) for r in rows):
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            out.append(([int(r[0]) for r in rows], owner.run_id))
        return out

    @staticmethod
    def _changed_by_runs(conn: Any, owned: list[tuple[list[int], str | None]]) -> list[str]:
        """The memories of other runs that a turn of an owner's run changed or deleted
        (their events name that turn), and those they were consolidated into since:
        they hold what was said in it."""
        found: list[str] = []
        for spaces, run in owned:
            if run is not None:
                found += [r[0] for r in conn.execute(changed_by_run_sql("%s", "= ANY(%s)", json=POSTGRES_JSON), (spaces, run, TURN_NAMED, spaces, run))]
                found += [r[0] for r in conn.execute(lineage_changed_by_run_sql("%s", "= ANY(%s)", postgres=True), (spaces, run))]
        return with_consolidations(found, lambda ids: [r[0] for r in conn.execute(consolidated_into_sql("= ANY(%s)", postgres=True), (ids,))])

    @staticmethod
    def _erased(conn: Any, owned: list[tuple[list[int], str | None]], changed_by_runs: Sequence[str] = ()) -> Erased:
        memories: dict[tuple[str, str, bool], int] = {}
        vectors = events = 0
        spaces: set[int] = set()
        # (the memories' condition, its arguments)
        kept: list[tuple[str, list[Any]]] = []
        for ids, run in owned:
            spaces.update(ids)
            where, args = "m.space_id = ANY(%s)", [ids]
            if run is not None:
                where += " AND m.run_id = %s"
                args.append(run)
            kept.append((where, args))
        if changed_by_runs:
            kept.append(("m.id = ANY(%s)", [list(changed_by_runs)]))
        for where, args in kept:
            rows = conn.execute(
                "SELECT s.tenant_id, m.kind, m.section <> '', count(*), count(e.memory_rowid) FROM memories m "
                "JOIN spaces s ON s.id = m.space_id LEFT JOIN embeddings e ON e.memory_rowid = m.rowid "
                f"WHERE {where} GROUP BY 1, 2, 3",
                args,
            ).fetchall()
            for tenant, kind, bullet, n, vectored in rows:
                key = (tenant, kind, bool(bullet))
                memories[key] = memories.get(key, 0) + int(n)
                vectors += int(vectored)
            events += conn.execute(f"SELECT count(*) FROM events e WHERE {where.replace('m.id', 'e.memory_id').replace('m.', 'e.')}", args).fetchone()[0]
        return Erased(memories, vectors, int(events), len(spaces))

    def _scrub_tables(self, conn: Any) -> dict[str, Any]:
        """After an erasure: rewrite the touched tables (VACUUM FULL), so that no dead
        row version keeps the erased text in their files or their indexes, and the
        planner's statistics (pg_statistic, which samples their values), then ask for
        a checkpoint. What PostgreSQL cannot promise is in the documentation
        (docs/erasure.md): its write-ahead log keeps the old rows until it is
        recycled, and a backup or replica keeps what it copied."""
        tables = ("memories", "embeddings", "events")
        try:
            conn.execute(f"VACUUM (FULL, ANALYZE) {', '.join(tables)}")
        except psycopg.Error as exc:
            # The erasure committed; only its scrub waits. Said in the result, not
            # raised: the caller must not take the erasure for undone.
            reason = self._scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            return {"complete": False, "vacuum": f"not done ({reason}): run VACUUM FULL memories, embeddings, events",
                    "tables": list(tables)}
        # The planner's statistics: an ANALYZE before the erasure (autovacuum's, or an
        # earlier erasure's) sampled its text into pg_statistic, whose old row versions
        # the ANALYZE above left dead in that catalog's file. Rewritten too: the
        # database's owner may (PostgreSQL skips it with a warning for anyone else).
        skipped: list[str] = []

        def notice(diagnostic: Any) -> None:
            if "skipping" in (diagnostic.message_primary or ""):
                skipped.append(diagnostic.message_primary)

        conn.add_notice_handler(notice)
        try:
            conn.execute("VACUUM (FULL) pg_catalog.pg_statistic")
        except psycopg.Error as exc:
            skipped.append(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        finally:
            conn.remove_notice_handler(notice)
        try:
            conn.execute("CHECKPOINT")
            checkpoint = "done"
        except psycopg.errors.InsufficientPrivilege:
            checkpoint = "not allowed for this database user (the server's next checkpoint writes the files)"
        if skipped:
            return {"complete": False, "vacuum": "full", "tables": list(tables), "checkpoint": checkpoint,
                    "statistics": f"not rewritten ({self._scrub(skipped[0])}): as the database's owner or a superuser, "
                                  "run VACUUM FULL pg_catalog.pg_statistic"}
        return {"complete": True, "vacuum": "full", "tables": list(tables), "checkpoint": checkpoint, "statistics": "rewritten"}

    def close(self) -> None:
        pool = self._pool
        if pool is None:
            return
        self._text.close()
        try:
            self.flush()
        except StoreError:
            pass  # bookkeeping only: closing must not fail for it
        finally:
            self._pool = None
            pool.close()


class _Busy(Exception):
    """A space whose retrievals a flush would write is held by a writer."""


def _owns(owner: ScopeFilter, space: tuple[str, str, str]) -> bool:
    """Whether erasing ``owner`` may erase memories of ``space`` (any of its runs)."""
    return dataclasses.replace(owner, run_id=None).matches(Scope(*space))


@functools.lru_cache(maxsize=65_536)
def _space_lock_key(schema: str, tenant_id: str, user_id: str, agent_id: str) -> int:
    return pg_schema.lock_key("memorist", schema, "space", tenant_id, user_id, agent_id)


__all__ = ["PostgresStore"]


#: Metadata keys in PostgreSQL's jsonb operators (``x.j``: the row's metadata parsed
#: once); a key holding a NUL names nothing stored (PostgreSQL text holds none).
#: Metadata is stored as text: a row whose text jsonb refuses (a value it cannot
#: hold) is kept, for the filter to decide; OFFSET 0 keeps the planner from inlining
#: the parse into every use of x.j, so each row is parsed once.
_JSONB = JsonDialect(
    path=lambda key: None if "\x00" in key else key, value=f"(x.j -> {M})", text=f"(x.j ->> {M})",
    kind=f"jsonb_typeof(x.j -> {M})", string="string", numbers="'number'", boolean=f"(x.j -> {M}) = '{{b}}'::jsonb",
    number=f"to_jsonb({M}::numeric)", number_arg=repr, collate=' COLLATE "C"', mark=M, octets="octet_length({t})",
    rows=(" CROSS JOIN LATERAL (SELECT CASE WHEN pg_input_is_valid(m.metadata, 'jsonb') THEN m.metadata::jsonb END"
          " AS j OFFSET 0) x"),
    unparsed="x.j IS NULL",
)
