"""The store contract, run against a real SQLite file.

Written against the :class:`~engram.store.base.Store` / ``Batch`` API so a second
backend can reuse it by overriding the ``store`` / ``reopen`` fixtures.

Text search has two paths in the SQLite store: one space (one user) is served by
the in-process BM25 index, a scope spanning several spaces by SQLite FTS5. Tests
that matter for both check a one-space scope (``F_ALEX``) and a many-space scope
(``F_TENANT``, or a user spread over two agents).
"""

from __future__ import annotations

import os
import sqlite3
import time

import numpy as np
import pytest

from engram import CorruptStoreError, HashingEmbedder, StoreError
from engram.model import MemoryRecord, Scope, Status
from engram.policies.text import content_hash
from engram.store.base import ScopeFilter
from engram.store.migrations import SCHEMA_VERSION, V1
from engram.store.codec import scope_key
from engram.store.sqlite import SQLiteStore, _split_sql

EMB = HashingEmbedder()
ALEX = Scope(user_id="alex")
ALEX_HELPER = Scope(user_id="alex", agent_id="helper")
BOB = Scope(user_id="bob")
F_ALEX = ScopeFilter("", "alex")
F_BOB = ScopeFilter("", "bob")
F_TENANT = ScopeFilter("")  # every space of the default tenant


def record(mid: str, text: str, scope: Scope = ALEX, *, at: float | None = None, **kw) -> MemoryRecord:
    return MemoryRecord(id=mid, scope=scope, text=text, created_at=time.time() if at is None else at,
                        content_hash=content_hash(text), **kw)


def vec(text: str) -> np.ndarray:
    return EMB.embed_one(text)


def add(store: SQLiteStore, *records: MemoryRecord) -> None:
    with store.transaction() as b:
        for r in records:
            b.add(r, vec(r.text))


def vsearch(store, text, scope=F_ALEX, k=None, cutoff=None, now=None):
    hits = store.vector_search(scope, vec(text), k=k, cutoff=cutoff, now=time.time() if now is None else now)
    return [mid for mid, _ in hits]


def tsearch(store, query, scope=F_ALEX, k=50, cutoff=None, now=None):
    hits = store.text_search(scope, query, k=k, cutoff=cutoff, now=time.time() if now is None else now)
    return [mid for mid, _ in hits]


def raw(path) -> sqlite3.Connection:
    """A second, independent connection to the store file."""
    return sqlite3.connect(path, isolation_level=None)


def event_count(path) -> int:
    with raw(path) as c:
        return c.execute("SELECT count(*) FROM events").fetchone()[0]


def generation(path, user_id="alex") -> int:
    with raw(path) as c:
        row = c.execute("SELECT generation FROM spaces WHERE user_id = ? AND agent_id = ''", (user_id,)).fetchone()
    return row[0] if row else 0


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "store.db")


@pytest.fixture
def store(path):
    s = SQLiteStore(path)
    s.set_embedder_identity(EMB.name, EMB.dim)
    yield s
    s.close()


@pytest.fixture
def reopen(path):
    opened = []

    def _open(p=None):
        s = SQLiteStore(p or path)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        s.close()


# basic CRUD with events ------------------------------------------------------------


def test_fresh_store_is_at_current_schema(store):
    assert store.schema_version() == SCHEMA_VERSION == 2
    assert store.embedder_identity() == (EMB.name, EMB.dim)


def test_add_get_and_its_one_event(store):
    r = record("a", "Likes sushi", metadata={"source": "chat"}, tags=["food"])
    add(store, r)
    got = store.get("a")
    assert got is not None
    assert (got.text, got.scope, got.metadata, got.tags, got.status) == ("Likes sushi", ALEX, {"source": "chat"}, ["food"], Status.ACTIVE)
    assert got.created_at == pytest.approx(r.created_at)
    history = store.history("a")
    assert [(e.op, e.old_text, e.new_text) for e in history] == [("add", None, "Likes sushi")]
    assert history[0].scope.user_id == "alex"
    assert store.get("missing") is None


