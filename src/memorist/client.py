"""Memory's core memory calls against a served Memorist (``memorist serve``):
:class:`Client` and :class:`AsyncClient`.

They have the calls :class:`memorist.api.MemoryAPI` declares (add, search, get,
get_all, update, delete, delete_all, erase, history, events, rollback), not the
capabilities' (learning, tiers, minutes, relations: REST routes). Both take the same
arguments and return the same shapes as :class:`memorist.Memory`, and raise the same
exception classes, decoded from the service's JSON errors; code moves from embedded
to served by changing the line that builds the memory::

    memory = Memory("memories.db")                                  # embedded
    memory = Client("http://127.0.0.1:6060", api_key="ek_...")     # served

    memory.add("I'm a vegetarian.", user_id="alex")
    memory.search("food?", user_id="alex")["results"]

Errors, from the service's ``{"error": {"type", "message", "field"}}``::

    validation_error (422), payload_too_large (413),
    bad_request (400)                               ValidationError (same .field)
    not_found (404)                                 NotFoundError
    conflict (409)                                  ConflictError
    unauthorized (401)                              AuthenticationError (a ConfigurationError)
    forbidden (403)                                 PermissionDeniedError (a PermissionError), as Memory
    rate_limited (429)                              RateLimitError (a TransientProviderError; .retry_after)
    unavailable (503), internal (500), other
    answers, a body that is not JSON                StoreError (with the status)
    no connection, a timeout                        StoreError ("cannot reach the Memorist service at ...")

Arguments are checked here first with the checks Memory uses (:mod:`memorist.validate`),
so a bad one fails the same way without a round trip; the service stays the
authority (lengths, limits, filters, ownership), and keeps Memory's order where it
matters: an update's text string is judged after the memory is found (a missing
memory is not found, whatever the text). Needs the ``client`` extra (httpx).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

from . import validate
from .api import CALLS, CALLS_BY_NAME, EVENTS_PAGE, Scoped
from .errors import (
    NO_ROUTE,
    ConfigurationError,
    ConflictError,
    MemoristError,
    MissingDependencyError,
    NotFoundError,
    PermissionDeniedError,
    StoreError,
    TransientProviderError,
    ValidationError,
)

try:
    import httpx
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError('memorist.Client and memorist.AsyncClient need httpx: pip install "memorist[client]"') from exc

DEFAULT_URL = "http://127.0.0.1:6060"
#: A MEMORY_MANAGEMENT_URL ends with this; the client takes either form.
_API = "/api/memories"
#: An update's body of an empty text: what the client sends for an argument it holds
#: back until the service found the memory (see ``_Call.refused``).
_EMPTY_TEXT = b'{"text":""}'
# Text lengths are the service's to judge (its Memory's max_message_chars and its
# request limits): here only what no length changes.
_ANY_LENGTH = 2**62
#: The longest query string a request's URL can carry (httpx refuses a longer one; the
#: service reads at most as much of a filter given in the query).
_MAX_QUERY = 65_536


class AuthenticationError(ConfigurationError):
    """The service refused the request: no API key, or an unknown or revoked one (401).
    A request the key may not make (403: a viewer's write, a tenant's change from a
    bound key, a development server asked under another host name) is a
    :class:`~memorist.errors.PermissionDeniedError`, as Memory raises."""


class RateLimitError(TransientProviderError):
    """The service's rate limit for this key was reached (429). ``retry_after`` is the
    wait in seconds it asked for (``Retry-After``), when it said."""


@dataclass(frozen=True, slots=True)
class _Call:
    """One request, built and checked before any I/O, and how to read its answer."""

    method: str
    path: str
    params: dict[str, Any]
    body: bytes | None
    shape: Callable[[Any], Any]
    memory_id: str | None = None  # names the memory of a 404
    #: Memory's error for an argument it judges after finding the memory: raised when
    #: the service found it (the request then sent an empty text, which the service
    #: refuses with a 422 on ``text`` once it found the memory, changing nothing).
    refused: ValidationError | None = None
    #: The request of the next page, from this page's answer (None: this is the last):
    #: a call whose answer the service gives in pages (the events, without a limit).
    then: Callable[[Any], _Call | None] | None = None


# answers ---------------------------------------------------------------------------------
def _object(data: Any) -> Any:
    if not isinstance(data, dict):
        raise TypeError("a JSON object")
    return data


def _results(data: Any) -> Any:
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise TypeError('{"results": [...]}')
    return data


def _result_list(data: Any) -> Any:
    return _results(data)["results"]


def _owned(shape: Callable[[Any], Any], memory_id: str, ids: dict[str, str]) -> Callable[[Any], Any]:
    """``shape``, then Memory's ownership rule for the ids the route does not carry
    (``agent_id``/``run_id`` of get and history): another scope's memory is not found."""

    def check(data: Any) -> Any:
        value = shape(data)
        first = value[0] if isinstance(value, list) and value else value
        if ids and isinstance(first, dict) and any(first.get(name) != want for name, want in ids.items()):
            raise NotFoundError("memory", memory_id)
        return value

    return check


