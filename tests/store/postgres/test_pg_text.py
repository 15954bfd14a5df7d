"""The PostgreSQL store's in-process full-text indexes (memorist.store.postgres.text): the
same ranking as BM25 in SQL, kept current with other processes' writes through the
event log, never newer than a search's snapshot, bounded, loaded in the background
when large."""

from __future__ import annotations

import logging
import random
import threading
import time

import pytest
from pg_records import add, mixed, record

from memorist import HashingEmbedder
from memorist.model import Scope, Status
from memorist.store import open_store
from memorist.store.base import ScopeFilter
from memorist.store.postgres import text as pg_text

EMB = HashingEmbedder()
ALEX, BOB = Scope(user_id="alex"), Scope(user_id="bob")
F_ALEX, F_BOB = ScopeFilter("", "alex"), ScopeFilter("", "bob")
WORDS = "tea coffee sushi ramen chess painting beach camping hiking guitar piano novel garden dog cat rain".split()


def search(store, query, scope=F_ALEX, k=10, **kw):
    kw.setdefault("cutoff", None)
    kw.setdefault("now", time.time())
    return store.text_search(scope, query, k=k, **kw)


def ids(hits):
    return [m for m, _ in hits]


def loaded(store) -> int:
    return store.stats()["text_indexes"]["spaces"]


def corpus(n: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(2, 9))) for _ in range(n)]


def test_in_process_ranking_is_the_sql_ranking(opened):
    indexed, plain = opened(text_index_above=1), opened(text_index_above=0)
    now = time.time()
    add(indexed, *mixed(corpus(120), now))
    for query in (
        "tea and sushi",
        "chess piano",
        "rain rain garden",
        "dog",
        "what about the novel?",
        "nothing matches zz",
    ):
        for kw in ({}, {"run_id": "r1"}, {"cutoff": now - 960}, {"now": None}):
            run_id = kw.pop("run_id", None)
            scope = ScopeFilter("", "alex", run_id=run_id)
            got = search(indexed, query, scope, k=15, **kw)
            want = search(plain, query, scope, k=15, **kw)
            # Equal scores may come in another order: compare the score of each rank.
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-4)
            assert {m for m, s in got if s > got[-1][1] + 1e-4} == {
                m for m, s in want if s > want[-1][1] + 1e-4
            }
    assert loaded(indexed) == 1 and loaded(plain) == 0


def test_other_writers_are_caught_up_from_the_log(opened):
    reader, writer = opened(text_index_above=1), opened(text_index_above=0)
    add(writer, record("a", "green tea in the morning"), record("b", "black coffee"))
    assert ids(search(reader, "tea")) == ["a"]
    index = reader._text._entries[next(iter(reader._text._entries))].index

    add(writer, record("c", "tea ceremony in Kyoto"))
    old = writer.get("b")
    with writer.transaction() as b:
        b.update(old.copy(text="iced tea", search_text="iced tea"), None, old_text=old.text)
        b.delete(writer.get("a"))
    assert set(ids(search(reader, "tea"))) == {"b", "c"}
    assert ids(search(reader, "coffee")) == []
    with writer.transaction() as b:
        b.update(writer.get("c").copy(status=Status.ARCHIVED), None, old_text="tea ceremony in Kyoto")
    assert ids(search(reader, "tea")) == ["b"]
    # Caught up in place, not reloaded; another space is not touched by it.
    assert reader._text._entries[next(iter(reader._text._entries))].index is index
    add(writer, record("z", "tea for bob", BOB))
    assert ids(search(reader, "tea")) == ["b"] and ids(search(reader, "tea", F_BOB)) == ["z"]


def test_a_search_never_sees_past_its_snapshot(opened):
    reader, writer = opened(text_index_above=1), opened(text_index_above=0)
    add(writer, record("a", "green tea"))
    assert ids(search(reader, "tea")) == ["a"]
    with reader.reading():
        assert ids(search(reader, "tea")) == ["a"]  # the snapshot is taken
        add(writer, record("b", "more tea"))
        other: list[list[str]] = []
        # Another thread of the same store catches the index up past the snapshot...
        worker = threading.Thread(target=lambda: other.append(ids(search(reader, "tea"))))
        worker.start()
        worker.join()
        assert sorted(other[0]) == ["a", "b"]
        # ...and this search still answers from its snapshot.
        assert ids(search(reader, "tea")) == ["a"]
    assert sorted(ids(search(reader, "tea"))) == ["a", "b"]


