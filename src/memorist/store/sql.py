"""SQL that every SQL backend runs the same: the filters of a scope and of validity.

Both engines name their tables and columns alike (``memories m``, ``spaces s``,
``events e``); only the parameter mark differs (``?`` for sqlite3, ``%s`` for
psycopg), so each builder takes it. Values always travel as parameters.
"""

from __future__ import annotations

from typing import Any

from ..model import LEARNING_KINDS, MINUTE_KINDS
from .base import ScopeFilter
from .codec import COLUMNS, FROM_MEMORIES

__all__ = ["COLUMNS", "FROM_MEMORIES", "active_hash_sql", "event_scope_where", "scope_where", "user_counts_sql", "validity_where"]


def scope_where(scope: ScopeFilter, mark: str = "?") -> tuple[str, list[Any]]:
    """The condition on ``memories m JOIN spaces s`` that keeps ``scope``'s rows."""
    sql = f"s.tenant_id = {mark}"
    args: list[Any] = [scope.tenant_id]
    for column, value in (("s.user_id", scope.user_id), ("s.agent_id", scope.agent_id), ("m.run_id", scope.run_id)):
        if value is not None:
            sql += f" AND {column} = {mark}"
            args.append(value)
    return sql, args


def event_scope_where(where: str, args: list[Any], scope: ScopeFilter | None, mark: str = "?") -> tuple[str, list[Any]]:
    """Narrow an events query (aliases ``e`` and ``s``) to a scope."""
    if scope is None:
        return where, args
    where += f" AND s.tenant_id = {mark}"
    args = [*args, scope.tenant_id]
    for column, value in (("s.user_id", scope.user_id), ("s.agent_id", scope.agent_id), ("e.run_id", scope.run_id)):
        if value is not None:
            where += f" AND {column} = {mark}"
            args.append(value)
    return where, args


def validity_where(cutoff: float | None, now: float | None, mark: str = "?") -> tuple[str, list[Any]]:
    """`` AND …`` keeping memories effective since ``cutoff`` and still valid at ``now``."""
    sql, args = "", []
    if cutoff is not None:
        sql += f" AND COALESCE(m.updated_at, m.created_at) >= {mark}"
        args.append(cutoff)
    if now is not None:
        sql += f" AND (m.valid_to IS NULL OR m.valid_to > {mark})"
        args.append(now)
    return sql, args


def active_hash_sql(mark: str = "?") -> str:
    """The id of an active memory of one space (tenant, user, agent) with a content
    hash; its parameters are the space's three ids and the hash."""
    return (
        "SELECT m.id FROM memories m JOIN spaces s ON s.id = m.space_id "
        f"WHERE s.tenant_id = {mark} AND s.user_id = {mark} AND s.agent_id = {mark} "
        f"AND m.content_hash = {mark} AND m.status = 'active' LIMIT 1"
    )


#: The condition on ``m`` that keeps facts only (:func:`memorist.model.is_fact`): no
#: playbook bullet, no learning object, no minute.
FACTS_ONLY = "m.section = '' AND m.kind NOT IN ({})".format(
    ", ".join(f"'{k.value}'" for k in sorted(LEARNING_KINDS | MINUTE_KINDS, key=lambda k: k.value))
)


def user_counts_sql(
    tenant_id: str, *, now: float, cutoff: float | None, only: str | None, limit: int, mark: str = "?"
) -> tuple[str, list[Any]]:
    """Each user of a tenant with the number of its memories (facts: not its playbook
    bullets, learning objects or minutes) that are active, valid at ``now`` and
    effective since ``cutoff`` (users with none count 0), by user id."""
    sql = (
        "SELECT s.user_id, count(m.id) FROM spaces s LEFT JOIN memories m ON m.space_id = s.id"
        f" AND m.status = 'active' AND {FACTS_ONLY} AND (m.valid_to IS NULL OR m.valid_to > {mark})"
        f" AND COALESCE(m.updated_at, m.created_at) >= {mark}"
        f" WHERE s.tenant_id = {mark} AND s.user_id <> ''"
    )
    args: list[Any] = [now, cutoff if cutoff is not None else float("-inf"), tenant_id]
    if only is not None:
        sql += f" AND s.user_id = {mark}"
        args.append(only)
    sql += f" GROUP BY s.user_id ORDER BY s.user_id LIMIT {mark}"
    args.append(limit)
    return sql, args
