"""Thread pools: a whole MiniLM search with its query on one torch thread or on all.

Run:  python bench/threads.py [--size 10000] [--queries 100]

torch (embedding the query) and numpy's OpenBLAS (the vector product of the
search) each keep a pool of worker threads that spin for a while after their work.
On a 2-core machine the pools then fight for the second core. This script builds
one user's store of ``--size`` memories with the MiniLM embedder and measures the
whole ``search()`` (query embedding included, nothing cached) two ways, alternating
query by query so that both see the same machine:

- ``embed_query``: what Engram does, the query on one torch thread;
- ``embed_one``: the query on all of torch's threads, as a stored text would be.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time

from core import corpus_model, sentence

from engram import Memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    rng = random.Random(7)
    words, weights, questions = corpus_model()
    texts = [sentence(rng, words, weights) for _ in range(args.size)]
    queries = rng.sample(questions, args.queries)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"command: python bench/threads.py {' '.join(sys.argv[1:])}")
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(os.path.join(tmp, "threads.db"), embedder="sentence-transformers")
        for start in range(0, len(texts), 1000):
            memory.add([{"role": "user", "content": t} for t in texts[start : start + 1000]], user_id="bench", infer=False)
        embedder = memory.embedder
        ways = {"embed_query (one torch thread)": embedder.embed_query, "embed_one (all torch threads)": embedder.embed_one}
        memory.search(queries[0], user_id="bench")  # load the index
        times: dict[str, list[float]] = {name: [] for name in ways}
        for i, query in enumerate(queries):
            order = list(ways.items()) if i % 2 else list(reversed(ways.items()))
            for name, embed in order:
                embedder.embed_query = embed  # type: ignore[method-assign]
                memory._query_vectors.clear()
                t0 = time.perf_counter()
                memory.search(query, user_id="bench", limit=5)
                times[name].append((time.perf_counter() - t0) * 1000)
        memory.close()
    print(f"| query embedding | whole search p50 ms ({args.size:,} memories, {args.queries} queries) |")
    print("|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.1f} |")


if __name__ == "__main__":
    main()
