"""Core benchmark: add throughput and search latency at 1k, 10k and 100k memories.

Run:  python bench/core.py [--embedder minilm|hashing|both] [--sizes 1000,10000,100000]

Memories are sentences sampled from the word frequencies of LoCoMo's dialogs
(../shared/data), queries are LoCoMo questions. For each embedder and size N, in
one user's scope of a fresh store:
- the embedder's own batched throughput on the same texts (the ceiling);
- bulk add: ``add(list_of_messages, infer=False)`` in calls of 1,000 messages, and
  the share of that time spent inside the embedder (bulk rate / embedder rate,
  measured in the same calls);
- single add: the rate of 200 one-message ``add(..., infer=False)`` calls made
  once the store holds N memories (is add cost flat with store size?);
- search: p50/p95 over 200 queries of the whole ``search()`` (query embedding
  included), of the query embedding alone, and of the engine alone (the same
  searches back to back with the query vectors cached: retrieval, fusion, record
  reads, ranking, bookkeeping);
- peak RSS of the process.
Figures are printed as a Markdown table; paste them into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from memorist import Memory
from memorist.embed import resolve_embedder

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo_dev.json"


def corpus_model(path: Path = DATA) -> tuple[list[str], list[float], list[str]]:
    """Word frequencies and questions from real conversations (LoCoMo's dev split).

    Memories are sampled from the unigram distribution of the dialog text, so BM25
    sees a natural, Zipf-shaped vocabulary; queries are the data set's questions.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    counts: Counter[str] = Counter()
    questions: list[str] = []
    for conv in data:
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    counts.update(re.findall(r"[A-Za-z']+", turn["text"]))
        questions += [qa["question"] for qa in conv["qa"]]
    words, freq = zip(*counts.items(), strict=True)
    return list(words), [float(f) for f in freq], questions


def sentence(rng: random.Random, words: list[str], weights: list[float]) -> str:
    return " ".join(rng.choices(words, weights, k=rng.randint(6, 20))).capitalize() + "."


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


@contextlib.contextmanager
def store_at(backend: str, name: str) -> Iterator[str]:
    """Where a fresh store lives for one run: a SQLite file in a temporary folder, or
    the URL of a PostgreSQL server started there (pgserver), stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="memorist-bench-") as tmp:
        if backend == "sqlite":
            yield str(Path(tmp) / f"{name}.db")
            return
        import pgserver

        server = pgserver.get_server(tmp, cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(embedder_spec: str, size: int, rng: random.Random) -> dict[str, float]:
    embedder = resolve_embedder(embedder_spec)
    words, weights, questions = corpus_model()
    texts = [sentence(rng, words, weights) for _ in range(size)]
    # Warm the model, then measure the embedder's own batched rate on a sample.
    embedder.embed(texts[:64])
    sample = texts[: min(size, 2000)]
    t0 = time.perf_counter()
    embedder.embed(sample)
    embed_rate = len(sample) / (time.perf_counter() - t0)

    # Time spent inside the embedder during the bulk adds: on a shared machine the
    # embedder's speed drifts between two separate measurements, so the share of
    # add() time that is embedding, measured in the same calls, is the robust ratio.
    inner = {"seconds": 0.0}
    embed = embedder.embed

    def timed_embed(batch):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return embed(batch)
        finally:
            inner["seconds"] += time.perf_counter() - t

    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(os.path.join(tmp, "bench.db"), embedder=embedder)
        embedder.embed = timed_embed  # type: ignore[method-assign]
        t0 = time.perf_counter()
        for start in range(0, size, 1000):
            chunk = [{"role": "user", "content": t} for t in texts[start : start + 1000]]
            memory.add(chunk, user_id="bench", infer=False)
        bulk_seconds = time.perf_counter() - t0
        del embedder.embed
        bulk_rate = size / bulk_seconds
        embed_share = inner["seconds"] / bulk_seconds

        singles = [sentence(rng, words, weights) for _ in range(200)]
        t0 = time.perf_counter()
        for text in singles:
            memory.add(text, user_id="bench", infer=False)
        single_rate = len(singles) / (time.perf_counter() - t0)

        queries = rng.sample(questions, 200)
        memory.search(queries[0], user_id="bench")  # load the index once
        # Whole search, query embedding included (nothing cached).
        total_ms = []
        for q in queries:
            memory._query_vectors.clear()
            t0 = time.perf_counter()
            memory.search(q, user_id="bench", limit=5)
            total_ms.append((time.perf_counter() - t0) * 1000)
        # The embedder alone on the same queries.
        embed_ms = []
        for q in queries:
            t0 = time.perf_counter()
            embedder.embed_query(q)
            embed_ms.append((time.perf_counter() - t0) * 1000)
        # The engine alone: query vectors cached, searches back to back.
        for q in queries:
            memory._query_vector(q)
        engine_ms = []
        for q in queries:
            t0 = time.perf_counter()
            memory.search(q, user_id="bench", limit=5)
            engine_ms.append((time.perf_counter() - t0) * 1000)
        memory.close()
    return {
        "embed_rate": embed_rate,
        "bulk_rate": bulk_rate,
        "bulk_vs_embed": bulk_rate / embed_rate,
        "embed_share": embed_share,
        "single_rate": single_rate,
        "search_p50": statistics.median(total_ms),
        "search_p95": pct(total_ms, 0.95),
        "embed_p50": statistics.median(embed_ms),
        "engine_p50": statistics.median(engine_ms),
        "engine_p95": pct(engine_ms, 0.95),
        "rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="both", choices=["minilm", "hashing", "both"])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    specs = {"minilm": ["sentence-transformers"], "hashing": ["hashing"], "both": ["sentence-transformers", "hashing"]}[args.embedder]
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"command: python bench/core.py {' '.join(sys.argv[1:])}")
    header = (
        "| embedder | N | embedder batched/s | bulk add/s | bulk/embedder | single add/s | "
        "embedding share of bulk add | search p50 ms | search p95 ms | query embed p50 ms | engine p50 ms | engine p95 ms | peak RSS MB |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for spec in specs:
        rates = {}
        for size in sizes:
            r = run(spec, size, random.Random(args.seed))
            rates[size] = r["single_rate"]
            print(
                f"| {spec} | {size:,} | {r['embed_rate']:.0f} | {r['bulk_rate']:.0f} | {r['bulk_vs_embed']:.0%} | "
                f"{r['single_rate']:.1f} | {r['embed_share']:.0%} | {r['search_p50']:.2f} | {r['search_p95']:.2f} | {r['embed_p50']:.2f} | "
                f"{r['engine_p50']:.3f} | {r['engine_p95']:.3f} | {r['rss_mb']:.0f} |",
                flush=True,
            )
        if len(sizes) > 1:
            print(f"single-add rate at {sizes[-1]:,} vs {sizes[0]:,} ({spec}): {rates[sizes[-1]] / rates[sizes[0]]:.0%}")


if __name__ == "__main__":
    main()
