"""Scale benchmark: one scope of 10k, 100k and 1M memories, exact and approximate search.

Run:  python bench/scale.py [--sizes 10000,100000,1000000] [--queries 200] [--pairs 7]
                            [--ann-threshold N] [--no-cold] [--db PATH_OR_URL]

For each size N, in one user's scope of a fresh store:

- fill: ``add(list_of_messages, infer=False)`` in calls of 1,000 messages, the
  scope searched after every 10th call (its in-process index is loaded by the first
  search and patched by every write, as in a live service); the approximate graph
  is held back meanwhile, then built from all N rows on every core, and timed;
- batched add rate at 1k and at N: then ``--pairs`` times, one such call into a
  fresh store whose scope holds 1k memories and one into the full scope (graph
  included, fed by its background thread), in alternation; wall time, and the
  ratio of the adding thread's CPU time, which other processes on a shared
  machine disturb less (rates are totals over the pairs, not medians);
- engine p50/p95: the whole ``search()`` with the query vectors cached, back to back
  (as bench/core.py), and the store's ``vector_search`` alone (k=50, what search
  asks), with exact search and with the approximate graph (SQLite);
- recall@10 of the graph against exact search, on the same queries;
- cold load: the first search of a new process opening the store (loading the
  space from the file; its graph is then rebuilt in the background);
- peak RSS of the process.

Memories are sentences sampled from the word frequencies of LoCoMo's dialogs (so
BM25 sees a natural vocabulary), queries are LoCoMo questions. Their vectors come
from :class:`ClusteredEmbedder`, shaped like sentence embeddings so that the
graph's recall means something (random vectors are far harder than real ones,
hashed words far easier); it embeds about as fast as the hashing embedder.

``--db postgresql://...`` runs the same fill, add rates and engine timings against
that database through ``memorist.store.open_store`` (the PostgreSQL row; the 1k
scopes are fresh users of the same database; the exact/graph split is SQLite's). There too the HNSW index is held back during the fill (the
store's ``exact_below`` raised) and built after it with ``build_indexes()``, timed;
the paired adds go in above its watermark, searched exactly until graphed, and are
graphed before the engine timings. Recall there is measured against ``vector_search(k=None)``,
which the store contract defines as every row in exact order. Its cold load is another
store loading the scope's in-process full-text index (memorist.store.postgres.text). A URL this build
cannot open stops the run with the store's error.

Figures are printed as a Markdown table; paste them into bench/RESULTS.md.
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
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import corpus_model, pct, peak_rss_mb, sentence  # noqa: E402

from memorist import Memory  # noqa: E402
from memorist.embed.base import Embedder  # noqa: E402
from memorist.store import vector_index  # noqa: E402
from memorist.store.base import ScopeFilter  # noqa: E402

BATCH = 1000


class ClusteredEmbedder(Embedder):
    """Deterministic synthetic embeddings with the neighbourhoods of sentence embeddings.

    Topics, subtopics of a topic, texts of a subtopic: each level a Gaussian draw
    whose variance falls off as a power law over a random basis, plus a direction
    shared by all, normalised. A text's subtopic and noise come from a hash of it,
    so a text always gets the same vector. For ``items`` texts there are
    ``7 * items ** 0.5`` subtopics and ``2.7 * items ** 0.25`` topics: a larger
    collection is denser, as real ones are.

    Fitted to all-MiniLM-L6-v2 embeddings of English sentences from the
    documentation of installed packages (300 of them as queries). At 20k texts,
    real vs synthetic: mean cosine of two texts 0.08 vs 0.05; a query's 1st / 10th /
    100th / 1000th nearest text 0.60 / 0.47 / 0.36 / 0.23 vs 0.55 / 0.44 / 0.34 /
    0.25. usearch recall@10 (int8, 16 links, beam 128, 40 candidates rescored) at
    20k / 50k / 149k texts: real 0.992 / 0.986 / 0.977, synthetic 0.995 / 0.988 /
    0.968 (the exponents were chosen to match this decline; 1M real texts were not
    available, so the figure at 1M extrapolates it). Subtopics in proportion to the
    texts (20 texts each) made recall fall far faster than real text's (0.88 at
    149k); hashed words would make it far easier.
    """

    batch_size = 4096
    name = "clustered-synthetic-v4-384"

    def __init__(self, items: int, dim: int = 384, seed: int = 7) -> None:
        self.dim = dim
        rng = np.random.default_rng(seed)
        lam = np.arange(1, dim + 1, dtype=np.float64) ** -0.85
        self._scale = np.sqrt(lam / lam.sum()).astype(np.float32)
        self._basis = np.linalg.qr(rng.normal(size=(dim, dim)))[0].astype(np.float32)
        mean = rng.normal(size=dim).astype(np.float32)
        self._mean = 0.65 * mean / np.linalg.norm(mean)
        topics = rng.standard_normal((max(int(2.7 * items**0.25), 1), dim), dtype=np.float32) * self._scale
        subtopics = max(int(7 * items**0.5), 1)
        self._centres = topics[rng.integers(0, topics.shape[0], subtopics)]
        self._centres += 1.5 * rng.standard_normal((subtopics, dim), dtype=np.float32) * self._scale

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            h = zlib.crc32(text.encode("utf-8"))
            noise = np.random.default_rng(h).standard_normal(self.dim, dtype=np.float32)
            out[i] = self._centres[h % self._centres.shape[0]] + 2.3 * noise * self._scale
        return out @ self._basis.T + self._mean


def space_indexes(memory: Memory) -> list[vector_index.SpaceIndex]:
    """The SQLite store's loaded in-process indexes (a benchmark may look inside)."""
    return memory.store._indexes.loaded()  # type: ignore[attr-defined]


