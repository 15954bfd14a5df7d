"""Writers in several processes (and threads) on one PostgreSQL database end as if they
had written one after the other: the per-space advisory lock, taken before a batch
reads the space's version, holds across processes as SQLite's file lock does.

Mirrors tests/store/sqlite/test_concurrent_writers.py, which runs the same races on
one SQLite file. Two Memories learning the same lesson at once: tests/capabilities/playbooks/test_ace_concurrency.py,
on both backends.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections.abc import Sequence

import psycopg

from memorist import Memory
from memorist.model import Decision, Existing, Fact
from memorist.roles.base import Reconciler
from memorist.roles.reconciler import HeuristicReconciler
from memorist.store import open_store
from memorist.store.postgres.schema import SCHEMA_VERSION

CITIES = ["Oslo", "Prague", "Lisbon", "Vienna", "Madrid", "Dublin", "Warsaw", "Athens"]


def lives_in(m: Memory, user: str) -> list[str]:
    return [r["memory"] for r in m.get_all(user_id=user)["results"] if r["memory"].startswith("Lives in")]


def run_threads(target, n: int) -> None:
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors


def _contradicting_writer(url: str, cities: list[str], barrier) -> None:
    with Memory(url, embedder="hashing") as m:
        m.search("warm up", user_id="nobody")
        barrier.wait(120)
        for city in cities:
            m.add(f"I live in {city}.", user_id="alice")


def test_eight_contradicting_facts_from_four_processes_leave_one(pg_url: str) -> None:
    Memory(pg_url, embedder="hashing").close()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_contradicting_writer, args=(pg_url, CITIES[2 * i : 2 * i + 2], barrier)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0] * 4
    with Memory(pg_url, embedder="hashing") as m:
        assert len(lives_in(m, "alice")) == 1
        # Nothing was lost: all eight turns are in the log.
        assert len([e for e in m.events(user_id="alice", limit=1000) if e["event"] == "TURN"]) == 8


class RendezvousReconciler(Reconciler):
    """Makes writers meet after reading their candidates and before deciding, so
    every one of them decides on the scope as it was before any of them wrote."""

    def __init__(self, parties: int) -> None:
        self.inner = HeuristicReconciler()
        self.barrier = threading.Barrier(parties)
        self.first = threading.local()
        self.calls = 0

    def reconcile(self, facts: Sequence[Fact], existing: Sequence[Sequence[Existing]]) -> list[Decision]:
        self.calls += 1
        if not getattr(self.first, "done", False):
            self.first.done = True
            self.barrier.wait(timeout=60)
        return self.inner.reconcile(facts, existing)


def test_writers_that_decided_on_the_same_scope_do_not_both_add(pg_url: str) -> None:
    """Four Memory instances (four pools) decide on the same empty scope, then write."""
    reconciler = RendezvousReconciler(4)
    memories = [Memory(pg_url, embedder="hashing", reconciler=reconciler) for _ in range(4)]
    try:
        run_threads(lambda i: memories[i].add(f"I live in {CITIES[i]}.", user_id="alice"), 4)
        assert len(lives_in(memories[0], "alice")) == 1
        assert reconciler.calls > 4  # the writers that lost the race decided again
    finally:
        for m in memories:
            m.close()


def test_threads_on_one_memory_agree_on_every_slot(pg_url: str) -> None:
    with Memory(pg_url, embedder="hashing") as m:

        def writer(i: int) -> None:
            for slot in range(3):
                m.add(f"I live in {CITIES[i]}.", user_id=f"slot{slot}")

        run_threads(writer, 6)
        assert [len(lives_in(m, f"slot{slot}")) for slot in range(3)] == [1, 1, 1]


def _open_at_once(url: str, barrier) -> None:
    barrier.wait(120)
    store = open_store(url)
    try:
        assert store.schema_version() == SCHEMA_VERSION
    finally:
        store.close()


def test_processes_opening_a_new_database_at_once_create_it_once(pg_url: str) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_open_at_once, args=(pg_url, barrier)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0] * 4
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'memorist'"
        ).fetchone()[0]
        versions = conn.execute("SELECT value FROM memorist.meta WHERE key = 'schema_version'").fetchall()
    assert tables == 7  # meta, spaces, memories, embeddings, events, relations, api_keys
    assert versions == [(str(SCHEMA_VERSION),)]


def test_threads_opening_a_new_database_at_once(pg_url: str) -> None:
    stores = []
    lock = threading.Lock()

    def opener(i: int) -> None:
        store = open_store(pg_url)
        with lock:
            stores.append(store)

    run_threads(opener, 4)
    try:
        assert {s.schema_version() for s in stores} == {SCHEMA_VERSION}
    finally:
        for s in stores:
            s.close()
