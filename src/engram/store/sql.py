"""SQL that every SQL backend runs the same: the filters of a scope and of validity.

Both engines name their tables and columns alike (``memories m``, ``spaces s``,
``events e``); only the parameter mark differs (``?`` for sqlite3, ``%s`` for
psycopg), so each builder takes it. Values always travel as parameters.
"""

from __future__ import annotations

from typing import Any

from .base import ScopeFilter
from .codec import COLUMNS, FROM_MEMORIES

__all__ = ["COLUMNS", "FROM_MEMORIES", "event_scope_where", "scope_where", "validity_where"]


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
