"""Page damage under ``memorist serve``: what /healthz says, what reads answer, and that
no write goes into the damaged file.

Run:  python bench/damage.py [--seeds 1-20] [--pages 1] [--memories 2000] [--reads 60] [--writes 10]

Builds one store (``--memories`` memories over 4 users, hashing embedder) and closes it
(checkpointed: the file holds everything). Then for each seed: copies it, writes random
bytes over ``--pages`` whole pages at random page numbers (any page: the header page,
b-tree interior pages, leaves, free pages), records the file's SHA-256, starts
``memorist serve`` on the copy as a user would, and measures

- whether ``serve`` starts (it may refuse a file whose header is gone), and what
  ``GET /healthz`` answers before and after the requests (200 ``ok`` / 503 ``damaged``);
- ``--reads`` reads (lists of a user, searches, gets by id): how many answer 200, 404,
  503 (the store's damage, said as such), and 500 (target 0); and how many gets by id
  answered 200 with a text other than the one stored (target 0);
- ``--writes`` adds: how many are accepted (2xx) and refused (503);
- after the server stops, whether the main file's SHA-256 is unchanged and how many
  bytes its ``-wal`` holds (target: unchanged whenever the damage was detected, and no
  write ever lands in a file known to be damaged).

A seed whose damage hit only free or unread pages may stay healthy: then writes are
allowed (the store works), and the file changes. The table says which.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from memorist import Memory

USERS = ("alex", "bo", "cy", "di")
WORDS = ("tea", "coffee", "hiking", "alps", "cello", "python", "garden", "paris", "train", "books", "chess", "ramen")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build(path: Path, memories: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """The base store; returns ``(user, memory id, text)`` of some of its memories."""
    ids: list[tuple[str, str, str]] = []
    with Memory(str(path), embedder="hashing") as m:
        per_user = memories // len(USERS)
        for user in USERS:
            for start in range(0, per_user, 250):
                batch = [
                    {"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(8)) + f" note {start + i}"}
                    for i in range(min(250, per_user - start))
                ]
                added = m.add(batch, user_id=user, infer=False)["results"]
                ids.extend((user, r["id"], r["memory"]) for r in added[:3])
    return ids


def damage(base: Path, target: Path, pages: int, rng: random.Random) -> list[int]:
    """Copy ``base`` to ``target`` and overwrite ``pages`` random whole pages; their numbers (1-based)."""
    shutil.copyfile(base, target)
    size = target.stat().st_size
    with target.open("r+b") as f:
        header = f.read(100)
        page_size = int.from_bytes(header[16:18], "big") or 65536
        count = size // page_size
        chosen = sorted(rng.sample(range(1, count + 1), min(pages, count)))
        for page in chosen:
            f.seek((page - 1) * page_size)
            f.write(rng.randbytes(page_size))
    return chosen


def serve(path: Path, port: int, log: Path) -> tuple[subprocess.Popen[bytes] | None, str]:
    env = {**os.environ, "MEMORIST_EMBEDDER": "hashing"}
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memorist", "serve", "--db", str(path), "--port", str(port),
             "--rate-limit", "1000000/min", "--burst", "1000000", "--no-access-log"],
            env=env, stdout=subprocess.DEVNULL, stderr=sink,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text(errors="replace").strip().splitlines()
            return None, (text[-1] if text else f"exit {proc.returncode}")[:160]
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc, ""
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    return None, "did not answer within 60 s"


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def health(client: httpx.Client) -> str:
    r = client.get("/healthz")
    try:
        status = r.json().get("status")
    except ValueError:
        status = "?"
    return f"{r.status_code} {status}"


def one_seed(base: Path, ids: list[tuple[str, str, str]], seed: int, args: argparse.Namespace, folder: Path) -> dict:
    rng = random.Random(seed)
    path = folder / f"damaged-{seed}.db"
    pages = damage(base, path, args.pages, rng)
    before = sha256(path)
    port = free_port()
    proc, refused = serve(path, port, folder / f"serve-{seed}.log")
    row: dict = {"seed": seed, "pages": pages, "started": proc is not None, "refused": refused}
    if proc is not None:
        reads: Counter[int] = Counter()
        writes: Counter[int] = Counter()
        wrong = 0  # a 200 get whose memory is not the one stored
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                row["health_before"] = health(client)
                for i in range(args.reads):
                    user, mid, text = ids[rng.randrange(len(ids))]
                    kind = i % 3
                    if kind == 0:
                        r = client.get("/api/memories/", params={"user_id": user, "limit": 50})
                    elif kind == 1:
                        r = client.post("/api/memories/search/", json={"query": " ".join(rng.sample(WORDS, 3)), "user_id": user})
                    else:
                        r = client.get(f"/api/memories/{user}/{mid}/")
                        wrong += r.status_code == 200 and r.json().get("memory") != text
                    reads[r.status_code] += 1
                for i in range(args.writes):
                    r = client.post("/api/memories/", json={"messages": f"written after the damage {i}",
                                                            "user_id": rng.choice(USERS), "infer": False})
                    writes[r.status_code] += 1
                row["health_after"] = health(client)
        finally:
            stop(proc)
        row["reads"] = dict(sorted(reads.items()))
        row["wrong"] = wrong
        row["writes"] = dict(sorted(writes.items()))
    row["unchanged"] = sha256(path) == before
    wal = Path(f"{path}-wal")
    row["wal_bytes"] = wal.stat().st_size if wal.exists() else 0
    return row


def seeds_of(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-20", help="seeds, e.g. 1-20 or 1,5,9")
    parser.add_argument("--pages", type=int, default=1, help="pages overwritten per seed")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=60)
    parser.add_argument("--writes", type=int, default=10)
    args = parser.parse_args()
    print(f"# bench/damage.py  {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.memories} memories, {args.pages} page(s) overwritten per seed, {args.reads} reads and {args.writes} writes")
    with tempfile.TemporaryDirectory(prefix="memorist-damage-") as tmp:
        folder = Path(tmp)
        base = folder / "base.db"
        ids = build(base, args.memories, random.Random(0))
        pages = base.stat().st_size // 4096
        print(f"base store: {base.stat().st_size:,} bytes (~{pages:,} pages of 4 KiB)")
        print("seed | pages hit | serve | /healthz before -> after | reads by status | writes by status | file unchanged | -wal bytes")
        rows = []
        for seed in seeds_of(args.seeds):
            row = one_seed(base, ids, seed, args, folder)
            rows.append(row)
            if row["started"]:
                print(f"{seed} | {row['pages']} | started | {row['health_before']} -> {row['health_after']} | {row['reads']} "
                      f"(wrong {row['wrong']}) | {row['writes']} | {row['unchanged']} | {row['wal_bytes']}", flush=True)
            else:
                print(f"{seed} | {row['pages']} | refused: {row['refused']} | - | - | - | {row['unchanged']} | {row['wal_bytes']}", flush=True)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{folder / f'damaged-{seed}.db'}{suffix}").unlink(missing_ok=True)
    started = [r for r in rows if r["started"]]
    damaged = [r for r in started if r["health_after"].startswith("503")]
    healthy = [r for r in started if r["health_after"].startswith("200")]
    reads: Counter[int] = Counter()
    for r in started:
        reads.update(r["reads"])
    written_into_damaged = [r for r in damaged if not r["unchanged"] or r["writes"].get(200, 0)]
    print()
    print(f"seeds: {len(rows)}; serve refused to start: {len(rows) - len(started)}; started: {len(started)} "
          f"(/healthz 503 damaged at the end: {len(damaged)}, 200 ok: {len(healthy)})")
    print(f"of those reported damaged, /healthz said so from the start: {sum(r['health_before'].startswith('503') for r in damaged)}")
    total = sum(reads.values())
    print(f"reads: {total}, by status {dict(sorted(reads.items()))}; 5xx other than 503: {sum(n for s, n in reads.items() if s >= 500 and s != 503)}; "
          f"gets by id answered 200 with another memory's text: {sum(r['wrong'] for r in started)}")
    print(f"stores reported damaged whose file changed or took a write: {len(written_into_damaged)} (target 0)")
    print(f"stores that stayed ok (damage in pages no read touched): files changed by their accepted writes: "
          f"{sum(not r['unchanged'] for r in healthy)} of {len(healthy)}")
    print(f"files unchanged where serve refused to start: {sum(r['unchanged'] for r in rows if not r['started'])} of {len(rows) - len(started)}")


if __name__ == "__main__":
    main()
