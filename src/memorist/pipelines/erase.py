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

from ..model import ERASED_CAPABILITIES, EraseResult, RelationTuple, Scope, erased_capability
from ..policies import relations as rules
from ..store.base import Erased, ScopeFilter, Store
from .tiers import TEST_MARK, test_tenant


def counts(erased: Erased) -> dict[str, int]:
    """The memories erased per capability (every capability named, 0 when none)."""
    out = dict.fromkeys(ERASED_CAPABILITIES, 0)
    for (tenant, kind, bullet), n in erased.memories.items():
        out[erased_capability(kind, bullet, tenant.endswith(TEST_MARK))] += n
    return out


#: How many relation tuples one read of an erasure takes (it reads again until none is
#: left); a dry run counts up to DRY_RUN_RELATIONS of them.
RELATIONS_PAGE = 1000
DRY_RUN_RELATIONS = 100_000


def owned_relations(store: Store, owner: ScopeFilter, *, limit: int = RELATIONS_PAGE) -> list[RelationTuple]:
    """The relation tuples that speak of ``owner`` (at most ``limit``): those whose
    subject it is (a lone user or agent: its grants and group memberships) and those on
    its memory scopes and playbooks (what it shared). A run has no tuples of its own."""
    if owner.run_id is not None:
        return []
    user, agent = owner.user_id or "", owner.agent_id or ""
    subjects = rules.owner_subjects(user, agent)
    found = store.relations(owner.tenant_id, subjects=subjects, limit=limit) if subjects else []
    patterns = rules.owner_object_patterns(user, agent)
    # The LIKE read is a superset (SQLite's ignores ASCII case: ``user:ALEX`` for
    # ``user:alex``): while tuples of others fill it, it is read again, larger, until
    # the owner's are found or the read is exhausted. An erasure never stops short.
    fetch = limit
    while True:
        on = store.relations(owner.tenant_id, object_like=patterns, limit=fetch)
        owned = [r for r in on if rules.names_owned(r.object_type, r.object_id, user, agent)]
        if len(owned) >= limit or len(on) < fetch:
            break
        fetch *= 2
    found += [r for r in owned if r not in found]
    return found[:limit]


def _remove_relations(store: Store, owner: ScopeFilter, *, dry_run: bool) -> int:
    """Remove (``dry_run``: count, up to :data:`DRY_RUN_RELATIONS`) the tuples that speak of ``owner``."""
    if dry_run:
        return len(owned_relations(store, owner, limit=DRY_RUN_RELATIONS))
    removed = 0
    while batch_of := owned_relations(store, owner):
        with store.transaction() as batch:
            for relation in batch_of:
                removed += bool(batch.remove_relation(owner.tenant_id, relation))
    return removed


def erase(store: Store, owner: ScopeFilter, *, dry_run: bool = False) -> EraseResult:
    """Erase what ``owner`` owns (see :meth:`memorist.Memory.erase`)."""
    owners = [owner, dataclasses.replace(owner, tenant_id=test_tenant(owner.tenant_id))]
    ids = {"user_id": owner.user_id, "agent_id": owner.agent_id, "run_id": owner.run_id}
    # The tuples go first, so that the store's scrub below also clears their pages.
    relations = _remove_relations(store, owner, dry_run=dry_run)

    def describe(found: Erased) -> dict[str, Any]:
        # Who was erased and how much, never what: the ids and the counts.
        return {"erased": {k: v for k, v in ids.items() if v is not None}, "counts": {**counts(found), "relations": relations},
                "vectors": found.vectors, "events": found.events}

    found = store.erase(owners, dry_run=dry_run, log=Scope(owner.tenant_id), describe=describe)
    per = {**counts(found), "relations": relations}
    total = sum(n for name, n in per.items() if name != "relations")
    noun = "memory" if total == 1 else "memories"
    verb = "Would erase" if dry_run else "Erased"
    scrub = found.scrub or {}
    shared = f", {relations} relation tuple{'' if relations == 1 else 's'}" if relations else ""
    pending = "" if dry_run or scrub.get("complete", True) else "; the store's files still hold the text until it is scrubbed (see store)"
    return {
        "dry_run": dry_run,
        **ids,  # type: ignore[typeddict-item]
        "erased": per,
        "vectors": found.vectors,
        "events": found.events,
        "event": found.seq,
        "store": scrub,
        "message": f"{verb} {total} {noun}{shared} and the text of {found.events} event{'' if found.events == 1 else 's'}{pending}",
    }


__all__ = ["DRY_RUN_RELATIONS", "RELATIONS_PAGE", "counts", "erase", "owned_relations"]
