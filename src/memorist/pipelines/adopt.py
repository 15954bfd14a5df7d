"""Adopting the records of a store's development tenant into a real one.

Without API keys the service, the CLI and the library write in the default tenant
(``""``, or ``MEMORIST_TENANT``). A key acts in its own tenant, so once keys are
turned on, what was written before them is out of every key's reach: the panel shows
"alex (0 memories)". :func:`adopt` moves those records (every kind a scope owns:
memories, playbook bullets, trajectories, reflections, minutes, test memories) into
a tenant, with their vectors and, where their space moves whole, their events; one
``adopt`` event records it. It is idempotent: a second run finds nothing to move.
"""

from __future__ import annotations

from typing import Any

from .. import validate
from ..errors import ValidationError
from ..store.base import ScopeFilter, Store
from .tiers import test_tenant

#: The event that records an adoption.
OP_ADOPT = "adopt"


def untenanted(store: Store, source: str = "") -> int:
    """How many live records (memories, bullets, trajectories, minutes, test
    memories...) the tenant ``source`` holds: what keys of another tenant cannot see."""
    return sum(store.count(ScopeFilter(tenant)) for tenant in (source, test_tenant(source)))


def adopt(store: Store, tenant_id: Any, *, user_id: Any = None, source: str = "", actor: str = "") -> dict[str, Any]:
    """Move the records of tenant ``source`` (default: the development tenant ``""``)
    into ``tenant_id``; with ``user_id``, only that user's. Returns ``{"tenant_id",
    "from_tenant", "user_id", "memories", "spaces", "merged"}``: ``memories`` counts the
    records moved, ``spaces`` the scopes that changed tenant whole, ``merged`` those
    whose records joined a scope the tenant already had."""
    target = validate.scope_id("tenant_id", tenant_id)
    if not target:
        raise ValidationError("tenant_id", "must name the tenant to adopt the records into")
    user = validate.scope_id("user_id", user_id)
    if target == source:
        raise ValidationError("tenant_id", f"is the tenant the records are in already ({source!r}): nothing to adopt")
    moves = [(source, target), (test_tenant(source), test_tenant(target))]
    payload = {"tenant_id": target, "from_tenant": source, "user_id": user}
    counts = store.adopt(moves, user_id=user, actor=actor, payload=payload)
    return {**payload, **counts}


__all__ = ["OP_ADOPT", "adopt", "untenanted"]
