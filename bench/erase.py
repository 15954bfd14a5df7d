"""Erasure: fill a store for several owners in every capability, erase one, and print
the byte scan of the store and the time the erasure took.

Run:  python bench/erase.py [--users 20] [--facts 200] [--backends sqlite,postgresql]

Each of ``--users`` users gets ``--facts`` facts (one carrying a word of its own in
its text, another in its metadata; every tenth updated, every twentieth deleted), a
test memory, a search, a playbook of three strategies (three versions), a trajectory
with steps and its reflection, and two minutes of its project; the store runs the
energy policy and one maintenance pass. Then the first user is erased and the store
is scanned, on SQLite the file and its ``-wal``, on PostgreSQL the tables' contents
and their relation files in the server's data directory (pgserver, in a temporary
folder): the scan counts the erased user's words (original and lower case) before
and after, and the other users' words after (they must all still be there). It
prints the figures as one JSON line per backend.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from memorist import Memory  # noqa: E402


def words_of(user: int) -> dict[str, str]:
    tag = "".join(chr(ord("a") + (user // 26 ** i) % 26) for i in range(3))
    return {place: f"Qx{place}{tag}zv" for place in ("fact", "meta", "old", "gone", "bullet", "task", "step", "minute", "note", "query", "test")}


def fill(m: Memory, users: int, facts: int) -> None:
    for u in range(users):
        user, w = f"user{u}", words_of(u)
        for i in range(facts):
            text = f"{user} fact {i} mentions {w['fact']}" if i == 0 else f"{user} ordinary fact number {i}"
            meta = {"code": w["meta"]} if i == 1 else {"n": i}
            mid = m.add(text, user_id=user, infer=False, metadata=meta)["results"][0]["id"]
            if i % 10 == 5:
                m.update(mid, f"{user} updated fact {i}", user_id=user)
            if i % 20 == 7:
                m.delete(mid, user_id=user)
        changed = m.add(f"{user} once said {w['old']}", user_id=user, infer=False)["results"][0]["id"]
        m.update(changed, f"{user} said something else", user_id=user)
        gone = m.add(f"{user} secret {w['gone']}", user_id=user, infer=False)["results"][0]["id"]
        m.delete(gone, user_id=user)
        m.add(f"{user} test {w['test']}", user_id=user, infer=False, test=True)
        m.search(f"about {w['query']}", user_id=user)
        for p in (w["bullet"], "check the units", "draw it first"):
            m.learning.update_playbook([{"pattern": f"{user} strategy {p}"}], "study", user_id=user)
        tid = m.learning.start_trajectory(f"{user} task {w['task']}", user_id=user)
        m.learning.log_step(tid, "action", f"{user} step {w['step']}", user_id=user)
        m.learning.complete_trajectory(tid, "success", 0.8, user_id=user)
        m.learning.reflect(tid, user_id=user)
        first = m.minutes.record("task_assigned", agent_id="planner", project_id=user, data={"detail": w["minute"]})
        m.minutes.record("task_completed", agent_id="coder", project_id=user, data={"success_criteria_met": 80},
                         context_references=[first["id"]], memory_note=f"{user} note {w['note']}")
    m.tiers.maintain()
    m.store.flush()


def sqlite_bytes(m: Memory) -> bytes:
    with m.store._lock:
        m.store._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    data = b""
    for name in (m.store.path, m.store.path + "-wal"):
        if os.path.exists(name):
            data += Path(name).read_bytes()
    return data


def postgres_bytes(m: Memory) -> bytes:
    data = b""
    with m.store.connection() as conn:
        for table in ("memories", "embeddings", "events", "spaces"):
            for (row,) in conn.execute(f"SELECT t::text FROM {table} t"):
                data += row.encode("utf-8") + b"\n"
        conn.execute("CHECKPOINT")
        directory = conn.execute("SHOW data_directory").fetchone()[0]
        relations = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
            "UNION SELECT pg_relation_filepath(t.oid) FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid "
            "WHERE c.relnamespace = current_schema()::regnamespace"
        ).fetchall()
    for (relation,) in relations:
        for name in glob.glob(os.path.join(directory, relation or "-") + "*"):
            data += Path(name).read_bytes()
    return data


def found(data: bytes, words: list[str]) -> int:
    return sum(1 for w in words if w.encode() in data or w.lower().encode() in data)


def run(backend: str, target: str, users: int, facts: int) -> dict:
    with Memory(target, embedder="hashing", policy="energy") as m:
        started = time.perf_counter()
        fill(m, users, facts)
        filled = time.perf_counter() - started
        scan = sqlite_bytes if backend == "sqlite" else postgres_bytes
        erased = list(words_of(0).values())
        kept = [w for u in range(1, users) for w in words_of(u).values()]
        before = scan(m)
        size_before = len(before)
        found_before = found(before, erased)
        started = time.perf_counter()
        result = m.erase(user_id="user0")
        seconds = time.perf_counter() - started
        after = scan(m)
        return {
            "backend": backend,
            "users": users,
            "facts_per_user": facts,
            "memories": m.stats()["memories"],
            "fill_seconds": round(filled, 1),
            "bytes_scanned_before": size_before,
            "bytes_scanned_after": len(after),
            "erased_words": len(erased),
            "erased_words_found_before": found_before,
            "erased_words_found_after": found(after, erased),
            "other_words": len(kept),
            "other_words_found_after": found(after, kept),
            "erase_seconds": round(seconds, 3),
            "erased": result["erased"],
            "events_tombstoned": result["events"],
            "store": result["store"],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--facts", type=int, default=200)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    print(json.dumps({"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"}))
    with tempfile.TemporaryDirectory() as folder:
        for backend in args.backends.split(","):
            if backend == "sqlite":
                target = str(Path(folder) / "erase.db")
                print(json.dumps(run(backend, target, args.users, args.facts)), flush=True)
            elif backend == "postgresql":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    import pgserver

                server = pgserver.get_server(Path(folder) / "pg", cleanup_mode="stop")
                try:
                    print(json.dumps(run(backend, server.get_uri(), args.users, args.facts)), flush=True)
                finally:
                    server.cleanup()
            else:
                parser.error(f"unknown backend {backend!r}")


if __name__ == "__main__":
    main()
