"""The store contract (:mod:`memorist.store.base`) as one suite of tests, run per backend.

Every test here talks to a store only through the contract: ``open_store``, the
:class:`~memorist.store.base.Store` methods and the :class:`~memorist.store.base.Batch`
of a transaction. Events are counted through ``store.events()`` and ``history()``,
never with SQL or a backend's private helpers, so any backend that keeps the
promises written in ``base.py``'s docstrings can be run through it unchanged.

A backend's test module subclasses :class:`StoreContract` and provides one fixture,
``store_target``: the path or URL of a fresh, empty store. Opening the same target
again is how durability and several writers are tested.

The scopes below are chosen so that each check meets a scope of one space (one
user, one agent) and a scope spanning several spaces (a user across two agents, a
whole tenant): a backend may serve the two differently (SQLite does).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from memorist import EmbedderMismatchError, HashingEmbedder, StoreError
from memorist.model import Kind, MemoryClass, MemoryRecord, Scope, Status, Tier
from memorist.policies.filters import Narrowing, compile_filters
from memorist.policies.text import content_hash
from memorist.store import open_store
from memorist.store.base import ScopeFilter, Store

EMB = HashingEmbedder()
SMALL = HashingEmbedder(64)  # another embedder: another name and dimension

ALEX = Scope(user_id="alex")
ALEX_HELPER = Scope(user_id="alex", agent_id="helper")
BOB = Scope(user_id="bob")
F_ALEX = ScopeFilter("", "alex")  # alex's spaces: with no agent and with the helper
F_ALEX_ONLY = ScopeFilter("", "alex", agent_id="")  # one space
F_BOB = ScopeFilter("", "bob")
F_TENANT = ScopeFilter("")  # every space of the default tenant
FULL = Scope("acme", "alex", "helper", "run-7")  # every scope id set


class Boom(Exception):
    """The caller's own failure inside a transaction."""


def record(mid: str, text: str, scope: Scope = ALEX, *, at: float | None = None, **kw: Any) -> MemoryRecord:
    kw.setdefault("search_text", text)
    return MemoryRecord(
        id=mid, scope=scope, text=text, created_at=time.time() if at is None else at,
        content_hash=content_hash(text), **kw,
    )


def narrowing(filters: dict[str, Any]) -> Narrowing:
    compiled = compile_filters(filters)
    assert compiled is not None and compiled.narrowing is not None
    return compiled.narrowing


def vec(text: str) -> np.ndarray:
    return EMB.embed_one(text)


def add(store: Store, *records: MemoryRecord) -> None:
    with store.transaction() as b:
        for r in records:
            b.add(r, vec(r.text))


def update_text(store: Store, memory_id: str, text: str, *, vector: bool = True, **changes: Any) -> MemoryRecord:
    old = store.get(memory_id)
    assert old is not None
    new = old.copy(text=text, search_text=text, content_hash=content_hash(text), updated_at=time.time(), **changes)
    with store.transaction() as b:
        b.update(new, vec(text) if vector else None, old_text=old.text)
    return new


def delete(store: Store, *memory_ids: str) -> None:
    with store.transaction() as b:
        for mid in memory_ids:
            found = store.get(mid)
            assert found is not None
            b.delete(found)


def vsearch(store: Store, text: str, scope: ScopeFilter = F_ALEX, k: int | None = None, **kw: Any) -> list[str]:
    kw.setdefault("cutoff", None)
    kw.setdefault("now", time.time())
    return [mid for mid, _ in store.vector_search(scope, vec(text), k=k, **kw)]


def tsearch(store: Store, query: str, scope: ScopeFilter = F_ALEX, k: int = 50, **kw: Any) -> list[str]:
    kw.setdefault("cutoff", None)
    kw.setdefault("now", time.time())
    return [mid for mid, _ in store.text_search(scope, query, k=k, **kw)]


def ops(events: Sequence[Any]) -> list[tuple[str, str | None, str | None]]:
    return [(e.op, e.old_text, e.new_text) for e in events]


def turn(store: Store, scope: Scope, *, pending: bool) -> int:
    with store.transaction() as b:
        payload: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
        if pending:
            payload |= {"pending": True, "reason": "extraction failed: test"}
        return b.event("turn", scope, payload=payload)


def resolve(store: Store, scope: Scope, seq: int) -> None:
    with store.transaction() as b:
        b.event("turn_processed", scope, payload={"turn_event": seq})