# arguments -------------------------------------------------------------------------------
def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(type(value).__name__)


def _encode(body: dict[str, Any], *, free: str) -> bytes:
    """``body`` as JSON. Every part but ``free`` was checked already; a part that is
    not JSON data can only be that one. Filters were checked by :func:`_filters`: a
    datetime left in them is a date field's, sent as an ISO string (which the service
    reads as the same instant)."""
    try:
        text = json.dumps(body, default=_json_default, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(free, f"must be JSON data (dict, list, str, finite number, bool, None, datetime): {exc}") from None
    try:
        # As UTF-8, not \u escapes: an emoji costs 4 bytes, not 12, so a text within
        # Memory's length limit stays within the service's body limit.
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, escaped for the service to judge (as Memory would)
        return json.dumps(body, default=_json_default, allow_nan=False, separators=(",", ":")).encode()


def _filters(filters: Any) -> Mapping[str, Any] | None:
    """``filters`` judged by Memory's own check (:func:`memorist.policies.filters.compile_filters`)
    before anything is sent: a value that is not JSON data, or a ``date`` where a
    datetime is due, fails here exactly as it fails Memory, naming the part
    (``filters.created_at.lt``). The service judges them again."""
    from .policies.filters import compile_filters

    compile_filters(filters)
    return filters


def _segment(name: str, value: str) -> str:
    """``value`` as one segment of a URL path (the routes put user and memory ids there)."""
    if "/" in value or value in (".", ".."):
        raise ValidationError(
            name,
            f"{validate.show(value)} cannot be sent in the service's URL path (it holds '/' or is a dot segment); "
            "use the embedded Memory for such ids",
        )
    return quote(value, safe="")


def _ids(user_id: Any, agent_id: Any, run_id: Any) -> dict[str, str]:
    ids = {n: validate.scope_id(n, v) for n, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id))}
    return {n: v for n, v in ids.items() if v is not None}


def _in_path(user_id: str | None) -> bool:
    """Whether ``user_id`` can go in a route's path: else the route that takes every id
    of the scope in its query serves (a user id holding "/", a scope without a user)."""
    return user_id is not None and "/" not in user_id and user_id not in (".", "..")


def _messages(messages: Any) -> Any:
    """``add``'s messages checked as Memory checks them, in JSON form."""
    msgs, plain = validate.messages(messages, max_chars=_ANY_LENGTH)
    if plain:
        return msgs[0].content
    out = []
    for m in msgs:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.name is not None:
            item["name"] = m.name
        if m.metadata is not None:
            item["metadata"] = m.metadata
        if m.timestamp is not None:
            item["timestamp"] = _iso(m.timestamp)
        out.append(item)
    return out


