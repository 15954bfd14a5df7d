"""Start-up: how long a whole ``memorist search`` (and ``memorist add``) process takes.

Run:  python bench/startup.py [--size 10000] [--runs 10] [--runtimes auto,torch]

Builds one user's store of ``--size`` memories with the MiniLM embedder (or uses
``--db``), then runs the CLI as a user would, a fresh process each time:

- ``memorist --db <store> search --user bench "<a LoCoMo question>"``
- ``memorist --db <store> add --user bench --no-infer "<a sentence>"``

once per runtime of the embedder (``MEMORIST_EMBED_RUNTIME``: ``auto`` takes ONNX when
the ``onnx`` extra is installed), runs alternating between runtimes so that both
see the same machine. The first run of each is a warm-up (disk cache, a first ONNX
export) and is not counted. Prints the median, min and max wall time of each, and
where a search process's time goes: the interpreter, ``import memorist.cli``, and
the rest (opening the store, loading its index and the model, embedding, output).

Bytecode: with ``PYTHONDONTWRITEBYTECODE=1`` (set on these VMs) and an editable
install, no ``.pyc`` is ever written, so every process compiles the Memorist modules
it imports (about 0.1 s for a search). A wheel install is compiled by pip. The
script prints how many of Memorist's modules have current bytecode; ``--compile``
writes it first (``compileall``), to measure what an installed Memorist does.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def memorist_command() -> list[str]:
    return [sys.executable, "-m", "memorist"]


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    run = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if run.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{run.stderr}")
    return seconds


def bytecode_status() -> tuple[int, int]:
    """(modules of the memorist package with a current .pyc, all its modules)."""
    spec = importlib.util.find_spec("memorist")
    assert spec is not None and spec.origin is not None
    sources = list(Path(spec.origin).parent.rglob("*.py"))
    current = 0
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        if cached.exists() and cached.stat().st_mtime >= source.stat().st_mtime:
            current += 1
    return current, len(sources)


def build(db: str, size: int, rng: random.Random) -> None:
    sys.path.insert(0, str(HERE))
    from core import corpus_model, sentence

    from memorist import Memory

    words, weights, _ = corpus_model()
    memory = Memory(db, embedder="sentence-transformers")
    t0 = time.perf_counter()
    for start in range(0, size, 1000):
        texts = [sentence(rng, words, weights) for _ in range(min(1000, size - start))]
        memory.add([{"role": "user", "content": t} for t in texts], user_id="bench", infer=False)
    memory.close()
    print(f"built {size:,} memories in {time.perf_counter() - t0:.0f} s: {db}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--runtimes", default="auto,torch", help="values of MEMORIST_EMBED_RUNTIME to compare")
    parser.add_argument("--db", help="an existing store to search (default: build one)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--compile", action="store_true", help="write Memorist's bytecode first (compileall)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"command: python bench/startup.py {' '.join(sys.argv[1:])}")
    if args.compile:
        spec = importlib.util.find_spec("memorist")
        assert spec is not None and spec.origin is not None
        compileall.compile_dir(str(Path(spec.origin).parent), quiet=1)
    current, total = bytecode_status()
    print(f"bytecode: {current} of {total} memorist modules have a current .pyc")
    sys.path.insert(0, str(HERE))
    from core import corpus_model, sentence

    words, weights, questions = corpus_model()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or os.path.join(tmp, "startup.db")
        if not args.db:
            build(db, args.size, rng)
        base = {**os.environ, "HF_HUB_OFFLINE": "1"}
        base.pop("MEMORIST_DB", None)
        envs = {r: {**base, "MEMORIST_EMBED_RUNTIME": r} for r in runtimes}
        times: dict[tuple[str, str], list[float]] = {}
        for i in range(args.runs + 1):
            for runtime in runtimes if i % 2 else list(reversed(runtimes)):
                env = envs[runtime]
                search = [*memorist_command(), "--db", db, "search", "--user", "bench", rng.choice(questions)]
                add = [*memorist_command(), "--db", db, "add", "--user", "bench", "--no-infer", sentence(rng, words, weights)]
                for name, argv in (("search", search), ("add", add)):
                    seconds = timed(argv, env)
                    if i:  # the first round warms up
                        times.setdefault((name, runtime), []).append(seconds)
        interpreter = [timed([sys.executable, "-c", "pass"], base) for _ in range(args.runs)]
        cli_import = [timed([sys.executable, "-c", "import memorist.cli"], base) for _ in range(args.runs)]
    print()
    print(f"| whole process, s ({args.runs} runs) | MEMORIST_EMBED_RUNTIME | median | min | max |")
    print("|---|---|---|---|---|")
    for (name, runtime), values in times.items():
        print(f"| memorist {name} | {runtime} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} |")
    print(f"| python -c pass | | {statistics.median(interpreter):.2f} | {min(interpreter):.2f} | {max(interpreter):.2f} |")
    print(f"| python -c 'import memorist.cli' | | {statistics.median(cli_import):.2f} | {min(cli_import):.2f} | {max(cli_import):.2f} |")


if __name__ == "__main__":
    main()
