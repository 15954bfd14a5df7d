"""Test helpers of the playbook tests (imported by conftest and the tests)."""

from __future__ import annotations

import math
import zlib

import numpy as np

from memorist import Embedder

DIM = 16

#: How spec 000's "[ACE Memory] Loaded N bullets from <store>" line names each backend's store.
STORE_NAMES = {"sqlite": "SQLite", "postgresql": "Postgres"}


class MappedEmbedder(Embedder):
    """Returns the vector chosen for a text; any other text gets its own direction.

    ``at(similarity)`` builds a vector with exactly that cosine to the first axis, so
    tests can place a lesson on either side of a threshold.
    """

    name = "test-mapped-16"
    dim = DIM

    def __init__(self, mapping: dict[str, np.ndarray] | None = None) -> None:
        self.mapping: dict[str, np.ndarray] = dict(mapping or {})

    @staticmethod
    def axis(i: int) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        v[i] = 1.0
        return v

    @staticmethod
    def at(similarity: float, base: int = 0, other: int = 1) -> np.ndarray:
        """A unit vector with cosine ``similarity`` to axis ``base``."""
        v = np.zeros(DIM, dtype=np.float64)
        v[base] = similarity
        v[other] = math.sqrt(max(0.0, 1.0 - similarity * similarity))
        return v.astype(np.float32)

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for text in texts:
            if text in self.mapping:
                out.append(self.mapping[text])
                continue
            # Unknown text: a pseudo-random direction in the upper half of the space,
            # nearly orthogonal to the axes the tests use.
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            v = np.zeros(DIM, dtype=np.float32)
            v[8:] = rng.normal(size=DIM - 8)
            out.append(v)
        return np.stack(out)
