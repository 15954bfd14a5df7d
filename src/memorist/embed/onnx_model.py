"""A sentence-transformers model on ONNX Runtime, without torch.

The network is the one sentence-transformers runs, converted from the same
weights (by ``packages/memorist-minilm`` for the bundled model, by :mod:`.onnx_export`
for others); at run time :mod:`.wordpiece` (BERT's tokenizer in pure Python, or
``tokenizers`` for a tokenizer of another kind) splits the text, ``onnxruntime``
runs the graph and numpy mean-pools, so a process that embeds never imports torch.
For all-MiniLM-L6-v2 the vectors equal those of sentence-transformers to within
4e-7 (tests/capabilities/embed/), so they keep its identity and its stores.

Supported: a local sentence-transformers directory whose modules are a transformer
at the top level (``config.json``, ``tokenizer.json``), mean pooling and optionally
normalisation, which is what the bundled model is (:func:`check_layout`).

Thread policy (:func:`session_options`): one intra-op thread per usable core, and
ONNX Runtime's workers spin between the graph's operators. On 2 cores a LoCoMo
question takes 3.6 ms so (p50, the machine shared), against 5.3 ms on one thread,
5.3 ms with two threads that never spin and 7.2 ms when the workers are also told
to stop spinning as each run returns (``session.force_spinning_stop``: waking them
for the next query costs more than it saves). What the spin could fight is the
search's vector product, which comes next; that product runs on one BLAS thread
(store/vector_index.py), and the whole search minus its embedding stayed at
1.1–1.2 ms under every policy, so nothing fights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .. import config
from ..errors import ConfigurationError, MissingDependencyError
from . import wordpiece

# Sub-batch of a batched call, texts sorted by length so that little is padding.
_SUB_BATCH = 32


def usable_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def check_layout(model_dir: str) -> dict[str, Any]:
    """What the runtime needs to know of a model directory; ConfigurationError when
    its pipeline is not transformer → mean pooling (→ normalise)."""
    root = Path(model_dir)

    def read(name: str) -> dict[str, Any]:
        try:
            return json.loads((root / name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot read {root / name}: {exc}") from exc

    if not (root / "config.json").is_file() or not (root / "tokenizer.json").is_file():
        raise ConfigurationError(
            f"the ONNX runtime needs a local model directory with config.json and tokenizer.json; {model_dir!r} is not one"
        )
    modules = read("modules.json") or [{"path": "", "type": "sentence_transformers.models.Transformer"}]
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    pooling = next((m.get("path", "") for m in modules if m.get("type", "").endswith("Pooling")), "1_Pooling")
    pool = read(os.path.join(pooling, "config.json")) if pooling else {}
    modes = {k for k, v in pool.items() if k.startswith("pooling_mode") and v}
    if modules[0].get("path", "") != "" or any(k not in ("Transformer", "Pooling", "Normalize") for k in kinds) or (
        modes and modes != {"pooling_mode_mean_tokens"}
    ):
        raise ConfigurationError(
            f"the ONNX runtime runs transformer + mean pooling models; {model_dir!r} has modules "
            f"{kinds} and pooling {sorted(modes)}: use the torch runtime for it"
        )
    config = read("config.json")
    tokenizer = read("tokenizer_config.json")
    st_config = read("sentence_bert_config.json")
    max_length = st_config.get("max_seq_length") or min(int(tokenizer.get("model_max_length", 512)), 512)
    return {
        "max_length": int(max_length),
        "dim": int(config.get("hidden_size", 0)) or None,
        "heads": int(config.get("num_attention_heads", 0)) or None,
    }


def session_options(ort: Any, threads: int) -> Any:
    """Memorist's thread policy for an ONNX Runtime session (module docstring)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    options.log_severity_level = 3  # errors only: its warnings are for its developers
    return options


def import_onnxruntime() -> Any:
    """The ``onnxruntime`` module, imported with its telemetry off
    (:func:`memorist.config.quiet_onnxruntime`). A process that imported onnxruntime
    before Memorist keeps its own setting."""
    config.quiet_onnxruntime()
    import onnxruntime as ort

    return ort


class OnnxModel:
    """A loaded model: its tokenizer and its ONNX Runtime session. Thread-safe."""

    def __init__(self, model_dir: str, onnx_path: str | os.PathLike[str], *, max_length: int, threads: int | None = None) -> None:
        ort = import_onnxruntime()

        # tokenizer.json may carry a fixed padding and a shorter truncation of its
        # own; sentence-transformers cuts at max_seq_length and pads to the longest
        # text of a batch, which encode() does itself.
        path = os.path.join(model_dir, "tokenizer.json")
        try:
            spec = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot read the tokenizer {path}: {exc}") from exc
        self.pad_id = int((spec.get("padding") or {}).get("pad_id", 0))
        if wordpiece.supports(spec):
            bert = wordpiece.WordPieceTokenizer(spec, max_length=max_length)
            #: The tokenizer: a :class:`.wordpiece.WordPieceTokenizer` or ``tokenizers``'s.
            self.tokenizer: Any = bert
            self._tokenize: Any = lambda texts: [bert.encode(t) for t in texts]
        else:
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise MissingDependencyError(
                    f"the tokenizer of {model_dir} is not BERT's and needs tokenizers; run: "
                    'pip install "memorist[onnx]"'
                ) from exc
            tokenizer = Tokenizer.from_file(path)
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length)
            self.tokenizer = tokenizer
            self._tokenize = lambda texts: [e.ids for e in tokenizer.encode_batch(texts)]
        self.threads = threads or usable_cores()
        self.session = ort.InferenceSession(
            os.fspath(onnx_path), session_options(ort, self.threads), providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self.session.get_inputs()}

    def token_ids(self, text: str) -> list[int]:
        """The ids the model reads for ``text``: special tokens added, truncated."""
        return list(self._tokenize([text])[0])

    def _run(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feed)[0]
        weights = mask[..., None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Mean-pooled token states of ``texts`` (not normalised), in their order."""
        if len(texts) == 1:  # a query: no padding, no sorting
            ids = np.asarray(self._tokenize(texts), dtype=np.int64)
            return self._run(ids, np.ones_like(ids))
        tokens = self._tokenize(texts)
        # Sorted by length, each sub-batch pads only to its own longest text.
        order = sorted(range(len(texts)), key=lambda i: len(tokens[i]))
        groups = [order[start : start + _SUB_BATCH] for start in range(0, len(order), _SUB_BATCH)]
        parts = []
        for rows in groups:
            width = max(len(tokens[i]) for i in rows)
            ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, : len(tokens[i])] = tokens[i]
                mask[r, : len(tokens[i])] = 1
            parts.append(self._run(ids, mask))
        pooled = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        for rows, part in zip(groups, parts, strict=True):
            pooled[rows] = part
        return pooled


__all__ = ["OnnxModel", "check_layout", "session_options", "usable_cores"]
