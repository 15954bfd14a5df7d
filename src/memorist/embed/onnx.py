"""Loading a model on ONNX Runtime: a converted one as it is, another through the
cache of exports.

A model folder that comes converted (``model.onnx`` beside ``conversion.json``, as
the default install's all-MiniLM-L6-v2 does, see :func:`prebuilt`) is run as it is:
no export, no cache, no torch. For any other folder, an export (:mod:`.onnx_export`)
takes seconds and needs torch; it is made once per model and onnxruntime version
and kept under ``$MEMORIST_CACHE_DIR/onnx`` (default: the user cache directory, e.g.
``~/.cache/memorist/onnx``), one folder per :func:`cache_key`: ``model.onnx``,
``export.json`` (what was exported, with what, and how far its vectors were from
torch's), or ``failed.json`` when the export failed (not retried until torch,
transformers, onnx or onnxruntime change).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import time
from pathlib import Path

from .. import config
from ..errors import MissingDependencyError, ProviderError
from . import onnx_export
from .onnx_export import EXPORT_FORMAT
from .onnx_model import OnnxModel, check_layout, import_onnxruntime

logger = logging.getLogger("memorist")

_INSTALL = 'pip install "memorist[torch,onnx]" (from a source checkout: add -c constraints.txt, for a CPU torch)'


def available() -> bool:
    """Whether ONNX Runtime is importable (in the default install). A model whose
    tokenizer is not BERT's WordPiece also needs ``tokenizers`` (:mod:`.onnx_model`)."""
    return importlib.util.find_spec("onnxruntime") is not None


def prebuilt(model_dir: str) -> Path | None:
    """The ONNX file a model folder comes with (``model.onnx`` with the
    ``conversion.json`` its converter wrote), or None."""
    root = Path(model_dir)
    path = root / "model.onnx"
    return path if path.is_file() and (root / "conversion.json").is_file() else None


def can_export() -> bool:
    """Whether a model can be exported here (torch, transformers and onnx installed)."""
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers", "onnx"))


def cache_root() -> Path:
    """Where exported models live: ``$MEMORIST_CACHE_DIR/onnx`` or the user cache dir."""
    env = config.cache_dir()
    if env is not None:
        return env / "onnx"
    import platformdirs

    return Path(platformdirs.user_cache_dir("memorist", appauthor=False)) / "onnx"


def cache_key(model_dir: str, runtime_version: str) -> str:
    """Names an export: the model's files (name, size, modification time), the
    runtime's version and :data:`EXPORT_FORMAT`. Only ``stat`` calls: it is computed
    at every start."""
    root = Path(model_dir).resolve()
    parts = [f"format={EXPORT_FORMAT}", f"onnxruntime={runtime_version}"]
    for name in sorted(os.listdir(root)):
        path = root / name
        if path.is_file() and not name.startswith("."):
            st = path.stat()
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return f"{root.name if root.name != 'model' else root.parent.name}-{digest}"


def load(model_dir: str, *, threads: int | None = None) -> OnnxModel:
    """The model of ``model_dir`` on ONNX Runtime, exported first if the cache has
    no export for these files and this runtime version.

    :class:`MissingDependencyError` when the packages to run or export are missing;
    :class:`ProviderError` when the export fails (remembered in the cache, so that
    the next process does not spend seconds failing again with the same torch).
    """
    if not available():
        raise MissingDependencyError("the ONNX runtime needs onnxruntime (a dependency of memorist); run: pip install onnxruntime")
    layout = check_layout(model_dir)
    converted = prebuilt(model_dir)
    if converted is not None:
        return OnnxModel(model_dir, converted, max_length=layout["max_length"], threads=threads)
    ort = import_onnxruntime()

    folder = cache_root() / cache_key(model_dir, ort.__version__)
    path = folder / "model.onnx"
    if not path.is_file():
        failed = folder / "failed.json"
        tools = _export_tools()
        if failed.is_file():
            try:
                record = json.loads(failed.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                record = {}
            if record.get("tools") == tools:
                raise ProviderError(f"exporting {model_dir} to ONNX failed before: {record.get('error')} (see {failed})")
        if not can_export():
            raise MissingDependencyError(
                f"no ONNX export of {model_dir} is cached and exporting one needs torch, transformers and onnx; run: {_INSTALL}"
            )
        # Seconds, once per machine: said on stderr so that a first search that takes
        # 10 s is explained (the hashing fallback's notice is a warning too).
        logger.warning("memorist: exporting the embedding model to ONNX, once (cached in %s)", folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            record = onnx_export.export(model_dir, path)
        except Exception as exc:
            with contextlib.suppress(OSError):
                onnx_export.write_record(failed, {"error": f"{type(exc).__name__}: {exc}", "tools": tools, "at": time.time()})
            raise ProviderError(f"exporting {model_dir} to ONNX failed: {exc}") from exc
        with contextlib.suppress(OSError):
            onnx_export.write_record(folder / "export.json", record)
    return OnnxModel(model_dir, path, max_length=layout["max_length"], threads=threads)


def _export_tools() -> dict[str, str | None]:
    """Versions of what an export runs on: a failure is retried when they change."""
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in ("torch", "transformers", "onnx", "onnxruntime"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


__all__ = ["available", "cache_key", "cache_root", "can_export", "load"]