class _Calls:
    """The requests of Memory's calls, built once for both clients."""

    @staticmethod
    def add(messages: Any, user_id: Any, agent_id: Any, run_id: Any, metadata: Any, infer: Any, timestamp: Any, test: Any = False,
            importance: Any = None) -> _Call:
        ids = _ids(user_id, agent_id, run_id)
        body: dict[str, Any] = {"messages": _messages(messages), **ids}
        weight = validate.importance(importance)
        if weight is not None:
            body["importance"] = weight
        if not isinstance(test, bool):
            raise ValidationError("test", f"must be True or False, got {validate.show(test)}")
        if test:
            body["test"] = True
        if metadata is not None:
            body["metadata"] = validate.metadata(metadata)
        if not isinstance(infer, bool):
            raise ValidationError("infer", f"must be True or False, got {validate.show(infer)}")
        body["infer"] = infer
        when = validate.timestamp(timestamp)
        if when is not None:
            body["timestamp"] = _iso(when)
        return _Call("POST", f"{_API}/", {}, _encode(body, free="messages"), _results)

    @staticmethod
    def search(
        query: Any, user_id: Any, agent_id: Any, run_id: Any, limit: Any, filters: Any, reference_time: Any, threshold: Any
    ) -> _Call:
        body: dict[str, Any] = {**_ids(user_id, agent_id, run_id)}
        body["query"] = validate.text("query", query, max_chars=_ANY_LENGTH)
        body["limit"] = validate.limit(limit)
        if filters is not None:
            body["filters"] = _filters(filters)
        reference = validate.timestamp(reference_time, field="reference_time")
        if reference is not None:
            body["reference_time"] = _iso(reference)
        threshold = validate.threshold(threshold)
        if threshold is not None:
            body["threshold"] = threshold
        return _Call("POST", f"{_API}/search/", {}, _encode(body, free="filters"), _results)

    @staticmethod
    def get(memory_id: Any, user_id: Any, agent_id: Any, run_id: Any) -> _Call:
        mid = _segment("memory_id", validate.memory_id(memory_id))
        ids = _ids(user_id, agent_id, run_id)
        if not _in_path(ids.get("user_id")) or memory_id == "events":  # (…/{user_id}/events/ is the event log)
            return _Call("GET", f"/api/memory/{mid}/", ids, None, _object, memory_id)
        user = _segment("user_id", ids.pop("user_id"))
        return _Call("GET", f"{_API}/{user}/{mid}/", ids, None, _owned(_object, memory_id, ids), memory_id)

    @staticmethod
    def get_all(user_id: Any, agent_id: Any, run_id: Any, limit: Any, filters: Any) -> _Call:
        ids = _ids(user_id, agent_id, run_id)
        limit = validate.limit(limit)
        params: dict[str, Any] = {**ids, "limit": limit}
        if filters is not None:
            params["filters"] = _encode(dict(_filters(filters)), free="filters").decode("utf-8")  # type: ignore[arg-type]
            # The listing route takes its filters in the URL, which has a limit that Memory
            # (and search, which sends them in its body) does not have.
            length = len(str(httpx.QueryParams(params)))
            if length > _MAX_QUERY:
                raise ValidationError(
                    "filters",
                    f"are too long for the service's URL, where get_all sends them ({length:,} characters encoded; "
                    f"at most {_MAX_QUERY:,}): use fewer or shorter conditions, or search, which sends its filters in the request body",
                )
        return _Call("GET", f"{_API}/", params, None, _results)

    @staticmethod
    def update(memory_id: Any, text: Any, metadata: Any, user_id: Any, agent_id: Any, run_id: Any) -> _Call:
        mid = _segment("memory_id", validate.memory_id(memory_id))
        ids = _ids(user_id, agent_id, run_id)
        # Memory looks the memory up before it judges the text (a missing one is not
        # found, whatever the text): a string goes as it is, for the service to judge.
        # Any other text cannot be sent; an empty one goes instead, which the service
        # refuses only once it found the memory (and which changes nothing): then the
        # text's own error is raised, as Memory raises it.
        # Metadata comes after the text, and is judged here only once the memory is
        # found, the same way.
        probe = _EMPTY_TEXT
        if not isinstance(text, str):
            try:
                validate.text("text", text, max_chars=_ANY_LENGTH)
            except ValidationError as exc:
                return _Call("PUT", f"{_API}/{mid}/", ids, probe, _object, memory_id, refused=exc)
        body: dict[str, Any] = {"text": text}
        if metadata is not None:
            try:
                body["metadata"] = validate.metadata(metadata)
            except ValidationError as bad_metadata:
                refused = bad_metadata
                try:  # a text Memory refuses is its error, judged first
                    validate.text("text", text, max_chars=_ANY_LENGTH)
                except ValidationError as bad_text:
                    refused = bad_text
                return _Call("PUT", f"{_API}/{mid}/", ids, probe, _object, memory_id, refused=refused)
        return _Call("PUT", f"{_API}/{mid}/", ids, _encode(body, free="metadata"), _object, memory_id)

    @staticmethod
    def delete(memory_id: Any, user_id: Any, agent_id: Any, run_id: Any) -> _Call:
        mid = _segment("memory_id", validate.memory_id(memory_id))
        return _Call("DELETE", f"{_API}/{mid}/", _ids(user_id, agent_id, run_id), None, _object, memory_id)

    @staticmethod
    def delete_all(user_id: Any, agent_id: Any, run_id: Any) -> _Call:
        return _Call("DELETE", f"{_API}/", _ids(user_id, agent_id, run_id), None, _object)

    @staticmethod
    def erase(user_id: Any, agent_id: Any, run_id: Any, dry_run: Any) -> _Call:
        if not isinstance(dry_run, bool):
            raise ValidationError("dry_run", f"must be True or False, got {validate.show(dry_run)}")
        body = {**_ids(user_id, agent_id, run_id), "dry_run": dry_run}
        return _Call("POST", "/api/erase/", {}, _encode(body, free="dry_run"), _object)

    @staticmethod
    def history(memory_id: Any, user_id: Any, agent_id: Any, run_id: Any) -> _Call:
        mid = _segment("memory_id", validate.memory_id(memory_id))
        ids = _ids(user_id, agent_id, run_id)
        if not _in_path(ids.get("user_id")):
            return _Call("GET", f"/api/memory/{mid}/history/", ids, None, _result_list, memory_id)
        user = _segment("user_id", ids.pop("user_id"))
        return _Call("GET", f"{_API}/{user}/{mid}/history/", ids, None, _owned(_result_list, memory_id, ids), memory_id)

    @staticmethod
    def events(user_id: Any, agent_id: Any, run_id: Any, since: Any, limit: Any) -> _Call:
        # No id is sent as it is, as by the other calls: a key bound to a user reads its
        # user's log, any other request is refused by the service as Memory refuses it.
        ids = _ids(user_id, agent_id, run_id)
        since = validate.since(since)
        if not _in_path(ids.get("user_id")):
            path = "/api/events/"
        else:
            path = f"{_API}/{_segment('user_id', ids.pop('user_id'))}/events/"
        if limit is not None:
            return _Call("GET", path, {**ids, "since": since, "limit": validate.limit(limit)}, None, _result_list)

        # No limit: the whole log, as Memory gives it, read a page at a time (the
        # service answers at most a page unless asked for more).
        def page(after: int) -> _Call:
            return _Call("GET", path, {**ids, "since": after, "limit": EVENTS_PAGE}, None, _result_list, then=following)

        def following(events: list[dict[str, Any]]) -> _Call | None:
            return page(int(events[-1]["seq"])) if len(events) == EVENTS_PAGE else None

        return page(since)

    @staticmethod
    def rollback(event_or_run_id: Any, user_id: Any, agent_id: Any, run_id: Any) -> _Call:
        # Sent as given, for Memory (behind the service) to read as it reads it: a string
        # of digits is a seq, padded or not, and its NotFoundError names the string. A
        # number is checked here first as Memory checks it (the service's schema would
        # word the refusal otherwise).
        target = event_or_run_id
        if isinstance(target, bool) or not isinstance(target, int | str):
            raise ValidationError("event_or_run_id", f"must be an event's seq number or a run id, got {target!r}")
        seq = target
        if isinstance(target, str):
            label = target.strip()
            seq = int(label) if label.isdecimal() and label.isascii() and len(label) <= 200 else None
            if seq is None and (not label or len(label) > 200):
                raise ValidationError("event_or_run_id", "must be an event's seq number or a run id")
        if seq is not None and not 1 <= seq <= validate.MAX_SEQ:
            raise ValidationError("event_or_run_id", f"an event's seq number is from 1 to {validate.MAX_SEQ:,}, got {seq}")
        body: dict[str, Any] = {"event_or_run_id": target, **_ids(user_id, agent_id, run_id)}
        return _Call("POST", f"{_API}/rollback/", {}, _encode(body, free="event_or_run_id"), _object)


