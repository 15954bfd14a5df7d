"""OpenAI through the Responses API (``POST /v1/responses``), never Chat Completions.

Memory extraction and update run on ``gpt-5-mini`` through the Responses
API. The official ``openai`` SDK does the HTTP; it reads ``OPENAI_API_KEY`` and
``OPENAI_BASE_URL`` itself. Its own retries are switched off: the
:class:`~memorist.llm.base.LLM` base class retries, so that every attempt is
accounted for and ``Retry-After`` is honoured in one place.

The helpers here (:func:`import_openai`, :func:`translate_error`) are shared with
the Chat Completions providers.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

from .. import config
from ..errors import ConfigurationError, MissingDependencyError, ProviderError, TransientProviderError
from .base import LLM, LLMRequest, LLMResponse, call_with_deadline, request_deadline

#: The model extraction and update run on unless another is named.
DEFAULT_MODEL = "gpt-5-mini"
_INSTALL = "pip install 'memorist[llm]'"


def require_openai(provider: str) -> None:
    """Check that the ``openai`` SDK is installed, without importing it (the import
    takes seconds; it happens on the first call)."""
    if importlib.util.find_spec("openai") is None:
        raise MissingDependencyError(f"the {provider!r} LLM provider needs the openai SDK: {_INSTALL}")


def import_openai(provider: str) -> Any:
    """The ``openai`` SDK, or a :class:`MissingDependencyError` naming the pip command."""
    try:
        import openai
    except ImportError as exc:
        raise MissingDependencyError(
            f"the {provider!r} LLM provider needs the openai SDK: {_INSTALL}"
        ) from exc
    return openai


_DEADLINE_CLIENTS: dict[type, type] = {}
_CLASS_LOCK = threading.Lock()


def deadline_http_client(openai: Any) -> Any:
    """An HTTP client for the ``openai`` SDK (its own defaults) that ends a request
    still running past the whole-attempt deadline of :func:`call_with_deadline`:
    each socket read and write waits at most until the deadline, and a reply still
    arriving after it (a server sending a byte of its headers or body now and then)
    fails with the HTTP library's ``ReadTimeout``, its connection closed. Without it
    an abandoned worker would read on, holding a thread and a connection, for as long
    as the server drips."""
    base = openai.DefaultHttpxClient
    with _CLASS_LOCK:
        cls = _DEADLINE_CLIENTS.get(base)
        if cls is None:
            cls = _DEADLINE_CLIENTS[base] = _deadline_client_class(base)
    return cls()


def _time_left(timeout: float | None, timed_out: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before the request's deadline (none outside a
    :func:`call_with_deadline`); past the deadline, ``timed_out``."""
    deadline = request_deadline()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise timed_out("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineNetworkStream:
    """A connection of the HTTP library's pool (httpcore's network stream) whose reads
    and writes end at the deadline of the request using it."""

    def __init__(self, inner: Any, httpcore: Any) -> None:
        self._inner, self._httpcore = inner, httpcore

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _time_left(timeout, self._httpcore.ReadTimeout))  # type: ignore[no-any-return]

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _time_left(timeout, self._httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        tls = self._inner.start_tls(ssl_context, server_hostname, _time_left(timeout, self._httpcore.ConnectTimeout))
        return _DeadlineNetworkStream(tls, self._httpcore)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend:
    """The HTTP library's network backend, its connections :class:`_DeadlineNetworkStream`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._httpcore = sys.modules[type(inner).__module__.split(".")[0]]

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kwargs: Any) -> Any:
        stream = self._inner.connect_tcp(host, port, _time_left(timeout, self._httpcore.ConnectTimeout), **kwargs)
        return _DeadlineNetworkStream(stream, self._httpcore)

    def connect_unix_socket(self, path: str, timeout: float | None = None, **kwargs: Any) -> Any:
        stream = self._inner.connect_unix_socket(path, _time_left(timeout, self._httpcore.ConnectTimeout), **kwargs)
        return _DeadlineNetworkStream(stream, self._httpcore)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _deadline_client_class(base: type) -> type:
    # The SDK's HTTP library: httpx, or the httpx2 of newer SDKs.
    httpx = sys.modules[next(c for c in base.__mro__ if c.__name__ == "Client").__module__.split(".")[0]]

    class DeadlineStream(httpx.SyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, deadline: float, request: Any) -> None:
            self._inner, self._deadline, self._request = inner, deadline, request

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self._inner:
                if time.monotonic() > self._deadline:
                    raise httpx.ReadTimeout("the reply was still arriving at the request's deadline", request=self._request)
                yield chunk

        def close(self) -> None:
            self._inner.close()

    class DeadlineClient(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Every socket read and write waits at most until the deadline, and none starts
            # after it: a server dripping its headers (which no stream wrapper sees)
            # ends at the deadline too. Without the HTTP library's pool where expected,
            # only the body is bounded (DeadlineStream).
            for transport in (getattr(self, "_transport", None), *(getattr(self, "_mounts", None) or {}).values()):
                pool = getattr(transport, "_pool", None)
                backend = getattr(pool, "_network_backend", None)
                if backend is not None and not isinstance(backend, DeadlineBackend):
                    pool._network_backend = DeadlineBackend(backend)

        def send(self, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
            deadline = request_deadline()
            if deadline is None:
                return super().send(request, stream=stream, **kwargs)
            left = max(0.001, deadline - time.monotonic())
            timeouts = request.extensions.get("timeout")
            if isinstance(timeouts, dict):  # no single wait past the deadline
                request.extensions["timeout"] = {k: left if v is None else min(v, left) for k, v in timeouts.items()}
            response = super().send(request, stream=True, **kwargs)
            response.stream = DeadlineStream(response.stream, deadline, request)
            if not stream:
                try:
                    response.read()
                except BaseException:
                    response.close()
                    raise
            return response

    return DeadlineClient


class LazyClient:
    """An ``openai.OpenAI`` client built on first use, from settings captured when
    the provider was built, on a :func:`deadline_http_client`. Thread-safe."""

    def __init__(self, provider: str, **settings: Any) -> None:
        self._provider = provider
        self._settings = settings
        self._client: Any = None
        self._owned = False
        self._lock = threading.Lock()

    def get(self) -> tuple[Any, Any]:
        """``(the openai module, the client)``."""
        with self._lock:
            openai = import_openai(self._provider)
            if self._client is None:
                self._client = openai.OpenAI(**self._settings, http_client=deadline_http_client(openai))
                self._owned = True
            return openai, self._client

    def set(self, client: Any) -> None:
        """Use ``client`` (the caller's: :meth:`close` leaves it open)."""
        self._client, self._owned = client, False

    def close(self) -> None:
        """Close the client built here (its connections); the next call builds another."""
        with self._lock:
            client, owned = self._client, self._owned
            if owned:
                self._client, self._owned = None, False
        if owned:
            client.close()


#: The address the SDK uses when none is set.
OPENAI_URL = "https://api.openai.com/v1"


def check_base_url(url: Any, source: str) -> str:
    """``url`` stripped, or a :class:`ConfigurationError` naming ``source`` (the option
    or the variable it came from) when it is no ``http://`` or ``https://`` URL: such
    a URL would only fail later, on every call, as a retried "Connection error"."""
    text = url.strip() if isinstance(url, str) else ""
    try:
        parsed = urllib.parse.urlsplit(text)
        ok = parsed.scheme in ("http", "https") and bool(parsed.hostname) and not any(c.isspace() for c in text)
    except ValueError:  # e.g. a bad port or IPv6 address
        ok = False
    if not ok:
        raise ConfigurationError(
            f"{source} must be an http:// or https:// URL such as http://localhost:11434/v1, got {url!r}"
        )
    return text


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    # An unreadable value (nan, inf, words) is no Retry-After: the default backoff applies.
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            if math.isfinite(ms := float(raw_ms)):
                return max(0.0, ms / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def translate_error(openai: Any, exc: Exception, name: str) -> ProviderError:
    """Map an SDK exception onto Memorist's tree: what is worth retrying becomes a
    :class:`TransientProviderError` (with the provider's ``Retry-After``)."""
    if isinstance(exc, openai.APITimeoutError):
        return TransientProviderError(f"{name}: the request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return TransientProviderError(f"{name}: connection failed: {exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = getattr(exc, "message", "") or str(exc)
        headers = getattr(exc.response, "headers", None)
        should_retry = headers.get("x-should-retry") if headers is not None else None
        retryable = status in (408, 409, 429) or status >= 500 or should_retry == "true"
        if retryable and should_retry != "false":
            return TransientProviderError(
                f"{name}: HTTP {status}: {message}", retry_after=_retry_after(headers), status=status
            )
        if status == 401:
            return ProviderError(f"{name}: HTTP 401, the API key was refused: {message}")
        return ProviderError(f"{name}: HTTP {status}: {message}")
    if isinstance(exc, openai.OpenAIError):
        return ProviderError(f"{name}: {type(exc).__name__}: {exc}")
    return ProviderError(f"{name}: {type(exc).__name__}: {exc}")


def not_json(name: str, reply: str) -> ProviderError:
    """The error for a 200 reply whose body was no JSON (the SDK hands such a body back
    as text): a proxy's or a gateway's page, a wrong base URL."""
    return ProviderError(
        f"{name}: the reply was not JSON in the provider's format (a web page? the base URL may be wrong): "
        f"{' '.join(reply.split())[:120]!r}"
    )


def wrong_shape(name: str, why: str) -> ProviderError:
    """The error for a 200 reply that is JSON but not of the API's shape. Not retried:
    the same server answers the same way (a wrong base URL, a proxy, another API)."""
    return ProviderError(f"{name}: the reply's shape is wrong: {why}")


_JSON_KINDS = {list: "an array", type(None): "null", bool: "a boolean", int: "a number", float: "a number"}


def check_object(name: str, reply: Any) -> None:
    """Raise :func:`wrong_shape` when a 200 reply's JSON body was no object: the SDK
    hands an array, ``null`` or a number back as it is."""
    kind = _JSON_KINDS.get(type(reply))
    if kind is not None:
        raise wrong_shape(name, f"its JSON body is {kind}, not an object")


def refused(name: str, refusal: str) -> ProviderError:
    """The error for a model that refused to answer: its refusal, whitespace folded,
    cut to 200 characters. Not retried: asked again, the model refuses again."""
    return ProviderError(f"{name}: the model refused: {' '.join(refusal.split())[:200]!r}")


def answered_with_tool_call(name: str) -> ProviderError:
    """The error for a model that called a tool (a function) where text was asked for.
    Not retried: no tools are offered, so the server or the model is at odds with the request."""
    return ProviderError(f"{name}: the model answered with a tool call, not the text asked for")


def _field(item: Any, key: str) -> Any:
    """``item[key]`` of a dict, else the attribute (an SDK model's, or an extra field's)."""
    if isinstance(item, dict):
        return item.get(key)
    value = getattr(item, key, None)
    if value is None:
        value = (getattr(item, "model_extra", None) or {}).get(key)
    return value


def responses_refusal(response: Any) -> str | None:
    """The refusal in a Responses API reply (a ``refusal`` content part of a message,
    or a ``refusal`` output item), or None."""
    output = _field(response, "output")
    for item in output if isinstance(output, list) else ():
        parts = [item] if _field(item, "type") == "refusal" else _field(item, "content")
        for part in parts if isinstance(parts, list) else ():
            refusal = _field(part, "refusal") if _field(part, "type") == "refusal" else None
            if isinstance(refusal, str) and refusal.strip():
                return refusal
    return None


def responses_tool_call(response: Any) -> bool:
    """The Responses API reply holds a tool call (``function_call``, ``custom_tool_call``,
    or another ``..._call`` output item)."""
    output = _field(response, "output")
    return any(
        isinstance(kind := _field(item, "type"), str) and kind.endswith("_call")
        for item in (output if isinstance(output, list) else ())
    )


def create(openai: Any, call: Any, request: LLMRequest, name: str) -> Any:
    """``call()`` (an SDK request) under the whole-attempt deadline of ``request``,
    its failures mapped onto Memorist's errors."""
    try:
        return call_with_deadline(call, request.timeout, name)
    except TransientProviderError:
        raise
    except Exception as exc:
        raise translate_error(openai, exc, name) from exc


def output_text(response: Any) -> str:
    """The text of a Responses API reply: the SDK's ``output_text`` (every
    ``output_text`` part of every ``message`` item, joined), else a top-level
    ``output_text`` field, which some compatible servers send instead."""
    try:
        text = response.output_text
    except Exception:  # no "output" list at all
        text = ""
    if not text:
        extra = getattr(response, "model_extra", None) or {}
        text = extra.get("output_text") if isinstance(extra.get("output_text"), str) else ""
    return text or ""


class OpenAIResponsesLLM(LLM):
    """OpenAI models through the Responses API.

    ``api_key`` defaults to ``OPENAI_API_KEY`` and ``base_url`` to ``OPENAI_BASE_URL``
    (the SDK's own variables, read when this is built; an empty or blank
    ``OPENAI_BASE_URL`` is unset: OpenAI's address); with neither a key nor a key
    in the environment (a blank key is none) this raises a
    :class:`~memorist.errors.ConfigurationError` naming the variable, as does a base
    URL that is no http(s) URL. The SDK is imported, and its client built, on the first
    call; ``client=`` passes a ready ``openai.OpenAI``.
    ``reasoning_effort`` (``"minimal"``, ``"low"``, ...) is sent when set.
    ``temperature`` is sent only when set: GPT-5 models refuse it.
    ``max_output_tokens`` defaults to 16,384 (reasoning tokens count in it).
    Responses are not stored on OpenAI's side (``store=False``).

    >>> OpenAIResponsesLLM(api_key="sk-test").name  # no network call is made
    'openai:gpt-5-mini'
    """

    provider = "openai"
    default_max_output_tokens = 16_384

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        reasoning_effort: str | None = None,
        client: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(model, **options)
        self.reasoning_effort = reasoning_effort
        require_openai(self.provider)
        api_key = api_key if api_key is not None else config.openai_api_key()
        if client is None and not (api_key or "").strip():  # a blank key is no key
            raise ConfigurationError(
                "the 'openai' LLM provider needs an API key: set OPENAI_API_KEY (or pass api_key=...)"
            )
        configured = config.openai_base_url()
        if base_url is not None:
            self.base_url = check_base_url(base_url, "base_url")
        elif (configured or "").strip():
            self.base_url = check_base_url(configured, "OPENAI_BASE_URL")
        else:
            # Unset, empty or blank: OpenAI's own address, passed explicitly (given None,
            # the SDK would read OPENAI_BASE_URL itself and use the empty string).
            self.base_url = OPENAI_URL
        self._client = LazyClient(
            self.provider, api_key=api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
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

    def _generate(self, request: LLMRequest) -> LLMResponse:
        params: dict[str, Any] = {
            "model": self.model,
            "input": [{"role": m.role, "content": m.content} for m in request.messages],
            "store": False,
            "timeout": request.timeout,
        }
        if request.system:
            params["instructions"] = request.system
        if request.json_schema is not None:
            params["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": request.schema_name[:64],
                    "schema": request.json_schema,
                    "strict": False,
                }
            }
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_output_tokens is not None:
            params["max_output_tokens"] = request.max_output_tokens
        if self.reasoning_effort:
            params["reasoning"] = {"effort": self.reasoning_effort}
        openai, client = self._client.get()
        response = create(openai, lambda: client.responses.create(**params), request, self.name)
        if isinstance(response, str):
            raise not_json(self.name, response)
        check_object(self.name, response)
        if not isinstance(getattr(response, "output", None), list | None):
            raise wrong_shape(self.name, f"'output' is no list ({type(response.output).__name__})")
        if getattr(response, "output", None) is None and not output_text(response):
            raise ProviderError(f"{self.name}: the reply was not in the Responses API's format (it has no output)")
        status = getattr(response, "status", None)
        error = getattr(response, "error", None)
        if status == "failed" or error:
            message = getattr(error, "message", None) or str(error)
            raise TransientProviderError(f"{self.name}: the response failed: {message}")
        if status == "incomplete":
            # Cut off (max_output_tokens, a content filter): what is there is no whole answer.
            why = getattr(getattr(response, "incomplete_details", None), "reason", None) or "no reason given"
            raise ProviderError(f"{self.name}: the reply is incomplete ({why}; max_output_tokens={request.max_output_tokens})")
        text = output_text(response)
        if not text:
            refusal = responses_refusal(response)
            if refusal is not None:
                raise refused(self.name, refusal)
            if responses_tool_call(response):
                raise answered_with_tool_call(self.name)
        usage = getattr(response, "usage", None)
        return LLMResponse(
            text=text,
            model=getattr(response, "model", "") or self.model,
            input_tokens=getattr(usage, "input_tokens", None),
            output_tokens=getattr(usage, "output_tokens", None),
            response_id=getattr(response, "id", None),
        )


__all__ = [
    "DEFAULT_MODEL", "OPENAI_URL", "LazyClient", "OpenAIResponsesLLM", "answered_with_tool_call", "check_base_url",
    "check_object", "create", "deadline_http_client", "import_openai", "not_json", "output_text", "refused",
    "require_openai", "translate_error", "wrong_shape",
]
