"""The PostgreSQL store's large spaces searched by vector in process
(memorist.store.postgres.text): the ranking SQL gives, kept current with other
processes' writes and reindexes, ready after a bulk write without a search, and
read for a search's similarities and times as well."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from memorist import HashingEmbedder
from memorist.model import MemoryRecord, Scope, Status
from memorist.policies.text import content_hash
from memorist.store.base import ScopeFilter
from memorist.store.postgres import PostgresStore
from memorist.store.postgres import text as pg_text

EMB = HashingEmbedder()
ALEX = Scope(user_id="alex")
F_ALEX = ScopeFilter("", "alex")
WORDS = "tea coffee sushi ramen chess painting beach camping hiking guitar piano novel garden dog cat rain".split()


def record(mid: str, text: str, scope: Scope = ALEX, **kw) -> MemoryRecord:
    kw.setdefault("created_at", time.time())
    return MemoryRecord(id=mid, scope=scope, text=text, content_hash=content_hash(text), search_text=text, **kw)


def add(store, *records):
    with store.transaction() as b:
        for r in records:
            b.add(r, EMB.embed_one(r.text))


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
    records = [
        record(
            f"m{i}",
            text,
            Scope(user_id="alex", run_id="r1") if i % 3 == 0 else ALEX,
            created_at=now - 1000 + i,
            valid_to=now - 1 if i % 7 == 0 else None,
            metadata={"name": "Alex" if i % 2 else "Bo"},
        )
        for i, text in enumerate(texts(150))
    ]
    add(indexed, *records)
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

    def broken(self, conn, found):
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