# the connection --------------------------------------------------------------------------
def _base_url(value: Any) -> str:
    if not isinstance(value, str):
        raise ValidationError("base_url", f"must be a URL string, got {type(value).__name__}")
    url = value.strip().rstrip("/")
    if not url.lower().startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
        raise ValidationError("base_url", f"must be an http:// or https:// URL, got {validate.show(value)}")
    # A MEMORY_MANAGEMENT_URL (".../api/memories") names the same service.
    if url.lower().endswith(_API):
        url = url[: -len(_API)]
    try:
        httpx.URL(url)
    except Exception as exc:  # httpx.InvalidURL, ValueError
        raise ValidationError("base_url", f"is not a usable URL: {exc}") from None
    return url


def _headers(api_key: Any) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if api_key is None:
        return headers
    if not isinstance(api_key, str) or not api_key.strip():
        raise ValidationError("api_key", "must be a non-empty string (the key `memorist keys create` printed)")
    if not api_key.isascii() or not api_key.isprintable() or any(c.isspace() for c in api_key):
        raise ValidationError("api_key", "must be one token of printable ASCII characters (the key `memorist keys create` printed)")
    headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (value > 0 and math.isfinite(value)):
        raise ValidationError("timeout", f"must be a number of seconds > 0, or None, got {validate.show(value)}")
    return float(value)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:  # the HTTP-date form
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _unsendable(exc: Exception) -> ValidationError:
    return ValidationError("request", f"cannot be sent in a URL: {exc}")


