"""all-MiniLM-L6-v2 as an ONNX model: where its files are, and what they are.

``model_path()`` is a folder laid out as a sentence-transformers model (config.json,
tokenizer.json, modules.json, 1_Pooling/config.json, sentence_bert_config.json)
whose network is ``model.onnx`` instead of safetensors weights; ``conversion.json``
says what it was converted from and how.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The model's name, as sentence-transformers names it.
MODEL_NAME = "all-MiniLM-L6-v2"
#: The sentence embedding's dimension.
DIMENSION = 384


def model_path() -> Path:
    """The folder of the model's files."""
    return Path(__file__).resolve().parent / "model"


def conversion() -> dict[str, Any]:
    """What the wheel's build recorded: source digests, converter, ONNX digest."""
    return json.loads((model_path() / "conversion.json").read_text(encoding="utf-8"))


__all__ = ["DIMENSION", "MODEL_NAME", "conversion", "model_path"]
