"""The service's liveness: ``GET /healthz`` (no key needed)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from .. import schemas as s

router = APIRouter()


@router.get("/healthz", response_model=s.Health, summary="Liveness and store health",
         tags=["service"], responses={503: {"model": s.Health, "description": (
             "The store is damaged (reads go on, writes are refused), or its database does not answer.")}})
def healthz(request: Request) -> Any:
    """``{"status": "ok", "version", "store": {"healthy": true}}``; 503 with ``"status":
    "damaged"`` and the store's problem once it is known to be damaged (checked when the
    service starts, and whenever a request meets damage), or ``"unavailable"`` while its
    database server does not answer (asked each time). Needs no key; HEAD too (as every GET)."""
    status, body = request.app.state.service.health()
    return JSONResponse({**body, "version": request.app.version}, status_code=status)



__all__ = ["router"]