def test_every_field_survives_the_round_trip(store, reopen):
    from engram.model import Kind, MemoryClass, Tier

    r = MemoryRecord(
        id="full", scope=Scope("acme", "alex", "helper", "run-7"), text="Prefers tea", kind=Kind.PREFERENCE,
        memory_class=MemoryClass.PROCEDURAL, topic="drinks", concept="tea", section="habits", tags=["a", "b"],
        helpful=3, harmful=2, strengths={"semantic": 0.25, "episodic": 0.5, "procedural": 0.75},
        last_access={"semantic": 4, "episodic": 5, "procedural": 6}, access_count=7, importance=0.9, energy=0.3,
        tier=Tier.LONG_TERM, created_at=1_700_000_000.123456, updated_at=1_700_000_100.5, valid_to=1_900_000_000.25,
        content_hash=content_hash("Prefers tea"), metadata={"source": "chat", "n": [1, {"x": None}]},
        lineage={"merged_from": ["x", "y"]}, status=Status.ACTIVE, search_text="alex: Prefers tea",
    )
    add(store, r)
    assert store.get("full") == r
    assert store.get_many(["full"]) == {"full": r}
    store.close()
    assert reopen().get("full") == r


def test_update_replaces_fields_and_logs_old_and_new(store):
    add(store, record("a", "Likes sushi"), record("h", "Helper likes tea", ALEX_HELPER))
    old = store.get("a")
    new = old.copy(text="Loves sashimi", search_text="Loves sashimi", content_hash=content_hash("Loves sashimi"), updated_at=time.time())
    with store.transaction() as b:
        b.update(new, vec("Loves sashimi"), old_text=old.text)
    assert store.get("a").text == "Loves sashimi"
    assert [(e.op, e.old_text, e.new_text) for e in store.history("a")] == [
        ("add", None, "Likes sushi"),
        ("update", "Likes sushi", "Loves sashimi"),
    ]
    for scope in (ScopeFilter("", "alex", agent_id=""), F_ALEX):  # one space, then two
        assert tsearch(store, "sashimi", scope) == ["a"]
        assert tsearch(store, "sushi", scope) == []
    assert vsearch(store, "Loves sashimi", k=1) == ["a"]


def test_update_without_vector_still_reindexes_text(store):
    """``Batch.update(record, None)`` keeps the vector but the text search must see
    the new text."""
    add(store, record("a", "Likes sushi"))
    assert tsearch(store, "sushi") == ["a"]  # index loaded
    old = store.get("a")
    with store.transaction() as b:
        b.update(old.copy(text="Collects stamps", search_text="Collects stamps"), None, old_text=old.text)
    assert tsearch(store, "stamps") == ["a"]
    assert tsearch(store, "sushi") == []


def test_memory_added_without_vector_is_found_by_text_search(store):
    with store.transaction() as b:
        b.add(record("novec", "Collects vintage stamps"), None)
    add(store, record("a", "Likes sushi"))
    assert tsearch(store, "stamps") == ["novec"]
    assert "novec" not in vsearch(store, "Collects vintage stamps")


def test_delete_hides_everywhere_but_keeps_history(store):
    add(store, record("a", "Likes sushi"), record("b", "Likes ramen"), record("h", "Helper likes ramen", ALEX_HELPER))
    assert tsearch(store, "ramen", ScopeFilter("", "alex", agent_id="")) == ["b"]  # index loaded
    with store.transaction() as b:
        b.delete(store.get("b"))
    assert store.get("b").status is Status.DELETED
    assert [r.id for r in store.list(ScopeFilter("", "alex", agent_id=""))] == ["a"]
    assert "b" not in vsearch(store, "Likes ramen")
    assert tsearch(store, "ramen", ScopeFilter("", "alex", agent_id="")) == []
    assert tsearch(store, "ramen", F_ALEX) == ["h"]  # two spaces: the FTS path
    assert store.get_many(["a", "b"]).keys() == {"a", "b"}
    assert [(e.op, e.old_text, e.new_text) for e in store.history("b")] == [
        ("add", None, "Likes ramen"),
        ("delete", "Likes ramen", None),
    ]


