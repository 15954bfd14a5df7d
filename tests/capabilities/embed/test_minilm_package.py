"""The default install's all-MiniLM-L6-v2: the ONNX model of memorist-model-minilm-l6-v2
(packages/memorist-minilm), its vectors against sentence-transformers', and the
process that searches with it (no torch, no export, no download).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from base64 import urlsafe_b64encode
from pathlib import Path

import numpy as np
import pytest

from memorist import Memory
from memorist.embed import sentence_transformers as st
from memorist.embed.sentence_transformers import SentenceTransformerEmbedder

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "packages" / "memorist-minilm"
ONNX_MODEL = st.bundled_onnx_path()
WEIGHTS = st.bundled_torch_path()
if ONNX_MODEL is None:  # the default install includes it: a missing model is a broken install
    pytest.fail("memorist-model-minilm-l6-v2 is not installed; run: pip install ./packages/memorist-minilm", pytrace=False)
if WEIGHTS is None:  # the dev install includes the torch extra, the reference
    pytest.fail("the torch extra is not installed; run: pip install -c constraints.txt ./packages/memorist-minilm -e '.[dev]'", pytrace=False)


def _texts() -> list[str]:
    from test_wordpiece import EDGE, stream_texts  # type: ignore[import-not-found]

    generated = [f"Memory number {i}: went hiking with {i % 4} friends near the lake." for i in range(45)]
    return EDGE + stream_texts()[::2] + generated  # a few hundred: a minute on a busy 2-core machine


@pytest.fixture(scope="module")
def embedders() -> tuple[SentenceTransformerEmbedder, SentenceTransformerEmbedder]:
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MEMORIST_EMBED_RUNTIME", raising=False)
        return SentenceTransformerEmbedder(), SentenceTransformerEmbedder(runtime="torch")


def test_the_default_embedder_runs_the_converted_model(
    embedders: tuple[SentenceTransformerEmbedder, SentenceTransformerEmbedder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORIST_CACHE_DIR", str(tmp_path / "cache"))
    default, _ = embedders
    assert default.runtime == "onnx"
    assert (default.name, default.dim) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    assert default.embed(["a first text"]).shape == (1, 384)
    assert not (tmp_path / "cache").exists()  # run as it comes: nothing exported, nothing cached


def test_vectors_are_sentence_transformers_vectors(embedders: tuple[SentenceTransformerEmbedder, SentenceTransformerEmbedder]) -> None:
    default, reference = embedders
    texts = _texts()
    assert len(texts) >= 300
    ours, theirs = default.embed(texts), reference.embed(texts)
    cosines = (ours * theirs).sum(axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    assert float(cosines.min()) >= 0.9999, texts[int(cosines.argmin())]
    assert float(np.abs(ours - theirs).max()) < 1e-4
    for text in texts[:: len(texts) // 10]:  # a query is the same vector as a stored text
        assert float(np.abs(default.embed_query(text) - reference.embed_query(text)).max()) < 1e-4


_FIRST_SEARCH = (
    "import sys\n"
    "from memorist import Memory\n"
    "m = Memory(':memory:')\n"
    "m.add('I like green tea', user_id='u', infer=False)\n"
    "m.add('My sister lives in Lisbon', user_id='u', infer=False)\n"
    "hits = m.search('what do I drink?', user_id='u')['results']\n"
    "print(m.embedder.name, m.embedder.runtime, hits[0]['memory'])\n"
    "heavy = ('torch', 'transformers', 'sentence_transformers', 'tokenizers', 'huggingface_hub', 'onnx')\n"
    "print('LOADED', sorted({x.split('.')[0] for x in sys.modules} & set(heavy)))\n"
)


def test_a_process_that_adds_and_searches_imports_no_torch(tmp_path: Path) -> None:
    env = {**os.environ, "MEMORIST_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MEMORIST_EMBED_RUNTIME", None)
    run = subprocess.run([sys.executable, "-c", _FIRST_SEARCH], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert "sentence-transformers/all-MiniLM-L6-v2 onnx I like green tea" in run.stdout
    assert "LOADED []" in run.stdout
    assert run.stderr == ""  # no export notice, no fallback notice
    assert not (tmp_path / "cache").exists()


def test_a_process_that_adds_and_searches_leaves_onnx_runtime_s_telemetry_off(tmp_path: Path) -> None:
    # ONNX Runtime's telemetry (on by default on Linux and macOS) writes a device id and
    # queued events under ~/.cache/Microsoft and looks up its collector on the network.
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "MEMORIST_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("MEMORIST_EMBED_RUNTIME", "ORT_DISABLE_TELEMETRY"):
        env.pop(name, None)
    run = subprocess.run([sys.executable, "-c", _FIRST_SEARCH + "\nimport os, time; time.sleep(2); print('ORT', os.environ['ORT_DISABLE_TELEMETRY'])"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert "ORT 1" in run.stdout
    assert not any(home.rglob("*")), sorted(str(p) for p in home.rglob("*"))


def test_the_model_folder_is_what_its_build_recorded() -> None:
    folder = Path(ONNX_MODEL)
    record = json.loads((folder / "conversion.json").read_text())
    assert record["model_onnx_sha256"] == hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest()
    assert record["source_sha256"]["tokenizer.json"] == hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest()
    assert (record["dimension"], record["max_seq_length"], record["pooling"]) == (384, 256, "mean")
    dist = importlib.metadata.distribution("memorist-model-minilm-l6-v2")
    assert dist.metadata["License-Expression"] == "Apache-2.0"
    licenses = {Path(str(f)).name for f in dist.files or [] if "licenses" in str(f)}
    assert licenses == {"LICENSE", "NOTICE"}
    assert "sentence-transformers" in (dist.locate_file(f"{dist.metadata['Name'].replace('-', '_')}-{dist.version}.dist-info/licenses/NOTICE").read_text())


@pytest.fixture(scope="module")
def converter() -> object:
    sys.path.insert(0, str(PACKAGE))
    try:
        import bert_onnx  # type: ignore[import-not-found]
        import minilm_build  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(PACKAGE))
    return bert_onnx, minilm_build


def test_the_converter_rebuilds_the_installed_graph_from_the_weights(converter: tuple, tmp_path: Path) -> None:
    """Without torch or onnx: the same bytes from the same weights, a valid ONNX model."""
    import onnx

    bert_onnx, _ = converter
    dest = tmp_path / "model.onnx"
    bert_onnx.convert(WEIGHTS, dest)
    assert hashlib.sha256(dest.read_bytes()).digest() == hashlib.sha256((Path(ONNX_MODEL) / "model.onnx").read_bytes()).digest()
    onnx.checker.check_model(str(dest), full_check=True)
    model = onnx.load(str(dest), load_external_data=False)
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask"]
    assert [o.name for o in model.graph.output] == ["last_hidden_state"]
    assert model.opset_import[0].version == bert_onnx.OPSET


def test_the_build_backend_makes_the_wheel_from_local_weights(converter: tuple, tmp_path: Path) -> None:
    _, build = converter
    name = build.write_wheel(tmp_path, weights=WEIGHTS)
    assert name == "memorist_model_minilm_l6_v2-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as wheel:
        names = set(wheel.namelist())
        assert {
            "memorist_minilm/__init__.py",
            "memorist_minilm/model/model.onnx",
            "memorist_minilm/model/tokenizer.json",
            "memorist_minilm/model/1_Pooling/config.json",
            "memorist_minilm/model/MODEL_CARD.md",
            "memorist_model_minilm_l6_v2-0.1.0.dist-info/licenses/LICENSE",
            "memorist_model_minilm_l6_v2-0.1.0.dist-info/licenses/NOTICE",
        } <= names
        record = wheel.read("memorist_model_minilm_l6_v2-0.1.0.dist-info/RECORD").decode().splitlines()
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            if digest:  # every file but RECORD itself, with its hash and size
                data = wheel.read(path)
                assert digest == "sha256=" + urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert int(size) == len(data)
        assert len(record) == len(names)
        built = wheel.read("memorist_minilm/model/model.onnx")
    assert built == (Path(ONNX_MODEL) / "model.onnx").read_bytes()


def test_the_build_refuses_weights_that_are_not_the_models(converter: tuple, tmp_path: Path) -> None:
    _, build = converter
    other = tmp_path / "other"
    shutil.copytree(WEIGHTS, other)
    tokenizer = json.loads((other / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["memorist"] = 30522
    (other / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(RuntimeError, match="tokenizer.json is not all-MiniLM-L6-v2's"):
        build.write_wheel(tmp_path, weights=other)
    (other / "tokenizer.json").unlink()
    with pytest.raises(RuntimeError, match="lacks the model's tokenizer.json"):
        build.write_wheel(tmp_path, weights=other)
    assert not list(tmp_path.glob("*.whl"))


def test_a_model_folder_named_from_home_is_read_there(tmp_path, monkeypatch) -> None:
    bundled = st.bundled_onnx_path()
    assert bundled is not None  # the ONNX model ships with the default install
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "minilm").symlink_to(bundled, target_is_directory=True)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("MEMORIST_EMBED_RUNTIME", "onnx")
    with Memory(":memory:", embedder="sentence-transformers:~/models/minilm") as memory:
        assert memory.embedder.name == "sentence-transformers/minilm"
        memory.add("I love hiking in the Alps", user_id="alex", infer=False)
        memory.add("My sister lives in Lisbon", user_id="alex", infer=False)
        assert memory.search("mountain walks", user_id="alex")["results"][0]["memory"] == "I love hiking in the Alps"


def test_a_model_that_cannot_be_loaded_is_named_and_leaves_no_store(tmp_path) -> None:
    """Before, a model name that is neither a folder nor a cached model was a raw
    OSError from transformers (a traceback in the CLI), and the open that failed left
    an empty store behind, which the next command read as a store of no memories."""
    from memorist import ConfigurationError

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a model")
    for spec in ("sentence-transformers:no-such/model", f"sentence-transformers:{tmp_path / 'notes'}"):
        target = tmp_path / "new.db"
        with pytest.raises(ConfigurationError) as info:  # (MissingDependencyError, a ConfigurationError, without the package)
            Memory(str(target), embedder=spec)
        assert "model" in str(info.value) or "not installed" in str(info.value)
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("new.db")]
    # A store that was there stays, whatever the open's failure.
    with Memory(str(tmp_path / "kept.db"), embedder="hashing") as memory:
        memory.add("Likes tea", user_id="u", infer=False)
    with pytest.raises(ConfigurationError):
        Memory(str(tmp_path / "kept.db"), embedder="sentence-transformers:no-such/model")
    with Memory(str(tmp_path / "kept.db"), embedder="hashing") as memory:
        assert [r["memory"] for r in memory.get_all(user_id="u")["results"]] == ["Likes tea"]


def test_a_store_another_process_wrote_to_meanwhile_is_never_removed(tmp_path) -> None:
    """An open that failed removes the file it created only while it holds nothing:
    another process may have made the same new store first and written to it."""
    from memorist.memory import _remove_new_store

    path = tmp_path / "shared.db"
    with Memory(str(path), embedder="hashing") as memory:
        memory.add("Likes tea", user_id="u", infer=False)
    _remove_new_store(str(path))
    with Memory(str(path), embedder="hashing") as memory:
        assert [r["memory"] for r in memory.get_all(user_id="u")["results"]] == ["Likes tea"]
    (tmp_path / "other.txt").write_text("not a store")
    _remove_new_store(str(tmp_path / "other.txt"))
    assert (tmp_path / "other.txt").read_text() == "not a store"
