"""The memory service under load: requests/s, latency, and its overhead per request.

    python bench/service.py [--clients 8] [--size 10000] [--requests 200] [--embedder hashing]
    python bench/service.py --postgres [--processes 1,2,4] [--db postgresql://...]

Builds one store with ``--clients`` users of ``--size`` memories each, starts
``memorist serve`` on it (one process, as a user would), then measures in one run:

- in-process: the same ``search`` and ``add(infer=False)`` calls on a ``Memory`` of
  the same file, one after the other (the baseline);
- one client, one request at a time: the whole HTTP round trip (keep-alive), and
  its overhead against the in-process call (target: p50 <= 2 ms);
- ``--clients`` concurrent clients, each on its own user: requests/s, p50/p95 and
  errors (target: none).

With ``--postgres`` the store is a PostgreSQL database (a server started with
pgserver in a temporary folder, or the one ``--db`` names, where a new database is
created): the same store is built, then served by 1, 2 and 4 ``memorist serve``
processes at once (``--processes``), the clients spread over them round-robin, and
requests/s and p50/p95 of the concurrent clients are measured for each count.

Memories are sentences sampled from LoCoMo's word frequencies, queries LoCoMo's
questions (as in bench/core.py). Record runs in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
from core import corpus_model, pct, sentence

from memorist import Memory
from memorist.store import redact


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_store(path: str, embedder: str, users: int, size: int, rng: random.Random, words, weights) -> None:
    with Memory(path, embedder=embedder) as m:
        for u in range(users):
            for start in range(0, size, 500):
                batch = [{"role": "user", "content": sentence(rng, words, weights)} for _ in range(min(500, size - start))]
                m.add(batch, user_id=f"user{u}", infer=False)
            print(f"  user{u}: {size} memories", flush=True)


def start_server(path: str, embedder: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``memorist serve`` as a user runs it (access log off, as in production behind a proxy)."""
    env = {**os.environ, "MEMORIST_EMBEDDER": embedder}
    with log.open("wb") as sink:  # a file, not a pipe nobody reads (it would fill and block)
        proc = subprocess.Popen(
            [sys.executable, "-m", "memorist", "serve", "--db", path, "--port", str(port),
             "--rate-limit", "1000000/min", "--burst", "1000000", "--no-access-log"],
            env=env, stdout=subprocess.DEVNULL, stderr=sink,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"memorist serve exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("memorist serve did not answer /healthz within 120 s")


def load(bases: list[str], clients: int, requests: int, seed: int, questions, words, weights) -> tuple[dict, list[str], dict]:
    """``clients`` concurrent clients, client c on user c and on server c mod len(bases):
    ``requests`` searches each, then ``requests`` adds each. Returns the latencies
    (ms) per operation, the errors, and the wall time per operation."""
    results: dict[str, list[float]] = {"search": [], "add": []}
    errors: list[str] = []
    lock = threading.Lock()
    walls: dict[str, float] = {}

    def client(c: int, op: str, barrier: threading.Barrier) -> None:
        crng = random.Random(seed * 100 + c)
        base = bases[c % len(bases)]
        # Each its own client of the service (development mode tells callers apart by
        # address and User-Agent): many clients, not one client's burst.
        with httpx.Client(timeout=120, headers={"User-Agent": f"bench-client-{c}"}) as http:
            barrier.wait()
            for _ in range(requests):
                start = time.perf_counter()
                try:
                    if op == "search":
                        r = http.post(f"{base}/search/", json={"query": crng.choice(questions), "user_id": f"user{c}", "limit": 5})
                    else:
                        r = http.post(f"{base}/", json={"messages": sentence(crng, words, weights), "user_id": f"user{c}", "infer": False})
                    if r.status_code != 200:
                        raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
                except Exception as exc:  # counted, reported
                    with lock:
                        errors.append(f"{op}: {exc}")
                    continue
                with lock:
                    results[op].append((time.perf_counter() - start) * 1000)

    for op in ("search", "add"):
        barrier = threading.Barrier(clients)
        threads = [threading.Thread(target=client, args=(c, op, barrier)) for c in range(clients)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        walls[op] = time.perf_counter() - start
    return results, errors, walls


def postgres_url(db: str | None, folder: str) -> tuple[str, object]:
    """A new, empty database: on the server ``db`` names, or on one pgserver starts
    in ``folder``. Returns its URL and the server handle (None for --db)."""
    import psycopg

    server = None
    if db is None:
        import pgserver

        server = pgserver.get_server(Path(folder) / "pg", cleanup_mode="stop")
        db = server.get_uri()
    name = f"memorist_service_{os.getpid()}"
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(db)
    return urlunsplit(parts._replace(path=f"/{name}")), server


def main_postgres(args: argparse.Namespace, rng: random.Random) -> int:
    words, weights, questions = corpus_model()
    counts = [int(n) for n in args.processes.split(",")]
    print(f"# bench/service.py --postgres: {args.clients} clients, {args.size:,} memories per user, "
          f"embedder {args.embedder}, memorist serve processes {counts}")
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    failed = False
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        url, server = postgres_url(args.db, tmp)
        print(f"store: {redact(url)}")
        print("building the store ...", flush=True)
        build_store(url, args.embedder, args.clients, args.size, rng, words, weights)
        for n in counts:
            servers = []
            try:
                for i in range(n):
                    port = free_port()
                    servers.append((start_server(url, args.embedder, port, Path(tmp) / f"serve-{n}-{i}.log"), port))
                bases = [f"http://127.0.0.1:{port}/api/memories" for _, port in servers]
                with httpx.Client(timeout=120) as http:  # warm every process: model, pools, first queries
                    for c in range(args.clients):
                        for base in bases:
                            http.post(f"{base}/search/", json={"query": questions[c], "user_id": f"user{c}"}).raise_for_status()
                results, errors, walls = load(bases, args.clients, args.requests, args.seed, questions, words, weights)
            finally:
                for proc, _ in servers:
                    proc.terminate()
                    proc.wait(30)
            failed |= bool(errors)
            rows.append((n, results, errors, walls))
            print(f"  {n} process{'es' if n > 1 else ''}: done", flush=True)
        if server is not None:
            server.cleanup()  # type: ignore[attr-defined]  # before its folder goes
    print("\n| memorist serve processes | search req/s | search p50 / p95 ms | add req/s | add p50 / p95 ms | errors |")
    print("|---|---|---|---|---|---|")
    for n, results, errors, walls in rows:
        cells = []
        for op in ("search", "add"):
            rate = len(results[op]) / walls[op]
            cells.append(f"{rate:.0f} | {summary(results[op]) if results[op] else '-'}")
        print(f"| {n} | {' | '.join(cells)} | {len(errors)} |")
        for e in errors[:3]:
            print("error:", e)
    print("\nverdict:", "FAIL" if failed else "ok (no error under load)")
    return 1 if failed else 0


def timed(call, n: int) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        call(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


def summary(ms: list[float]) -> str:
    return f"{statistics.median(ms):.2f} / {pct(ms, 95):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--size", type=int, default=10_000, help="memories per user")
    parser.add_argument("--requests", type=int, default=200, help="requests per client and operation")
    parser.add_argument("--embedder", default="hashing")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--postgres", action="store_true", help="serve a PostgreSQL store with several processes")
    parser.add_argument("--processes", default="1,2,4", help="with --postgres: memorist serve processes per run")
    parser.add_argument("--db", default=None, help="with --postgres: a server URL to create the database on (default: pgserver)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    if args.postgres:
        return main_postgres(args, rng)
    words, weights, questions = corpus_model()
    print(f"# bench/service.py: {args.clients} clients, {args.size:,} memories per user, embedder {args.embedder}")
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "service.db")
        print("building the store ...", flush=True)
        build_store(path, args.embedder, args.clients, args.size, rng, words, weights)
        queries = [rng.choice(questions) for _ in range(args.requests)]
        texts = [sentence(rng, words, weights) for _ in range(args.requests)]

        # In-process baseline (its own Memory; closed before the server starts writing).
        with Memory(path, embedder=args.embedder) as m:
            for _ in range(20):  # load the index and the model, warm the caches
                m.search(queries[1], user_id="user0")
            local_search = timed(lambda i: m.search(queries[i], user_id="user0", limit=5), args.requests)
            local_add = timed(lambda i: m.add(texts[i], user_id="user0", infer=False), args.requests)

        port = free_port()
        server = start_server(path, args.embedder, port, Path(tmp) / "serve.log")
        base = f"http://127.0.0.1:{port}/api/memories"
        try:
            with httpx.Client(timeout=120) as http:
                # Each user's first search loads its index (a cold start, timed apart):
                # the figures below are the steady state.
                cold = []
                for u in range(args.clients):
                    start = time.perf_counter()
                    http.post(f"{base}/search/", json={"query": queries[0], "user_id": f"user{u}"}).raise_for_status()
                    cold.append((time.perf_counter() - start) * 1000)
                for _ in range(20):
                    http.post(f"{base}/search/", json={"query": queries[1], "user_id": "user0"}).raise_for_status()
                served_search = timed(
                    lambda i: http.post(f"{base}/search/", json={"query": queries[i], "user_id": "user0", "limit": 5}).raise_for_status(),
                    args.requests,
                )
                served_add = timed(
                    lambda i: http.post(f"{base}/", json={"messages": texts[i], "user_id": "user0", "infer": False}).raise_for_status(),
                    args.requests,
                )

            results, errors, walls = load([base], args.clients, args.requests, args.seed, questions, words, weights)
        finally:
            server.terminate()
            server.wait(30)

    print("\n| operation | in-process p50 / p95 ms | served, 1 client p50 / p95 ms | overhead p50 ms | "
          f"{args.clients} clients req/s | {args.clients} clients p50 / p95 ms | errors |")
    print("|---|---|---|---|---|---|---|")
    failed = bool(errors)
    for op, local, served in (("search", local_search, served_search), ("add (infer=False)", local_add, served_add)):
        key = "search" if op == "search" else "add"
        overhead = statistics.median(served) - statistics.median(local)
        failed |= overhead > 2.0
        rate = len(results[key]) / walls[key]
        print(f"| {op} | {summary(local)} | {summary(served)} | {overhead:.2f} | {rate:.0f} | "
              f"{summary(results[key]) if results[key] else '-'} | {sum(e.startswith(key) for e in errors)} |")
    print(f"\nfirst search of a user (loads its {args.size:,}-memory index), p50 of {args.clients}: {statistics.median(cold):.0f} ms")
    for e in errors[:5]:
        print("error:", e)
    print("\nverdict:", "FAIL" if failed else "ok (overhead p50 <= 2 ms, no error under load)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
