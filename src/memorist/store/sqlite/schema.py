"""Versioned schema of the SQLite store.

Each entry of :data:`MIGRATIONS` moves a store from version ``n - 1`` to ``n``.
They run in one transaction each, in order, when a store is opened; a store from a
newer Memorist is refused instead of being half-understood.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ...model import Scope
from ...policies.relations import rekeyed
from ...reserved import (
    PREVIOUS_RUN_PREFIX,
    RUN_PREFIX,
    previous_runs_clause,
    renamed_header_hash,
    renamed_run,
)
from .. import playbook_names
from ..base import TOMBSTONE
from ..codec import scope_key

#: The append-only rule of the event log (created by V1, narrowed by V5, lifted and
#: restored by V3's one rewrite and by a reset). One update gets through: an erasure's
#: (:meth:`memorist.store.base.Store.erase`), which blanks an event's text and payload
#: to the tombstone and changes nothing else of it, so what happened, when and to
#: whom stays on record.
APPEND_ONLY = """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
WHEN NOT (new.seq IS old.seq AND new.ts IS old.ts AND new.op IS old.op AND new.space_id IS old.space_id
          AND new.memory_id IS old.memory_id AND new.run_id IS old.run_id AND new.actor IS old.actor
          AND new.old_text IS NULL AND new.new_text IS NULL AND new.payload = '""" + TOMBSTONE + """')
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"""

V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE spaces (
    id           INTEGER PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    access_clock INTEGER NOT NULL DEFAULT 0,
    generation   INTEGER NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL,
    UNIQUE (tenant_id, user_id, agent_id)
);
CREATE TABLE memories (
    id            TEXT NOT NULL UNIQUE,
    space_id      INTEGER NOT NULL REFERENCES spaces(id),
    run_id        TEXT NOT NULL DEFAULT '',
    scope_key     TEXT NOT NULL,
    text          TEXT NOT NULL,
    search_text   TEXT NOT NULL,
    kind          TEXT NOT NULL,
    memory_class  TEXT NOT NULL,
    topic         TEXT NOT NULL DEFAULT '',
    concept       TEXT NOT NULL DEFAULT '',
    section       TEXT NOT NULL DEFAULT '',
    tags          TEXT NOT NULL DEFAULT '[]',
    helpful       INTEGER NOT NULL DEFAULT 0,
    harmful       INTEGER NOT NULL DEFAULT 0,
    -- Per-class strength, and the space's access clock when that class component
    -- was last touched: the inputs of access-count decay.
    strength_semantic     REAL NOT NULL DEFAULT 1.0,
    strength_episodic     REAL NOT NULL DEFAULT 1.0,
    strength_procedural   REAL NOT NULL DEFAULT 1.0,
    last_access_semantic    INTEGER NOT NULL DEFAULT 0,
    last_access_episodic    INTEGER NOT NULL DEFAULT 0,
    last_access_procedural  INTEGER NOT NULL DEFAULT 0,
    access_count  INTEGER NOT NULL DEFAULT 0,
    importance    REAL NOT NULL DEFAULT 0.5,
    energy        REAL NOT NULL DEFAULT 1.0,
    tier          TEXT NOT NULL DEFAULT 'working',
    created_at    REAL NOT NULL,
    updated_at    REAL,
    valid_to      REAL,
    content_hash  TEXT NOT NULL,
    metadata      TEXT NOT NULL DEFAULT '{}',
    lineage       TEXT NOT NULL DEFAULT '{}',
    status        TEXT NOT NULL DEFAULT 'active'
);
CREATE INDEX memories_space ON memories (space_id, status, created_at);
CREATE INDEX memories_hash ON memories (space_id, content_hash);
CREATE TABLE embeddings (
    memory_rowid INTEGER PRIMARY KEY,
    space_id     INTEGER NOT NULL,
    vector       BLOB NOT NULL
);
CREATE INDEX embeddings_space ON embeddings (space_id);
CREATE TABLE events (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    ts        REAL NOT NULL,
    op        TEXT NOT NULL,
    space_id  INTEGER,
    memory_id TEXT,
    run_id    TEXT NOT NULL DEFAULT '',
    actor     TEXT NOT NULL DEFAULT '',
    old_text  TEXT,
    new_text  TEXT,
    payload   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_memory ON events (memory_id, seq);
CREATE INDEX events_space ON events (space_id, seq);
-- The log is append-only: rewriting history is refused by the database itself.
""" + APPEND_ONLY + ";\n"

# Version 2 adds the BM25 full-text index, kept in step with the memories table by
# triggers (so it can never drift from the rows it indexes) and filled from the
# memories a version-1 store already holds.
V2 = """
CREATE VIRTUAL TABLE memories_fts USING fts5(
    search_text, scope_key,
    content='memories', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories WHEN new.status = 'active'
BEGIN
    INSERT INTO memories_fts (rowid, search_text, scope_key)
    VALUES (new.rowid, new.search_text, new.scope_key);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories WHEN old.status = 'active'
BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, search_text, scope_key)
    VALUES ('delete', old.rowid, old.search_text, old.scope_key);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF search_text, scope_key, status ON memories
BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, search_text, scope_key)
    SELECT 'delete', old.rowid, old.search_text, old.scope_key WHERE old.status = 'active';
    INSERT INTO memories_fts (rowid, search_text, scope_key)
    SELECT new.rowid, new.search_text, new.scope_key WHERE new.status = 'active';
END;
INSERT INTO memories_fts (rowid, search_text, scope_key)
SELECT rowid, search_text, scope_key FROM memories WHERE status = 'active';
"""



