"""The LLM seam: one base class that owns everything but the wire.

A provider implements :meth:`LLM._generate`, one attempt at one request. The base
class does the rest, once for every provider:

- **timeouts**: every attempt gets ``timeout`` seconds, as a whole: the providers run
  the request under :func:`call_with_deadline`, so a server that answers a few bytes
  at a time cannot hold a call past it;
- **retries**: a :class:`~memorist.errors.TransientProviderError` (timeout, lost
  connection, 429, 5xx) is retried up to ``max_retries`` times with exponential
  backoff and jitter; a ``Retry-After`` the provider sent is honoured exactly (and a
  wait longer than ``max_retry_after`` is not waited for: the call fails at once, so
  a rate-limited model never blocks ``Memory.add`` for minutes);
- **structured output**: :meth:`LLM.generate_json` asks for JSON matching a pydantic
  schema, repairs what it cheaply can (code fences, prose around the object), and on
  invalid output asks the model once more, showing it its reply and what was wrong;
  then gives up with :class:`~memorist.errors.InvalidOutputError`;
- **bounded output**: a reply longer than ``max_reply_chars`` is refused unread
  (:class:`~memorist.errors.InvalidOutputError`, no repair retry), and providers
  that can cap a reply's tokens get ``max_output_tokens`` (their default when unset);
- **accounting**: every attempt becomes an :class:`LLMCall` (provider, model, role,
  prompt version, tokens, cost estimate, latency, error) kept in the instance's
  totals and handed to every open :func:`recording`, from which the pipelines write
  ``llm_call`` events into the store's log; a call no turn writes goes to the
  instance's sinks (:meth:`LLM.add_sink`: a Memory logs its models' calls there).
  Token counts a provider reports are trusted only as whole numbers from 0 to
  :data:`MAX_TOKENS`;
- **log previews**: prompts and replies are logged shortened, ``prefix… [len=N]``.
"""

from __future__ import annotations

import abc
import contextvars
import json
import logging
import math
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
T = TypeVar("T")

#: The most tokens one call may report for its input or its output; a count beyond
#: it (or negative, or no whole number) is a provider's bug and counted as unknown.
MAX_TOKENS = 10_000_000
#: The longest reply (characters) a call accepts by default: beyond it the reply is
#: refused unread. Per-text limits (a fact, a memory) are the roles' and are smaller.
MAX_REPLY_CHARS = 1_000_000
#: How much of an unusable reply the repair retry shows the model again.
_REPAIR_ECHO_CHARS = 8_000
#: HTTP statuses after which a provider counts as unavailable for the rest of a turn
#: (with None: a timeout or a lost connection).
_UNAVAILABLE_STATUSES = frozenset({None, 408, 429, 502, 503, 504})

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
    """What happened inside one :func:`recording` block.

    ``turn``: the block is one turn of a pipeline, which writes the block's calls to
    the log itself (so the models' sinks do not), and in which a provider that failed
    on the way (a timeout, a lost connection, 429, 502-504, after its retries) is not
    asked again: ``unavailable`` holds why, per model instance.
    """

    calls: list[LLMCall] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    turn: bool = False
    unavailable: dict[int, str] = field(default_factory=dict)

    def failed(self, role: str) -> Fallback | None:
        """The first fallback of ``role`` (``"extractor"``, ...) in this block, if any."""
        return next((f for f in self.fallbacks if f.role == role), None)


_recordings: ContextVar[tuple[Recording, ...]] = ContextVar("memorist_llm_recordings", default=())


@contextmanager
def recording(*, turn: bool = False) -> Iterator[Recording]:
    """Collect the LLM calls and role fallbacks made inside the block (this thread or
    task only). Blocks nest; each sees everything that happens inside it. ``turn``:
    see :class:`Recording`.

    >>> from memorist.llm.testing import ScriptedLLM
    >>> llm = ScriptedLLM(["hello"])
    >>> with recording() as rec:
    ...     _ = llm.generate("hi", role="demo")
    >>> [(c.role, c.ok) for c in rec.calls]
    [('demo', True)]
    """
    rec = Recording(turn=turn)
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


