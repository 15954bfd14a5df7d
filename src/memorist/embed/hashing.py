"""A dependency-free, deterministic embedder: feature hashing of words and n-grams.

It is the fallback when the bundled model (``memorist-model-minilm-l6-v2``, part
of the default install) is missing, and a fast test double. It captures lexical
overlap (shared words, shared word pieces), not meaning: "food" and "vegetarian"
are unrelated to it.
"""

from __future__ import annotations

import zlib

import numpy as np

from ..policies.text import STOPWORDS, words
from .base import Embedder

#: The dimensions a hashing embedder may have. Above 8,192 nothing is gained: a
#: memory hashes to a few hundred features, which 8,192 buckets already keep nearly
#: collision-free, while every vector costs 4 bytes a dimension in the store, in the
#: index and in each add (10,000,000 dimensions took 8 s and 2.7 GB for one add).
#: 8,192 also stays under pgvector's 16,000-dimension limit of a PostgreSQL store.
MIN_DIM = 16
MAX_DIM = 8192


class HashingEmbedder(Embedder):
    """Signed feature hashing of word unigrams, bigrams and character trigrams."""

    batch_size = 1024

    def __init__(self, dim: int = 384) -> None:
        if not MIN_DIM <= dim <= MAX_DIM:
            raise ValueError(f"dim must be a whole number from {MIN_DIM} to {MAX_DIM:,}, got {dim!r}")
        self.dim = dim
        self.name = f"hashing-v1-{dim}"  # bump the version when features change

    def _features(self, text: str) -> tuple[list[str], list[float]]:
        tokens = words(text)
        feats: list[str] = []
        weights: list[float] = []
        for t in tokens:
            weight = 0.35 if t in STOPWORDS else 1.0
            feats.append("w:" + t)
            weights.append(weight)
            padded = f"<{t}>"
            # Character trigrams let "prefer" meet "preferences".
            grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
            feats.extend("c:" + g for g in grams)
            weights.extend([0.25 * weight] * len(grams))
        feats.extend("b:" + a + "_" + b for a, b in zip(tokens, tokens[1:], strict=False))
        weights.extend([0.5] * (len(tokens) - 1 if tokens else 0))
        return feats, weights

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            feats, weights = self._features(text)
            if not feats:
                continue
            # crc32 is stable across processes and platforms (unlike hash()).
            hashes = np.fromiter((zlib.crc32(f.encode()) for f in feats), dtype=np.int64, count=len(feats))
            signs = np.where(hashes & 1, 1.0, -1.0).astype(np.float32)
            np.add.at(out[row], (hashes >> 1) % self.dim, signs * np.asarray(weights, dtype=np.float32))
        return out
