"""The memory service: spec 004's REST API over :class:`~memorist.Memory`, and spec
001's learning routes (trajectories, reflections, playbooks) under the same keys.

:func:`create_app` builds the FastAPI application (``memorist serve`` runs it under
uvicorn). The routes are a thin layer: each checks the request's shape, binds it
to the caller's tenant and user, and makes one Memory call in the thread pool
(Memory is synchronous: SQLite and the embedder), so the event loop never waits
on the store. docs/service-contract.md is the contract they keep.

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

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import default_db_path
from ..embed import Embedder
from ..errors import NotFoundError, ValidationError
from ..validate import MAX_LIMIT, MAX_SEQ, time_text
from . import schemas as s
from .deps import ERRORS, Caller, CallerDep, Service, request_service
from .errors import (
    INTERNAL_MESSAGE,
    ApiError,
    error_response,
    install_error_handlers,
)
from .keys import KeyStore
from .limits import ServerLimits
from .minutes import register_minute_routes
from .tenants import Tenants, users_of
from .tiers import register_tier_routes

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


# the routes -------------------------------------------------------------------------------
UserPath = PathParam(**s.id_schema("The user id."))
MemoryPath = PathParam(**s.id_schema("The memory id."))
# GET /api/memories/{user_id}/ and PUT/DELETE /api/memories/{memory_id}/ are one
# path to OpenAPI (templates differing only in a name must not both exist): there
# the segment is {id}, described per operation.
UserSegment = PathParam(alias="id", **s.id_schema("The user id."))
MemorySegment = PathParam(alias="id", **s.id_schema("The memory id."))


def _query_id(what: str) -> Any:
    """An optional id in the query. Such parameters are typed ``str`` (or ``int``)
    with a None default, not ``str | None``: a query string holds no null, and the
    schema should not say it may."""
    return Query(None, **s.id_schema(f"The {what} id."))


def _json_query(name: str, raw: str | None) -> Any:
    """A JSON value given in the query string (None when absent)."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValidationError(name, f"must be JSON, e.g. {{\"source\": \"chat\"}} ({exc})") from None


def _register_routes(app: FastAPI) -> None:
    api: dict[str, Any] = {"responses": ERRORS, "tags": ["memories"]}

    @app.post("/api/memories/", response_model=s.AddResponse, summary="Add memories", **api)
    def add_memories(body: s.AddRequest, request: Request, caller: CallerDep) -> Any:
        """Extract memories from a conversation turn (``infer=false``: store each
        message as it is) and reconcile them with what the scope holds."""
        service = request_service(request)
        messages: Any = body.messages
        if isinstance(messages, list):
            if len(messages) > service.limits.max_messages:
                raise ApiError(413, f"{len(messages)} messages; the limit is {service.limits.max_messages} per request", field="messages")
            messages = [m.model_dump(exclude_none=True) for m in messages]
        result = service.memory(caller).add(
            messages,
            user_id=caller.user(body.user_id),
            agent_id=body.agent_id,
            run_id=body.run_id,
            metadata=body.metadata,
            infer=body.infer,
            timestamp=body.timestamp,
            test=body.test,
        )
        return JSONResponse(result)

    @app.post("/api/memories/search/", response_model=s.MemoryList, summary="Search memories", **api)
    def search_memories(body: s.SearchRequest, request: Request, caller: CallerDep) -> Any:
        """The scope's memories most relevant to ``query``, best first."""
        result = request_service(request).memory(caller).search(
            body.query,
            user_id=caller.user(body.user_id),
            agent_id=body.agent_id,
            run_id=body.run_id,
            limit=body.limit,
            filters=body.filters,
            threshold=body.threshold,
            reference_time=body.reference_time,
        )
        return JSONResponse(result)

    @app.get("/api/memories/", response_model=s.MemoryList, summary="List memories of a scope", **api)
    def list_memories(
        request: Request,
        caller: CallerDep,
        user_id: str = _query_id("user"),
        agent_id: str = _query_id("agent"),
        run_id: str = _query_id("run"),
        limit: int = Query(100, ge=1, le=MAX_LIMIT),
        filters: str = Query(None, max_length=65_536, description='Metadata and field filters as a JSON object, e.g. {"source": "chat"}.'),
    ) -> Any:
        """The memories of a scope (one id at least), newest first."""
        memory = request_service(request).memory(caller)
        return JSONResponse(memory.get_all(user_id=caller.user(user_id), agent_id=agent_id, run_id=run_id, limit=limit,
                                           filters=_json_query("filters", filters)))

    @app.delete("/api/memories/", response_model=s.DeleteAllResponse, summary="Delete every memory of a scope", **api)
    def delete_all_memories(
        request: Request,
        caller: CallerDep,
        user_id: str = _query_id("user"),
        agent_id: str = _query_id("agent"),
        run_id: str = _query_id("run"),
    ) -> Any:
        """Delete the memories of a scope (one id at least: never a wipe)."""
        memory = request_service(request).memory(caller)
        return JSONResponse(memory.delete_all(user_id=caller.user(user_id), agent_id=agent_id, run_id=run_id))

    @app.get("/api/users/", response_model=s.UserList, summary="Users of the tenant", tags=["users"], responses=ERRORS)
    def list_users(
        request: Request, caller: CallerDep, limit: int = Query(1000, ge=1, le=MAX_LIMIT)
    ) -> Any:
        """The users of the key's tenant with their number of memories (a user-bound
        key: only its user)."""
        memory = request_service(request).memory(caller)
        return JSONResponse({"results": users_of(memory, only=caller.user_id, limit=limit)})

    @app.get("/api/memories/{id}/", response_model=s.MemoryList, summary="List a user's memories", **api)
    def list_user_memories(
        request: Request,
        caller: CallerDep,
        user_id: str = UserSegment,
        limit: int = Query(100, ge=1, le=MAX_LIMIT),
        agent_id: str = _query_id("agent"),
        run_id: str = _query_id("run"),
    ) -> Any:
        """The user's memories, newest first (spec 004's "Get All Memories")."""
        memory = request_service(request).memory(caller)
        return JSONResponse(memory.get_all(user_id=caller.user(user_id), agent_id=agent_id, run_id=run_id, limit=limit))

    # Declared before the memory route: a memory whose id is "events" is shadowed here.
    @app.get("/api/memories/{user_id}/events/", response_model=s.EventList, summary="A user's event log", **api)
    def user_events(
        request: Request,
        caller: CallerDep,
        user_id: str = UserPath,
        since: int = Query(0, ge=0, le=MAX_SEQ, description="Only events after this seq."),
        limit: int = Query(None, ge=1, le=MAX_LIMIT),
        agent_id: str = _query_id("agent"),
        run_id: str = _query_id("run"),
    ) -> Any:
        """The event log of the user (turns, adds, updates, deletes, retrievals), oldest first."""
        memory = request_service(request).memory(caller)
        events = memory.events(user_id=caller.user(user_id), agent_id=agent_id, run_id=run_id, since=since, limit=limit)
        return JSONResponse({"results": events})

    @app.get("/api/memories/{user_id}/{memory_id}/", response_model=s.MemoryItem, summary="One memory", **api)
    def get_memory(
        request: Request, caller: CallerDep, user_id: str = UserPath, memory_id: str = MemoryPath,
        agent_id: str = _query_id("agent"), run_id: str = _query_id("run"),
    ) -> Any:
        """One memory of the user."""
        memory = request_service(request).memory(caller)
        return JSONResponse(memory.get(memory_id, user_id=caller.owner(user_id, memory_id), agent_id=agent_id, run_id=run_id))

    @app.get("/api/memories/{user_id}/{memory_id}/history/", response_model=s.EventList, summary="A memory's history", **api)
    def memory_history(
        request: Request, caller: CallerDep, user_id: str = UserPath, memory_id: str = MemoryPath,
        agent_id: str = _query_id("agent"), run_id: str = _query_id("run"),
    ) -> Any:
        """Every event of the memory, oldest first (a deleted memory's too)."""
        memory = request_service(request).memory(caller)
        owner = caller.owner(user_id, memory_id)
        return JSONResponse({"results": memory.history(memory_id, user_id=owner, agent_id=agent_id, run_id=run_id)})

    @app.put("/api/memories/{id}/", response_model=s.UpdateResponse, summary="Update a memory", **api)
    def update_memory(
        body: s.UpdateRequest,
        request: Request,
        caller: CallerDep,
        memory_id: str = MemorySegment,
        user_id: str = _query_id("user"),
        agent_id: str = _query_id("agent"),
        run_id: str = _query_id("run"),
    ) -> Any:
        """Replace a memory's text; ``metadata`` keys are merged in."""
        memory = request_service(request).memory(caller)
        owner = caller.owner(user_id, memory_id)
        return JSONResponse(memory.update(memory_id, body.text, user_id=owner, agent_id=agent_id, run_id=run_id, metadata=body.metadata))

    @app.delete("/api/memories/{id}/", response_model=s.DeleteResponse, summary="Delete a memory", **api)
    def delete_memory(
        request: Request,
        caller: CallerDep,
        memory_id: str = MemorySegment,
        user_id: str = _query_id("user"),
        agent_id: str = _query_id("agent"),
        run_id: str = _query_id("run"),
    ) -> Any:
        """Delete one memory (its history stays readable)."""
        memory = request_service(request).memory(caller)
        return JSONResponse(memory.delete(memory_id, user_id=caller.owner(user_id, memory_id), agent_id=agent_id, run_id=run_id))

    @app.get("/healthz", response_model=s.Health, summary="Liveness", tags=["service"])
    def healthz() -> Any:
        """``{"status": "ok", "version": ...}``; needs no key."""
        return JSONResponse({"status": "ok", "version": app.version})


def _learning_user(caller: Caller, user_id: str | None, what: str, ident: str) -> str | None:
    """The user of a by-id learning request: another user than the key's is not found."""
    if caller.user_id is not None and user_id is not None and user_id != caller.user_id:
        raise NotFoundError(what, ident)
    return caller.user_id if caller.user_id is not None else user_id


def _writable(caller: Caller, scope: str | None) -> None:
    """A key bound to one user writes that user's playbooks, not the tenant's or everyone's."""
    if caller.user_id is not None and scope in ("tenant", "global"):
        raise ApiError(403, f"a key bound to a user cannot change {scope} playbooks", field="scope")


def _register_learning_routes(app: FastAPI) -> None:
    """Spec 001's learning loop: trajectories, reflections, playbooks (same keys and tenants)."""
    errors = {**ERRORS, 403: {"model": s.ErrorResponse, "description": "A user-bound key writing a tenant or global playbook."}}
    traj: dict[str, Any] = {"responses": ERRORS, "tags": ["trajectories"]}
    book: dict[str, Any] = {"responses": errors, "tags": ["playbooks"]}
    TrajectoryPath = PathParam(**s.id_schema("The trajectory id."))
    NamePath = PathParam(**s.id_schema("The playbook's name."))

    @app.post("/api/trajectories/", response_model=s.TrajectoryStarted, summary="Start a trajectory", **traj)
    def start_trajectory(body: s.StartTrajectoryRequest, request: Request, caller: CallerDep) -> Any:
        """Start recording a task execution; its steps follow."""
        memory = request_service(request).memory(caller)
        tid = memory.learning.start_trajectory(body.task_description, body.task_type, body.parent_trajectory_id,
                                      user_id=caller.user(body.user_id), agent_id=body.agent_id)
        return JSONResponse({"trajectory_id": tid})

    @app.get("/api/trajectories/", response_model=s.TrajectoryList, summary="Query trajectories", **traj)
    def list_trajectories(
        request: Request,
        caller: CallerDep,
        user_id: str = _query_id("user"),
        agent_id: str = _query_id("agent"),
        status: str = Query(None, pattern="^(running|success|failure|partial)$"),
        task_type: str = Query(None, min_length=1, max_length=64),
        since: str = Query(None, description="Started at or after (ISO-8601 or epoch seconds)."),
        until: str = Query(None, description="Started at or before."),
        limit: int = Query(100, ge=1, le=MAX_LIMIT),
    ) -> Any:
        """Trajectories by agent, user, status, task type and time, newest first."""
        memory = request_service(request).memory(caller)
        items = memory.learning.query_trajectories(user_id=caller.user(user_id), agent_id=agent_id, status=status, task_type=task_type,
                                          since=time_text(since), until=time_text(until), limit=limit)
        return JSONResponse({"results": items})

    @app.get("/api/trajectories/{trajectory_id}/", response_model=s.TrajectoryItem, summary="One trajectory", **traj)
    def get_trajectory(request: Request, caller: CallerDep, trajectory_id: str = TrajectoryPath,
                       user_id: str = _query_id("user"), agent_id: str = _query_id("agent")) -> Any:
        """A trajectory with its steps."""
        memory = request_service(request).memory(caller)
        user = _learning_user(caller, user_id, "trajectory", trajectory_id)
        return JSONResponse(memory.learning.get_trajectory(trajectory_id, user_id=user, agent_id=agent_id))

    @app.post("/api/trajectories/{trajectory_id}/steps/", response_model=s.StepLogged, summary="Log a step", **traj)
    def log_step(body: s.StepRequest, request: Request, caller: CallerDep, trajectory_id: str = TrajectoryPath) -> Any:
        """Append a step (decision, action, observation) to a running trajectory."""
        memory = request_service(request).memory(caller)
        user = _learning_user(caller, body.user_id, "trajectory", trajectory_id)
        memory.learning.log_step(trajectory_id, body.step_type, body.description, body.metadata, user_id=user, agent_id=body.agent_id)
        return JSONResponse({"trajectory_id": trajectory_id, "logged": body.step_type})

    @app.post("/api/trajectories/{trajectory_id}/complete/", response_model=s.TrajectoryItem, summary="Complete a trajectory", **traj)
    def complete_trajectory(body: s.CompleteRequest, request: Request, caller: CallerDep, trajectory_id: str = TrajectoryPath) -> Any:
        """Close a trajectory with its outcome and metrics."""
        memory = request_service(request).memory(caller)
        user = _learning_user(caller, body.user_id, "trajectory", trajectory_id)
        return JSONResponse(memory.learning.complete_trajectory(trajectory_id, body.status, body.success_score, body.error_message, body.metrics,
                                                       user_id=user, agent_id=body.agent_id))

    @app.post("/api/trajectories/{trajectory_id}/reflect/", response_model=s.ReflectionItem, summary="Reflect on a trajectory", **traj)
    def reflect(body: s.OwnerRequest, request: Request, caller: CallerDep, trajectory_id: str = TrajectoryPath) -> Any:
        """What a completed trajectory shows: successful and failure patterns, neutral observations, recommendations."""
        memory = request_service(request).memory(caller)
        user = _learning_user(caller, body.user_id, "trajectory", trajectory_id)
        return JSONResponse(memory.learning.reflect(trajectory_id, user_id=user, agent_id=body.agent_id))

    @app.post("/api/reflections/batch/", response_model=s.ReflectionList, summary="Reflect on many trajectories", **traj)
    def batch_reflect(body: s.BatchReflectRequest, request: Request, caller: CallerDep) -> Any:
        """Patterns across completed trajectories, one reflection per task type."""
        memory = request_service(request).memory(caller)
        results = memory.learning.batch_reflect(body.agent_id, body.since, body.task_type, body.min_trajectories,
                                       user_id=caller.user(body.user_id), until=body.until)
        return JSONResponse({"results": results})

    @app.get("/api/playbooks/", response_model=s.PlaybookList, summary="Playbooks of a scope", **book)
    def list_playbooks(request: Request, caller: CallerDep, user_id: str = _query_id("user"), agent_id: str = _query_id("agent"),
                       scope: str = Query(None, pattern="^(agent|user|tenant|global)$")) -> Any:
        """The playbooks of a scope, without their strategies."""
        memory = request_service(request).memory(caller)
        return JSONResponse({"results": memory.learning.list_playbooks(user_id=caller.user(user_id), agent_id=agent_id, scope=scope)})

    @app.get("/api/playbooks/{name}/", response_model=s.PlaybookItem, summary="A playbook", **book)
    def get_playbook(request: Request, caller: CallerDep, name: str = NamePath, user_id: str = _query_id("user"),
                     agent_id: str = _query_id("agent"), scope: str = Query(None, pattern="^(agent|user|tenant|global)$")) -> Any:
        """A playbook with its strategies by category, best first (one never written: empty, version 0)."""
        memory = request_service(request).memory(caller)
        return JSONResponse(memory.learning.get_playbook(name, agent_id, user_id=caller.user(user_id), scope=scope))

    @app.put("/api/playbooks/{name}/", response_model=s.PlaybookItem, summary="Update a playbook", **book)
    def update_playbook(body: s.UpdatePlaybookRequest, request: Request, caller: CallerDep, name: str = NamePath) -> Any:
        """Add strategies (merged into similar ones), or replace the playbook's (``merge: false``)."""
        _writable(caller, body.scope)
        memory = request_service(request).memory(caller)
        user = caller.user(body.user_id)
        playbook_id = memory.learning.update_playbook(body.strategies, name, body.merge, user_id=user, agent_id=body.agent_id,
                                             scope=body.scope, major=body.major)
        return JSONResponse({**memory.learning.get_playbook(name, body.agent_id, user_id=user, scope=body.scope), "playbook_id": playbook_id})

    @app.post("/api/playbooks/{name}/curate/", response_model=s.CurationResponse, summary="Curate reflections into a playbook", **book)
    def curate_playbook(body: s.CuratePlaybookRequest, request: Request, caller: CallerDep, name: str = NamePath) -> Any:
        """The reflections' patterns become strategies: ``{"added", "updated", "removed"}``."""
        _writable(caller, body.scope)
        memory = request_service(request).memory(caller)
        return JSONResponse(memory.learning.curate_playbook(body.reflections, name, user_id=caller.user(body.user_id), agent_id=body.agent_id,
                                                   scope=body.scope))

    @app.get("/api/playbooks/{name}/versions/", response_model=s.VersionList, summary="A playbook's versions", **book)
    def playbook_versions(request: Request, caller: CallerDep, name: str = NamePath, user_id: str = _query_id("user"),
                          agent_id: str = _query_id("agent"), scope: str = Query(None, pattern="^(agent|user|tenant|global)$")) -> Any:
        """The versions kept (latest 5, every major one, the last 90 days), oldest first."""
        memory = request_service(request).memory(caller)
        return JSONResponse({"results": memory.learning.list_playbook_versions(name, user_id=caller.user(user_id), agent_id=agent_id, scope=scope)})

    @app.get("/api/playbooks/{name}/versions/{version}/", response_model=s.PlaybookItem, summary="One version of a playbook", **book)
    def playbook_version(request: Request, caller: CallerDep, name: str = NamePath, version: int = PathParam(ge=1, le=MAX_LIMIT),
                         user_id: str = _query_id("user"), agent_id: str = _query_id("agent"),
                         scope: str = Query(None, pattern="^(agent|user|tenant|global)$")) -> Any:
        """A kept version, with its strategies."""
        memory = request_service(request).memory(caller)
        return JSONResponse(memory.learning.get_playbook_version(name, version, user_id=caller.user(user_id), agent_id=agent_id, scope=scope))

    @app.post("/api/playbooks/{name}/rollback/", response_model=s.CurationResponse, summary="Roll a playbook back", **book)
    def rollback_playbook(body: s.RollbackRequest, request: Request, caller: CallerDep, name: str = NamePath) -> Any:
        """A new (major) version equal to ``version``."""
        _writable(caller, body.scope)
        memory = request_service(request).memory(caller)
        return JSONResponse(memory.learning.rollback_playbook(name, body.version, user_id=caller.user(body.user_id), agent_id=body.agent_id,
                                                     scope=body.scope))


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
    keys = KeyStore(path)
    try:
        tenants = Tenants(path, embedder=embedder, decay_days=decay_days, max_text_chars=limits.max_text_chars, policy=policy)
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
    _register_routes(app)
    _register_learning_routes(app)
    register_minute_routes(app)
    register_tier_routes(app)
    _register_panel(app)
    app.add_middleware(ServiceMiddleware, service=service)
    return app


def service_of(app: FastAPI) -> Service:
    """The :class:`Service` behind an app made by :func:`create_app`."""
    return app.state.service


__all__: list[str] = ["Caller", "Service", "ServiceMiddleware", "create_app", "service_of"]
