"""The learning loop's trajectories and reflections (``/api/trajectories/``, ``/api/reflections/``):
its record of task executions, under the same keys and tenants.

A by-id route acts through ``reach.by_id("trajectory", ...)``: a user-bound key naming
another user finds no trajectory (see :class:`~memorist.server.deps.Reach`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ...validate import MAX_LIMIT
from .. import schemas as s
from ..deps import ERRORS, ReachDep
from .params import path_id, query_id, query_time

router = APIRouter()
_API: dict[str, Any] = {"responses": ERRORS, "tags": ["trajectories"]}
TrajectoryPath = path_id("The trajectory id.")


@router.post("/api/trajectories/", response_model=s.TrajectoryStarted, summary="Start a trajectory", **_API)
def start_trajectory(body: s.StartTrajectoryRequest, reach: ReachDep) -> Any:
    """Start recording a task execution; its steps follow."""
    learning = reach.scope(user_id=body.user_id, agent_id=body.agent_id, checked=body.parent_trajectory_id is not None).learning
    return JSONResponse({"trajectory_id": learning.start_trajectory(body.task_description, body.task_type, body.parent_trajectory_id)})


@router.get("/api/trajectories/", response_model=s.TrajectoryList, summary="Query trajectories", **_API)
def list_trajectories(
    reach: ReachDep,
    user_id: str = query_id("user"),
    agent_id: str = query_id("agent"),
    status: str = Query(None, pattern="^(running|success|failure|partial)$"),
    task_type: str = Query(None, min_length=1, max_length=64),
    since: str = Query(None, description="Started at or after (ISO-8601 or epoch seconds)."),
    until: str = Query(None, description="Started at or before."),
    limit: int = Query(100, ge=1, le=MAX_LIMIT),
) -> Any:
    """Trajectories by agent, user, status, task type and time, newest first."""
    learning = reach.scope(user_id=user_id, agent_id=agent_id).learning
    items = learning.query_trajectories(status=status, task_type=task_type, since=query_time(since), until=query_time(until), limit=limit)
    return JSONResponse({"results": items})


@router.get("/api/trajectories/{trajectory_id}/", response_model=s.TrajectoryItem, summary="One trajectory", **_API)
def get_trajectory(reach: ReachDep, trajectory_id: str = TrajectoryPath,
                   user_id: str = query_id("user"), agent_id: str = query_id("agent")) -> Any:
    """A trajectory with its steps."""
    learning = reach.by_id("trajectory", trajectory_id, user_id=user_id, agent_id=agent_id).learning
    return JSONResponse(learning.get_trajectory(trajectory_id))


@router.post("/api/trajectories/{trajectory_id}/steps/", response_model=s.StepLogged, summary="Log a step", **_API)
def log_step(body: s.StepRequest, reach: ReachDep, trajectory_id: str = TrajectoryPath) -> Any:
    """Append a step (decision, action, observation) to a running trajectory."""
    learning = reach.by_id("trajectory", trajectory_id, user_id=body.user_id, agent_id=body.agent_id).learning
    learning.log_step(trajectory_id, body.step_type, body.description, body.metadata)
    return JSONResponse({"trajectory_id": trajectory_id, "logged": body.step_type})


@router.post("/api/trajectories/{trajectory_id}/complete/", response_model=s.TrajectoryItem, summary="Complete a trajectory", **_API)
def complete_trajectory(body: s.CompleteRequest, reach: ReachDep, trajectory_id: str = TrajectoryPath) -> Any:
    """Close a trajectory with its outcome and metrics."""
    learning = reach.by_id("trajectory", trajectory_id, user_id=body.user_id, agent_id=body.agent_id).learning
    return JSONResponse(learning.complete_trajectory(trajectory_id, body.status, body.success_score, body.error_message, body.metrics))


@router.post("/api/trajectories/{trajectory_id}/reflect/", response_model=s.ReflectionItem, summary="Reflect on a trajectory", **_API)
def reflect(body: s.OwnerRequest, reach: ReachDep, trajectory_id: str = TrajectoryPath) -> Any:
    """What a completed trajectory shows: successful and failure patterns, neutral observations, recommendations."""
    learning = reach.by_id("trajectory", trajectory_id, user_id=body.user_id, agent_id=body.agent_id).learning
    return JSONResponse(learning.reflect(trajectory_id))


@router.post("/api/reflections/batch/", response_model=s.ReflectionList, summary="Reflect on many trajectories", **_API)
def batch_reflect(body: s.BatchReflectRequest, reach: ReachDep) -> Any:
    """Patterns across completed trajectories, one reflection per task type."""
    learning = reach.scope(user_id=body.user_id, agent_id=body.agent_id).learning
    results = learning.batch_reflect(since=body.since, task_type=body.task_type, min_trajectories=body.min_trajectories, until=body.until)
    return JSONResponse({"results": results})


__all__ = ["router"]
