"""The PostgreSQL store's large spaces searched by vector in process
(memorist.store.postgres.text): the ranking SQL gives, kept current with other
processes' writes and reindexes, ready after a bulk write without a search, and
read for a search's similarities and times as well."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest
from pg_records import EMB, add, mixed, record

from memorist.model import Scope, Status
from memorist.store import ann as ann_mod
from memorist.store import vector_index as vi
from memorist.store.base import ScopeFilter
from memorist.store.postgres import PostgresStore
from memorist.store.postgres import text as pg_text

F_ALEX = ScopeFilter("", "alex")
WORDS = "tea coffee sushi ramen chess painting beach camping hiking guitar piano novel garden dog cat rain".split()


def nearest(store, query, scope=F_ALEX, k=10, **kw):
    kw.setdefault("cutoff", None)
    kw.setdefault("now", time.time())
    return store.vector_search(scope, EMB.embed_one(query), k=k, **kw)


def ids(hits):
    return [m for m, _ in hits]


def in_sql(monkeypatch) -> list[str]:
    """Record each vector search SQL answers (any store's)."""
    answered: list[str] = []
    for name in ("_exact", "_nearest"):
        original = getattr(PostgresStore, name)

        def spy(*args, _original=original, _name=name, **kw):
            answered.append(_name)
            return _original(*args, **kw)

        monkeypatch.setattr(PostgresStore, name, staticmethod(spy))
    return answered


def texts(n: int) -> list[str]:
    rng = np.random.default_rng(5)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 9)))) + f" number {i}" for i in range(n)]


def test_in_process_vector_ranking_is_the_sql_ranking(opened):
    indexed, plain = opened(text_index_above=1), opened(text_index_above=0)
    now = time.time()
    add(indexed, *mixed(texts(150), now))
    for query in ("tea and sushi", "chess piano", "rain garden dog", "what about the novel?"):
        for kw in (
            {},
            {"k": None},
            {"run_id": "r1"},
            {"cutoff": now - 960},
            {"now": None},
            {"window": (now - 900, now - 880)},
            {"speaker": "alex"},
        ):
            kw = dict(kw)
            scope = ScopeFilter("", "alex", run_id=kw.pop("run_id", None))
            got = nearest(indexed, query, scope, **{"k": 12, **kw})
            want = nearest(plain, query, scope, **{"k": 12, **kw})
            # Equal scores (here: 0.0, nothing in common) may come in another order:
            # the score of each rank, and who is above the last one.
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5), (query, kw)
            assert {m for m, s in got if s > got[-1][1] + 1e-5} == {m for m, s in want if s > want[-1][1] + 1e-5}
            assert got[0][0] == want[0][0]
    assert indexed.stats()["text_indexes"]["spaces"] == 1 and plain.stats()["text_indexes"]["spaces"] == 0


def test_similarities_and_times_are_read_from_the_index_within_the_run(opened, monkeypatch):
    store = opened(text_index_above=1)
    now = time.time()
    add(store, record("a", "green tea", Scope(user_id="alex", run_id="r1"), created_at=now - 5), record("b", "black tea", created_at=now - 9))
    query = EMB.embed_one("tea")
    assert nearest(store, "tea")  # loads the space
    plain = opened(text_index_above=0)
    sql = plain.similarities(F_ALEX, query, ["a", "b", "nope"])
    calls: list[str] = []
    original = PostgresStore._one_space

    def counted(self, conn, scope):
        calls.append("space")
        return original(self, conn, scope)

    monkeypatch.setattr(PostgresStore, "_one_space", counted)
    got = store.similarities(F_ALEX, query, ["a", "b", "nope"])
    assert got.keys() == sql.keys() == {"a", "b"}
    assert got == pytest.approx(sql, abs=1e-6)
    run = ScopeFilter("", "alex", run_id="r1")
    assert store.similarities(run, query, ["a", "b"]).keys() == plain.similarities(run, query, ["a", "b"]).keys() == {"a"}
    assert store.created_times(F_ALEX, ["a", "b"]) == pytest.approx({"a": now - 5, "b": now - 9})
    assert store.created_times(run, ["a", "b"]) == plain.created_times(run, ["a", "b"]) == pytest.approx({"a": now - 5})
    assert calls  # the index answered (SQL never asks for the one space)
    # One search's reads look the space up once in their snapshot.
    calls.clear()
    queries: list[str] = []
    with store.reading(), store._connection() as conn:
        monkeypatch.setattr(conn, "execute", _counting(conn.execute, queries))
        nearest(store, "tea")
        store.similarities(F_ALEX, query, ["a"])
        store.created_times(F_ALEX, ["a"])
    assert sum("FROM spaces s WHERE" in q for q in queries) == 1


