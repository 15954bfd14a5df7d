"""Concurrent writers on one store: do they agree, and how fast are they together?

    python bench/concurrency.py [--procs 8] [--slots 6] [--facts 300] [--embedder hashing]

Scenarios, each run by ``--procs`` processes on one SQLite file, started together:

- contradicting: process i says "I live in <city i>." to every slot (a user);
  sequentially that leaves one "Lives in ..." memory per slot.
- paraphrased: process i says the i-th paraphrase of "I'm vegetarian." to every
  slot; sequentially one memory per slot.
- distinct, infer=True and infer=False: every process adds ``--facts`` facts of
  its own to one shared user; nothing may be lost or stored twice, and the
  aggregate rate is compared with one process adding all of them alone.

Prints memories left per slot (target 1), duplicates and losses (target 0) and the
throughput ratio (target >= 0.8). Record runs in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

CITIES = ["Oslo", "Prague", "Lisbon", "Vienna", "Madrid", "Dublin", "Warsaw", "Athens",
          "Berlin", "Rome", "Paris", "Helsinki", "Zagreb", "Riga", "Tallinn", "Sofia"]
PARAPHRASES = ["I'm vegetarian.", "I am vegetarian.", "I'm a vegetarian.", "I am a vegetarian.",
               "I'm vegetarian!", "I am a vegetarian!", "I am vegetarian now.", "Honestly, I'm vegetarian."]
# Made-up words keep every distinct fact distinct for any reconciler.
SYLLABLES = ["ka", "lo", "mi", "ru", "ze", "ta", "vo", "ni", "pe", "su", "da", "fi"]


def word(n: int) -> str:
    out = ""
    for _ in range(4):
        out += SYLLABLES[n % len(SYLLABLES)]
        n //= len(SYLLABLES)
    return out


def distinct_fact(proc: int, i: int) -> str:
    return f"I like {word(proc * 100_000 + i)}."


def _worker(path: str, embedder: str, scenario: str, proc: int, slots: int, facts: int,
            barrier: mp.synchronize.Barrier, out: mp.Queue, per_user: int) -> None:
    m = None
    try:
        from memorist import Memory

        m = Memory(path, embedder=embedder)
        m.search("warm up", user_id="warmup")  # imports and the first index load
        barrier.wait(120)
        start = time.perf_counter()
        if scenario == "contradicting":
            for slot in range(slots):
                m.add(f"I live in {CITIES[proc % len(CITIES)]}.", user_id=f"c{slot}")
        elif scenario == "paraphrased":
            for slot in range(slots):
                m.add(PARAPHRASES[proc % len(PARAPHRASES)], user_id=f"p{slot}")
        else:
            infer = scenario != "distinct-verbatim"
            for i in range(facts):
                # own-users: the facts of process p go to user p, whichever process
                # adds them (alone, one process adds every process's share in
                # turn); otherwise all share one user.
                user = "shared" if scenario != "own-users" else f"user{(proc * facts + i) // per_user}"
                m.add(distinct_fact(proc, i), user_id=user, infer=infer)
        out.put((proc, start, time.perf_counter(), None))
    except BaseException as exc:  # reported, not swallowed
        out.put((proc, 0.0, 0.0, f"{type(exc).__name__}: {exc}"))
    finally:
        if m is not None:
            m.close()


def run(path: str, embedder: str, scenario: str, procs: int, slots: int, facts: int) -> tuple[float, list[str]]:
    """Run one scenario with ``procs`` processes; returns (seconds, errors)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs)
    out = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(path, embedder, scenario, p, slots, facts, barrier, out, ARGS.facts)) for p in range(procs)]
    for w in workers:
        w.start()
    reports = []
    for _ in workers:
        try:
            reports.append(out.get(timeout=900))
        except Exception:  # a worker died without reporting (the barrier broke for the others)
            break
    for w in workers:
        w.join(60)
    errors = [f"process {p}: {err}" for p, _, _, err in reports if err]
    errors += [f"process {i}: exit code {w.exitcode}" for i, w in enumerate(workers) if w.exitcode]
    starts = [s for _, s, _, err in reports if not err]
    ends = [e for _, _, e, err in reports if not err]
    return (max(ends) - min(starts)) if starts else float("nan"), errors


