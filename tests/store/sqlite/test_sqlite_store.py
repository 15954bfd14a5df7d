"""What only the SQLite store promises: its file, schema and migrations, its two
text-search paths, its write lock and its in-process index.

The store contract itself is checked on SQLite by ``tests/store/contract``; the tests
here may open the file with :mod:`sqlite3` and look inside.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from memorist import ConfigurationError, CorruptStoreError, HashingEmbedder, StoreError
from memorist.model import MemoryRecord, Scope
from memorist.policies.text import content_hash
from memorist.store import open_store
from memorist.store.base import ScopeFilter
from memorist.store.codec import scope_key
from memorist.store.sqlite import SQLiteStore
from memorist.store.sqlite import store as store_module
from memorist.store.sqlite.schema import SCHEMA_VERSION, V1
from memorist.store.sqlite.store import _split_sql

EMB = HashingEmbedder()
ALEX = Scope(user_id="alex")
ALEX_HELPER = Scope(user_id="alex", agent_id="helper")
BOB = Scope(user_id="bob")
F_ALEX = ScopeFilter("", "alex")
F_ALEX_ONLY = ScopeFilter("", "alex", agent_id="")
F_BOB = ScopeFilter("", "bob")
F_TENANT = ScopeFilter("")


def record(mid: str, text: str, scope: Scope = ALEX, **kw) -> MemoryRecord:
    return MemoryRecord(id=mid, scope=scope, text=text, search_text=text, created_at=time.time(),
                        content_hash=content_hash(text), **kw)


def vec(text: str) -> np.ndarray:
    return EMB.embed_one(text)


def add(store: SQLiteStore, *records: MemoryRecord) -> None:
    with store.transaction() as b:
        for r in records:
            b.add(r, vec(r.text))


def vsearch(store, text, scope=F_ALEX, k=None):
    return [mid for mid, _ in store.vector_search(scope, vec(text), k=k, cutoff=None, now=time.time())]


def tsearch(store, query, scope=F_ALEX, k=50):
    return [mid for mid, _ in store.text_search(scope, query, k=k, cutoff=None, now=time.time())]


def raw(path) -> sqlite3.Connection:
    """A second, independent connection to the store file."""
    return sqlite3.connect(path, isolation_level=None)


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "store.db")


@pytest.fixture
def reopen(path):
    opened: list[SQLiteStore] = []

    def _open(p=None, **kw) -> SQLiteStore:
        s = SQLiteStore(p or path, **kw)
        s.bind_embedder(EMB.name, EMB.dim)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        s.close()


@pytest.fixture
def store(reopen) -> SQLiteStore:
    return reopen()


# the file ------------------------------------------------------------------------------


def test_a_new_store_is_a_wal_file_at_the_current_schema(tmp_path):
    path = tmp_path / "deep" / "folder" / "store.db"  # missing folders are made
    s = SQLiteStore(path)
    s.bind_embedder(EMB.name, EMB.dim)
    assert s.schema_version() == SCHEMA_VERSION
    add(s, record("a", "Likes sushi"))
    with raw(path) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    def on_disk() -> int:
        return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())

    # (The store's checkpoint thread may copy the log into the file meanwhile: the
    # file grows, the log stays as it is.)
    before = on_disk()
    stats = s.stats()
    after = on_disk()
    assert (stats["path"], stats["schema_version"]) == (str(path), SCHEMA_VERSION)
    assert before <= stats["size_bytes"] <= after
    s.close()


def test_an_in_memory_store_has_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = SQLiteStore(":memory:")
    s.bind_embedder(EMB.name, EMB.dim)
    add(s, record("a", "Likes sushi"))
    assert vsearch(s, "Likes sushi") == ["a"]
    assert (s.stats()["path"], s.stats()["size_bytes"]) == (":memory:", None)
    s.close()
    assert list(tmp_path.iterdir()) == []


def test_events_are_append_only_in_the_file(store, path):
    add(store, record("a", "Likes sushi"))
    with raw(path) as c, pytest.raises(sqlite3.DatabaseError, match="append-only"):
        c.execute("UPDATE events SET new_text = 'rewritten'")
    assert store.history("a")[0].new_text == "Likes sushi"
    store.reset()  # empties the log, and puts the guard back
    assert store.schema_version() == SCHEMA_VERSION
    add(store, record("c", "Drinks tea"))
    with raw(path) as c, pytest.raises(sqlite3.DatabaseError, match="append-only"):
        c.execute("UPDATE events SET op = 'x'")


def test_buffered_touches_are_written_with_the_next_write(store, path):
    add(store, record("a", "Likes sushi"))
    store.touch([store.get("a")])
    with raw(path) as c:
        assert c.execute("SELECT access_clock FROM spaces WHERE user_id = 'alex'").fetchone()[0] == 0
    add(store, record("b", "Plays chess"))
    with raw(path) as c:
        assert c.execute("SELECT access_clock FROM spaces WHERE user_id = 'alex'").fetchone()[0] == 1
        assert c.execute("SELECT access_count FROM memories WHERE id = 'a'").fetchone()[0] == 1


# the write lock ----------------------------------------------------------------------------


def test_busy_timeout_must_be_seconds():
    for bad in (-1, 86_401, True, "5"):
        with pytest.raises(ConfigurationError, match="busy_timeout"):
            SQLiteStore(":memory:", busy_timeout=bad)


def test_a_writer_waits_for_the_lock_up_to_its_busy_timeout(path):
    s = open_store(path, busy_timeout=0.3)
    s.bind_embedder(EMB.name, EMB.dim)
    assert s.busy_timeout == 0.3
    hog = raw(path)
    hog.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match="busy timeout"), s.transaction() as b:
            b.add(record("a", "Likes sushi"), vec("Likes sushi"))
        assert 0.25 <= time.monotonic() - started < 2.5
    finally:
        hog.rollback()
        hog.close()
    add(s, record("a", "Likes sushi"))  # the lock is free again
    assert s.get("a") is not None
    s.close()


# schema and foreign files --------------------------------------------------------------------


def test_split_sql_keeps_trigger_bodies_whole():
    script = """
    -- a comment
    CREATE TABLE t (x INTEGER);

    CREATE TRIGGER t_guard BEFORE UPDATE ON t
    BEGIN
        SELECT RAISE(ABORT, 'no; never');
    END;
    INSERT INTO t VALUES (1)
    """
    statements = _split_sql(script)
    assert len(statements) == 3
    assert statements[0] == "CREATE TABLE t (x INTEGER);"
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END;")
    assert statements[2] == "INSERT INTO t VALUES (1)"
    assert all(sqlite3.complete_statement(s + ";") for s in statements)


def _v1_store(path: str, rows: list[tuple[str, Scope, str, str]], *, vectors: bool) -> None:
    """A store as Memorist's schema version 1 wrote it: (id, scope, text, status) rows."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(V1)
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
    assert store.schema_version() == SCHEMA_VERSION
    assert store.get("old").text == "Enjoys hiking in the Alps"
    assert tsearch(store, "hiking") == ["old"]


