"""The memory calls (``/api/memories/``) and the users of a tenant (``/api/users/``).

Each route is one declared call (:data:`memorist.api.CALLS` names its route) on what
the request acts on: ``reach.scope(...)`` for a call in a scope, ``reach.by_id(...)``
for a call on one memory (see :class:`~memorist.server.deps.Reach`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ...api import EVENTS_PAGE
from ...validate import MAX_LIMIT, MAX_SEQ
from .. import schemas as s
from ..deps import ERRORS, ReachDep
from ..errors import ApiError
from ..tenants import users_of
from .params import json_query, path_id, query_id

router = APIRouter()
_API: dict[str, Any] = {"responses": ERRORS, "tags": ["memories"]}

UserPath = path_id("The user id.")
MemoryPath = path_id("The memory id.")
# GET /api/memories/{user_id}/ and PUT/DELETE /api/memories/{memory_id}/ are one
# path to OpenAPI (templates differing only in a name must not both exist): there
# the segment is {id}, described per operation.
UserSegment = path_id("The user id.", alias="id")
MemorySegment = path_id("The memory id.", alias="id")


@router.post("/api/memories/", response_model=s.AddResponse, summary="Add memories", **_API)
def add_memories(body: s.AddRequest, reach: ReachDep) -> Any:
    """Extract memories from a conversation turn (``infer=false``: store each
    message as it is) and reconcile them with what the scope holds."""
    messages: Any = body.messages
    if isinstance(messages, list):
        most = reach.service.limits.max_messages
        if len(messages) > most:
            raise ApiError(413, f"{len(messages)} messages; the limit is {most} per request", field="messages")
        messages = [m.model_dump(exclude_none=True) for m in messages]
    handle = reach.scope(user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id)
    return JSONResponse(handle.add(messages, metadata=body.metadata, infer=body.infer, timestamp=body.timestamp, test=body.test,
                                   importance=body.importance))


@router.post("/api/memories/consolidate/", response_model=s.ConsolidationReport, summary="Consolidate similar memories", **_API)
def consolidate_memories(body: s.ConsolidateRequest, reach: ReachDep) -> Any:
    """Merge similar memories of low importance into one each, keeping every name,
    number and date; never those at or above ``importance_threshold``. The report's
    ``run_id`` undoes the run (``POST /api/memories/rollback/``)."""
    learning = reach.scope(user_id=body.user_id, agent_id=body.agent_id, checked=body.scope is not None).learning
    return JSONResponse(learning.consolidate(
        body.memory_type, body.scope, body.min_importance, body.preserve_high_importance, body.importance_threshold,
        dry_run=body.dry_run,
    ))


@router.post("/api/memories/rollback/", response_model=s.RollbackResult, summary="Undo a merge or a reconciliation",
             responses={**ERRORS, 409: {"model": s.ErrorResponse, "description": "Already rolled back, or changed again since."}},
             tags=["memories"])
def rollback(body: s.MemoryRollbackRequest, reach: ReachDep) -> Any:
    """Restore what a consolidation run, a reconciler UPDATE/DELETE, a curation merge,
    a playbook dedup merge or an evaluation's duplicate drop changed, exactly; delete
    what it made. 409 when it was rolled back already or changed again since."""
    handle = reach.scope(user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id)
    return JSONResponse(handle.rollback(body.event_or_run_id))


@router.post("/api/memories/search/", response_model=s.MemoryList, summary="Search memories", **_API)
def search_memories(body: s.SearchRequest, reach: ReachDep) -> Any:
    """The scope's memories most relevant to ``query``, best first."""
    handle = reach.scope(user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id)
    return JSONResponse(handle.search(body.query, limit=body.limit, filters=body.filters, threshold=body.threshold,
                                      reference_time=body.reference_time))


