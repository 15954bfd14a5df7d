"""Which runtime runs a sentence-transformers model, and what forces one.

No model is loaded here: the engines are replaced by fakes, so these are unit
tests of the choice itself.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest

from memorist import ConfigurationError, MissingDependencyError, ProviderError
from memorist.embed import onnx, resolve_embedder
from memorist.embed import sentence_transformers as st
from memorist.embed.sentence_transformers import SentenceTransformerEmbedder, runtime_setting

pytestmark = pytest.mark.skipif(st.bundled_model_path() is None, reason="needs the bundled model (embeddings extra)")


@pytest.fixture(autouse=True)
def _no_runtime_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORIST_EMBED_RUNTIME", raising=False)


class FakeEngine:
    def __init__(self, label: str, dim: int = 384) -> None:
        self.label = label
        self.dim = dim
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        self.calls.append(texts)
        return np.ones((len(texts), self.dim), dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        self.calls.append([text])
        return np.ones(self.dim, dtype=np.float32)


@pytest.fixture
def engines(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Both engines faked; ``made`` records which one was built."""
    made: dict[str, Any] = {}

    def onnx_engine(path: str) -> FakeEngine:
        made["onnx"] = FakeEngine("onnx")
        return made["onnx"]

    def torch_engine(path: str, device: str) -> FakeEngine:
        made["torch"] = FakeEngine("torch")
        return made["torch"]

    monkeypatch.setattr(st, "_OnnxEngine", onnx_engine)
    monkeypatch.setattr(st, "_TorchEngine", torch_engine)
    return made


def test_runtime_setting_default_env_and_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    assert runtime_setting() == "auto"
    monkeypatch.setenv("MEMORIST_EMBED_RUNTIME", " Torch ")
    assert runtime_setting() == "torch"
    assert runtime_setting("onnx") == "onnx"  # an explicit runtime beats the environment
    monkeypatch.setenv("MEMORIST_EMBED_RUNTIME", "")
    assert runtime_setting() == "auto"


@pytest.mark.parametrize("value", ["cuda", "openvino", "1"])
def test_unknown_runtime_is_a_configuration_error_naming_the_choices(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    with pytest.raises(ConfigurationError, match="runtime must be one of auto, onnx, torch"):
        SentenceTransformerEmbedder(runtime=value)
    monkeypatch.setenv("MEMORIST_EMBED_RUNTIME", value)
    with pytest.raises(ConfigurationError, match="MEMORIST_EMBED_RUNTIME"):
        resolve_embedder("sentence-transformers")


def test_auto_takes_onnx_for_the_bundled_model_when_the_extra_is_installed(monkeypatch: pytest.MonkeyPatch, engines: dict[str, Any]) -> None:
    monkeypatch.setattr(onnx, "available", lambda: True)
    embedder = resolve_embedder("sentence-transformers")
    assert embedder.runtime == "onnx"
    embedder.embed(["a", "b"])
    assert set(engines) == {"onnx"}


def test_auto_takes_torch_without_the_extra(monkeypatch: pytest.MonkeyPatch, engines: dict[str, Any]) -> None:
    monkeypatch.setattr(onnx, "available", lambda: False)
    embedder = resolve_embedder(None)
    assert embedder.runtime == "torch"
    embedder.embed_query("a")
    assert set(engines) == {"torch"}


def test_each_runtime_runs_the_bundled_model_from_its_own_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default install's ONNX package for ONNX Runtime; the torch extra's weights
    for torch (the ONNX folder has no safetensors to give it)."""
    monkeypatch.setattr(onnx, "available", lambda: True)
    monkeypatch.setattr(st, "bundled_onnx_path", lambda: "/models/onnx")
    monkeypatch.setattr(st, "bundled_torch_path", lambda: "/models/weights")
    monkeypatch.setattr(st.onnx_model, "check_layout", lambda path: {})
    assert SentenceTransformerEmbedder()._path == "/models/onnx"
    assert SentenceTransformerEmbedder(runtime="onnx")._path == "/models/onnx"
    assert SentenceTransformerEmbedder(runtime="torch")._path == "/models/weights"


def test_torch_without_the_torch_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st, "bundled_onnx_path", lambda: "/models/onnx")
    monkeypatch.setattr(st, "bundled_torch_path", lambda: None)
    embedder = SentenceTransformerEmbedder(runtime="torch")
    assert embedder.dim == 384  # known without loading
    with pytest.raises(MissingDependencyError, match=r"memorist\[torch\]"):
        embedder.embed(["a"])


def test_without_the_onnx_package_the_torch_extras_weights_are_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install with only the torch extra keeps what it did: ONNX Runtime on an export."""
    monkeypatch.setattr(onnx, "available", lambda: True)
    monkeypatch.setattr(st, "bundled_onnx_path", lambda: None)
    monkeypatch.setattr(st, "bundled_torch_path", lambda: "/models/weights")
    embedder = SentenceTransformerEmbedder()
    assert (embedder.runtime, embedder._path) == ("onnx", "/models/weights")


def test_neither_package_names_the_model_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st, "bundled_onnx_path", lambda: None)
    monkeypatch.setattr(st, "bundled_torch_path", lambda: None)
    with pytest.raises(MissingDependencyError, match="memorist-model-minilm-l6-v2"):
        SentenceTransformerEmbedder()
    assert not st.available()