class _Base:
    """What both clients share: the settings, and reading an answer."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float | None) -> None:
        self.base_url = _base_url(base_url)
        self._headers = _headers(api_key)
        self._timeout = _timeout(timeout)

    def _unreachable(self, exc: Exception) -> StoreError:
        if isinstance(exc, httpx.TimeoutException):
            return StoreError(f"the Memorist service at {self.base_url} did not answer in time ({type(exc).__name__}, timeout={self._timeout})")
        return StoreError(f"cannot reach the Memorist service at {self.base_url}: {exc or type(exc).__name__}")

    def _answer(self, call: _Call, response: httpx.Response) -> Any:
        if not 200 <= response.status_code < 300:
            raise self._error(call, response)
        try:
            return call.shape(response.json())
        except (ValueError, TypeError) as exc:
            raise StoreError(
                f"the Memorist service at {self.base_url} answered {call.method} {call.path} with {response.status_code} "
                f"but not with {exc if isinstance(exc, TypeError) else 'JSON'}"
            ) from None

    def _error(self, call: _Call, response: httpx.Response) -> MemoristError:
        status = response.status_code
        where = f"the Memorist service at {self.base_url}"
        try:
            error = response.json()["error"]
            kind, message, field = error["type"], str(error.get("message") or ""), error.get("field")
            if not isinstance(kind, str) or not (field is None or isinstance(field, str)):
                raise TypeError
        except (ValueError, TypeError, KeyError):
            text = " ".join(response.text.split())[:200]
            return StoreError(f"{where} answered {status} {response.reason_phrase}" + (f": {text}" if text else ""))
        if kind == "validation_error" and call.refused is not None and field == "text":  # (the probe's empty text)
            return call.refused  # the memory was found: the argument held back is judged now
        if kind in ("validation_error", "payload_too_large", "bad_request"):
            field = field or ("messages" if kind == "payload_too_large" else "request")
            prefix = f"{field}: "
            return ValidationError(field, message[len(prefix) :] if message.startswith(prefix) else message)
        if kind == "not_found" and message.startswith(NO_ROUTE):
            # Not a missing memory: the client is not speaking to the service's root.
            return ConfigurationError(
                f"{where} has no route {message[len(NO_ROUTE):].strip()}: give the client the service's root URL "
                f"(such as http://localhost:8000, without /api), of a Memorist service that has this call"
            )
        if kind == "not_found":
            if call.memory_id is not None:  # the message Memory gives
                return NotFoundError("memory", call.memory_id)
            what, _, ident = message.partition(" not found: ")
            return NotFoundError(what or "resource", ident.strip("'\"") if ident else call.path)
        if kind == "conflict":
            return ConflictError(message)
        if kind == "forbidden":  # the engine's PermissionDeniedError, or the service's own refusal
            return PermissionDeniedError(message or f"{where} refused the request ({status})")
        if kind == "unauthorized":
            hint = "" if "Authorization" in self._headers else " (this client sends no API key: pass api_key=...)"
            return AuthenticationError(f"{where} refused the request: {message}{hint}")
        if kind == "rate_limited":
            return RateLimitError(f"{where}: {message}", retry_after=_retry_after(response.headers.get("Retry-After")), status=status)
        if kind == "unavailable":
            return StoreError(f"{where} is unavailable ({status}): {message}")
        return StoreError(f"{where} answered {status} ({kind}): {message}")

    def scope(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> Scoped:
        """A handle bound to one scope, as :meth:`memorist.Memory.scope` (an
        :class:`AsyncClient`'s handle is awaited), with the client's calls: the core
        memory calls. It has no ``learning``, ``tiers`` or ``minutes``."""
        return _ClientScoped(self, user_id=user_id, agent_id=agent_id, run_id=run_id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"


def _not_a_client_call(capability: str) -> property:
    def missing(self: Scoped) -> Any:
        raise AttributeError(
            f"a client's scoped handle has no {capability!r}: memorist.Client makes the core memory calls only "
            f"({', '.join(c.name for c in CALLS if c.capability is None)}); "
            f"use the service's REST routes for {capability} (/api/...), or an embedded memorist.Memory"
        )

    return property(missing)


class _ClientScoped(Scoped):
    """:class:`~memorist.api.Scoped` over a client: the core memory calls of one scope.
    The capabilities (learning, tiers, minutes) are REST routes the client does not make."""

    learning = _not_a_client_call("learning")
    tiers = _not_a_client_call("tiers")
    minutes = _not_a_client_call("minutes")


class Client(_Base):
    """Memory's calls over HTTP, against ``memorist serve``.

    ``base_url`` is the service (``http://127.0.0.1:6060``) or its memory routes'
    URL (``http://localhost:6060/api/memories``, as ``MEMORY_MANAGEMENT_URL`` names it); ``api_key`` is
    sent as ``Authorization: Bearer``. ``timeout`` is in seconds (None: none).
    ``transport`` is an httpx transport (tests, proxies, retries).
    A call naming no id is sent as it is: under a key bound to a user it acts as that
    user, otherwise the service refuses it as Memory does. ``get_all`` sends its
    ``filters`` in the URL: filters too long for one are a ValidationError on
    ``filters`` (``search`` sends them in its body).
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float | None = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout)
        self._http = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=self._timeout, transport=transport)

    def _send(self, call: _Call) -> Any:
        answer = self._send_one(call)
        if call.then is None:
            return answer
        pages, page = list(answer), answer  # a paged answer is a list: the pages one after another
        while (call := call.then(page)) is not None:  # type: ignore[assignment]
            page = self._send_one(call)
            pages.extend(page)
        return pages

    def _send_one(self, call: _Call) -> Any:
        if self._http.is_closed:  # as a closed Memory answers
            raise StoreError(f"the client of {self.base_url} is closed")
        try:
            response = self._http.request(
                call.method, call.path, params=call.params, content=call.body,
                headers={"Content-Type": "application/json"} if call.body is not None else None,
            )  # fmt: skip
        except httpx.RequestError as exc:
            raise self._unreachable(exc) from exc
        except httpx.InvalidURL as exc:  # (every argument a URL carries is checked before: a safety net)
            raise _unsendable(exc) from exc
        return self._answer(call, response)

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Base):
    """:class:`Client` for asyncio: the same calls as coroutines (``await
    client.search(...)``), ``async with`` and :meth:`aclose`."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float | None = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=self._timeout, transport=transport)

    async def _send(self, call: _Call) -> Any:
        answer = await self._send_one(call)
        if call.then is None:
            return answer
        pages, page = list(answer), answer  # a paged answer is a list: the pages one after another
        while (call := call.then(page)) is not None:  # type: ignore[assignment]
            page = await self._send_one(call)
            pages.extend(page)
        return pages

    async def _send_one(self, call: _Call) -> Any:
        if self._http.is_closed:  # as a closed Memory answers
            raise StoreError(f"the client of {self.base_url} is closed")
        try:
            response = await self._http.request(
                call.method, call.path, params=call.params, content=call.body,
                headers={"Content-Type": "application/json"} if call.body is not None else None,
            )  # fmt: skip
        except httpx.RequestError as exc:
            raise self._unreachable(exc) from exc
        except httpx.InvalidURL as exc:  # (every argument a URL carries is checked before: a safety net)
            raise _unsendable(exc) from exc
        return self._answer(call, response)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _over_http(name: str, *, asynchronous: bool) -> Callable[..., Any]:
    """``Client.<name>`` (or ``AsyncClient.<name>``): the declared call, its request
    built by ``_Calls.<name>`` from the arguments bound to the declaration."""
    declared = CALLS_BY_NAME[name].declared
    signature = inspect.signature(declared)
    build = getattr(_Calls, name)

    def request(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        return build(**{k: v for k, v in bound.arguments.items() if k != "self"})

    if asynchronous:

        @functools.wraps(declared)
        async def call(self: AsyncClient, *args: Any, **kwargs: Any) -> Any:
            return await self._send(request(self, args, kwargs))

    else:

        @functools.wraps(declared)
        def call(self: Client, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            return self._send(request(self, args, kwargs))

    return call


for _call in CALLS:
    setattr(Client, _call.name, _over_http(_call.name, asynchronous=False))
    setattr(AsyncClient, _call.name, _over_http(_call.name, asynchronous=True))
del _call


__all__ = ["AsyncClient", "AuthenticationError", "Client", "RateLimitError"]
