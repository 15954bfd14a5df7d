"""The energy tiers' routes: maintenance, the end of a conversation, boosts,
status, health, configuration and test memories.

They need a store under the energy policy (recorded in the store; ``memorist config
set policy energy`` switches one); under the default policy they answer 400 saying
so. Each acts through ``reach``: a key bound to a user maintains, boosts, counts and
lists that user's memories only, a tenant key naming no id the whole tenant; changing
the tenant's configuration needs a tenant key (403 otherwise).

- ``POST /api/tiers/maintain/``: one run now (decay, expire, promote), its counts
  (``log``: "the server's maintenance log" when the run was logged, never the file's path);
- ``POST /api/tiers/end-conversation/``: 202, the run happens in the background;
- ``POST /api/tiers/boost/``: add energy to a memory;
- ``GET /api/tiers/``: the distribution per tier; ``GET /api/tiers/health/``;
- ``GET /api/tiers/config/``, ``PUT /api/tiers/config/``;
- ``GET /api/tiers/tests/``: the test memories.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ...validate import MAX_LIMIT
from .. import schemas as s
from ..deps import ERRORS, Reach, ReachDep
from ..errors import ApiError
from .params import query_id, query_time

router = APIRouter()
_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: {"model": s.ErrorResponse, "description": "The service does not run the energy policy."},
}
_API: dict[str, Any] = {"responses": _ERRORS, "tags": ["energy tiers"]}
_NOT_ENERGY = (
    "energy tiers are off: this store is under the default policy; switch it with "
    "`memorist config set policy energy` (a new store: `memorist serve --policy energy`)"
)


#: What a client is told of the maintenance log, instead of the server's path to it.
_LOG = "the server's maintenance log"

_NOW_QUERY = Query(None, max_length=64, description="As of this time: ISO-8601, epoch seconds or an offset such as +10h or -2d (default: now).")


def _energy(reach: Reach) -> Reach:
    """``reach``, once the tenant's store is known to run the energy policy (400 otherwise)."""
    if not reach.memory.energy:
        raise ApiError(400, _NOT_ENERGY)
    return reach


@router.post("/api/tiers/maintain/", response_model=s.TierRun, summary="Run energy-tier maintenance", **_API)
def maintain(body: s.MaintainRequest, reach: ReachDep) -> Any:
    """Decay, expire and promote the memories of the scope (a tenant key naming no
    id: the whole tenant) at ``now``; the run's counts and changes."""
    handle = _energy(reach).scope(user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id)
    run = handle.tiers.maintain(body.now, body.test_only)
    # The run names the log file it was appended to: a client is told only that it was
    # (the file's path is the server's, as in the health route).
    if run.get("log"):
        run["log"] = _LOG  # type: ignore[typeddict-unknown-key]
    return JSONResponse(run)


@router.post("/api/tiers/end-conversation/", response_model=s.Scheduled, status_code=202, summary="A conversation ended", **_API)
def end_conversation(body: s.EndConversationRequest, reach: ReachDep) -> Any:
    """Maintain the conversation's space in the background; answers at once
    (``coalesced``: merged into a run already waiting)."""
    handle = _energy(reach).scope(user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id)
    return JSONResponse(handle.tiers.end_conversation(now=body.now), status_code=202)


@router.post("/api/tiers/boost/", response_model=s.TierItem, summary="Boost a memory's energy", **_API)
def boost(body: s.BoostRequest, reach: ReachDep) -> Any:
    """Add energy to a memory (after decaying it to ``now``)."""
    handle = _energy(reach).by_id("memory", body.memory_id, user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id)
    return JSONResponse(handle.tiers.boost(body.memory_id, body.amount, body.now))


@router.get("/api/tiers/", response_model=s.TierStatus, summary="Energy tiers: distribution", **_API)
def status(reach: ReachDep, test_only: bool = Query(False, description="The test memories' distribution."),
           now: str | None = _NOW_QUERY) -> Any:
    """How many memories each tier holds, and their energies (the tenant's; a
    user-bound key's: its user's only)."""
    return JSONResponse(_energy(reach).scope().tiers.status(test_only=test_only, now=query_time(now)))


@router.get("/api/tiers/health/", response_model=s.TierHealth, summary="Energy tiers: health checks", **_API)
def health(reach: ReachDep, now: str | None = _NOW_QUERY) -> Any:
    """Configuration, counts, stale decays, due promotions, links, last run, log
    (a user-bound key: of its user's memories only)."""
    report = _energy(reach).scope().tiers.health(now=query_time(now))
    # The log check names the server's file: a client is told whether runs are logged.
    path = reach.memory.tiers.engine.log_path
    for check in report["checks"]:
        if check["check"] == "log" and path:
            check["detail"] = check["detail"].replace(path, _LOG)
    return JSONResponse(report)


@router.get("/api/tiers/config/", response_model=s.TierConfig, summary="Energy tiers: configuration", **_API)
def get_config(reach: ReachDep) -> Any:
    """The configuration in force (persisted in the store, else the defaults)."""
    return JSONResponse(_energy(reach).memory.tiers.config())


@router.put("/api/tiers/config/", response_model=s.TierConfig, summary="Energy tiers: change the configuration",
            responses={**_ERRORS, 403: {"model": s.ErrorResponse, "description": "A user-bound key changing the tenant's configuration."}},
            tags=["energy tiers"])
def put_config(body: s.ConfigRequest, reach: ReachDep) -> Any:
    """Change settings (checked, then persisted for every process of the store)."""
    reach.tenant("the tenant's energy tiers configuration")
    return JSONResponse(_energy(reach).memory.tiers.config(body.changes, reset=body.reset))


@router.get("/api/tiers/tests/", response_model=s.TierItems, summary="Test memories", **_API)
def test_memories(reach: ReachDep, user_id: str = query_id("user"), agent_id: str = query_id("agent"),
                  run_id: str = query_id("run"), limit: int = Query(100, ge=1, le=MAX_LIMIT)) -> Any:
    """The test memories (kept apart from the real ones), newest first."""
    handle = _energy(reach).scope(user_id=user_id, agent_id=agent_id, run_id=run_id)
    return JSONResponse(handle.tiers.test_memories(limit=limit))


__all__ = ["router"]