def test_auto_keeps_torch_for_other_models_and_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx, "available", lambda: True)
    assert SentenceTransformerEmbedder("some-org/some-model").runtime == "torch"
    assert SentenceTransformerEmbedder(device="cuda").runtime == "torch"


def test_the_environment_forces_a_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx, "available", lambda: True)
    monkeypatch.setenv("MEMORIST_EMBED_RUNTIME", "torch")
    assert resolve_embedder("sentence-transformers").runtime == "torch"
    monkeypatch.setenv("MEMORIST_EMBED_RUNTIME", "onnx")
    assert resolve_embedder("sentence-transformers").runtime == "onnx"


def test_both_runtimes_carry_the_models_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """The vectors are the same (tests/capabilities/embed/test_onnx_model.py), so a store made with
    one runtime opens with the other."""
    monkeypatch.setattr(onnx, "available", lambda: True)
    a = SentenceTransformerEmbedder(runtime="onnx")
    b = SentenceTransformerEmbedder(runtime="torch")
    assert (a.name, a.dim) == (b.name, b.dim) == ("sentence-transformers/all-MiniLM-L6-v2", 384)


def test_forcing_onnx_without_the_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx, "available", lambda: False)
    with pytest.raises(MissingDependencyError, match=r"pip install onnxruntime"):
        SentenceTransformerEmbedder(runtime="onnx")


def test_forcing_onnx_on_a_model_it_cannot_run_fails_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setattr(onnx, "available", lambda: True)
    with pytest.raises(ConfigurationError, match="tokenizer.json"):
        SentenceTransformerEmbedder(str(tmp_path), runtime="onnx")
    with pytest.raises(ConfigurationError, match="on the CPU"):
        SentenceTransformerEmbedder(device="cuda", runtime="onnx")


def test_auto_falls_back_to_torch_with_a_warning_when_onnx_cannot_load(
    monkeypatch: pytest.MonkeyPatch, engines: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(onnx, "available", lambda: True)

    def broken(path: str) -> None:
        raise ProviderError("exporting to ONNX failed: no luck")

    monkeypatch.setattr(st, "_OnnxEngine", broken)
    embedder = SentenceTransformerEmbedder()
    with caplog.at_level(logging.WARNING, logger="memorist"):
        embedder.embed(["a"])
    assert embedder.runtime == "torch" and set(engines) == {"torch"}
    assert "using torch" in caplog.text and "no luck" in caplog.text


def test_forced_onnx_does_not_fall_back(monkeypatch: pytest.MonkeyPatch, engines: dict[str, Any]) -> None:
    monkeypatch.setattr(onnx, "available", lambda: True)

    def broken(path: str) -> None:
        raise ProviderError("exporting to ONNX failed: no luck")

    monkeypatch.setattr(st, "_OnnxEngine", broken)
    embedder = SentenceTransformerEmbedder(runtime="onnx")
    with pytest.raises(ProviderError, match="no luck"):
        embedder.embed(["a"])
    assert not engines


def test_one_call_embeds_a_whole_add_of_100_messages(monkeypatch: pytest.MonkeyPatch, engines: dict[str, Any]) -> None:
    """The runtimes sort a call's texts by length; cutting 100 into 64 + 36 before
    that would pad more and sort less."""
    monkeypatch.setattr(onnx, "available", lambda: True)
    embedder = SentenceTransformerEmbedder()
    embedder.embed([f"text {i}" for i in range(100)])
    assert [len(c) for c in engines["onnx"].calls] == [100]


def test_queries_go_through_the_engines_query_path(monkeypatch: pytest.MonkeyPatch, engines: dict[str, Any]) -> None:
    monkeypatch.setattr(onnx, "available", lambda: False)
    embedder = SentenceTransformerEmbedder()
    vector = embedder.embed_query("what do I eat?")
    assert vector.shape == (384,)
    assert engines["torch"].calls == [["what do I eat?"]]


def test_any_onnx_load_failure_falls_back_in_auto_and_is_a_provider_error_when_forced(
    monkeypatch: pytest.MonkeyPatch, engines: dict[str, Any]
) -> None:
    """A damaged cached file makes onnxruntime raise its own error types."""
    monkeypatch.setattr(onnx, "available", lambda: True)

    def damaged(path: str) -> None:
        raise RuntimeError("[ONNXRuntimeError] : 7 : INVALID_PROTOBUF")

    monkeypatch.setattr(st, "_OnnxEngine", damaged)
    auto = SentenceTransformerEmbedder()
    auto.embed(["a"])
    assert auto.runtime == "torch"
    with pytest.raises(ProviderError, match="INVALID_PROTOBUF") as info:
        SentenceTransformerEmbedder(runtime="onnx").embed(["a"])
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_missing_extra_reaches_the_caller_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """The base class wraps a provider's own errors in ProviderError, but a Memorist
    error (here: the extra to install) already says what to do and stays itself."""
    monkeypatch.setattr(onnx, "available", lambda: False)

    def no_torch(path: str, device: str) -> None:
        raise MissingDependencyError('sentence-transformers is not installed; run: pip install "memorist[embeddings]"')

    monkeypatch.setattr(st, "_TorchEngine", no_torch)
    with pytest.raises(MissingDependencyError, match="pip install"):
        SentenceTransformerEmbedder().embed(["a"])
