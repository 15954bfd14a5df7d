"""Crash safety: SIGKILL a writing process at a random moment, then count what was lost.

Run:  python bench/crash.py [--trials 50] [--seed 1] [--modes single,batch,import]

For each mode, ``--trials`` times: a child process opens a fresh store (hashing
embedder) and writes in a loop, printing (and flushing) a line to a pipe once each
write has returned; the parent kills it with SIGKILL at a random moment
(``--max-delay`` seconds at most after it is ready), reopens the store and counts

- **acknowledged writes lost**: memories of a write the child reported done that
  are not in the store (target 0);
- **partial batches**: batches (one transaction each) whose memories are only
  partly in the store (target 0);
- stores that no longer open, or that ``memorist check`` finds unhealthy (target 0).

"Unacked batches found" are writes that committed but whose acknowledgement the
kill cut off: allowed (the caller never heard back), and a sign that kills do land
inside writes. The child writes back to back, so every kill lands in one.

Modes: ``single`` (one ``add(text, infer=False)`` per write), ``batch``
(``add(list of --batch messages, infer=False)``, one transaction) and ``import``
(``import_`` of --import-lines conversation lines, written in batches of
IMPORT_BATCH, each one transaction; a kill between two batches of one call is
allowed to leave the first, never part of one). Each write's memories carry its
number (and batch part) in their metadata, so the parent can count them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

from memorist import Memory
from memorist.pipelines.transfer import IMPORT_BATCH

MODES = ("single", "batch", "import")


# the child -------------------------------------------------------------------------------------
def child(mode: str, db: str, batch: int, import_lines: int) -> None:
    m = Memory(db, embedder="hashing")
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    k = 0
    while True:
        if mode == "single":
            m.add(f"Crash fact number {k}: the user likes tea", user_id="crash", infer=False, metadata={"write": k})
        elif mode == "batch":
            m.add(
                [{"role": "user", "content": f"Write {k} message {j}: about walks"} for j in range(batch)],
                user_id="crash",
                infer=False,
                metadata={"write": k},
            )
        else:
            lines = [
                json.dumps(
                    {
                        "messages": [{"role": "user", "content": f"Import {k} line {j}: about the sea"}],
                        "user_id": "crash",
                        "metadata": {"write": k, "part": j // IMPORT_BATCH},
                    }
                )
                for j in range(import_lines)
            ]
            m.import_(lines, infer=False)
        out.write(f"ack {k}\n")  # only once the write returned
        out.flush()
        k += 1


# the parent ------------------------------------------------------------------------------------
def _sizes(mode: str, batch: int, import_lines: int) -> dict[int, int]:
    """Memories per part of one write."""
    if mode == "single":
        return {0: 1}
    if mode == "batch":
        return {0: batch}
    parts: dict[int, int] = {}
    for j in range(import_lines):
        parts[j // IMPORT_BATCH] = parts.get(j // IMPORT_BATCH, 0) + 1
    return parts


def trial(mode: str, rng: random.Random, args: argparse.Namespace) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "crash.db")
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", mode, db, "--batch", str(args.batch), "--import-lines", str(args.import_lines)],
            stdout=subprocess.PIPE,
            text=True,
        )
        lines: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if not line.endswith("\n"):
                    break  # cut by the kill: never received whole
                lines.append(line.strip())
                if line == "ready\n":
                    ready.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        if not ready.wait(120):
            proc.kill()
            raise RuntimeError("the child did not start")
        time.sleep(rng.uniform(0.0, args.max_delay))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join(30)
        acked = {int(x.split()[1]) for x in lines if x.startswith("ack ")}
        result = Counter(trials=1, acked_writes=len(acked))
        try:
            m = Memory(db, embedder="hashing")
        except Exception as exc:  # noqa: BLE001 - counted, and shown
            print(f"  {mode}: the store does not open after the kill: {exc}", file=sys.stderr)
            result["open_failures"] += 1
            return result
        try:
            found: Counter[tuple[int, int]] = Counter()
            for item in m.get_all(user_id="crash", limit=1_000_000)["results"]:
                meta = item.get("metadata") or {}
                found[(int(meta["write"]), int(meta.get("part", 0)))] += 1
            report = m.check()
        finally:
            m.close()
        sizes = _sizes(mode, args.batch, args.import_lines)
        result["acked_memories"] = sum(sizes.values()) * len(acked)
        for k in acked:
            for part, size in sizes.items():
                result["lost"] += max(0, size - found.get((k, part), 0))
        for (_k, part), n in found.items():
            if n != sizes.get(part, -1):
                result["partial_batches"] += 1
        result["unacked_batches_present"] = sum(1 for (k, _part) in found if k not in acked)
        result["check_failures"] = int(not report["healthy"])
        if not report["healthy"]:
            print(f"  {mode}: memorist check after the kill: {report['problems']}", file=sys.stderr)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50, help="kills per mode")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--max-delay", type=float, default=1.0, help="latest kill, seconds after the child is ready")
    parser.add_argument("--batch", type=int, default=50, help="messages per batched add")
    parser.add_argument("--import-lines", type=int, default=1000, help="lines per import call")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.batch, args.import_lines)
        return
    modes = [m for m in args.modes.split(",") if m]
    bad = set(modes) - set(MODES)
    if bad:
        parser.error(f"unknown modes {sorted(bad)}; known: {', '.join(MODES)}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"command: python bench/crash.py {' '.join(sys.argv[1:])}")
    rng = random.Random(args.seed)
    columns = (
        ("trials", "trials"),
        ("acked_writes", "acked writes"),
        ("acked_memories", "acked memories"),
        ("lost", "acked memories lost"),
        ("partial_batches", "partial batches"),
        ("unacked_batches_present", "unacked batches found"),
        ("open_failures", "store did not open"),
        ("check_failures", "check not healthy"),
    )
    totals: Counter[str] = Counter()
    rows = []
    started = time.monotonic()
    for mode in modes:
        per: Counter[str] = Counter()
        for _ in range(args.trials):
            per.update(trial(mode, rng, args))
        rows.append((mode, per))
        totals.update(per)
        print(f"  {mode}: done ({per['trials']} trials)", file=sys.stderr)
    print()
    print("| mode | " + " | ".join(label for _, label in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for mode, per in [*rows, ("total", totals)]:
        print(f"| {mode} | " + " | ".join(f"{per[key]:,}" for key, _ in columns) + " |")
    print()
    print(
        f"Totals over {totals['trials']} SIGKILLs: "
        f"{totals['lost']} acknowledged memories lost (target 0), {totals['partial_batches']} partial batches (target 0), "
        f"{totals['open_failures']} stores that did not open, {totals['check_failures']} not healthy; "
        f"{time.monotonic() - started:.0f} s."
    )


if __name__ == "__main__":
    main()
