"""Versioned schema of the PostgreSQL store, and how a database is brought up to it.

Memorist's tables live in their own PostgreSQL schema (``memorist`` unless the URL says
``?schema=...``), so a database shared with other applications keeps its own
``events`` or ``meta`` tables, and several stores can share one database. The
``meta`` table holds the schema version and the embedder's identity.

Each entry of :data:`MIGRATIONS` moves a store from version ``n - 1`` to ``n``; they
run when a store is opened, in one transaction, under a transaction-scoped advisory
lock, so two processes opening a new database at once do not both create it: the
second waits, then finds it done. A store from a newer Memorist is refused.

The vector column has no dimension in the schema: it is known only when the first
vector is written (the embedder's identity is bound lazily). HNSW indexes are built
per large space, outside the migrations (:mod:`memorist.store.postgres.hnsw`): a
partial index of that space's rows up to a watermark and of those graphed since, on
the column cast to the store's dimension (an expression index, pgvector's way of
indexing one dimension of an untyped column).
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg

from ...errors import ConfigurationError, CorruptStoreError
from ...policies.relations import rekeyed
from ...reserved import (
    PG_FUNCTIONS,
    PREVIOUS_NAME,
    PREVIOUS_PG_SCHEMA,
    PREVIOUS_RUN_PREFIX,
    RUN_PREFIX,
    previous_runs_clause,
    renamed_header_hash,
    renamed_run,
)
from .. import playbook_names
from ..base import TOMBSTONE, version_of
from .text import full_text

V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE spaces (
    id           BIGSERIAL PRIMARY KEY,
    tenant_id    TEXT COLLATE "C" NOT NULL,
    user_id      TEXT COLLATE "C" NOT NULL,
    agent_id     TEXT COLLATE "C" NOT NULL,
    access_clock BIGINT NOT NULL DEFAULT 0,
    generation   BIGINT NOT NULL DEFAULT 0,
    -- Vectors stored in the space (kept by the embeddings triggers): vector search
    -- chooses exact or HNSW search by it without counting rows.
    vectors      BIGINT NOT NULL DEFAULT 0,
    -- Active memories and their full-text terms (kept by the memories triggers):
    -- BM25's document count and average length.
    docs         BIGINT NOT NULL DEFAULT 0,
    doc_terms    BIGINT NOT NULL DEFAULT 0,
    created_at   DOUBLE PRECISION NOT NULL,
    UNIQUE (tenant_id, user_id, agent_id)
);
CREATE TABLE memories (
    rowid         BIGSERIAL PRIMARY KEY,
    -- "C": ids, scope ids and hashes compare and sort by code point, as in SQLite,
    -- whatever the database's collation (id prefixes are ranges on the index).
    id            TEXT COLLATE "C" NOT NULL UNIQUE,
    space_id      BIGINT NOT NULL REFERENCES spaces(id),
    run_id        TEXT COLLATE "C" NOT NULL DEFAULT '',
    text          TEXT NOT NULL,
    search_text   TEXT NOT NULL,
    -- The full-text terms of search_text (memorist.policies.text.index_terms: the
    -- stemmed words SQLite's index holds too), empty unless the memory is active.
    terms         TSVECTOR NOT NULL DEFAULT '',
    term_count    INTEGER NOT NULL DEFAULT 0,  -- the number of terms: BM25's length
    -- The casefolded metadata name (memorist.store.codec.speaker_of).
    speaker       TEXT COLLATE "C" NOT NULL DEFAULT '',
    kind          TEXT NOT NULL,
    memory_class  TEXT NOT NULL,
    topic         TEXT NOT NULL DEFAULT '',
    concept       TEXT NOT NULL DEFAULT '',
    section       TEXT NOT NULL DEFAULT '',
    tags          TEXT NOT NULL DEFAULT '[]',
    helpful       BIGINT NOT NULL DEFAULT 0,
    harmful       BIGINT NOT NULL DEFAULT 0,
    strength_semantic       DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    strength_episodic       DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    strength_procedural     DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    last_access_semantic    BIGINT NOT NULL DEFAULT 0,
    last_access_episodic    BIGINT NOT NULL DEFAULT 0,
    last_access_procedural  BIGINT NOT NULL DEFAULT 0,
    access_count  BIGINT NOT NULL DEFAULT 0,
    importance    DOUBLE PRECISION NOT NULL DEFAULT 0.5,
    energy        DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    tier          TEXT NOT NULL DEFAULT 'working',
    created_at    DOUBLE PRECISION NOT NULL,
    updated_at    DOUBLE PRECISION,
    valid_to      DOUBLE PRECISION,
    content_hash  TEXT COLLATE "C" NOT NULL,
    metadata      TEXT NOT NULL DEFAULT '{}',
    lineage       TEXT NOT NULL DEFAULT '{}',
    status        TEXT NOT NULL DEFAULT 'active'
);
CREATE INDEX memories_space ON memories (space_id, status, created_at);
CREATE INDEX memories_hash ON memories (space_id, content_hash);
CREATE INDEX memories_speaker ON memories (space_id, speaker) WHERE speaker <> '';
CREATE INDEX memories_terms ON memories USING gin (terms);
CREATE FUNCTION memorist_docs_counted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE spaces s SET docs = s.docs + c.n, doc_terms = s.doc_terms + c.t FROM (
            SELECT space_id, count(*) AS n, sum(term_count) AS t FROM added WHERE status = 'active' GROUP BY space_id
        ) c WHERE s.id = c.space_id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE spaces s SET docs = s.docs - c.n, doc_terms = s.doc_terms - c.t FROM (
            SELECT space_id, count(*) AS n, sum(term_count) AS t FROM removed WHERE status = 'active' GROUP BY space_id
        ) c WHERE s.id = c.space_id;
    ELSE
        UPDATE spaces s SET docs = s.docs + c.n, doc_terms = s.doc_terms + c.t FROM (
            SELECT space_id, sum(n) AS n, sum(t) AS t FROM (
                SELECT space_id, 1 AS n, term_count AS t FROM added WHERE status = 'active'
                UNION ALL SELECT space_id, -1, -term_count FROM removed WHERE status = 'active'
            ) d GROUP BY space_id
        ) c WHERE s.id = c.space_id AND (c.n <> 0 OR c.t <> 0);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER memories_added AFTER INSERT ON memories
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION memorist_docs_counted();
CREATE TRIGGER memories_removed AFTER DELETE ON memories
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION memorist_docs_counted();
CREATE TRIGGER memories_changed AFTER UPDATE ON memories
REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION memorist_docs_counted();
CREATE TABLE embeddings (
    memory_rowid BIGINT PRIMARY KEY REFERENCES memories(rowid),
    space_id     BIGINT NOT NULL,
    vector       vector NOT NULL
);
CREATE INDEX embeddings_space ON embeddings (space_id);
CREATE FUNCTION memorist_vectors_added() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE spaces s SET vectors = s.vectors + c.n
    FROM (SELECT space_id, count(*) AS n FROM added GROUP BY space_id) c WHERE s.id = c.space_id;
    RETURN NULL;
END $$;
CREATE FUNCTION memorist_vectors_removed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE spaces s SET vectors = s.vectors - c.n
    FROM (SELECT space_id, count(*) AS n FROM removed GROUP BY space_id) c WHERE s.id = c.space_id;
    RETURN NULL;
END $$;
CREATE FUNCTION memorist_vectors_moved() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE spaces s SET vectors = s.vectors + c.n FROM (
        SELECT space_id, sum(n) AS n FROM (
            SELECT space_id, count(*) AS n FROM added GROUP BY space_id
            UNION ALL SELECT space_id, -count(*) FROM removed GROUP BY space_id
        ) d GROUP BY space_id
    ) c WHERE s.id = c.space_id AND c.n <> 0;
    RETURN NULL;
END $$;
CREATE TRIGGER embeddings_added AFTER INSERT ON embeddings
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION memorist_vectors_added();
CREATE TRIGGER embeddings_removed AFTER DELETE ON embeddings
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION memorist_vectors_removed();
CREATE TRIGGER embeddings_moved AFTER UPDATE ON embeddings
REFERENCING NEW TABLE AS added OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION memorist_vectors_moved();
CREATE TABLE events (
    seq       BIGSERIAL PRIMARY KEY,
    ts        DOUBLE PRECISION NOT NULL,
    op        TEXT NOT NULL,
    space_id  BIGINT,
    memory_id TEXT COLLATE "C",
    run_id    TEXT NOT NULL DEFAULT '',
    actor     TEXT NOT NULL DEFAULT '',
    old_text  TEXT,
    new_text  TEXT,
    payload   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_memory ON events (memory_id, seq);
CREATE INDEX events_space ON events (space_id, seq);
CREATE INDEX events_turns ON events (space_id, seq) WHERE op IN ('turn', 'turn_processed');
-- The log is append-only: rewriting history is refused by the database itself.
CREATE FUNCTION memorist_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only';
END $$;
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
FOR EACH ROW EXECUTE FUNCTION memorist_events_append_only();
-- The memory service's API keys (memorist.server.keys): hashes only.
CREATE TABLE api_keys (
    key_id       TEXT COLLATE "C" PRIMARY KEY,
    key_hash     TEXT NOT NULL,
    tenant_id    TEXT COLLATE "C" NOT NULL,
    user_id      TEXT COLLATE "C",
    label        TEXT NOT NULL DEFAULT '',
    created_at   DOUBLE PRECISION NOT NULL,
    revoked_at   DOUBLE PRECISION,
    last_used_at DOUBLE PRECISION
);
"""