def test_small_spaces_and_scopes_of_several_spaces_stay_in_sql(opened):
    store = opened(text_index_above=5)
    add(store, *[record(f"a{i}", f"tea number {i}") for i in range(4)])
    add(store, *[record(f"b{i}", f"tea for bob {i}", BOB) for i in range(6)])
    assert len(search(store, "tea")) == 4 and loaded(store) == 0
    assert len(search(store, "tea", ScopeFilter(""), k=20)) == 10 and loaded(store) == 0  # two spaces
    assert len(search(store, "tea", F_BOB)) == 6 and loaded(store) == 1


def test_loaded_indexes_hold_at_most_text_index_rows(opened, monkeypatch):
    monkeypatch.setattr(pg_text, "KEEP_FOR", 0.0)
    store = opened(text_index_above=1, text_index_rows=5)
    add(store, *[record(f"a{i}", f"tea number {i}") for i in range(4)])
    add(store, *[record(f"b{i}", f"tea for bob {i}", BOB) for i in range(3)])
    add(store, *[record(f"c{i}", f"tea for cleo {i}", Scope(user_id="cleo")) for i in range(6)])
    assert len(search(store, "tea")) == 4 and store.stats()["text_indexes"]["memories"] == 4
    assert len(search(store, "tea", F_BOB)) == 3
    assert store.stats()["text_indexes"] == {"spaces": 1, "memories": 3, "loading": 0}  # alex's went first
    assert len(search(store, "tea", ScopeFilter("", "cleo"))) == 6  # too large: SQL
    assert store.stats()["text_indexes"]["spaces"] == 1
    assert store.load_text_index(ScopeFilter("", "cleo")) is False
    assert store.load_text_index(F_ALEX) is True
    # A loaded space that grows past the bound through catch-ups pushes the others out.
    assert len(search(store, "tea")) == 4
    add(store, record("a9", "tea again"))
    assert len(search(store, "tea")) == 5
    assert store.stats()["text_indexes"] == {"spaces": 1, "memories": 5, "loading": 0}


def test_a_space_searched_lately_is_not_evicted_for_another(opened):
    store = opened(text_index_above=1, text_index_rows=5)
    add(store, *[record(f"a{i}", f"tea number {i}") for i in range(4)])
    add(store, *[record(f"b{i}", f"tea for bob {i}", BOB) for i in range(3)])
    assert len(search(store, "tea")) == 4
    (alex,) = store._text._entries.values()
    for _ in range(3):  # searched in turn: bob's stays in SQL, alex's is not reloaded
        assert len(search(store, "tea", F_BOB)) == 3
        assert store.stats()["text_indexes"] == {"spaces": 1, "memories": 4, "loading": 0}
        assert len(search(store, "tea")) == 4
    assert list(store._text._entries.values()) == [alex]


def test_a_search_inside_a_write_transaction_sees_its_writes_and_leaves_the_index_alone(opened):
    store = opened(text_index_above=1)
    add(store, record("a", "green tea"))
    assert ids(search(store, "tea")) == ["a"]

    class Undo(Exception):
        pass

    with pytest.raises(Undo), store.transaction() as b:
        b.add(record("x", "tea tea tea"), EMB.embed_one("tea tea tea"))
        assert ids(search(store, "tea")) == ["x", "a"]  # its own write, uncommitted
        raise Undo
    assert ids(search(store, "tea")) == ["a"]
    with store.transaction() as b:
        b.add(record("y", "tea tea tea"), EMB.embed_one("tea tea tea"))
        assert ids(search(store, "tea")) == ["y", "a"]
        b.add(record("z", "more tea"), EMB.embed_one("more tea"))
    assert sorted(ids(search(store, "tea"))) == ["a", "y", "z"]


