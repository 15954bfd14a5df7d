"""What the PostgreSQL store does beyond the contract suite (tests/store/contract): its
per-space locks seen from two connections, its vector indexes, BM25 in SQL, the
counters its triggers keep, NUL characters, and the log's protection."""

from __future__ import annotations

import threading
import time

import numpy as np
import psycopg
import pytest
from pg_records import HeldConnections

from memorist import HashingEmbedder, StoreError
from memorist.model import MemoryRecord, Scope, Status
from memorist.policies.text import content_hash
from memorist.store.base import ScopeFilter
from memorist.store.postgres import PostgresStore, full_text, query_terms
from memorist.store.touches import FLUSH_EVERY

EMB = HashingEmbedder()
ALEX, BOB = Scope(user_id="alex"), Scope(user_id="bob")
F_ALEX = ScopeFilter("", "alex")
DIM = 32


def record(mid: str, text: str, scope: Scope = ALEX, **kw) -> MemoryRecord:
    kw.setdefault("created_at", time.time())
    return MemoryRecord(id=mid, scope=scope, text=text, content_hash=content_hash(text), search_text=text, **kw)


@pytest.fixture
def store(opened) -> PostgresStore:
    return opened()


def sql(url: str, query: str, *args):
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path TO memorist, public")
        return conn.execute(query, args).fetchall()


def add(store, *records, vectors=None):
    with store.transaction() as b:
        for i, r in enumerate(records):
            b.add(r, EMB.embed_one(r.text) if vectors is None else vectors[i])


# the log and the counters -----------------------------------------------------------------


def test_the_database_refuses_to_rewrite_the_log(store, pg_url):
    add(store, record("a", "Likes sushi"))
    with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
        sql(pg_url, "UPDATE events SET new_text = 'rewritten'")
    assert store.history("a")[0].new_text == "Likes sushi"


def test_space_counters_follow_every_kind_of_write(store, pg_url):
    def counters():
        return {u: (v, d, t) for u, v, d, t in sql(pg_url, "SELECT user_id, vectors, docs, doc_terms FROM spaces")}

    def truth():
        rows = sql(
            pg_url,
            "SELECT s.user_id, (SELECT count(*) FROM embeddings e WHERE e.space_id = s.id), "
            "count(m.rowid) FILTER (WHERE m.status = 'active'), "
            "COALESCE(sum(m.term_count) FILTER (WHERE m.status = 'active'), 0) "
            "FROM spaces s LEFT JOIN memories m ON m.space_id = s.id GROUP BY s.id, s.user_id",
        )
        return {u: (v, d, t) for u, v, d, t in rows}

    add(store, record("a", "Likes sushi and ramen"), record("b", "Plays chess"), record("c", "Reads books", BOB))
    with store.transaction() as b:
        b.add(record("novec", "Collects stamps"), None)
    assert counters() == truth() == {"alex": (2, 3, 7), "bob": (1, 1, 2)}
    old = store.get("a")
    with store.transaction() as b:
        b.update(old.copy(text="Likes tea", search_text="Likes tea"), None, old_text=old.text)
        b.delete(store.get("b"))
        b.update(store.get("novec").copy(status=Status.ARCHIVED), None, old_text="Collects stamps")
    assert counters() == truth() == {"alex": (1, 1, 2), "bob": (1, 1, 2)}
    store.touch([store.get("a"), store.get("c")], query="tea")
    store.flush()
    store.reindex(HashingEmbedder(64).embed, name="hashing-v1-64", dim=64)
    assert counters() == truth()
    store.reset()
    assert counters() == truth() == {}


# per-space locks ----------------------------------------------------------------------------


def test_a_transaction_holds_its_space_against_other_connections(opened):
    first, second = opened(), opened()
    add(first, record("a", "Likes sushi"))
    entered, release = threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def holder():
        with first.transaction() as b:
            seen["held"] = b.space_version(ALEX)
            entered.set()
            release.wait(30)
            b.add(record("b", "Likes ramen"), EMB.embed_one("Likes ramen"))

    thread = threading.Thread(target=holder)
    thread.start()
    assert entered.wait(30)
    # Another space is free...
    with second.transaction() as b:
        b.add(record("x", "Plays chess", BOB), EMB.embed_one("Plays chess"))
    # ...alex's is not: this batch's first read of it waits for the holder's commit.
    def waiter():
        with second.transaction() as b:
            seen["after"] = b.space_version(ALEX)

    other = threading.Thread(target=waiter)
    other.start()
    time.sleep(0.5)
    assert other.is_alive() and "after" not in seen  # still waiting
    release.set()
    thread.join(30)
    other.join(30)
    assert seen["after"] != seen["held"]  # it read the version the holder committed
    assert second.space_version(ALEX) == seen["after"]


