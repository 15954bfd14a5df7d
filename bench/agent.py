"""What the tutor's graph costs a turn, and what MemoristStore's operations cost.

Run:  python bench/agent.py [--turns 60] [--items 1000] [--embedder hashing]

1. A turn of ``Tutor.run_turn`` (no model: react answers with its calculator, cot
   lists the memories it would use) against the same turn through the graph-less
   runner (``memorist.ace.runner.run_turn``) on the same kind of store, so the graph's
   own overhead shows; "graph, no facts" is the graph without the learning node's
   fact extraction (a write of its own). The playbook is first grown to 20 bullets.
2. ``MemoristStore`` on a store of ``--items`` items: put (new key), put (existing
   key), get, search by query, search with a filter, and LangGraph's ``InMemoryStore``
   for scale (no embeddings: its search is a scan).

Figures are medians and 95th percentiles in milliseconds; bench/RESULTS.md has them.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable

from langgraph.store.memory import InMemoryStore

from memorist import Memory, Playbook
from memorist.ace.runner import run_turn as plain_turn
from memorist.agent.tutor import Tutor
from memorist.integrations.langgraph import MemoristStore

QUESTIONS = [
    "Help me multiply 12 by 5.",
    "What is 3/4 - 1/8?",
    "How do I add fractions with different denominators?",
    "Why does 1/2 become 3/6?",
]


def timed(fn: Callable[[], object], n: int) -> tuple[float, float]:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.95) - 1)]


def grow(playbook: Playbook, learner: str) -> None:
    for i in range(10):
        playbook.turn(learner, f"seed-{i}").learn(
            question=f"Question {i} about fractions and decimals",
            lessons=[f"Strategy {i}: draw the fraction {i}/{i + 2} as slices", f"Learner mixes up step {i} of long division"],
            feedback="That helped",
        )


def turns(args: argparse.Namespace, folder: str) -> None:
    print(f"tutor turns ({args.turns} per row, embedder {args.embedder}, no model)")
    for label in ("graph", "graph, no facts", "runner"):
        with Memory(os.path.join(folder, f"{label}.db"), embedder=args.embedder) as memory:
            playbook = Playbook(memory)
            grow(playbook, "sam")
            tutor = Tutor(memory, playbook=playbook, llm=None, remember_facts=label == "graph")
            for q in QUESTIONS[:3:2]:
                payload = {"messages": [{"role": "user", "content": q}], "learner_id": "sam", "feedback": "Thanks"}
                run = ((lambda p=payload, pb=playbook: plain_turn(pb, p)) if label == "runner"
                       else (lambda p=payload, t=tutor: t.run_turn(p)))
                p50, p95 = timed(run, args.turns)
                print(f"  {label:15} {q[:45]:45} p50 {p50:7.2f} ms  p95 {p95:7.2f} ms  (playbook {len(playbook.bullets('sam'))} bullets)")


def store_ops(args: argparse.Namespace, folder: str) -> None:
    print(f"store operations ({args.items} items in 10 namespaces of 20 users; 200 calls each)")
    with Memory(os.path.join(folder, "store.db"), embedder=args.embedder) as memory:
        ours, theirs = MemoristStore(memory), InMemoryStore()
        for store in (ours, theirs):
            for i in range(args.items):
                store.put((f"user{i % 20}", f"ns{i % 10}"), f"k{i}", {"text": f"Fact number {i} about topic {i % 37}", "n": i})
        for name, store in (("MemoristStore", ours), ("InMemoryStore", theirs)):
            counter = iter(range(10**9))
            rows = [
                ("put new", lambda s=store, c=counter: s.put(("user1", "ns1"), f"new{next(c)}", {"text": "A new fact", "n": 1})),
                ("put existing", lambda s=store: s.put(("user1", "ns1"), "k1", {"text": "Fact number 1, changed", "n": 1})),
                ("get", lambda s=store: s.get(("user3", "ns3"), "k3")),
                ("search query", lambda s=store: s.search(("user5",), query="fact about topic 5", limit=10)),
                ("search filter", lambda s=store: s.search(("user5",), filter={"n": {"$gt": args.items // 2}}, limit=10)),
            ]
            for label, fn in rows:
                p50, p95 = timed(fn, 200)
                print(f"  {name:14} {label:14} p50 {p50:7.3f} ms  p95 {p95:7.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--embedder", default="hashing")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the [ACE ...] lines are not what is measured
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="memorist-bench-agent-") as folder:
        turns(args, folder)
        store_ops(args, folder)


if __name__ == "__main__":
    main()
