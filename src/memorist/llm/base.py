"""The LLM seam: one base class that owns everything but the wire.

A provider implements :meth:`LLM._generate`, one attempt at one request. The base
class does the rest, once for every provider:

- **timeouts**: every attempt gets ``timeout`` seconds;
- **retries**: a :class:`~memorist.errors.TransientProviderError` (timeout, lost
  connection, 429, 5xx) is retried up to ``max_retries`` times with exponential
  backoff and jitter; a ``Retry-After`` the provider sent is honoured exactly (and a
  wait longer than ``max_retry_after`` is not waited for: the call fails at once, so
  a rate-limited model never blocks ``Memory.add`` for minutes);
- **structured output**: :meth:`LLM.generate_json` asks for JSON matching a pydantic
  schema, repairs what it cheaply can (code fences, prose around the object), and on
  invalid output asks the model once more, showing it its reply and what was wrong;
  then gives up with :class:`~memorist.errors.InvalidOutputError`;
- **accounting**: every attempt becomes an :class:`LLMCall` (provider, model, role,
  prompt version, tokens, cost estimate, latency, error) kept in the instance's
  totals and handed to every open :func:`recording`, from which the pipelines write
  ``llm_call`` events into the store's log;
- **log previews**: prompts and replies are logged shortened, ``prefix… [len=N]``.
"""

from __future__ import annotations

import abc
import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, TypeVar

from ..errors import ConfigurationError, InvalidOutputError, ProviderError, TransientProviderError
from ..policies.text import preview

logger = logging.getLogger("memorist")

M = TypeVar("M")

#: Estimated USD per million tokens (input, output), from the providers' public price
#: lists (2025). An estimate for the event log, not a bill; pass ``prices=`` to
#: override or add models. Unknown models get no estimate (``cost_usd`` is None).
PRICES: dict[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.0),
    "gpt-4o-mini": (0.15, 0.60),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.40),
}