def test_migrates_a_version_1_store(path, reopen):
    _v1_store(path, [
        ("old", ALEX, "Enjoys hiking in the Alps", "active"),
        ("gone", ALEX, "Enjoys hiking in Norway", "deleted"),
        ("bobs", BOB, "Hiking boots are size 44", "active"),
    ], vectors=True)
    store = reopen()
    assert store.schema_version() == SCHEMA_VERSION
    assert store.get("old").text == "Enjoys hiking in the Alps"
    assert tsearch(store, "hiking") == ["old"]
    assert tsearch(store, "hiking", F_BOB) == ["bobs"]
    assert set(tsearch(store, "hiking", F_TENANT)) == {"old", "bobs"}  # FTS filled by the migration
    assert vsearch(store, "Enjoys hiking in the Alps", k=1) == ["old"]
    # The migrated store is fully writable.
    add(store, record("new", "Hiking poles"))
    assert set(tsearch(store, "hiking")) == {"old", "new"}
    store.close()
    assert reopen().schema_version() == SCHEMA_VERSION  # migrating is done once


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
    """Pointing Memorist at someone else's database must not change that file."""
    p = tmp_path / "app.db"
    _foreign_db(p)
    before = p.read_bytes()
    with pytest.raises(CorruptStoreError):
        SQLiteStore(str(p))
    assert p.read_bytes() == before


# the text-search paths -------------------------------------------------------------------------
# One space (one user) is served by its in-process BM25 index, a scope spanning a few
# spaces by theirs, scored with the statistics of all of them, and one spanning more
# than POOLED_SPACES by SQLite's FTS5 table.