@router.get("/api/memories/", response_model=s.MemoryList, summary="List memories of a scope", **_API)
def list_memories(
    reach: ReachDep,
    user_id: str = query_id("user"),
    agent_id: str = query_id("agent"),
    run_id: str = query_id("run"),
    limit: int = Query(100, ge=1, le=MAX_LIMIT),
    filters: str = Query(None, max_length=65_536, description='Metadata and field filters as a JSON object, e.g. {"source": "chat"}.'),
) -> Any:
    """The memories of a scope (one id at least), newest first."""
    handle = reach.scope(user_id=user_id, agent_id=agent_id, run_id=run_id)
    return JSONResponse(handle.get_all(limit=limit, filters=json_query("filters", filters)))


@router.delete("/api/memories/", response_model=s.DeleteAllResponse, summary="Delete every memory of a scope", **_API)
def delete_all_memories(
    reach: ReachDep,
    user_id: str = query_id("user"),
    agent_id: str = query_id("agent"),
    run_id: str = query_id("run"),
) -> Any:
    """Delete the memories of a scope (one id at least: never a wipe)."""
    return JSONResponse(reach.scope(user_id=user_id, agent_id=agent_id, run_id=run_id).delete_all())


@router.post("/api/erase/", response_model=s.EraseResponse, summary="Erase everything of a user, agent or run", **_API)
def erase(body: s.EraseRequest, reach: ReachDep) -> Any:
    """Forget a scope for good: its memories in every capability are removed, its
    events keep their shape but lose their text, and the store is scrubbed of it.
    A key bound to a user erases that user only (another answers 404); a tenant key,
    any user of its tenant. ``dry_run``: count only. Each erasure rewrites the store to
    scrub it: a key starts ``--erasures`` a minute at most (429 beyond)."""
    handle = reach.scope(user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id)  # 404 before any 429
    refused = None if body.dry_run else reach.erasure_refused()
    return refused or JSONResponse(handle.erase(dry_run=body.dry_run))


@router.get("/api/users/", response_model=s.UserList, summary="Users of the tenant", tags=["users"], responses=ERRORS)
def list_users(reach: ReachDep, limit: int = Query(1000, ge=1, le=MAX_LIMIT)) -> Any:
    """The users of the key's tenant with their number of memories (a user-bound
    key: only its user; an agent-bound key: the users of its agent's memories, counting those)."""
    return JSONResponse({"results": users_of(reach.memory, only=reach.bound_user, limit=limit, agent=reach.bound_agent)})


@router.get("/api/memories/{id}/", response_model=s.MemoryList, summary="List a user's memories", **_API)
def list_user_memories(
    reach: ReachDep,
    user_id: str = UserSegment,
    limit: int = Query(100, ge=1, le=MAX_LIMIT),
    agent_id: str = query_id("agent"),
    run_id: str = query_id("run"),
    filters: str = Query(None, max_length=65_536, description='Metadata and field filters as a JSON object, e.g. {"source": "chat"}.'),
) -> Any:
    """The user's memories, newest first (``GET /api/memories/?user_id=`` by another path)."""
    handle = reach.scope(user_id=user_id, agent_id=agent_id, run_id=run_id)
    return JSONResponse(handle.get_all(limit=limit, filters=json_query("filters", filters)))


# Declared before the memory route: a memory whose id is "events" is shadowed here.
@router.get("/api/memories/{user_id}/events/", response_model=s.EventList, summary="A user's event log", **_API)
def user_events(
    reach: ReachDep,
    user_id: str = UserPath,
    since: int = Query(0, ge=0, le=MAX_SEQ, description="Only events after this seq."),
    limit: int = Query(EVENTS_PAGE, ge=1, le=MAX_LIMIT, description=f"At most this many (default {EVENTS_PAGE:,}: a page; the next starts after the last seq)."),
    agent_id: str = query_id("agent"),
    run_id: str = query_id("run"),
) -> Any:
    """The event log of the user (turns, adds, updates, deletes, retrievals), oldest first, a page at a time."""
    handle = reach.scope(user_id=user_id, agent_id=agent_id, run_id=run_id)
    return JSONResponse({"results": handle.events(since=since, limit=limit)})