def _counting(execute, queries):
    def run(sql, *args, **kw):
        queries.append(str(sql))
        return execute(sql, *args, **kw)

    return run


def test_other_writers_reach_the_vectors_from_the_log(opened, monkeypatch):
    reader, writer = opened(text_index_above=1), opened(text_index_above=0)
    add(writer, record("a", "green tea in the morning"), record("b", "black coffee"))
    assert ids(nearest(reader, "green tea in the morning", k=1)) == ["a"]
    answered = in_sql(monkeypatch)
    # A new vector for b, c added, a deleted: the reader ranks what was written.
    old = writer.get("b")
    with writer.transaction() as b:
        b.update(old.copy(text="green tea in the morning too", search_text="green tea in the morning too"),
                 EMB.embed_one("green tea in the morning too"), old_text=old.text)
        b.add(record("c", "sushi rolls"), EMB.embed_one("sushi rolls"))
        b.delete(writer.get("a"))
    got = nearest(reader, "green tea in the morning", k=None)
    assert answered == []
    assert ids(got) == ids(nearest(writer, "green tea in the morning", k=None))  # (the writer's: SQL)
    assert ids(got)[0] == "b" and "a" not in ids(got)
    with writer.transaction() as b:
        b.update(writer.get("c").copy(status=Status.ARCHIVED), None, old_text="sushi rolls")
    answered.clear()
    assert "c" not in ids(nearest(reader, "sushi rolls", k=None))
    assert answered == []


def test_a_reindex_elsewhere_reloads_the_vectors(opened):
    reader, writer = opened(text_index_above=1), opened(text_index_above=0)
    add(writer, record("a", "green tea"), record("b", "black coffee"))
    query = EMB.embed_one("green tea")
    before = dict(nearest(reader, "green tea", k=None))
    assert before["a"] == pytest.approx(1.0, abs=1e-5)

    # Every vector written again (here: each text's vector negated).
    writer.reindex(lambda batch: -np.asarray(EMB.embed(batch)))
    after = dict(reader.vector_search(F_ALEX, query, k=None, cutoff=None, now=time.time()))
    assert after["a"] == pytest.approx(-1.0, abs=1e-5)
    assert after == pytest.approx(dict(writer.vector_search(F_ALEX, query, k=None, cutoff=None, now=time.time())), abs=1e-5)
    assert reader.similarities(F_ALEX, query, ["a"])["a"] == pytest.approx(-1.0, abs=1e-5)


def test_a_bulk_write_leaves_its_space_indexed_for_the_first_search(opened, monkeypatch):
    store = opened(text_index_above=200)
    add(store, *(record(f"s{i}", t) for i, t in enumerate(texts(150))))
    assert store.stats()["text_indexes"]["spaces"] == 0  # below text_index_above
    add(store, *(record(f"t{i}", t) for i, t in enumerate(texts(150))))
    assert store.stats()["text_indexes"] == {"spaces": 1, "memories": 300, "loading": 0}
    add(store, *(record(f"u{i}", t) for i, t in enumerate(texts(120))))
    assert store.stats()["text_indexes"]["memories"] == 420  # caught up by the write, not by a search
    # Fewer than WARM_AFTER memories: left to the next search, which catches up.
    add(store, record("v", "a single late memory about tea"))
    assert store.stats()["text_indexes"]["memories"] == 420
    answered = in_sql(monkeypatch)
    assert ids(nearest(store, "a single late memory about tea", k=1)) == ["v"]
    assert store.stats()["text_indexes"]["memories"] == 421
    assert answered == []


