"""The retrieval buffer: a flush that did not commit puts what it took back in front
of what was buffered since, as if the two had never been split."""

from __future__ import annotations

from memorist.model import MemoryClass, MemoryRecord, Scope
from memorist.store.touches import TouchBuffer

ALEX, BOB = ("", "alex", ""), ("", "bob", "")


def rec(mid: str, cls: MemoryClass = MemoryClass.SEMANTIC) -> MemoryRecord:
    return MemoryRecord(id=mid, scope=Scope(user_id="alex"), text=mid, created_at=0.0, memory_class=cls)


RETRIEVALS = [
    (ALEX, [rec("a")], "sushi"),
    (ALEX, [rec("a"), rec("b", MemoryClass.EPISODIC)], "food"),
    (BOB, [rec("c")], "chess"),
    (ALEX, [rec("b", MemoryClass.EPISODIC)], "trips"),
    (BOB, [rec("c"), rec("d")], "games"),
    (ALEX, [rec("a")], "again"),
    (ALEX, [rec("b", MemoryClass.SEMANTIC)], "reclassed"),  # stamped in its first class's column
]


def buffered(retrievals) -> TouchBuffer:
    buffer = TouchBuffer()
    for space, records, query in retrievals:
        buffer.record(space, records, query)
    return buffer


def written(buffer: TouchBuffer, clocks: dict) -> tuple:
    """What a flush writes when each space's clock reads ``clocks[space]`` before it."""
    counts = buffer.spaces()
    stamps = {space: buffer.stamps(space, clocks[space] + n) for space, n in counts.items()}
    return counts, stamps, [(space, payload) for _, space, payload in buffer.log_entries()]


def test_a_buffer_put_back_writes_what_one_buffer_would_have():
    for split in range(len(RETRIEVALS) + 1):
        whole = buffered(RETRIEVALS)
        taken, since = buffered(RETRIEVALS[:split]), buffered(RETRIEVALS[split:])
        taken.absorb(since)
        assert written(taken, {ALEX: 7, BOB: 0}) == written(whole, {ALEX: 7, BOB: 0}), split
        assert len(taken) == len(whole)
        for mid in "abcd":
            assert taken.uses(mid) == whole.uses(mid)
        for space in (ALEX, BOB):
            assert taken.pending(space) == whole.pending(space)


def test_the_last_retrieval_of_a_memory_gives_its_stamp():
    taken = buffered(RETRIEVALS[:2])  # a is retrieved by the 1st and 2nd of ALEX's, b by the 2nd
    taken.absorb(buffered(RETRIEVALS[2:]))  # a by the 4th, b by the 3rd and 5th
    _, stamps, _ = written(taken, {ALEX: 10, BOB: 0})
    assert sorted(stamps[ALEX]["semantic"]) == [(3, 14, "a")]  # three touches, the clock after the 4th
    assert sorted(stamps[ALEX]["episodic"]) == [(3, 15, "b")]


def test_dropping_a_space_leaves_the_others_as_if_it_was_never_there():
    kept = buffered(RETRIEVALS)
    kept.drop(lambda space: space == BOB)
    alone = buffered([r for r in RETRIEVALS if r[0] != BOB])
    assert written(kept, {ALEX: 3}) == written(alone, {ALEX: 3})
    assert (kept.pending(BOB), kept.uses("c"), len(kept)) == (0, 0, len(alone))
