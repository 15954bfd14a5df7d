"""Export a local sentence-transformers model to ONNX, verified against torch.

Runs once per model and onnxruntime version (see :func:`.onnx.cache_key`), from
the files on disk: no download. It needs torch and transformers (the
``embeddings`` extra) and onnx (in it too); the process that only runs
the exported model needs neither torch nor transformers.

1. The transformer is loaded with eager attention and traced by
   ``torch.onnx.export`` (opset 17, dynamic batch and sequence axes).
2. onnxruntime's transformer optimizer fuses it (embedding + layer norm,
   attention, bias + GELU, skip + layer norm: 25 fused nodes for MiniLM-L6),
   which only works on the eager graph's attention pattern.
3. The result is checked against torch on sample texts: a model whose pooled
   vectors differ by more than :data:`TOLERANCE` is refused, so the ONNX runtime
   never puts vectors of another space under the model's name.
4. It is written next to its final name and renamed into place, so a process
   that reads the cache never sees half a file, and two that export at once
   both end with a whole one.

:func:`export` runs all of this in a child process (``python -m
memorist.embed.onnx_export MODEL_DIR DEST``), so that the process that asked, which
goes on embedding for hours, never holds torch and its ~1 GB: even the first
search of a new install stays a light process. :func:`export_here` is the same
work in the calling process.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .onnx_model import OnnxModel, check_layout

#: Version of what :func:`export` writes; part of the cache key (:func:`.onnx.cache_key`).
EXPORT_FORMAT = 1

#: Largest difference allowed between torch's and the export's pooled, normalised
#: vectors (any coordinate) on the sample texts.
TOLERANCE = 1e-4

_SAMPLES = [
    "Hi, I'm Alex. I'm a vegetarian and allergic to nuts.",
    "When did Caroline go to the LGBTQ support group?",
    "ok",
    "Melanie: I painted a sunrise over the lake last weekend, it took me three whole days "
    "and I finally feel like my style is coming together (replying to Caroline: what have you been up to?)",
    " ".join(["a long turn that must be truncated like sentence-transformers truncates it"] * 40),
]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No progress bars and no exporter warnings on the host's stderr."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers is required below anyway
        hf_logging = None
    enabled = hf_logging.is_progress_bar_enabled() if hf_logging else False
    if hf_logging:
        hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if hf_logging and enabled:
            hf_logging.enable_progress_bar()


def _torch_reference(model: Any, tokenizer: Any, max_length: int) -> np.ndarray:
    import torch

    batch = tokenizer(_SAMPLES, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).numpy()
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def export(model_dir: str, dest: str | os.PathLike[str]) -> dict[str, Any]:
    """Export ``model_dir`` to the ONNX file ``dest`` in a child process; returns
    what was done and measured (:func:`export_here`).

    Raises RuntimeError with the child's error when the export fails, and when the
    exported graph does not reproduce torch's vectors.
    """
    argv = [sys.executable, "-m", __name__, os.fspath(model_dir), os.fspath(dest)]
    try:
        child = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError:  # no interpreter to start (an embedded Python): here, then
        return export_here(model_dir, dest)
    lines = child.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else {}
    except ValueError:
        answer = {}
    if child.returncode or "error" in answer or "format" not in answer:
        said = answer.get("error") or (child.stderr.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
        raise RuntimeError(f"the export process failed: {said}")
    return answer


def export_here(model_dir: str, dest: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`export`, in this process (it imports torch and transformers)."""
    layout = check_layout(model_dir)  # before the imports: a wrong folder fails at once

    from .onnx_model import import_onnxruntime

    onnxruntime = import_onnxruntime()
    import torch
    import transformers
    from transformers import AutoModel, AutoTokenizer

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    raw = tmp.with_suffix(".raw")
    try:
        with _quiet():
            model = AutoModel.from_pretrained(model_dir, attn_implementation="eager", local_files_only=True).eval()
            tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
            # Before the export, which may leave the module changed (tracing state).
            reference = _torch_reference(model, tokenizer, layout["max_length"])
            names = ["input_ids", "attention_mask", "token_type_ids"]

            class Encoder(torch.nn.Module):
                def __init__(self, inner: Any) -> None:
                    super().__init__()
                    self.inner = inner

                def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                    return self.inner(
                        input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
                    ).last_hidden_state

            sample = torch.ones(2, 8, dtype=torch.long)
            with torch.no_grad():
                torch.onnx.export(
                    Encoder(model),
                    (sample, sample, torch.zeros_like(sample)),
                    str(raw),
                    input_names=names,
                    output_names=["last_hidden_state"],
                    dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]},
                    opset_version=17,
                    dynamo=False,
                )
            fused = _fuse(raw, tmp, heads=layout["heads"], hidden=layout["dim"])
            if not fused:
                os.replace(raw, tmp)
        candidate = OnnxModel(model_dir, tmp, max_length=layout["max_length"], threads=1).encode(list(_SAMPLES))
        candidate /= np.linalg.norm(candidate, axis=1, keepdims=True)
        difference = float(np.abs(candidate - reference).max())
        if not difference <= TOLERANCE:
            raise RuntimeError(
                f"the ONNX export of {model_dir} differs from torch by {difference:.2e} (> {TOLERANCE:.0e}); not used"
            )
        os.replace(tmp, dest)
    finally:
        for leftover in (tmp, raw):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return {
        "format": EXPORT_FORMAT,
        "model_dir": str(model_dir),
        "fused_nodes": fused,
        "max_abs_difference": difference,
        "seconds": round(time.perf_counter() - started, 2),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnxruntime": onnxruntime.__version__,
        "exported_at": time.time(),
    }


def _fuse(source: Path, dest: Path, *, heads: int | None, hidden: int | None) -> int:
    """onnxruntime's BERT fusions written to ``dest``; the number of fused nodes (0:
    nothing written, ORT's own load-time optimisations will do)."""
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError:
        return 0
    try:
        optimized = optimize_model(str(source), model_type="bert", num_heads=heads or 0, hidden_size=hidden or 0, opt_level=0)
    except Exception:  # an architecture the optimizer does not know: keep the plain graph
        return 0
    counts = optimized.get_fused_operator_statistics()
    fused = int(sum(counts.values()))
    if not fused:
        return 0
    optimized.save_model_to_file(str(dest))
    return fused


def write_record(path: Path, record: dict[str, Any]) -> None:
    """``record`` as JSON at ``path``, renamed into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _main(argv: list[str]) -> int:
    """The child of :func:`export`: the record as the last line of stdout, or
    ``{"error": ...}`` and exit status 1."""
    if len(argv) != 2:
        print(json.dumps({"error": "usage: python -m memorist.embed.onnx_export MODEL_DIR DEST"}))
        return 2
    try:
        record = export_here(argv[0], argv[1])
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(record))
    return 0


__all__ = ["EXPORT_FORMAT", "TOLERANCE", "export", "export_here", "write_record"]


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
