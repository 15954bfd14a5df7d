"""The minutes' routes: minutes, the context window, evaluation and one PAIR round.

A minute's project is Memorist's ``user_id`` (see :mod:`memorist.pipelines.minutes`):
each route acts through ``reach.project(project_id)``, so a key bound to a user reads
and writes the minutes of the project of that name only (naming another project
answers 404, as for another user; naming none means the key's), and a tenant key
names any project (none: ``"default"``). A key bound to an agent and a user acts on
its user's project as that subject: a context window for another agent, or a PAIR
round naming one, is 404 unless a relation lets it read that agent's memories, and a
PAIR round retrieves only the facts it may read (:class:`memorist.relations.SubjectMinutes`).

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

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ...errors import ValidationError
from ...validate import MAX_LIMIT, MAX_SEQ
from .. import schemas as s
from ..deps import ERRORS, ReachDep
from .params import path_id

router = APIRouter()
_API: dict[str, Any] = {
    "responses": {**ERRORS, 404: {"model": s.ErrorResponse, "description": "Not found (or outside the key's tenant and user/project)."}},
    "tags": ["minutes"],
}
MinutePath = path_id("The minute id.")


def _project_query() -> Any:
    return Query(None, **s.id_schema("The project."))


def _agent_query() -> Any:
    return Query(None, **s.id_schema("Only this agent's minutes."))


@router.post("/api/minutes/", summary="Record a minute", **_API)
def record_minute(body: s.MinuteRequest, reach: ReachDep) -> Any:
    """Append a coordination event to the log and index it for search."""
    minutes = reach.project(body.project_id).minutes
    insights = [i.model_dump() for i in body.insights] if body.insights is not None else None
    try:
        minute = minutes.record(
            body.event_type, agent_id=body.agent_id, data=body.data, context_references=body.context_references,
            memory_note=body.memory_note, category=body.category, insights=insights, run_id=body.run_id, now=body.timestamp,
        )
    except ValidationError as exc:
        if exc.field != "now":
            raise
        raise ValidationError("timestamp", str(exc)[len("now: "):]) from None  # the body names it timestamp
    return JSONResponse(minute)


@router.get("/api/minutes/", summary="The latest minutes", **_API)
def recent_minutes(reach: ReachDep, project_id: str = _project_query(), agent_id: str = _agent_query(),
                   n: int = Query(50, ge=1, le=MAX_LIMIT)) -> Any:
    """The ``n`` latest minutes of the project in time, oldest first."""
    return JSONResponse({"results": reach.project(project_id).minutes.recent(n, agent_id=agent_id)})


@router.get("/api/minutes/history/", summary="The whole log, paged", **_API)
def minutes_history(reach: ReachDep, project_id: str = _project_query(), agent_id: str = _agent_query(),
                    since: int = Query(0, ge=0, le=MAX_SEQ), limit: int = Query(100, ge=1, le=MAX_LIMIT)) -> Any:
    """``{"minutes": [...], "next"}``: pass ``since=next`` for the next page."""
    return JSONResponse(reach.project(project_id).minutes.history(agent_id=agent_id, since=since, limit=limit))


@router.get("/api/minutes/{minute_id}/", summary="One minute", **_API)
def get_minute(reach: ReachDep, minute_id: str = MinutePath) -> Any:
    """A minute by id, with ``indexed`` (whether it is in the search index now)."""
    return JSONResponse(reach.project(None).minutes.get(minute_id))


@router.post("/api/minutes/search/", summary="Search the minutes index", **_API)
def search_minutes(body: s.MinuteSearchRequest, reach: ReachDep) -> Any:
    """The indexed minutes most relevant to the query, best first."""
    minutes = reach.project(body.project_id).minutes
    return JSONResponse({"results": minutes.search(body.query, body.limit, agent_id=body.agent_id, category=body.category)})


@router.post("/api/minutes/reindex/", summary="Rebuild the minutes index from the log", **_API)
def reindex_minutes(body: s.ProjectRequest, reach: ReachDep) -> Any:
    """Every minute of the project back in the index (pruned ones too)."""
    return JSONResponse(reach.project(body.project_id).minutes.reindex())


@router.post("/api/context/", summary="Build an agent's context window", **_API)
def build_context(body: s.ContextRequest, reach: ReachDep) -> Any:
    """Recent + referenced + the agent's memory + retrieved for the task, within the token budget."""
    minutes = reach.project(body.project_id).minutes
    return JSONResponse(minutes.build_context(body.agent_id, body.task, budget_tokens=body.budget_tokens, now=body.now).to_dict())


@router.post("/api/evaluate/", summary="Evaluate and prune the minutes index", **_API)
def evaluate(body: s.EvaluateRequest, reach: ReachDep) -> Any:
    """Score, deduplicate, resolve contradictions, prune under 0.3 (index only; the log keeps all)."""
    return JSONResponse(reach.project(body.project_id).minutes.evaluate(dry_run=body.dry_run, now=body.now))


@router.post("/api/pair/", summary="One PAIR evaluation round", **_API)
def pair_round(body: s.PairRequest, reach: ReachDep) -> Any:
    """A fresh evaluator's score and gaps, and the memories retrieved for each gap."""
    minutes = reach.project(body.project_id).minutes
    return JSONResponse(minutes.pair_round(body.task, body.criteria, body.output, threshold=body.threshold, agent_id=body.agent_id,
                                           memories_per_gap=body.memories_per_gap))


__all__ = ["router"]
