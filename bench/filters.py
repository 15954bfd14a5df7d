"""Filtered searches and listings of a large scope right after a bulk load.

Run:  python bench/filters.py [--size 100000] [--searches 40] [--clients 4] [--backend sqlite|postgresql]

A fresh store, one user's scope filled with ``--size`` memories by
``add(list_of_messages, infer=False)`` in calls of 1,000 (sentences sampled from
LoCoMo's dialog vocabulary, the hashing embedder), each call's metadata
``{"session": call % 50, "batch": call}``, and three memories more tagged
``{"tag": "rare"}``. Then, for each filter below, ``--searches`` searches (LoCoMo
questions, ``limit=10``) from ``--clients`` threads at once, and the same number of
``get_all(limit=10)`` one at a time, each timed from its call to its return.

Prints one Markdown row per filter: what it keeps, search p50 / p95 / max and
listing p50 in ms. Run it against another checkout with ``PYTHONPATH=<checkout>/src``
to compare two commits in one sitting.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bulk_load import burst  # noqa: E402
from core import corpus_model, pct, sentence, store_at  # noqa: E402

import memorist  # noqa: E402
from memorist import Memory  # noqa: E402

BATCH = 1000
FILTERS: list[tuple[str, dict[str, Any] | None]] = [
    ("no filter", None),
    ("2 % (a session)", {"session": 3}),
    ("1 % (a batch)", {"batch": 7}),
    ("3 memories (a tag)", {"tag": "rare"}),
    ("2 memories (a tag AND a comparison)", {"tag": "rare", "n": {"gte": 1}}),
    ("none (a value no memory has)", {"session": 999}),
    ("none (an OR of two)", {"OR": [{"session": 999}, {"tag": "none-such"}]}),
    ("3 memories (NOT only: checked on each memory)", {"NOT": {"session": {"gte": 0}}}),
]


def load(memory: Memory, user: str, size: int, words: list[str], weights: list[float]) -> float:
    rng = random.Random(7)
    began = time.perf_counter()
    for call, start in enumerate(range(0, size, BATCH)):
        messages = [{"role": "user", "content": sentence(rng, words, weights)} for _ in range(min(BATCH, size - start))]
        memory.add(messages, user_id=user, infer=False, metadata={"session": call % 50, "batch": call})
    for n in range(3):
        memory.add(sentence(rng, words, weights), user_id=user, infer=False, metadata={"tag": "rare", "n": n})
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--searches", type=int, default=40)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--only", default="", help="the filters whose name holds one of these words (comma-separated)")
    args = parser.parse_args()
    only = [word for word in args.only.split(",") if word]
    words, weights, questions = corpus_model()
    print(f"memorist {memorist.__file__}, Python {platform.python_version()}, {args.backend}, {args.size:,} memories")
    with store_at(args.backend, "filters") as where:
        memory = Memory(where, embedder=args.embedder)
        seconds = load(memory, "u", args.size, words, weights)
        print(f"loaded in {seconds:.1f} s\n")
        print("| filter | results | search p50 ms | p95 ms | max ms | get_all p50 ms |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, filters in FILTERS:
            if only and not any(word in name for word in only):
                continue
            found = len(memory.search(questions[0], user_id="u", limit=10, filters=filters)["results"])
            times = burst(memory, "u", questions, args.searches, args.clients, filters=filters)
            listed = []
            for _ in range(max(3, args.searches // 4)):
                began = time.perf_counter()
                memory.get_all(user_id="u", limit=10, filters=filters)
                listed.append((time.perf_counter() - began) * 1000)
            print(f"| {name} `{json.dumps(filters)}` | {found} | {statistics.median(times):.1f} | {pct(times, 0.95):.1f} "
                  f"| {max(times):.1f} | {statistics.median(listed):.1f} |", flush=True)
        memory.close()


if __name__ == "__main__":
    main()
