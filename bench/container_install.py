"""The container image's install, measured without Docker: how long ``docker/install.sh``
(the Dockerfile's install line: the wheel with the image's extras, then the model
loaded once) takes in a fresh directory, and how much it installs.

Run:  python bench/container_install.py [--extras server,postgres,embeddings] [--model sentence-transformers]

Builds the wheel as the Dockerfile's first stage does (``pip wheel --no-deps``), then runs
``docker/install.sh`` with ``MEMORIST_VENV`` and ``MEMORIST_CACHE_DIR`` in a temporary
folder, as many times as ``--runs`` (each into a new folder; pip's cache is used, as
on a machine that installed these packages before). Prints the wall time of each
run, the size of the virtual environment and of the model's cache, and the largest
installed distributions. The image adds these to the python:3.11-slim base.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", default="server,postgres,embeddings", help="the image's extras (install.sh's default)")
    parser.add_argument("--model", default="sentence-transformers", help="the embedder loaded at build time ('' for none)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the last run's folder")
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if sys.prefix not in p)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"extras: {args.extras!r}  model loaded at build: {args.model or '(none)'}")

    with tempfile.TemporaryDirectory(prefix="memorist-wheel-") as wheels:
        source = Path(wheels) / "src"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy2(ROOT / name, source / name)
        shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        start = time.perf_counter()
        subprocess.run(["pip", "wheel", "-q", "--no-deps", "--wheel-dir", wheels, str(source)], check=True, env=env, cwd=wheels)
        print(f"wheel built in {time.perf_counter() - start:.1f} s")
        (wheel,) = Path(wheels).glob("memorist-*.whl")

        for run in range(args.runs):
            folder = Path(tempfile.mkdtemp(prefix="memorist-image-"))
            run_env = {**env, "MEMORIST_VENV": str(folder / "venv"), "MEMORIST_CACHE_DIR": str(folder / "cache"),
                       "MEMORIST_EXTRAS": args.extras, "MEMORIST_IMAGE_MODEL": args.model}
            start = time.perf_counter()
            done = subprocess.run(["sh", str(ROOT / "docker" / "install.sh"), str(wheel)], env=run_env,
                                  capture_output=True, text=True)
            took = time.perf_counter() - start
            if done.returncode != 0:
                print(done.stdout[-2000:], done.stderr[-4000:], file=sys.stderr)
                return 1
            venv, cache = size(folder / "venv"), size(folder / "cache") if (folder / "cache").exists() else 0
            print(f"run {run + 1}: install.sh {took:.1f} s; venv {mb(venv)}, model cache {mb(cache)}, total {mb(venv + cache)}")
            if run == args.runs - 1:
                site = next((folder / "venv" / "lib").glob("python*/site-packages"))
                sizes = sorted(((size(p), p.name) for p in site.iterdir() if p.is_dir() and not p.name.endswith(".dist-info")),
                               reverse=True)
                print("largest:", ", ".join(f"{name} {mb(n)}" for n, name in sizes[:8]))
            if args.keep and run == args.runs - 1:
                print(f"kept: {folder}")
            else:
                shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
