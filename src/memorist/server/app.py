"""The memory service: spec 004's REST API over :class:`~memorist.Memory`, with the
learning loop's (spec 001), the minutes' (spec 003) and the energy tiers' (spec 002)
routes under the same keys.

:func:`create_app` builds the FastAPI application (``memorist serve`` runs it under
uvicorn): the middleware, the limits, the keys, the static panel and the error
handlers, and the routers of :mod:`.routes`, one per resource. The routes are a thin
layer: each checks the request's shape, turns it into one call on what the caller
reaches (:class:`~.deps.Reach`: a scoped handle, or the tenant's Memory) and runs
it in the thread pool (Memory is synchronous: SQLite and the embedder), so the event
loop never waits on the store. docs/service-contract.md is the contract they keep.

Before any route, :class:`ServiceMiddleware` does what every request needs:

1. a path under ``/api/`` without its trailing slash is routed as if it had it
   (both forms answer, without a redirect; the OpenAPI lists the slash form);
2. the API key (``Authorization: Bearer`` or ``X-API-Key``) is checked, unless
   the store holds no active key (a development server), and the caller's token
   bucket is charged (429 with ``Retry-After`` when empty);
3. the body is read up to ``max_body_bytes`` (413 beyond);
4. an exception nothing else handled becomes a generic 500, logged with its
   traceback, never sent.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import default_db_path
from ..embed import Embedder
from .deps import Caller, Service, has_key_table, store_damage
from .errors import INTERNAL_MESSAGE, error_response, install_error_handlers
from .keys import KeyStore
from .limits import ServerLimits
from .routes import ROUTERS
from .tenants import Tenants

log = logging.getLogger("memorist.server")

STATIC_DIR = Path(__file__).resolve().parent / "static"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memorist")
    except PackageNotFoundError:  # pragma: no cover (a source tree without metadata)
        return "0"


# the middleware ---------------------------------------------------------------------------
class ServiceMiddleware:
    """Trailing slashes, keys, rate limits, body size, and the last-resort 500."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self._handle(scope, receive, send_tracked)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await error_response(500, INTERNAL_MESSAGE)(scope, receive, send)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        api = path.startswith("/api/") or path == "/api"
        if api and not path.endswith("/"):
            scope = {**scope, "path": path + "/"}
            if isinstance(scope.get("raw_path"), bytes):
                scope["raw_path"] = scope["raw_path"] + b"/"
        elif path == "/healthz/":
            scope = {**scope, "path": "/healthz"}
        if api:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
            client = scope.get("client")
            admitted = await run_in_threadpool(self.service.admit, headers, client[0] if client else "")
            if not isinstance(admitted, Caller):
                await admitted(scope, receive, send)
                return
            scope["memorist.caller"] = admitted
        if scope.get("method") in _BODY_METHODS:
            replay = await self._read_body(scope, receive, send)
            if replay is None:
                return
            receive = replay
        await self.app(scope, receive, send)

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """Read the whole body (at most ``max_body_bytes``) and hand it on; None when
        an answer was already sent (413) or the client left."""
        limit = self.service.limits.max_body_bytes
        too_large = error_response(413, f"the request body is larger than {limit:,} bytes", "body")
        for name, value in scope.get("headers", ()):
            if name.lower() == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > limit:
                    await too_large(scope, receive, send)
                    return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await too_large(scope, receive, send)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay


def _register_panel(app: FastAPI) -> None:
    index = STATIC_DIR / "index.html"

    @app.get("/", include_in_schema=False)
    def panel() -> Any:
        if not index.is_file():
            return error_response(404, "the memory panel is not installed in this build; the API is documented at /docs")
        return FileResponse(index, media_type="text/html")

    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR, check_dir=False), name="static")


def _document_keys_per_mode(app: FastAPI, service: Service) -> None:
    """/openapi.json names the API-key schemes only when keys are required: a
    development server's schema does not claim an authentication it ignores."""
    full = app.openapi
    keyless: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        schema = full()
        if service.keys_required():
            return schema
        if not keyless:
            copy = {**schema, "paths": {}}
            for path, item in schema["paths"].items():
                copy["paths"][path] = {m: {k: v for k, v in op.items() if k != "security"} for m, op in item.items()}
            components = {k: v for k, v in schema.get("components", {}).items() if k != "securitySchemes"}
            copy["components"] = components
            keyless.update(copy)
        return keyless

    app.openapi = openapi  # type: ignore[method-assign]


# the application --------------------------------------------------------------------------
def create_app(
    db: str | None = None,
    *,
    decay_days: float | None = None,
    embedder: str | Embedder | None = None,
    limits: ServerLimits | None = None,
    require_keys: bool = False,
    local_only: bool = False,
    policy: str | None = None,
) -> FastAPI:
    """The memory service over the store ``db`` (default: ``MEMORIST_DB`` or the user
    data directory).

    ``decay_days`` and ``embedder`` are those of :class:`~memorist.Memory` (default:
    ``MEMORIST_DECAY_DAYS``/``MEMORY_DECAY_DAYS``, the store's embedder). ``limits``:
    :class:`ServerLimits`. ``require_keys``: answer 401 even while the store holds
    no key (``memorist serve`` sets it for a non-loopback host). ``local_only``: a
    development server (no key) answers only requests whose ``Host`` is loopback,
    which defeats DNS rebinding against ``localhost``. ``policy``: ``"energy"`` for
    spec 002's energy tiers (its routes are under ``/api/tiers/``; default:
    ``MEMORIST_POLICY``, else the default policy).

    The API-keys table is created in the store now; the tenants' Memories open on
    their first request, and close when the app shuts down (its lifespan).
    """
    path = str(db) if db is not None else str(default_db_path())
    limits = limits if limits is not None else ServerLimits()
    # The store is checked before anything is written into it; a damaged one is served
    # for reads and takes no write (its keys are read where they are; a store with no
    # keys table has no keys, and none is created in it).
    damage = store_damage(path)
    keys = KeyStore(path if damage is None or has_key_table(path) else ":memory:")
    try:
        tenants = Tenants(path, embedder=embedder, decay_days=decay_days, max_text_chars=limits.max_text_chars, policy=policy)
        if damage is not None:
            tenants.mark_damaged(damage)
        service = Service(path, tenants=tenants, keys=keys, limits=limits, require_keys=require_keys, local_only=local_only)
    except BaseException:
        keys.close()
        raise

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await run_in_threadpool(service.close)

    app = FastAPI(
        title="Memorist memory service",
        version=_version(),
        description=(
            "Long-term memory for agents over HTTP: spec 004's routes (each with and without its "
            "trailing slash), API keys binding a tenant and optionally a user, JSON errors "
            '`{"error": {"type", "message", "field"}}`. See docs/service-contract.md.'
        ),
        lifespan=lifespan,
        redirect_slashes=False,
        # Responses keep optional fields optional in the schema: routes return what
        # Memory returns, which omits a field rather than sending null.
        separate_input_output_schemas=False,
    )
    app.state.service = service
    _document_keys_per_mode(app, service)
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    _register_panel(app)
    app.add_middleware(ServiceMiddleware, service=service)
    return app


def service_of(app: FastAPI) -> Service:
    """The :class:`Service` behind an app made by :func:`create_app`."""
    return app.state.service


__all__: list[str] = ["Caller", "Service", "ServiceMiddleware", "create_app", "service_of"]
