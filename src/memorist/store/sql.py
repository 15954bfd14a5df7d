"""SQL that every SQL backend runs the same: the filters of a scope and of validity.

Both engines name their tables and columns alike (``memories m``, ``spaces s``,
``events e``); only the parameter mark differs (``?`` for sqlite3, ``%s`` for
psycopg), so each builder takes it. Values always travel as parameters.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import LEARNING_KINDS, MINUTE_KINDS
from ..policies.filters import Narrowing
from .base import ScopeFilter
from .codec import COLUMNS, FROM_MEMORIES

__all__ = [
    "COLUMNS", "COMPARISONS", "FROM_MEMORIES", "NUMBER_SLACK", "JsonDialect", "active_hash_sql", "event_scope_where",
    "metadata_where", "narrowed_ids_sql", "narrowing_where", "number_bounds", "scope_where", "user_counts_sql", "validity_where",
]


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


#: The memory columns a narrowing compares with numbers, and those it compares with text.
_NUMBER_COLUMNS = frozenset({"created_at", "updated_at", "importance", "helpful", "harmful"})
_TEXT_COLUMNS = frozenset({"kind", "memory_class", "topic", "concept", "section"})
#: The number columns holding whole numbers (64-bit integers), and their range.
_WHOLE_COLUMNS = frozenset({"helpful", "harmful"})
_WHOLE_RANGE = 2**63 - 1
#: The time columns: a filter compares their values to the microsecond, as results
#: show them (:func:`memorist.policies.filters.reported_time`), and a memory never
#: updated with its ``created_at`` as ``updated_at``.
_TIME_COLUMNS = {"created_at": "m.created_at", "updated_at": "COALESCE(m.updated_at, m.created_at)"}
#: How far a narrowing widens a bound on a time column, in seconds: a stored time and
#: the one a filter compares differ by half a microsecond and a float's rounding at
#: most (under a microsecond together up to 2242; a later time holds no digit below
#: the microsecond). The column itself is compared, with its index, and the filter
#: decides.
_TIME_SLACK = 2e-6
#: How far apart two numbers a narrowing compares may be and still count as equal:
#: a store reading a number from its JSON text may round it otherwise than Python.
NUMBER_SLACK = 1e-9

Condition = tuple[str, list[Any]]


def number_bounds(value: float) -> tuple[float, float]:
    """The numbers a store should count as equal to ``value`` when it reads numbers
    from JSON text (:data:`NUMBER_SLACK` either side, and never past the largest
    float: a bound must stay a number the engine can compare with)."""
    slack = abs(value) * NUMBER_SLACK
    return max(value - slack, -sys.float_info.max), min(value + slack, sys.float_info.max)


#: A narrowing's comparison operators in SQL.
COMPARISONS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


@dataclass(frozen=True, slots=True)
class JsonDialect:
    """How one engine reads a metadata key, for :func:`metadata_where`.

    ``path`` turns a key into the parameter the engine names it by (None: it cannot
    name it); ``value``, ``text`` and ``kind`` are the SQL of the key's value (as
    JSON, or as the engine compares it), of its value as text, and of its JSON type,
    each taking that parameter once; ``string`` and ``numbers`` are the engine's names
    of those JSON types; ``boolean`` is the condition that the key holds the boolean
    ``{b}``; ``number`` is the SQL of a number parameter in ``value``'s terms, and
    ``number_arg`` that parameter; ``collate`` orders text by code point (and makes
    ``lower`` change ASCII letters only); ``octets`` is the length in UTF-8 bytes of
    the text ``{t}``. ``rows``
    joins what the expressions read to ``memories m`` (nothing when they read the
    column itself), and ``unparsed`` is the condition of a row the engine could not
    parse, kept for the filter to decide (empty: none is ever kept so)."""

    path: Callable[[str], str | None]
    value: str
    text: str
    kind: str
    string: str
    numbers: str
    boolean: str
    number: str
    number_arg: Callable[[float], Any]
    collate: str
    mark: str
    octets: str
    rows: str = ""
    unparsed: str = ""


#: The most characters of a ``contains`` needle a narrowing looks for (see metadata_where).
LIKE_CHARS = 32


def metadata_where(narrowing: Narrowing, dialect: JsonDialect) -> Condition | None:
    """A narrowing's condition on a metadata key (``"in"``, a comparison, ``"exists"``,
    ``"contains"``) in an engine's JSON functions; None when the engine cannot name
    the key."""
    key = dialect.path(narrowing.key)
    if key is None:
        return None
    d, mark = dialect, dialect.mark
    if narrowing.op == "in":
        said: list[str] = [f"{d.kind} = 'array'"]
        args: list[Any] = [key]
        texts = [v for v in narrowing.values if isinstance(v, str)]
        if texts:
            said.append(f"({d.kind} = '{d.string}' AND {d.text} IN ({', '.join([mark] * len(texts))}))")
            args += [key, key, *texts]
        for v in narrowing.values:
            if isinstance(v, bool):
                said.append(d.boolean.format(b="true" if v else "false"))
                args.append(key)
            elif isinstance(v, int | float):
                low, high = number_bounds(v)
                said.append(f"({d.kind} IN ({d.numbers}) AND {d.value} BETWEEN {d.number} AND {d.number})")
                args += [key, key, d.number_arg(low), d.number_arg(high)]
        return "(" + " OR ".join(said) + ")", args
    if narrowing.op in COMPARISONS:
        (v,) = narrowing.values
        if isinstance(v, str):
            return f"({d.kind} = '{d.string}' AND {d.text}{d.collate} {COMPARISONS[narrowing.op]} {mark})", [key, key, v]
        low, high = number_bounds(v)
        below = narrowing.op.startswith("l")
        bound = d.number_arg(high if below else low)
        return f"({d.kind} IN ({d.numbers}) AND {d.value} {'<=' if below else '>='} {d.number})", [key, key, bound]
    if narrowing.op == "exists":
        return f"{d.kind} <> 'null'", [key]
    if narrowing.op == "contains":
        needle = narrowing.values[0]
        if not isinstance(needle, str):
            return f"{d.kind} = 'array'", [key]
        # A text contains the needle ignoring case as Python's casefold says. For an
        # ASCII text that is its lower case holding the needle's casefold (never, when
        # that is not ASCII); a text that is not ASCII (or holds a NUL, where SQLite's
        # text functions stop) is kept for the filter to decide. Only the casefold's
        # first LIKE_CHARS are looked for (a text holding it holds them): a LIKE
        # costs the text's length times the pattern's, and is not metered.
        folded = needle.casefold()
        said = f"{d.octets.format(t=d.text)} <> length({d.text})"
        args: list[Any] = [key, key, key, key]
        if folded.isascii():
            escaped = folded[:LIKE_CHARS].replace("!", "!!").replace("%", "!%").replace("_", "!_")
            said += f" OR lower({d.text}{d.collate}) LIKE {mark} ESCAPE '!'"
            args += [key, f"%{escaped}%"]
        return f"({d.kind} = 'array' OR ({d.kind} = '{d.string}' AND ({said})))", args
    return None


def narrowing_where(narrowing: Narrowing, dialect: JsonDialect) -> Condition | None:
    """The condition on ``memories m`` that keeps every memory ``narrowing`` keeps
    (:class:`~memorist.policies.filters.Narrowing`), or None when nothing of it can
    be said, in the engine's terms (``dialect``; its ``collate`` orders text as
    Python does, code point by code point). A part of an AND that cannot be said is
    left out (the rest still narrows); an OR with such a branch cannot be said."""
    if narrowing.op in ("all", "any"):
        parts = [narrowing_where(part, dialect) for part in narrowing.parts]
        if narrowing.op == "any" and any(part is None for part in parts):
            return None
        said = [part for part in parts if part is not None]
        if not said:
            return None
        joiner = " AND " if narrowing.op == "all" else " OR "
        return "(" + joiner.join(sql for sql, _ in said) + ")", [arg for _, args in said for arg in args]
    if not narrowing.column:
        return metadata_where(narrowing, dialect)
    return _column_where(narrowing, dialect.mark, dialect.collate)


def narrowed_ids_sql(
    scope: ScopeFilter, narrowing: Narrowing, dialect: JsonDialect, *, cutoff: float | None, now: float, limit: int
) -> Condition | None:
    """The query of :meth:`~memorist.store.base.Store.narrowed_ids`: the ids of the
    scope's active memories, valid at ``now`` and effective since ``cutoff``, that
    ``narrowing`` keeps, newest first, one more than ``limit`` at most (so that the
    caller sees there were more); None when nothing of the narrowing can be said."""
    said = narrowing_where(narrowing, dialect)
    if said is None:
        return None
    where, args = scope_where(scope, dialect.mark)
    valid, valid_args = validity_where(cutoff, now, dialect.mark)
    condition = f"({dialect.unparsed} OR {said[0]})" if dialect.unparsed else said[0]
    sql = (f"SELECT m.id {FROM_MEMORIES}{dialect.rows} WHERE {where} AND m.status = 'active'{valid} AND {condition} "
           f"ORDER BY m.created_at DESC, m.rowid DESC LIMIT {dialect.mark}")
    return sql, [*args, *valid_args, *said[1], limit + 1]


def _column_where(narrowing: Narrowing, mark: str, collate: str) -> Condition:
    column = _TIME_COLUMNS.get(narrowing.key, "m." + narrowing.key)
    # A filter compares numbers with numbers and text with text: a value of the
    # other type never matches, and is left out (an engine may refuse to compare it).
    if narrowing.key in _NUMBER_COLUMNS:
        values = [v for v in narrowing.values if isinstance(v, int | float) and not isinstance(v, bool)]
    else:
        values = [v for v in narrowing.values if isinstance(v, str)]
    op = narrowing.op
    if narrowing.key in _WHOLE_COLUMNS:
        # Whole numbers compared as whole numbers: an engine comparing a 64-bit
        # integer with a float as two floats would round large counts.
        if op == "in":
            values = [int(v) for v in values if float(v).is_integer() and abs(v) <= _WHOLE_RANGE]
        elif values:
            v = values[0]
            if abs(v) > _WHOLE_RANGE:  # past every stored count
                return ("1 = 1" if (v > 0) == (op in ("lt", "lte")) else "1 = 0"), []
            # x > 2.5 is x > 2 and x >= 2.5 is x >= 3 for a whole x (and alike below).
            values = [math.floor(v) if op in ("gt", "lte") else math.ceil(v)]
    if op == "in":
        if not values:
            return "1 = 0", []
        if narrowing.key in _TIME_COLUMNS:
            ranges = " OR ".join([f"{column} BETWEEN {mark} AND {mark}"] * len(values))
            return f"({ranges})", [bound for v in values for bound in (v - _TIME_SLACK, v + _TIME_SLACK)]
        return f"{column} IN ({', '.join([mark] * len(values))})", values
    if not values:
        return "1 = 0", []
    if narrowing.key in _TIME_COLUMNS:
        below = op in ("lt", "lte")
        return f"{column} {'<=' if below else '>='} {mark}", [values[0] + (_TIME_SLACK if below else -_TIME_SLACK)]
    order = collate if narrowing.key in _TEXT_COLUMNS else ""
    return f"{column}{order} {COMPARISONS[op]} {mark}", values


#: How each engine reads a key of an event's JSON payload (``{key}``) as text.
SQLITE_JSON = "json_extract(e.payload, '$.{key}')"
POSTGRES_JSON = "(e.payload::jsonb ->> '{key}')"
#: The payloads :func:`changed_by_run_sql` reads (a LIKE pattern, as a parameter).
TURN_NAMED = '%"turn_event"%'


def changed_by_run_sql(mark: str, spaces: str, *, json: str) -> str:
    """The ids of the memories of other runs that a turn of one run changed or deleted:
    events of the spaces (``spaces``: the condition on ``space_id``, its marks given
    twice) outside the run whose payload names a ``turn`` event of the run (a validity
    renewal, bookkeeping, writes no text of it). Parameters: the spaces, the run,
    :data:`TURN_NAMED`, the spaces, the run."""
    turn, bookkeeping = json.format(key="turn_event"), json.format(key="bookkeeping")
    return (
        "SELECT DISTINCT e.memory_id FROM events e "
        f"WHERE e.space_id {spaces} AND e.run_id <> {mark} AND e.memory_id IS NOT NULL "
        f"AND e.payload LIKE {mark} "
        f"AND {bookkeeping} IS NULL AND CAST({turn} AS BIGINT) IN "
        f"(SELECT t.seq FROM events t WHERE t.space_id {spaces} AND t.run_id = {mark} AND t.op = 'turn')"
    )


#: The lineage key of the runs (other than its own) whose turns changed a memory: it
#: travels with the memory through an export, which carries no event.
CHANGED_BY_RUNS = "changed_by_runs"


def lineage_changed_by_run_sql(mark: str, spaces: str, *, postgres: bool) -> str:
    """The ids of the memories of the spaces (``spaces``: the condition on
    ``space_id``) whose lineage lists the run among those that changed them
    (:data:`CHANGED_BY_RUNS`): found so in a store they were imported into, whose log
    holds no turn of that run. Parameters: the spaces, the run."""
    if postgres:  # (% doubled: psycopg reads the rest as placeholders)
        named = f"m.lineage LIKE '%%{CHANGED_BY_RUNS}%%'"
        holds = f"COALESCE(m.lineage::jsonb -> '{CHANGED_BY_RUNS}', '[]'::jsonb) ? {mark}"
    else:
        named = f"m.lineage LIKE '%{CHANGED_BY_RUNS}%'"
        holds = f"EXISTS (SELECT 1 FROM json_each(m.lineage, '$.{CHANGED_BY_RUNS}') r WHERE r.value = {mark})"
    # (the LIKE first: the JSON of the few memories that name any such run is read)
    return f"SELECT m.id FROM memories m WHERE m.space_id {spaces} AND {named} AND {holds}"


def consolidated_into_sql(ids: str, *, postgres: bool) -> str:
    """The memories that those of ``ids`` (the condition on ``m.id``) were consolidated
    into (their lineage names it), one row each (NULL: none)."""
    into = "(m.lineage::jsonb ->> 'consolidated_into')" if postgres else "json_extract(m.lineage, '$.consolidated_into')"
    return f"SELECT {into} FROM memories m WHERE m.id {ids}"


def with_consolidations(found: Sequence[str], into: Callable[[list[str]], list[str | None]]) -> list[str]:
    """``found`` and, over and over, the memories they were consolidated into (``into``
    reads those of some ids): a merged memory holds its sources' words."""
    out = list(dict.fromkeys(found))
    seen, frontier = set(out), out
    while frontier:
        frontier = [m for m in dict.fromkeys(into(frontier)) if m and m not in seen]
        seen.update(frontier)
        out += frontier
    return out


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


