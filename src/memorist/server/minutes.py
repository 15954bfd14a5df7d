"""Spec 003's routes: minutes, the context window, evaluation and one PAIR round.

Same keys, tenants and error shape as the other routes (:mod:`memorist.server.app`
installs them; this module only adds routes). A minute's project is Memorist's
``user_id`` (see :mod:`memorist.pipelines.minutes`), so a key bound to a user reads
and writes the minutes of the project of that name only: naming another project
answers 404, as for another user; naming none means the key's.

- ``POST /api/minutes/``: record a minute; ``GET /api/minutes/?project_id=&agent_id=&n=``:
  the last ``n`` (oldest first); ``GET /api/minutes/history/?since=&limit=``: the
  whole log, paged; ``GET /api/minutes/{id}/``: one, with whether it is indexed;
- ``POST /api/minutes/search/``, ``POST /api/minutes/reindex/``;
- ``POST /api/context/``: the bounded context window of an agent;
- ``POST /api/evaluate/``: an evaluation run (``dry_run`` to only report);
- ``POST /api/pair/``: one PAIR evaluation round (score, gaps, memories per gap).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse

from ..errors import NotFoundError
from ..validate import MAX_LIMIT, MAX_SEQ
from . import schemas as s
from .deps import ERRORS, Caller, CallerDep, request_service

_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    404: {"model": s.ErrorResponse, "description": "Not found (or outside the key's tenant and user/project)."},
}


def _memory(request: Request, caller: Caller) -> Any:
    return request_service(request).memory(caller)


def _project(caller: Any, project_id: str | None) -> str | None:
    """The project a request acts on: a user-bound key's user, or the one named."""
    if caller.user_id is None:
        return project_id
    if project_id is not None and project_id != caller.user_id:
        raise NotFoundError("project", project_id)
    return caller.user_id


def register_minute_routes(app: FastAPI) -> None:
    """Add spec 003's routes to the service ``app`` (made by :func:`memorist.server.create_app`)."""
    api: dict[str, Any] = {"responses": _ERRORS, "tags": ["minutes"]}
    MinutePath = PathParam(**s.id_schema("The minute id."))

    @app.post("/api/minutes/", summary="Record a minute", **api)
    def record_minute(body: s.MinuteRequest, request: Request, caller: CallerDep) -> Any:
        """Append a coordination event to the log and index it for search."""
        memory = _memory(request, caller)
        minute = memory.minutes.record(
            body.event_type, agent_id=body.agent_id, project_id=_project(caller, body.project_id), data=body.data,
            context_references=body.context_references, memory_note=body.memory_note, category=body.category,
            insights=[i.model_dump() for i in body.insights] if body.insights is not None else None, run_id=body.run_id,
            now=body.timestamp,
        )
        return JSONResponse(minute)

    @app.get("/api/minutes/", summary="The latest minutes", **api)
    def recent_minutes(request: Request, caller: CallerDep, project_id: str = Query(None, **s.id_schema("The project.")),
                       agent_id: str = Query(None, **s.id_schema("Only this agent's minutes.")),
                       n: int = Query(50, ge=1, le=MAX_LIMIT)) -> Any:
        """The last ``n`` minutes of the project, oldest first."""
        memory = _memory(request, caller)
        return JSONResponse({"results": memory.minutes.recent(n, project_id=_project(caller, project_id), agent_id=agent_id)})

    @app.get("/api/minutes/history/", summary="The whole log, paged", **api)
    def minutes_history(request: Request, caller: CallerDep, project_id: str = Query(None, **s.id_schema("The project.")),
                        agent_id: str = Query(None, **s.id_schema("Only this agent's minutes.")),
                        since: int = Query(0, ge=0, le=MAX_SEQ), limit: int = Query(100, ge=1, le=MAX_LIMIT)) -> Any:
        """``{"minutes": [...], "next"}``: pass ``since=next`` for the next page."""
        memory = _memory(request, caller)
        return JSONResponse(memory.minutes.history(project_id=_project(caller, project_id), agent_id=agent_id, since=since, limit=limit))

    @app.get("/api/minutes/{minute_id}/", summary="One minute", **api)
    def get_minute(request: Request, caller: CallerDep, minute_id: str = MinutePath) -> Any:
        """A minute by id, with ``indexed`` (whether it is in the search index now)."""
        memory = _memory(request, caller)
        minute = memory.minutes.get(minute_id)
        if caller.user_id is not None and minute["project_id"] != caller.user_id:
            raise NotFoundError("minute", minute_id)
        return JSONResponse(minute)

    @app.post("/api/minutes/search/", summary="Search the minutes index", **api)
    def search_minutes(body: s.MinuteSearchRequest, request: Request, caller: CallerDep) -> Any:
        """The indexed minutes most relevant to the query, best first."""
        memory = _memory(request, caller)
        results = memory.minutes.search(body.query, body.limit, project_id=_project(caller, body.project_id),
                                        agent_id=body.agent_id, category=body.category)
        return JSONResponse({"results": results})

    @app.post("/api/minutes/reindex/", summary="Rebuild the minutes index from the log", **api)
    def reindex_minutes(body: s.ProjectRequest, request: Request, caller: CallerDep) -> Any:
        """Every minute of the project back in the index (pruned ones too)."""
        memory = _memory(request, caller)
        return JSONResponse(memory.minutes.reindex(project_id=_project(caller, body.project_id)))

    @app.post("/api/context/", summary="Build an agent's context window", **api)
    def build_context(body: s.ContextRequest, request: Request, caller: CallerDep) -> Any:
        """Recent + referenced + the agent's memory + retrieved for the task, within the token budget."""
        memory = _memory(request, caller)
        window = memory.minutes.build_context(body.agent_id, body.task, budget_tokens=body.budget_tokens,
                                      project_id=_project(caller, body.project_id))
        return JSONResponse(window.to_dict())

    @app.post("/api/evaluate/", summary="Evaluate and prune the minutes index", **api)
    def evaluate(body: s.EvaluateRequest, request: Request, caller: CallerDep) -> Any:
        """Score, deduplicate, resolve contradictions, prune under 0.3 (index only; the log keeps all)."""
        memory = _memory(request, caller)
        return JSONResponse(memory.minutes.evaluate(project_id=_project(caller, body.project_id), dry_run=body.dry_run))

    @app.post("/api/pair/", summary="One PAIR evaluation round", **api)
    def pair_round(body: s.PairRequest, request: Request, caller: CallerDep) -> Any:
        """A fresh evaluator's score and gaps, and the memories retrieved for each gap."""
        memory = _memory(request, caller)
        return JSONResponse(memory.minutes.pair_round(body.task, body.criteria, body.output, threshold=body.threshold,
                                              project_id=_project(caller, body.project_id), agent_id=body.agent_id,
                                              memories_per_gap=body.memories_per_gap))


__all__ = ["register_minute_routes"]
