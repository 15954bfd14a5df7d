"""Calls and time of one search at 10,000 memories (hashing embedder): ten bulk adds of
1,000 into one scope, 50 warm-up searches, the p50 of 200 timed searches, then the number
of Python calls of 150 more under cProfile and where their time goes.

    PYTHONPATH=<checkout>/src python bench/search_calls.py

Two checkouts give the same number of calls when a search does the same work; the p50
says how long it took in that sitting.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import random
import statistics
import tempfile
import time

from memorist import Memory

WORDS = ("tea hiking painting sea oslo fractions denominator sister stamps violin garden river "
         "mountain coffee book music dog cat train city").split()


def main() -> None:
    rng = random.Random(3)
    memory = Memory(os.path.join(tempfile.mkdtemp(), "calls.db"), embedder="hashing")
    for batch in range(10):
        memory.add([{"role": "user", "content": " ".join(rng.choices(WORDS, k=8)) + f" {batch} {i}"} for i in range(1000)],
                   user_id="u", infer=False)
    queries = [" ".join(rng.choices(WORDS, k=3)) for _ in range(400)]
    for query in queries[:50]:
        memory.search(query, user_id="u", limit=10)
    times = []
    for query in queries[50:250]:
        start = time.perf_counter()
        memory.search(query, user_id="u", limit=10)
        times.append(time.perf_counter() - start)
    print(f"search p50 {statistics.median(times) * 1000:.3f} ms (200 searches, 10,000 memories)")
    profile = cProfile.Profile()
    profile.enable()
    for query in queries[250:]:
        memory.search(query, user_id="u", limit=10)
    profile.disable()
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    print(f"calls of 150 searches: {stats.total_calls}")
    stats.sort_stats("tottime").print_stats(12)
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))
    memory.close()


if __name__ == "__main__":
    main()
