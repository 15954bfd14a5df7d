"""The memory service: a REST API over :class:`~memorist.Memory` (the memory routes of
the service contract, docs/service-contract.md), with the learning loop's, the
minutes' and the energy tiers' routes under the same keys.

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
   bucket is charged (429 with ``Retry-After`` when empty; wrong keys have a bucket
   per client address);
3. the body is read up to ``max_body_bytes`` (413 beyond) within ``timeout_body``
   seconds (408 beyond);
4. an ``/api/`` request is taken only while fewer than ``max_concurrency`` are at
   work (503 with ``Retry-After`` beyond) and fewer than its caller's share of them
   (``ServerLimits.caller_share``; 429 with ``Retry-After`` beyond); it runs when its
   caller's turn comes (:class:`.limits.WorkShares`: a caller whose requests are
   costly runs them one at a time, so they never queue in the store ahead of other
   callers'), under a work meter (:mod:`memorist.work`): the call is given up when
   its client disconnects, and its caller's bucket is charged for the work it did.
   The worker threads outnumber the requests at work: a request never waits for a
   thread, whatever the others do;
5. every answer carries a content-security policy and frame options (the panel and
   the API's documentation load only what the package ships);
6. an exception nothing else handled becomes a generic 500, logged with its
   traceback, never sent.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Request, Response
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import default_db_path
from ..embed import Embedder
from ..work import Meter, metered
from .deps import Caller, Service, has_key_table, store_damage
from .errors import INTERNAL_MESSAGE, error_response, install_error_handlers
from .keys import KeyStore
from .limits import SPARE_THREADS, WORK_PER_TOKEN, ServerLimits, WorkShares
from .routes import ROUTERS
from .tenants import Tenants

log = logging.getLogger("memorist.server")

STATIC_DIR = Path(__file__).resolve().parent / "static"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: The content-security policy of every answer: only this origin's scripts, styles,
#: images and connections; no plugin, no <base>, and no framing (with X-Frame-Options
#: for older browsers). The panel keeps the API key in sessionStorage, so no script
#: from elsewhere may ever run on this origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: The API's documentation pages: Swagger UI and ReDoc set inline styles and ReDoc
#: searches in a blob: worker; their scripts still come from this origin only.
DOCS_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
_DOCS_PATHS = frozenset({"/docs", "/redoc"})


def _security_headers(path: str) -> list[tuple[bytes, bytes]]:
    policy = DOCS_CONTENT_SECURITY_POLICY if path in _DOCS_PATHS else CONTENT_SECURITY_POLICY
    return [
        (b"content-security-policy", policy.encode()),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    ]


def with_security_headers(message: Message, path: str) -> Message:
    """An ``http.response.start`` message with the security headers of ``path``
    (replacing any of the same name)."""
    extra = _security_headers(path)
    names = {k for k, _ in extra}
    return {**message, "headers": [h for h in message.get("headers", ()) if h[0].lower() not in names] + extra}


class SecurityHeaders:
    """ASGI middleware: every answer carries the security headers (the chat's app;
    :class:`ServiceMiddleware` adds them itself)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]

        async def send_with_headers(message: Message) -> None:
            await send(with_security_headers(message, path) if message["type"] == "http.response.start" else message)

        await self.app(scope, receive, send_with_headers)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memorist")
    except PackageNotFoundError:  # pragma: no cover (a source tree without metadata)
        return "0"