def test_each_mutation_writes_exactly_one_event(store, path):
    n0 = event_count(path)
    add(store, record("a", "one"))
    assert event_count(path) == n0 + 1
    r = store.get("a")
    with store.transaction() as b:
        b.update(r.copy(text="two", search_text="two"), vec("two"), old_text="one")
    assert event_count(path) == n0 + 2
    with store.transaction() as b:
        b.delete(store.get("a"))
    assert event_count(path) == n0 + 3
    with store.transaction() as b:
        b.event("turn", ALEX, payload={"messages": []})
    assert event_count(path) == n0 + 4


def test_duplicate_id_and_missing_targets_are_store_errors(store):
    add(store, record("a", "one"))
    with pytest.raises(StoreError, match="'a'"), store.transaction() as b:
        b.add(record("a", "again"), vec("again"))
    with pytest.raises(StoreError, match="ghost"), store.transaction() as b:
        b.update(record("ghost", "x"), vec("x"), old_text="y")
    with pytest.raises(StoreError, match="ghost"), store.transaction() as b:
        b.delete(record("ghost", "x"))
    assert store.get("a").text == "one"


def test_find_active_hash_inside_transaction(store):
    add(store, record("a", "Likes sushi"))
    with store.transaction() as b:
        assert b.find_active_hash(ALEX, content_hash("likes sushi!")) == "a"
        assert b.find_active_hash(BOB, content_hash("Likes sushi")) is None
        b.add(record("c", "Plays chess"), vec("Plays chess"))
        assert b.find_active_hash(ALEX, content_hash("Plays chess")) == "c"  # sees its own writes


def test_list_is_newest_first_with_limit_cutoff_and_valid_to(store):
    now = time.time()
    add(store,
        record("old", "old one", at=now - 1000),
        record("mid", "middle one", at=now - 500),
        record("new", "new one", at=now - 10),
        record("ended", "ended one", at=now - 5, valid_to=now - 1))
    assert [r.id for r in store.list(F_ALEX)] == ["ended", "new", "mid", "old"]
    assert [r.id for r in store.list(F_ALEX, limit=2)] == ["ended", "new"]
    assert [r.id for r in store.list(F_ALEX, cutoff=now - 600)] == ["ended", "new", "mid"]
    assert [r.id for r in store.list(F_ALEX, now=now)] == ["new", "mid", "old"]
    assert set(vsearch(store, "one", cutoff=now - 600, now=now)) == {"new", "mid"}
    assert set(tsearch(store, "one", cutoff=now - 600, now=now)) == {"new", "mid"}
    add(store, record("bob", "bob one", BOB, at=now))  # now the tenant spans two spaces
    assert set(tsearch(store, "one", F_TENANT, cutoff=now - 600, now=now)) == {"new", "mid", "bob"}


def test_scopes_never_leak(store):
    add(store, record("a1", "likes sushi", ALEX), record("b1", "likes sushi", BOB),
        record("b2", "likes sushi", Scope(user_id="bob", agent_id="helper", run_id="r9")))
    assert [r.id for r in store.list(F_ALEX)] == ["a1"]
    assert vsearch(store, "likes sushi") == ["a1"]
    assert tsearch(store, "sushi") == ["a1"]
    assert set(vsearch(store, "likes sushi", F_BOB)) == {"b1", "b2"}
    assert set(tsearch(store, "sushi", F_BOB)) == {"b1", "b2"}
    assert set(tsearch(store, "sushi", F_TENANT)) == {"a1", "b1", "b2"}
    run = ScopeFilter("", "bob", run_id="r9")
    assert vsearch(store, "likes sushi", run) == ["b2"]
    assert tsearch(store, "sushi", run) == ["b2"]
    assert tsearch(store, "sushi", ScopeFilter("", "bob", agent_id="helper", run_id="r9")) == ["b2"]
    assert tsearch(store, "sushi", ScopeFilter("", "bob", agent_id="", run_id="r9")) == []
    assert tsearch(store, "sushi", ScopeFilter("other-tenant", "alex")) == []
    assert vsearch(store, "likes sushi", ScopeFilter("other-tenant", "alex")) == []
    assert {e.memory_id for e in store.events(F_ALEX)} == {"a1"}
    assert [r.id for r in store.find_by_hash(F_ALEX, content_hash("Likes Sushi."))] == ["a1"]