def _nul_at(data: Any) -> str | None:
    """Where in parsed JSON a string (or a key) holds a NUL character, or None."""
    stack: list[tuple[str, Any]] = [("the reply", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return where
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    return f"a key of {where}"
                stack.append((f"{where}.{key}" if where != "the reply" else str(key), item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
    return None


def loads_lenient(text: str) -> Any:
    """Parse a model's JSON reply, forgiving what models commonly wrap around it:
    Markdown code fences and prose before or after the object."""
    stripped = text.strip().lstrip("\ufeff")
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return _loads(stripped)
    except ValueError as first:
        start, end = stripped.find("{"), stripped.rfind("}")
        if 0 <= start < end and (start, end) != (0, len(stripped) - 1):
            try:
                return _loads(stripped[start : end + 1])
            except ValueError:
                pass
        raise first


def _loads(text: str) -> Any:
    """``json.loads``, every way it can fail a ``ValueError`` that says why: nesting
    too deep for the parser (a ``RecursionError``) and a number too long included."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    except RecursionError:
        raise ValueError("not usable JSON: it is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise ValueError(f"not usable JSON: {exc}") from exc


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


_deadline: ContextVar[float | None] = ContextVar("memorist_llm_deadline", default=None)


def request_deadline() -> float | None:
    """The ``time.monotonic()`` by which the attempt running in this context must be
    over (set by :func:`call_with_deadline` in its worker), or None outside one."""
    return _deadline.get()


def call_with_deadline(fn: Callable[[], T], seconds: float, name: str) -> T:
    """``fn()``, or a :class:`~memorist.errors.TransientProviderError` when it has not
    returned within ``seconds``: a whole-attempt deadline around an SDK call.

    An HTTP client's timeout bounds each read, not the reply: a server that sends a
    few bytes every half second keeps a request alive for ever. ``fn`` runs in a
    worker thread (with this thread's context); at the deadline the caller goes on
    and the worker is abandoned, its reply discarded. The worker sees the deadline
    (:func:`request_deadline`): the providers' HTTP clients end a request still
    reading past it (an ``httpx.ReadTimeout``, the connection closed), so the worker
    exits soon after the caller went on instead of reading on for ever.
    """
    done = threading.Event()
    box: dict[str, Any] = {}
    context = contextvars.copy_context()
    deadline = time.monotonic() + seconds

    def bounded() -> T:
        _deadline.set(deadline)
        return fn()

    def work() -> None:
        try:
            box["value"] = context.run(bounded)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="memorist-llm-request", daemon=True).start()
    if not done.wait(seconds):
        raise TransientProviderError(f"{name}: the request timed out (no complete reply within {seconds:g}s)")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def _number(value: Any) -> bool:
    """``value`` is a finite int or float (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _token_count(value: Any) -> int | None:
    """A reported token count as an int, or None when it is no count at all."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    return value if 0 <= value <= MAX_TOKENS else None


# --- the base class -------------------------------------------------------------------


class LLM(abc.ABC):
    """A chat model behind one small method, :meth:`_generate`.

    ``timeout`` applies to each attempt (seconds). ``max_retries`` transient
    failures are retried with backoff ``backoff * 2**n`` seconds (jittered, at most
    ``max_backoff``) or the provider's ``Retry-After``, unless that is longer than
    ``max_retry_after``. ``temperature`` is sent only when set; ``max_output_tokens``
    when set, else the provider's :attr:`default_max_output_tokens`. A reply longer
    than ``max_reply_chars`` characters is refused. ``prices`` adds or overrides
    per-model cost estimates (USD per million input and output tokens).
    """

    #: The provider's name in ``"provider:model"`` strings and in the event log.
    provider: ClassVar[str] = "llm"
    #: The cap on a reply's tokens sent when ``max_output_tokens`` is not given
    #: (None: none is sent, the server's own applies).
    default_max_output_tokens: ClassVar[int | None] = None

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
        max_reply_chars: int = MAX_REPLY_CHARS,
        prices: Mapping[str, tuple[float, float]] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(f"{self.provider}: a model name is required, got {model!r}")
        if not _number(timeout) or not 0 < timeout <= threading.TIMEOUT_MAX:
            raise ConfigurationError(f"{self.provider}: timeout must be a finite number of seconds > 0, got {timeout!r}")
        for option, seconds in (("backoff", backoff), ("max_backoff", max_backoff), ("max_retry_after", max_retry_after)):
            if not _number(seconds) or not 0 <= seconds <= threading.TIMEOUT_MAX:
                raise ConfigurationError(f"{self.provider}: {option} must be a finite number of seconds >= 0, got {seconds!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"{self.provider}: max_retries must be a whole number >= 0, got {max_retries!r}")
        if temperature is not None and (not _number(temperature) or not 0 <= temperature <= 2):
            raise ConfigurationError(f"{self.provider}: temperature must be in [0, 2], got {temperature!r}")
        for option, value in (("max_output_tokens", max_output_tokens), ("max_reply_chars", max_reply_chars)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"{self.provider}: {option} must be a whole number >= 1, got {value!r}")
        self.model = model.strip()
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens if max_output_tokens is not None else self.default_max_output_tokens
        self.max_reply_chars = max_reply_chars
        self.prices = {**PRICES, **(prices or {})}
        self._sleep = sleep
        self._lock = threading.Lock()
        self._totals = {"calls": 0, "failed_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        self._sinks: list[Callable[[LLMCall], None]] = []

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

    def add_sink(self, sink: Callable[[LLMCall], None]) -> None:
        """Hand ``sink`` every call of this instance that no turn writes to a log
        (see :class:`Recording`): a :class:`~memorist.Memory` logs its models' calls
        made outside ``add`` and ``reprocess`` (consolidation, learning, evaluation)
        so. A sink that raises is logged, never the caller's problem."""
        with self._lock:
            if sink not in self._sinks:
                self._sinks.append(sink)

    def remove_sink(self, sink: Callable[[LLMCall], None]) -> None:
        with self._lock:
            if sink in self._sinks:
                self._sinks.remove(sink)

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
        turns = [r for r in _recordings.get() if r.turn]
        down = next((r.unavailable[id(self)] for r in turns if id(self) in r.unavailable), None)
        if down is not None:
            # It failed on the way moments ago in this turn: asking again would double the wait.
            raise TransientProviderError(f"{self.name}: not asked again in this turn, it just failed: {down}")
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                response = self._generate(request)
                if len(response.text) > self.max_reply_chars:
                    raise InvalidOutputError(
                        f"{self.name}: the reply is {len(response.text):,} characters, more than max_reply_chars="
                        f"{self.max_reply_chars:,}; refused unread",
                        raw=response.text[:_REPAIR_ECHO_CHARS],
                    )
            except ProviderError as exc:
                self._account(role, prompt_version, attempts_before + attempt, started, error=exc)
                retry_after = exc.retry_after if isinstance(exc, TransientProviderError) else None
                if not isinstance(exc, TransientProviderError) or attempt > self.max_retries:
                    self._note_unavailable(turns, exc)
                    raise
                if retry_after is not None and retry_after > self.max_retry_after:
                    final = TransientProviderError(
                        f"{exc} (the provider asked to wait {retry_after:g}s, more than max_retry_after="
                        f"{self.max_retry_after:g}s)",
                        retry_after=retry_after,
                        status=exc.status,
                    )
                    self._note_unavailable(turns, final)
                    raise final from exc
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

    def _note_unavailable(self, turns: Sequence[Recording], exc: ProviderError) -> None:
        """Mark this model unavailable for the rest of the open turns, when ``exc``
        says it is (a timeout, a lost connection, a rate limit, a gateway error)."""
        if turns and isinstance(exc, TransientProviderError) and exc.status in _UNAVAILABLE_STATUSES:
            reason = preview(str(exc), 200)
            for rec in turns:
                rec.unavailable.setdefault(id(self), reason)

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
        # What the model said is shown again, shortened: a huge reply is not sent back whole.
        echo = text if len(text) <= _REPAIR_ECHO_CHARS else f"{text[:_REPAIR_ECHO_CHARS]}… [cut: the reply had {len(text):,} characters]"
        messages += [ChatMessage("assistant", echo), ChatMessage("user", _REPAIR.format(problem=preview(problem, 2000)))]
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
        where = _nul_at(data)
        if where is not None:
            # Refused as a user's text would be: stored, it breaks the log's JSON on
            # PostgreSQL and every export's import.
            raise ValueError(f"{where} holds a NUL character (U+0000); write the text without it")
        try:
            value = schema.model_validate(data)  # type: ignore[attr-defined]
        except RecursionError:
            raise ValueError("the JSON does not match the schema: it is nested too deeply") from None
        except Exception as exc:  # pydantic.ValidationError is a ValueError; be general
            raise ValueError(f"the JSON does not match the schema: {_describe_validation(exc)}") from exc
        if check is not None:
            try:
                check(value)
            except RecursionError:
                raise ValueError("the reply is nested too deeply to be checked") from None
        return value  # type: ignore[no-any-return]

    def _backoff(self, attempt: int) -> float:
        base = min(self.max_backoff, self.backoff * 2.0 ** min(attempt - 1, 64))  # (no float overflow, however many retries)
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
            # Counts are the provider's word: a negative, fractional or absurd one is
            # no count (unknown), or it would corrupt every total and cost estimate.
            input_tokens, output_tokens = _token_count(response.input_tokens), _token_count(response.output_tokens)
            for what, reported, kept in (("input", response.input_tokens, input_tokens), ("output", response.output_tokens, output_tokens)):
                if reported is not None and kept is None:
                    logger.warning("memorist: %s reported %s tokens %s, which is no token count; counted as unknown",
                                   self.name, what, preview(repr(reported), 60))
            # The model the request named, not a dated snapshot name: prices key on it.
            cost = self.estimate_cost(self.model, input_tokens, output_tokens)
            call = LLMCall(
                provider=self.provider, model=self.model, role=role, prompt=prompt_version, attempt=attempt,
                ok=True, latency_ms=latency, input_tokens=input_tokens,
                output_tokens=output_tokens, cost_usd=cost, response_id=response.response_id,
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
            sinks = list(self._sinks)
        recordings = _recordings.get()
        for rec in recordings:
            rec.calls.append(call)
        if sinks and not any(rec.turn for rec in recordings):
            for sink in sinks:
                try:
                    sink(call)
                except Exception:
                    logger.warning("memorist: an llm_call sink of %s failed", self.name, exc_info=True)

    def close(self) -> None:
        """Release what this instance holds (an HTTP client's connections); a closed
        provider's next call opens them again. Safe to call more than once."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"


__all__ = [
    "MAX_REPLY_CHARS",
    "MAX_TOKENS",
    "PRICES",
    "ChatMessage",
    "Fallback",
    "LLM",
    "LLMCall",
    "LLMRequest",
    "LLMResponse",
    "Recording",
    "call_with_deadline",
    "loads_lenient",
    "note_fallback",
    "recording",
    "request_deadline",
    "response_schema",
]
