"""A playbook's dedup merge is undone by memory.rollback(seq of its last event): both
bullets come back as they were, on both backends."""

from __future__ import annotations

from ace_helpers import MappedEmbedder

from memorist import Playbook

at, axis = MappedEmbedder.at, MappedEmbedder.axis


def learn(pb: Playbook, *lessons: str, conv: str) -> dict:
    items = [{"content": x, "type": "strategy"} for x in lessons]
    return pb.turn("sam", conv).learn(question="q", lessons=items, topic="fractions")


def test_a_cleanup_merge_is_rolled_back_exactly(embedder, mem) -> None:
    loose = Playbook(mem, reinforce_threshold=0.99, dedup_threshold=0.99)
    embedder.mapping.update({"Old lesson": axis(0), "New lesson": at(0.95)})
    learn(loose, "Old lesson", conv="c1")
    learn(loose, "New lesson", conv="c2")
    before = {b.id: (b.content, b.helpful, b.harmful, b.tags, b.created_at) for b in loose.bullets("sam")}
    assert len(before) == 2
    assert loose.cleanup("sam")["merged"] == 1
    assert len(loose.bullets("sam")) == 1
    (merge,) = [e for e in mem.store.events(None, ops=["merge"]) if "undo" in e.payload]
    result = mem.rollback(merge.seq)
    assert sorted(result["restored"]) == sorted(before)
    assert {b.id: (b.content, b.helpful, b.harmful, b.tags, b.created_at) for b in loose.bullets("sam")} == before