def run_threads(work: Callable[[int], None], n: int, timeout: float = 120) -> None:
    """Run ``work(0..n-1)`` in threads; any thread's exception fails the test."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    assert not errors, errors


def full_record(mid: str, text: str, scope: Scope = FULL) -> MemoryRecord:
    """A memory with every field away from its default, and values that strain a
    codec: non-ASCII text, nested JSON, floats that need all their digits."""
    return MemoryRecord(
        id=mid, scope=scope, text=text, kind=Kind.PREFERENCE, memory_class=MemoryClass.PROCEDURAL,
        topic="drinks ☕", concept="tea", section="habits", tags=["a", "日本", "with space"],
        helpful=3, harmful=2, strengths={"semantic": 0.1, "episodic": 2 / 3, "procedural": 0.75},
        last_access={"semantic": 4, "episodic": 5, "procedural": 6}, access_count=7, importance=0.1 + 0.2,
        energy=1 / 3, tier=Tier.LONG_TERM, created_at=1_700_000_000.123456, updated_at=1_700_000_100.5,
        valid_to=4_102_444_800.25, content_hash=content_hash(text),
        metadata={
            "name": "Alex", "source": "chat", "名前": "アレックス", "emoji": "🍣",
            "nested": {"list": [1, 2.5, None, True, "ü"], "deep": {"a": {"b": [{}]}}, "empty": []},
            "quote": 'say "hi"\n\ttab \\ back',
        },
        lineage={"merged_from": ["x", "y"], "why": "dup ✓"}, status=Status.ACTIVE,
        search_text="alex: " + text,
    )


class StoreContract:
    """The contract's tests. Subclasses provide the ``store_target`` fixture."""

    @pytest.fixture
    def opened(self, store_target: Any) -> Iterator[Callable[..., Store]]:
        """``opened()`` opens ``store_target`` again (closed after the test); with
        ``bind=False`` no embedder is declared."""
        stores: list[Store] = []

        def _open(*, bind: bool = True) -> Store:
            s = open_store(store_target)
            stores.append(s)
            if bind:
                s.bind_embedder(EMB.name, EMB.dim)
            return s

        yield _open
        for s in stores:
            s.close()

    @pytest.fixture
    def store(self, opened: Callable[..., Store]) -> Store:
        return opened()

    # add, update, delete and their events ------------------------------------------

    def test_a_new_store_is_empty(self, store):
        assert store.get("anything") is None
        assert store.list(F_TENANT) == []
        assert store.events() == []
        assert store.pending_turns() == []
        assert store.embedder_identity() is None
        assert store.space_version(ALEX) == 0
        assert store.access_clock(ALEX) == 0
        assert store.user_counts("", now=time.time()) == {}
        assert vsearch(store, "sushi", F_TENANT) == []
        assert tsearch(store, "sushi", F_TENANT) == []
        stats = store.stats()
        assert (stats["memories"], stats["deleted"], stats["events"], stats["embedder"], stats["dim"]) == (0, 0, 0, None, None)

    def test_add_get_and_its_one_event(self, store):
        r = record("a", "Likes sushi", metadata={"source": "chat"}, tags=["food"])
        add(store, r)
        assert store.get("a") == r
        history = store.history("a")
        assert ops(history) == [("add", None, "Likes sushi")]
        assert history[0].memory_id == "a"
        assert history[0].scope == ALEX
        assert abs(history[0].ts - time.time()) < 60
        assert store.events() == history
        assert store.get("missing") is None
        assert store.history("missing") == []

    def test_changes_since_a_log_position_name_what_was_written_there(self, store):
        """A backend that can say (its log order is its commit order) names every
        memory of the space written after the position, with its vector while active."""
        add(store, record("a", "Likes sushi"), record("b", "Likes tea"))
        position = store.log_position()
        if position is None:
            with store.transaction() as b:
                assert b.changes_since(ALEX, 0) is None  # no position to read from
            return
        with store.transaction() as b:
            assert b.changes_since(ALEX, position) == []
        add(store, record("c", "Drinks green tea"), record("h", "Helper likes tea", ALEX_HELPER))
        update_text(store, "a", "Loves sashimi")
        delete(store, "b")
        with store.transaction() as b:
            changes = dict(b.changes_since(ALEX, position))
            assert set(changes) == {"a", "b", "c"}  # not the other space's "h"
            assert changes["b"] is None  # deleted: nothing to find any more
            np.testing.assert_allclose(changes["c"], vec("Drinks green tea"), rtol=1e-6)
            np.testing.assert_allclose(changes["a"], vec("Loves sashimi"), rtol=1e-6)
            assert b.changes_since(ALEX, store.log_position()) == []
            assert b.changes_since(Scope(user_id="nobody"), position) == []

    def test_update_replaces_fields_and_logs_old_and_new(self, store):
        add(store, record("a", "Likes sushi"), record("h", "Helper likes tea", ALEX_HELPER))
        new = update_text(store, "a", "Loves sashimi", metadata={"source": "edit"}, tags=["fish"])
        assert store.get("a") == new
        assert ops(store.history("a")) == [("add", None, "Likes sushi"), ("update", "Likes sushi", "Loves sashimi")]
        for scope in (F_ALEX_ONLY, F_ALEX):  # one space, then two
            assert tsearch(store, "sashimi", scope) == ["a"]
            assert tsearch(store, "sushi", scope) == []
        assert vsearch(store, "Loves sashimi", k=1) == ["a"]

    def test_update_without_a_vector_keeps_the_vector_and_reindexes_the_text(self, store):
        add(store, record("a", "Likes sushi"), record("b", "Plays chess"), record("h", "Helper", ALEX_HELPER))
        assert tsearch(store, "sushi") == ["a"]
        update_text(store, "a", "Collects stamps", vector=False)
        for scope in (F_ALEX_ONLY, F_ALEX):
            assert tsearch(store, "stamps", scope) == ["a"]
            assert tsearch(store, "sushi", scope) == []
        # The stored vector is still the one written with the old text.
        assert vsearch(store, "Likes sushi", F_ALEX_ONLY, k=1) == ["a"]

    def test_op_actor_and_payload_are_logged_as_given(self, store):
        r = record("a", "Likes sushi")
        with store.transaction() as b:
            b.add(r, vec(r.text), actor="curator", payload={"delta": "new", "ü": ["✓", 1, {"x": None}]})
        with store.transaction() as b:
            b.update(r.copy(helpful=1), None, old_text=r.text, op="reinforce", actor="curator", payload={"helpful": 1})
        with store.transaction() as b:
            b.delete(store.get("a"), op="remove", actor="janitor", payload={"reason": "stale"})
        history = store.history("a")
        assert [(e.op, e.actor, e.payload) for e in history] == [
            ("add", "curator", {"delta": "new", "ü": ["✓", 1, {"x": None}]}),
            ("reinforce", "curator", {"helpful": 1}),
            ("remove", "janitor", {"reason": "stale"}),
        ]
        assert ops(history)[1:] == [("reinforce", "Likes sushi", "Likes sushi"), ("remove", "Likes sushi", None)]

    def test_memory_added_without_a_vector_is_found_by_text_only(self, store):
        with store.transaction() as b:
            b.add(record("novec", "Collects vintage stamps"), None)
        add(store, record("a", "Likes sushi"))
        assert tsearch(store, "stamps") == ["novec"]
        assert tsearch(store, "stamps", F_ALEX_ONLY) == ["novec"]
        assert "novec" not in vsearch(store, "Collects vintage stamps")
        assert store.similarities(F_ALEX, vec("Collects vintage stamps"), ["novec", "a"]).keys() == {"a"}

    def test_delete_hides_everywhere_but_keeps_history(self, store):
        add(store, record("a", "Likes sushi"), record("b", "Likes ramen"), record("h", "Helper likes ramen", ALEX_HELPER))
        assert tsearch(store, "ramen", F_ALEX_ONLY) == ["b"]
        delete(store, "b")
        assert store.get("b").status is Status.DELETED
        assert [r.id for r in store.list(F_ALEX_ONLY)] == ["a"]
        assert "b" not in vsearch(store, "Likes ramen")
        assert tsearch(store, "ramen", F_ALEX_ONLY) == []
        assert tsearch(store, "ramen", F_ALEX) == ["h"]
        assert store.find_by_hash(F_ALEX, content_hash("Likes ramen")) == []
        assert store.get_many(["a", "b"]).keys() == {"a", "b"}
        assert ops(store.history("b")) == [("add", None, "Likes ramen"), ("delete", "Likes ramen", None)]

    def test_archived_memories_leave_the_searches(self, store):
        add(store, record("a", "Likes sushi"), record("b", "Likes sushi rolls"))
        old = store.get("b")
        with store.transaction() as b:
            b.update(old.copy(status=Status.ARCHIVED), None, old_text=old.text, op="archive")
        assert vsearch(store, "Likes sushi rolls") == ["a"]
        assert tsearch(store, "rolls") == []
        assert [r.id for r in store.list(F_ALEX)] == ["a"]
        assert [r.id for r in store.list(F_ALEX, status=Status.ARCHIVED)] == ["b"]
        assert store.stats()["archived"] == 1
        assert [e.op for e in store.history("b")] == ["add", "archive"]

    def test_every_change_has_its_event_and_every_event_its_change(self, store):
        def count() -> int:
            return len(store.events())

        assert count() == 0
        add(store, record("a", "one"))
        assert count() == 1
        update_text(store, "a", "two")
        assert count() == 2
        delete(store, "a")
        assert count() == 3
        with store.transaction() as b:
            seq = b.event("turn", ALEX, payload={"messages": []})
        assert count() == 4
        with store.transaction() as b:
            b.add(record("b", "three"), vec("three"))
            b.add(record("c", "four", BOB), None)
            b.event("turn", BOB, payload={"messages": []})
        assert count() == 7
        events = store.events()
        assert [e.op for e in events] == ["add", "update", "delete", "turn", "add", "add", "turn"]
        assert events[3].seq == seq
        assert [e.seq for e in events] == sorted({e.seq for e in events})  # increasing, none repeated
        # Each memory event names a memory in the state it left...
        for e in events:
            if e.memory_id is not None:
                got = store.get(e.memory_id)
                assert got is not None and got.scope.space == e.scope.space
        # ... and each memory has the events that made it what it is.
        for r in store.list(F_TENANT) + store.list(F_TENANT, status=Status.DELETED):
            history = store.history(r.id)
            assert history[0].op == "add"
            assert (history[-1].new_text if r.status is Status.ACTIVE else history[-1].old_text) == r.text

    def test_duplicate_ids_and_missing_targets_are_store_errors(self, store):
        add(store, record("a", "one"))
        before = store.events()
        with pytest.raises(StoreError, match="'a'"), store.transaction() as b:
            b.add(record("a", "again"), vec("again"))
        with pytest.raises(StoreError, match="ghost"), store.transaction() as b:
            b.update(record("ghost", "x"), vec("x"), old_text="y")
        with pytest.raises(StoreError, match="ghost"), store.transaction() as b:
            b.delete(record("ghost", "x"))
        assert store.get("a").text == "one"
        assert store.get("ghost") is None
        assert store.events() == before

    def test_find_active_hash_reads_the_space_inside_the_transaction(self, store):
        add(store, record("a", "Likes sushi"), record("gone", "Plays golf"))
        delete(store, "gone")
        with store.transaction() as b:
            assert b.find_active_hash(ALEX, content_hash("likes sushi!")) == "a"
            # The space, whatever the run.
            assert b.find_active_hash(Scope(user_id="alex", run_id="r2"), content_hash("Likes sushi")) == "a"
            assert b.find_active_hash(BOB, content_hash("Likes sushi")) is None
            assert b.find_active_hash(ALEX_HELPER, content_hash("Likes sushi")) is None
            assert b.find_active_hash(Scope("acme", "alex"), content_hash("Likes sushi")) is None
            assert b.find_active_hash(ALEX, content_hash("Plays golf")) is None  # deleted
            b.add(record("c", "Plays chess"), vec("Plays chess"))
            assert b.find_active_hash(ALEX, content_hash("Plays chess")) == "c"  # its own write

    # transactions ---------------------------------------------------------------------

    def test_failure_mid_transaction_leaves_nothing(self, store):
        add(store, record("keep", "Likes sushi"), record("bob", "Plays chess", BOB))
        # Searches first, so whatever a backend caches is loaded before the failure.
        assert vsearch(store, "Likes sushi") == ["keep"]
        assert tsearch(store, "sushi") == ["keep"]
        version = store.space_version(ALEX)
        events = store.events()

        with pytest.raises(Boom), store.transaction() as b:
            b.add(record("ghost", "Likes sushi rolls"), vec("Likes sushi rolls"))
            b.update(store.get("keep").copy(text="Hates sushi"), vec("Hates sushi"), old_text="Likes sushi")
            b.event("turn", ALEX, payload={"messages": ["x"]})
            b.advance_clock(ALEX, 3)
            raise Boom()

        assert store.get("ghost") is None
        assert store.get("keep").text == "Likes sushi"
        assert store.events() == events
        assert store.history("ghost") == []
        assert store.space_version(ALEX) == version
        assert store.access_clock(ALEX) == 0
        assert vsearch(store, "Likes sushi rolls") == ["keep"]
        assert tsearch(store, "rolls") == []
        assert tsearch(store, "rolls", F_TENANT) == []
        assert tsearch(store, "sushi") == ["keep"]

        # What a backend caches is still in step with the store.
        add(store, record("next", "Drinks green tea"))
        assert vsearch(store, "Drinks green tea", k=1) == ["next"]
        assert set(vsearch(store, "anything")) == {"keep", "next"}
        assert tsearch(store, "tea") == ["next"]
        delete(store, "keep")
        assert vsearch(store, "Likes sushi") == ["next"]

    def test_a_store_error_mid_transaction_rolls_back_the_earlier_writes(self, store):
        add(store, record("a", "first"))
        assert tsearch(store, "first") == ["a"]
        events = store.events()
        with pytest.raises(StoreError), store.transaction() as b:
            b.add(record("b", "second"), vec("second"))
            b.delete(store.get("a"))
            b.event("turn", ALEX)
            b.add(record("a", "duplicate id"), vec("duplicate id"))  # fails
        assert store.get("b") is None
        assert store.get("a").status is Status.ACTIVE
        assert store.events() == events
        assert vsearch(store, "second") == ["a"]
        assert tsearch(store, "second") == []
        assert tsearch(store, "first") == ["a"]

    def test_the_batch_reads_its_own_writes(self, store):
        add(store, record("a", "Likes sushi"), record("gone", "Plays golf"))
        with store.transaction() as b:
            b.add(record("new", "Plays chess", section="games"), vec("Plays chess"))
            a = b.get_many(["a"])["a"]
            b.update(a.copy(text="Loves sushi", helpful=4), None, old_text=a.text)
            b.delete(b.get_many(["gone"])["gone"])
            seen = b.get_many(["a", "new", "gone", "missing"])
            assert seen.keys() == {"a", "new", "gone"}
            assert (seen["a"].text, seen["a"].helpful) == ("Loves sushi", 4)
            assert seen["new"].text == "Plays chess"
            assert seen["gone"].status is Status.DELETED
            assert [r.id for r, _ in b.list_bullets(F_ALEX)] == ["new"]
            assert b.find_active_hash(ALEX, content_hash("Plays chess")) == "new"
        assert store.get("a").helpful == 4

    def test_the_batch_reads_the_committed_space_version_before_writing(self, store):
        with store.transaction() as b:
            assert b.space_version(ALEX) == 0
            b.add(record("a", "Likes sushi"), vec("Likes sushi"))
        committed = store.space_version(ALEX)
        with store.transaction() as b:
            assert b.space_version(ALEX) == committed
            assert b.space_version(BOB) == 0
            b.add(record("b", "Plays chess"), vec("Plays chess"))
        assert store.space_version(ALEX) != committed

    def test_advance_clock_counts_buffered_retrievals_and_rolls_back(self, store):
        add(store, record("a", "Likes sushi"))
        store.touch([store.get("a")], query="sushi")
        with store.transaction() as b:
            assert b.advance_clock(ALEX, 0) == 1  # the buffered retrieval counts
            assert b.advance_clock(ALEX, 2) == 3
            assert b.advance_clock(BOB, 1) == 1  # a space of its own, new
        assert (store.access_clock(ALEX), store.access_clock(BOB)) == (3, 1)
        with pytest.raises(Boom), store.transaction() as b:
            b.advance_clock(ALEX, 5)
            raise Boom()
        assert store.access_clock(ALEX) == 3

    def test_a_failed_transaction_keeps_buffered_retrievals(self, store):
        """A rolled-back write must not take unrelated retrievals recorded before it
        (the access clock that decay counts) down with it."""
        add(store, record("a", "Likes sushi"))
        store.touch([store.get("a")], query="sushi")
        assert store.access_clock(ALEX) == 1
        with pytest.raises(Boom), store.transaction():
            raise Boom()
        assert store.access_clock(ALEX) == 1
        store.flush()
        assert store.get("a").access_count == 1

    # reads -------------------------------------------------------------------------------

    def test_every_field_survives_the_round_trip(self, store, opened):
        full = full_record("full", "Prefers tea 🍵 — not coffee")
        # The defaults: no update, no end, empty JSON, and no search text (the text's).
        plain = MemoryRecord(id="plain", scope=BOB, text="Likes sushi", created_at=1_700_000_000.0)
        add(store, full, plain)
        plain = plain.copy(search_text=plain.text)
        assert store.get("full") == full
        assert store.get("plain") == plain
        assert store.get_many(["full", "plain"]) == {"full": full, "plain": plain}
        assert store.list(ScopeFilter("acme", "alex")) == [full]
        store.close()
        again = opened()
        assert again.get("full") == full
        assert again.get("plain") == plain

    def test_get_many_with_and_without_a_scope_hint(self, store):
        add(store, full_record("t", "Prefers green tea", Scope("", "alex", "", "run-7")), record("s", "Likes sushi"),
            record("b", "Plays chess", BOB))
        update_text(store, "s", "Likes salmon sushi", metadata={"k": 1})
        vsearch(store, "tea")  # whatever a backend loads for a search is loaded now
        add(store, full_record("u", "Prefers black tea", Scope("", "alex", "", "run-7")), record("gone", "Plays golf"))
        delete(store, "gone")
        wanted = ["t", "s", "u", "gone", "b", "missing", "t"]
        read = store.get_many(wanted)
        assert read.keys() == {"t", "s", "u", "gone", "b"}
        assert read["gone"].status is Status.DELETED
        assert read["s"] == store.get("s")
        for exact_access in (True, False):
            # The scope is a hint of where the ids were found, never a filter.
            assert store.get_many(wanted, scope=F_ALEX, exact_access=exact_access) == read
        # Retrievals may lag behind in what a hinted read shows, nothing else.
        store.touch([read["t"]], query="tea")
        store.flush()
        exact = store.get_many(["t"])["t"]
        assert exact.access_count == read["t"].access_count + 1
        shown = store.get_many(["t"], scope=F_ALEX, exact_access=False)["t"]
        lagging = {"access_count": 0, "last_access": {}}
        assert shown.copy(**lagging) == exact.copy(**lagging)

    def test_get_many_takes_any_number_of_ids(self, store):
        with store.transaction() as b:
            for i in range(700):
                b.add(record(f"m{i:04d}", f"memory number {i}"), None)
        wanted = [f"m{i:04d}" for i in range(0, 1400, 2)]
        assert store.get_many(wanted).keys() == {f"m{i:04d}" for i in range(0, 700, 2)}

    def test_list_is_newest_first_with_status_limit_cutoff_and_valid_to(self, store):
        now = time.time()
        add(store,
            record("old", "old one", at=now - 1000),
            record("mid", "middle one", at=now - 500),
            record("new", "new one", at=now - 10),
            record("ended", "ended one", at=now - 5, valid_to=now - 1),
            record("gone", "gone one", at=now - 3),
            record("renewed", "renewed one", at=now - 2000, updated_at=now - 20))
        delete(store, "gone")
        assert [r.id for r in store.list(F_ALEX)] == ["ended", "new", "mid", "old", "renewed"]
        assert [r.id for r in store.list(F_ALEX, limit=2)] == ["ended", "new"]
        # Effective since the cutoff: created, or updated, after it.
        assert [r.id for r in store.list(F_ALEX, cutoff=now - 600)] == ["ended", "new", "mid", "renewed"]
        assert [r.id for r in store.list(F_ALEX, now=now)] == ["new", "mid", "old", "renewed"]
        assert [r.id for r in store.list(F_ALEX, now=now - 2)] == ["ended", "new", "mid", "old", "renewed"]
        assert [r.id for r in store.list(F_ALEX, status=Status.DELETED)] == ["gone"]
        assert [r.id for r in store.iter_all(F_ALEX)] == [r.id for r in store.list(F_ALEX)]
        # Created up to a time (a view as of then): the limit counts only those.
        assert [r.id for r in store.list(F_ALEX, until=now - 500)] == ["mid", "old", "renewed"]
        assert [r.id for r in store.list(F_ALEX, until=now - 500, limit=1)] == ["mid"]

    def test_find_by_hash_finds_active_memories_of_the_scope(self, store):
        add(store, record("a", "Likes sushi"), record("h", "likes sushi!", ALEX_HELPER),
            record("b", "Likes sushi", BOB), record("gone", "Likes  SUSHI"), record("c", "Plays chess"))
        delete(store, "gone")
        digest = content_hash("Likes sushi")
        assert {r.id for r in store.find_by_hash(F_ALEX, digest)} == {"a", "h"}
        assert [r.id for r in store.find_by_hash(F_ALEX_ONLY, digest)] == ["a"]
        assert store.find_by_hash(F_ALEX_ONLY, digest)[0] == store.get("a")
        assert {r.id for r in store.find_by_hash(F_TENANT, digest)} == {"a", "h", "b"}
        assert store.find_by_hash(F_ALEX, content_hash("Plays golf")) == []

    def test_similarities_of_active_memories_of_the_scope(self, store):
        add(store, record("a", "Likes sushi"), record("b", "Plays chess"), record("h", "Helper likes tea", ALEX_HELPER),
            record("bob", "Likes sushi", BOB), record("gone", "Likes ramen"))
        with store.transaction() as b:
            b.add(record("novec", "No vector"), None)
        delete(store, "gone")
        query = vec("Likes sushi rolls")
        sims = store.similarities(F_ALEX, query, ["a", "b", "h", "bob", "gone", "novec", "missing"])
        assert sims.keys() == {"a", "b", "h"}
        for mid, text in (("a", "Likes sushi"), ("b", "Plays chess"), ("h", "Helper likes tea")):
            v = vec(text)
            expected = float(query @ v / (np.linalg.norm(query) * np.linalg.norm(v)))
            assert sims[mid] == pytest.approx(expected, abs=1e-5)
        assert store.similarities(F_ALEX_ONLY, query, ["a", "h"]).keys() == {"a"}
        assert store.similarities(F_ALEX, query, []) == {}

    def test_created_times_of_active_memories_of_the_scope(self, store):
        add(store, record("a", "Likes sushi", at=1_000.5), record("b", "Plays chess", at=2_000.25),
            record("h", "Helper likes tea", ALEX_HELPER, at=3_000.0), record("bob", "Likes sushi", BOB), record("gone", "Likes ramen"))
        delete(store, "gone")
        times = store.created_times(F_ALEX, ["a", "b", "h", "bob", "gone", "missing"])
        assert times == {"a": 1_000.5, "b": 2_000.25, "h": 3_000.0}
        assert store.created_times(F_ALEX_ONLY, ["a", "h"]) == {"a": 1_000.5}
        assert store.created_times(F_ALEX, []) == {}

    def test_ids_with_prefix(self, store):
        add(store, record("abc1", "one"), record("abc2", "two"), record("abd", "three"), record("abc0", "zero"),
            record("ABC3", "upper"), record("abc4", "bob's", BOB),
            record("abc9", "other tenant", Scope("acme", "alex")),
            record("ab%x", "percent", Scope("wild", "alex")), record("ab_y", "underscore", Scope("wild", "alex")),
            record("abzz", "z", Scope("wild", "alex")))
        delete(store, "abc0")
        assert store.ids_with_prefix("", "abc") == ["abc1", "abc2"]  # at most two by default
        assert store.ids_with_prefix("", "abc", limit=10) == ["abc1", "abc2", "abc4"]  # sorted, the whole tenant
        assert store.ids_with_prefix("", "abc", limit=10, include_deleted=True) == ["abc0", "abc1", "abc2", "abc4"]
        assert store.ids_with_prefix("", "abc", limit=1) == ["abc1"]
        assert store.ids_with_prefix("", "abd") == ["abd"]
        assert store.ids_with_prefix("", "abc1") == ["abc1"]
        assert store.ids_with_prefix("", "abe") == []
        assert store.ids_with_prefix("acme", "abc") == ["abc9"]
        # With ids, only that scope's memories: another user's ids are never matched.
        assert store.ids_with_prefix("", "abc", limit=10, user_id="bob") == ["abc4"]
        assert store.ids_with_prefix("", "abc4", user_id="alex") == []
        add(store, record("abc5", "helper's", ALEX_HELPER), record("abc6", "run's", Scope(user_id="alex", run_id="r1")))
        assert store.ids_with_prefix("", "abc", limit=10, user_id="alex") == ["abc1", "abc2", "abc5", "abc6"]
        assert store.ids_with_prefix("", "abc", limit=10, user_id="alex", agent_id="helper") == ["abc5"]
        assert store.ids_with_prefix("", "abc", limit=10, agent_id="", run_id="r1") == ["abc6"]
        assert store.ids_with_prefix("", "abc", limit=10, user_id="alex", include_deleted=True)[0] == "abc0"
        # The prefix is text, not a pattern.
        assert store.ids_with_prefix("wild", "ab%") == ["ab%x"]
        assert store.ids_with_prefix("wild", "ab_") == ["ab_y"]

    # vector search -------------------------------------------------------------------------

    def test_vector_search_best_first_with_k(self, store):
        add(store, record("a", "Likes sushi"), record("b", "Likes sushi rolls"), record("c", "Plays chess"),
            record("h", "Likes sushi a lot", ALEX_HELPER))
        hits = store.vector_search(F_ALEX, vec("Likes sushi"), k=None, cutoff=None, now=time.time())
        assert {mid for mid, _ in hits} == {"a", "b", "c", "h"}
        assert hits[0][0] == "a" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        for mid, score in hits:
            assert store.similarities(F_ALEX, vec("Likes sushi"), [mid])[mid] == pytest.approx(score, abs=1e-5)
        # k counts over every space of the scope.
        assert [mid for mid, _ in hits[:2]] == vsearch(store, "Likes sushi", k=2)
        assert vsearch(store, "Likes sushi", k=1) == ["a"]
        assert vsearch(store, "Likes sushi", F_ALEX_ONLY, k=10) == [mid for mid, _ in hits if mid != "h"]

    def test_equal_scores_of_several_spaces_rank_in_the_order_written(self, store):
        """The same memory said to an agent and then to no agent ties by vector and by
        text: both rankings put the one written first first, whatever the spaces'
        order (SQLite merged the spaces' lists space by space; PostgreSQL ranked the
        first written first, so one search returned different memories)."""
        at = time.time() - 100
        add(store, record("z-helper", "Likes jazz records", ALEX_HELPER, at=at))
        add(store, record("a-alone", "Likes jazz records", ALEX, at=at))
        add(store, record("m-helper", "Likes jazz records", ALEX_HELPER, at=at))
        add(store, record("other", "Plays chess on Sundays", ALEX, at=at))
        order = ["z-helper", "a-alone", "m-helper"]
        assert vsearch(store, "Likes jazz records", k=None)[:3] == order
        assert vsearch(store, "Likes jazz records", k=2) == order[:2]
        assert tsearch(store, "jazz records")[:3] == order
        assert tsearch(store, "jazz records", k=1) == order[:1]

    def test_equal_scores_in_one_space_rank_in_the_order_written(self, store):
        """Ties inside a space's best k come in the order written too, not in the order
        a partial sort left them (k below the space's size)."""
        at = time.time() - 100
        tied = [f"t{i:02d}" for i in range(12)]
        others = [record(f"o{i:02d}", f"Plays chess game {i} on Sunday", ALEX, at=at) for i in range(40)]
        add(store, *others[:20], *(record(mid, "Likes jazz records", ALEX, at=at) for mid in tied), *others[20:])
        for k in (3, 12, 15):
            assert vsearch(store, "Likes jazz records", F_ALEX_ONLY, k=k)[: min(k, 12)] == tied[:k]
            assert tsearch(store, "jazz records", F_ALEX_ONLY, k=k)[: min(k, 12)] == tied[:k]

    def test_vector_search_keeps_valid_memories_effective_since_the_cutoff(self, store):
        now = time.time()
        add(store,
            record("old", "sushi one", at=now - 1000),
            record("mid", "sushi two", at=now - 500),
            record("new", "sushi three", at=now - 10),
            record("ended", "sushi four", at=now - 5, valid_to=now - 1),
            record("renewed", "sushi five", at=now - 2000, updated_at=now - 20))
        assert set(vsearch(store, "sushi", now=now)) == {"old", "mid", "new", "renewed"}
        assert set(vsearch(store, "sushi", now=now - 2)) == {"old", "mid", "new", "ended", "renewed"}
        assert set(vsearch(store, "sushi", cutoff=now - 600, now=now)) == {"mid", "new", "renewed"}

    def test_vector_search_within_a_time_window(self, store):
        now = time.time()
        add(store,
            record("old", "sushi one", at=now - 1000),
            record("mid", "sushi two", at=now - 500),
            record("new", "sushi three", at=now - 10),
            record("moved", "sushi four", at=now - 1000, updated_at=now - 500))  # created outside
        assert vsearch(store, "sushi", window=(now - 600, now - 100)) == ["mid"]
        assert set(vsearch(store, "sushi", window=(now - 2000, now))) == {"old", "mid", "new", "moved"}
        assert vsearch(store, "sushi", window=(now + 10, now + 20)) == []

    def test_vector_search_by_speaker(self, store):
        add(store,
            record("a", "Likes sushi", metadata={"name": "Alex"}),
            record("m", "Likes sushi too", metadata={"name": "MARIA"}),
            record("n", "Likes sushi rolls", metadata={"name": 5}),  # not a name
            record("x", "Likes sushi bowls"))
        assert vsearch(store, "Likes sushi", speaker="alex") == ["a"]
        assert vsearch(store, "Likes sushi", speaker="maria") == ["m"]
        assert vsearch(store, "Likes sushi", speaker="bob") == []
        assert set(vsearch(store, "Likes sushi")) == {"a", "m", "n", "x"}

    def test_speakers_are_the_casefolded_names_of_the_scopes_memories(self, store):
        add(store,
            record("a", "one", metadata={"name": "Alex"}),
            record("b", "two", metadata={"name": "BOB"}),
            record("c", "three", metadata={"name": 5}),
            record("d", "four"),
            record("gone", "five", metadata={"name": "Gone"}),
            record("h", "six", ALEX_HELPER, metadata={"name": "Helper"}),
            record("o", "seven", BOB, metadata={"name": "Carol"}))
        delete(store, "gone")
        assert store.speakers(F_ALEX) == {"alex", "bob", "helper"}
        assert store.speakers(F_ALEX_ONLY) == {"alex", "bob"}
        assert store.speakers(F_BOB) == {"carol"}
        assert store.speakers(ScopeFilter("acme", "alex")) == set()

    # text search ----------------------------------------------------------------------------

    @pytest.mark.parametrize("scope", [F_ALEX_ONLY, F_TENANT], ids=["one space", "many spaces"])
    def test_text_search_ranks_higher_scores_first(self, store, scope):
        add(store, record("both", "Drinks green tea"), record("one", "Drinks black tea"),
            record("none", "Plays chess"), record("bob", "Likes chess", BOB))
        hits = store.text_search(scope, "green tea", k=10, cutoff=None, now=time.time())
        assert [mid for mid, _ in hits] == ["both", "one"]
        assert hits[0][1] > hits[1][1]
        assert [mid for mid, _ in store.text_search(scope, "green tea", k=1, cutoff=None, now=time.time())] == ["both"]

    @pytest.mark.parametrize("scope", [F_ALEX_ONLY, F_TENANT], ids=["one space", "many spaces"])
    def test_text_search_tokenises_the_query_itself(self, store, scope):
        add(store, record("a", 'say "hello" AND goodbye'), record("s", "Likes sushi"), record("b", "unrelated", BOB))
        assert tsearch(store, "SUSHI!", scope) == ["s"]
        assert tsearch(store, "sushi, please", scope) == ["s"]  # any shared term
        assert tsearch(store, 'say "hello" NEAR( * -x', scope) == ["a"]  # search syntax is just text
        assert tsearch(store, "?!", scope) == []
        assert tsearch(store, "", scope) == []
        assert tsearch(store, "zebra", scope) == []

    @pytest.mark.parametrize("scope", [F_ALEX_ONLY, F_ALEX, F_TENANT], ids=["one space", "a user's spaces", "many spaces"])
    def test_a_query_of_stop_words_only_matches_nothing_whatever_the_scope(self, store, scope):
        # Once SQLite's path for several spaces matched stop words and no other did:
        # the same search ranked otherwise by the scope's shape and the backend.
        add(store, record("a", "I love hiking in the Alps"), record("m", "The meeting with Bob is on Friday"),
            record("h", "note for the bot", ALEX_HELPER), record("b", "who is on the team", BOB))
        for query in ("the", "who am I", "is it on"):
            assert tsearch(store, query, scope) == [], query
        assert tsearch(store, "the meeting", scope) == ["m"]

    def test_text_search_keeps_valid_memories_effective_since_the_cutoff(self, store):
        now = time.time()
        add(store,
            record("old", "sushi one", at=now - 1000),
            record("mid", "sushi two", at=now - 500),
            record("new", "sushi three", at=now - 10),
            record("ended", "sushi four", at=now - 5, valid_to=now - 1))
        assert set(tsearch(store, "sushi", now=now)) == {"old", "mid", "new"}
        assert set(tsearch(store, "sushi", now=now - 2)) == {"old", "mid", "new", "ended"}
        assert set(tsearch(store, "sushi", cutoff=now - 600, now=now)) == {"mid", "new"}
        add(store, record("bob", "sushi bob", BOB, at=now))  # now the tenant spans two spaces
        assert set(tsearch(store, "sushi", F_TENANT, cutoff=now - 600, now=now)) == {"mid", "new", "bob"}

    def test_narrowed_ids_are_the_scopes_valid_active_memories_its_conditions_keep_newest_first(self, store):
        now = time.time()
        add(store,
            record("old", "sushi one", at=now - 1000, metadata={"n": 1, "tag": "x"}),
            record("mid", "sushi two", at=now - 500, metadata={"n": 2, "tag": ["x", "y"]}),
            record("new", "sushi three", at=now - 10, metadata={"n": 3}),
            record("ended", "sushi four", at=now - 5, valid_to=now - 1, metadata={"n": 4, "tag": "x"}),
            record("gone", "sushi five", at=now - 3, metadata={"n": 5, "tag": "x"}),
            record("bob", "sushi bob", BOB, at=now, metadata={"n": 6, "tag": "x"}))
        delete(store, "gone")

        def ids(filters: dict[str, Any], **kw: Any) -> list[str] | None:
            return store.narrowed_ids(F_ALEX, narrowing(filters), cutoff=kw.get("cutoff"), now=kw.get("now", now),
                                      limit=kw.get("limit", 100))

        # The contract lets a backend answer None (it checks nothing); both of
        # memorist's backends check these conditions.
        assert ids({"tag": "x"}) == ["mid", "old"]  # a list holding the value passes; newest first
        assert ids({"tag": "x"}, now=now - 2) == ["ended", "mid", "old"]
        assert ids({"tag": "x"}, cutoff=now - 600) == ["mid"]
        assert ids({"n": {"gte": 2}}) == ["new", "mid"]
        assert ids({"OR": [{"n": 1}, {"n": 3.0}]}) == ["new", "old"]
        assert ids({"n": 1, "created_at": {"gt": now - 2000}}) == ["old"]
        assert ids({"n": 99}) == []
        # Counters compared as whole numbers, however large (a float bound rounds).
        with store.transaction() as b:
            b.update(store.get("mid").copy(helpful=2**53 + 1), None, old_text="sushi two")
        assert ids({"helpful": {"gt": 2.0**53}}) == ["mid"]
        assert ids({"helpful": {"gte": 2**53 + 0.5}}) == ["mid"]
        assert ids({"helpful": 2**53 + 1}) == ["mid"]
        assert ids({"helpful": {"gt": 1e300}}) == []
        assert ids({"tag": "x"}, limit=1) is None  # more than the limit: no partial answer
        assert ids({"tag": "x"}, limit=2) == ["mid", "old"]

    def test_narrowed_ids_inside_a_transaction_see_its_writes(self, store):
        now = time.time()
        add(store, record("kept", "sushi one", at=now - 10, metadata={"tag": "x"}))
        with store.transaction() as b:
            b.add(record("pending", "sushi two", at=now - 5, metadata={"tag": "x"}), vec("sushi two"))
            assert store.narrowed_ids(F_ALEX, narrowing({"tag": "x"}), cutoff=None, now=now, limit=10) == ["pending", "kept"]
        assert store.narrowed_ids(F_ALEX, narrowing({"tag": "x"}), cutoff=None, now=now, limit=10) == ["pending", "kept"]

    # scopes ---------------------------------------------------------------------------------

    SCOPED = (
        ("a1", ALEX),
        ("a2", Scope("", "alex", "helper", "r1")),
        ("b1", BOB),
        ("b2", Scope("", "bob", "helper", "r9")),
        ("g1", Scope("", "", "helper", "")),  # the agent's own memory, no user
        ("t1", Scope("acme", "alex")),
    )

    @pytest.mark.parametrize(
        ("scope", "expected"),
        [
            (ScopeFilter("", "alex"), {"a1", "a2"}),
            (ScopeFilter("", "alex", agent_id=""), {"a1"}),
            (ScopeFilter("", "alex", agent_id="helper"), {"a2"}),
            (ScopeFilter("", "alex", run_id="r1"), {"a2"}),
            (ScopeFilter("", "alex", agent_id="", run_id="r1"), set()),
            (ScopeFilter("", None, "helper"), {"a2", "b2", "g1"}),
            (ScopeFilter("", None, None, "r9"), {"b2"}),
            (ScopeFilter("", "bob"), {"b1", "b2"}),
            (ScopeFilter("", "bob", "helper", "r9"), {"b2"}),
            (ScopeFilter("acme", "alex"), {"t1"}),
            (ScopeFilter("acme", "bob"), set()),
            (ScopeFilter("other", "alex"), set()),
            (ScopeFilter(""), {"a1", "a2", "b1", "b2", "g1"}),
        ],
    )
    def test_scopes_never_leak(self, store, scope, expected):
        with store.transaction() as b:
            for mid, s in self.SCOPED:
                b.add(record(mid, "likes sushi", s, metadata={"food": "sushi"}), vec("likes sushi"))
        assert {r.id for r in store.list(scope)} == expected
        narrowed = store.narrowed_ids(scope, narrowing({"food": "sushi"}), cutoff=None, now=time.time(), limit=100)
        assert narrowed is None or set(narrowed) == expected
        assert set(vsearch(store, "likes sushi", scope)) == expected
        assert set(tsearch(store, "sushi", scope)) == expected
        assert {r.id for r in store.find_by_hash(scope, content_hash("likes sushi"))} == expected
        assert {e.memory_id for e in store.events(scope)} == expected
        assert set(store.similarities(scope, vec("likes sushi"), [mid for mid, _ in self.SCOPED])) == expected

    # user counts ------------------------------------------------------------------------------

    def test_user_counts(self, store):
        now = time.time()
        add(store,
            record("a1", "one", at=now - 10), record("a2", "two", at=now - 10),
            record("a3", "three", ALEX_HELPER, at=now - 10), record("a4", "four", at=now - 10),
            record("b1", "expired", BOB, at=now - 10, valid_to=now - 1), record("b2", "old", BOB, at=now - 1000),
            record("c1", "deleted", Scope(user_id="carol")),
            record("g1", "agent's own", Scope(agent_id="helper")),
            record("d1", "other tenant", Scope("acme", "dave")))
        delete(store, "a4", "c1")
        assert store.user_counts("", now=now) == {"alex": 3, "bob": 1, "carol": 0}
        assert store.user_counts("", now=now - 5) == {"alex": 3, "bob": 2, "carol": 0}
        assert store.user_counts("", now=now, cutoff=now - 500) == {"alex": 3, "bob": 0, "carol": 0}
        assert store.user_counts("", now=now, only="alex") == {"alex": 3}
        assert store.user_counts("", now=now, only="nobody") == {}
        limited = store.user_counts("", now=now, limit=2)
        assert len(limited) == 2 and limited.items() <= {"alex": 3, "bob": 1, "carol": 0}.items()
        assert store.user_counts("acme", now=now) == {"dave": 1}

    # the event log ------------------------------------------------------------------------------

    def test_history_is_one_memorys_events_in_order(self, store):
        add(store, record("a", "one"), record("b", "other"))
        update_text(store, "a", "two")
        update_text(store, "b", "other two")
        update_text(store, "a", "three")
        history = store.history("a")
        assert ops(history) == [("add", None, "one"), ("update", "one", "two"), ("update", "two", "three")]
        assert [e.seq for e in history] == sorted(e.seq for e in history)

    def test_events_since_limit_ops_and_scope(self, store):
        run = Scope(user_id="alex", run_id="r1")
        add(store, record("a", "one", run), record("b", "two", BOB))
        with store.transaction() as b:
            t1 = b.event("turn", run, actor="user", payload={"messages": [{"role": "user", "content": "hé ✓"}]})
            t2 = b.event("note", BOB, memory_id="b", old_text="before", new_text="after")
            t3 = b.event("turn", Scope("acme", "alex"), payload={})
        everything = store.events()
        assert [e.op for e in everything] == ["add", "add", "turn", "note", "turn"]
        add_a, add_b = everything[:2]
        assert [e.seq for e in everything[2:]] == [t1, t2, t3]
        turn_event = everything[2]
        assert (turn_event.scope, turn_event.actor, turn_event.payload) == (run, "user", {"messages": [{"role": "user", "content": "hé ✓"}]})
        assert (turn_event.memory_id, turn_event.old_text, turn_event.new_text) == (None, None, None)
        assert (everything[3].memory_id, everything[3].old_text, everything[3].new_text) == ("b", "before", "after")
        assert add_a.scope == run  # a memory's events carry its run

        assert [e.seq for e in store.events(since=t1)] == [t2, t3]
        assert [e.seq for e in store.events(limit=2)] == [add_a.seq, add_b.seq]
        assert [e.seq for e in store.events(since=add_b.seq, limit=1)] == [t1]
        assert [e.seq for e in store.events(ops=["turn"])] == [t1, t3]
        assert [e.seq for e in store.events(ops=("turn", "note"), since=t1)] == [t2, t3]
        assert [e.seq for e in store.events(F_ALEX)] == [add_a.seq, t1]
        assert [e.seq for e in store.events(ScopeFilter("", "alex", run_id="r1"), ops=["turn"])] == [t1]
        assert store.events(ScopeFilter("", "alex", run_id="r2")) == []
        assert [e.seq for e in store.events(F_BOB)] == [add_b.seq, t2]
        assert [e.seq for e in store.events(F_BOB, since=add_b.seq)] == [t2]
        assert [e.seq for e in store.events(ScopeFilter("acme", "alex"))] == [t3]
        assert [e.seq for e in store.events(F_TENANT)] == [e.seq for e in everything[:4]]
        assert [e.op for e in store.history("b")] == ["add", "note"]

    def test_events_newest_first_keeps_the_latest(self, store):
        # Spec 003's recent(n): the last n events of some ops, read from the end of the log.
        with store.transaction() as b:
            seqs = [b.event("minute", ALEX if i % 2 else ALEX_HELPER, payload={"i": i}) for i in range(5)]
            other = b.event("turn", ALEX, payload={})
            bob = b.event("minute", BOB, payload={})
        assert [e.seq for e in store.events(ops=["minute"], newest_first=True)] == [bob, *reversed(seqs)]
        assert [e.seq for e in store.events(F_ALEX, ops=["minute"], limit=3, newest_first=True)] == [seqs[4], seqs[3], seqs[2]]
        assert [e.seq for e in store.events(F_ALEX_ONLY, limit=2, newest_first=True)] == [other, seqs[3]]
        assert [e.seq for e in store.events(F_ALEX, since=seqs[2], ops=["minute"], newest_first=True)] == [seqs[4], seqs[3]]
        assert [e.seq for e in store.events(F_ALEX, ops=["minute"], limit=2)] == seqs[:2]  # the default stays oldest first

    def test_pending_turns_until_processed(self, store):
        alex_chat, bob, acme = Scope("", "alex", "", "chat-1"), Scope("", "bob", "", ""), Scope("acme", "alex", "", "")
        a = turn(store, alex_chat, pending=True)
        turn(store, alex_chat, pending=False)
        b = turn(store, bob, pending=True)
        c = turn(store, acme, pending=True)
        with store.transaction() as batch:  # an unrelated event naming the turn resolves nothing
            batch.event("reprocess_failed", alex_chat, payload={"turn_event": a})

        def pending(scope: ScopeFilter | None = None, **kw: Any) -> list[int]:
            # The backend's answer and the contract's default (read from the log) agree.
            own = [e.seq for e in store.pending_turns(scope, **kw)]
            assert own == [e.seq for e in Store.pending_turns(store, scope, **kw)]
            return own

        assert pending() == [a, b, c]
        assert pending(F_ALEX) == [a]
        assert pending(ScopeFilter("", None, None, "chat-1")) == [a]
        assert pending(ScopeFilter("acme", "alex")) == [c]
        assert pending(F_TENANT) == [a, b]
        assert pending(limit=1) == [a]
        assert store.pending_turns()[0].payload["reason"] == "extraction failed: test"
        resolve(store, alex_chat, a)
        assert pending() == [b, c]
        resolve(store, bob, b)
        resolve(store, acme, c)
        assert pending() == []

    def test_pending_turns_survive_reopening(self, store, opened):
        a = turn(store, ALEX, pending=True)
        store.close()
        again = opened()
        assert [e.seq for e in again.pending_turns()] == [a]
        assert again.pending_turns()[0].payload["reason"] == "extraction failed: test"

    def test_a_resolution_in_another_space_does_not_count(self, store):
        a = turn(store, ALEX, pending=True)
        resolve(store, BOB, a)
        assert [e.seq for e in store.pending_turns()] == [a]

    def test_a_space_with_turns_but_no_vectors_can_be_searched_and_written(self, store):
        turn(store, ALEX, pending=False)
        assert vsearch(store, "vegetarian") == []
        assert tsearch(store, "vegetarian") == []
        assert store.speakers(F_ALEX) == set()
        add(store, record("a", "Is vegetarian"))
        assert vsearch(store, "Is vegetarian") == ["a"]
        assert tsearch(store, "vegetarian") == ["a"]

    # stats ----------------------------------------------------------------------------------------

    def test_stats_counts(self, store):
        add(store, record("a", "one"), record("b", "two", kind=Kind.PREFERENCE), record("c", "three", BOB),
            record("h", "four", ALEX_HELPER))
        delete(store, "b")
        s = store.stats()
        assert {"memories", "deleted", "archived", "by_kind", "users", "spaces", "events", "embedder", "dim"} <= s.keys()
        assert (s["memories"], s["deleted"], s["archived"], s["users"], s["spaces"], s["events"]) == (3, 1, 0, 2, 3, 5)
        assert s["by_kind"] == {"fact": 3}
        assert (s["embedder"], s["dim"]) == (EMB.name, EMB.dim)
        delete(store, "c")  # Bob's only memory: Bob keeps a history, and is no user counted
        assert (store.stats()["users"], store.stats()["deleted"]) == (1, 2)

    # the access clock -----------------------------------------------------------------------------

    @pytest.mark.parametrize("flush_between", [False, True], ids=["buffered", "flushed between"])
    def test_touches_stamp_each_memory_with_the_clock_of_its_last_retrieval(self, store, flush_between):
        add(store, record("a", "Likes sushi"), record("b", "Went to Oslo", memory_class=MemoryClass.EPISODIC),
            record("h", "Helper likes tea", ALEX_HELPER), record("z", "Never retrieved"))
        a, b, h = store.get("a"), store.get("b"), store.get("h")
        store.touch([a], query="sushi")  # ALEX's clock: 1
        store.touch([a, b, h], query="food")  # 2; the helper's space: 1
        if flush_between:
            store.flush()
        store.touch([b], query="trips")  # 3
        store.touch([])  # no retrieval
        assert (store.access_clock(ALEX), store.access_clock(ALEX_HELPER), store.access_clock(BOB)) == (3, 1, 0)
        assert store.access_clock(Scope(user_id="alex", run_id="r5")) == 3  # the space's clock, any run
        store.flush()
        a, b, h, z = (store.get(m) for m in "abhz")
        assert (a.access_count, a.last_access) == (2, {"semantic": 2, "episodic": 0, "procedural": 0})
        assert (b.access_count, b.last_access) == (2, {"semantic": 0, "episodic": 3, "procedural": 0})
        assert (h.access_count, h.last_access) == (1, {"semantic": 1, "episodic": 0, "procedural": 0})
        assert (z.access_count, z.last_access) == (0, {"semantic": 0, "episodic": 0, "procedural": 0})
        retrievals = store.events(F_ALEX, ops=["retrieve"])
        assert [e.payload for e in retrievals if e.scope.space == ALEX.space] == [
            {"query": "sushi", "ids": ["a"]}, {"query": "food", "ids": ["a", "b"]}, {"query": "trips", "ids": ["b"]},
        ]
        assert [e.payload for e in retrievals if e.scope.space == ALEX_HELPER.space] == [{"query": "food", "ids": ["h"]}]

    def test_a_touch_never_moves_a_later_stamp_back(self, store):
        add(store, record("a", "Likes sushi", last_access={"semantic": 100, "episodic": 0, "procedural": 0}, access_count=5))
        store.touch([store.get("a")], query="sushi")
        store.flush()
        got = store.get("a")
        assert (got.access_count, got.last_access["semantic"]) == (6, 100)

    def test_touches_reach_other_instances_once_written(self, store, opened):
        other = opened()
        add(store, record("a", "Likes sushi"))
        store.touch([store.get("a")], query="sushi")
        store.flush()
        assert other.access_clock(ALEX) == 1
        assert other.get("a").access_count == 1
        store.touch([store.get("a")], query="again")
        add(store, record("b", "Plays chess"))  # a write takes buffered retrievals with it
        assert other.access_clock(ALEX) == 2
        assert other.get("a").access_count == 2

    def test_touches_survive_close_and_reopen(self, store, opened):
        add(store, record("a", "Likes sushi"), record("b", "Plays chess"))
        store.touch([store.get("a")], query="sushi")
        store.touch([store.get("a"), store.get("b")], query="hobbies")
        store.close()  # writes what is buffered
        again = opened()
        assert again.access_clock(ALEX) == 2
        a, b = again.get("a"), again.get("b")
        assert (a.access_count, b.access_count) == (2, 1)
        assert a.last_access["semantic"] == 2 and b.last_access["semantic"] == 2
        retrievals = again.events(F_ALEX, ops=["retrieve"])
        assert [e.payload["query"] for e in retrievals] == ["sushi", "hobbies"]
        assert retrievals[1].payload["ids"] == ["a", "b"]

    # playbooks ----------------------------------------------------------------------------------------

    def test_list_bullets_oldest_first_with_their_vectors(self, store):
        now = time.time()
        add(store,
            record("new", "Check the logs first", section="debugging", at=now - 10),
            record("old", "Write the test first", section="testing", at=now - 100),
            record("plain", "Likes sushi", at=now - 50),
            record("gone", "Reboot it", section="debugging", at=now - 60),
            record("bob", "Bob's bullet", BOB, section="testing", at=now - 70),
            record("h", "Helper's bullet", ALEX_HELPER, section="testing", at=now - 80))
        with store.transaction() as b:
            b.add(record("novec", "Ask a colleague", section="debugging", at=now - 5), None)
        delete(store, "gone")
        bullets = store.list_bullets(F_ALEX_ONLY)
        assert [r.id for r, _ in bullets] == ["old", "new", "novec"]
        for r, v in bullets:
            assert r == store.get(r.id)
            if r.id == "novec":
                assert v is None
            else:
                np.testing.assert_allclose(v, vec(r.text), atol=1e-6)
        assert [r.id for r, _ in store.list_bullets(F_ALEX)] == ["old", "h", "new", "novec"]
        with store.transaction() as b:
            assert [r.id for r, _ in b.list_bullets(F_BOB)] == ["bob"]

    def test_space_version_changes_with_each_transaction_writing_the_space(self, store):
        assert store.space_version(ALEX) == 0
        versions = [store.space_version(ALEX)]
        add(store, record("a", "one"))
        versions.append(store.space_version(ALEX))
        add(store, record("b", "two"))
        versions.append(store.space_version(ALEX))
        update_text(store, "a", "one again")
        versions.append(store.space_version(ALEX))
        delete(store, "b")
        versions.append(store.space_version(ALEX))
        with store.transaction() as b:  # a write in a run of the space is a write of the space
            b.add(record("r", "three", Scope(user_id="alex", run_id="r1")), vec("three"))
        versions.append(store.space_version(ALEX))
        assert len(set(versions)) == len(versions)
        assert store.space_version(Scope(user_id="alex", run_id="r9")) == versions[-1]
        assert store.space_version(BOB) == 0
        with pytest.raises(Boom), store.transaction() as b:
            b.add(record("c", "four"), vec("four"))
            raise Boom()
        assert store.space_version(ALEX) == versions[-1]

    # embedder identity ------------------------------------------------------------------------------

    def test_reading_never_pins_an_embedder(self, opened):
        s = opened()
        now = time.time()
        s.list(F_ALEX)
        s.vector_search(F_ALEX, vec("x"), k=5, cutoff=None, now=now)
        s.text_search(F_ALEX, "x", k=5, cutoff=None, now=now)
        s.stats()
        s.events()
        with s.transaction() as b:  # writes without a vector do not either
            b.event("turn", ALEX, payload={})
            b.add(record("novec", "no vector"), None)
        assert s.embedder_identity() is None
        s.close()
        assert opened(bind=False).embedder_identity() is None

    def test_the_first_vector_written_pins_the_bound_embedder(self, opened):
        s = opened()
        with pytest.raises(Boom), s.transaction() as b:
            b.add(record("a", "Likes sushi"), vec("Likes sushi"))
            raise Boom()
        assert s.embedder_identity() is None  # rolled back with the vector
        add(s, record("a", "Likes sushi"))
        assert s.embedder_identity() == (EMB.name, EMB.dim)
        assert s.stats()["embedder"] == EMB.name
        s.close()
        assert opened(bind=False).embedder_identity() == (EMB.name, EMB.dim)

    def test_vectors_of_another_embedder_are_refused(self, store, opened):
        add(store, record("a", "Likes sushi"))
        events = store.events()
        renamed = opened(bind=False)
        renamed.bind_embedder("another-model", EMB.dim)  # same dimension, other space
        with pytest.raises(EmbedderMismatchError), renamed.transaction() as b:
            b.add(record("b", "Plays chess"), vec("Plays chess"))
        smaller = opened(bind=False)
        smaller.bind_embedder(SMALL.name, SMALL.dim)
        with pytest.raises(EmbedderMismatchError), smaller.transaction() as b:
            b.add(record("c", "Plays go"), SMALL.embed_one("Plays go"))
        old = store.get("a")
        with pytest.raises(EmbedderMismatchError), smaller.transaction() as b:
            b.update(old.copy(text="Loves sushi"), SMALL.embed_one("Loves sushi"), old_text=old.text)
        assert store.get("b") is None and store.get("c") is None
        assert store.get("a") == old
        assert store.events() == events
        assert store.embedder_identity() == (EMB.name, EMB.dim)
        # What carries no vector is not the embedder's business.
        with renamed.transaction() as b:
            b.add(record("d", "No vector"), None)
        assert store.get("d") is not None

    def test_set_embedder_identity_records_it_now(self, store, opened):
        store.set_embedder_identity(SMALL.name, SMALL.dim)
        assert store.embedder_identity() == (SMALL.name, SMALL.dim)
        assert opened(bind=False).embedder_identity() == (SMALL.name, SMALL.dim)

    # maintenance -----------------------------------------------------------------------------------

    @pytest.mark.parametrize("spaces", ["one space", "two spaces"])
    def test_reindex_rebuilds_without_resurrecting_deleted_memories(self, store, spaces):
        other = ALEX if spaces == "one space" else ALEX_HELPER
        add(store, record("a", "Likes sushi"), record("b", "Likes ramen", other), record("c", "Plays chess", BOB))
        delete(store, "b")
        assert store.reindex() == {"indexed": 2, "re_embedded": 0}
        assert tsearch(store, "likes") == ["a"]
        assert tsearch(store, "ramen") == []
        assert tsearch(store, "ramen", F_TENANT) == []
        assert tsearch(store, "chess", F_TENANT) == ["c"]
        assert vsearch(store, "Likes ramen") == ["a"]
        assert vsearch(store, "Plays chess", F_BOB) == ["c"]
        assert store.embedder_identity() == (EMB.name, EMB.dim)

    def test_reindex_with_a_new_embedder_re_embeds_and_records_it(self, store, opened):
        add(store, record("a", "Likes sushi"), record("b", "Plays chess"), record("c", "Reads books", BOB))
        delete(store, "b")
        other = opened()
        assert vsearch(other, "Likes sushi", k=1) == ["a"]  # whatever other caches holds EMB's vectors
        progress: list[tuple[int, int]] = []
        result = store.reindex(SMALL.embed, name=SMALL.name, dim=SMALL.dim, progress=lambda done, total: progress.append((done, total)))
        assert result == {"indexed": 2, "re_embedded": 2}
        assert progress and progress[-1] == (2, 2)
        assert store.embedder_identity() == (SMALL.name, SMALL.dim)
        # A store bound to the old embedder serves no search of the new vectors.
        with pytest.raises(EmbedderMismatchError, match=f"holds vectors of {SMALL.name}"):
            other.vector_search(F_ALEX, SMALL.embed_one("Likes sushi"), k=None, cutoff=None, now=time.time())
        other.bind_embedder(SMALL.name, SMALL.dim)
        for s in (store, other):
            hits = s.vector_search(F_ALEX, SMALL.embed_one("Likes sushi"), k=None, cutoff=None, now=time.time())
            assert [h[0] for h in hits] == ["a"]
            assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
            assert tsearch(s, "sushi") == ["a"]
        # Writing goes on with the new embedder (the store that re-embedded is bound to it).
        with store.transaction() as b:
            b.add(record("d", "Drinks tea"), SMALL.embed_one("Drinks tea"))
        store.close()
        again = opened(bind=False)
        assert again.embedder_identity() == (SMALL.name, SMALL.dim)
        hits = again.vector_search(F_ALEX, SMALL.embed_one("Drinks tea"), k=1, cutoff=None, now=time.time())
        assert [h[0] for h in hits] == ["d"]

    def test_reset_empties_everything_and_the_log_goes_on(self, store, opened):
        add(store, record("a", "Likes sushi"), record("b", "Plays chess", BOB))
        store.touch([store.get("a")])
        other = opened()
        assert vsearch(other, "Likes sushi") == ["a"]  # other has loaded what it caches
        assert vsearch(store, "Likes sushi") == ["a"]
        assert tsearch(store, "sushi") == ["a"]
        last = store.events()[-1].seq
        store.reset()
        for s in (store, other):
            assert s.get("a") is None
            assert s.list(F_ALEX) == [] and s.list(F_BOB) == []
            assert s.events() == []
            assert vsearch(s, "Likes sushi") == []
            assert tsearch(s, "sushi") == [] and tsearch(s, "sushi", F_TENANT) == []
            assert s.stats()["memories"] == 0 and s.stats()["events"] == 0
            assert s.access_clock(ALEX) == 0
            assert s.user_counts("", now=time.time()) == {}
            assert s.embedder_identity() is None
            assert s.space_version(ALEX) == 0
        # Usable again, and the log's seqs are never reused.
        add(store, record("c", "Drinks tea"))
        assert store.embedder_identity() == (EMB.name, EMB.dim)
        assert vsearch(store, "Drinks tea") == ["c"]
        assert tsearch(store, "tea") == ["c"]
        assert store.events()[0].seq > last

    def test_another_instance_sees_the_space_made_after_a_reset(self, store, opened):
        add(store, record("a", "Likes sushi"), record("b", "Likes sushi rolls"))
        other = opened()
        assert sorted(vsearch(other, "Likes sushi")) == ["a", "b"]  # other holds the space loaded
        before = other.space_version(ALEX)
        store.reset()
        add(store, record("c", "Likes sushi bowls"))
        # One write after the reset: the new space must not pass for the old one.
        assert other.space_version(ALEX) != before
        assert vsearch(other, "Likes sushi") == ["c"]
        assert tsearch(other, "sushi") == ["c"]
        assert set(other.get_many(["a", "b", "c"], scope=F_ALEX, exact_access=False)) == {"c"}

    def test_close_is_idempotent_and_final(self, store):
        add(store, record("a", "Likes sushi"))
        store.close()
        store.close()
        with pytest.raises(StoreError):
            store.get("a")
        with pytest.raises(StoreError), store.transaction() as b:
            b.add(record("b", "Plays chess"), vec("Plays chess"))

    # durability and several instances ------------------------------------------------------------

    def test_reopen_sees_everything(self, store, opened):
        add(store, record("a", "Likes sushi"), record("b", "Plays chess", BOB))
        update_text(store, "a", "Loves sushi")
        with store.transaction() as b:
            b.event("turn", ALEX, payload={"messages": ["hi"]})
        version = store.space_version(ALEX)
        store.close()

        again = opened(bind=False)
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
        assert again.space_version(ALEX) == version

    def test_instances_of_one_store_see_each_others_commits(self, store, opened):
        other = opened()
        add(store, record("a", "Likes sushi"))
        assert vsearch(other, "Likes sushi") == ["a"]
        assert tsearch(other, "sushi") == ["a"]
        add(store, record("b", "Likes sushi rolls"))
        assert set(vsearch(other, "Likes sushi")) == {"a", "b"}
        assert set(tsearch(other, "sushi")) == {"a", "b"}
        delete(store, "a")
        assert vsearch(other, "Likes sushi") == ["b"]
        assert tsearch(other, "sushi") == ["b"]
        assert vsearch(store, "Likes sushi") == ["b"]
        add(other, record("c", "Enjoys sushi"))
        assert set(vsearch(store, "sushi")) == {"b", "c"}
        add(store, record("d", "Sushi on Fridays"))
        for s in (store, other):
            assert set(vsearch(s, "sushi")) == {"b", "c", "d"}
            assert set(tsearch(s, "sushi")) == {"b", "c", "d"}
            assert s.space_version(ALEX) == store.space_version(ALEX)

    def test_hinted_reads_follow_another_instances_writes(self, store, opened):
        other = opened()
        add(store, record("a", "Likes sushi"))
        assert vsearch(other, "sushi") == ["a"]
        update_text(store, "a", "Likes salmon sushi", metadata={"source": "edit"})
        shown = other.get_many(["a"], scope=F_ALEX, exact_access=False)["a"]
        assert (shown.text, shown.metadata) == ("Likes salmon sushi", {"source": "edit"})
        delete(store, "a")
        assert other.get_many(["a"], scope=F_ALEX, exact_access=False)["a"].status is Status.DELETED
        assert other.get_many(["missing"], scope=F_ALEX, exact_access=False) == {}

    def test_reads_inside_reading_see_writes_made_there(self, store):
        add(store, record("a", "Likes sushi"))
        with store.reading():
            assert vsearch(store, "sushi") == ["a"]
            add(store, record("b", "Likes sushi rolls"))
            assert set(vsearch(store, "sushi")) == {"a", "b"}
            assert set(tsearch(store, "sushi")) == {"a", "b"}
            assert store.get("b") is not None

    # isolation ---------------------------------------------------------------------------------

    def test_uncommitted_writes_are_invisible_to_other_instances(self, store, opened):
        other = opened()
        add(store, record("a", "Likes sushi"))
        assert vsearch(other, "sushi") == ["a"]
        written, checked = threading.Event(), threading.Event()

        def writer(_: int) -> None:
            with store.transaction() as b:
                b.add(record("b", "Likes sushi rolls"), vec("Likes sushi rolls"))
                b.event("turn", ALEX, payload={})
                written.set()
                assert checked.wait(30)

        def reader(_: int) -> None:
            try:
                assert written.wait(30)
                assert other.get("b") is None
                assert vsearch(other, "sushi") == ["a"]
                assert tsearch(other, "rolls") == []
                assert [e.op for e in other.events()] == ["add"]
            finally:
                checked.set()

        run_threads(lambda i: (writer if i == 0 else reader)(i), 2)
        assert other.get("b") is not None
        assert set(vsearch(other, "sushi")) == {"a", "b"}

    def test_readers_see_each_transaction_whole_or_not_at_all(self, store, opened):
        reader = opened()
        pairs = 40
        done = threading.Event()

        def write(_: int) -> None:
            try:
                for k in range(pairs):
                    with store.transaction() as b:
                        for side in "ab":
                            text = f"pair {k} side {side} sushi"
                            b.add(record(f"{k}{side}", text), vec(text))
            finally:
                done.set()

        def read(_: int) -> None:
            while not done.is_set():
                for ids in ([r.id for r in reader.list(F_ALEX)], vsearch(reader, "sushi"), tsearch(reader, "sushi", k=1000)):
                    found = set(ids)
                    torn = [k for k in range(pairs) if (f"{k}a" in found) != (f"{k}b" in found)]
                    assert not torn, f"transactions seen in part: {torn}"

        run_threads(lambda i: (write if i == 0 else read)(i), 2)
        assert len(reader.list(F_ALEX)) == 2 * pairs

    def test_read_modify_write_on_one_space_never_loses_an_update(self, opened):
        """Two instances of one store (two processes, as far as the store can tell)
        each read a counter and the space's version inside a transaction, then write
        the counter plus one: serialised per space, no update is lost and no two
        transactions decide on the same version."""
        stores = [opened(), opened()]
        add(stores[0], record("counter", "a counter"))
        rounds = 25
        seen: list[int] = []
        barrier = threading.Barrier(2)

        def work(i: int) -> None:
            store = stores[i]
            barrier.wait(30)
            for _ in range(rounds):
                with store.transaction() as b:
                    version = b.space_version(ALEX)
                    current = b.get_many(["counter"])["counter"]
                    b.update(current.copy(helpful=current.helpful + 1), None, old_text=current.text)
                seen.append(version)

        run_threads(work, 2)
        assert stores[0].get("counter").helpful == 2 * rounds
        assert stores[1].get("counter").helpful == 2 * rounds
        assert len(set(seen)) == 2 * rounds
        assert len(stores[1].history("counter")) == 1 + 2 * rounds

    def test_writers_adding_the_same_text_cannot_both_miss_it(self, opened):
        stores = [opened(), opened()]
        texts = [f"Likes dish number {n}" for n in range(15)]
        barrier = threading.Barrier(2)

        def work(i: int) -> None:
            store = stores[i]
            for n, text in enumerate(texts):
                barrier.wait(30)
                with store.transaction() as b:
                    if b.find_active_hash(ALEX, content_hash(text)) is None:
                        b.add(record(f"{i}-{n}", text), vec(text))

        run_threads(work, 2)
        assert sorted(r.text for r in stores[0].list(F_ALEX)) == sorted(texts)

    def test_the_access_clock_never_loses_an_advance(self, opened):
        stores = [opened(), opened()]
        rounds = 25
        values: list[int] = []
        barrier = threading.Barrier(2)

        def work(i: int) -> None:
            store = stores[i]
            barrier.wait(30)
            for _ in range(rounds):
                with store.transaction() as b:
                    values.append(b.advance_clock(ALEX, 1))

        run_threads(work, 2)
        assert sorted(values) == list(range(1, 2 * rounds + 1))
        assert stores[0].access_clock(ALEX) == stores[1].access_clock(ALEX) == 2 * rounds
