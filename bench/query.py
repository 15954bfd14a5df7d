"""A search query on each runtime of the embedding model: the embedding alone and the whole search.

Run:  python bench/query.py [--size 10000] [--queries 300] [--rounds 2] [--runtimes onnx,torch]

Builds one user's store of ``--size`` memories with MiniLM (sentences sampled from
LoCoMo's word frequencies, as bench/core.py), then measures each runtime of the
bundled model (``MEMORIST_EMBED_RUNTIME``) in a process of its own, so that one
runtime's thread pools never run beside the other's. The runtimes take turns,
``--rounds`` times, so that both see the same machine. Each process, after a
warm-up, takes ``--queries`` LoCoMo questions and, for each one:

- embeds it alone (``Embedder.embed_query``, what a search does first);
- runs the whole ``search()`` with nothing cached (the embedding again, then the
  engine: vector and BM25 retrieval, fusion, reads and ranking).

Both runtimes give the same vectors (the ONNX export is checked against torch's),
so one store serves both. Prints p50 and p95 of each, per round.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from core import corpus_model, pct, sentence  # noqa: E402


def measure(db: str, queries: list[str]) -> dict[str, object]:
    """In the child: time ``queries`` against the store ``db``."""
    from memorist import Memory

    memory = Memory(db, embedder="sentence-transformers")
    embedder = memory.embedder
    for query in queries[:20]:  # warm-up: the model, the index, the thread pools
        memory.search(query, user_id="bench", limit=5)
    embed_ms, search_ms = [], []
    for query in queries:
        t0 = time.perf_counter()
        embedder.embed_query(query)
        embed_ms.append((time.perf_counter() - t0) * 1000)
        memory._query_vectors.clear()
        t0 = time.perf_counter()
        memory.search(query, user_id="bench", limit=5)
        search_ms.append((time.perf_counter() - t0) * 1000)
    runtime = getattr(embedder, "runtime", "?")
    memory.close()
    return {"runtime": runtime, "embed_ms": embed_ms, "search_ms": search_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runtimes", default="onnx,torch", help="values of MEMORIST_EMBED_RUNTIME, taking turns")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # db path; queries as JSON on stdin
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, json.load(sys.stdin))))
        return

    rng = random.Random(7)
    words, weights, questions = corpus_model()
    queries = rng.sample(questions, min(args.queries, len(questions)))
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"command: python bench/query.py {' '.join(sys.argv[1:])}")
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "query.db")
        from memorist import Memory

        memory = Memory(db, embedder="sentence-transformers")
        t0 = time.perf_counter()
        for start in range(0, args.size, 1000):
            texts = [sentence(rng, words, weights) for _ in range(min(1000, args.size - start))]
            memory.add([{"role": "user", "content": t} for t in texts], user_id="bench", infer=False)
        print(f"built {args.size:,} memories in {time.perf_counter() - t0:.0f} s ({memory.embedder.runtime})", flush=True)
        memory.close()
        rows = []
        for round_ in range(1, args.rounds + 1):
            for runtime in runtimes:
                env = {**os.environ, "MEMORIST_EMBED_RUNTIME": runtime, "HF_HUB_OFFLINE": "1"}
                child = subprocess.run(
                    [sys.executable, __file__, "--child", db],
                    input=json.dumps(queries), capture_output=True, text=True, env=env,
                )
                if child.returncode:
                    raise SystemExit(f"the {runtime} process failed:\n{child.stderr}")
                result = json.loads(child.stdout.strip().splitlines()[-1])
                rows.append((round_, runtime, result))
                print(f"  round {round_}, {runtime}: done", flush=True)
    print()
    print(f"| round | MEMORIST_EMBED_RUNTIME (in use) | query embedding p50 / p95, ms | whole search p50 / p95, ms ({args.size:,} memories) |")
    print("|---|---|---|---|")
    for round_, runtime, result in rows:
        e, s = result["embed_ms"], result["search_ms"]
        print(
            f"| {round_} | {runtime} ({result['runtime']}) | {statistics.median(e):.2f} / {pct(e, 0.95):.2f} "
            f"| {statistics.median(s):.2f} / {pct(s, 0.95):.2f} |"
        )


if __name__ == "__main__":
    main()
