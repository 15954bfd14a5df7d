"""The service's liveness: ``GET /healthz`` (no key needed)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from .. import schemas as s

router = APIRouter()


@router.get("/healthz", response_model=s.Health, summary="Liveness", tags=["service"])
def healthz(request: Request) -> Any:
    """``{"status": "ok", "version": ...}``; needs no key."""
    return JSONResponse({"status": "ok", "version": request.app.version})


__all__ = ["router"]
