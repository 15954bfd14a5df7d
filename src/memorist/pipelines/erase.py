"""Forgetting an owner: :meth:`memorist.Memory.erase` over the store contract.

An owner is a scope of one tenant (a user, an agent, a run, or a combination). What
it owns lives in the spaces its ids match: its facts, its playbooks (with their
strategies and versions), trajectories, reflections and minutes (a minute's project
is its user), in the tenant's own spaces, and its test memories, in the tenant's
test spaces. :meth:`memorist.store.base.Store.erase` removes all of it in one
transaction, leaves each of its events a tombstone and logs the erasure; this module
names the owners and turns the store's counts into the call's answer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..model import ERASED_CAPABILITIES, EraseResult, Scope, erased_capability
from ..store.base import Erased, ScopeFilter, Store
from .tiers import TEST_MARK, test_tenant


def counts(erased: Erased) -> dict[str, int]:
    """The memories erased per capability (every capability named, 0 when none)."""
    out = dict.fromkeys(ERASED_CAPABILITIES, 0)
    for (tenant, kind, bullet), n in erased.memories.items():
        out[erased_capability(kind, bullet, tenant.endswith(TEST_MARK))] += n
    return out


def erase(store: Store, owner: ScopeFilter, *, dry_run: bool = False) -> EraseResult:
    """Erase what ``owner`` owns (see :meth:`memorist.Memory.erase`)."""
    owners = [owner, dataclasses.replace(owner, tenant_id=test_tenant(owner.tenant_id))]
    ids = {"user_id": owner.user_id, "agent_id": owner.agent_id, "run_id": owner.run_id}

    def describe(found: Erased) -> dict[str, Any]:
        # Who was erased and how much, never what: the ids and the counts.
        return {"erased": {k: v for k, v in ids.items() if v is not None}, "counts": counts(found),
                "vectors": found.vectors, "events": found.events}

    found = store.erase(owners, dry_run=dry_run, log=Scope(owner.tenant_id), describe=describe)
    per = counts(found)
    total = sum(per.values())
    noun = "memory" if total == 1 else "memories"
    verb = "Would erase" if dry_run else "Erased"
    scrub = found.scrub or {}
    pending = "" if dry_run or scrub.get("complete", True) else "; the store's files still hold the text until it is scrubbed (see store)"
    return {
        "dry_run": dry_run,
        **ids,  # type: ignore[typeddict-item]
        "erased": per,
        "vectors": found.vectors,
        "events": found.events,
        "event": found.seq,
        "store": scrub,
        "message": f"{verb} {total} {noun} and the text of {found.events} event{'' if found.events == 1 else 's'}{pending}",
    }


__all__ = ["counts", "erase"]