def v3_rename(conn: sqlite3.Connection) -> None:
    """Version 3: the reserved run ids of release 0.1.0 (see :mod:`memorist.reserved`) take the
    current prefix, in the memories (with their scope tokens and, for playbook headers,
    their content address) and in the event log, whose append-only trigger is lifted
    for this one rewrite. A store made by this release has nothing to rewrite."""
    condition, prefix = previous_runs_clause("m.run_id")
    rows = conn.execute(
        "SELECT m.rowid, m.run_id, m.content_hash, m.metadata, s.tenant_id, s.user_id, s.agent_id "
        f"FROM memories m JOIN spaces s ON s.id = m.space_id WHERE {condition}",
        (prefix,),
    ).fetchall()
    for rowid, run_id, digest, metadata, tenant_id, user_id, agent_id in rows:
        run = renamed_run(run_id)
        conn.execute(
            "UPDATE memories SET run_id = ?, scope_key = ?, content_hash = ? WHERE rowid = ?",
            (run, scope_key(Scope(tenant_id, user_id, agent_id, run)), renamed_header_hash(run_id, digest, metadata), rowid),
        )
    condition, prefix = previous_runs_clause()
    if conn.execute(f"SELECT 1 FROM events WHERE {condition} LIMIT 1", (prefix,)).fetchone():
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute(
            f"UPDATE events SET run_id = ? || substr(run_id, ?) WHERE {condition}",
            (RUN_PREFIX, len(PREVIOUS_RUN_PREFIX) + 1, prefix),
        )
        conn.execute(APPEND_ONLY)


def relations_table(conn: sqlite3.Connection) -> None:
    """The relation tuples (sharing between users, agents and groups; see
    :mod:`memorist.policies.relations`), one row each, keyed by tenant. Kept in a
    function of its own so a merge with another migration only renumbers it."""
    # Statement by statement: executescript would commit the migration's transaction.
    conn.execute("""
CREATE TABLE relations (
    tenant_id    TEXT NOT NULL,
    subject_type TEXT NOT NULL,
    subject_id   TEXT NOT NULL,
    relation     TEXT NOT NULL,
    object_type  TEXT NOT NULL,
    object_id    TEXT NOT NULL,
    created_at   REAL NOT NULL,
    PRIMARY KEY (tenant_id, object_type, object_id, relation, subject_type, subject_id)
)""")
    conn.execute("CREATE INDEX relations_subject ON relations (tenant_id, subject_type, subject_id)")


# Version 5: the event log's rule lets an erasure's tombstones through (APPEND_ONLY).
V5 = "DROP TRIGGER IF EXISTS events_no_update;\n" + APPEND_ONLY + ";\n"

def relation_keys(conn: sqlite3.Connection) -> None:
    """Version 6: relation objects keyed as ids are now (their ``%``, ``/`` and ``:``
    percent-encoded, :func:`memorist.policies.relations.rekeyed`); a tuple written
    before keeps the owner it named then."""
    rows = conn.execute("SELECT rowid, object_type, object_id FROM relations WHERE object_type IN ('scope', 'playbook')").fetchall()
    for rowid, kind, ident in rows:
        new = rekeyed(kind, ident)
        if new != ident:
            conn.execute(
                "INSERT OR IGNORE INTO relations (tenant_id, subject_type, subject_id, relation, object_type, object_id, created_at) "
                "SELECT tenant_id, subject_type, subject_id, relation, object_type, ?, created_at FROM relations WHERE rowid = ?",
                (new, rowid),
            )
            conn.execute("DELETE FROM relations WHERE rowid = ?", (rowid,))


def per_learner_name(conn: sqlite3.Connection) -> None:
    """Version 7: the per-learner playbooks take their current name (what is renamed:
    :mod:`memorist.store.playbook_names`). The label vectors of headers and versions
    stay as they were embedded (nothing searches them)."""
    condition = " OR ".join("instr(metadata, ?) > 0" for _ in playbook_names.NAMES)
    rows = conn.execute(
        f"SELECT rowid, space_id, run_id, kind, section, text, search_text, metadata, status FROM memories WHERE {condition}",
        playbook_names.NAMES,
    ).fetchall()
    relations = conn.execute(
        "SELECT rowid, tenant_id, subject_type, subject_id, relation, object_type, object_id, created_at FROM relations "
        "WHERE object_type = 'playbook'"
    ).fetchall()
    if not rows and not relations:
        return
    spaces = {row[0]: row[1:] for row in conn.execute("SELECT id, tenant_id, user_id, agent_id FROM spaces")}
    plan = playbook_names.plan(rows, spaces, [(row[1], row[6]) for row in relations])
    conn.executemany(  # (no speaker column here: SQLite reads it from the metadata)
        "UPDATE memories SET text = ?, search_text = ?, metadata = ?, content_hash = coalesce(?, content_hash) WHERE rowid = ?",
        [(r.text, r.search_text, r.metadata, r.content_hash, r.rowid) for r in plan.rows],
    )
    # Every renamed tuple out first, then in under its new key: a key may be another's new one.
    moved = [(row, new) for row in relations if (new := plan.relation_key(row[1], row[6])) != row[6]]
    conn.executemany("DELETE FROM relations WHERE rowid = ?", [(row[0],) for row, _ in moved])
    conn.executemany(
        "INSERT OR IGNORE INTO relations (tenant_id, subject_type, subject_id, relation, object_type, object_id, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(*row[1:6], new, row[7]) for row, new in moved],
    )


#: Each entry: a SQL script, or a function of the connection, run in the migration's
#: transaction.
MIGRATIONS: list[str | Callable[[sqlite3.Connection], None]] = [V1, V2, v3_rename, relations_table, V5, relation_keys, per_learner_name]
SCHEMA_VERSION = len(MIGRATIONS)
