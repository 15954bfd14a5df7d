"""Gemini, configured as spec 000 configures it, through Gemini's OpenAI-compatible
endpoint (``https://generativelanguage.googleapis.com/v1beta/openai/``, Chat
Completions) with the same ``openai`` SDK.

Why not the ``google-genai`` SDK: one SDK and one wire format then serve all three
providers (one extra to install, one fake server in the tests, one error mapping),
and what Memorist needs — system + user messages, JSON output, token usage, 429 with
``Retry-After`` — is what the compatible endpoint offers.

=========================  =====================  ====================
setting                    environment            default
=========================  =====================  ====================
``api_key``                ``GEMINI_API_KEY``     required
``model``                  ``GEMINI_MODEL``       ``gemini-2.5-flash``
``temperature``            ``ACE_LLM_TEMPERATURE``  0.2
``base_url``               ``GEMINI_BASE_URL``    Google's endpoint
=========================  =====================  ====================
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigurationError
from .openai_compatible import OpenAICompatibleLLM

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_TEMPERATURE = 0.2
BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"


def env_temperature(default: float = DEFAULT_TEMPERATURE) -> float:
    """``ACE_LLM_TEMPERATURE`` (spec 000), checked; ``default`` when unset."""
    raw = os.environ.get("ACE_LLM_TEMPERATURE")
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"ACE_LLM_TEMPERATURE must be a number in [0, 2], got {raw!r}") from exc
    if not 0 <= value <= 2:
        raise ConfigurationError(f"ACE_LLM_TEMPERATURE must be in [0, 2], got {raw!r}")
    return value


class GeminiLLM(OpenAICompatibleLLM):
    """Gemini models (spec 000's ``GEMINI_API_KEY``, ``GEMINI_MODEL``, ``ACE_LLM_TEMPERATURE``).

    >>> GeminiLLM(api_key="test-key").name   # no network call is made
    'gemini:gemini-2.5-flash'
    """

    provider = "gemini"

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> None:
        key = api_key or os.environ.get("GEMINI_API_KEY")
        if not key:
            raise ConfigurationError("the 'gemini' LLM provider needs an API key: set GEMINI_API_KEY (or pass api_key=...)")
        super().__init__(
            model or os.environ.get("GEMINI_MODEL") or DEFAULT_MODEL,
            base_url=base_url or os.environ.get("GEMINI_BASE_URL") or BASE_URL,
            api_key=key,
            temperature=env_temperature() if temperature is None else temperature,
            **options,
        )


__all__ = ["BASE_URL", "DEFAULT_MODEL", "DEFAULT_TEMPERATURE", "GeminiLLM", "env_temperature"]
