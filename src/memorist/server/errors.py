"""Every error of the service as one JSON shape, translated here and nowhere else.

``{"error": {"type": str, "message": str, "field": str | null}}``:

======  ======================  ==================================================
status  type                    when
======  ======================  ==================================================
401     ``unauthorized``        a missing, unknown or revoked API key
403     ``forbidden``           a development server asked under another host name; a
                                write a key's subject may read but not make (a viewer's)
404     ``not_found``           an unknown id, or one outside the key's binding
405     ``method_not_allowed``  a route that exists, with another method
408     ``request_timeout``     a body that did not arrive within ``timeout_body``
409     ``conflict``            a rollback of something already rolled back or changed since
413     ``payload_too_large``   a body over ``max_body_bytes``; too many messages
422     ``validation_error``    bad input; ``field`` names it (``messages[0].content``)
429     ``rate_limited``        the key's rate limit, or wrong keys from one address
499     ``client_closed``       the client left before its answer (never read: logged)
503     ``unavailable``         the store or a model provider failed; at the
                                concurrency limit (with ``Retry-After``)
500     ``internal``            a bug: a generic message, the traceback in the log
======  ======================  ==================================================

A ValidationError's ``message`` is the engine's without its ``"<field>: "``
prefix, so ``ValidationError(field, message)`` rebuilds the same exception. 503
and 500 answers never carry the cause (it may name server paths): it is logged.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    NO_ROUTE,
    CancelledCallError,
    ConfigurationError,
    ConflictError,
    CorruptStoreError,
    MemoristError,
    NotFoundError,
    PermissionDeniedError,
    ProviderError,
    StoreError,
    TransientProviderError,
    ValidationError,
)

log = logging.getLogger("memorist.server")

#: The error ``type`` of each status this service answers with.
ERROR_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    422: "validation_error",
    429: "rate_limited",
    499: "client_closed",
    500: "internal",
    503: "unavailable",
}
INTERNAL_MESSAGE = "internal error: the server failed on this request (its log has the details)"


class ApiError(Exception):
    """An error answer raised from inside a route (413 for too many messages, say)."""

    def __init__(self, status: int, message: str, *, field: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = dict(headers or {})


def error_body(status: int, message: str, field: str | None = None) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "bad_request" if status < 500 else "internal")
    return {"error": {"type": kind, "message": message, "field": field}}


def error_response(status: int, message: str, field: str | None = None, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, field), status_code=status, headers=dict(headers or {}))


def retry_after(seconds: float) -> dict[str, str]:
    """The ``Retry-After`` header: whole seconds, at least 1."""
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


# engine errors ---------------------------------------------------------------------------
def memorist_error_response(exc: MemoristError) -> JSONResponse:
    if isinstance(exc, ValidationError):
        text = str(exc)
        prefix = f"{exc.field}: "
        return error_response(422, text[len(prefix):] if text.startswith(prefix) else text, exc.field)
    if isinstance(exc, NotFoundError):
        return error_response(404, str(exc))
    if isinstance(exc, CancelledCallError):
        log.info("%s", exc)
        return error_response(499, str(exc))
    if isinstance(exc, PermissionDeniedError):
        return error_response(403, str(exc))
    if isinstance(exc, ConflictError):
        return error_response(409, str(exc))
    if isinstance(exc, StoreError):
        log.error("store failure: %s", exc)
        return error_response(503, "the memory store is unavailable (the server's log has the cause); try again later")
    if isinstance(exc, ProviderError):
        log.error("provider failure: %s", exc)
        headers = retry_after(exc.retry_after) if isinstance(exc, TransientProviderError) and exc.retry_after else None
        return error_response(503, "an embedding or language model provider failed (the server's log has the cause); try again later", headers=headers)
    if isinstance(exc, ConfigurationError):
        log.error("configuration error: %s", exc)
        return error_response(503, "the memory service is misconfigured (the server's log has the cause)")
    log.error("unexpected engine error: %s", exc, exc_info=exc)
    return error_response(500, INTERNAL_MESSAGE)


# request-shape errors --------------------------------------------------------------------
_SOURCES = frozenset({"body", "query", "path", "header", "cookie"})
_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "none", "dict", "list", "bytes", "function-after", "function-plain"})


def _is_union_tag(part: str) -> bool:
    """Pydantic names the member of a union an error came from in its ``loc``
    (``"str"``, ``"constrained-str"``, ``"list[Message]"``, ``"Message"``); field
    names are snake_case."""
    return "[" in part or "-" in part or part in _TYPE_TAGS or part[:1].isupper()


def field_of(loc: Sequence[Any]) -> str:
    """``("body", "messages", "list[Message]", 0, "content")`` -> ``"messages[0].content"``."""
    parts = list(loc)
    source = parts.pop(0) if parts and parts[0] in _SOURCES else None
    field = ""
    for part in parts:
        if isinstance(part, int):
            field += f"[{part}]"
        elif isinstance(part, str) and not _is_union_tag(part):
            field += f".{part}" if field else part
    return field or (source or "body")


_EXPECTED = {
    "string_type": "a string",
    "list_type": "a list",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "none_required": "null",
}


#: Each bound's error type: how a message says it, and its key in the error's context.
_BOUNDS = {"greater_than": (">", "gt"), "greater_than_equal": ("≥", "ge"), "less_than": ("<", "lt"), "less_than_equal": ("≤", "le")}
_CHOICES = re.compile(r"\^\(([\w|-]+)\)\$")


def _shown(value: Any) -> str:
    """A rejected input as a message shows it: ``nan``, ``2.5``, ``'bogus'``."""
    text = repr(value) if isinstance(value, str | float | int) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _non_finite(error: Mapping[str, Any]) -> bool:
    value = error.get("input")
    return isinstance(value, float) and not math.isfinite(value)


def _message(error: Mapping[str, Any]) -> str:
    """One error's message, said as the engine says its own: what the value must be,
    and what it was."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "finite_number" or (kind in _BOUNDS and _non_finite(error)):
        return f"must be a finite number, got {_shown(error.get('input'))}"
    if kind in _BOUNDS and isinstance(bound := ctx.get(_BOUNDS[kind][1]), int | float):
        shown = f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"
        given = error.get("input")  # a query string's number is text: shown as typed
        return f"must be {_BOUNDS[kind][0]} {shown}, got {given if isinstance(given, str) else _shown(given)}"
    if kind == "string_pattern_mismatch":
        choices = _CHOICES.fullmatch(str(ctx.get("pattern", "")))
        if choices:
            return f"must be one of {', '.join(choices.group(1).split('|'))}, got {_shown(error.get('input'))}"
    if kind == "json_invalid":
        detail = (error.get("ctx") or {}).get("error")
        return f"is not valid JSON ({detail})" if detail else "is not valid JSON"
    msg = str(error.get("msg", "is invalid"))
    return msg[:1].lower() + msg[1:]