def test_query_text_with_search_syntax_is_safe(store):
    add(store, record("a", 'say "hello" AND goodbye'), record("b", "unrelated", BOB))
    for scope in (F_ALEX, F_TENANT):
        assert tsearch(store, 'say "hello" NEAR( * -x', scope) == ["a"]
        assert tsearch(store, "?!", scope) == []


# persistence -----------------------------------------------------------------------


def test_reopen_sees_everything(store, reopen):
    add(store, record("a", "Likes sushi"), record("b", "Plays chess", BOB))
    r = store.get("a")
    with store.transaction() as b:
        b.update(r.copy(text="Loves sushi", search_text="Loves sushi", updated_at=time.time()), vec("Loves sushi"), old_text=r.text)
        b.event("turn", ALEX, payload={"messages": ["hi"]})
    store.close()

    again = reopen()
    assert again.schema_version() == SCHEMA_VERSION
    assert again.embedder_identity() == (EMB.name, EMB.dim)
    assert again.get("a").text == "Loves sushi"
    assert [r.id for r in again.list(F_BOB)] == ["b"]
    assert vsearch(again, "Loves sushi", k=1) == ["a"]
    assert vsearch(again, "Plays chess", F_BOB, k=1) == ["b"]
    assert tsearch(again, "sushi") == ["a"]
    assert tsearch(again, "chess", F_BOB) == ["b"]
    assert tsearch(again, "chess", F_TENANT) == ["b"]
    assert [e.op for e in again.history("a")] == ["add", "update"]
    assert [e.op for e in again.events(F_ALEX)] == ["add", "update", "turn"]


# atomicity -------------------------------------------------------------------------


def test_failure_mid_transaction_leaves_nothing(store, path):
    add(store, record("keep", "Likes sushi"), record("bob", "Plays chess", BOB))
    # Load the in-process index before the failing transaction.
    assert vsearch(store, "Likes sushi") == ["keep"]
    assert tsearch(store, "sushi") == ["keep"]
    gen_before = generation(path)
    events_before = event_count(path)

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.transaction() as b:
        b.add(record("ghost", "Likes sushi rolls"), vec("Likes sushi rolls"))
        b.event("turn", ALEX, payload={"messages": ["x"]})
        raise Boom()

    assert store.get("ghost") is None
    assert event_count(path) == events_before
    assert store.history("ghost") == []
    assert generation(path) == gen_before
    assert vsearch(store, "Likes sushi rolls") == ["keep"]
    assert tsearch(store, "rolls") == []
    assert tsearch(store, "rolls", F_TENANT) == []
    assert tsearch(store, "sushi") == ["keep"]

    # The index loaded before the failure is still in step with the store.
    add(store, record("next", "Drinks green tea"))
    assert vsearch(store, "Drinks green tea", k=1) == ["next"]
    assert set(vsearch(store, "anything")) == {"keep", "next"}
    assert tsearch(store, "tea") == ["next"]
    with store.transaction() as b:
        b.delete(store.get("keep"))
    assert vsearch(store, "Likes sushi") == ["next"]


def test_store_error_mid_delta_rolls_back_earlier_writes(store, path):
    add(store, record("a", "first"))
    assert tsearch(store, "first") == ["a"]
    events_before = event_count(path)
    with pytest.raises(StoreError), store.transaction() as b:
        b.add(record("b", "second"), vec("second"))
        b.delete(store.get("a"))
        b.event("turn", ALEX)
        b.add(record("a", "duplicate id"), vec("duplicate id"))  # fails
    assert store.get("b") is None
    assert store.get("a").status is Status.ACTIVE
    assert event_count(path) == events_before
    assert vsearch(store, "second") == ["a"]
    assert tsearch(store, "second") == []
    assert tsearch(store, "first") == ["a"]