#: The users of the store with a memory that is not deleted in one of their spaces:
#: an erased user's spaces keep their rows (their events' tombstones name them) but
#: no memory, and one whose every memory was deleted keeps only its history; neither
#: is counted.
USERS_SQL = (
    "SELECT count(DISTINCT s.user_id) FROM spaces s WHERE s.user_id <> '' "
    "AND EXISTS (SELECT 1 FROM memories x WHERE x.space_id = s.id AND x.status <> 'deleted')"
)


def stats_scope(tenant_id: str | None, mark: str) -> tuple[Callable[..., str], tuple[str, ...]]:
    """The condition a store's stats put on their rows (``of(alias)``: a row of
    ``memories`` or ``events``; ``of(alias, space=True)``: a row of ``spaces``) and its
    arguments: every row, or the rows of ``tenant_id``'s spaces (once per condition)."""
    if tenant_id is None:
        return (lambda _alias, space=False: "TRUE"), ()

    def of(alias: str, space: bool = False) -> str:
        if space:
            return f"{alias}.tenant_id = {mark}"
        return f"{alias}.space_id IN (SELECT id FROM spaces WHERE tenant_id = {mark})"

    return of, (tenant_id,)


def user_counts_sql(
    tenant_id: str, *, now: float, cutoff: float | None, only: str | None, limit: int, mark: str = "?", agent: str | None = None
) -> tuple[str, list[Any]]:
    """Each user of a tenant with the number of its memories (facts: not its playbook
    bullets, learning objects or minutes) that are active, valid at ``now`` and
    effective since ``cutoff`` (users with none count 0), by user id; with ``agent``,
    the users of that agent's spaces, counting that agent's memories. A user whose
    spaces hold no memory at all (erased) is not listed."""
    sql = (
        "SELECT s.user_id, count(m.id) FROM spaces s LEFT JOIN memories m ON m.space_id = s.id"
        f" AND m.status = 'active' AND {FACTS_ONLY} AND (m.valid_to IS NULL OR m.valid_to > {mark})"
        f" AND COALESCE(m.updated_at, m.created_at) >= {mark}"
        f" WHERE s.tenant_id = {mark} AND s.user_id <> ''"
        # A space an erasure emptied keeps its row (its events' tombstones name it):
        # its user is no longer listed.
        " AND EXISTS (SELECT 1 FROM memories x WHERE x.space_id = s.id)"
    )
    args: list[Any] = [now, cutoff if cutoff is not None else float("-inf"), tenant_id]
    if only is not None:
        sql += f" AND s.user_id = {mark}"
        args.append(only)
    if agent is not None:
        sql += f" AND s.agent_id = {mark}"
        args.append(agent)
    sql += f" GROUP BY s.user_id ORDER BY s.user_id LIMIT {mark}"
    args.append(limit)
    return sql, args