@pytest.fixture
def fts_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scope of more than one space searched through FTS5."""
    monkeypatch.setattr(store_module, "POOLED_SPACES", 1)


@pytest.mark.parametrize("through", ["indexes", "fts5"])
def test_every_text_path_finds_the_same_memories(store, through: str, monkeypatch: pytest.MonkeyPatch):
    if through == "fts5":
        monkeypatch.setattr(store_module, "POOLED_SPACES", 1)
    add(store, record("a", "Likes sushi"), record("b", "Likes ramen"), record("c", "Plays chess"),
        record("h", "Helper notes", ALEX_HELPER))
    old = store.get("a")
    with store.transaction() as b:
        b.update(old.copy(text="Loves sashimi", search_text="Loves sashimi"), None, old_text=old.text)
        b.delete(store.get("b"))
    for query in ("sushi", "sashimi", "ramen", "likes", "chess loves", 'x "y" NEAR( * -z'):
        assert set(tsearch(store, query, F_ALEX_ONLY)) == set(tsearch(store, query, F_ALEX)), query


def test_a_few_spaces_score_as_one_index_holding_all_their_rows(reopen, tmp_path: Path):
    texts = [f"{w} {v} note {i}" for i, (w, v) in enumerate(
        (w, v) for w in ("kayak", "pottery", "sourdough", "chess", "orchard") for v in ("lake", "kiln", "bread", "club", "apples", "kayak"))]
    one, split = reopen(str(tmp_path / "one.db")), reopen(str(tmp_path / "split.db"))
    add(one, *[record(f"m{i}", t) for i, t in enumerate(texts)])
    spread = (ALEX, ALEX_HELPER, Scope(user_id="alex", agent_id="coach"))
    add(split, *[record(f"m{i}", t, spread[i % 3]) for i, t in enumerate(texts)])
    now = time.time()
    for query in ("kayak", "kayak lake", "pottery kiln apples", "note 7", "bread club"):
        alone = one.text_search(F_ALEX, query, k=50, cutoff=None, now=now)
        pooled = split.text_search(F_ALEX, query, k=50, cutoff=None, now=now)
        assert len(split._spaces(F_ALEX)) == 3  # type: ignore[attr-defined]
        assert {m: round(s, 4) for m, s in pooled} == {m: round(s, 4) for m, s in alone}, query
        assert [s for _, s in pooled] == sorted((s for _, s in pooled), reverse=True)
        best = split.text_search(F_ALEX, query, k=3, cutoff=None, now=now)
        assert [s for _, s in best] == [s for _, s in pooled[:3]]  # (memories of equal scores in any order)
    for store in (one, split):
        assert store.text_search(F_ALEX, "kayak", k=0, cutoff=None, now=now) == []
        assert store.text_search(F_ALEX, "kayak", k=-1, cutoff=None, now=now) == []


def test_reindex_rebuilds_the_full_text_index(store, path, fts_only):
    add(store, record("a", "Likes sushi"), record("b", "Plays chess", BOB))
    with raw(path) as c:
        c.execute("INSERT INTO memories_fts (memories_fts) VALUES ('delete-all')")
    assert tsearch(store, "sushi", F_TENANT) == []
    assert store.reindex() == {"indexed": 2, "re_embedded": 0}
    assert tsearch(store, "sushi", F_TENANT) == ["a"]
    assert tsearch(store, "chess", F_TENANT) == ["b"]
    assert tsearch(store, "sushi") == ["a"]
    assert vsearch(store, "Likes sushi", k=1) == ["a"]


# the in-process index ----------------------------------------------------------------------------


def test_results_shown_from_the_index_lag_only_in_their_access_marks(store):
    """``get_many(scope=..., exact_access=False)`` answers from the loaded index: the
    rows it holds are those last written, without later retrievals."""
    add(store, record("t", "Prefers green tea", access_count=7))
    assert vsearch(store, "tea") == ["t"]  # loads the index
    store.touch([store.get("t")], query="tea")
    store.flush()
    read = store.get_many(["t"])["t"]
    shown = store.get_many(["t"], scope=F_ALEX, exact_access=False)["t"]
    assert read.access_count == 8
    assert shown.access_count == 7  # shown from the index, which did not read it again
    lagging = {"access_count": 0, "last_access": {}}
    assert shown.copy(**lagging) == read.copy(**lagging)


def test_a_filter_checked_by_the_store_reads_the_same_file_after_a_change_of_directory(tmp_path, monkeypatch):
    from memorist import Memory

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(work)
    memory = Memory("mem.db", embedder="hashing")  # a relative path
    memory.add("Maya likes kayaks", user_id="maya", metadata={"tag": "x"}, infer=False)
    monkeypatch.chdir(elsewhere)
    try:
        assert [r["memory"] for r in memory.get_all(user_id="maya", filters={"tag": "x"})["results"]] == ["Maya likes kayaks"]
        assert not (elsewhere / "mem.db").exists()  # no stray store made where the process went
    finally:
        memory.close()


def test_a_re_embedding_keeps_the_vectors_of_memories_another_process_wrote_just_before_it(tmp_path, monkeypatch):
    """The rows to re-embed were read before the write began: a memory committed by
    another process in between lost its vector to the re-embedding's DELETE, and the
    store was then damaged (a memory without a vector)."""
    from contextlib import contextmanager

    from memorist import Memory
    from memorist.memory import reembed

    db = str(tmp_path / "m.db")
    with Memory(db, embedder="hashing") as m:
        m.add("Likes sushi", user_id="alex", infer=False)
    original = SQLiteStore._write
    armed = {"writes": 0}

    @contextmanager
    def write_after_another_process(self, *args, **kwargs):
        armed["writes"] += 1
        if armed["writes"] == 2:  # the re-embedding's own write: another process commits first
            with Memory(db, embedder="hashing") as other:
                other.add("Plays chess on Sundays", user_id="bob", infer=False)
        with original(self, *args, **kwargs) as conn:
            yield conn

    monkeypatch.setattr(SQLiteStore, "_write", write_after_another_process)
    result = reembed(db, "hashing")
    monkeypatch.undo()
    assert result == {"indexed": 2, "re_embedded": 2}
    with raw(db) as c:
        assert c.execute("SELECT count(*) FROM memories m WHERE NOT EXISTS "
                         "(SELECT 1 FROM embeddings e WHERE e.memory_rowid = m.rowid)").fetchone()[0] == 0
    with Memory(db, embedder="hashing") as m:
        assert [r["memory"] for r in m.search("chess", user_id="bob")["results"]] == ["Plays chess on Sundays"]