def test_one_space_loads_in_the_background_at_a_time(opened, monkeypatch):
    monkeypatch.setattr(pg_text, "INLINE_LOAD", 0)
    store = opened(text_index_above=1)
    add(store, record("a", "green tea"))
    add(store, record("b", "tea for bob", BOB))
    release = threading.Event()
    original = pg_text.TextIndexes._load

    def slow_load(self, *args):
        release.wait(10)
        return original(self, *args)

    monkeypatch.setattr(pg_text.TextIndexes, "_load", slow_load)
    assert ids(search(store, "tea")) == ["a"]
    assert ids(search(store, "tea", F_BOB)) == ["b"]  # SQL: alex's load holds the loader
    assert store.stats()["text_indexes"]["loading"] == 1
    release.set()
    store._text.wait(10)
    assert store.stats()["text_indexes"] == {"spaces": 1, "memories": 1, "loading": 0}
    assert ids(search(store, "tea", F_BOB)) == ["b"]
    store._text.wait(10)
    assert store.stats()["text_indexes"]["spaces"] == 2


def test_a_failed_inline_load_leaves_sql_answering(opened, monkeypatch, caplog):
    monkeypatch.setattr(pg_text, "_LOAD", "SELECT no_such_column FROM memories WHERE space_id = %s")
    store = opened(text_index_above=1)
    add(store, record("a", "green tea"))
    with caplog.at_level(logging.WARNING, logger="memorist.store.postgres.text"):
        assert ids(search(store, "tea")) == ["a"]
        with store.reading():
            assert ids(search(store, "tea")) == ["a"]  # not tried again at once, even in a snapshot
    failures = [r for r in caplog.records if "full-text index failed" in r.getMessage()]
    assert len(failures) == 1 and "no_such_column" in failures[0].getMessage() and loaded(store) == 0


def test_a_large_space_loads_in_the_background_and_sql_answers_meanwhile(opened, monkeypatch):
    monkeypatch.setattr(pg_text, "INLINE_LOAD", 3)
    store = opened(text_index_above=1)
    add(store, *[record(f"m{i}", text) for i, text in enumerate(corpus(40))])
    first = search(store, "tea sushi", k=40)
    store._text.wait(10)
    assert loaded(store) == 1
    again = search(store, "tea sushi", k=40)
    assert [s for _, s in again] == pytest.approx([s for _, s in first], rel=1e-4)
    # Written after the load's position: found by the catch-up of the next search.
    add(store, record("late", "tea sushi tea sushi"))
    assert ids(search(store, "tea sushi", k=1)) == ["late"]


def test_a_failed_background_load_leaves_sql_answering(opened, monkeypatch, caplog):
    monkeypatch.setattr(pg_text, "INLINE_LOAD", 0)
    monkeypatch.setattr(pg_text, "_LOAD", "SELECT no_such_column FROM memories WHERE space_id = %s")
    store = opened(text_index_above=1)
    add(store, record("a", "green tea"))
    with caplog.at_level(logging.WARNING, logger="memorist.store.postgres.text"):
        assert ids(search(store, "tea")) == ["a"]
        store._text.wait(10)
    assert "full-text index failed" in caplog.text and "no_such_column" in caplog.text
    assert ids(search(store, "tea")) == ["a"] and loaded(store) == 0
    assert store.stats()["text_indexes"]["loading"] == 0  # not retried at once


def test_a_catch_up_larger_than_the_bound_reloads(opened, monkeypatch):
    monkeypatch.setattr(pg_text, "CATCH_UP_MOST", 2)
    reader, writer = opened(text_index_above=1), opened(text_index_above=0)
    add(writer, record("a", "green tea"))
    assert ids(search(reader, "tea")) == ["a"]
    add(writer, *[record(f"n{i}", f"tea {i}") for i in range(5)])
    assert len(search(reader, "tea")) == 6  # answered in SQL, the index dropped
    assert len(search(reader, "tea")) == 6 and loaded(reader) == 1  # and loaded again


def test_reset_and_close_drop_the_indexes(opened):
    store = opened(text_index_above=1)
    add(store, record("a", "green tea"))
    assert ids(search(store, "tea")) == ["a"] and loaded(store) == 1
    store.reset()
    store.bind_embedder(EMB.name, EMB.dim)
    assert loaded(store) == 0 and search(store, "tea") == []
    add(store, record("b", "tea again"))
    assert ids(search(store, "tea")) == ["b"]
    store.close()
    assert store._text.stats()["spaces"] == 0