def left_per_slot(path: str, prefix: str, slots: int, contains: str) -> list[int]:
    from memorist import Memory

    with Memory(path, embedder=ARGS.embedder) as m:
        return [
            sum(contains in r["memory"].lower() for r in m.get_all(user_id=f"{prefix}{slot}", limit=1000)["results"])
            for slot in range(slots)
        ]


def stored_texts(path: str, users: list[str]) -> Counter[str]:
    from memorist import Memory

    with Memory(path, embedder=ARGS.embedder) as m:
        return Counter(r["memory"] for user in users for r in m.get_all(user_id=user, limit=10**6)["results"])


def main(argv: list[str] | None = None) -> int:
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--slots", type=int, default=6, help="users per agreement scenario")
    parser.add_argument("--facts", type=int, default=300, help="distinct facts per process")
    parser.add_argument("--embedder", default="hashing")
    ARGS = parser.parse_args(argv)
    procs = ARGS.procs
    failed = slow = False
    print(f"# bench/concurrency.py: {procs} processes, {os.cpu_count()} cores, embedder {ARGS.embedder}, "
          f"python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        print("\n| scenario | memories left per slot | target | errors |\n|---|---|---|---|")
        for scenario, prefix, contains in (("contradicting", "c", "lives in"), ("paraphrased", "p", "vegetarian")):
            path = str(Path(tmp) / f"{scenario}.db")
            _, errors = run(path, ARGS.embedder, scenario, procs, ARGS.slots, 0)
            left = left_per_slot(path, prefix, ARGS.slots, contains)
            failed |= bool(errors) or any(n != 1 for n in left)
            print(f"| {scenario} | {' '.join(map(str, left))} (max {max(left)}) | 1 | {len(errors)} |")
            for e in errors[:3]:
                print(f"|  | {e} | | |")

        print("\n| distinct facts | adds | 1 process adds/s | "
              f"{procs} processes adds/s | ratio | lost | duplicates |\n|---|---|---|---|---|---|---|")
        for scenario, label in (
            ("distinct-infer", "infer=True, one user"),
            ("distinct-verbatim", "infer=False, one user"),
            ("own-users", "infer=True, a user each"),
        ):
            total = procs * ARGS.facts
            alone = str(Path(tmp) / f"{scenario}-alone.db")
            seconds_alone, errors_alone = run(alone, ARGS.embedder, scenario, 1, 0, total)
            together = str(Path(tmp) / f"{scenario}.db")
            seconds, errors = run(together, ARGS.embedder, scenario, procs, 0, ARGS.facts)
            users = ["shared"] if scenario != "own-users" else [f"user{p}" for p in range(procs)]
            texts = stored_texts(together, users)
            # infer=True stores the extracted fact ("Likes ..."), infer=False the text.
            expected = {distinct_fact(p, i) for p in range(procs) for i in range(ARGS.facts)}
            if scenario != "distinct-verbatim":
                expected = {"Likes " + t.removeprefix("I like ").rstrip(".") for t in expected}
            lost = len(expected - set(texts))
            duplicates = sum(n - 1 for n in texts.values() if n > 1)
            rate_alone, rate = total / seconds_alone, total / seconds
            failed |= bool(errors or errors_alone) or lost > 0 or duplicates > 0
            slow |= rate / rate_alone < 0.8
            print(f"| {label} | {total} | "
                  f"{rate_alone:.0f} | {rate:.0f} | {rate / rate_alone:.2f} | {lost} | {duplicates} |")
            for e in (errors + errors_alone)[:3]:
                print(f"|  | {e} | | | | | |")
    print("\nagreement:", "FAIL" if failed else "ok (every slot 1, nothing lost or doubled)")
    print("throughput:", "below the 0.8x target" if slow else "ok (>= 0.8x one writer)")
    return 1 if failed else 0


ARGS: argparse.Namespace

if __name__ == "__main__":
    raise SystemExit(main())
