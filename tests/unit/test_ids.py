"""Memory ids: unique, UUID-shaped, and made in a row they sort side by side.

The store's id index and the event log's per-memory index are keyed on them; ids
scattered at random made every batch write a page per row in each (see
bench/RESULTS.md, "Add cost as the scope grows").
"""

from __future__ import annotations

import multiprocessing as mp
import uuid

from memorist.model import new_id


def test_ids_are_unique_version_4_uuids() -> None:
    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:100]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4


def test_ids_made_in_a_row_sort_together_and_keep_distinct_prefixes() -> None:
    ids = [new_id() for _ in range(1000)]
    heads = [int(i[:8], 16) for i in ids]
    # Consecutive, unless the run was re-seeded or wrapped in between (at most once here).
    breaks = sum(1 for a, b in zip(heads, heads[1:], strict=False) if b != (a + 1) & 0xFFFFFFFF)
    assert breaks <= 1
    assert len({i[:8] for i in ids}) == len(ids)  # tables print 8 characters
    # The rest is random: no two ids share it.
    assert len({i[9:] for i in ids}) == len(ids)


def _child(out: mp.Queue) -> None:
    out.put(new_id())


def test_a_forked_child_starts_a_run_of_its_own() -> None:
    parent = new_id()
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(out,))
    proc.start()
    child = out.get(timeout=30)
    proc.join(30)
    # Without re-seeding, the child would continue the parent's run right after it.
    assert int(child[:8], 16) != (int(parent[:8], 16) + 1) & 0xFFFFFFFF
