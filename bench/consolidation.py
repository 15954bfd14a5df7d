"""Consolidation: how much a run merges, what it keeps, what it costs, and whether it
loses any name, number or date.

Run:  python bench/consolidation.py [--sizes 1000,10000] [--embedder hashing] [--backend sqlite|postgresql]

Builds one user's store of N memories (``add(..., infer=False)``, verbatim):

- groups of 2 or 3 near-duplicates of low importance (0.2): a base fact and variants
  that add a detail ("Met Sarah from Google in Zurich on 2024-03-02" / "... to discuss
  the budget"), each group with its own names, numbers and dates (about 60% of N);
- groups of near-duplicates of high importance (0.9, about 10% of N): never to be touched;
- unrelated singletons of low importance (the rest).

Then ``memory.learning.consolidate(user_id=...)`` with the defaults, timed, and prints:
merged / consolidated / preserved counts, bytes saved, the run's time; the **term
preservation rate** (of every name, number and date of every merged source, the share
found in its consolidated memory: the merge's promise is 1.0); **purity** (the share
of consolidated memories whose sources all come from one generated group: merging two
different facts keeps their terms but is still wrong); **recall** of the duplicates
(the share of low-importance duplicates that were merged); whether every
high-importance memory is still active and unchanged; and the time of
``memory.rollback(run_id)`` and whether the export after it equals the one before.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import store_at  # noqa: E402

from memorist import Memory  # noqa: E402
from memorist.policies.consolidation import key_terms  # noqa: E402

_SYLLABLES = ["ka", "lo", "mi", "ren", "to", "sa", "vi", "dor", "el", "an", "bru", "zi", "fen", "ol", "qua", "ny"]
# Made-up names, places and organisations, hundreds of each: two groups rarely share
# all three, so a merge of two groups is the engine's doing, not the generator's.
NAMES = sorted({(a + b).capitalize() for a in _SYLLABLES for b in _SYLLABLES if a != b})
PLACES = sorted({(a + b + "ville").capitalize() for a in _SYLLABLES[:12] for b in _SYLLABLES[4:]})
ORGS = sorted({(a + b).upper() for a in _SYLLABLES[:10] for b in _SYLLABLES[6:]})
TOPICS = ["the budget", "the launch", "hiring", "the audit", "the roadmap", "pricing"]
ITEMS = ["a bike", "a laptop", "the flat deposit", "a violin", "concert tickets", "a sofa"]
SPORTS = ["tennis", "chess", "squash", "football", "climbing"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _date(rng: random.Random) -> str:
    return f"{rng.randint(2015, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _group(rng: random.Random, serial: int) -> list[str]:
    """A base fact and one or two variants that each add a detail."""
    kind = serial % 3
    if kind == 0:
        base = f"Met {rng.choice(NAMES)} from {rng.choice(ORGS)} in {rng.choice(PLACES)} on {_date(rng)}"
        extra = [f" to discuss {rng.choice(TOPICS)}", f" with {rng.choice(NAMES)}"]
    elif kind == 1:
        base = f"Paid {rng.randint(20, 5000)} euros for {rng.choice(ITEMS)} in {rng.choice(PLACES)}"
        extra = [f" on {_date(rng)}", f" from {rng.choice(NAMES)}"]
    else:
        base = f"Plays {rng.choice(SPORTS)} with {rng.choice(NAMES)} on {rng.choice(DAYS)}s in {rng.choice(PLACES)}"
        extra = [f" at {rng.randint(6, 21)}:00", f" since {rng.randint(2010, 2025)}"]
    size = rng.choice((2, 3))
    return [base] + [base + e for e in extra[: size - 1]]


def _singleton(rng: random.Random, serial: int) -> str:
    words = ["orchid", "kayak", "sourdough", "origami", "telescope", "ukulele", "bonsai", "podcast", "pottery", "sudoku"]
    return f"Note {serial}: {rng.choice(words)} and {rng.choice(words)} matter to {rng.choice(NAMES)} ({rng.randint(1, 99)})"


def build(memory: Memory, n: int, seed: int) -> tuple[dict[str, int], set[str], set[str]]:
    """Fill the store; returns each memory's group (-1: singleton), the ids of the
    low-importance duplicates and of the high-importance memories."""
    rng = random.Random(seed)
    group_of: dict[str, int] = {}
    duplicates: set[str] = set()
    high: set[str] = set()
    texts: list[tuple[str, float, int]] = []
    serial = 0
    while len(texts) < int(n * 0.7):
        serial += 1
        weight = 0.9 if serial % 7 == 0 else 0.2
        texts.extend((t, weight, serial) for t in _group(rng, serial))
    while len(texts) < n:
        texts.append((_singleton(rng, len(texts)), 0.2, -1))
    texts = texts[:n]
    rng.shuffle(texts)
    for start in range(0, n, 500):
        chunk = texts[start:start + 500]
        for weight in (0.2, 0.9):
            part = [(t, g) for t, w, g in chunk if w == weight]
            if not part:
                continue
            result = memory.add([{"role": "user", "content": t} for t, _ in part], user_id="bench", infer=False, importance=weight)
            for item, (_, group) in zip(result["results"], part, strict=True):
                group_of[item["id"]] = group
                if weight == 0.9:
                    high.add(item["id"])
                elif group >= 0:
                    duplicates.add(item["id"])
    return group_of, duplicates, high


def run(n: int, embedder: str, target: str, seed: int) -> None:
    with Memory(target, embedder=embedder) as memory:
        t0 = time.perf_counter()
        group_of, duplicates, high = build(memory, n, seed)
        fill = time.perf_counter() - t0
        high_before = {i: memory.store.get(i) for i in high}
        before = list(memory.export(user_id="bench"))
        t0 = time.perf_counter()
        report = memory.learning.consolidate(user_id="bench")
        took = time.perf_counter() - t0
        kept_terms = total_terms = pure = 0
        merged_ids: set[str] = set()
        for item in report["results"]:
            merged = item["memory"].casefold()
            sources = item["consolidated_from"]
            merged_ids.update(sources)
            pure += len({group_of[s] for s in sources}) == 1 and group_of[sources[0]] >= 0
            for source in sources:
                for term in key_terms(memory.store.get(source).text):
                    total_terms += 1
                    kept_terms += term in merged or term.replace(",", "") in merged
        high_intact = sum(1 for i, r in high_before.items() if memory.store.get(i) == r)
        t0 = time.perf_counter()
        memory.rollback(report["run_id"], user_id="bench")
        undo = time.perf_counter() - t0
        restored = list(memory.export(user_id="bench")) == before
    consolidated = report["consolidated_count"]
    print(f"N={n:,}  fill {fill:.1f}s  ({len(duplicates):,} low-importance duplicates in groups, {len(high):,} high-importance)")
    print(f"  consolidate: {took:.2f}s  merged {report['merged_count']:,} into {consolidated:,}, preserved {report['preserved_count']:,}, "
          f"{report['space_saved_bytes']:,} bytes saved, {len(report['rejected'])} groups rejected, {report['batches']} batches")
    print(f"  terms preserved {kept_terms:,}/{total_terms:,} = {kept_terms / max(1, total_terms):.4f}; "
          f"purity {pure}/{consolidated} = {pure / max(1, consolidated):.3f}; "
          f"duplicate recall {len(merged_ids & duplicates) / max(1, len(duplicates)):.3f}; "
          f"merged outside the duplicates {len(merged_ids - duplicates)}")
    print(f"  high-importance untouched {high_intact}/{len(high)}; rollback {undo:.2f}s, export identical after it: {restored}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, embedder {args.embedder}, {args.backend}")
    for n in (int(s) for s in args.sizes.split(",")):
        with store_at(args.backend, "bench") as where:
            run(n, args.embedder, where, args.seed)


if __name__ == "__main__":
    main()