def test_failed_transaction_keeps_buffered_retrievals(store):
    """A rolled-back write must not take unrelated, already-buffered retrievals
    (the access clock that decay counts) down with it."""
    add(store, record("a", "Likes sushi"))
    store.touch([store.get("a")], query="sushi")
    assert store.access_clock(ALEX) == 1
    with pytest.raises(RuntimeError), store.transaction():
        raise RuntimeError("caller failed")
    assert store.access_clock(ALEX) == 1


def test_events_are_append_only(store, path):
    add(store, record("a", "Likes sushi"))
    with raw(path) as c, pytest.raises(sqlite3.DatabaseError, match="append-only"):
        c.execute("UPDATE events SET new_text = 'rewritten'")
    assert store.history("a")[0].new_text == "Likes sushi"


# schema and foreign files ------------------------------------------------------------


def _v1_store(path: str, rows: list[tuple[str, Scope, str, str]], *, vectors: bool) -> None:
    """A store as Engram's schema version 1 wrote it: (id, scope, text, status) rows."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in _split_sql(V1):
        conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    if vectors:
        conn.execute("INSERT INTO meta (key, value) VALUES ('embedder_name', ?)", (EMB.name,))
        conn.execute("INSERT INTO meta (key, value) VALUES ('embedder_dim', ?)", (str(EMB.dim),))
    spaces: dict[tuple, int] = {}
    for mid, scope, text, status in rows:
        if scope.space not in spaces:
            cur = conn.execute("INSERT INTO spaces (tenant_id, user_id, agent_id, created_at) VALUES (?, ?, ?, ?)", (*scope.space, time.time()))
            spaces[scope.space] = cur.lastrowid
        cur = conn.execute(
            "INSERT INTO memories (id, space_id, scope_key, text, search_text, kind, memory_class, created_at, content_hash, status) "
            "VALUES (?, ?, ?, ?, ?, 'fact', 'semantic', ?, ?, ?)",
            (mid, spaces[scope.space], scope_key(scope), text, text, time.time(), content_hash(text), status),
        )
        if vectors and status == "active":
            conn.execute("INSERT INTO embeddings (memory_rowid, space_id, vector) VALUES (?, ?, ?)",
                         (cur.lastrowid, spaces[scope.space], vec(text).tobytes()))
    conn.close()


def test_migrates_a_version_1_row(path, reopen):
    """The minimal case: one space row and one memory row written by version 1."""
    _v1_store(path, [("old", ALEX, "Enjoys hiking in the Alps", "active")], vectors=False)
    store = reopen()
    assert store.schema_version() == 2
    assert store.get("old").text == "Enjoys hiking in the Alps"
    assert tsearch(store, "hiking") == ["old"]


def test_migrates_a_version_1_store(path, reopen):
    _v1_store(path, [
        ("old", ALEX, "Enjoys hiking in the Alps", "active"),
        ("gone", ALEX, "Enjoys hiking in Norway", "deleted"),
        ("bobs", BOB, "Hiking boots are size 44", "active"),
    ], vectors=True)
    store = reopen()
    assert store.schema_version() == 2
    assert store.get("old").text == "Enjoys hiking in the Alps"
    assert tsearch(store, "hiking") == ["old"]
    assert tsearch(store, "hiking", F_BOB) == ["bobs"]
    assert set(tsearch(store, "hiking", F_TENANT)) == {"old", "bobs"}  # FTS filled by the migration
    assert vsearch(store, "Enjoys hiking in the Alps", k=1) == ["old"]
    # The migrated store is fully writable.
    add(store, record("new", "Hiking poles"))
    assert set(tsearch(store, "hiking")) == {"old", "new"}
    store.close()
    assert reopen().schema_version() == 2  # migrating is done once


def test_newer_schema_is_refused(store, path, reopen):
    store.close()
    with raw(path) as c:
        c.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(CorruptStoreError, match="99"):
        reopen()


def test_non_sqlite_file_is_refused_and_untouched(tmp_path):
    p = tmp_path / "notes.db"
    content = b"not a database\n" + os.urandom(8192)
    p.write_bytes(content)
    with pytest.raises(CorruptStoreError) as info:
        SQLiteStore(str(p))
    assert str(p) in str(info.value)
    assert p.read_bytes() == content


def _foreign_db(p) -> None:
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    c.execute("INSERT INTO invoices (total) VALUES (9.5)")
    c.commit()
    c.close()


def test_foreign_sqlite_database_is_refused(tmp_path):
    p = tmp_path / "app.db"
    _foreign_db(p)
    with pytest.raises(CorruptStoreError) as info:
        SQLiteStore(str(p))
    assert str(p) in str(info.value)
    with sqlite3.connect(p) as c:
        assert c.execute("SELECT total FROM invoices").fetchall() == [(9.5,)]
        assert c.execute("SELECT count(*) FROM sqlite_master WHERE name = 'meta'").fetchone()[0] == 0


def test_foreign_sqlite_database_is_left_byte_identical(tmp_path):
    """Pointing Engram at someone else's database must not change that file."""
    p = tmp_path / "app.db"
    _foreign_db(p)
    before = p.read_bytes()
    with pytest.raises(CorruptStoreError):
        SQLiteStore(str(p))
    assert p.read_bytes() == before


