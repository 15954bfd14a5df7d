"""Embedding providers behind one seam.

``resolve_embedder`` turns what a user wrote into an :class:`Embedder`:

- an :class:`Embedder` instance: used as is;
- ``"hashing"`` or ``"hashing:<dim>"``: the dependency-free fallback;
- ``"sentence-transformers"`` or ``"sentence-transformers:<model or path>"``;
- ``None``: the bundled all-MiniLM-L6-v2 (in the default install), else the
  hashing fallback with a one-line notice.

The bundled model runs on ONNX Runtime (the default install), or on torch with the
``torch`` extra: the same vectors either way (see :mod:`.sentence_transformers`;
``MEMORIST_EMBED_RUNTIME=torch`` or ``onnx`` forces one).
"""

from __future__ import annotations

import logging

from ..errors import ConfigurationError, MissingDependencyError
from .base import Embedder
from .hashing import MAX_DIM, MIN_DIM, HashingEmbedder

logger = logging.getLogger("memorist")

_FALLBACK_NOTICE = (
    "memorist: the embedding model all-MiniLM-L6-v2 is not installed; using the lexical hashing "
    "embedder (install memorist-model-minilm-l6-v2, part of the default install, for semantic search)"
)


def resolve_embedder(spec: str | Embedder | None) -> Embedder:
    """Build the embedder ``spec`` names (see the module docstring)."""
    if isinstance(spec, Embedder):
        return spec
    if spec is None:
        from . import sentence_transformers as st

        if st.available():
            return st.SentenceTransformerEmbedder()
        logger.warning(_FALLBACK_NOTICE)
        return HashingEmbedder()
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError(
            f"embedder must be a string like 'hashing' or 'sentence-transformers:<model>' "
            f"or an Embedder instance, got {spec!r}"
        )
    provider, _, arg = spec.strip().partition(":")
    provider = provider.lower()
    if provider == "hashing":
        if not arg:
            return HashingEmbedder()
        try:
            return HashingEmbedder(int(arg))
        except ValueError as exc:
            raise ConfigurationError(
                f"embedder 'hashing:<dim>' needs a whole number from {MIN_DIM} to {MAX_DIM}, got {arg!r}"
            ) from exc
    if provider in ("sentence-transformers", "sentence_transformers", "st"):
        from .sentence_transformers import DEFAULT_MODEL, SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(arg or DEFAULT_MODEL)
    raise ConfigurationError(
        f"unknown embedder provider {provider!r}; use 'hashing' or 'sentence-transformers:<model>'"
    )


def spec_for_identity(name: str) -> str:
    """The ``embedder=`` string that rebuilds the embedder whose identity is ``name``."""
    if name.startswith("hashing-v1-"):
        return "hashing:" + name.rsplit("-", 1)[1]
    if name.startswith("sentence-transformers/"):
        model = name.split("/", 1)[1]
        return "sentence-transformers" if model == "all-MiniLM-L6-v2" else "sentence-transformers:" + model
    return name


def embedder_for_identity(name: str) -> Embedder | None:
    """The embedder that produced vectors named ``name``, if it can be built here."""
    if name.startswith("hashing-v1-"):
        try:
            return HashingEmbedder(int(name.rsplit("-", 1)[1]))
        except ValueError:
            return None
    if name == "sentence-transformers/all-MiniLM-L6-v2":
        try:
            return resolve_embedder("sentence-transformers")
        except MissingDependencyError:
            return None
    return None


__all__ = ["Embedder", "HashingEmbedder", "embedder_for_identity", "resolve_embedder", "spec_for_identity"]
