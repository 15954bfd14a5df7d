"""Searches of one process share the cores: a large product runs without the store's lock.

Right after a bulk load a large space is searched exactly (its graph is still being
built); with the store's lock held for the whole search, four searches at once took
four times as long each. The product now lets the lock go (rows below the index's
size never change in place), except inside a write transaction.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from memorist import Memory
from memorist.store import vector_index

TOPICS = ["kayak", "theremin", "lighthouse", "greyhound", "pottery", "marathon", "sourdough", "chess"]


@pytest.fixture
def small_coarse(monkeypatch):
    """The coarse pass (and letting the lock go) from 500 rows on; no graph."""
    monkeypatch.setattr(vector_index, "_COARSE_ROWS", 500)
    monkeypatch.setattr(vector_index, "DEFAULT_THRESHOLD", 0)


def filled(path: Path, n: int = 2000) -> Memory:
    memory = Memory(path, embedder="hashing")
    texts = [f"Note {i}: the {TOPICS[i % 8]} club met on day {i % 31} with {TOPICS[(i * 3) % 8]} fans" for i in range(n)]
    memory.add([{"role": "user", "content": t} for t in texts], user_id="u", infer=False)
    return memory


def test_two_searches_of_one_process_multiply_at_the_same_time(tmp_path, small_coarse, monkeypatch):
    memory = filled(tmp_path / "m.db")
    memory.search("lighthouse", user_id="u")  # the space's index is loaded (another query: not cached)
    inner = vector_index._int8_dots()
    meet = threading.Barrier(2, timeout=10)

    def dots(query, rows):
        meet.wait()  # both searches are inside the product at once, or this times out
        return inner(query, rows)

    monkeypatch.setattr(vector_index, "_int8_dots", lambda: dots)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def search(q: str) -> None:
        try:
            results.append([h["memory"] for h in memory.search(q, user_id="u", limit=5)["results"]])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=search, args=(q,)) for q in ("kayak club", "chess fans")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors
    assert len(results) == 2 and all(len(r) == 5 for r in results)
    memory.close()


def another_thread_takes_the_lock(store) -> bool:
    """Whether another thread gets the store's lock within 0.2 s (now)."""
    took: list[bool] = []

    def try_lock() -> None:
        got = store._lock.acquire(timeout=0.2)
        took.append(got)
        if got:
            store._lock.release()

    probe = threading.Thread(target=try_lock)
    probe.start()
    probe.join()
    return took[0]


def test_inside_a_write_transaction_the_lock_is_kept(tmp_path):
    """Another thread's statements would join the open transaction."""
    memory = filled(tmp_path / "m.db", n=10)
    store = memory.store
    with store.transaction(), store._unlocked():
        assert not another_thread_takes_the_lock(store)
    with store.reading(), store._lock, store._unlocked():
        assert another_thread_takes_the_lock(store)
    memory.close()


def test_searches_beside_writes_and_deletes_return_live_memories_with_true_scores(tmp_path, small_coarse):
    """Searches in threads while another thread adds and deletes (compacting the
    space): every result is a memory that existed, with its exact cosine; afterwards
    a search answers as the same store opened again (its index loaded from disk) does."""
    memory = filled(tmp_path / "m.db")
    ids = [m["id"] for m in memory.get_all(user_id="u", limit=5000)["results"]]
    stop = threading.Event()
    problems: list[str] = []
    embed = memory.embedder.embed

    def searcher(q: str) -> None:
        qv = embed([q])[0]
        while not stop.is_set():
            for hit in memory.search(q, user_id="u", limit=10)["results"]:
                if not hit["memory"].startswith("Note"):
                    problems.append(f"unknown memory {hit!r}")
                expected = float(np.dot(qv, embed([hit["memory"]])[0]))
                if abs(hit["similarity"] - expected) > 1e-4:
                    problems.append(f"{hit['memory']!r}: similarity {hit['similarity']} against cosine {expected}")

    threads = [threading.Thread(target=searcher, args=(q,)) for q in ("kayak club", "chess fans day 3")]
    for t in threads:
        t.start()
    try:
        # Delete three quarters (the index compacts past half dead), add new notes.
        for start in range(0, len(ids), 100):
            for i in range(start, min(start + 100, len(ids))):
                if i % 4:
                    memory.delete(ids[i])
            memory.add([{"role": "user", "content": f"Note new {start}: a kayak club for chess fans"}], user_id="u", infer=False)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not problems, problems[:5]
    queries = ("kayak club", "chess fans day 3", "lighthouse")
    got = [[(h["id"], round(h["similarity"], 5)) for h in memory.search(q, user_id="u", limit=10)["results"]] for q in queries]
    memory.close()
    reopened = Memory(tmp_path / "m.db", embedder="hashing")
    want = [[(h["id"], round(h["similarity"], 5)) for h in reopened.search(q, user_id="u", limit=10)["results"]] for q in queries]
    # The same results (equal fused scores may come in another order: the rows'
    # positions differ between a compacted index and one loaded from the file).
    assert [sorted(g) for g in got] == [sorted(w) for w in want]
    reopened.close()