# maintenance -----------------------------------------------------------------------


def test_reindex_rebuilds_the_full_text_index(store, path):
    add(store, record("a", "Likes sushi"), record("b", "Plays chess", BOB))
    with raw(path) as c:
        c.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
    assert tsearch(store, "sushi", F_TENANT) == []
    result = store.reindex()
    assert result["indexed"] == 2
    assert tsearch(store, "sushi", F_TENANT) == ["a"]
    assert tsearch(store, "chess", F_TENANT) == ["b"]
    assert tsearch(store, "sushi") == ["a"]
    assert vsearch(store, "Likes sushi", k=1) == ["a"]


@pytest.mark.parametrize("spaces", ["one space", "two spaces"])
def test_reindex_does_not_resurrect_deleted_memories(store, spaces):
    other = ALEX if spaces == "one space" else ALEX_HELPER
    add(store, record("a", "Likes sushi"), record("b", "Likes ramen", other))
    with store.transaction() as b:
        b.delete(store.get("b"))
    store.reindex()
    assert tsearch(store, "likes") == ["a"]
    assert tsearch(store, "ramen") == []
    assert tsearch(store, "ramen", F_TENANT) == []
    assert vsearch(store, "Likes ramen") == ["a"]


def test_reindex_with_new_embedder_re_embeds_and_records_identity(store, reopen):
    add(store, record("a", "Likes sushi"), record("b", "Plays chess"))
    with store.transaction() as b:
        b.delete(store.get("b"))
    small = HashingEmbedder(64)
    result = store.reindex(small.embed, name=small.name, dim=small.dim)
    assert result == {"indexed": 1, "re_embedded": 1}
    assert store.embedder_identity() == (small.name, 64)
    hits = store.vector_search(F_ALEX, small.embed_one("Likes sushi"), k=None, cutoff=None, now=time.time())
    assert [h[0] for h in hits] == ["a"]
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert tsearch(store, "sushi") == ["a"]
    store.close()
    again = reopen()
    assert again.embedder_identity() == (small.name, 64)
    assert [h[0] for h in again.vector_search(F_ALEX, small.embed_one("sushi"), k=1, cutoff=None, now=time.time())] == ["a"]


def test_re_embedding_is_seen_by_another_open_instance(store, reopen):
    add(store, record("a", "Likes sushi"), record("b", "Plays chess"))
    other = reopen()
    assert vsearch(other, "Likes sushi", k=1) == ["a"]  # other's index holds 384-dim vectors
    small = HashingEmbedder(64)
    store.reindex(small.embed, name=small.name, dim=small.dim)
    hits = other.vector_search(F_ALEX, small.embed_one("Plays chess"), k=1, cutoff=None, now=time.time())
    assert [h[0] for h in hits] == ["b"]


