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
from pydantic import BaseModel, ConfigDict, Field

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


def _id(description: str) -> Any:
    return Field(default=None, **s.id_schema(description))


def _query_id(what: str) -> Any:
    return Query(None, **s.id_schema(f"The {what} id."))


class _Request(BaseModel):
    model_config = ConfigDict(strict=True)


class _Open(BaseModel):
    """A response shape that may grow fields: clients must ignore unknown ones."""

    model_config = ConfigDict(extra="allow")


_NOW = Field(default=None, description="The time of the operation: ISO-8601 or epoch seconds (default: now).")


class MaintainRequest(_Request):
    user_id: str | None = _id("Only this user's memories (a user-bound key: its user).")
    agent_id: str | None = _id("Only this agent's memories.")
    run_id: str | None = _id("Only this run's memories.")
    now: s.Date | None = _NOW
    test_only: bool = Field(default=False, description="Run over the test memories only.")


class EndConversationRequest(_Request):
    user_id: str | None = _id("The user whose conversation ended (a user-bound key: its user).")
    agent_id: str | None = _id("The agent.")
    run_id: str | None = _id("The conversation (run) that ended.")
    now: s.Date | None = _NOW


class BoostRequest(_Request):
    memory_id: str = Field(**s.id_schema("The memory to boost."))
    amount: float | None = Field(default=None, gt=0, le=1e9, description="Energy to add (default: the configured boost, 1.0).")
    user_id: str | None = _id("The memory's user (a user-bound key: its user).")
    agent_id: str | None = _id("The memory's agent.")
    run_id: str | None = _id("The memory's run.")
    now: s.Date | None = _NOW


class ConfigRequest(_Request):
    changes: dict[str, Any] | None = Field(
        default=None, description='Settings to change, e.g. {"decay_batch": 50, "start_energy.reminder": 3.0}.'
    )
    reset: bool = Field(default=False, description="Start from spec 002's defaults.")


class TierRun(_Open):
    run: str
    decayed: int
    expired: int
    promoted: int
    results: list[dict[str, Any]]


class Scheduled(_Open):
    scheduled: bool
    coalesced: bool


class TierItem(_Open):
    id: str
    memory: str
    energy: float
    tier: str


class TierItems(_Open):
    results: list[TierItem]


class TierStatus(_Open):
    tiers: dict[str, Any]
    total: int


class TierHealth(_Open):
    status: str
    healthy: bool
    checks: list[dict[str, Any]]


class TierConfig(_Open):
    config: dict[str, Any]
    persisted: bool


def register_tier_routes(app: FastAPI) -> None:
    """Add spec 002's routes to the service's app."""
    errors = {**_ERRORS, 403: {"model": s.ErrorResponse, "description": "A user-bound key changing the tenant's configuration."}}
    api: dict[str, Any] = {"responses": _ERRORS, "tags": ["energy tiers"]}

    @app.post("/api/tiers/maintain/", response_model=TierRun, summary="Run energy-tier maintenance", **api)
    def maintain(body: MaintainRequest, request: Request, caller: CallerDep) -> Any:
        """Decay, expire and promote the memories of the scope (a tenant key naming no
        id: the whole tenant) at ``now``; the run's counts and changes."""
        memory = _memory(request, caller)
        return JSONResponse(memory.tiers.maintain(body.now, body.test_only, user_id=caller.user(body.user_id), agent_id=body.agent_id,
                                            run_id=body.run_id))

    @app.post("/api/tiers/end-conversation/", response_model=Scheduled, status_code=202, summary="A conversation ended", **api)
    def end_conversation(body: EndConversationRequest, request: Request, caller: CallerDep) -> Any:
        """Maintain the conversation's space in the background; answers at once
        (``coalesced``: merged into a run already waiting)."""
        memory = _memory(request, caller)
        answer = memory.tiers.end_conversation(user_id=caller.user(body.user_id), agent_id=body.agent_id, run_id=body.run_id, now=body.now)
        return JSONResponse(answer, status_code=202)

    @app.post("/api/tiers/boost/", response_model=TierItem, summary="Boost a memory's energy", **api)
    def boost(body: BoostRequest, request: Request, caller: CallerDep) -> Any:
        """Add energy to a memory (after decaying it to ``now``)."""
        memory = _memory(request, caller)
        return JSONResponse(memory.tiers.boost(body.memory_id, body.amount, body.now, user_id=caller.owner(body.user_id, body.memory_id),
                                         agent_id=body.agent_id, run_id=body.run_id))

    @app.get("/api/tiers/", response_model=TierStatus, summary="Energy tiers: distribution", **api)
    def status(request: Request, caller: CallerDep, test_only: bool = Query(False, description="The test memories' distribution.")) -> Any:
        """How many memories each tier holds, and their energies (the tenant's; a
        user-bound key's: its user's only)."""
        return JSONResponse(_memory(request, caller).tiers.status(test_only=test_only, user_id=caller.user(None)))

    @app.get("/api/tiers/health/", response_model=TierHealth, summary="Energy tiers: health checks", **api)
    def health(request: Request, caller: CallerDep) -> Any:
        """Configuration, counts, stale decays, due promotions, links, last run, log
        (a user-bound key: of its user's memories only)."""
        return JSONResponse(_memory(request, caller).tiers.health(user_id=caller.user(None)))

    @app.get("/api/tiers/config/", response_model=TierConfig, summary="Energy tiers: configuration", **api)
    def get_config(request: Request, caller: CallerDep) -> Any:
        """The configuration in force (persisted in the store, else spec 002's defaults)."""
        return JSONResponse(_memory(request, caller).tiers.config())

    @app.put("/api/tiers/config/", response_model=TierConfig, summary="Energy tiers: change the configuration",
             responses=errors, tags=["energy tiers"])
    def put_config(body: ConfigRequest, request: Request, caller: CallerDep) -> Any:
        """Change settings (checked, then persisted for every process of the store)."""
        if caller.user_id is not None:
            raise ApiError(403, "a key bound to a user cannot change the tenant's energy tiers configuration")
        memory = _memory(request, caller)
        return JSONResponse(memory.tiers.config(body.changes, reset=body.reset))

    @app.get("/api/tiers/tests/", response_model=TierItems, summary="Test memories", **api)
    def test_memories(request: Request, caller: CallerDep, user_id: str = _query_id("user"), agent_id: str = _query_id("agent"),
                      run_id: str = _query_id("run"), limit: int = Query(100, ge=1, le=MAX_LIMIT)) -> Any:
        """The test memories (kept apart from the real ones), newest first."""
        memory = _memory(request, caller)
        return JSONResponse(memory.tiers.test_memories(user_id=caller.user(user_id), agent_id=agent_id, run_id=run_id, limit=limit))


__all__ = ["register_tier_routes"]
