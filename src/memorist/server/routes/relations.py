"""Sharing through relation tuples (``/api/relations/``).

A tenant key is the tenant's administrator: it creates, deletes, lists and checks any
tuple of its tenant. A key bound to a user (an agent, or both) acts as that subject: it
shares what it owns (its scopes and playbooks) or holds ``owner`` of, lists its own tuples and those
of what it manages, and checks its own access (403 otherwise). Tenants never cross:
every tuple is the key's tenant's.

Subjects and objects are ``"type:id"`` in the query (``agent:agent_b``,
``playbook:agent_a/default``, ``scope:user:alex``), and that or ``[type, id]`` in a body.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from ...validate import MAX_LIMIT
from .. import schemas as s
from ..deps import ERRORS, Reach, ReachDep

router = APIRouter()
_API: dict[str, Any] = {
    "responses": {**ERRORS, 403: {"model": s.ErrorResponse, "description": "A key whose user does not manage the object."}},
    "tags": ["relations"],
}


def _relations(reach: Reach) -> Any:
    subject = reach.subject()
    return reach.memory.relations if subject is None else subject.relations


def _pair(what: str, required: bool = True) -> Any:
    return Query(... if required else None, min_length=3, max_length=2048, description=f"The {what}, as 'type:id'.")


@router.post("/api/relations/", response_model=s.RelationChange, summary="Share: create a relation tuple", **_API)
def create_relation(body: s.RelationRequest, reach: ReachDep) -> Any:
    """Grant ``subject`` the ``relation`` on ``object``; effective on the next request."""
    return JSONResponse(_relations(reach).create(body.subject, body.relation, body.object))


@router.delete("/api/relations/", response_model=s.RelationChange, summary="Revoke a relation tuple", **_API)
def delete_relation(reach: ReachDep, subject: str = _pair("subject"), relation: str = Query(..., max_length=16),
                    object: str = _pair("object")) -> Any:  # noqa: A002
    """Remove a tuple; the next request no longer has it."""
    return JSONResponse(_relations(reach).delete(subject, relation, object))


@router.get("/api/relations/", response_model=s.RelationList, summary="Relation tuples", **_API)
def list_relations(reach: ReachDep, subject: str = _pair("subject", False), relation: str = Query(None, max_length=16),
                   object: str = _pair("object", False), limit: int = Query(100, ge=1, le=MAX_LIMIT)) -> Any:  # noqa: A002
    """The tuples, filtered by subject, relation and object."""
    return JSONResponse(_relations(reach).list(subject=subject, relation=relation, object=object, limit=limit))


@router.get("/api/relations/check/", response_model=s.RelationCheck, summary="Check a subject's access", **_API)
def check_relation(reach: ReachDep, subject: str = _pair("subject"), relation: str = Query(..., max_length=16),
                   object: str = _pair("object")) -> Any:  # noqa: A002
    """Whether the subject may act as ``relation`` on the object now, and ``via`` what."""
    return JSONResponse(_relations(reach).check(subject, relation, object))


__all__ = ["router"]