def test_a_failed_update_after_a_write_loses_nothing(opened, monkeypatch, caplog):
    store = opened(text_index_above=1)
    add(store, *(record(f"s{i}", t) for i, t in enumerate(texts(120))))
    assert store.stats()["text_indexes"]["spaces"] == 1

    def broken(self, conn, found, **kw):
        raise RuntimeError("index gone wrong")

    monkeypatch.setattr(pg_text.TextIndexes, "_ready", broken)
    with caplog.at_level(logging.WARNING, logger="memorist.store.postgres.text"):
        add(store, *(record(f"t{i}", t) for i, t in enumerate(texts(120))))
    assert "index gone wrong" in caplog.text
    assert store.count(F_ALEX) == 240  # the write stands
    monkeypatch.undo()
    assert len(nearest(store, "tea", k=None)) == 240


def test_the_newest_memories_across_several_spaces(opened):
    store = opened(text_index_above=0)
    now = time.time()
    add(
        store,
        record("a1", "one", Scope(user_id="alex", agent_id="a"), created_at=now - 3),
        record("b1", "two", Scope(user_id="alex", agent_id="b"), created_at=now - 1),
        record("a2", "three", Scope(user_id="alex", agent_id="a"), created_at=now - 2),
        record("b2", "four", Scope(user_id="alex", agent_id="b"), created_at=now - 2),
        record("r1", "five", Scope(user_id="alex", agent_id="b", run_id="r"), created_at=now - 4),
        record("z", "six", Scope(user_id="zed"), created_at=now),
    )
    everything = [r.id for r in store.list(F_ALEX)]
    assert everything[0] == "b1" and everything[-1] == "r1" and len(everything) == 5
    for limit in (1, 2, 3, 5, 9):
        assert [r.id for r in store.list(F_ALEX, limit=limit)] == everything[:limit]
    assert [r.id for r in store.list(ScopeFilter("", "alex", run_id="r"), limit=2)] == ["r1"]
    assert [r.id for r in store.list(F_ALEX, limit=2, until=now - 2.5)] == ["a1", "r1"]


def test_searches_wait_for_their_space_loading_in_the_background(opened, monkeypatch):
    monkeypatch.setattr(pg_text, "INLINE_LOAD", 0)
    writer = opened(text_index_above=0)
    add(writer, *(record(f"s{i}", t) for i, t in enumerate(texts(50))))
    reader = opened(text_index_above=1)
    answered = in_sql(monkeypatch)
    # A load that takes a while: the search waits for it, then ranks in process.
    original = pg_text.TextIndexes._load

    def slow_load(self, *args):
        time.sleep(0.3)
        return original(self, *args)

    monkeypatch.setattr(pg_text.TextIndexes, "_load", slow_load)
    assert len(nearest(reader, "tea", k=None)) == 50
    assert answered == [] and reader.stats()["text_indexes"]["spaces"] == 1
    # One that takes longer than LOAD_WAIT: SQL answers meanwhile.
    monkeypatch.setattr(pg_text, "LOAD_WAIT", 0.05)
    slow = opened(text_index_above=1)
    started = time.monotonic()
    assert len(nearest(slow, "tea", k=None)) == 50
    assert time.monotonic() - started < 0.3 and answered == ["_exact"]
    slow._text.wait(10)
    assert slow.stats()["text_indexes"]["spaces"] == 1


def nearest_in(store, text, k=10):
    return store.vector_search(F_ALEX, EMB.embed_one(text), k=k, cutoff=None, now=time.time())


def _hook_release(monkeypatch, work):
    """Run ``work`` in another thread the first time a search lets the entry lock go."""
    orig = pg_text._released
    state = {"done": False}

    @contextmanager
    def hooked(*args):
        with orig(*args):
            if not state["done"]:
                state["done"] = True
                t = threading.Thread(target=work)
                t.start()
                t.join()
            yield

    monkeypatch.setattr(pg_text, "_released", hooked)
    return state


