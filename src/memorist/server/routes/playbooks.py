"""The learning loop's versioned playbooks (``/api/playbooks/``): the strategies the loop
curates, their versions and rollbacks, under the same keys and tenants.

A playbook is an agent's, a user's, the tenant's or everyone's (``scope``). A key bound
to a user reads its user's, the tenant's and everyone's, and another user's when a
relation or the playbook's visibility shares it (404 otherwise, as for a missing user);
it writes its user's, and another's or the tenant's only as an editor or owner (403 for
a viewer; a tenant key writes any). A key bound to an agent does the same as that
agent (with a user too: as that pair).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse

from ...relations import Target
from ...validate import MAX_LIMIT
from .. import schemas as s
from ..deps import ERRORS, Reach, ReachDep
from .params import path_id, query_id

router = APIRouter()
_API: dict[str, Any] = {
    "responses": {**ERRORS, 403: {"model": s.ErrorResponse, "description": "A user-bound key writing a tenant or global playbook."}},
    "tags": ["playbooks"],
}
NamePath = path_id("The playbook's name.")


def _scope_query() -> Any:
    return Query(None, pattern="^(agent|user|tenant|global)$")


def _writable(reach: Reach, name: str, scope: str | None) -> None:
    """A key bound to one user writes the tenant's or everyone's playbooks only as an
    editor or owner of that playbook."""
    if scope in ("tenant", "global"):
        subject = reach.subject()
        if subject is not None:
            ref = reach.memory.learning.ref(name, None, None, scope)
            if subject.may(Target("", "", ref.name, ref.label), True)[1]:
                return
        reach.tenant(f"{scope} playbooks", field="scope")


@router.get("/api/playbooks/", response_model=s.PlaybookList, summary="Playbooks of a scope", **_API)
def list_playbooks(reach: ReachDep, user_id: str = query_id("user"), agent_id: str = query_id("agent"),
                   scope: str = _scope_query()) -> Any:
    """The playbooks of a scope, without their strategies."""
    return JSONResponse({"results": reach.scope(user_id=user_id, agent_id=agent_id).learning.list_playbooks(scope=scope)})


@router.get("/api/playbooks/{name}/", response_model=s.PlaybookItem, summary="A playbook", **_API)
def get_playbook(reach: ReachDep, name: str = NamePath, user_id: str = query_id("user"),
                 agent_id: str = query_id("agent"), scope: str = _scope_query()) -> Any:
    """A playbook with its strategies by category, best first (one never written: empty, version 0)."""
    return JSONResponse(reach.playbook(name, user_id=user_id, agent_id=agent_id, scope=scope).learning.get_playbook(name, scope=scope))


@router.put("/api/playbooks/{name}/", response_model=s.PlaybookItem, summary="Update a playbook", **_API)
def update_playbook(body: s.UpdatePlaybookRequest, reach: ReachDep, name: str = NamePath) -> Any:
    """Add strategies (merged into similar ones), or replace the playbook's (``merge: false``)."""
    _writable(reach, name, body.scope)
    learning = reach.playbook(name, user_id=body.user_id, agent_id=body.agent_id, scope=body.scope).learning
    playbook_id = learning.update_playbook(body.strategies, name, body.merge, scope=body.scope, major=body.major)
    return JSONResponse({**learning.get_playbook(name, scope=body.scope), "playbook_id": playbook_id})


@router.post("/api/playbooks/{name}/curate/", response_model=s.CurationResponse, summary="Curate reflections into a playbook", **_API)
def curate_playbook(body: s.CuratePlaybookRequest, reach: ReachDep, name: str = NamePath) -> Any:
    """The reflections' patterns become strategies: ``{"added", "updated", "removed"}``."""
    _writable(reach, name, body.scope)
    learning = reach.playbook(name, user_id=body.user_id, agent_id=body.agent_id, scope=body.scope).learning
    return JSONResponse(learning.curate_playbook(body.reflections, name, scope=body.scope))


@router.get("/api/playbooks/{name}/versions/", response_model=s.VersionList, summary="A playbook's versions", **_API)
def playbook_versions(reach: ReachDep, name: str = NamePath, user_id: str = query_id("user"),
                      agent_id: str = query_id("agent"), scope: str = _scope_query()) -> Any:
    """The versions kept (latest 5, every major one, the last 90 days), oldest first."""
    learning = reach.playbook(name, user_id=user_id, agent_id=agent_id, scope=scope).learning
    return JSONResponse({"results": learning.list_playbook_versions(name, scope=scope)})


@router.get("/api/playbooks/{name}/versions/{version}/", response_model=s.PlaybookItem, summary="One version of a playbook", **_API)
def playbook_version(reach: ReachDep, name: str = NamePath, version: int = PathParam(ge=1, le=MAX_LIMIT),
                     user_id: str = query_id("user"), agent_id: str = query_id("agent"), scope: str = _scope_query()) -> Any:
    """A kept version, with its strategies."""
    learning = reach.playbook(name, user_id=user_id, agent_id=agent_id, scope=scope).learning
    return JSONResponse(learning.get_playbook_version(name, version, scope=scope))


@router.delete("/api/playbooks/{name}/", response_model=s.DeletedPlaybook, summary="Delete a playbook", **_API)
def delete_playbook(reach: ReachDep, name: str = NamePath, user_id: str = query_id("user"),
                    agent_id: str = query_id("agent"), scope: str = _scope_query()) -> Any:
    """Delete the playbook with its strategies and versions (an unknown one: 404; a
    bound key deletes another's, or the tenant's, only as its owner: 403 otherwise)."""
    _writable(reach, name, scope)
    learning = reach.playbook(name, user_id=user_id, agent_id=agent_id, scope=scope).learning
    return JSONResponse(learning.delete_playbook(name, scope=scope))


@router.post("/api/playbooks/{name}/rollback/", response_model=s.CurationResponse, summary="Roll a playbook back", **_API)
def rollback_playbook(body: s.RollbackRequest, reach: ReachDep, name: str = NamePath) -> Any:
    """A new (major) version equal to ``version``."""
    _writable(reach, name, body.scope)
    learning = reach.playbook(name, user_id=body.user_id, agent_id=body.agent_id, scope=body.scope).learning
    return JSONResponse(learning.rollback_playbook(name, body.version, scope=body.scope))


__all__ = ["router"]
