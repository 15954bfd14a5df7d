"""The embedder seam: one base class; providers implement ``_embed``.

The base class owns what every provider needs: input checks, batching, L2
normalisation to float32 and an identity (``name`` and ``dim``) that the store
records next to its vectors, so a store is never silently queried with vectors from
another model.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np

from ..errors import MemoristError, ProviderError


class Embedder(abc.ABC):
    """Turns texts into unit-length float32 vectors of a fixed dimension."""

    #: Identifies the vector space; stored with the vectors.
    name: str
    #: Vector dimension.
    dim: int
    #: How many texts one call of ``_embed`` receives at most.
    batch_size: int = 64

    @abc.abstractmethod
    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embed one batch; return an array of shape ``(len(texts), dim)``."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches; rows are L2-normalised float32.

        A provider's own exceptions become :class:`ProviderError` (``from`` the
        original); an :class:`MemoristError` it raises, such as a missing extra,
        reaches the caller as it is.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            try:
                out = np.asarray(self._embed(batch), dtype=np.float32)
            except MemoristError:  # already says what went wrong (a missing extra, say)
                raise
            except Exception as exc:  # a provider's own errors, whatever their type
                raise ProviderError(f"embedder {self.name} failed: {exc}") from exc
            if out.shape != (len(batch), self.dim):
                raise ProviderError(
                    f"embedder {self.name} returned shape {out.shape}, "
                    f"expected ({len(batch)}, {self.dim})"
                )
            parts.append(out)
        vectors = np.vstack(parts) if len(parts) > 1 else parts[0]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a search query (what retrieval calls; stored texts use :meth:`embed`).

        The same vector space as :meth:`embed`; a provider may tune it for one
        short text at a time.
        """
        return self.embed_one(text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim})"
