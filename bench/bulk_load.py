"""Searches right after a bulk load: no search may wait behind what builds in the background.

Run:  python bench/bulk_load.py [--size 100000] [--searches 200] [--clients 4]
                                [--small 10000] [--embedder hashing] [--modes quiet,live]
                                [--backend sqlite|postgresql]

For each mode, a fresh SQLite store, one user's scope filled with ``--size``
memories by ``add(list_of_messages, infer=False)`` in calls of 1,000 (sentences
sampled from LoCoMo's dialog vocabulary, the hashing embedder), then at once
``--searches`` searches (LoCoMo questions, ``limit=10``) from ``--clients`` threads.
Each search is timed from its own call to its return, the first one included:

- ``quiet``: no search during the load (the scope's first search comes after it);
- ``live``: a search after every 10th call of the load, as a live service sees;
- ``reopened`` (not run by default): the quiet load, then the store closed and opened
  again, as another process (a CLI call, a second worker, a restart) sees it: its
  first search opens the scope's index file, written when the store closed;
- ``reopened-no-files`` (SQLite, not run by default): the same with index files off
  (``SQLiteStore(path, index_files=False)``): the first search reads the scope from
  the store.

``--backend postgresql`` runs the same on a PostgreSQL server started for the run
(pgserver, pgvector).

Then ``--small`` memories in a fresh store, and ``--searches`` searches one after
another (p50 of the whole ``search()`` call, query embedding included).

Prints one Markdown row per mode: load rate, search p50 / p95 / max in ms. Run it
against another checkout with ``PYTHONPATH=<checkout>/src`` to compare two commits
in one sitting.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import corpus_model, pct, peak_rss_mb, sentence, store_at  # noqa: E402

import memorist  # noqa: E402
from memorist import Memory  # noqa: E402
from memorist.store.sqlite import SQLiteStore  # noqa: E402

BATCH = 1000


def load(memory: Memory, user: str, texts: list[str], questions: list[str], *, live: bool) -> float:
    """Batched adds; with ``live`` a search after every 10th call. Seconds taken."""
    began = time.perf_counter()
    for n, start in enumerate(range(0, len(texts), BATCH)):
        memory.add([{"role": "user", "content": t} for t in texts[start : start + BATCH]], user_id=user, infer=False)
        if live and n % 10 == 0:
            memory.search(questions[n % len(questions)], user_id=user, limit=10)
    return time.perf_counter() - began


def burst(memory: Memory, user: str, questions: list[str], searches: int, clients: int, **search: Any) -> list[float]:
    """``searches`` searches from ``clients`` threads started together (``search``:
    more arguments of each, such as ``filters``); each one's ms."""
    todo = list(enumerate(questions[i % len(questions)] for i in range(searches)))
    lock = threading.Lock()
    times: list[float] = []
    start = threading.Barrier(clients)

    def client() -> None:
        start.wait()
        while True:
            with lock:
                if not todo:
                    return
                _, q = todo.pop(0)
            t = time.perf_counter()
            memory.search(q, user_id=user, limit=10, **search)
            elapsed = (time.perf_counter() - t) * 1000
            with lock:
                times.append(elapsed)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return times


def one_by_one(memory: Memory, user: str, questions: list[str], searches: int) -> list[float]:
    out = []
    for i in range(searches):
        t = time.perf_counter()
        memory.search(questions[i % len(questions)], user_id=user, limit=10)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--modes", default="quiet,live")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    args = parser.parse_args()
    words, weights, questions = corpus_model()
    rng = random.Random(args.seed)
    texts = [sentence(rng, words, weights) for _ in range(args.size)]
    rng.shuffle(questions)
    print(f"# bench/bulk_load.py: memorist from {Path(memorist.__file__).resolve().parents[1]}, "
          f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"embedder {args.embedder}, {args.clients} client threads, {args.backend}", file=sys.stderr)
    print("| mode | memories | load adds/s | searches | p50 ms | p95 ms | max ms | first done ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode in [m for m in args.modes.split(",") if m]:
        with store_at(args.backend, "bulk") as where:
            memory = Memory(where, embedder=args.embedder)
            try:
                secs = load(memory, "bulk", texts, questions, live=mode == "live")
                if mode.startswith("reopened"):
                    memory.close()
                    store = SQLiteStore(where, index_files=False) if mode == "reopened-no-files" else None
                    memory = Memory(where, embedder=args.embedder, store=store)
                times = burst(memory, "bulk", questions, args.searches, args.clients)
            finally:
                memory.close()
        print(f"| {mode} | {args.size:,} | {args.size / secs:,.0f} | {len(times)} | {statistics.median(times):.2f} | "
              f"{pct(times, 0.95):.2f} | {max(times):.2f} | {times[0]:.2f} |", flush=True)
    if args.small:
        with store_at(args.backend, "small") as where:
            memory = Memory(where, embedder=args.embedder)
            try:
                secs = load(memory, "bulk", texts[: args.small], questions, live=False)
                times = one_by_one(memory, "bulk", questions, args.searches)
            finally:
                memory.close()
        print(f"| one by one | {args.small:,} | {args.small / secs:,.0f} | {len(times)} | {statistics.median(times):.2f} | "
              f"{pct(times, 0.95):.2f} | {max(times):.2f} | {times[0]:.2f} |", flush=True)
    print(f"\npeak RSS {peak_rss_mb():.0f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()