# A space's HNSW index holds its rows up to a watermark (the largest memory rowid
# when the index was built) and the rows a maintenance pass marked ``graphed`` since;
# newer rows are searched exactly, so an add never waits for a graph insert
# (memorist.store.postgres.hnsw). The V1 indexes (the whole space, every insert paying for
# the graph) are dropped: the next search builds their successors in the background.
V2 = """
ALTER TABLE embeddings ADD COLUMN graphed BOOLEAN NOT NULL DEFAULT false;
-- The rows never graphed, by space and rowid: those above a watermark are the ones
-- waiting (a range of this index, however large the space).
CREATE INDEX embeddings_waiting ON embeddings (space_id, memory_rowid) WHERE NOT graphed;
DO $$
DECLARE name text;
BEGIN
    FOR name IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE i.indrelid = 'embeddings'::regclass AND c.relname LIKE 'embeddings!_hnsw!_%' ESCAPE '!' LOOP
        EXECUTE format('DROP INDEX %I', name);
    END LOOP;
END $$;
"""



def v3_rename(conn: Any) -> None:
    """Version 3: a store of release 0.1.0 (see :mod:`memorist.reserved`) gets the current names:
    its trigger functions, their search path (the schema may have been renamed with
    them, see :func:`migrate`), its reserved run ids (the event log's append-only
    trigger is lifted for this one rewrite) and its playbook headers' content address."""
    for name in PG_FUNCTIONS:
        old, new = f"{PREVIOUS_NAME}_{name}", f"memorist_{name}"
        if conn.execute(
            "SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = current_schema() AND p.proname = %s",
            (old,),
        ).fetchone():
            conn.execute(f"ALTER FUNCTION {quote_ident(old)}() RENAME TO {quote_ident(new)}")
        if name != "events_append_only":
            conn.execute(f"ALTER FUNCTION {quote_ident(new)}() SET search_path FROM CURRENT")
    condition, prefix = previous_runs_clause()
    condition = condition.replace("?", "%s")
    rows = conn.execute(f"SELECT rowid, run_id, content_hash, metadata FROM memories WHERE {condition}", (prefix,)).fetchall()
    for rowid, run_id, digest, metadata in rows:
        conn.execute(
            "UPDATE memories SET run_id = %s, content_hash = %s WHERE rowid = %s",
            (renamed_run(run_id), renamed_header_hash(run_id, digest, metadata), rowid),
        )
    if conn.execute(f"SELECT 1 FROM events WHERE {condition} LIMIT 1", (prefix,)).fetchone():
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_no_update")
        conn.execute(
            f"UPDATE events SET run_id = %s || substr(run_id, %s) WHERE {condition}",
            (RUN_PREFIX, len(PREVIOUS_RUN_PREFIX) + 1, prefix),
        )
        conn.execute("ALTER TABLE events ENABLE TRIGGER events_no_update")


