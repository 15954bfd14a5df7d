"""Counting tokens: what a context costs an agent.

:func:`token_counter` counts with a real tokenizer: the ``tokenizer.json`` of the
bundled embedding model (all-MiniLM-L6-v2, BERT's WordPiece, counted by
:mod:`.wordpiece` in the default install), or any ``tokenizer.json`` given (one of
another kind needs the ``tokenizers`` package). Without them it falls back to an
estimate (words and punctuation marks, :func:`estimate_tokens`) and says so in its
``name``.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ConfigurationError, MissingDependencyError
from . import wordpiece

_WORD = re.compile(r"\w+|[^\w\s]")


def estimate_tokens(text: str) -> int:
    """Words and punctuation marks: an estimate, for when no tokenizer is installed."""
    return len(_WORD.findall(text))


@dataclass(frozen=True)
class TokenCounter:
    """``counter(text)`` is the number of tokens of ``text`` (no special tokens)."""

    name: str
    count: Callable[[str], int]

    def __call__(self, text: str) -> int:
        return self.count(text)


@functools.lru_cache(maxsize=4)
def _tokenizer_file(path: str, name: str) -> TokenCounter:
    try:
        bert = wordpiece.load(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"cannot read the tokenizer {path}: {exc}") from exc
    if bert is not None:
        return TokenCounter(name, lambda text: len(bert.tokens(text)) if text else 0)
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingDependencyError(
            f"counting tokens with the tokenizer {path} (not BERT's) needs tokenizers; run: "
            'pip install "memorist[onnx]"'
        ) from exc
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as exc:
        raise ConfigurationError(f"cannot read the tokenizer {path}: {exc}") from exc
    tokenizer.no_truncation()  # the model truncates what it embeds; a context is counted whole
    tokenizer.no_padding()

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids) if text else 0

    return TokenCounter(name, count)


def token_counter(tokenizer: str | None = None, *, required: bool = False) -> TokenCounter:
    """A token counter: the ``tokenizer.json`` at ``tokenizer`` (a file or a model
    directory), else the bundled embedding model's; else, unless ``required``, the
    estimate of :func:`estimate_tokens` (named ``"estimate"``)."""
    if tokenizer is not None:
        path = os.path.join(tokenizer, "tokenizer.json") if os.path.isdir(tokenizer) else tokenizer
        if not os.path.isfile(path):
            raise ConfigurationError(f"no tokenizer.json at {tokenizer!r}")
        return _tokenizer_file(os.path.abspath(path), f"tokenizer.json at {tokenizer}")
    from .sentence_transformers import DEFAULT_MODEL, INSTALL_MODEL, bundled_model_path

    model = bundled_model_path()
    path = os.path.join(model, "tokenizer.json") if model else None
    if path and os.path.isfile(path):
        try:
            return _tokenizer_file(path, f"{DEFAULT_MODEL} tokenizer")
        except MissingDependencyError:
            if required:
                raise
    elif required:
        raise MissingDependencyError(f"counting tokens needs the bundled model's tokenizer; run: {INSTALL_MODEL}")
    return TokenCounter("estimate", estimate_tokens)


__all__ = ["TokenCounter", "estimate_tokens", "token_counter"]