@router.get("/api/memories/{user_id}/{memory_id}/", response_model=s.MemoryItem, summary="One memory", **_API)
def get_memory(
    reach: ReachDep, user_id: str = UserPath, memory_id: str = MemoryPath,
    agent_id: str = query_id("agent"), run_id: str = query_id("run"),
) -> Any:
    """One memory of the user."""
    return JSONResponse(reach.by_id("memory", memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id).get(memory_id))


@router.get("/api/memories/{user_id}/{memory_id}/history/", response_model=s.EventList, summary="A memory's history", **_API)
def memory_history(
    reach: ReachDep, user_id: str = UserPath, memory_id: str = MemoryPath,
    agent_id: str = query_id("agent"), run_id: str = query_id("run"),
) -> Any:
    """Every event of the memory, oldest first (a deleted memory's too)."""
    handle = reach.by_id("memory", memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id)
    return JSONResponse({"results": handle.history(memory_id)})


# The same three reads with every id of the scope in the query: for ids a URL path
# cannot carry (a user id holding "/", as the chat's "tenant/user"), and for scopes
# without a user (an agent's memories).
@router.get("/api/memory/{memory_id}/", response_model=s.MemoryItem, summary="One memory, its scope in the query", **_API)
def get_memory_of_scope(
    reach: ReachDep, memory_id: str = MemoryPath,
    user_id: str = query_id("user"), agent_id: str = query_id("agent"), run_id: str = query_id("run"),
) -> Any:
    """One memory of the scope the query names (``GET /api/memories/{user_id}/{memory_id}/`` by another path)."""
    return JSONResponse(reach.by_id("memory", memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id).get(memory_id))


@router.get("/api/memory/{memory_id}/history/", response_model=s.EventList, summary="A memory's history, its scope in the query", **_API)
def memory_history_of_scope(
    reach: ReachDep, memory_id: str = MemoryPath,
    user_id: str = query_id("user"), agent_id: str = query_id("agent"), run_id: str = query_id("run"),
) -> Any:
    """Every event of the memory, oldest first (``GET /api/memories/{user_id}/{memory_id}/history/`` by another path)."""
    handle = reach.by_id("memory", memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id)
    return JSONResponse({"results": handle.history(memory_id)})


@router.get("/api/events/", response_model=s.EventList, summary="A scope's event log", **_API)
def scope_events(
    reach: ReachDep,
    user_id: str = query_id("user"),
    agent_id: str = query_id("agent"),
    run_id: str = query_id("run"),
    since: int = Query(0, ge=0, le=MAX_SEQ, description="Only events after this seq."),
    limit: int = Query(EVENTS_PAGE, ge=1, le=MAX_LIMIT, description=f"At most this many (default {EVENTS_PAGE:,}: a page; the next starts after the last seq)."),
) -> Any:
    """The event log of the scope (one id at least), oldest first (``GET /api/memories/{user_id}/events/`` by another path)."""
    handle = reach.scope(user_id=user_id, agent_id=agent_id, run_id=run_id)
    return JSONResponse({"results": handle.events(since=since, limit=limit)})


@router.put("/api/memories/{id}/", response_model=s.UpdateResponse, summary="Update a memory", **_API)
def update_memory(
    body: s.UpdateRequest,
    reach: ReachDep,
    memory_id: str = MemorySegment,
    user_id: str = query_id("user"),
    agent_id: str = query_id("agent"),
    run_id: str = query_id("run"),
) -> Any:
    """Replace a memory's text; ``metadata`` keys are merged in."""
    handle = reach.by_id("memory", memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id)
    return JSONResponse(handle.update(memory_id, body.text, metadata=body.metadata))


@router.delete("/api/memories/{id}/", response_model=s.DeleteResponse, summary="Delete a memory", **_API)
def delete_memory(
    reach: ReachDep,
    memory_id: str = MemorySegment,
    user_id: str = query_id("user"),
    agent_id: str = query_id("agent"),
    run_id: str = query_id("run"),
) -> Any:
    """Delete one memory (its history stays readable)."""
    return JSONResponse(reach.by_id("memory", memory_id, user_id=user_id, agent_id=agent_id, run_id=run_id).delete(memory_id))


__all__ = ["router"]