def relations_table(conn: Any) -> None:
    """The relation tuples (sharing between users, agents and groups; see
    :mod:`memorist.policies.relations`), one row each, keyed by tenant. Kept in a
    function of its own so a merge with another migration only renumbers it."""
    conn.execute("""
CREATE TABLE relations (
    tenant_id    TEXT COLLATE "C" NOT NULL,
    subject_type TEXT COLLATE "C" NOT NULL,
    subject_id   TEXT COLLATE "C" NOT NULL,
    relation     TEXT COLLATE "C" NOT NULL,
    object_type  TEXT COLLATE "C" NOT NULL,
    object_id    TEXT COLLATE "C" NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant_id, object_type, object_id, relation, subject_type, subject_id)
)""")
    conn.execute("CREATE INDEX relations_subject ON relations (tenant_id, subject_type, subject_id)")


# Version 5: the event log's rule lets one update through, an erasure's
# (memorist.store.base.Store.erase): it blanks an event's text and payload to the
# tombstone and changes nothing else of it, so what happened, when and to whom stays.
V5 = """
CREATE OR REPLACE FUNCTION memorist_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.seq IS NOT DISTINCT FROM OLD.seq AND NEW.ts IS NOT DISTINCT FROM OLD.ts AND NEW.op IS NOT DISTINCT FROM OLD.op
       AND NEW.space_id IS NOT DISTINCT FROM OLD.space_id AND NEW.memory_id IS NOT DISTINCT FROM OLD.memory_id
       AND NEW.run_id IS NOT DISTINCT FROM OLD.run_id AND NEW.actor IS NOT DISTINCT FROM OLD.actor
       AND NEW.old_text IS NULL AND NEW.new_text IS NULL AND NEW.payload = '""" + TOMBSTONE + """' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'events are append-only';
END $$;
"""