def test_reset_empties_everything(store, path):
    add(store, record("a", "Likes sushi"), record("b", "Plays chess", BOB))
    store.touch([store.get("a")])
    assert vsearch(store, "Likes sushi") == ["a"]
    assert tsearch(store, "sushi") == ["a"]
    store.reset()
    assert store.get("a") is None
    assert store.list(F_ALEX) == [] and store.list(F_BOB) == []
    assert store.events() == []
    assert tsearch(store, "sushi") == [] and tsearch(store, "sushi", F_TENANT) == []
    assert store.stats()["memories"] == 0 and store.stats()["events"] == 0
    assert store.schema_version() == SCHEMA_VERSION
    assert store.access_clock(ALEX) == 0
    # Usable again afterwards, and the event log is still append-only.
    store.set_embedder_identity(EMB.name, EMB.dim)
    add(store, record("c", "Drinks tea"))
    assert vsearch(store, "Drinks tea") == ["c"]
    assert tsearch(store, "tea") == ["c"]
    with raw(path) as c, pytest.raises(sqlite3.DatabaseError, match="append-only"):
        c.execute("UPDATE events SET op = 'x'")


def test_touch_advances_the_clock_and_survives_reopen(store, reopen):
    add(store, record("a", "Likes sushi"), record("b", "Plays chess"))
    assert store.access_clock(ALEX) == 0
    store.touch([store.get("a")], query="sushi")
    store.touch([store.get("a"), store.get("b")], query="hobbies")
    assert store.access_clock(ALEX) == 2
    assert store.access_clock(BOB) == 0
    store.close()  # flushes the buffered retrievals

    again = reopen()
    assert again.access_clock(ALEX) == 2
    a, b = again.get("a"), again.get("b")
    assert a.access_count >= 1 and b.access_count >= 1
    assert a.last_access["semantic"] == 2 and b.last_access["semantic"] == 2
    retrievals = again.events(F_ALEX, ops=["retrieve"])
    assert [e.payload["query"] for e in retrievals] == ["sushi", "hobbies"]
    assert retrievals[1].payload["ids"] == ["a", "b"]


def test_access_count_does_not_depend_on_when_touches_are_flushed(tmp_path):
    """Two retrievals of a memory are two accesses, whether or not a write
    happened to flush the buffer between them."""
    counts = []
    for flush_between in (False, True):
        p = str(tmp_path / f"flush-{flush_between}.db")
        s = SQLiteStore(p)
        s.set_embedder_identity(EMB.name, EMB.dim)
        add(s, record("a", "Likes sushi"))
        s.touch([s.get("a")], query="first")
        if flush_between:
            s.flush()
        s.touch([s.get("a")], query="second")
        s.close()
        s = SQLiteStore(p)
        counts.append(s.get("a").access_count)
        s.close()
    assert counts == [2, 2]


def test_buffered_touches_are_flushed_by_the_next_write(store, path):
    add(store, record("a", "Likes sushi"))
    store.touch([store.get("a")])
    add(store, record("b", "Plays chess"))
    with raw(path) as c:
        assert c.execute("SELECT access_clock FROM spaces WHERE user_id = 'alex'").fetchone()[0] == 1


def test_two_instances_on_one_file_see_each_others_writes(store, reopen):
    other = reopen()
    add(store, record("a", "Likes sushi"))
    assert vsearch(other, "Likes sushi") == ["a"]  # loads other's index at this generation
    assert tsearch(other, "sushi") == ["a"]
    add(store, record("b", "Likes sushi rolls"))
    assert set(vsearch(other, "Likes sushi")) == {"a", "b"}
    assert set(tsearch(other, "sushi")) == {"a", "b"}
    with store.transaction() as b:
        b.delete(store.get("a"))
    assert vsearch(other, "Likes sushi") == ["b"]
    assert tsearch(other, "sushi") == ["b"]
    # Writes from the second instance reach the first, whose index is now behind.
    assert vsearch(store, "Likes sushi") == ["b"]
    add(other, record("c", "Enjoys sushi"))
    assert set(vsearch(store, "sushi")) == {"b", "c"}
    # And the first instance's own write after that is applied on a fresh index.
    add(store, record("d", "Sushi on Fridays"))
    assert set(vsearch(store, "sushi")) == {"b", "c", "d"}
    assert set(vsearch(other, "sushi")) == {"b", "c", "d"}
    assert set(tsearch(other, "sushi")) == {"b", "c", "d"}


