"""Why batched adds slow down as a scope grows: SQLite B-tree inserts at random keys.

Run:  python bench/btree_keys.py [--sizes 1000,100000,1000000] [--repeats 7]

Three tables shaped like Memorist's, in WAL mode with ``synchronous=FULL`` as the store
runs: ``m(id TEXT UNIQUE, h, s, t)`` with an index on ``(s, h)`` (the content-hash
lookup) and ``e(seq, mid, p)`` with an index on ``(mid, seq)`` (a memory's history).
For each size, a store is filled in transactions of 1,000 rows, then ``--repeats``
more transactions of 1,000 are timed, taking turns between the stores. Ids are UUID4
(random, as Memorist's memory ids) or time-ordered (UUIDv7-like: a millisecond clock,
then random bits); content hashes are always random.

A random key lands on a random leaf page: once an index has more leaves than a batch
has rows, each row dirties its own page, which the commit writes to the WAL. With
time-ordered ids only the hash index pays that. bench/RESULTS.md has the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable

BATCH = 1000


def time_ordered_id() -> str:
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def open_store(path: str, new_id: Callable[[], str], rows: int) -> Callable[[], None]:
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.executescript(
        "CREATE TABLE m(id TEXT NOT NULL UNIQUE, h TEXT, s INT, t TEXT);"
        "CREATE INDEX mh ON m(s, h);"
        "CREATE TABLE e(seq INTEGER PRIMARY KEY AUTOINCREMENT, mid TEXT, p TEXT);"
        "CREATE INDEX em ON e(mid, seq);"
    )

    def batch() -> None:
        conn.execute("BEGIN IMMEDIATE")
        for _ in range(BATCH):
            mid = new_id()
            conn.execute("INSERT INTO m VALUES (?, ?, 1, ?)", (mid, uuid.uuid4().hex, "x" * 150))
            conn.execute("INSERT INTO e (mid, p) VALUES (?, '{}')", (mid,))
        conn.execute("COMMIT")

    for _ in range(rows // BATCH):
        batch()
    return batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    ids = {"UUID4": lambda: str(uuid.uuid4()), "time-ordered": time_ordered_id}
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        stores = {(name, n): open_store(os.path.join(tmp, f"{name}-{n}.db"), fn, n) for name, fn in ids.items() for n in sizes}
        times: dict[tuple[str, int], list[float]] = {key: [] for key in stores}
        for _ in range(args.repeats):
            for key, batch in stores.items():
                t0 = time.perf_counter()
                batch()
                times[key].append(time.perf_counter() - t0)
    print("| ids | " + " | ".join(f"at {n:,}" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name in ids:
        cells = [f"{statistics.median(times[(name, n)]) * 1000:.0f} ms" for n in sizes]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