# Version 6: the events that change memories without naming each one (an erasure, a
# keys adopt: memorist.store.base.UNNAMED_CHANGES_SQL, written out here as a migration
# is), found at once by a process whose in-process indexes must then reload
# (memorist.store.postgres.text).
V6 = "CREATE INDEX events_unnamed ON events (seq) WHERE op IN ('erase', 'adopt');"

def relation_keys(conn: Any) -> None:
    """Version 7: relation objects keyed as ids are now (their ``%``, ``/`` and ``:``
    percent-encoded, :func:`memorist.policies.relations.rekeyed`); a tuple written
    before keeps the owner it named then."""
    rows = conn.execute(
        "SELECT tenant_id, subject_type, subject_id, relation, object_type, object_id, created_at FROM relations "
        "WHERE object_type IN ('scope', 'playbook')"
    ).fetchall()
    for tenant, subject_type, subject_id, relation, kind, ident, created in rows:
        new = rekeyed(kind, ident)
        if new != ident:
            conn.execute(
                "DELETE FROM relations WHERE tenant_id = %s AND subject_type = %s AND subject_id = %s AND relation = %s "
                "AND object_type = %s AND object_id = %s",
                (tenant, subject_type, subject_id, relation, kind, ident),
            )
            conn.execute(
                "INSERT INTO relations (tenant_id, subject_type, subject_id, relation, object_type, object_id, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (tenant, subject_type, subject_id, relation, kind, new, created),
            )


