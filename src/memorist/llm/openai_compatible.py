"""Chat Completions (``POST /v1/chat/completions``) at any OpenAI-compatible base URL.

For local and self-hosted servers — Ollama (``http://localhost:11434/v1``), vLLM,
llama.cpp's server, LM Studio — and hosted OpenAI-compatible endpoints. Spoken
through the official ``openai`` SDK.

The base URL comes from ``base_url=``, else ``MEMORIST_LLM_BASE_URL`` (with the key
in ``MEMORIST_LLM_API_KEY``), else ``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY``). A
key is never sent to a URL it was not configured with: ``base_url=`` gets the
environment's key only when it is the environment's URL (else pass ``api_key=``).
Local servers need no key.

``json_mode`` chooses how JSON is asked for: ``"schema"`` (``response_format`` of
type ``json_schema``, the most widely supported: LM Studio accepts only this),
``"object"`` (``json_object``, older servers), or ``"off"`` (the prompt alone asks for
JSON; the base class still validates and repairs).
"""

from __future__ import annotations

from typing import Any

from .. import config
from ..errors import ConfigurationError, ProviderError, TransientProviderError
from .base import LLM, LLMRequest, LLMResponse
from .openai import (
    LazyClient,
    answered_with_tool_call,
    check_base_url,
    check_object,
    create,
    not_json,
    refused,
    require_openai,
    wrong_shape,
)

_JSON_MODES = ("schema", "object", "off")
_NO_KEY = "not-needed"  # the SDK insists on a key; local servers ignore it


def _same_url(a: str, b: str) -> bool:
    return a.strip().rstrip("/") == b.strip().rstrip("/")


class OpenAICompatibleLLM(LLM):
    """A model behind an OpenAI-compatible Chat Completions endpoint.

    >>> llm = OpenAICompatibleLLM("llama3.1", base_url="http://localhost:11434/v1")
    >>> llm.name, llm.base_url   # no network call is made
    ('openai-compatible:llama3.1', 'http://localhost:11434/v1')
    """

    provider = "openai-compatible"
    #: What a bad ``base_url=`` is called in the error (a subclass may read it elsewhere).
    _base_url_option = "base_url"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        json_mode: str = "schema",
        client: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(model, **options)
        if json_mode not in _JSON_MODES:
            raise ConfigurationError(f"{self.provider}: json_mode must be one of {_JSON_MODES}, got {json_mode!r}")
        self.json_mode = json_mode
        require_openai(self.provider)
        base_url, api_key = self._endpoint(base_url, api_key)
        self.base_url = base_url
        # The SDK is imported, and the client built, on the first call.
        self._client = LazyClient(
            self.provider, api_key=api_key if api_key and api_key.strip() else _NO_KEY, base_url=base_url, timeout=self.timeout, max_retries=0
        )
        if client is not None:
            self._client.set(client)

    @property
    def client(self) -> Any:
        """The ``openai.OpenAI`` client (built on first use)."""
        return self._client.get()[1]

    def close(self) -> None:
        """Close the client built here (not one passed as ``client=``)."""
        self._client.close()

    def _endpoint(self, base_url: str | None, api_key: str | None) -> tuple[str, str | None]:
        found = config.compatible_endpoint()
        if base_url is not None:
            base_url = check_base_url(base_url, self._base_url_option)
            if api_key is not None:
                return base_url, api_key
            # The environment's key goes to the environment's URL only: base_url= naming
            # another server gets no key (pass api_key= for it).
            return base_url, found[1] if found is not None and _same_url(found[0], base_url) else None
        if found is not None:
            url, key, source = found
            return check_base_url(url, source), api_key if api_key is not None else key
        raise ConfigurationError(
            "the 'openai-compatible' LLM provider needs a base URL: set MEMORIST_LLM_BASE_URL "
            "(e.g. http://localhost:11434/v1 for Ollama) or pass base_url=..."
        )

    def _response_format(self, request: LLMRequest) -> dict[str, Any] | None:
        if request.json_schema is None or self.json_mode == "off":
            return None
        if self.json_mode == "object":
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {"name": request.schema_name[:64], "schema": request.json_schema, "strict": False},
        }

    def _generate(self, request: LLMRequest) -> LLMResponse:
        messages = [{"role": "system", "content": request.system}] if request.system else []
        messages += [{"role": m.role, "content": m.content} for m in request.messages]
        params: dict[str, Any] = {"model": self.model, "messages": messages, "timeout": request.timeout}
        response_format = self._response_format(request)
        if response_format is not None:
            params["response_format"] = response_format
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_output_tokens is not None:
            params["max_tokens"] = request.max_output_tokens
        openai, client = self._client.get()
        completion = create(openai, lambda: client.chat.completions.create(**params), request, self.name)
        if isinstance(completion, str):
            raise not_json(self.name, completion)
        check_object(self.name, completion)
        choices = getattr(completion, "choices", None) or []
        if not isinstance(choices, list):
            raise wrong_shape(self.name, f"'choices' is no list ({type(choices).__name__})")
        if not choices:
            raise TransientProviderError(f"{self.name}: the completion had no choices")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise wrong_shape(self.name, "its first choice has no message")
        content = getattr(message, "content", None)
        if not content:
            refusal = getattr(message, "refusal", None)
            if isinstance(refusal, str) and refusal.strip():
                raise refused(self.name, refusal)
            if getattr(message, "tool_calls", None):
                raise answered_with_tool_call(self.name)
        if isinstance(content, list):  # content parts, as some compatible servers send them
            parts = [p.get("text") if isinstance(p, dict) else getattr(p, "text", None) for p in content]
            if not all(isinstance(p, str) for p in parts):
                raise wrong_shape(self.name, "its message's content parts are not all text")
            content = "".join(parts)
        if content is not None and not isinstance(content, str):
            raise wrong_shape(self.name, f"its message's content is no text ({type(content).__name__})")
        if getattr(choices[0], "finish_reason", None) == "length":
            # Cut off at max_tokens: what is there is no whole answer.
            raise ProviderError(f"{self.name}: the reply is incomplete (length; max_output_tokens={request.max_output_tokens})")
        usage = getattr(completion, "usage", None)
        return LLMResponse(
            text=(content or ""),
            model=getattr(completion, "model", "") or self.model,
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            response_id=getattr(completion, "id", None),
        )


__all__ = ["OpenAICompatibleLLM"]
