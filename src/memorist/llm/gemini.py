"""Gemini, configured by ``GEMINI_API_KEY``, ``GEMINI_MODEL`` and ``ACE_LLM_TEMPERATURE``,
through Gemini's OpenAI-compatible endpoint
(``https://generativelanguage.googleapis.com/v1beta/openai/``, Chat Completions) with
the same ``openai`` SDK.

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

from typing import Any

from .. import config
from ..errors import ConfigurationError
from .openai_compatible import OpenAICompatibleLLM

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_TEMPERATURE = 0.2
BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"


def env_temperature(default: float = DEFAULT_TEMPERATURE) -> float:
    """``ACE_LLM_TEMPERATURE``, checked; ``default`` when unset."""
    return config.llm_temperature(default)


class GeminiLLM(OpenAICompatibleLLM):
    """Gemini models (``GEMINI_API_KEY``, ``GEMINI_MODEL``, ``ACE_LLM_TEMPERATURE``);
    ``max_output_tokens`` defaults to 16,384 (thinking tokens count in it).

    >>> GeminiLLM(api_key="test-key").name   # no network call is made
    'gemini:gemini-2.5-flash'
    """

    provider = "gemini"
    default_max_output_tokens = 16_384

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float | None = None,
        **options: Any,
    ) -> None:
        key = api_key or config.gemini_api_key()
        if not key or not key.strip():  # a blank key is no key
            raise ConfigurationError("the 'gemini' LLM provider needs an API key: set GEMINI_API_KEY (or pass api_key=...)")
        if base_url is None:
            configured = config.gemini_base_url()
            if configured is not None:
                self._base_url_option = "GEMINI_BASE_URL"
            base_url = configured or BASE_URL
        super().__init__(
            model or config.gemini_model() or DEFAULT_MODEL,
            base_url=base_url,
            api_key=key,
            temperature=env_temperature() if temperature is None else temperature,
            **options,
        )


__all__ = ["BASE_URL", "DEFAULT_MODEL", "DEFAULT_TEMPERATURE", "GeminiLLM", "env_temperature"]
