"""LLM providers behind one seam (:class:`~memorist.llm.base.LLM`).

``resolve_llm`` turns what a user wrote into an LLM, or None for "no LLM: use the
heuristic roles":

- an :class:`LLM` instance: used as is;
- ``"openai"`` or ``"openai:<model>"``: the Responses API (default ``gpt-5-mini``),
  key in ``OPENAI_API_KEY``, optional ``OPENAI_BASE_URL``;
- ``"openai-compatible:<model>"``: Chat Completions at ``MEMORIST_LLM_BASE_URL``
  (Ollama, vLLM, llama.cpp, LM Studio, hosted compatible endpoints);
- ``"gemini"`` or ``"gemini:<model>"``: Gemini (``GEMINI_API_KEY``,
  ``GEMINI_MODEL``, ``ACE_LLM_TEMPERATURE``);
- ``"none"`` (or ``"off"``, ``"heuristic"``): no LLM;
- ``None``: the ``MEMORIST_LLM`` environment variable, else no LLM.

A model named by a string waits ``MEMORIST_LLM_TIMEOUT`` seconds for each request
(60 when unset) and tries a request that timed out or failed on the way
``MEMORIST_LLM_RETRIES`` more times (2 when unset); ``options`` given here win.

Providers are imported only when named, and building one makes no network call.
A missing key is a :class:`~memorist.errors.ConfigurationError` that names the
variable to set; a missing ``openai`` SDK one that names the pip command.
"""

from __future__ import annotations

from typing import Any

from .. import config
from ..errors import ConfigurationError
from .base import LLM, LLMCall, Recording, note_fallback, recording

_OFF = frozenset({"none", "off", "heuristic", "false", "0"})
PROVIDERS = ("openai", "openai-compatible", "gemini")


def resolve_llm(spec: str | LLM | None, **options: Any) -> LLM | None:
    """Build the LLM ``spec`` names (see the module docstring); ``options`` go to the
    provider's constructor (``timeout``, ``max_retries``, ``base_url``, ...)."""
    if isinstance(spec, LLM):
        return spec
    if spec is None:
        spec = config.llm_spec()
        if spec is None:
            return None
    if not isinstance(spec, str):
        raise ConfigurationError(
            f"llm must be a string like 'openai:gpt-5-mini' or a memorist.llm.LLM instance, got {type(spec).__name__}"
        )
    text = spec.strip()
    if not text or text.lower() in _OFF:
        return None
    options = {**config.llm_bounds(), **options}
    try:
        return _build(spec, text, options)
    except TypeError as exc:
        if "unexpected keyword argument" not in str(exc):
            raise
        # An option no provider takes: say which, as a configuration error.
        raise ConfigurationError(f"llm {spec!r}: {str(exc).split('() ', 1)[-1]}") from exc


def _build(spec: str, text: str, options: dict[str, Any]) -> LLM | None:
    provider, _, model = text.partition(":")
    provider = provider.strip().lower().replace("_", "-")
    model = model.strip()
    if provider == "openai":
        from .openai import DEFAULT_MODEL, OpenAIResponsesLLM

        return OpenAIResponsesLLM(model or DEFAULT_MODEL, **options)
    if provider in ("openai-compatible", "compatible", "local"):
        from .openai_compatible import OpenAICompatibleLLM

        if not model:
            raise ConfigurationError("'openai-compatible' needs a model name: 'openai-compatible:<model>', e.g. 'openai-compatible:llama3.1'")
        return OpenAICompatibleLLM(model, **options)
    if provider in ("gemini", "google"):
        from .gemini import GeminiLLM

        return GeminiLLM(model or None, **options)
    raise ConfigurationError(
        f"unknown LLM provider {provider!r} in {spec!r}; use one of {', '.join(PROVIDERS)} "
        "('provider:model'), or 'none'"
    )


__all__ = ["LLM", "PROVIDERS", "LLMCall", "Recording", "note_fallback", "recording", "resolve_llm"]