# the middleware ---------------------------------------------------------------------------
class HeadAsGet:
    """HEAD is GET without the body (RFC 9110 §9.3.2) on every route that answers
    GET: the same status, headers (Content-Length included), checks and cost."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_head(message: Message) -> None:
            if message["type"] == "http.response.body" and message.get("body"):
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_head)


class ServiceMiddleware:
    """Trailing slashes, keys, rate limits, body size, and the last-resort 500."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service
        limits = service.limits
        # /api/ requests past their body, not yet answered, in all and per caller
        self.work = WorkShares(limits.max_concurrency, limits.caller_share)
        self.threads = limits.max_concurrency + SPARE_THREADS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Routes, and the keys' check, run on the event loop's default thread pool
        # (anyio's: 40 threads unless raised). Each request at work holds one thread,
        # so the pool is made larger than the requests at work; else a few callers,
        # each within its share, could hold every thread and the next request, even
        # of another caller, would wait for theirs to finish.
        limiter = to_thread.current_default_thread_limiter()
        if limiter.total_tokens < self.threads:
            limiter.total_tokens = self.threads
        started = False
        path = scope["path"]

        async def send_tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = with_security_headers(message, path)
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
        if api or scope.get("method") in _BODY_METHODS:
            body = await self._read_body(scope, receive, send)
            if body is None:
                return
            if api:
                await self._work(scope, body, receive, send, admitted)
                return
            receive = with_body(body, receive)
        await self.app(scope, receive, send)

    async def _work(self, scope: Scope, body: bytes, receive: Receive, send: Send, caller: Caller) -> None:
        """Run an /api/ request whose body is read: within the concurrency limit and its
        caller's share of it, when its caller's turn comes (:class:`.limits.WorkShares`),
        under a work meter that is cancelled if the client leaves before its answer, and
        charged to the caller's bucket by the work it did."""
        limits = self.service.limits
        refused = self.work.enter(caller.bucket)
        if refused == "service":
            await error_response(
                503, f"the service is at its limit of {limits.max_concurrency} requests at work at once; retry shortly",
                headers={"Retry-After": "1"},
            )(scope, receive, send)
            return
        if refused == "caller":
            who = "this API key" if caller.key_id else "this client"
            await error_response(
                429, f"{who} has {limits.caller_share} requests at work, the most one caller may have at once; "
                "retry when one is answered",
                headers={"Retry-After": "1"},
            )(scope, receive, send)
            return
        meter = Meter()
        gone = asyncio.Event()
        answered = False

        async def watch() -> None:
            # The body was read whole: the next message is the client's disconnect
            # (or the end of the answer, which uvicorn reports the same way).
            while not gone.is_set():
                message = await receive()
                if message["type"] == "http.disconnect":
                    if not answered:
                        meter.cancel()
                    gone.set()

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message: Message = {"type": "http.request", "body": body, "more_body": False}
                body = None
                return message
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send_answer(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = True
            await send(message)

        ran = False
        watcher = asyncio.ensure_future(watch())
        try:
            # The caller's requests beyond its window wait here, not in the store.
            if not await self.work.turn(caller.bucket, gone):
                return  # its client left while it waited: nobody to answer
            ran = True
            with metered(meter):
                await self.app(scope, replay, send_answer)
        finally:
            watcher.cancel()
            self.work.leave(caller.bucket, meter.units if ran else None)
            if meter.units and caller.bucket:
                self.service.limiter.charge(caller.bucket, meter.units / WORK_PER_TOKEN)

    async def _read_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """Read the whole body (at most ``max_body_bytes``, within ``timeout_body``
        seconds); None when an answer was already sent (413, 408) or the client left."""
        timeout = self.service.limits.timeout_body
        try:
            async with asyncio.timeout(timeout):
                return await self._receive_body(scope, receive, send)
        except TimeoutError:
            await error_response(
                408, f"the request body did not arrive within {timeout:g} s", "body", headers={"Connection": "close"}
            )(scope, receive, send)
            return None

    async def _receive_body(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        return await receive_body(scope, receive, send, self.service.limits.max_body_bytes)


async def receive_body(scope: Scope, receive: Receive, send: Send, limit: int, *, field: str | None = "body") -> bytes | None:
    """The whole request body, read before any app sees it (as it streams in, a body
    without a declared length too); None when the client left, or when it is larger
    than ``limit`` bytes: then a 413 (naming ``field``) was sent."""
    too_large = error_response(413, f"the request body is larger than {limit:,} bytes", field)
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
    return b"".join(chunks)


def with_body(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read delivered first."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class _RevalidatedStaticFiles(StaticFiles):
    """The panel's files with ``Cache-Control: no-cache``: the browser asks each time
    (an ETag answer is a 304 without a body), so after an upgrade it never runs an older
    app.js, cached by heuristic, against the newer API."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


def _register_panel(app: FastAPI) -> None:
    index = STATIC_DIR / "index.html"
    static = _RevalidatedStaticFiles(directory=STATIC_DIR, check_dir=False)

    @app.get("/", include_in_schema=False)
    def panel(request: Request) -> Any:
        if not index.is_file():
            return error_response(404, "the memory panel is not installed in this build; the API is documented at /docs")
        # index.html as the static files are served: no-cache, ETag, 304 on a match.
        return static.file_response(index, index.stat(), request.scope)

    if STATIC_DIR.is_dir():
        app.mount("/static", static, name="static")


def _docs_assets() -> Path | None:
    """Swagger UI's and ReDoc's files, as the fastapi-offline package ships them."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "static"
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


#: ReDoc's credit line shows a logo from ReDoc's CDN: the copy served here points it at
#: an empty image (no request leaves this origin; the credit keeps its text).
_REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


def _offline_redoc(assets: Path) -> tuple[bytes, str]:
    """ReDoc's bundle without its one request to a CDN, and its ETag."""
    import hashlib

    body = (assets / "redoc.standalone.js").read_bytes().replace(_REDOC_CDN_LOGO, b"data:,")
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


_DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
{head}</head><body>{body}</body></html>
"""


def register_docs(app: FastAPI) -> None:
    """/docs (Swagger UI) and /redoc (ReDoc) from files in the installed packages: no
    CDN (a page that works offline, and no third-party script on the panel's origin).
    The chat's app has them too."""
    assets = _docs_assets()
    title = app.title

    def page(head: str, body: str) -> HTMLResponse:
        return HTMLResponse(_DOCS_PAGE.format(title=title, head=head, body=body))

    def missing() -> Any:
        return error_response(404, "the API's documentation pages are not installed (pip install 'memorist[server]'); the schema is at /openapi.json")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> Any:
        if assets is None:
            return missing()
        return page(
            '<link rel="stylesheet" href="/docs-assets/swagger-ui.css"><link rel="icon" href="/docs-assets/favicon.png">',
            '<div id="swagger-ui"></div><script src="/docs-assets/swagger-ui-bundle.js"></script>'
            '<script src="/docs-assets/docs.js"></script>',
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> Any:
        if assets is None:
            return missing()
        return page(
            '<link rel="icon" href="/docs-assets/favicon.png">',
            '<redoc spec-url="/openapi.json"></redoc><script src="/docs-assets/redoc.standalone.js"></script>',
        )

    if assets is not None:
        # Swagger UI's start-up script is this package's (in the panel's static files):
        # a route before the mount, so an app without the panel serves it too.
        @app.get("/docs-assets/docs.js", include_in_schema=False)
        def swagger_ui_start() -> FileResponse:
            return FileResponse(STATIC_DIR / "docs.js", media_type="text/javascript")

        folder: Path = assets
        redoc_bundle: list[tuple[bytes, str]] = []  # read at its first request

        @app.get("/docs-assets/redoc.standalone.js", include_in_schema=False)
        def redoc_bundle_offline(request: Request) -> Response:
            if not redoc_bundle:
                redoc_bundle.append(_offline_redoc(folder))
            body, etag = redoc_bundle[0]
            headers = {"ETag": etag, "Cache-Control": "no-cache"}
            if request.headers.get("if-none-match") == etag:
                return Response(status_code=304, headers=headers)
            return Response(body, media_type="text/javascript", headers=headers)

        app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")


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
    the energy tiers (their routes are under ``/api/tiers/``; default:
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
            "Long-term memory for agents over HTTP: mem0-style memory routes (each with and without its "
            "trailing slash), API keys binding a tenant and optionally a user, JSON errors "
            '`{"error": {"type", "message", "field"}}`. See docs/service-contract.md.'
        ),
        lifespan=lifespan,
        redirect_slashes=False,
        docs_url=None,  # served by _register_docs, from the package
        redoc_url=None,
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
    register_docs(app)
    app.add_middleware(ServiceMiddleware, service=service)
    app.add_middleware(HeadAsGet)
    return app


def service_of(app: FastAPI) -> Service:
    """The :class:`Service` behind an app made by :func:`create_app`."""
    return app.state.service


__all__: list[str] = [
    "Caller", "SecurityHeaders", "Service", "ServiceMiddleware", "create_app", "register_docs", "receive_body", "service_of", "with_body", "with_security_headers",
]
