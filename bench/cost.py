"""What one request can cost: CPU seconds of the costliest searches and listings
within the bounds of one call, of the issue's 40,000-branch filter (now refused),
and of a search abandoned by its client against a real `memorist serve`.

    python bench/cost.py [--memories 5000]

Prints one line per case (CPU seconds of this process, or of the server for the
served cases). Bounded: one store of --memories memories, one call per case.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from memorist import Memory
from memorist.policies.filters import MAX_CHECKS, MAX_NODES


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def server_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def case(name: str, call: Any) -> None:
    start, wall = cpu(), time.perf_counter()
    try:
        out = f"{len(call()['results'])} results"
    except Exception as exc:  # the bounds answer with an error: that is the figure
        out = f"{type(exc).__name__}: {str(exc)[:90]}"
    print(f"{name:<58} cpu {cpu() - start:6.2f} s  wall {time.perf_counter() - wall:6.2f} s  -> {out}")


def no_match(n: int) -> dict[str, Any]:
    return {"OR": [{"cat": f"x{i}"} for i in range(n)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=5000)
    args = parser.parse_args()
    n = args.memories
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "cost.db")
        with Memory(db, embedder="hashing") as m:
            for i in range(n):
                m.add(f"note {i}: the user likes item {i} and topic {i % 37}", user_id="u", infer=False, metadata={"cat": f"c{i % 50}"})
            for i in range(2000):
                m.add(f"long note {i}", user_id="long", infer=False, metadata={"big": f"word{i} " * 5000})
            widest = MAX_NODES - 1  # the OR itself is a condition
            print(f"store: {n:,} memories of one user; bounds: {MAX_NODES:,} conditions, {MAX_CHECKS:,} checks per call")
            case("search, the issue's 40,000-branch OR", lambda: m.search("item topic", user_id="u", filters=no_match(40_000)))
            case(f"search, {widest}-branch OR matching nothing", lambda: m.search("item topic", user_id="u", filters=no_match(widest)))
            case(f"get_all, {widest}-branch OR matching nothing", lambda: m.get_all(user_id="u", filters=no_match(widest), limit=100))
            contains = {"OR": [{"big": {"contains": f"zz{i}"}} for i in range(widest)]}
            case(f"search, {widest} 'contains' over 2,000 memories of 40 KB metadata",
                 lambda: m.search("note", user_id="long", filters=contains))
            case(f"search, {widest} 'contains' over {n:,} short values",
                 lambda: m.search("item", user_id="u", filters={"OR": [{"cat": {"contains": f"zz{i}"}} for i in range(widest)]}))
            for i in range(400):
                m.add(f"nested note {i}", user_id="nested", infer=False, metadata={"k": [[0.5] * 15_000]})
            # Values nested in a compared list: each condition walks the stored list.
            nested = {"OR": [{"k": {"eq": [[0.5] * 14_999 + [float(j)]]}} for j in range(1, 17)]}
            case("search, 16 'eq' of nested 15,000-number lists, 400 memories",
                 lambda: m.search("note", user_id="nested", filters=nested))
            case("search, 100,000-character query", lambda: m.search(("item topic note likes user " * 4000)[:100_000], user_id="u"))
            case("search, limit 1,000,000", lambda: m.search("item", user_id="u", limit=1_000_000))
            case("get_all, limit 1,000,000", lambda: m.get_all(user_id="u", limit=1_000_000))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "MEMORY_"))}
        proc = subprocess.Popen([sys.executable, "-m", "memorist", "--db", db, "--embedder", "hashing", "serve", "--port", str(port),
                                 "--no-access-log", "--log-level", "critical", "--rate-limit", "off"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            body = {"query": "item", "user_id": "u", "filters": no_match(widest)}
            before = server_cpu(proc.pid)
            httpx.post(f"{url}/api/memories/search/", json=body, timeout=300)
            whole = server_cpu(proc.pid) - before
            print(f"{'served search, same filter, answered':<58} server cpu {whole:6.2f} s")
            before = server_cpu(proc.pid)
            with contextlib.suppress(httpx.ReadTimeout):
                httpx.post(f"{url}/api/memories/search/", json=body, timeout=httpx.Timeout(5, read=0.1))
            time.sleep(whole * 2 + 1)
            print(f"{'served search, same filter, client gone after 0.1 s':<58} server cpu {server_cpu(proc.pid) - before:6.2f} s")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