def engine_ms(memory: Memory, user: str, queries: list[str]) -> list[float]:
    """The whole search() with the query vectors cached, back to back (bench/core.py)."""
    for q in queries:
        memory._query_vector(q)
    memory.search(queries[0], user_id=user, limit=5)
    out = []
    for q in queries:
        t0 = time.perf_counter()
        memory.search(q, user_id=user, limit=5)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def vector_ms(memory: Memory, user: str, vectors: list[np.ndarray], k: int | None) -> tuple[list[float], list[list[str]]]:
    """The store's vector_search alone, as search() asks it (k=50), and its top 10."""
    scope = ScopeFilter(memory.config.tenant_id, user)
    now = time.time()
    times, tops = [], []
    for v in vectors:
        t0 = time.perf_counter()
        hits = memory.store.vector_search(scope, v, k=k, cutoff=None, now=now)
        times.append((time.perf_counter() - t0) * 1000)
        tops.append([m for m, _ in hits[:10]])
    return times, tops


def recall(found: list[list[str]], truth: list[list[str]]) -> float:
    return statistics.fmean(len(set(f) & set(t)) / max(len(t), 1) for f, t in zip(found, truth, strict=True))


def fill(memory: Memory, user: str, texts: list[str], questions: list[str], loaded: Callable[[], None]) -> None:
    """Batched adds into one scope, searched now and then (every 10th call).

    The first search loads the scope's in-process index; each write patches it.
    ``loaded`` runs once it is.
    """
    for n, start in enumerate(range(0, len(texts), BATCH)):
        memory.add([{"role": "user", "content": t} for t in texts[start : start + BATCH]], user_id=user, infer=False)
        if n % 10 == 0:
            memory.search(questions[n % len(questions)], user_id=user, limit=5)
        if n == 0:
            loaded()


def timed_batch(memory: Memory, user: str, texts: list[str], question: str) -> tuple[float, float]:
    """Wall and CPU seconds (this thread's: not the graph's) of one batched add."""
    wall, cpu = time.perf_counter(), time.thread_time()
    memory.add([{"role": "user", "content": t} for t in texts], user_id=user, infer=False)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    memory.search(question, user_id=user, limit=5)
    return wall, cpu