def test_text_index_options_are_checked(pg_url):
    from memorist import ConfigurationError

    for bad in ("-1", "many", "1.5"):
        with pytest.raises(ConfigurationError, match="text_index_above"):
            open_store(pg_url + ("&" if "?" in pg_url else "?") + f"text_index_above={bad}")
    store = open_store(pg_url + ("&" if "?" in pg_url else "?") + "text_index_rows=0")
    try:
        assert store._text.enabled is False
    finally:
        store.close()


def test_an_erasure_logged_in_no_scope_still_reloads_the_index(opened):
    """The store's erase without ``log`` still appends its event (in no space): that
    event is all another process's index has to tell it the erased memories are gone."""
    reader, writer = opened(text_index_above=1), opened(text_index_above=0)
    add(writer, record("a", "green tea"), record("b", "tea for two"))
    assert set(ids(search(reader, "tea"))) == {"a", "b"}
    writer.erase([F_ALEX])
    add(writer, record("c", "tea again"))
    assert ids(search(reader, "tea")) == ["c"]
    assert ids(search(reader, "tea")) == ["c"]


def test_an_erasure_or_adopt_by_another_process_reloads_the_index(opened):
    """Neither names each memory in the log: catching up from the space's events would
    keep the erased (or moved) memories' terms. The index reloads once, then catches
    up in place again."""
    reader, writer = opened(text_index_above=1), opened(text_index_above=0)
    add(writer, record("a", "green tea"), record("b", "tea for two"), record("z", "tea for bob", BOB))
    assert set(ids(search(reader, "tea"))) == {"a", "b"}
    space = next(iter(reader._text._entries))
    before = reader._text._entries[space].index
    writer.erase([F_ALEX], log=Scope(""))
    add(writer, record("c", "tea again"))  # a later write of the space: its events are not all
    assert ids(search(reader, "tea")) == ["c"]  # the index dropped: SQL answers
    assert ids(search(reader, "tea")) == ["c"]  # reloaded, in process again
    index = reader._text._entries[space].index
    assert index is not before
    add(writer, record("d", "more tea"))
    assert set(ids(search(reader, "tea"))) == {"c", "d"}
    assert reader._text._entries[space].index is index  # caught up in place: no second reload

    assert ids(search(reader, "tea", F_BOB)) == ["z"]
    assert writer.adopt([("", "acme")])["memories"] == 3
    assert ids(search(reader, "tea", F_BOB)) == []
    assert set(ids(search(reader, "tea", ScopeFilter("acme", "alex")))) == {"c", "d"}


def _rows_processed(plan: dict) -> int:
    """Every row a plan's nodes produced or threw away, loops counted."""
    rows = plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1)
    rows += plan.get("Rows Removed by Join Filter", 0) + plan.get("Rows Removed by Filter", 0)
    return int(rows) + sum(_rows_processed(p) for p in plan.get("Plans", ()))


def test_bm25_in_sql_reads_each_hit_a_bounded_number_of_times_whatever_the_join_the_planner_picks(opened, pg_url):
    """Right after a bulk load, before the tables are analyzed, the planner took the
    hits for one row and joined each matching term back to its hit in a nested loop:
    n² rows, 4 s a search at 8,000 memories until autovacuum ran. With nested loops
    forced on it, the work stays linear in the hits."""
    import psycopg

    from memorist.store.postgres.store import _space_filter

    store = opened(text_index_above=0)
    n = 1500
    add(store, *(record(f"t{i}", f"tea and the weather on day {i}", created_at=time.time() - i) for i in range(n)))
    assert len(search(store, "tea weather")) == 10
    terms = pg_text.query_terms("tea weather")
    spaces, args = _space_filter(F_ALEX)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{store.schema}", public')
        conn.execute("SET enable_hashjoin = off")
        conn.execute("SET enable_mergejoin = off")
        (plan,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + pg_text.BM25.format(spaces=spaces, keep=""),
                               [*args, *args, pg_text.tsquery(terms), terms, 10]).fetchone()[0]
    assert _rows_processed(plan["Plan"]) < 40 * n
