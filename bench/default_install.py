"""The default install, as a new user gets it: size, install time, first search.

Run:  python bench/default_install.py [--runs 2] [--keep]

Each run makes a fresh virtual environment and runs the README's first install
command in it (``pip install -c constraints.txt ./packages/memorist-minilm -e .``,
the model's wheel built from its weights on the way), timed. The first run fills
pip's cache (downloads); the later ones install from it, which is the figure the
target is about. Then, in the last environment:

- the installed size: the environment's site-packages, and the same without pip
  and setuptools (what any environment has);
- whether torch, transformers, sentence-transformers, tokenizers or the Hugging
  Face client were installed (they must not be);
- the first search: a fresh process that imports memorist, opens a new store, adds
  two memories and searches (what `memorist demo` does first), its wall time and
  the time of each step, and which heavy modules it imported;
- `memorist demo`'s wall time.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INSTALL = ["install", "-q", "-c", "constraints.txt", "./packages/memorist-minilm", "-e", "."]
HEAVY = ["torch", "transformers", "sentence_transformers", "tokenizers", "huggingface_hub", "onnx"]

FIRST_SEARCH = f"HEAVY = {HEAVY!r}\n" + r"""
import json, sys, tempfile, time
t0 = time.perf_counter()
from memorist import Memory
t1 = time.perf_counter()
m = Memory(tempfile.mkdtemp() + "/first.db")
t2 = time.perf_counter()
m.add("I get confused when adding fractions with different denominators", user_id="learner", infer=False)
m.add("My sister lives in Lisbon", user_id="learner", infer=False)
t3 = time.perf_counter()
hits = m.search("How do I add 1/2 + 1/3?", user_id="learner")["results"]
t4 = time.perf_counter()
print(json.dumps({
    "import_s": round(t1 - t0, 3), "open_s": round(t2 - t1, 3), "first_add_s": round(t3 - t2, 3),
    "first_search_s": round(t4 - t3, 3), "embedder": m.embedder.name, "runtime": m.embedder.runtime,
    "top_hit": hits[0]["memory"],
    "heavy_modules_loaded": sorted({x.split(".")[0] for x in sys.modules} & set(HEAVY)),
}))
"""


def du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = Path(root) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python*/site-packages"))


def one_install(where: Path) -> tuple[Path, float, float]:
    """A fresh venv with the install in it; the install's wall and CPU seconds (the
    CPU time, user + system of pip and its children, does not grow with the load
    other processes put on the machine)."""
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([str(venv / "bin" / "pip"), *INSTALL], cwd=REPO, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return venv, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="installs, each in a fresh venv (the first fills the cache)")
    parser.add_argument("--keep", action="store_true", help="keep the last environment and print its path")
    args = parser.parse_args()
    result: dict[str, object] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}",
        "command": "pip " + " ".join(INSTALL),
    }
    times, cpu = [], []
    work = Path(tempfile.mkdtemp(prefix="memorist-install-"))
    venv = work
    try:
        for run in range(args.runs):
            if run:
                shutil.rmtree(work / "venv")
            venv, seconds, cpu_seconds = one_install(work)
            times.append(round(seconds, 1))
            cpu.append(round(cpu_seconds, 1))
        result["install_seconds"] = times
        result["install_cpu_seconds"] = cpu
        result["load_average"] = [round(x, 1) for x in os.getloadavg()]
        sp = site_packages(venv)
        size = du(venv)
        base = sum(du(p) for p in sp.iterdir() if p.name.split("-")[0].lower() in ("pip", "setuptools", "_distutils_hack", "distutils-precedence.pth"))
        result["venv_mb"] = round(size / 1e6, 1)
        result["venv_mb_without_pip_setuptools"] = round((size - base) / 1e6, 1)
        listed = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=json"], capture_output=True, text=True, check=True)
        names = sorted(p["name"].lower() for p in json.loads(listed.stdout))
        result["packages"] = len(names)
        result["heavy_packages_installed"] = [n for n in names if n in ("torch", "transformers", "sentence-transformers", "tokenizers", "huggingface-hub")]
        largest = sorted(((du(p), p.name) for p in sp.iterdir() if p.is_dir()), reverse=True)[:8]
        result["largest_mb"] = {name: round(size / 1e6, 1) for size, name in largest}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "PYTHONPATH"))}
        env["MEMORIST_CACHE_DIR"] = str(work / "cache")
        started = time.perf_counter()
        first = subprocess.run([str(venv / "bin" / "python"), "-c", FIRST_SEARCH], capture_output=True, text=True, env=env, cwd=work)
        wall = time.perf_counter() - started
        if first.returncode:
            print(first.stderr, file=sys.stderr)
            return 1
        result["first_search_process"] = {"wall_s": round(wall, 2), **json.loads(first.stdout)}
        started = time.perf_counter()
        demo = subprocess.run([str(venv / "bin" / "memorist"), "demo"], capture_output=True, text=True, env=env, cwd=work)
        result["memorist_demo_wall_s"] = round(time.perf_counter() - started, 2)
        result["memorist_demo_ok"] = demo.returncode == 0 and "all-MiniLM-L6-v2" in demo.stdout
        if args.keep:
            result["kept"] = str(venv)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