def paired_add_rates(
    memory: Memory, user: str, small_target: Callable[[int], str], embedder: Embedder,
    texts: list[str], questions: list[str], pairs: int,
) -> dict[str, float]:
    """Batched add rates into the full scope and into a 1k-memory scope of a fresh store.

    Measured in alternation, a batch of each per pair: on a shared VM the load drifts
    more during a long fill than the store's size moves the rate, and pairs see the
    same machine. The CPU time of the adding thread is the steadier measure; wall
    time includes fsync and other processes.
    """
    chunks = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
    small_wall, small_cpu, big_wall, big_cpu = [], [], [], []
    for i in range(pairs):
        small = Memory(small_target(i), embedder=embedder)
        small_user = f"{user}-small-{i}"
        timed_batch(small, small_user, chunks[3 * i], questions[i])  # the scope now holds 1k
        wall, cpu = timed_batch(small, small_user, chunks[3 * i + 1], questions[i + 1])
        small.close()
        small_wall.append(wall)
        small_cpu.append(cpu)
        wall, cpu = timed_batch(memory, user, chunks[3 * i + 2], questions[i + 2])
        big_wall.append(wall)
        big_cpu.append(cpu)
    # Totals, not medians: a checkpoint or a merge that lands in one batch in four is
    # part of the rate a bulk load sees.
    rate = lambda seconds: BATCH * len(seconds) / sum(seconds)  # noqa: E731
    return {
        "add/s at 1k": rate(small_wall),
        "add/s at N": rate(big_wall),
        "cpu ratio": rate(big_cpu) / rate(small_cpu),
    }


def run(size: int, args: argparse.Namespace, rng: random.Random) -> list[dict[str, object]]:
    words, weights, questions = corpus_model()
    texts = [sentence(rng, words, weights) for _ in range(size + 3 * BATCH * args.pairs)]
    queries = rng.sample(questions, min(args.queries, len(questions)))
    embedder = ClusteredEmbedder(items=size)
    vectors = [embedder.embed_query(q) for q in queries]
    postgres = args.db is not None and args.db.startswith(("postgresql:", "postgres:"))
    # A fresh scope: a database given with --db may hold earlier runs.
    user = f"bench-{size}-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        target = args.db or os.path.join(tmp, "scale.db")
        try:
            memory = Memory(target, embedder=embedder)
        except Exception as exc:  # the URL names a backend this build cannot open
            raise SystemExit(f"cannot open {args.db!r}: {exc}") from exc

        exact_below = getattr(memory.store, "exact_below", None)  # PostgreSQL's HNSW threshold

        def hold_graph() -> None:
            # The graph is built once, after the fill and on every core, and timed:
            # built alongside a bulk load it would take one core from it for as long.
            if postgres:
                memory.store.exact_below = 1 << 62  # type: ignore[attr-defined]  # no HNSW build during the fill
            else:
                for index in space_indexes(memory):
                    index.ann_threshold = 0

        t0 = time.perf_counter()
        fill(memory, user, texts[:size], questions, hold_graph)
        common: dict[str, object] = {"N": size, "fill s": time.perf_counter() - t0}
        graph = False
        if postgres:
            store = memory.store
            store.exact_below = exact_below  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            if store.build_indexes():  # type: ignore[attr-defined]
                common["build s"] = time.perf_counter() - t0
        else:
            (index,) = space_indexes(memory)
            index.ann_threshold = args.ann_threshold or vector_index.DEFAULT_THRESHOLD
            graph = index.ann_pending() is not None
            if graph:
                t0 = time.perf_counter()
                index.catch_up_ann(threads=0)
                common["build s"] = time.perf_counter() - t0
        # The 1k scopes: fresh SQLite files, or (PostgreSQL) fresh users of the database.
        small = (lambda i: target) if postgres else (lambda i: os.path.join(tmp, f"small-{i}.db"))
        common.update(paired_add_rates(memory, user, small, embedder, texts[size:], questions, args.pairs))
        if postgres:
            memory.store.build_indexes()  # type: ignore[attr-defined]  # the rows the paired adds wrote
            engine = engine_ms(memory, user, queries)
            times, found = vector_ms(memory, user, vectors, k=50)
            _, truth = vector_ms(memory, user, vectors[:50], k=None)
            memory.close()
            row = {**common, "backend": "PostgreSQL", "engine": engine, "vector": times, "recall": recall(found[:50], truth)}
            if args.cold:
                # Another process: loading the scope's in-process full-text index, which
                # its first searches do in the background (ranking in SQL meanwhile).
                memory = Memory(target, embedder=embedder)
                t0 = time.perf_counter()
                memory.store.load_text_index(ScopeFilter(memory.config.tenant_id, user))  # type: ignore[attr-defined]
                row["load s"] = time.perf_counter() - t0
                memory.close()
            return [{**row, "rss": peak_rss_mb()}]

        index.catch_up_ann()  # the rows the paired adds wrote
        threshold = index.ann_threshold
        index.ann_threshold = 0  # exact
        exact_engine = engine_ms(memory, user, queries)
        exact_times, truth = vector_ms(memory, user, vectors, k=50)
        index.ann_threshold = threshold
        out = [{**common, "backend": "SQLite exact", "engine": exact_engine, "vector": exact_times}]
        if graph:
            ann_engine = engine_ms(memory, user, queries)
            ann_times, found = vector_ms(memory, user, vectors, k=50)
            out.append({**common, "backend": "SQLite + graph", "engine": ann_engine, "vector": ann_times,
                        "recall": recall(found, truth)})
        path = memory.store.path  # type: ignore[attr-defined]
        del index
        memory.close()
        if args.cold:
            # Another process opening the store: its first search loads the space (and
            # starts the graph, built in the background; searches are exact meanwhile).
            memory = Memory(path, embedder=embedder)
            t0 = time.perf_counter()
            memory.search(queries[0], user_id=user, limit=5)
            for row in out:
                row["load s"] = time.perf_counter() - t0
            memory.close()
        for row in out:
            row["rss"] = peak_rss_mb()
        return out