def test_a_search_shows_no_memory_deleted_while_it_ran(tmp_path, monkeypatch):
    """Other callers write while a search lets the store go, and other processes at
    any time: a memory its rankings found and another connection deleted before the
    search read it is not shown."""
    memory = filled(tmp_path / "m.db", n=50)
    other = Memory(tmp_path / "m.db", embedder="hashing")  # another connection, as another process has
    victim = memory.search("kayak club", user_id="u", limit=1)["results"][0]["id"]
    store = memory.store
    read = store.get_many
    deleted: list[bool] = []

    def get_many(ids, **kwargs):
        if victim in ids and not deleted:
            other.delete(victim)
            deleted.append(True)
        return read(ids, **kwargs)

    monkeypatch.setattr(store, "get_many", get_many)
    # (A filter: the records are read from the store, not from the search's index.)
    hits = memory.search("kayak club", user_id="u", limit=5, filters={"NOT": {"topic": "none"}})["results"]
    assert deleted == [True] and len(hits) == 5 and victim not in {h["id"] for h in hits}
    other.close()
    memory.close()


def test_a_search_shows_no_memory_moved_to_another_tenant_while_it_ran(tmp_path, monkeypatch):
    """A search reads its rankings, then the memories: another connection that moved
    the user's memories to another tenant in between (an adoption) leaves the search
    nothing of theirs to show, rather than the other tenant's memories."""
    memory = filled(tmp_path / "m.db", n=50)
    other = Memory(tmp_path / "m.db", embedder="hashing")
    store = memory.store
    read = store.get_many
    moved: list[dict] = []

    def get_many(ids, **kwargs):
        if not moved:
            moved.append(other.store.adopt([("", "elsewhere")]))
        return read(ids, **kwargs)

    monkeypatch.setattr(store, "get_many", get_many)
    hits = memory.search("kayak club", user_id="u", limit=5, filters={"NOT": {"topic": "none"}})["results"]
    assert moved and moved[0]["memories"] == 50 and hits == []
    other.close()
    memory.close()


def test_a_search_checking_its_filter_lets_the_store_serve_others(tmp_path, another_caller_in_filter_checks):
    """A filter is checked in Python against every memory it reads; a costly one took
    seconds, and with the store held meanwhile every other user's call waited. Here
    the first check waits until another thread's listing of another user (and a write)
    has finished: held, they could not, and the check would give up waiting."""
    memory = filled(tmp_path / "m.db", n=200)
    memory.add([{"role": "user", "content": "Another user's note"}], user_id="other", infer=False)
    served = another_caller_in_filter_checks(memory)
    hits = memory.search("kayak club", user_id="u", limit=3, filters={"NOT": {"topic": "none"}})["results"]
    assert served == ["Another user's note", "written"]
    assert len(hits) == 3 and all("kayak" in h["memory"] or "Note" in h["memory"] for h in hits)
    assert [m["memory"] for m in memory.get_all(user_id="other")["results"]] == ["Written meanwhile", "Another user's note"]
    memory.close()


def test_a_search_begun_while_its_thread_holds_the_store_keeps_it(tmp_path):
    """A search whose thread already holds the store (inside one of the store's own
    operations) does not wait for an erasure, which would wait for it; so it must not
    let the store go either, or an erasure could run in between."""
    memory = filled(tmp_path / "m.db", n=10)
    store = memory.store
    with store._lock, store.reading(), store.released():
        assert not another_thread_takes_the_lock(store)
    with store.reading(), store.released():  # an ordinary search lets it go
        assert another_thread_takes_the_lock(store)
    memory.close()


def test_a_long_listing_or_page_of_events_lets_the_store_serve_others(tmp_path, monkeypatch):
    """A listing of a whole scope, or of 100,000 events, held the store while SQLite
    read it (0.3 s at 100,000 events): a long one reads on a connection of its own,
    without the store's lock; a short page stays under it."""
    from contextlib import contextmanager

    from memorist.store.base import ScopeFilter

    memory = filled(tmp_path / "m.db", n=600)
    store = memory.store
    reader = store._reader
    free: list[bool] = []

    @contextmanager
    def watched():
        with reader() as conn:
            free.append(another_thread_takes_the_lock(store))
            yield conn

    monkeypatch.setattr(store, "_reader", watched)
    assert len(store.events(limit=10)) == 10 and free == []
    assert len(store.list(ScopeFilter("", "u", None, None), limit=10)) == 10 and free == []
    assert len(store.events(limit=100_000)) >= 600 and free == [True]
    assert len(store.list(ScopeFilter("", "u", None, None))) == 600 and free == [True, True]
    assert len(store.events(ops=["add"])) >= 600 and free == [True, True, True]
    memory.close()
