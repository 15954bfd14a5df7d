"""Store contract additions the playbooks need, on each backend (``backend``): bullets
with their vectors, the space version, reads and clock inside a transaction, and the
clock value each buffered retrieval stamps."""

from __future__ import annotations

import time

import numpy as np
import pytest

from memorist import HashingEmbedder, StoreError
from memorist.model import MemoryRecord, Scope, Status
from memorist.policies.text import content_hash
from memorist.store import open_store
from memorist.store.base import ScopeFilter

EMB = HashingEmbedder()
SAM = Scope(user_id="sam")
ANA = Scope(user_id="ana")


def rec(mid: str, text: str, scope: Scope = SAM, *, section: str = "strategies_and_hard_rules", at: float | None = None) -> MemoryRecord:
    return MemoryRecord(id=mid, scope=scope, text=text, section=section, created_at=time.time() if at is None else at,
                        content_hash=content_hash(text))


@pytest.fixture
def store(backend):
    s = open_store(backend.target)
    s.set_embedder_identity(EMB.name, EMB.dim)
    s.bind_embedder(EMB.name, EMB.dim)
    yield s
    s.close()


def add(store, *records):
    with store.transaction() as b:
        for r in records:
            b.add(r, EMB.embed_one(r.text))


def test_list_bullets_returns_sectioned_active_memories_with_vectors(store):
    add(store, rec("b1", "Draw it", at=1.0), rec("f1", "Likes tea", section="", at=2.0),
        rec("b2", "Use pizza", at=3.0), rec("x1", "Other learner", ANA, at=4.0))
    rows = store.list_bullets(ScopeFilter("", "sam", ""))
    assert [r.id for r, _ in rows] == ["b1", "b2"]  # oldest first, no ordinary memory, no other learner
    assert all(v is not None and v.shape == (EMB.dim,) for _, v in rows)
    np.testing.assert_allclose(rows[0][1], EMB.embed_one("Draw it"), rtol=1e-6)
    assert {r.id for r, _ in store.list_bullets(ScopeFilter(""))} == {"b1", "b2", "x1"}
    with store.transaction() as b:
        b.delete(store.get("b1"), op="prune")
    assert [r.id for r, _ in store.list_bullets(ScopeFilter("", "sam", ""))] == ["b2"]


def test_space_version_changes_with_every_write_to_the_space(store, backend):
    assert store.space_version(SAM) == 0
    add(store, rec("b1", "Draw it"))
    v1 = store.space_version(SAM)
    assert v1 != 0
    add(store, rec("a1", "Other", ANA))
    assert store.space_version(SAM) == v1  # another space's write
    store.touch([store.get("b1")])
    store.flush()
    assert store.space_version(SAM) == v1  # retrieval bookkeeping is not a write
    other = open_store(backend.target)  # a second writer
    with other.transaction() as b:
        b.update(other.get("b1").copy(helpful=3), None, old_text="Draw it", op="reinforce")
    other.close()
    assert store.space_version(SAM) != v1


def test_batch_reads_see_the_transactions_own_writes(store):
    add(store, rec("b1", "Draw it"))
    with store.transaction() as b:
        v_before = b.space_version(SAM)
        b.add(rec("b2", "Use pizza"), EMB.embed_one("Use pizza"))
        got = b.get_many(["b1", "b2", "nope"])
        assert set(got) == {"b1", "b2"}
        assert [r.id for r, _ in b.list_bullets(ScopeFilter("", "sam", ""))] == ["b1", "b2"]
        assert b.space_version(SAM) != v_before
        b.delete(got["b1"])
        assert b.get_many(["b1"])["b1"].status is Status.DELETED  # any status is returned


def test_advance_clock_inside_a_transaction_counts_buffered_retrievals(store):
    add(store, rec("b1", "Draw it"))
    store.touch([store.get("b1")])
    store.touch([store.get("b1")])
    assert store.access_clock(SAM) == 2
    with store.transaction() as b:
        assert b.advance_clock(SAM, 0) == 2  # the buffer was flushed first
        assert b.advance_clock(SAM) == 3
        assert b.advance_clock(SAM, 2) == 5
    assert store.access_clock(SAM) == 5


def test_a_failed_transaction_keeps_neither_change_nor_clock(store):
    add(store, rec("b1", "Draw it"))
    events = len(store.events())
    with pytest.raises(RuntimeError), store.transaction() as b:
        b.advance_clock(SAM)
        b.update(store.get("b1").copy(helpful=9), None, old_text="Draw it", op="merge")
        raise RuntimeError("boom")
    assert store.access_clock(SAM) == 0
    assert store.get("b1").helpful == 0
    assert len(store.events()) == events


def test_each_buffered_retrieval_stamps_its_own_clock_value(store, backend):
    """Decay counts the accesses since a memory was last touched, so a memory touched
    by the first of three buffered retrievals must be stamped 1, not 3."""
    add(store, rec("a", "Draw it"), rec("b", "Use pizza"))
    store.touch([store.get("a")])  # clock 1
    store.touch([store.get("b")])  # clock 2
    store.touch([store.get("b")])  # clock 3
    store.close()
    again = open_store(backend.target)
    try:
        assert again.access_clock(SAM) == 3
        assert again.get("a").last_access["semantic"] == 1
        assert again.get("b").last_access["semantic"] == 3
        assert again.get("b").access_count == 2
    finally:
        again.close()


def test_a_flush_never_moves_a_newer_touch_back(store):
    add(store, rec("a", "Draw it"))
    store.touch([store.get("a")])  # buffered: a at clock 1
    with store.transaction() as b:  # flushes, then a reinforcement at clock 2
        clock = b.advance_clock(SAM)
        r = b.get_many(["a"])["a"]
        b.update(r.copy(last_access={**r.last_access, "semantic": clock}), None, old_text=r.text, op="reinforce")
    assert store.get("a").last_access["semantic"] == 2


def test_merge_and_prune_events_are_written_with_their_change(store):
    add(store, rec("a", "Draw it"), rec("b", "Draw it!"))
    with store.transaction() as b:
        a, bb = b.get_many(["a", "b"]).values()
        b.update(a.copy(helpful=2), None, old_text=a.text, op="merge", payload={"merged": "b"})
        b.update(bb.copy(status=Status.DELETED, lineage={"merged_into": "a"}), None, old_text=bb.text, op="merge")
    with store.transaction() as b:
        b.delete(store.get("a"), op="prune", payload={"score": 0.1})
    assert [e.op for e in store.history("a")] == ["add", "merge", "prune"]
    assert [e.op for e in store.history("b")] == ["add", "merge"]
    assert store.get("b").lineage == {"merged_into": "a"}
    assert store.list_bullets(ScopeFilter("", "sam", "")) == []
    with pytest.raises(StoreError), store.transaction() as b:
        b.delete(store.get("a"), op="prune")  # already gone