def _full_record(mid: str, text: str) -> MemoryRecord:
    from engram.model import Kind, MemoryClass, Tier

    return MemoryRecord(
        id=mid, scope=Scope("", "alex", "", "run-7"), text=text, kind=Kind.PREFERENCE,
        memory_class=MemoryClass.PROCEDURAL, topic="drinks", concept="tea", section="habits", tags=["a"],
        helpful=3, harmful=2, strengths={"semantic": 0.25, "episodic": 0.5, "procedural": 0.75},
        last_access={"semantic": 4, "episodic": 5, "procedural": 6}, access_count=7, importance=1, energy=0.3,
        tier=Tier.LONG_TERM, created_at=1_700_000_000, updated_at=None, valid_to=None,
        content_hash=content_hash(text), metadata={"name": "Alex", "n": [1, {"x": None}]},
        lineage={"merged_from": ["x"]}, search_text="alex: " + text,
    )


def test_results_shown_from_the_index_equal_the_stored_rows(store):
    add(store, _full_record("t", "Prefers green tea"), record("s", "Likes sushi"))
    with store.transaction() as b:
        b.update(store.get("s").copy(text="Likes salmon sushi", metadata={"k": 1}, updated_at=1_800_000_000.5),
                 vec("Likes salmon sushi"), old_text="Likes sushi")
    vsearch(store, "tea")  # the index is loaded, then patched by later writes
    add(store, _full_record("u", "Prefers black tea"))
    read = store.get_many(["t", "s", "u"])
    shown = store.get_many(["t", "s", "u"], scope=F_ALEX, exact_access=False)
    assert shown == read
    # Retrievals change only the access bookkeeping of what is shown.
    store.touch([read["t"]], query="tea")
    store.flush()
    read = store.get_many(["t"])["t"]
    shown = store.get_many(["t"], scope=F_ALEX, exact_access=False)["t"]
    assert read.access_count == 8
    assert shown.access_count == 7  # shown from the index, which did not read it again
    lagging = {"access_count": 0, "last_access": {}}
    assert shown.copy(**lagging) == read.copy(**lagging)


def test_results_shown_from_the_index_follow_another_instances_writes(store, reopen):
    other = reopen()
    add(store, record("a", "Likes sushi"))
    assert vsearch(other, "sushi") == ["a"]  # other holds a's row now
    with store.transaction() as b:
        b.update(store.get("a").copy(text="Likes salmon sushi", metadata={"source": "edit"}), vec("Likes salmon sushi"), old_text="Likes sushi")
    shown = other.get_many(["a"], scope=F_ALEX, exact_access=False)["a"]
    assert (shown.text, shown.metadata) == ("Likes salmon sushi", {"source": "edit"})
    with store.transaction() as b:
        b.delete(store.get("a"))
    assert other.get_many(["a"], scope=F_ALEX, exact_access=False)["a"].status is Status.DELETED
    assert other.get_many(["missing"], scope=F_ALEX, exact_access=False) == {}


def test_stats_counts(store):
    add(store, record("a", "one"), record("b", "two"), record("c", "three", BOB))
    with store.transaction() as b:
        b.delete(store.get("b"))
    s = store.stats()
    assert (s["memories"], s["deleted"], s["users"], s["schema_version"]) == (2, 1, 2, SCHEMA_VERSION)
    assert (s["embedder"], s["dim"]) == (EMB.name, EMB.dim)
    assert s["events"] == 4