# relation tuples ------------------------------------------------------------------------
#: The columns of a relation tuple, in :class:`memorist.model.RelationTuple`'s order.
RELATION_COLUMNS = "subject_type, subject_id, relation, object_type, object_id, created_at"
_TUPLE_KEY = "tenant_id = {m} AND subject_type = {m} AND subject_id = {m} AND relation = {m} AND object_type = {m} AND object_id = {m}"


def relation_insert_sql(mark: str = "?") -> str:
    """Insert a tuple unless it is there (the caller reads the row count)."""
    marks = ", ".join([mark] * 7)
    return f"INSERT INTO relations (tenant_id, {RELATION_COLUMNS}) VALUES ({marks}) ON CONFLICT DO NOTHING"


def relation_delete_sql(mark: str = "?") -> str:
    return "DELETE FROM relations WHERE " + _TUPLE_KEY.format(m=mark)


def relations_sql(
    tenant_id: str,
    *,
    subjects: Any = None,
    relations: Any = None,
    objects: Any = None,
    object_like: Any = None,
    limit: int,
    mark: str = "?",
) -> tuple[str, list[Any]]:
    """The tuples of a tenant whose subject is one of ``subjects``, relation one of
    ``relations`` and object one of ``objects`` (each a sequence; None: any), in a
    stable order, at most ``limit``. ``object_like``: ``(object_type, pattern)`` pairs,
    ``pattern`` a LIKE pattern escaped with a backslash (one must match; SQLite's LIKE
    ignores ASCII case, so a caller that needs an exact match checks the rows)."""
    where = [f"tenant_id = {mark}"]
    args: list[Any] = [tenant_id]
    for columns, values in ((("subject_type", "subject_id"), subjects), (("object_type", "object_id"), objects)):
        if values is None:
            continue
        values = list(values)
        if not values:
            where.append("1 = 0")
            continue
        pairs = " OR ".join(f"({columns[0]} = {mark} AND {columns[1]} = {mark})" for _ in values)
        where.append(f"({pairs})")
        for kind, ident in values:
            args += [kind, ident]
    if object_like is not None:
        likes = list(object_like)
        pairs = " OR ".join(f"(object_type = {mark} AND object_id LIKE {mark} ESCAPE '\\')" for _ in likes)
        where.append(f"({pairs})" if likes else "1 = 0")
        for kind, pattern in likes:
            args += [kind, pattern]
    if relations is not None:
        relations = list(relations)
        where.append(f"relation IN ({', '.join([mark] * len(relations))})" if relations else "1 = 0")
        args += relations
    sql = (f"SELECT {RELATION_COLUMNS} FROM relations WHERE {' AND '.join(where)} "
           f"ORDER BY object_type, object_id, relation, subject_type, subject_id LIMIT {mark}")
    args.append(int(limit))
    return sql, args


def relation_row(relation: Any) -> tuple[Any, ...]:
    """A :class:`memorist.model.RelationTuple`'s values in :data:`RELATION_COLUMNS` order."""
    return (relation.subject_type, relation.subject_id, relation.relation, relation.object_type, relation.object_id,
            float(relation.created_at))


def relation_payload(relation: Any) -> dict[str, Any]:
    """What the event log keeps of a tuple's change."""
    return {"subject": [relation.subject_type, relation.subject_id], "relation": relation.relation,
            "object": [relation.object_type, relation.object_id]}
