"""A dependency-free, deterministic embedder: feature hashing of words and n-grams.

It is the fallback when the ``embeddings`` extra is not installed, and a fast
test double. It captures lexical overlap (shared words, shared word pieces), not
meaning: "food" and "vegetarian" are unrelated to it. Install
``engram[embeddings]`` for semantic search.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..policies.text import STOPWORDS, words
from .base import Embedder


class HashingEmbedder(Embedder):
    """Signed feature hashing of word unigrams, bigrams and character trigrams."""

    batch_size = 1024

    def __init__(self, dim: int = 384) -> None:
        if dim < 16:
            raise ValueError("dim must be at least 16")
        self.dim = dim
        self.name = f"hashing-v1-{dim}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        tokens = words(text)
        feats: list[tuple[str, float]] = []
        for t in tokens:
            weight = 0.35 if t in STOPWORDS else 1.0
            feats.append(("w:" + t, weight))
            padded = f"<{t}>"
            # Character trigrams let "prefer" meet "preferences".
            feats.extend(("c:" + padded[i : i + 3], 0.25 * weight) for i in range(len(padded) - 2))
        feats.extend(("b:" + a + "_" + b, 0.5) for a, b in zip(tokens, tokens[1:], strict=False))
        return feats

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat, weight in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "big")
                sign = 1.0 if h & 1 else -1.0
                out[row, (h >> 1) % self.dim] += sign * weight
        return out