def cell(row: dict[str, object], key: str, fmt: str) -> str:
    return format(row[key], fmt) if key in row else "–"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ann-threshold", type=int, default=None,
                        help=f"live vectors above which a space gets a graph (memorist's default: {vector_index.DEFAULT_THRESHOLD})")
    parser.add_argument("--pairs", type=int, default=7, help="paired batches measuring the add rate at 1k and at N")
    parser.add_argument("--no-cold", dest="cold", action="store_false", help="skip the cold start (a new process loading the scope)")
    parser.add_argument("--db", default=None,
                        help="a SQLite path, or postgresql://user@host/db for the PostgreSQL row (default: a temporary SQLite file)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"command: python bench/scale.py {' '.join(sys.argv[1:])}")
    print(f"graph threshold: {args.ann_threshold or vector_index.DEFAULT_THRESHOLD} live vectors")
    header = ("| backend | N | engine p50 ms | engine p95 ms | vector_search p50 ms | vector_search p95 ms | recall@10 | "
              "add/s at 1k | add/s at N | ratio | ratio (CPU) | fill s | graph build s | cold load s | peak RSS MB |")
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for size in sizes:
        for r in run(size, args, random.Random(args.seed)):
            engine, vector = r["engine"], r["vector"]
            print(
                f"| {r['backend']} | {size:,} | {statistics.median(engine):.2f} | {pct(engine, 0.95):.2f} | "
                f"{statistics.median(vector):.2f} | {pct(vector, 0.95):.2f} | {cell(r, 'recall', '.3f')} | "
                f"{r['add/s at 1k']:,.0f} | {r['add/s at N']:,.0f} | {r['add/s at N'] / r['add/s at 1k']:.2f} | "
                f"{r['cpu ratio']:.2f} | {r['fill s']:.0f} | "
                f"{cell(r, 'build s', '.1f')} | {cell(r, 'load s', '.1f')} | {cell(r, 'rss', '.0f')} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
