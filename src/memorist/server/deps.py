"""What every route of the service shares: the caller, its dependency, the service
and the error responses routes document. Routes live in :mod:`.app` (spec 004's and
the learning loop's), :mod:`.minutes` (spec 003) and :mod:`.tiers` (spec 002).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPBearer

from .. import validate
from ..errors import NotFoundError
from . import schemas as s

if TYPE_CHECKING:
    from .app import Service


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