def per_learner_name(conn: Any) -> None:
    """Version 8: the per-learner playbooks take their current name, as in the SQLite
    store's migration (:func:`memorist.store.sqlite.schema.per_learner_name`); a
    renamed header's full-text terms and speaker are written again with it."""
    condition = " OR ".join("strpos(metadata, %s) > 0" for _ in playbook_names.NAMES)
    rows = conn.execute(
        f"SELECT rowid, space_id, run_id, kind, section, text, search_text, metadata, status FROM memories WHERE {condition}",
        playbook_names.NAMES,
    ).fetchall()
    relations = conn.execute(
        "SELECT tenant_id, subject_type, subject_id, relation, object_type, object_id, created_at FROM relations "
        "WHERE object_type = 'playbook'"
    ).fetchall()
    if not rows and not relations:
        return
    spaces = {row[0]: row[1:] for row in conn.execute("SELECT id, tenant_id, user_id, agent_id FROM spaces").fetchall()}
    plan = playbook_names.plan(rows, spaces, [(r[0], r[5]) for r in relations])
    active = {row[0] for row in rows if row[8] == "active"}
    for r in plan.rows:
        columns = {"text": r.text, "search_text": r.search_text, "metadata": r.metadata, "content_hash": r.content_hash, "speaker": r.speaker}
        if r.search_changed and r.rowid in active:  # an inactive memory keeps no terms
            columns["terms"], columns["term_count"] = full_text(r.search_text)
        sets = ", ".join(f"{c} = %({c})s::tsvector" if c == "terms" else f"{c} = %({c})s" for c, v in columns.items() if v is not None)
        conn.execute(f"UPDATE memories SET {sets} WHERE rowid = %(rowid)s", {**columns, "rowid": r.rowid})
    # Every renamed tuple out first, then in under its new key: a key may be another's new one.
    moved = [(row, new) for row in relations if (new := plan.relation_key(row[0], row[5])) != row[5]]
    for row, _ in moved:
        conn.execute(
            "DELETE FROM relations WHERE tenant_id = %s AND subject_type = %s AND subject_id = %s AND relation = %s "
            "AND object_type = %s AND object_id = %s",
            row[:6],
        )
    for row, new in moved:
        conn.execute(
            "INSERT INTO relations (tenant_id, subject_type, subject_id, relation, object_type, object_id, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (*row[:5], new, row[6]),
        )


#: Each entry: a SQL script, or a function of the connection, run in the migration's
#: transaction with the store's search path.
MIGRATIONS: list[Any] = [V1, V2, v3_rename, relations_table, V5, V6, relation_keys, per_learner_name]
SCHEMA_VERSION = len(MIGRATIONS)

DEFAULT_SCHEMA = "memorist"


def lock_key(*parts: str) -> int:
    """A signed 64-bit advisory lock key for ``parts`` (a space, or a named job)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def vector_schema(conn: Any) -> str | None:
    """The schema the pgvector extension is installed in, or None."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()
    return None if row is None else str(row[0])


def search_path(schema: str, vectors: str | None) -> str:
    names = [schema] + ([vectors] if vectors and vectors != schema else [])
    return ", ".join(quote_ident(n) for n in names)


def schema_version(conn: Any, schema: str, label: str) -> int:
    """The store's version in ``schema`` (0: no store there yet).

    A schema that holds tables but no ``meta`` is someone else's: refused, never
    written to."""
    has_meta, others = conn.execute(
        "SELECT count(*) FILTER (WHERE c.relname = 'meta'), count(*) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v')",
        (schema,),
    ).fetchone()
    if not has_meta:
        if others:
            raise CorruptStoreError(
                f"{label}: schema {schema!r} holds tables but is not a Memorist store; "
                "name another with ?schema=... in the URL"
            )
        return 0
    try:
        row = conn.execute(
            f"SELECT value FROM {quote_ident(schema)}.meta WHERE key = 'schema_version'"
        ).fetchone()
    except (psycopg.errors.UndefinedColumn, psycopg.errors.UndefinedTable) as exc:
        raise CorruptStoreError(f"{label}: schema {schema!r} holds a meta table that is not Memorist's; name another with ?schema=...") from exc
    return version_of(row[0], label) if row else 0


#: Pages of the memories table keep a tenth free for the new version of a row whose
#: bookkeeping a search changed (its access count, its last access): that update
#: then stays on the page and touches no index. Writing the retrievals of 32
#: searches took 6-9 ms at 100,000 memories loaded into full pages, 2.3-4.9 ms with
#: the room (the table 11 % larger; bench/RESULTS.md).
MEMORIES_FILL = "fillfactor=90"