def describe_validation(errors: Iterable[Mapping[str, Any]]) -> tuple[str, str]:
    """The field and message of a request-shape error: the deepest location wins
    (it is the most precise); the members of a union failing there are joined
    (``messages``: "must be a string or a list")."""
    errors = list(errors)
    if not errors:
        return "body", "is invalid"
    if any(e.get("type") == "json_invalid" for e in errors):
        error = next(e for e in errors if e.get("type") == "json_invalid")
        return "body", _message(error)
    depth = max(len(e.get("loc", ())) for e in errors)
    deepest = [e for e in errors if len(e.get("loc", ())) == depth]
    field = field_of(deepest[0].get("loc", ()))
    here = [e for e in errors if field_of(e.get("loc", ())) == field]
    if any(_non_finite(e) for e in here):  # whatever else the field may be (a time: text or a number)
        return field, f"must be a finite number, got {_shown(next(e for e in here if _non_finite(e))['input'])}"
    if all(e.get("type") in _EXPECTED for e in here):
        expected = list(dict.fromkeys(_EXPECTED[e["type"]] for e in here))
        return field, "must be " + " or ".join(expected)
    # A union's members the value was not of say so; the one it was of says what is
    # wrong with it (-1 for a time: "must be ≥ 0", not "should be a valid string; or ...").
    here = [e for e in here if e.get("type") not in _EXPECTED]
    messages = list(dict.fromkeys(_message(e) for e in here))
    return field, "; or ".join(messages[:3])


