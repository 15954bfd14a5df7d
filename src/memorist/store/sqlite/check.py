"""Integrity check and online backup of a SQLite store (``memorist check``, ``memorist backup``).

:func:`check_store` reads a store through its own read-only connection, inside one
read transaction (one snapshot, so a process writing meanwhile can neither disturb
it nor be blocked by it), and reports problems instead of raising: a file that does
not even open is a problem too. It runs SQLite's ``integrity_check`` (or
``quick_check``) and checks what Memorist itself promises:

- the schema is the one this Memorist writes (version, tables, indexes, triggers);
- every row decodes (UTF-8 text, known kind/class/tier/status, JSON columns), its
  content hash matches its text and its scope key its space;
- every active memory is in the full-text index, and the index holds nothing else;
  the index itself reads back whole and agrees with its document sizes;
- once the store has an embedder identity, every active memory has one vector of
  that dimension, finite and of unit length (embedders normalise); no vector
  belongs to a missing or inactive memory, or without an identity;
- the event log: every memory has its ``add`` event, no event names a missing
  memory or space, payloads are JSON, and the sequence counter is ahead of every
  seq (so new events never reuse a number).

:func:`backup_store` copies a store with SQLite's online backup API: one read
transaction on the source, so the copy is one consistent state even while another
process writes, then checks the copy before putting it in place.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import CorruptStoreError, StoreError, ValidationError
from ...model import ADDRESSED_KINDS, Kind, MemoryClass, Scope, Status, Tier
from ...policies.text import content_hash
from ..base import TOMBSTONE
from ..codec import scope_key
from .errors import is_busy, is_corrupt
from .schema import SCHEMA_VERSION

_EXAMPLES = 5
_SQLITE_MESSAGES = 100  # integrity_check stops after this many
_TABLES = ("meta", "spaces", "memories", "embeddings", "events", "memories_fts")
_INDEXES = ("memories_space", "memories_hash", "embeddings_space", "events_memory", "events_space")
_TRIGGERS = ("events_no_update", "memories_fts_insert", "memories_fts_delete", "memories_fts_update")
_KINDS = {k.value for k in Kind}
_CLASSES = {c.value for c in MemoryClass}
_TIERS = {t.value for t in Tier}
_STATUSES = {s.value for s in Status}
_REINDEX = "`memorist reindex` rebuilds the full-text index from the memories"
_REEMBED = "`memorist reindex --embedder <the store's embedder>` rebuilds every vector"
_RESTORE = "restore the last backup (`memorist backup` makes one); SQLite's `.recover` may save rows"


@dataclass
class Problem:
    """One kind of problem found, with how many rows (or messages) show it."""

    check: str
    message: str
    count: int = 1
    examples: list[str] = field(default_factory=list)

    def to_item(self) -> dict[str, Any]:
        return {"check": self.check, "problem": self.message, "count": self.count, "examples": self.examples}


class _Report:
    def __init__(self, path: str, quick: bool) -> None:
        self.path = path
        self.quick = quick
        self.problems: list[Problem] = []
        self.notes: list[str] = []  # what is not damage but worth saying (an older schema)
        self.counts: dict[str, int] = {}
        self.schema_version: int | None = None
        self.embedder: tuple[str, int] | None = None
        self.has_fts = False

    def add(self, check: str, message: str, items: Iterable[Any] = (), *, count: int | None = None) -> None:
        items = list(items)
        n = count if count is not None else max(len(items), 1)
        self.problems.append(Problem(check, message, n, [str(i) for i in items[:_EXAMPLES]]))

    def result(self, started: float) -> dict[str, Any]:
        return {
            "path": self.path,
            "healthy": not self.problems,
            "quick": self.quick,
            "schema_version": self.schema_version,
            "embedder": self.embedder[0] if self.embedder else None,
            "dim": self.embedder[1] if self.embedder else None,
            "counts": self.counts,
            "problems": [p.to_item() for p in self.problems],
            "notes": self.notes,
            "seconds": round(time.monotonic() - started, 3),
        }


def _uri(path: str, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + ("?" + query if query else "")


def connect_reader(path: str, timeout: float) -> sqlite3.Connection:
    """A connection that cannot change the store (``query_only``).

    Not a read-only (``mode=ro``) one: that cannot remove the ``-wal`` and ``-shm``
    files it makes next to a closed store, while this one, closing last, tidies
    them away like any Memorist connection (its checkpoint moves committed pages
    only). ``mode=rw``: a missing file is an error, never a new empty store.
    """
    conn = sqlite3.connect(_uri(path, mode="rw"), uri=True, isolation_level=None, timeout=timeout, check_same_thread=False)
    conn.execute("PRAGMA query_only = 1")
    return conn


@contextlib.contextmanager
def _writable_temp(conn: sqlite3.Connection) -> Iterator[None]:
    """Lift ``query_only`` for a moment (to make a temp table), then restore it."""
    prior = conn.execute("PRAGMA query_only").fetchone()[0]
    conn.execute("PRAGMA query_only = 0")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA query_only = {int(prior)}")


def check_store(path: str, *, quick: bool = False, conn: sqlite3.Connection | None = None, busy_timeout: float = 30.0) -> dict[str, Any]:
    """Check the store at ``path`` (or on ``conn``, an open connection to it).

    Returns ``{"path", "healthy", "quick", "schema_version", "embedder", "dim",
    "counts", "problems": [{"check", "problem", "count", "examples"}], "seconds"}``;
    ``healthy`` is True when no problem was found. Never raises for what it finds:
    a file that cannot be opened is reported as an ``open`` problem.
    """
    started = time.monotonic()
    report = _Report(str(path), quick)
    own = conn is None
    if own:
        if str(path) == ":memory:":
            report.add("open", "an in-memory store can only be checked through its Memory (Memory.check())")
            return report.result(started)
        if not os.path.isfile(path):
            report.add("open", f"no store file at {path}")
            return report.result(started)
        try:
            conn = connect_reader(str(path), busy_timeout)
        except sqlite3.Error as exc:
            report.add("open", f"cannot open {path}: {exc}")
            return report.result(started)
    assert conn is not None
    try:
        _check(conn, report)
    finally:
        if own:
            conn.close()
    return report.result(started)


def _failure(exc: BaseException) -> str:
    if is_corrupt(exc):
        return f"SQLite reports damage: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _check(conn: sqlite3.Connection, report: _Report) -> None:
    # The full-text index is read back through fts5vocab, a virtual table of the
    # connection's temp schema (so even a read-only connection can make it).
    vocab = f"memorist_check_{uuid.uuid4().hex[:8]}"
    try:
        objects = {(r[0], r[1]) for r in conn.execute("SELECT type, name FROM sqlite_master")}
    except sqlite3.Error as exc:
        report.add("open", f"not a readable SQLite database: {_failure(exc)}; {_RESTORE}")
        return
    report.has_fts = has_vocab = ("table", "memories_fts") in objects
    if has_vocab:
        try:
            with _writable_temp(conn):
                conn.execute(f"CREATE VIRTUAL TABLE temp.{vocab} USING fts5vocab(main, memories_fts, 'instance')")
        except sqlite3.Error as exc:
            has_vocab = False
            report.add("fts", f"the full-text index cannot be opened: {_failure(exc)}; {_REINDEX}")
    conn.execute("BEGIN")  # one snapshot for every check below
    try:
        if not _schema(conn, report, objects):
            return
        _guarded(report, "sqlite", lambda: _sqlite(conn, report))
        _guarded(report, "rows", lambda: _memories(conn, report, vocab if has_vocab else None))
        _guarded(report, "events", lambda: _events(conn, report))
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("COMMIT")
        if has_vocab:
            with contextlib.suppress(sqlite3.Error), _writable_temp(conn):
                conn.execute(f"DROP TABLE temp.{vocab}")


def _guarded(report: _Report, check: str, run: Any) -> None:
    """Run one group of checks; a read that fails part-way is itself a problem."""
    try:
        run()
    except (sqlite3.Error, ValueError, KeyError, OverflowError) as exc:
        report.add(check, f"reading the store failed: {_failure(exc)}; {_RESTORE}")


def _schema(conn: sqlite3.Connection, report: _Report, objects: set[tuple[str, str]]) -> bool:
    """Schema version and objects; False when nothing more can be checked."""
    if ("table", "meta") not in objects:
        tables = sorted(name for kind, name in objects if kind == "table")
        report.add("schema", "not a Memorist store (no meta table)" + (f"; its tables: {', '.join(tables[:8])}" if tables else ": the database is empty"))
        return False
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error as exc:
        report.add("schema", f"the meta table cannot be read: {_failure(exc)}; {_RESTORE}")
        return False
    try:
        version = int(meta.get("schema_version", 0))
    except (TypeError, ValueError):
        report.add("schema", f"the schema version is not a number: {meta.get('schema_version')!r}")
        return False
    report.schema_version = version
    if version > SCHEMA_VERSION:
        report.add("schema", f"schema version {version} is newer than this Memorist understands ({SCHEMA_VERSION}); upgrade memorist")
        return False
    if version < SCHEMA_VERSION:
        # Not damage: a store of an earlier release, which any other command migrates.
        report.notes.append(f"schema version {version} is older than this Memorist's ({SCHEMA_VERSION}); opening the store "
                            "with Memorist (any other command) migrates it")
    missing = [f"table {n}" for n in _TABLES if ("table", n) not in objects]
    missing += [f"index {n}" for n in _INDEXES if ("index", n) not in objects]
    if version >= 2:
        missing += [f"trigger {n}" for n in _TRIGGERS if ("trigger", n) not in objects]
    elif ("trigger", "events_no_update") not in objects:
        missing.append("trigger events_no_update")
    if missing:
        report.add("schema", "objects of the schema are missing", missing, count=len(missing))
    if "embedder_name" in meta:
        try:
            report.embedder = (str(meta["embedder_name"]), int(meta.get("embedder_dim", "")))
        except ValueError:
            report.add("schema", f"the embedder dimension is not a number: {meta.get('embedder_dim')!r}")
    return not any(f"table {n}" in missing for n in ("spaces", "memories", "embeddings", "events"))


def _sqlite(conn: sqlite3.Connection, report: _Report) -> None:
    pragma = "quick_check" if report.quick else "integrity_check"
    try:
        rows = [r[0] for r in conn.execute(f"PRAGMA {pragma}({_SQLITE_MESSAGES})")]
    except sqlite3.Error as exc:
        report.add("sqlite", f"SQLite's {pragma} could not finish: {_failure(exc)}; {_RESTORE}")
        return
    if rows != ["ok"]:
        more = "+" if len(rows) >= _SQLITE_MESSAGES else ""
        report.add("sqlite", f"SQLite's {pragma} found damage ({len(rows)}{more} messages); {_RESTORE}", rows, count=len(rows))
    broken = conn.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        report.add("spaces", "rows name a space (or memory) that does not exist", [f"{r[0]} rowid {r[1]} -> {r[2]}" for r in broken], count=len(broken))


def _utf8(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")  # strict: damage shows as invalid UTF-8
    if value is None:
        return ""
    return str(value)


def _memories(conn: sqlite3.Connection, report: _Report, vocab: str | None) -> None:
    spaces = {
        r[0]: (r[1], r[2], r[3])
        for r in conn.execute("SELECT id, CAST(tenant_id AS BLOB), CAST(user_id AS BLOB), CAST(agent_id AS BLOB) FROM spaces")
    }
    names: dict[int, str] = {}
    undecodable: list[str] = []
    bad_hash: list[str] = []
    bad_scope: list[str] = []
    active: set[int] = set()
    status_of: dict[int, tuple[str, int]] = {}
    by_status: dict[str, int] = {}
    # Text columns as bytes: invalid UTF-8 (damage) is a finding, not an exception.
    rows = conn.execute(
        "SELECT rowid, CAST(id AS BLOB), space_id, CAST(run_id AS BLOB), CAST(scope_key AS BLOB), CAST(text AS BLOB), "
        "kind, memory_class, tier, status, content_hash, "
        "json_valid(tags) AND json_valid(metadata) AND json_valid(lineage) FROM memories"
    )
    for rowid, mid, space, run, key, text, kind, cls, tier, status, digest, json_ok in rows:
        try:
            name = _utf8(mid)
        except UnicodeDecodeError:
            name = f"rowid {rowid}"
        names[rowid] = name
        status_of[rowid] = (str(status), space)
        by_status[str(status)] = by_status.get(str(status), 0) + 1
        if status == "active":
            active.add(rowid)
        try:
            body = _utf8(text)
            run_id = _utf8(run)
            stored_key = _utf8(key)
        except UnicodeDecodeError:
            undecodable.append(f"{name}: text is not UTF-8")
            continue
        if kind not in _KINDS or cls not in _CLASSES or tier not in _TIERS or status not in _STATUSES:
            undecodable.append(f"{name}: kind/class/tier/status {kind!r}/{cls!r}/{tier!r}/{status!r}")
            continue
        if not json_ok:
            undecodable.append(f"{name}: tags, metadata or lineage is not JSON")
            continue
        if digest != content_hash(body) and kind not in ADDRESSED_KINDS:
            bad_hash.append(name)
        owner = spaces.get(space)
        if owner is not None:
            try:
                expected = scope_key(Scope(*(_utf8(v) for v in owner), run_id))
            except UnicodeDecodeError:
                undecodable.append(f"space {space}: ids are not UTF-8")
                continue
            if stored_key != expected:
                bad_scope.append(name)
    report.counts.update(
        memories=sum(by_status.values()),
        active=len(active),
        deleted=by_status.get("deleted", 0),
        archived=by_status.get("archived", 0),
        spaces=len(spaces),
    )
    if undecodable:
        report.add("rows", f"memory rows that cannot be decoded (damage, or a foreign writer); {_RESTORE}", undecodable, count=len(undecodable))
    if bad_hash:
        report.add("rows", f"memory texts that do not match their content hash (changed outside Memorist, or damaged); {_RESTORE}", bad_hash, count=len(bad_hash))
    if bad_scope:
        report.add("fts", f"memories whose full-text scope key does not match their scope (search would miss them); {_REINDEX}", bad_scope, count=len(bad_scope))
    if report.has_fts:
        _guarded(report, "fts", lambda: _fts(conn, report, active, names, vocab))
    _guarded(report, "vectors", lambda: _vectors(conn, report, active, status_of, names))


def _label(names: dict[int, str], rowids: Iterable[int]) -> list[str]:
    return [names.get(r, f"rowid {r}") for r in sorted(rowids)[:_EXAMPLES]]


def _varints(blob: bytes) -> list[int]:
    """FTS5's document sizes: SQLite varints, one per column."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for n in range(9):
            byte = blob[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def _fts(conn: sqlite3.Connection, report: _Report, active: set[int], names: dict[int, str], vocab: str | None) -> None:
    sizes = {r[0]: r[1] for r in conn.execute("SELECT id, sz FROM memories_fts_docsize")}
    report.counts["fts_documents"] = len(sizes)
    missing = active - sizes.keys()
    extra = sizes.keys() - active
    if missing:
        report.add("fts", f"active memories missing from the full-text index (search cannot find them by words); {_REINDEX}", _label(names, missing), count=len(missing))
    if extra:
        report.add("fts", f"full-text index entries without an active memory; {_REINDEX}", _label(names, extra), count=len(extra))
    if vocab is None:
        return
    # Every posting of the index, read back: damaged index pages fail here, and the
    # token count of each document must be the one its size record says.
    counted: dict[tuple[int, str], int] = {}
    for doc, col, n in conn.execute(f"SELECT doc, col, count(*) FROM temp.{vocab} GROUP BY doc, col"):
        counted[(doc, col)] = n
    columns = ("search_text", "scope_key")
    disagree = []
    for doc, blob in sizes.items():
        lengths = _varints(blob) if isinstance(blob, bytes) else []
        if len(lengths) != len(columns) or any(counted.get((doc, c), 0) != lengths[i] for i, c in enumerate(columns)):
            disagree.append(doc)
    orphans = {doc for doc, _ in counted} - sizes.keys()
    if disagree or orphans:
        bad = set(disagree) | orphans
        report.add("fts", f"the full-text index disagrees with its own document sizes (damaged index); {_REINDEX}", _label(names, bad), count=len(bad))


def _vectors(conn: sqlite3.Connection, report: _Report, active: set[int], status_of: dict[int, tuple[str, int]], names: dict[int, str]) -> None:
    identity = report.embedder
    dim = identity[1] if identity else None
    present: set[int] = set()
    orphan, inactive, wrong_space, wrong_dim, invalid = [], [], [], [], []
    for rowid, space, blob in conn.execute("SELECT memory_rowid, space_id, vector FROM embeddings"):
        present.add(rowid)
        owner = status_of.get(rowid)
        if owner is None:
            orphan.append(rowid)
            continue
        if owner[0] != "active":
            inactive.append(rowid)
        if owner[1] != space:
            wrong_space.append(rowid)
        if not isinstance(blob, bytes) or dim is None or len(blob) != dim * 4:
            wrong_dim.append(rowid)
            continue
        vector = np.frombuffer(blob, dtype=np.float32)
        if not np.isfinite(vector).all():
            invalid.append(rowid)
            continue
        norm = float(np.linalg.norm(vector.astype(np.float64)))
        if norm != 0.0 and not math.isclose(norm, 1.0, abs_tol=1e-3):
            invalid.append(rowid)
    report.counts["vectors"] = len(present)
    if present and identity is None:
        report.add("vectors", "vectors are stored but the store records no embedder identity; " + _REEMBED, _label(names, present), count=len(present))
    elif wrong_dim:
        report.add("vectors", f"vectors whose size is not the embedder's {dim} dimensions; {_REEMBED}", _label(names, wrong_dim), count=len(wrong_dim))
    if identity is not None:
        missing = active - present
        if missing:
            report.add("vectors", f"active memories without a vector (similarity search cannot find them); {_REEMBED}", _label(names, missing), count=len(missing))
    if orphan:
        report.add("vectors", "vectors of memories that do not exist", [f"rowid {r}" for r in orphan[:_EXAMPLES]], count=len(orphan))
    if inactive:
        report.add("vectors", "vectors of deleted or archived memories", _label(names, inactive), count=len(inactive))
    if wrong_space:
        report.add("vectors", "vectors filed under another space than their memory's", _label(names, wrong_space), count=len(wrong_space))
    if invalid:
        report.add("vectors", f"vectors that are not finite unit vectors (damaged); {_REEMBED}", _label(names, invalid), count=len(invalid))


def _events(conn: sqlite3.Connection, report: _Report) -> None:
    count, top = conn.execute("SELECT count(*), COALESCE(max(seq), 0) FROM events").fetchone()
    report.counts["events"] = int(count)
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    counter = int(row[0]) if row else 0
    if counter < top:
        report.add("events", f"the event sequence counter ({counter}) is behind the last event ({top}): new events would reuse numbers; {_RESTORE}")
    bad_seq = [r[0] for r in conn.execute("SELECT seq FROM events WHERE seq <= 0 LIMIT 100")]
    if bad_seq:
        report.add("events", "events with a sequence number <= 0", bad_seq, count=len(bad_seq))
    no_add = [
        r[0]
        for r in conn.execute(
            "SELECT m.id FROM memories m WHERE NOT EXISTS "
            "(SELECT 1 FROM events e WHERE e.memory_id = m.id AND e.op = 'add')"
        )
    ]
    if no_add:
        report.add("events", "memories without their 'add' event (written outside Memorist, or the log was damaged)", no_add, count=len(no_add))
    ghosts = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT e.memory_id FROM events e WHERE e.memory_id IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = e.memory_id) "
            # An erased memory's events stay, as tombstones (Store.erase).
            "AND NOT (e.old_text IS NULL AND e.new_text IS NULL AND e.payload = ?) "
            # A consolidation run's event, and the one of a rollback of a run or an
            # operation, name the run or operation (what `memorist rollback` takes).
            "AND NOT (e.op = 'consolidation' AND json_valid(e.payload) AND json_extract(e.payload, '$.run_id') = e.memory_id) "
            "AND NOT (e.op = 'rollback' AND json_valid(e.payload) AND json_extract(e.payload, '$.rolled_back') = e.memory_id)",
            (TOMBSTONE,),
        )
    ]
    if ghosts:
        report.add("events", "events naming a memory that does not exist", ghosts, count=len(ghosts))
    homeless = conn.execute(
        "SELECT count(*), min(seq) FROM events e WHERE e.space_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM spaces s WHERE s.id = e.space_id)"
    ).fetchone()
    if homeless[0]:
        report.add("events", "events naming a space that does not exist", [f"seq {homeless[1]}"], count=int(homeless[0]))
    bad_json = conn.execute("SELECT count(*), min(seq) FROM events WHERE NOT json_valid(payload)").fetchone()
    if bad_json[0]:
        report.add("events", f"event payloads that are not JSON; {_RESTORE}", [f"seq {bad_json[1]}"], count=int(bad_json[0]))