def leave_room(conn: Any, schema: str) -> None:
    """Set :data:`MEMORIES_FILL` on ``schema``'s memories table if it has no fill
    factor (``conn`` in autocommit mode; one an administrator set is kept). A storage
    setting, not a schema version: a release that does not set it opens the store as
    before. Pages written before keep their fill. Left for a later open when the
    table is busy (a vacuum, a reindex: not waited for), the user does not own it, or
    the session is read-only."""
    import psycopg

    row = conn.execute(
        "SELECT c.reloptions, pg_has_role(c.relowner, 'MEMBER') FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = 'memories' AND c.relkind = 'r'",
        (schema,),
    ).fetchone()
    if row is None or not row[1] or any(option.startswith("fillfactor=") for option in row[0] or []):
        return
    try:
        with conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '50ms'")
            conn.execute(f"ALTER TABLE {quote_ident(schema)}.memories SET ({MEMORIES_FILL})")
    except (psycopg.errors.LockNotAvailable, psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction):
        pass


def migrate(conn: Any, schema: str, label: str) -> str:
    """Bring ``schema`` up to :data:`SCHEMA_VERSION` (``conn`` in autocommit mode);
    returns the search path the store's connections use."""
    import psycopg

    current = schema_version(conn, schema, label)
    if current > SCHEMA_VERSION:
        raise CorruptStoreError(
            f"{label} has schema version {current}, newer than this Memorist understands "
            f"({SCHEMA_VERSION}); upgrade memorist"
        )
    vectors = vector_schema(conn)
    if current == SCHEMA_VERSION and vectors is not None:
        leave_room(conn, schema)
        return search_path(schema, vectors)
    with conn.transaction():
        # Another process opening the same new database waits here, then finds the
        # work done (its own look above may have been before the other's commit).
        # One lock for every schema: stores in two schemas may both install pgvector.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("memorist", "migrate"),))
        vectors = vector_schema(conn)
        if vectors is None:
            try:
                with conn.transaction():
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.errors.InsufficientPrivilege as exc:
                raise ConfigurationError(
                    f"{label}: the pgvector extension is not installed in this database and this user "
                    f"may not install it; ask its administrator to run CREATE EXTENSION vector ({exc})"
                ) from exc
            except (psycopg.errors.UndefinedFile, psycopg.errors.FeatureNotSupported) as exc:
                raise ConfigurationError(
                    f"{label}: the server has no pgvector extension; install pgvector on it "
                    f"(https://github.com/pgvector/pgvector) ({exc})"
                ) from exc
            vectors = vector_schema(conn)
        if schema == DEFAULT_SCHEMA and current == 0 and schema_version(conn, PREVIOUS_PG_SCHEMA, label):
            # A store of release 0.1.0 in its default schema: it becomes this one.
            conn.execute(f"ALTER SCHEMA {quote_ident(PREVIOUS_PG_SCHEMA)} RENAME TO {quote_ident(schema)}")
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        path = search_path(schema, vectors)
        conn.execute(f"SET LOCAL search_path TO {path}")
        current = schema_version(conn, schema, label)
        if current > SCHEMA_VERSION:
            raise CorruptStoreError(f"{label} has schema version {current}, newer than this Memorist understands ({SCHEMA_VERSION})")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            step = MIGRATIONS[version - 1]
            if callable(step):
                step(conn)
            else:
                conn.execute(step)
            set_meta(conn, schema_version=str(version))
    leave_room(conn, schema)
    return path


def set_meta(conn: Any, **values: str) -> None:
    """Set keys of the ``meta`` table (inserted, or replaced)."""
    conn.execute(
        "INSERT INTO meta (key, value) VALUES " + ", ".join(["(%s, %s)"] * len(values))
        + " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        [part for pair in values.items() for part in pair],
    )


__all__ = [
    "DEFAULT_SCHEMA",
    "MEMORIES_FILL",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "leave_room",
    "lock_key",
    "migrate",
    "quote_ident",
    "schema_version",
    "search_path",
    "set_meta",
]
