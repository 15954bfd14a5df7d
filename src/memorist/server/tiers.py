"""Spec 002's routes: energy-tier maintenance, the end of a conversation, boosts,
status, health, configuration and test memories.

Same keys, tenants and error shape as the other routes (:mod:`memorist.server.app`
installs them; this module only adds routes). They need a store under the energy
policy (recorded in the store; ``memorist config set policy energy`` switches one);
under the default policy they answer 400 saying so. A key bound to a user maintains,
boosts and lists that user's memories only; changing the tenant's configuration
needs a tenant key (403 otherwise).

- ``POST /api/tiers/maintain/``: one run now (decay, expire, promote), its counts;
- ``POST /api/tiers/end-conversation/``: 202, the run happens in the background;
- ``POST /api/tiers/boost/``: add energy to a memory;
- ``GET /api/tiers/``: the distribution per tier; ``GET /api/tiers/health/``;
- ``GET /api/tiers/config/``, ``PUT /api/tiers/config/``;
- ``GET /api/tiers/tests/``: the test memories.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse

from ..validate import MAX_LIMIT
from . import schemas as s
from .deps import ERRORS, Caller, CallerDep, request_service
from .errors import ApiError

_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: {"model": s.ErrorResponse, "description": "The service does not run the energy policy."},
}
_NOT_ENERGY = (
    "energy tiers are off: this store is under the default policy; switch it with "
    "`memorist config set policy energy` (a new store: `memorist serve --policy energy`)"
)


def _memory(request: Request, caller: Caller) -> Any:
    memory = request_service(request).memory(caller)
    if not memory.energy:
        raise ApiError(400, _NOT_ENERGY)
    return memory


def _query_id(what: str) -> Any:
    return Query(None, **s.id_schema(f"The {what} id."))


def register_tier_routes(app: FastAPI) -> None:
    """Add spec 002's routes to the service's app."""
    errors = {**_ERRORS, 403: {"model": s.ErrorResponse, "description": "A user-bound key changing the tenant's configuration."}}
    api: dict[str, Any] = {"responses": _ERRORS, "tags": ["energy tiers"]}

    @app.post("/api/tiers/maintain/", response_model=s.TierRun, summary="Run energy-tier maintenance", **api)
    def maintain(body: s.MaintainRequest, request: Request, caller: CallerDep) -> Any:
        """Decay, expire and promote the memories of the scope (a tenant key naming no
        id: the whole tenant) at ``now``; the run's counts and changes."""
        memory = _memory(request, caller)
        return JSONResponse(memory.tiers.maintain(body.now, body.test_only, user_id=caller.user(body.user_id), agent_id=body.agent_id,
                                            run_id=body.run_id))

    @app.post("/api/tiers/end-conversation/", response_model=s.Scheduled, status_code=202, summary="A conversation ended", **api)
    def end_conversation(body: s.EndConversationRequest, request: Request, caller: CallerDep) -> Any:
        """Maintain the conversation's space in the background; answers at once
        (``coalesced``: merged into a run already waiting)."""
        memory = _memory(request, caller)
        answer = memory.tiers.end_conversation(user_id=caller.user(body.user_id), agent_id=body.agent_id, run_id=body.run_id, now=body.now)
        return JSONResponse(answer, status_code=202)

    @app.post("/api/tiers/boost/", response_model=s.TierItem, summary="Boost a memory's energy", **api)
    def boost(body: s.BoostRequest, request: Request, caller: CallerDep) -> Any:
        """Add energy to a memory (after decaying it to ``now``)."""
        memory = _memory(request, caller)
        return JSONResponse(memory.tiers.boost(body.memory_id, body.amount, body.now, user_id=caller.owner(body.user_id, body.memory_id),
                                         agent_id=body.agent_id, run_id=body.run_id))

    @app.get("/api/tiers/", response_model=s.TierStatus, summary="Energy tiers: distribution", **api)
    def status(request: Request, caller: CallerDep, test_only: bool = Query(False, description="The test memories' distribution.")) -> Any:
        """How many memories each tier holds, and their energies (the tenant's; a
        user-bound key's: its user's only)."""
        return JSONResponse(_memory(request, caller).tiers.status(test_only=test_only, user_id=caller.user(None)))

    @app.get("/api/tiers/health/", response_model=s.TierHealth, summary="Energy tiers: health checks", **api)
    def health(request: Request, caller: CallerDep) -> Any:
        """Configuration, counts, stale decays, due promotions, links, last run, log
        (a user-bound key: of its user's memories only)."""
        return JSONResponse(_memory(request, caller).tiers.health(user_id=caller.user(None)))

    @app.get("/api/tiers/config/", response_model=s.TierConfig, summary="Energy tiers: configuration", **api)
    def get_config(request: Request, caller: CallerDep) -> Any:
        """The configuration in force (persisted in the store, else spec 002's defaults)."""
        return JSONResponse(_memory(request, caller).tiers.config())

    @app.put("/api/tiers/config/", response_model=s.TierConfig, summary="Energy tiers: change the configuration",
             responses=errors, tags=["energy tiers"])
    def put_config(body: s.ConfigRequest, request: Request, caller: CallerDep) -> Any:
        """Change settings (checked, then persisted for every process of the store)."""
        if caller.user_id is not None:
            raise ApiError(403, "a key bound to a user cannot change the tenant's energy tiers configuration")
        memory = _memory(request, caller)
        return JSONResponse(memory.tiers.config(body.changes, reset=body.reset))

    @app.get("/api/tiers/tests/", response_model=s.TierItems, summary="Test memories", **api)
    def test_memories(request: Request, caller: CallerDep, user_id: str = _query_id("user"), agent_id: str = _query_id("agent"),
                      run_id: str = _query_id("run"), limit: int = Query(100, ge=1, le=MAX_LIMIT)) -> Any:
        """The test memories (kept apart from the real ones), newest first."""
        memory = _memory(request, caller)
        return JSONResponse(memory.tiers.test_memories(user_id=caller.user(user_id), agent_id=agent_id, run_id=run_id, limit=limit))


__all__ = ["register_tier_routes"]