def _allowed_methods(request: Request) -> list[str]:
    """The methods of the path template the URL names: a literal path before a template
    with parameters (``/api/memories/search/`` and ``/api/minutes/search/`` are POST only,
    though ``/api/memories/{id}/`` and ``/api/minutes/{minute_id}/`` match them too),
    else the first template that matches."""
    from starlette.routing import Match

    routes = [r for r in _routes(request.app) if getattr(r, "methods", None) and hasattr(r, "path_format")]
    matching = [r for r in routes if r.matches(request.scope)[0] is not Match.NONE]
    literal = [r for r in matching if "{" not in r.path_format]
    first = (literal or matching or [None])[0]
    if first is None:
        return []
    return sorted({m for r in routes if r.path_format == first.path_format for m in r.methods or ()})


def _routes(app: Any) -> list[Any]:
    """The app's routes, those of its included routers among them, in matching order."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # an older FastAPI copies an included router's routes into the app's
        return list(app.router.routes)
    # A recent one keeps each included router whole: its routes are read through it.
    return list(iter_route_contexts(app.router.routes))


_DIGITS = re.compile(r"value has (\d+) digits")


def unreadable_body(cause: BaseException | None) -> str:
    """What was wrong with a body the JSON reader raised on (FastAPI keeps it as the
    400's ``__cause__``): nesting deeper than the reader goes, a whole number of more
    digits than Python converts, or bytes that are not UTF-8."""
    if isinstance(cause, RecursionError):
        return "is not valid JSON here: its arrays and objects nest too deep to be read (metadata takes at most 16 levels)"
    if isinstance(cause, ValueError) and not isinstance(cause, UnicodeDecodeError) and "digits" in str(cause):
        found = _DIGITS.search(str(cause))
        digits = f" ({int(found.group(1)):,} digits)" if found else ""
        return f"is not valid JSON here: it holds a number too large{digits}; whole numbers must fit in 64 bits"
    if cause is None or isinstance(cause, UnicodeDecodeError):
        return "is not valid JSON (it cannot be decoded as UTF-8 text)"
    return "is not valid JSON (it cannot be read)"


# the handlers ----------------------------------------------------------------------------
def install_error_handlers(app: FastAPI) -> None:
    """Every error the routes raise becomes the JSON error shape."""

    async def memorist_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, MemoristError)
        if isinstance(exc, CorruptStoreError):  # from now on nothing is written into the damaged file
            service = getattr(request.app.state, "service", None)
            if service is not None:
                service.tenants.mark_damaged(f"the store is damaged ({exc})")
        return memorist_error_response(exc)

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.message, exc.field, exc.headers)

    async def request_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        field, message = describe_validation(exc.errors())
        if field == "id":  # /api/memories/{id}/: the user (GET) or the memory (PUT, DELETE)
            field = "user_id" if request.method == "GET" else "memory_id"
        content_type = request.headers.get("content-type", "")
        if field == "body" and "json" not in content_type.lower():
            message += " (send the body as JSON, with 'Content-Type: application/json')"
        return error_response(422, message, field)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            # FastAPI's answer to a body its JSON reader raised on: a shape error too.
            return error_response(422, unreadable_body(exc.__cause__), "body")
        if exc.status_code == 404:
            message = f"{NO_ROUTE} {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
            # Starlette names the methods of the first route that matched the path only.
            allowed = _allowed_methods(request)
            if allowed:
                return error_response(405, message, headers={"Allow": ", ".join(allowed)})
        else:
            message = str(exc.detail)
        return error_response(exc.status_code, message, headers=exc.headers)

    app.add_exception_handler(MemoristError, memorist_error)
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, request_validation)
    app.add_exception_handler(StarletteHTTPException, http_error)


__all__ = [
    "ERROR_TYPES",
    "INTERNAL_MESSAGE",
    "ApiError",
    "describe_validation",
    "memorist_error_response",
    "error_body",
    "error_response",
    "field_of",
    "install_error_handlers",
    "retry_after",
    "unreadable_body",
]