# --- requests, responses, calls ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a request: ``role`` is ``"user"`` or ``"assistant"``."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """What a provider sends, for one attempt.

    ``system`` is the instruction block (the Responses API's ``instructions``, a
    system message for Chat Completions). ``json_schema`` (with ``schema_name``) asks
    for JSON of that shape; None asks for free text. ``timeout`` is in seconds.
    """

    system: str
    messages: tuple[ChatMessage, ...]
    json_schema: dict[str, Any] | None = None
    schema_name: str = "response"
    temperature: float | None = None
    max_output_tokens: int | None = None
    timeout: float = 60.0


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """What a provider got back: the text and, when the provider reported it, usage."""

    text: str
    model: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    response_id: str | None = None


@dataclass(slots=True)
class LLMCall:
    """One attempt at one request, as the event log records it (op ``llm_call``)."""

    provider: str
    model: str
    role: str
    prompt: str  # the prompt module's version, e.g. "extraction/1"
    attempt: int  # 1 for the first try; retries and the repair call count on
    ok: bool
    latency_ms: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None
    response_id: str | None = None

    def to_payload(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True, slots=True)
class Fallback:
    """A role that could not use its model and fell back to its heuristic."""

    role: str
    reason: str


@dataclass(slots=True)
class Recording:
    """What happened inside one :func:`recording` block."""

    calls: list[LLMCall] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)

    def failed(self, role: str) -> Fallback | None:
        """The first fallback of ``role`` (``"extractor"``, ...) in this block, if any."""
        return next((f for f in self.fallbacks if f.role == role), None)


_recordings: ContextVar[tuple[Recording, ...]] = ContextVar("memorist_llm_recordings", default=())


@contextmanager
def recording() -> Iterator[Recording]:
    """Collect the LLM calls and role fallbacks made inside the block (this thread or
    task only). Blocks nest; each sees everything that happens inside it.

    >>> from memorist.llm.testing import ScriptedLLM
    >>> llm = ScriptedLLM(["hello"])
    >>> with recording() as rec:
    ...     _ = llm.generate("hi", role="demo")
    >>> [(c.role, c.ok) for c in rec.calls]
    [('demo', True)]
    """
    rec = Recording()
    token = _recordings.set((*_recordings.get(), rec))
    try:
        yield rec
    finally:
        _recordings.reset(token)


def note_fallback(role: str, error: BaseException | str) -> None:
    """Tell the open recordings that ``role`` fell back to its heuristic."""
    reason = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    for rec in _recordings.get():
        rec.fallbacks.append(Fallback(role, preview(reason, 300)))


# --- JSON repair --------------------------------------------------------------------

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```$", re.S)


def loads_lenient(text: str) -> Any:
    """Parse a model's JSON reply, forgiving what models commonly wrap around it:
    Markdown code fences and prose before or after the object."""
    stripped = text.strip().lstrip("\ufeff")
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as first:
        start, end = stripped.find("{"), stripped.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(stripped[start : end + 1])
            except json.JSONDecodeError:
                pass
        raise ValueError(f"not valid JSON ({first.msg} at line {first.lineno} column {first.colno})") from first


def _describe_validation(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            lines = []
            for err in errors()[:8]:
                where = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
                lines.append(f"{where}: {err.get('msg', '')}")
            return "; ".join(lines)
        except Exception:  # pragma: no cover - a pydantic without errors()
            pass
    return str(exc)


def response_schema(model: type) -> dict[str, Any]:
    """The JSON schema a pydantic model shows the provider (its field descriptions are
    what the model reads)."""
    return model.model_json_schema()  # type: ignore[attr-defined,no-any-return]


_REPAIR = (
    "Your reply above could not be used: {problem}\n"
    "Reply again with ONLY the corrected JSON object, no other text."
)


# --- the base class -------------------------------------------------------------------


class LLM(abc.ABC):
    """A chat model behind one small method, :meth:`_generate`.

    ``timeout`` applies to each attempt (seconds). ``max_retries`` transient
    failures are retried with backoff ``backoff * 2**n`` seconds (jittered, at most
    ``max_backoff``) or the provider's ``Retry-After``, unless that is longer than
    ``max_retry_after``. ``temperature`` and ``max_output_tokens`` are sent only
    when set. ``prices`` adds or overrides per-model cost estimates (USD per million
    input and output tokens).
    """

    #: The provider's name in ``"provider:model"`` strings and in the event log.
    provider: ClassVar[str] = "llm"

    def __init__(
        self,
        model: str,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_retry_after: float = 60.0,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
        prices: Mapping[str, tuple[float, float]] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"{self.provider}: a model name is required, got {model!r}")
        if not timeout or timeout <= 0:
            raise ConfigurationError(f"{self.provider}: timeout must be > 0 seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"{self.provider}: max_retries must be a whole number >= 0, got {max_retries!r}")
        if temperature is not None and not 0 <= temperature <= 2:
            raise ConfigurationError(f"{self.provider}: temperature must be in [0, 2], got {temperature!r}")
        self.model = model.strip()
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.prices = {**PRICES, **(prices or {})}
        self._sleep = sleep
        self._lock = threading.Lock()
        self._totals = {"calls": 0, "failed_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}

    # the one method a provider implements ------------------------------------------
    @abc.abstractmethod
    def _generate(self, request: LLMRequest) -> LLMResponse:
        """Make one attempt at ``request`` and return the model's text.

        Raise :class:`~memorist.errors.TransientProviderError` (with ``retry_after``
        when the provider sent one) for failures worth retrying, and
        :class:`~memorist.errors.ProviderError` for the others (a bad key, a bad
        request). Do not retry here: the base class does.
        """

    # public API ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        """``"provider:model"``, as a spec string would name this LLM."""
        return f"{self.provider}:{self.model}"

    def usage(self) -> dict[str, Any]:
        """Totals since this instance was built: calls, failed calls, tokens, cost (USD)."""
        with self._lock:
            totals = dict(self._totals)
        totals["cost_usd"] = round(totals["cost_usd"], 6)
        return totals

    def generate(
        self,
        prompt: str | Sequence[ChatMessage],
        *,
        system: str = "",
        role: str = "",
        prompt_version: str = "",
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "response",
        temperature: float | None = None,
    ) -> str:
        """The model's reply to ``prompt`` (a string, or a list of messages), with
        retries on transient failures. ``role`` and ``prompt_version`` label the
        calls in the event log."""
        return self._run(prompt, system, role, prompt_version, json_schema, schema_name, temperature, 0)[0]

    def _run(
        self,
        prompt: str | Sequence[ChatMessage],
        system: str,
        role: str,
        prompt_version: str,
        json_schema: dict[str, Any] | None,
        schema_name: str,
        temperature: float | None,
        attempts_before: int,
    ) -> tuple[str, int]:
        """``generate``, also returning how many attempts it took."""
        messages = (ChatMessage("user", prompt),) if isinstance(prompt, str) else tuple(prompt)
        request = LLMRequest(
            system=system,
            messages=messages,
            json_schema=json_schema,
            schema_name=schema_name,
            temperature=self.temperature if temperature is None else temperature,
            max_output_tokens=self.max_output_tokens,
            timeout=self.timeout,
        )
        logger.debug("memorist: %s %s ← %s", self.name, role or "call", preview(messages[-1].content if messages else ""))
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                response = self._generate(request)
            except ProviderError as exc:
                self._account(role, prompt_version, attempts_before + attempt, started, error=exc)
                retry_after = exc.retry_after if isinstance(exc, TransientProviderError) else None
                if not isinstance(exc, TransientProviderError) or attempt > self.max_retries:
                    raise
                if retry_after is not None and retry_after > self.max_retry_after:
                    raise TransientProviderError(
                        f"{exc} (the provider asked to wait {retry_after:g}s, more than max_retry_after="
                        f"{self.max_retry_after:g}s)",
                        retry_after=retry_after,
                        status=exc.status,
                    ) from exc
                delay = retry_after if retry_after is not None else self._backoff(attempt)
                logger.info(
                    "memorist: %s %s failed (%s); retry %d/%d in %.2fs",
                    self.name, role or "call", exc, attempt, self.max_retries, delay,
                )
                self._sleep(delay)
                continue
            except Exception as exc:
                # A provider bug or an SDK error we do not map: accounted, not retried.
                self._account(role, prompt_version, attempts_before + attempt, started, error=exc)
                raise ProviderError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
            self._account(role, prompt_version, attempts_before + attempt, started, response=response)
            logger.debug("memorist: %s %s → %s", self.name, role or "call", preview(response.text))
            return response.text, attempt

    def generate_json(
        self,
        schema: type[M],
        prompt: str,
        *,
        system: str = "",
        role: str = "",
        prompt_version: str = "",
        check: Callable[[M], None] | None = None,
        temperature: float | None = None,
        on_reply: Callable[[str], None] | None = None,
    ) -> M:
        """Ask for JSON matching the pydantic model ``schema`` and return it validated.

        ``check`` may raise ``ValueError`` for problems the schema cannot express
        (an id that was never shown, a fact left without a decision); it counts as
        invalid output. Invalid output gets one repair retry, in the same
        conversation; then :class:`~memorist.errors.InvalidOutputError`.
        ``on_reply`` receives each raw reply (to log it, as the playbooks' curator does).
        """
        json_schema = response_schema(schema)
        name = getattr(schema, "__name__", "response")
        messages: list[ChatMessage] = [ChatMessage("user", prompt)]
        text, attempts = self._run(messages, system, role, prompt_version, json_schema, name, temperature, 0)
        if on_reply is not None:
            on_reply(text)
        try:
            return self._validate(schema, text, check)
        except ValueError as exc:
            problem = str(exc)
        logger.warning(
            "memorist: %s %s returned unusable output (%s); asking once more. Raw output: %s",
            self.name, role or "call", preview(problem, 300), preview(text, 300),
        )
        messages += [ChatMessage("assistant", text), ChatMessage("user", _REPAIR.format(problem=problem))]
        text, _ = self._run(messages, system, role, prompt_version, json_schema, name, temperature, attempts)
        if on_reply is not None:
            on_reply(text)
        try:
            return self._validate(schema, text, check)
        except ValueError as exc:
            logger.warning(
                "memorist: %s %s returned unusable output again (%s). Raw output: %s",
                self.name, role or "call", preview(str(exc), 300), preview(text, 300),
            )
            raise InvalidOutputError(f"{self.name} {role or 'call'}: unusable output after a repair retry: {exc}", raw=text) from exc

    # internals --------------------------------------------------------------------------
    @staticmethod
    def _validate(schema: type[M], text: str, check: Callable[[M], None] | None) -> M:
        if not text.strip():
            raise ValueError("the reply was empty")
        data = loads_lenient(text)
        try:
            value = schema.model_validate(data)  # type: ignore[attr-defined]
        except Exception as exc:  # pydantic.ValidationError is a ValueError; be general
            raise ValueError(f"the JSON does not match the schema: {_describe_validation(exc)}") from exc
        if check is not None:
            check(value)
        return value  # type: ignore[no-any-return]

    def _backoff(self, attempt: int) -> float:
        base = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        return base * (0.5 + random.random() / 2)

    def estimate_cost(self, model: str, input_tokens: int | None, output_tokens: int | None) -> float | None:
        """USD for the tokens, from :data:`PRICES` (longest matching model prefix)."""
        if input_tokens is None and output_tokens is None:
            return None
        key = max((k for k in self.prices if model == k or model.startswith(k + "-")), key=len, default=None)
        if key is None:
            return None
        price_in, price_out = self.prices[key]
        return round(((input_tokens or 0) * price_in + (output_tokens or 0) * price_out) / 1_000_000, 8)

    def _account(
        self,
        role: str,
        prompt_version: str,
        attempt: int,
        started: float,
        *,
        response: LLMResponse | None = None,
        error: BaseException | None = None,
    ) -> None:
        latency = round((time.monotonic() - started) * 1000, 1)
        if response is not None:
            # The model the request named, not a dated snapshot name: prices key on it.
            cost = self.estimate_cost(self.model, response.input_tokens, response.output_tokens)
            call = LLMCall(
                provider=self.provider, model=self.model, role=role, prompt=prompt_version, attempt=attempt,
                ok=True, latency_ms=latency, input_tokens=response.input_tokens,
                output_tokens=response.output_tokens, cost_usd=cost, response_id=response.response_id,
            )
        else:
            call = LLMCall(
                provider=self.provider, model=self.model, role=role, prompt=prompt_version, attempt=attempt,
                ok=False, latency_ms=latency, error=preview(f"{type(error).__name__}: {error}", 300),
            )
        with self._lock:
            self._totals["calls"] += 1
            self._totals["failed_calls"] += 0 if call.ok else 1
            self._totals["input_tokens"] += call.input_tokens or 0
            self._totals["output_tokens"] += call.output_tokens or 0
            self._totals["cost_usd"] += call.cost_usd or 0.0
        for rec in _recordings.get():
            rec.calls.append(call)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"


__all__ = [
    "PRICES",
    "ChatMessage",
    "Fallback",
    "LLM",
    "LLMCall",
    "LLMRequest",
    "LLMResponse",
    "Recording",
    "loads_lenient",
    "note_fallback",
    "recording",
    "response_schema",
]