def test_a_writer_waiting_longer_than_the_lock_timeout_fails_cleanly(opened):
    first, second = opened(), opened(lock_timeout=0.3)
    entered, release = threading.Event(), threading.Event()

    def holder():
        with first.transaction() as b:
            b.space_version(ALEX)
            entered.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert entered.wait(30)
        with pytest.raises(StoreError, match="lock timeout"), second.transaction() as b:
            b.add(record("a", "Likes sushi"), EMB.embed_one("Likes sushi"))
    finally:
        release.set()
        thread.join(30)
    assert second.get("a") is None
    add(second, record("a", "Likes sushi"))  # and the store works on
    assert second.get("a") is not None


def test_a_deadlock_between_two_multi_space_batches_is_a_store_error(opened):
    first, second = opened(), opened()
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def writer(name, store, spaces):
        try:
            with store.transaction() as b:
                b.space_version(spaces[0])
                barrier.wait(30)
                b.add(record(name, "Likes tea", spaces[1]), EMB.embed_one("Likes tea"))
            outcomes[name] = "committed"
        except StoreError as exc:
            outcomes[name] = exc

    threads = [
        threading.Thread(target=writer, args=("one", first, (ALEX, BOB))),
        threading.Thread(target=writer, args=("two", second, (BOB, ALEX))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    failed = [v for v in outcomes.values() if isinstance(v, StoreError)]
    assert sorted(str(v) for v in outcomes.values() if v == "committed") == ["committed"]
    assert len(failed) == 1 and "deadlock" in str(failed[0]) and "nothing of it was written" in str(failed[0])


def test_buffered_retrievals_wait_while_another_writer_holds_their_space(opened):
    writer, reader = opened(), opened()
    add(writer, record("a", "Likes sushi"))
    reader.touch([reader.get("a")], query="sushi")
    entered, release = threading.Event(), threading.Event()

    def holder():
        with writer.transaction() as b:
            b.add(record("b", "Likes ramen"), EMB.embed_one("Likes ramen"))  # holds alex's row
            entered.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert entered.wait(30)
        start = time.monotonic()
        reader.flush()  # gives up after a short wait instead of queueing behind the writer
        assert time.monotonic() - start < 5
        assert reader.access_clock(ALEX) == 1  # still counted, from the buffer
    finally:
        release.set()
        thread.join(30)
    reader.flush()
    assert writer.access_clock(ALEX) == 1 and writer.get("a").access_count == 1


def _fillfactor(url: str) -> list:
    return sql(url, "SELECT reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'memorist' AND c.relname = 'memories'")


def test_pages_of_memories_keep_room_for_a_search_s_bookkeeping(opened, pg_url):
    """A search's touches rewrite a row's access count in place only when its page has
    room: new stores leave it, and stores made before are given it when opened, with
    no new schema version (a release without it opens the store as before)."""
    first = opened()
    version = first.schema_version()
    first.close()
    assert _fillfactor(pg_url) == [(["fillfactor=90"],)]
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a store made before
        conn.execute("ALTER TABLE memorist.memories RESET (fillfactor)")
    assert _fillfactor(pg_url) == [(None,)]
    again = opened()
    assert _fillfactor(pg_url) == [(["fillfactor=90"],)]
    assert again.schema_version() == version


def test_a_read_only_session_opens_a_store_made_before(opened, pg_url):
    opened().close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # a store made before
        conn.execute("ALTER TABLE memorist.memories RESET (fillfactor)")
    with psycopg.connect(pg_url, autocommit=True) as conn:  # this database's sessions only
        database = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute(f'ALTER ROLE CURRENT_USER IN DATABASE "{database}" SET default_transaction_read_only = on')
    try:
        reader = opened()  # the setting is left for a session that may write
        assert reader.count(F_ALEX) == 0
        assert _fillfactor(pg_url) == [(None,)]
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = off")
            conn.execute(f'ALTER ROLE CURRENT_USER IN DATABASE "{database}" RESET default_transaction_read_only')


def test_a_fill_factor_an_administrator_set_is_kept(opened, pg_url):
    opened().close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE memorist.memories SET (fillfactor = 70)")
    opened()
    assert _fillfactor(pg_url) == [(["fillfactor=70"],)]


def _holding_space(pg_url, store, scope):
    """Another connection in a transaction holding ``scope``'s space lock, as a writer
    that has read or written it does (roll it back to let go)."""
    other = psycopg.connect(pg_url, autocommit=True)
    other.execute("BEGIN")
    other.execute("SELECT pg_advisory_xact_lock(%s)", (store._space_key(scope.space),))
    return other


def test_a_flush_never_waits_for_a_space_a_writer_holds(store, pg_url, monkeypatch):
    """A writer that holds one space and waits for another must not wait for a flush
    holding that other while it waits for the first: the flush gives up at once."""
    import memorist.store.postgres.store as pg_store

    monkeypatch.setattr(pg_store, "_TOUCH_LOCK_TIMEOUT_MS", 20_000)  # a wait would show
    add(store, record("a", "Likes sushi"), record("b", "Plays chess", BOB))
    a, b = store.get("a"), store.get("b")
    store.touch([a, b], query="both")
    writer = _holding_space(pg_url, store, BOB)
    try:
        done = threading.Event()
        threading.Thread(target=lambda: (store.flush(), done.set()), daemon=True).start()
        assert done.wait(10)  # not the 20 s of the lock timeout
        assert store.buffered_uses("a") == 1 and store.access_clock(ALEX) == 1  # kept
    finally:
        writer.rollback()
        writer.close()
    store.flush()
    assert (store.get("a").access_count, store.get("b").access_count) == (1, 1)


def test_erasing_one_owner_keeps_the_others_retrievals_it_could_not_write(store, pg_url):
    carol = Scope(user_id="carol")
    add(store, record("a", "Likes sushi"), record("b", "Plays chess", BOB), record("c", "Owns a cat", carol))
    a, b, c = store.get("a"), store.get("b"), store.get("c")
    for _ in range(5):
        store.touch([a, b, c], query="q")
    writer = _holding_space(pg_url, store, BOB)  # the erasure's flush cannot write now
    try:
        store.erase([ScopeFilter("", "carol")])
    finally:
        writer.rollback()
        writer.close()
    assert store.buffered_uses("c") == 0  # the erased owner's: dropped
    store.flush()
    assert (store.get("a").access_count, store.get("b").access_count) == (5, 5)
    assert store.access_clock(ALEX) == store.access_clock(BOB) == 5
    assert store.get("c") is None


def test_retrievals_made_during_an_erasure_are_not_logged_when_the_owner_comes_back(store, pg_url, monkeypatch):
    carol = Scope(user_id="carol")
    add(store, record("c", "Owns a cat", carol), record("a", "Likes sushi"))
    c, a = store.get("c"), store.get("a")
    erasing = store._changed_by_runs

    def meanwhile(conn, owned):  # a search of another thread, while the erasure runs
        store.touch([c, a], query="Frobnaxt")
        return erasing(conn, owned)

    monkeypatch.setattr(store, "_changed_by_runs", meanwhile)
    store.erase([ScopeFilter("", "carol")])
    monkeypatch.undo()
    add(store, record("c2", "Owns a dog", carol))  # carol comes back
    store.flush()
    assert sql(pg_url, "SELECT count(*) FROM events e JOIN spaces s ON s.id = e.space_id "
                       "WHERE s.user_id = 'carol' AND e.payload LIKE %s", "%Frobnaxt%") == [(0,)]
    assert store.get("a").access_count == 1  # another owner's retrieval is kept

def _held_background_flush(store, monkeypatch, *, fail: bool = False):
    """Make the store's background flush wait for ``release`` (and then fail once with
    ``fail``); ``started`` is set once it waits."""
    started, release = threading.Event(), threading.Event()
    original = store._flush_touches

    def held(conn, buffer, **kw):
        if kw.get("committed") is not None and threading.current_thread().name == "memorist-touches":
            started.set()
            assert release.wait(30)
            if fail and not getattr(held, "failed", False):
                held.failed = True
                raise psycopg.OperationalError("server closed the connection unexpectedly")
        return original(conn, buffer, **kw)

    monkeypatch.setattr(store, "_flush_touches", held)
    return started, release


def _touch_in_thread(store, records, query, times):
    """``times`` retrievals from another thread; True once all were recorded within 10 s."""
    done = threading.Event()

    def touch():
        for _ in range(times):
            store.touch(records, query=query)
        done.set()

    threading.Thread(target=touch, daemon=True).start()
    return done.wait(10)


def test_the_search_that_fills_the_buffer_returns_before_its_write(store, monkeypatch):
    add(store, record("a", "Likes sushi"), record("b", "Plays chess"))
    a, b = store.get("a"), store.get("b")
    started, release = _held_background_flush(store, monkeypatch)
    try:
        assert _touch_in_thread(store, [a], "sushi", FLUSH_EVERY)  # the last one starts the write
        assert started.wait(30)
        # The write waits: retrievals meanwhile are buffered without waiting for it,
        # and counted with those it is writing.
        assert _touch_in_thread(store, [a, b], "both", 5)
        assert store.buffered_uses("a") == FLUSH_EVERY + 5 and store.access_clock(ALEX) == FLUSH_EVERY + 5
    finally:
        release.set()
    store.flush()  # after the write under way
    assert store.buffered_uses("a") == 0 and store.access_clock(ALEX) == FLUSH_EVERY + 5
    got = store.get("a")
    assert (got.access_count, got.last_access["semantic"]) == (FLUSH_EVERY + 5, FLUSH_EVERY + 5)
    assert store.get("b").access_count == 5
    queries = [e.payload["query"] for e in store.events(F_ALEX, ops=["retrieve"])]
    assert queries == ["sushi"] * FLUSH_EVERY + ["both"] * 5



def test_a_write_after_a_search_keeps_the_retrievals_a_flush_commits_meanwhile(store, monkeypatch):
    """A writer writes back the counts it read: the flush must not commit between its
    read and its write (it waits for the writer's space, and gives way)."""
    add(store, record("a", "Likes sushi"))
    a = store.get("a")
    started, release = _held_background_flush(store, monkeypatch)
    assert _touch_in_thread(store, [a], "sushi", FLUSH_EVERY)
    assert started.wait(30)
    with store.transaction() as b:
        current = b.get_many(["a"])["a"]  # as Memory.update reads it
        release.set()
        deadline = time.monotonic() + 30
        while store._flush_lock.locked() and time.monotonic() < deadline:
            time.sleep(0.01)  # the flush ran: it found the space busy, or committed
        b.update(current.copy(text="Likes ramen", search_text="Likes ramen"), EMB.embed_one("Likes ramen"), old_text=current.text)
    store.flush()
    got = store.get("a")
    assert got.text == "Likes ramen"
    assert (got.access_count, got.last_access["semantic"], store.access_clock(ALEX)) == (FLUSH_EVERY,) * 3


def test_a_search_does_not_wait_for_the_flush_a_write_starts_with(store, monkeypatch):
    add(store, record("a", "Likes sushi"))
    a = store.get("a")
    store.touch([a], query="one")  # buffered: the next write writes it first
    started, release = threading.Event(), threading.Event()
    original = store._flush_touches

    def held(conn, buffer, **kw):
        if threading.current_thread().name == "writer":
            started.set()
            assert release.wait(30)
        return original(conn, buffer, **kw)

    monkeypatch.setattr(store, "_flush_touches", held)
    writer = threading.Thread(target=lambda: add(store, record("b", "Plays chess")), name="writer")
    writer.start()
    try:
        assert started.wait(30)
        assert _touch_in_thread(store, [a], "two", 3)  # not behind the write's flush
    finally:
        release.set()
        writer.join(30)
    store.flush()
    assert store.get("a").access_count == 4 and store.get("b") is not None
    assert [e.payload["query"] for e in store.events(F_ALEX, ops=["retrieve"])] == ["one", "two", "two", "two"]

def test_a_background_write_that_fails_keeps_every_retrieval_in_order(store, monkeypatch, caplog):
    add(store, record("a", "Likes sushi"), record("b", "Plays chess"))
    a, b = store.get("a"), store.get("b")
    started, release = _held_background_flush(store, monkeypatch, fail=True)
    try:
        assert _touch_in_thread(store, [a], "sushi", FLUSH_EVERY)
        assert started.wait(30)
        assert _touch_in_thread(store, [b], "chess", 3)
    finally:
        release.set()
    with caplog.at_level("WARNING", logger="memorist.store.postgres.store"):
        store.flush()  # waits for the failed one, then writes everything
    assert "writing retrieval bookkeeping failed" in caplog.text and "kept for the next write" in caplog.text
    assert "server closed the connection" in caplog.text
    assert store.access_clock(ALEX) == FLUSH_EVERY + 3 and store.buffered_uses("a") == 0
    got_a, got_b = store.get("a"), store.get("b")
    assert (got_a.access_count, got_a.last_access["semantic"]) == (FLUSH_EVERY, FLUSH_EVERY)
    assert (got_b.access_count, got_b.last_access["semantic"]) == (3, FLUSH_EVERY + 3)
    queries = [e.payload["query"] for e in store.events(F_ALEX, ops=["retrieve"])]
    assert queries == ["sushi"] * FLUSH_EVERY + ["chess"] * 3


def test_an_erased_owner_s_retrievals_are_not_written_when_they_come_back(store, monkeypatch, pg_url):
    """Erasing waits for the write under way: one that fails puts its retrievals back
    in the buffer, and the erasure must drop them, or the next flush would log the
    owner's queries in the space they get when they come back."""
    add(store, record("a", "Likes sushi"))
    a = store.get("a")
    started, release = _held_background_flush(store, monkeypatch, fail=True)
    erased = threading.Event()
    try:
        assert _touch_in_thread(store, [a], "Frobnaxt", FLUSH_EVERY)
        assert started.wait(30)
        threading.Thread(target=lambda: (store.erase([F_ALEX]), erased.set()), daemon=True).start()
        erased.wait(2)  # (an erasure that did not wait would be done by now)
    finally:
        release.set()
    assert erased.wait(30)
    add(store, record("b", "Plays chess"))  # alex comes back
    store.touch([store.get("b")], query="chess")
    store.flush()
    assert sql(pg_url, "SELECT count(*) FROM events WHERE payload LIKE %s", "%Frobnaxt%") == [(0,)]
    assert [e.payload["query"] for e in store.events(F_ALEX, ops=["retrieve"]) if "query" in e.payload] == ["chess"]


# reads ------------------------------------------------------------------------------------


def test_a_search_reads_one_snapshot(opened):
    reader, writer = opened(), opened()
    add(writer, record("a", "Likes sushi"))
    with reader.reading():
        assert [r.id for r in reader.list(F_ALEX)] == ["a"]
        add(writer, record("b", "Likes sushi rolls"))
        assert [r.id for r in reader.list(F_ALEX)] == ["a"]  # not half of another's work
    assert {r.id for r in reader.list(F_ALEX)} == {"a", "b"}


# vectors ----------------------------------------------------------------------------------


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fill(store: PostgresStore, scope: Scope, vectors: np.ndarray, prefix: str, **kw) -> None:
    with store.transaction() as b:
        for i, v in enumerate(vectors):
            b.add(record(f"{prefix}{i}", f"{prefix} memory {i}", scope, **kw), v)


def index_scans(url: str, *, at_least: int = 0) -> dict[str, int]:
    """Scans of each HNSW index (a closed connection's statistics arrive shortly after)."""
    deadline = time.monotonic() + 10
    while True:
        found = dict(sql(url, "SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE indexrelname LIKE 'embeddings_hnsw%%'"))
        if sum(found.values()) >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_large_spaces_get_their_own_hnsw_index_and_small_ones_exact_search(opened, pg_url):
    store = opened(exact_below=100)
    store.bind_embedder("random", DIM)
    rng = np.random.default_rng(7)
    fill(store, ALEX, unit(rng, 400), "a")
    fill(store, BOB, unit(rng, 60), "b")
    fill(store, Scope(user_id="alex", agent_id="helper"), unit(rng, 30), "h")
    assert store.build_indexes() == [1]  # alex's space only: bob's holds 60
    (name,) = index_scans(pg_url)
    assert name == "embeddings_hnsw_32_1_400"  # dimension, space, the newest row it holds
    queries = unit(rng, 10)
    for scope in (F_ALEX, ScopeFilter("", "alex", agent_id=""), ScopeFilter("", "bob"), ScopeFilter("")):
        for q in queries:
            got = store.vector_search(scope, q, k=10, cutoff=None, now=time.time())
            exact = store.vector_search(scope, q, k=None, cutoff=None, now=time.time())[:10]
            assert [m for m, _ in got] == [m for m, _ in exact]
            assert [s for _, s in got] == pytest.approx([s for _, s in exact], abs=1e-5)
    store.close()  # its connections' statistics are sent when they close
    used = index_scans(pg_url, at_least=30)[name]
    assert used >= 30  # alex's searches (3 scopes x 10 queries) went through the index
    again = opened(exact_below=100)
    again.bind_embedder("random", DIM)  # (bound to another, its searches are refused)
    for q in queries:
        again.vector_search(ScopeFilter("", "bob"), q, k=10, cutoff=None, now=time.time())
    again.close()
    time.sleep(1)
    assert index_scans(pg_url)[name] == used  # bob's did not


def test_the_validity_filter_never_makes_hnsw_drop_results(opened):
    store = opened(exact_below=50)
    store.bind_embedder("random", DIM)
    rng = np.random.default_rng(3)
    query = unit(rng, 1)[0]
    # 300 memories close to the query have ended; 5 far from it are still valid.
    near = query + 0.05 * unit(rng, 300)
    fill(store, ALEX, near / np.linalg.norm(near, axis=1, keepdims=True), "old", valid_to=time.time() - 60)
    far = 0.3 * unit(rng, 5) - query[None, :]
    fill(store, ALEX, far / np.linalg.norm(far, axis=1, keepdims=True), "live")
    store.build_indexes()
    hits = store.vector_search(F_ALEX, query, k=10, cutoff=None, now=time.time())
    assert {m for m, _ in hits} == {f"live{i}" for i in range(5)}


def test_an_index_is_built_in_the_background_by_the_first_search_that_needs_it(opened, pg_url):
    store = opened(exact_below=100)
    store.bind_embedder("random", DIM)
    rng = np.random.default_rng(5)
    fill(store, ALEX, unit(rng, 300), "a")
    q = unit(rng, 1)[0]
    exact = store.vector_search(F_ALEX, q, k=None, cutoff=None, now=time.time())[:5]
    assert store.vector_search(F_ALEX, q, k=5, cutoff=None, now=time.time()) == exact  # exact while none is ready
    deadline = time.monotonic() + 30
    while not index_scans(pg_url) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(index_scans(pg_url)) == ["embeddings_hnsw_32_1_300"]
    assert [m for m, _ in store.vector_search(F_ALEX, q, k=5, cutoff=None, now=time.time())] == [m for m, _ in exact]
    store.close()  # while nothing builds any more (the index is there)


def waiting(pg_url: str) -> int:
    """Rows of indexed spaces that their graph does not hold yet (searched exactly)."""
    names = [n for n in index_scans(pg_url) if n.count("_") == 4]
    total = 0
    for name in names:
        space, watermark = (int(p) for p in name.rsplit("_", 2)[1:])
        total += sql(pg_url, "SELECT count(*) FROM embeddings WHERE space_id = %s AND memory_rowid > %s AND NOT graphed", space, watermark)[0][0]
    return total


def assert_exact_top(store: PostgresStore, queries: np.ndarray, k: int = 10) -> None:
    for q in queries:
        got = store.vector_search(F_ALEX, q, k=k, cutoff=None, now=time.time())
        exact = store.vector_search(F_ALEX, q, k=None, cutoff=None, now=time.time())[:k]
        assert [m for m, _ in got] == [m for m, _ in exact]


def indexed_space(opened, seed: int, rows: int) -> tuple[PostgresStore, np.random.Generator]:
    """A store whose alex space holds ``rows`` random vectors under an HNSW index
    (``exact_below`` 50), and the generator that made them."""
    store = opened(exact_below=50)
    store.bind_embedder("random", DIM)
    rng = np.random.default_rng(seed)
    fill(store, ALEX, unit(rng, rows), "a")
    store.build_indexes()
    return store, rng


def test_rows_added_after_the_index_are_found_at_once_and_graphed_later(opened, pg_url):
    """An add never waits for a graph insert: rows newer than the index's watermark
    are searched exactly until the maintenance pass puts them in the graph."""
    store, rng = indexed_space(opened, 11, 200)
    assert list(index_scans(pg_url)) == ["embeddings_hnsw_32_1_200"]
    late = unit(rng, 30)
    fill(store, ALEX, late, "late")
    assert waiting(pg_url) == 30
    # Each new row is its own nearest neighbour, found before it is in the graph.
    for i in (0, 13, 29):
        hits = store.vector_search(F_ALEX, late[i], k=5, cutoff=None, now=time.time())
        assert hits[0][0] == f"late{i}" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert_exact_top(store, unit(rng, 10))
    store.build_indexes()
    assert waiting(pg_url) == 0
    assert list(index_scans(pg_url)) == ["embeddings_hnsw_32_1_200"]  # graphed into the same index
    assert store.vector_search(F_ALEX, late[7], k=1, cutoff=None, now=time.time())[0][0] == "late7"
    assert_exact_top(store, unit(rng, 10))


def test_a_search_has_new_rows_graphed_in_the_background_once_writes_pause(opened, pg_url):
    store, rng = indexed_space(opened, 12, 100)
    fill(store, ALEX, unit(rng, 10), "b")
    assert waiting(pg_url) == 10
    store.vector_search(F_ALEX, unit(rng, 1)[0], k=5, cutoff=None, now=time.time())
    deadline = time.monotonic() + 20
    while waiting(pg_url) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert waiting(pg_url) == 0
    assert_exact_top(store, unit(rng, 5))


def test_a_bulk_load_into_an_indexed_space_builds_a_new_index_instead(opened, pg_url):
    """More rows waiting than the index holds: one build up to the newest row, and
    the old index is dropped (not thousands of graph inserts)."""
    store, rng = indexed_space(opened, 13, 100)
    fill(store, ALEX, unit(rng, 150), "bulk")
    store.build_indexes()
    assert list(index_scans(pg_url)) == ["embeddings_hnsw_32_1_250"]
    assert waiting(pg_url) == 0
    # The rows the new index holds by its watermark were never marked one by one.
    assert sql(pg_url, "SELECT count(*) FROM embeddings WHERE graphed")[0][0] == 0
    assert_exact_top(store, unit(rng, 10))


def test_indexes_no_search_uses_are_dropped_by_the_maintenance_pass(opened, pg_url):
    """An interrupted concurrent build leaves an invalid index (which inserts may still
    update) and an older Memorist's index has no watermark: both go."""
    store, rng = indexed_space(opened, 14, 100)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET search_path TO memorist, public")
        for name in ("embeddings_hnsw_32_1", "embeddings_hnsw_32_1_77"):
            conn.execute(f"CREATE INDEX {name} ON embeddings USING hnsw ((vector::vector(32)) vector_cosine_ops) WHERE space_id = 1")
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'embeddings_hnsw_32_1_77'::regclass")
    assert sorted(index_scans(pg_url)) == ["embeddings_hnsw_32_1", "embeddings_hnsw_32_1_100", "embeddings_hnsw_32_1_77"]
    store.build_indexes()
    assert list(index_scans(pg_url)) == ["embeddings_hnsw_32_1_100"]
    assert_exact_top(store, unit(rng, 5))


def test_re_embedding_rebuilds_the_indexes_for_the_new_dimension(opened, pg_url):
    store = opened(exact_below=20)
    store.bind_embedder(EMB.name, EMB.dim)
    add(store, *[record(f"a{i}", f"note number {i} about gardening") for i in range(30)])
    store.build_indexes()
    assert list(index_scans(pg_url)) == ["embeddings_hnsw_384_1_30"]
    small = HashingEmbedder(64)
    store.reindex(small.embed, name=small.name, dim=small.dim)
    assert list(index_scans(pg_url)) == ["embeddings_hnsw_64_1_30"]
    hits = store.vector_search(F_ALEX, small.embed_one("note number 7 about gardening"), k=3, cutoff=None, now=time.time())
    assert hits[0][0] == "a7" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    store.reset()
    assert index_scans(pg_url) == {}


def test_a_query_of_another_dimension_is_a_store_error(store):
    add(store, record("a", "Likes sushi"))
    with pytest.raises(StoreError, match="384"):
        store.vector_search(F_ALEX, np.ones(8, dtype=np.float32), k=5, cutoff=None, now=time.time())
    assert store.similarities(F_ALEX, np.ones(8, dtype=np.float32), ["a"]) == {}


# full text --------------------------------------------------------------------------------


def test_full_text_ranks_by_bm25_as_the_sqlite_index_does(store, tmp_path):
    from memorist.store.sqlite import SQLiteStore

    texts = [
        "Caroline went to the LGBTQ support group yesterday",
        "Caroline likes painting sunsets with Melanie",
        "Melanie ran a charity race for mental health",
        "The support group helped Caroline a lot",
        "Caroline said the group was welcoming",
        "Melanie took her kids camping at the beach",
        "Caroline Caroline Caroline Caroline",
    ]
    sqlite = SQLiteStore(str(tmp_path / "s.db"))
    sqlite.bind_embedder(EMB.name, EMB.dim)
    for s in (store, sqlite):
        add(s, *[record(f"m{i}", t) for i, t in enumerate(texts)])
    for query in ("What did Caroline do at the support group?", "Melanie camping beach", "painting", "group"):
        pg = store.text_search(F_ALEX, query, k=10, cutoff=None, now=time.time())
        lite = sqlite.text_search(F_ALEX, query, k=10, cutoff=None, now=time.time())
        assert [m for m, _ in pg] == [m for m, _ in lite]
        assert [s for _, s in pg] == pytest.approx([s for _, s in lite], rel=1e-4)
    sqlite.close()


def test_full_text_terms_survive_any_text():
    long_word = "x" * 5000
    literal, count = full_text(f"it's a \\ 'quoted' {long_word} café naïve " + "word " * 20_000)
    assert count == 20_004 and long_word not in literal
    assert query_terms("who am I?") == [] and query_terms("Cafés, cafés!") == ["café"]


def test_text_with_nul_characters_round_trips(store):
    text = "tea\x00 time \U0010fffe escaped"
    add(store, record("a", text, metadata={"name": "Al\x00ex"}, topic="t\x00"))
    got = store.get("a")
    assert (got.text, got.search_text, got.topic, got.metadata) == (text, text, "t\x00", {"name": "Al\x00ex"})
    assert [m for m, _ in store.text_search(F_ALEX, "tea time", k=5, cutoff=None, now=time.time())] == ["a"]
    assert store.speakers(F_ALEX) == {"al\x00ex"}
    assert [m for m, _ in store.vector_search(F_ALEX, EMB.embed_one(text), k=5, cutoff=None, now=time.time(), speaker="al\x00ex")] == ["a"]
    with store.transaction() as b:
        b.update(got.copy(text="plain", search_text="plain"), None, old_text=text)
    assert [e.old_text for e in store.history("a")] == [None, text]
    assert store.get("a\x00") is None and store.history("a\x00") == [] and store.ids_with_prefix("", "a\x00") == []
    assert store.get_many(["a", "b\x00"]).keys() == {"a"}


def test_a_search_checking_its_filter_gives_its_connection_back_meanwhile(pg_url, another_caller_in_filter_checks):
    """A filter is checked in Python against every memory read (up to about a second);
    the search held its pooled connection meanwhile, so a pool's worth of such
    searches left every other call waiting. With one connection in the pool, the
    first check here waits until another thread's listing and write are done: held,
    they could not have a connection."""
    from memorist import Memory

    url = pg_url + ("&" if "?" in pg_url else "?") + "pool_size=1&pool_timeout=3"
    with Memory(url, embedder="hashing") as memory:
        memory.add([{"role": "user", "content": f"Note {i}: the kayak club met"} for i in range(20)], user_id="u", infer=False)
        memory.add("Another user's note", user_id="other", infer=False)
        served = another_caller_in_filter_checks(memory)
        hits = memory.search("kayak club", user_id="u", limit=3, filters={"NOT": {"topic": "none"}})["results"]
        assert served == ["Another user's note", "written"] and len(hits) == 3
        assert [m["memory"] for m in memory.get_all(user_id="other")["results"]] == ["Written meanwhile", "Another user's note"]


def test_what_a_search_raises_while_its_connection_is_back_in_the_pool_comes_out_at_once(pg_url):
    """A filter that fails, or a caller who left, ends the search: it took a new
    snapshot first, waiting for a pool that another caller held, and then raised a
    "search failed" in place of what happened. Inside a write transaction the
    connection is the transaction's, and stays with it."""
    from memorist.store import open_store

    store = open_store(pg_url + ("&" if "?" in pg_url else "?") + "pool_size=1&pool_timeout=5")
    try:
        began = time.monotonic()
        with pytest.raises(KeyError, match="the filter failed"), store.reading(), store.released():
            held = HeldConnections(store)  # the connection the search gave back, taken by another caller
            raise KeyError("the filter failed")
        assert time.monotonic() - began < 2
        held.release()
        held.join()
        with store.reading(), store.transaction() as batch, store.released():
            batch.event("note", Scope(user_id="alex"), payload={"kept": True})  # still the transaction's connection
        assert [e.payload for e in store.events(ScopeFilter("", "alex"), ops=["note"])] == [{"kept": True}]
    finally:
        store.close()