@pytest.mark.parametrize("compact", [False, True])
def test_search_sees_writes_newer_than_its_snapshot(opened, monkeypatch, compact):
    # Stands for a space of >= 16,384 memories (the size from which SpaceIndex lets the lock go).
    monkeypatch.setattr(vi, "_COARSE_ROWS", 64)
    store = opened(text_index_above=1)
    n = 1200
    recs = [record(f"m{i}", f"memory number {i} about topic {i % 37}") for i in range(n)]
    add(store, *recs)
    assert store.stats()["text_indexes"]["spaces"] == 1
    target = recs[5]

    def write():
        with store.transaction() as b:
            for r in (recs[:700] if compact else [target]):
                b.delete(r)
            for j in range(120):
                r = record(f"new{j}", target.text + f" again {j}", created_at=time.time())
                b.add(r, EMB.embed_one(target.text))

    state = _hook_release(monkeypatch, write)
    with store.reading():
        assert store.get_many(["m5"])  # the snapshot starts here and holds m5
        hits = [m for m, _ in nearest_in(store, target.text, k=10)]
        in_snapshot = store.get_many(hits)
        m5_in_snapshot = "m5" in store.get_many(["m5"])
    assert state["done"]
    newer = [m for m in hits if m not in in_snapshot]
    assert m5_in_snapshot
    # m5 (cosine 1.0 in the snapshot) is found, and nothing committed after it.
    assert "m5" in hits and not newer, (hits, newer)


def test_close_races_a_graph_search(opened, pg_url, monkeypatch):
    monkeypatch.setattr(vi, "DEFAULT_THRESHOLD", 100)  # stands for 20,000
    store = opened(text_index_above=1)
    writer = opened(text_index_above=0)
    recs = [record(f"m{i}", f"memory number {i} about topic {i % 37}") for i in range(400)]
    add(store, *recs)
    (entry,) = store._text._entries.values()
    assert entry.index.catch_up_ann(timeout=30)
    orig = ann_mod.AnnIndex.covered
    state = {"done": False}

    def other_search():
        nearest_in(store, "memory number 3")  # a fresh snapshot: sees the reindex, forgets the entry

    def covered(self):
        if not state["done"]:
            state["done"] = True
            t = threading.Thread(target=other_search)
            t.start()
            t.join()
        return orig(self)

    with store.reading():
        store.count(F_ALEX)  # the snapshot, before the reindex
        writer.reindex(lambda batch: EMB.embed(batch))
        monkeypatch.setattr(ann_mod.AnnIndex, "covered", covered)
        assert nearest_in(store, "memory number 3")  # its index closed meanwhile by the other search


def test_autocommit_inline_load_is_labelled_older_than_its_rows(opened, monkeypatch):
    from memorist.store.postgres import store as pg_store

    store = opened(text_index_above=1)
    writer = opened(text_index_above=0)
    add(writer, *(record(f"m{i}", f"memory number {i}") for i in range(20)))  # < WARM_AFTER: not loaded
    assert store.stats()["text_indexes"]["spaces"] == 0
    orig = pg_store.one_space
    state = {"done": False}

    def one_space(conn, spaces, args):
        found = orig(conn, spaces, args)
        if not state["done"]:
            state["done"] = True
            add(writer, record("late", "green tea at dawn"))  # commits between the two reads
        return found

    with store.reading():
        store.count(F_ALEX)  # reader R's snapshot: before "late"
        monkeypatch.setattr(pg_store, "one_space", one_space)
        t = threading.Thread(target=lambda: nearest_in(store, "green tea at dawn"))  # outside any reading block
        t.start()
        t.join()
        monkeypatch.setattr(pg_store, "one_space", orig)
        hits = [m for m, _ in nearest_in(store, "green tea at dawn", k=3)]
        visible = store.get_many(hits)
    assert state["done"]
    assert "late" not in hits, (hits, "late" in visible)
