"""Slow clients against a real `memorist serve`: idle, slow-header and slow-body
connections held by one client, with the server's descriptor limit at 1024, while
/healthz and an add are timed. Bounded: a fixed flood, a fixed number of probes.

    python bench/slow_clients.py [--connections 1100] [--probes 20] [--nofile 1024]

Prints the flood it held and the latency of the probes made during it (every probe
must answer). Only the loopback address is used.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

HEADS = {
    "idle": b"",
    "slow-header": b"POST /api/memories/ HTTP/1.1\r\nHost: localhost\r\nX-Slow: ",
    "slow-body": b"POST /api/memories/ HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"messa",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(db: str, nofile: int, *args: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "MEMORY_"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memorist", "--db", db, "--embedder", "hashing", "serve", "--create", "--port", str(port),
         "--no-access-log", "--log-level", "error", "--rate-limit", "off", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, preexec_fn=limit,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("serve did not start")


class Flood:
    """``n`` connections, a third of each kind, reopened as the server closes them,
    each slow one sending a byte a second, until :meth:`stop`."""

    def __init__(self, port: int, n: int) -> None:
        self.port = port
        self.kinds = [list(HEADS)[i % 3] for i in range(n)]
        self.socks: list[socket.socket | None] = [None] * n
        self.opened = 0
        self.reopened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, i: int) -> None:
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect_ex(("127.0.0.1", self.port))
            time.sleep(0)
            head = HEADS[self.kinds[i]]
            if head:
                with contextlib.suppress(OSError):
                    s.send(head)
        finally:
            self.socks[i] = s
            self.opened += 1

    def start(self) -> Flood:
        for i in range(len(self.socks)):
            self._open(i)
        self._thread.start()
        return self

    def open_count(self) -> int:
        return sum(1 for s in self.socks if s is not None)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for i, s in enumerate(self.socks):
                if s is None:
                    continue
                closed = False
                try:
                    data = s.recv(65536)
                    closed = data == b"" or data.startswith(b"HTTP/1.1 408")
                except BlockingIOError:
                    pass
                except OSError:
                    closed = True
                if not closed and self.kinds[i] != "idle":
                    try:
                        s.send(b"a")
                    except BlockingIOError:
                        pass
                    except OSError:
                        closed = True
                if closed:
                    s.close()
                    self.reopened += 1
                    self._open(i)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for s in self.socks:
            if s is not None:
                s.close()


def probe(base: str, n: int, timeout: float = 10.0) -> dict[str, list[float]]:
    """``n`` health checks and ``n`` adds, each on a new connection; their latencies (s)."""
    out: dict[str, list[float]] = {"healthz": [], "add": [], "failed": []}
    for i in range(n):
        for name in ("healthz", "add"):
            t = time.perf_counter()
            try:
                if name == "healthz":
                    r = httpx.get(f"{base}/healthz", timeout=timeout)
                else:
                    r = httpx.post(f"{base}/api/memories/", timeout=timeout,
                                   json={"messages": [{"role": "user", "content": f"probe {i} likes tea"}], "user_id": "probe", "infer": False})
                ok = r.status_code == 200
            except httpx.HTTPError:
                ok = False
            (out[name] if ok else out["failed"]).append(time.perf_counter() - t)
        time.sleep(0.2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--connections", type=int, default=1100)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--nofile", type=int, default=1024)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.connections * 2 + 256)), hard))
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = start(str(Path(tmp) / "bench.db"), args.nofile)
        try:
            quiet = probe(base, 5)
            flood = Flood(int(base.rsplit(":", 1)[1]), args.connections).start()
            time.sleep(2)
            during = probe(base, args.probes)
            held = flood.open_count()
            flood.stop()
        finally:
            proc.terminate()
            try:
                log, _ = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                log, _ = proc.communicate()
                print("serve did not stop within 15 s of SIGTERM", file=sys.stderr)
            print(log[-3000:], file=sys.stderr)

    def stats(xs: list[float]) -> dict[str, float]:
        xs = sorted(xs)
        if not xs:
            return {}
        return {"n": len(xs), "p50_ms": round(1000 * xs[len(xs) // 2], 1), "max_ms": round(1000 * xs[-1], 1)}

    print(json.dumps({
        "server_nofile": args.nofile,
        "flood_connections": args.connections,
        "flood_kinds": "idle, slow-header, slow-body (a third each, a byte a second, reopened when closed)",
        "flood_opened_total": flood.opened,
        "flood_reopened": flood.reopened,
        "flood_open_at_end": held,
        "quiet": {k: stats(v) for k, v in quiet.items() if k != "failed"},
        "during_flood": {k: stats(v) for k, v in during.items() if k != "failed"},
        "failed_during_flood": len(during["failed"]),
    }, indent=2))


if __name__ == "__main__":
    main()
