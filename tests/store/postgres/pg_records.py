"""Memories for the tests of the PostgreSQL store's in-process indexes
(test_pg_text.py, test_pg_vectors.py): records, their batched add, and a scope of
runs, times, expiries and speakers to rank; and a pool kept busy by other callers
(:class:`HeldConnections`, test_pg_open.py, test_pg_store.py)."""

from __future__ import annotations

import threading
import time

from memorist import HashingEmbedder
from memorist.model import MemoryRecord, Scope
from memorist.policies.text import content_hash

EMB = HashingEmbedder()
ALEX = Scope(user_id="alex")


def record(mid: str, text: str, scope: Scope = ALEX, **kw) -> MemoryRecord:
    kw.setdefault("created_at", time.time())
    return MemoryRecord(id=mid, scope=scope, text=text, content_hash=content_hash(text), search_text=text, **kw)


def add(store, *records: MemoryRecord) -> None:
    """Write ``records`` in one transaction, each with its hashing vector."""
    with store.transaction() as b:
        for r in records:
            b.add(r, EMB.embed_one(r.text))


def mixed(texts: list[str], now: float) -> list[MemoryRecord]:
    """Alex's memories of ``texts``, a second apart up to ``now`` - 1000 + n: every
    third in run ``r1``, every seventh expired, said by Alex or Bo in turn."""
    return [
        record(
            f"m{i}",
            text,
            Scope(user_id="alex", run_id="r1") if i % 3 == 0 else ALEX,
            created_at=now - 1000 + i,
            valid_to=now - 1 if i % 7 == 0 else None,
            metadata={"name": "Alex" if i % 2 else "Bo"},
        )
        for i, text in enumerate(texts)
    ]


class HeldConnections:
    """``n`` of ``store``'s pooled connections, each held by a thread of its own (other
    callers keeping the pool busy) from construction until :meth:`release`."""

    def __init__(self, store, n: int = 1) -> None:
        self.freed = threading.Event()
        taken = threading.Barrier(n + 1)

        def hold() -> None:
            with store.connection():
                taken.wait(10)
                self.freed.wait(30)

        self.threads = [threading.Thread(target=hold) for _ in range(n)]
        for t in self.threads:
            t.start()
        taken.wait(10)

    def release(self, after: float = 0.0) -> None:
        """Give the connections back, now or ``after`` seconds from now."""
        if after:
            threading.Timer(after, self.freed.set).start()
        else:
            self.freed.set()

    def join(self) -> None:
        for t in self.threads:
            t.join(30)
