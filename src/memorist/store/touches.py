"""Retrieval bookkeeping: the access clock and per-memory touches, buffered.

Every search advances its space's access clock by one and touches each memory it
returned: the memory's access count grows and its class component (semantic,
episodic or procedural) records the clock value of that very retrieval, which is
what the decay formula needs (accesses *since* the last touch). Writing that on every
search would cost more than the search, so a backend buffers retrievals here and
writes them with its next write transaction (or every few dozen searches; that write
need not reach the disk before the search returns, as what is still buffered would
not survive a crash either).

This module holds the stamping rule, so that no backend re-invents it: a backend
asks :meth:`TouchBuffer.stamps` what to write once it knows the space's clock after
adding the buffered retrievals, and :meth:`TouchBuffer.log_entries` for the
``retrieve`` events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from ..model import MemoryRecord
from .codec import CLASS_NAMES, dumps

#: Buffered retrievals after which a backend writes them without waiting for a write.
FLUSH_EVERY = 32
#: Buffered retrievals after which a backend writes them even if it must wait for
#: another writer for that (below it, a search does not wait: they stay buffered),
#: so that what the buffer holds, and what a crash loses, stays bounded.
FLUSH_WAIT = 32 * FLUSH_EVERY


@dataclass(slots=True)
class TouchBuffer:
    """Retrievals recorded but not yet written, by space (any hashable space key)."""

    # space -> memory id -> (class, touches, offset of its last retrieval in the space)
    _touched: dict[Hashable, dict[str, tuple[str, int, int]]] = field(default_factory=dict)
    _counts: dict[Hashable, int] = field(default_factory=dict)  # space -> buffered retrievals
    _events: list[tuple[float, Hashable, str, list[str]]] = field(default_factory=list)

    def record(self, space: Hashable, records: Sequence[MemoryRecord], query: str) -> None:
        """One retrieval in ``space`` that returned ``records``."""
        self._counts[space] = offset = self._counts.get(space, 0) + 1
        touched = self._touched.setdefault(space, {})
        for r in records:
            cls, count, _ = touched.get(r.id, (r.memory_class.value, 0, 0))
            # ``offset``: this retrieval's place among the space's buffered ones, so
            # the flush can stamp the clock value of this very retrieval.
            touched[r.id] = (cls, count + 1, offset)
        self._events.append((time.time(), space, query, [r.id for r in records]))

    def __len__(self) -> int:
        """Buffered retrievals, all spaces together."""
        return len(self._events)

    def uses(self, memory_id: str) -> int:
        """Buffered retrievals that returned ``memory_id``: what its stored
        ``access_count`` does not count yet."""
        return sum(touched[memory_id][1] for touched in self._touched.values() if memory_id in touched)

    def pending(self, space: Hashable) -> int:
        """Buffered retrievals of ``space``: what its stored clock does not count yet."""
        return self._counts.get(space, 0)

    def spaces(self) -> dict[Hashable, int]:
        """Each space with buffered retrievals and how far they advance its clock."""
        return dict(self._counts)

    def stamps(self, space: Hashable, clock: int) -> dict[str, list[tuple[int, int, str]]]:
        """What to write for ``space`` once its clock reads ``clock`` (after adding
        :meth:`pending`): per class column, ``(touches, stamp, memory_id)`` rows.

        The stamp is the clock value after the retrieval that touched the memory
        last. A backend writes ``access_count += touches`` and
        ``last_access_<class> = max(last_access_<class>, stamp)``: a touch written
        since (a reinforcement) is never moved back.
        """
        before = clock - self._counts.get(space, 0)  # the clock before the first buffered retrieval
        rows: dict[str, list[tuple[int, int, str]]] = {c: [] for c in CLASS_NAMES}
        for memory_id, (cls, count, offset) in self._touched.get(space, {}).items():
            rows[cls].append((count, before + offset, memory_id))
        return rows

    def log_entries(self, stored: Callable[[list[str]], set[str]] | None = None) -> list[tuple[float, Hashable, str]]:
        """``(ts, space, payload)`` of each buffered retrieval's ``retrieve`` event.

        A retrieval that cannot be logged (a query no encoder accepts) must never
        fail the write it rides with, and so every later one: its entry is dropped;
        its touches still count.

        ``stored(ids)``: of ``ids``, those the store still holds. A retrieval none of
        whose memories it holds is not logged: an erasure (in another process, after
        the search) took them, and the query is the erased owner's words.
        """
        kept = None if stored is None else stored(sorted({i for *_, ids in self._events for i in ids}))
        entries = []
        for ts, space, query, ids in self._events:
            if kept is not None and not kept.intersection(ids):
                continue
            try:
                payload = dumps({"query": query, "ids": ids})
                payload.encode("utf-8")
            except (TypeError, ValueError, RecursionError):
                continue
            entries.append((ts, space, payload))
        return entries

    def absorb(self, later: TouchBuffer) -> None:
        """Add the retrievals of ``later``, all made after this buffer's own (a flush
        that did not commit puts its buffer back in front of what was buffered since)."""
        for space, count in later._counts.items():
            before = self._counts.get(space, 0)
            self._counts[space] = before + count
            touched = self._touched.setdefault(space, {})
            for memory_id, (cls, n, offset) in later._touched.get(space, {}).items():
                # The class of its first retrieval, as record() keeps it.
                cls, touches = touched[memory_id][:2] if memory_id in touched else (cls, 0)
                touched[memory_id] = (cls, touches + n, before + offset)
        self._events.extend(later._events)

    def drop(self, spaces: Callable[[Hashable], bool]) -> None:
        """Forget the retrievals of every space ``spaces(space)`` is true of (an erased
        owner's, which no flush may log)."""
        for space in [s for s in self._counts if spaces(s)]:
            del self._counts[space]
            self._touched.pop(space, None)
        self._events = [e for e in self._events if e[1] in self._counts]

    def taken(self, flushed: int) -> None:
        """Forget what a committed flush wrote (``flushed``: :meth:`__len__` then)."""
        if flushed:
            self.clear()

    def clear(self) -> None:
        self._touched.clear()
        self._counts.clear()
        self._events.clear()
