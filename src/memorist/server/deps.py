"""What every route of the service shares: the caller, its dependency, the service
(the tenants' Memories, the keys, the limits, and :meth:`Service.admit`, which the
middleware of :mod:`.app` asks about each request) and the error responses routes
document. Routes live in :mod:`.app` (spec 004's and the learning loop's),
:mod:`.minutes` (spec 003) and :mod:`.tiers` (spec 002).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPBearer

from .. import validate
from ..errors import MemoristError, NotFoundError
from . import schemas as s
from .errors import error_response, memorist_error_response, retry_after
from .keys import KeyStore
from .limits import RateLimiter, ServerLimits
from .tenants import Tenants


# the caller -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the key's tenant (``""`` on a development server), the user
    the key is bound to (None: any user of the tenant), and the key's id."""

    tenant_id: str = ""
    user_id: str | None = None
    key_id: str | None = None

    def user(self, user_id: str | None) -> str | None:
        """The user a request acts as: the one it names, or the key's bound user
        (naming another is 404, as a user that does not exist would be)."""
        if self.user_id is None:
            return user_id
        if user_id is not None and user_id != self.user_id:
            raise NotFoundError("user", user_id)
        return self.user_id

    def owner(self, user_id: str | None, memory_id: str) -> str | None:
        """The user of a by-id request; a memory named under another user is not found."""
        if self.user_id is not None and user_id is not None and user_id != self.user_id:
            raise NotFoundError("memory", validate.memory_id(memory_id))
        return self.user_id if self.user_id is not None else user_id


_bearer = HTTPBearer(auto_error=False, description="An Memorist API key: `Authorization: Bearer ek_...`.")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="An Memorist API key in the `X-API-Key` header.")


def current_caller(request: Request, _b: Annotated[Any, Depends(_bearer)], _k: Annotated[Any, Depends(_api_key)]) -> Caller:
    """The caller the middleware admitted (the security dependencies only document the keys)."""
    return request.scope.get("memorist.caller") or Caller()


CallerDep = Annotated[Caller, Depends(current_caller)]


# the service ------------------------------------------------------------------------------
def _presented_key(headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = headers.get("x-api-key", "").strip()
    return key or None


def _is_loopback_host(host_header: str) -> bool:
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:6060
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Service:
    """What the routes share: the tenants' Memories, the keys, the limits."""

    def __init__(self, path: str, *, tenants: Tenants, keys: KeyStore, limits: ServerLimits, require_keys: bool, local_only: bool) -> None:
        self.path = path
        self.tenants = tenants
        self.keys = keys
        self.limits = limits
        self.limiter = RateLimiter(limits.rate_per_minute, limits.burst)
        # Once keys were seen (or the server was started for them) they stay
        # required: revoking the last key must not turn the server open.
        self.require_keys = require_keys
        self.local_only = local_only

    def keys_required(self) -> bool:
        if not self.require_keys and self.keys.has_active_keys():
            self.require_keys = True
        return self.require_keys

    def admit(self, headers: dict[str, str], client: str) -> Caller | JSONResponse:
        """The caller of a request, or the error answer (401, 403, 429, 503)."""
        try:
            if self.keys_required():
                presented = _presented_key(headers)
                if presented is None:
                    return error_response(401, "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
                record = self.keys.authenticate(presented)
                if record is None:
                    return error_response(401, "the API key is not valid (unknown, malformed or revoked)")
                caller = Caller(record.tenant_id, record.user_id, record.key_id)
                bucket = f"key:{record.key_id}"
            else:
                if self.local_only and not _is_loopback_host(headers.get("host", "")):
                    return error_response(
                        403, "this development server (no API keys) answers only requests addressed to localhost"
                    )
                caller = Caller()
                bucket = f"client:{client}"
            wait = self.limiter.acquire(bucket)
            if wait is not None:
                rate = self.limits.rate_per_minute
                return error_response(
                    429,
                    f"rate limit exceeded: {rate:g} requests per minute, bursts of {self.limits.burst}; retry in {max(1, round(wait))} s",
                    headers=retry_after(wait),
                )
            if self.keys.usage_due():
                self.keys.flush_usage()
            return caller
        except MemoristError as exc:
            return memorist_error_response(exc)

    def memory(self, caller: Caller) -> Any:
        return self.tenants.get(caller.tenant_id)

    def close(self) -> None:
        self.tenants.close()
        self.keys.close()


def request_service(request: Request) -> Service:
    """The service the app runs (its tenants' Memories, keys and limits)."""
    return request.app.state.service


#: The error responses every ``/api/`` route documents.
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": s.ErrorResponse, "description": "No valid API key."},
    404: {"model": s.ErrorResponse, "description": "Not found (or outside the key's tenant and user)."},
    413: {"model": s.ErrorResponse, "description": "The body or the number of messages is over the limit."},
    422: {"model": s.ErrorResponse, "description": "Invalid input; `field` names it."},
    429: {"model": s.ErrorResponse, "description": "Rate limited; see `Retry-After`."},
    503: {"model": s.ErrorResponse, "description": "The store or a model provider is unavailable."},
}
