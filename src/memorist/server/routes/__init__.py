"""The service's routes, one :class:`fastapi.APIRouter` per resource.

Each route is thin: it turns its request into one call on what the request acts on
(:class:`~memorist.server.deps.Reach`: a scoped handle, or the tenant's Memory where a
tenant key acts across the tenant) and answers with the call's result. The keys,
limits, body size and error shape are the app's (:mod:`memorist.server.app`).

- :mod:`.memories`: the memory calls, and the users of a tenant;
- :mod:`.health`: the service's liveness;
- :mod:`.trajectories`: the learning loop's trajectories and reflections;
- :mod:`.playbooks`: the learning loop's versioned playbooks;
- :mod:`.minutes`: minutes, the context window, evaluation and PAIR;
- :mod:`.tiers`: the energy tiers;
- :mod:`.relations`: sharing through relation tuples.
"""

from __future__ import annotations

from fastapi import APIRouter

from . import health, memories, minutes, playbooks, relations, tiers, trajectories

#: The routers in the order the app includes them (the order of /openapi.json).
ROUTERS: tuple[APIRouter, ...] = (
    memories.router,
    health.router,
    trajectories.router,
    playbooks.router,
    minutes.router,
    tiers.router,
    relations.router,
)

__all__ = ["ROUTERS"]