# backup ----------------------------------------------------------------------------------------
#: The files SQLite keeps for a store, as a refusal to write over one names them.
_STORE_FILES = (("", "the store itself"), ("-wal", "the store's write-ahead log"), ("-shm", "the store's shared-memory file"),
                ("-journal", "the store's rollback journal"))


def store_file(store: str, target: str) -> str | None:
    """What ``target`` is among the files of the SQLite store at ``store`` ("the store
    itself", its write-ahead log, ...), by path or as the same file (a link), or None:
    a file written there (a backup, an export) would destroy the store."""
    for suffix, what in _STORE_FILES:
        path = store + suffix
        if os.path.realpath(path) == os.path.realpath(target) or (
            os.path.exists(path) and os.path.exists(target) and os.path.samefile(path, target)
        ):
            return what
    return None


def _open_elsewhere(path: str) -> bool:
    """Whether another connection has the SQLite file ``path`` open: this one cannot
    take it for itself alone (a file that is no SQLite database: False)."""
    try:
        probe = sqlite3.connect(path, timeout=0.2, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        probe.execute("PRAGMA locking_mode = EXCLUSIVE")
        probe.execute("BEGIN EXCLUSIVE")
        probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
        probe.execute("COMMIT")
        return False
    except sqlite3.Error as exc:
        return is_busy(exc)
    finally:
        probe.close()


def backup_store(
    source: str | sqlite3.Connection,
    dest: str | os.PathLike[str],
    *,
    force: bool = False,
    source_path: str | None = None,
    busy_timeout: float = 30.0,
) -> dict[str, Any]:
    """Copy the store ``source`` (a path, or an open connection to it) to ``dest``.

    SQLite's online backup API copies every page in one step, inside one read
    transaction of the source: the copy is the store as of one commit, whatever
    other processes write meanwhile (they are not blocked). The copy is written
    next to ``dest``, checked (``PRAGMA quick_check`` and the schema version), made
    durable and then renamed over ``dest``, so ``dest`` is never half written. An
    existing ``dest`` is refused unless ``force``. Returns ``{"path", "source",
    "bytes", "memories", "seconds"}``.
    """
    started = time.monotonic()
    if isinstance(force, bool) is False:
        raise ValidationError("force", f"must be True or False, got {force!r}")
    try:
        target = os.path.abspath(os.fspath(dest))
    except (TypeError, ValueError) as exc:
        raise ValidationError("dest", f"must be a file path, got {dest!r}") from exc
    origin = source_path if source_path is not None else (source if isinstance(source, str) else ":memory:")
    what = store_file(origin, target) if origin != ":memory:" else None
    if what is not None:
        raise ValidationError("dest", f"{target} is {what}; name another file")
    if os.path.isdir(target):
        raise ValidationError("dest", f"{target} is a folder; name the backup file")
    if os.path.exists(target) and not force:
        raise ValidationError("dest", f"{target} already exists; refusing to overwrite it without force (--force)")
    if os.path.exists(target) and _open_elsewhere(target):
        # Replaced under them, their later writes would go to the file taken away
        # (a restore of a store a server still has open lost what it wrote after).
        raise StoreError(f"{target} is open in another process (a server, a command): stop it, then put the backup in place")
    folder = os.path.dirname(target)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the backup's folder {folder}: {exc}") from exc
    temp = os.path.join(folder, f".{os.path.basename(target)}.{uuid.uuid4().hex[:8]}.tmp")
    own = isinstance(source, str)
    try:
        try:
            src = connect_reader(source, busy_timeout) if isinstance(source, str) else source
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {origin}: {exc}") from exc
        try:
            copy = sqlite3.connect(temp, isolation_level=None)
            try:
                src.backup(copy)  # pages=-1: all pages in one step, one snapshot
                # A backup of a WAL store says WAL in its header; as a single file it
                # is a plain one (Memorist turns WAL on again when it opens it).
                copy.execute("PRAGMA journal_mode = DELETE")
            finally:
                copy.close()
        except sqlite3.Error as exc:
            raise _backup_error(exc, origin) from exc
        finally:
            if own:
                src.close()
        memories = _verify_copy(temp, origin)
        _fsync(temp)
        for stale in (target + "-wal", target + "-shm", target + "-journal"):
            # A replaced store's leftovers would be applied to the new file.
            if os.path.exists(stale):
                os.remove(stale)
        os.replace(temp, target)
        _fsync_dir(folder)
    except OSError as exc:
        raise StoreError(f"backup to {target} failed: {exc}") from exc
    finally:
        for leftover in (temp, temp + "-journal", temp + "-wal", temp + "-shm"):
            with contextlib.suppress(OSError):
                os.remove(leftover)
    return {
        "path": target,
        "source": origin,
        "bytes": os.path.getsize(target),
        "memories": memories,
        "seconds": round(time.monotonic() - started, 3),
    }


def _backup_error(exc: sqlite3.Error, origin: str) -> StoreError:
    if is_corrupt(exc):
        return CorruptStoreError(f"{origin} is damaged ({exc}): run `memorist check`")
    if is_busy(exc):
        return StoreError(f"backup of {origin} failed: the store stayed locked ({exc})")
    return StoreError(f"backup of {origin} failed: {exc}")


def _verify_copy(temp: str, origin: str) -> int:
    """The copy opens, passes quick_check and is a Memorist store; its active memories."""
    try:
        conn = sqlite3.connect(_uri(temp, mode="ro"), uri=True, isolation_level=None)
        try:
            result = [r[0] for r in conn.execute("PRAGMA quick_check(20)")]
            if result != ["ok"]:
                raise CorruptStoreError(
                    f"the copy of {origin} fails SQLite's quick check ({'; '.join(result[:3])}): "
                    "the store itself is damaged; run `memorist check`"
                )
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                raise CorruptStoreError(f"{origin} is not a Memorist store (no schema version)")
            return int(conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise _backup_error(exc, origin) from exc


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # not every platform opens folders
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["Problem", "backup_store", "check_store"]
