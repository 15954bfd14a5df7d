"""Metadata filters: a small, validated query language over memories.

A filter is a mapping. Each key names a field and maps to a value (equality) or to
an operator mapping; ``AND`` / ``OR`` take lists of filters and ``NOT`` one filter::

    {"category": "food"}                              # metadata.category == "food"
    {"priority": {"gte": 2}}                          # comparison
    {"source": {"in": ["chat", "email"]}}             # membership
    {"OR": [{"category": "food"}, {"kind": "preference"}]}
    {"created_at": {"gte": "2024-01-01T00:00:00Z"}}   # dates as ISO strings

Keys name memory fields (``kind``, ``memory_class``, ``user_id``, ``agent_id``, ``run_id``, ``topic``,
``concept``, ``section``, ``tags``, ``created_at``, ``updated_at``, ``helpful``,
``harmful``, ``importance``) or, for anything else, metadata keys. ``metadata.KEY``
always means the metadata key. Operators: eq, ne, in, nin, gt, gte, lt, lte,
contains (substring of a string, or element of a list), exists. What they mean:

- ``eq`` matches a stored value equal to the one given; a stored list matches when
  the value is one of its elements (a list given compares with the whole list).
  ``ne`` matches exactly what ``eq`` does not (``{"NOT": {key: value}}``): a missing
  key, or a list that does not hold the value.
- ``in`` matches a stored value equal to one of the values given (a stored list: one
  of its elements is); ``nin`` matches exactly what ``in`` does not.
- Values compare as JSON values: a boolean is not a number, so ``true`` never equals
  ``1`` nor ``false`` ``0``, in every operator (``gt``/``gte``/``lt``/``lte`` take
  numbers, strings or dates, and never match a stored boolean); ``1`` equals ``1.0``.
- ``contains`` ignores case wherever it compares text: a substring of a stored string,
  or an element of a stored list (a string element equal but for case; any other
  element equal).
- ``created_at`` and ``updated_at`` compare as results show them: to the
  microsecond (:func:`reported_time`), so a result's own time given as a bound
  equals it, and ``{"created_at": {"lt": last["created_at"]}}`` pages through a
  listing. A memory never updated has its ``created_at`` as ``updated_at``.

:func:`compile_filters` validates the whole filter once and returns a predicate;
malformed filters raise :class:`~memorist.errors.ValidationError` naming the part
that is wrong. Values are JSON data (strings, finite numbers, booleans, null, and
lists of them; datetimes for the date fields): a NaN or an arbitrary object could
never match a stored value, so it is an error rather than an empty result.

What one filter may cost is bounded, because a filter is checked against every
candidate memory: it nests at most :data:`MAX_DEPTH` deep, holds at most
:data:`MAX_NODES` conditions (each comparison, ``AND``/``OR``/``NOT`` and value of
an ``in`` list counts one, as does every value nested in a list or mapping a
condition compares with), and one call spends at most :data:`MAX_CHECKS` units
checking it, about a second of CPU. The units follow what checking costs, measured
(``bench/filter_cost.py``; a unit is about 0.2 µs): a condition checked against one
memory costs :data:`CONDITION` (an ``in``/``nin`` list as one condition however
many plain values it holds, since they are looked up at once; a list or mapping
among them, or in the value of another operator, costs one more per value it
holds), an ``AND``/``OR``/``NOT`` one, each memory checked two, a condition
reading a long text or list one more per 256 characters or list item, and a
``contains`` of a text what looking for it costs (a unit per 1,024 of the text's
length times the needle's, the needle counted at most 100 characters in a text of
2,500 or more, where Python's search is linear). Past either
bound the call fails with a :class:`~memorist.errors.ValidationError` naming
``filters``. The units are also counted on the call's work meter
(:mod:`memorist.work`), which a service uses to charge and to cancel.

An ``OR`` whose branches each compare one key with plain values (``eq`` or
``in``) is checked as one ``in`` of all their values: the same memories, at the
cost of one condition.

A compiled filter also carries its :class:`Narrowing` (:func:`narrowing`): what its
conditions say in a form a store can check in its own query language, so that a
filter keeping a few memories of a large scope is answered from the store's index
of rows instead of by reading every memory. A narrowing keeps every memory the
filter keeps and may keep more; the predicate still decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..model import UNREADABLE_KEY, MemoryRecord
from ..validate import json_value, show, timestamp, unicode
from ..work import charge

Predicate = Callable[[MemoryRecord], bool]

_MISSING = object()
_DATE_FIELDS = {"created_at", "updated_at"}
_RECORD_FIELDS = {
    "kind": lambda r: r.kind.value,
    "memory_class": lambda r: r.memory_class.value,
    "user_id": lambda r: r.scope.user_id or None,
    "agent_id": lambda r: r.scope.agent_id or None,
    "run_id": lambda r: r.scope.run_id or None,
    "topic": lambda r: r.topic or None,
    "concept": lambda r: r.concept or None,
    "section": lambda r: r.section or None,
    "tags": lambda r: list(r.tags),
    "created_at": lambda r: reported_time(r.created_at),
    # A memory never updated reports its created_at as updated_at: filtered so too.
    "updated_at": lambda r: reported_time(r.created_at if r.updated_at is None else r.updated_at),
    "helpful": lambda r: r.helpful,
    "harmful": lambda r: r.harmful,
    "importance": lambda r: r.importance,
}
_OPERATORS = {"eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "contains", "exists"}
#: How deep filters may nest (a NOT, AND or OR, each a level; the filter itself is 1).
MAX_DEPTH = 32
#: The most conditions one filter may hold (comparisons, AND/OR/NOT, list values).
MAX_NODES = 1_000
#: The most units one call may spend checking a filter: about a second of CPU (a unit
#: is about 0.2 µs). A filter of 1,000 comparisons can be checked against 1,250
#: memories, one of 10 against 119,000, one of a single comparison against 833,000.
MAX_CHECKS = 5_000_000
#: What checking one condition against one memory costs, in units.
CONDITION = 4
#: What checking one memory costs besides its conditions (the call), in units.
_PER_MEMORY = 2


def reported_time(seconds: float) -> float:
    """A time as results report it, to the microsecond (their ISO 8601 text), in
    epoch seconds: the number ``to_epoch(from_epoch(seconds))`` gives (rounded half
    to even), for a fifth of its cost.

    A filter compares ``created_at`` and ``updated_at`` so, and its bounds too: a
    stored time (``time.time()``'s) has digits below the microsecond that a result
    does not show, and a result's own time given back as a bound must equal it
    (``eq`` and ``lte`` keep that memory, ``lt`` leaves it out)."""
    if not math.isfinite(seconds):
        return seconds
    whole = math.floor(seconds)
    # (Exact: a whole number of microseconds, divided once.)
    return (int(whole) * 1_000_000 + round((seconds - whole) * 1_000_000)) / 1_000_000


class Filter:
    """A compiled filter: a predicate over memories that counts its cost.

    ``nodes`` is its number of conditions (bounded by :data:`MAX_NODES`); ``cost``
    what checking them against one memory costs in units (see the module's
    docstring). Each call counts on the call's budget of :data:`MAX_CHECKS` before
    it checks: ``cost``, plus the size of the values the conditions read (a
    condition reading a string of 256 characters, or a list of one item, costs one
    more), since comparing with a long text or list is as much work as that. Past
    the budget it raises, before the check that would go over it.
    """

    __slots__ = ("_left", "_predicate", "_reads", "cost", "field", "narrowing", "nodes")

    def __init__(self, predicate: Predicate, state: _State, narrowing: Narrowing | None = None) -> None:
        self._predicate = predicate
        #: What a store can check of this filter in its own queries (None: nothing).
        self.narrowing = narrowing
        self.nodes = state.nodes
        self.cost = state.cost + _PER_MEMORY
        self.field = state.field
        # The fields whose values can be long, each with what reading it costs per item,
        # and the lengths of the texts its 'contains' conditions look for in it.
        self._reads = [
            (_getter(key), n, *state.needles.get(key, (0, 0))) for key, n in state.reads.items() if _can_be_long(key)
        ]
        self._left = MAX_CHECKS

    def __call__(self, record: MemoryRecord) -> bool:
        spent = self.cost
        for read, conditions, needles, capped in self._reads:
            value = read(record)
            if isinstance(value, str):
                n = len(value)
                spent += conditions * (n >> 8)
                if needles:
                    # Looking for a text of m characters in one of n costs up to n x m
                    # steps below 2,500 characters, n x min(m, 100) above (where
                    # Python's search is linear for long texts): bench/filter_cost.py.
                    spent += (n * (needles if n < 2500 else capped)) >> 10
            elif isinstance(value, list | tuple):
                spent += conditions * len(value)
                if needles:  # each text among them casefolded and compared
                    spent += conditions * (sum(len(a) for a in value if isinstance(a, str)) >> 8)
        if spent > self._left:
            raise ValidationError(
                self.field,
                f"this filter of {self.nodes:,} conditions was checked against as many memories (and their values) "
                f"as one call may: {MAX_CHECKS:,} units, about a second of work (a condition costs {CONDITION} "
                "for each memory, a long text or list more); narrow the scope or simplify the filter",
            )
        self._left -= spent
        charge(spent)
        return self._predicate(record)


class _State:
    """What compiling one filter counts: its conditions (with their bound) and the
    fields they read; and, while checking, the casefolding of a text the ``contains``
    conditions share (many conditions on one field fold its value once per memory)."""

    __slots__ = ("_folded", "cost", "field", "needles", "nodes", "reads")

    def __init__(self, field: str) -> None:
        self.field = field
        self.nodes = 0
        self.cost = 0  # units per memory checked
        self.reads: dict[str, int] = {}
        # key -> the lengths of the texts 'contains' looks for in it, summed: whole,
        # and each capped at 100 characters
        self.needles: dict[str, tuple[int, int]] = {}
        self._folded: tuple[str, str] = ("", "")

    def add(self, n: int) -> None:
        self.nodes += n
        if self.nodes > MAX_NODES:
            # Checked while compiling: a filter of a million branches is refused after
            # MAX_NODES of them, not after building them all.
            raise ValidationError(
                self.field,
                f"the filter holds more than {MAX_NODES:,} conditions (each comparison, AND/OR/NOT "
                "and value of an 'in' list, or nested in a value compared with, counts one): split the "
                "query or use 'in' with fewer values",
            )

    def fold(self, text: str) -> str:
        last = self._folded  # one tuple, read and replaced whole
        if last[0] is text:
            return last[1]
        folded = text.casefold()
        self._folded = (text, folded)
        return folded


def compile_filters(filters: Mapping[str, Any] | None, *, field: str = "filters") -> Filter | None:
    """Validate ``filters`` and return a predicate over memories (None for no filter)."""
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise ValidationError(field, f"must be a mapping, got {type(filters).__name__}")
    if not filters:
        return None
    state = _State(field)
    predicate = _compile(filters, field, 1, state)
    return Filter(predicate, state, narrowing(filters))


def _compile(node: Any, path: str, depth: int, count: _State) -> Predicate:
    if not isinstance(node, Mapping) or not node:
        raise ValidationError(path, "each filter must be a non-empty mapping")
    if depth > MAX_DEPTH:
        # Checked before descending: no nesting can reach Python's recursion limit.
        raise ValidationError(path, f"filters nest deeper than {MAX_DEPTH} levels")
    parts: list[Predicate] = []
    for key, value in node.items():
        if not isinstance(key, str) or not key:
            raise ValidationError(path, f"filter keys must be non-empty strings, got {show(key)}")
        # A key that is not valid Unicode names no stored field, and must not end up
        # in the error's field name either.
        unicode(path, key)
        here = f"{path}.{key}"
        upper = key.upper()
        if upper in ("AND", "OR", "NOT"):
            count.add(1)
            count.cost += 1
        if upper in ("AND", "OR"):
            if not isinstance(value, list | tuple) or not value:
                raise ValidationError(here, f"{upper} takes a non-empty list of filters")
            before = (count.cost, dict(count.reads))
            subs = [_compile(v, f"{here}[{i}]", depth + 1, count) for i, v in enumerate(value)]
            values = _one_key_values(value) if upper == "OR" else None
            if values is not None:
                # Checked as one 'in' (validated above, branch by branch, and
                # counted so against MAX_NODES): one condition's cost.
                key, options = values
                count.cost, count.reads = before
                count.cost += CONDITION
                count.reads[key] = count.reads.get(key, 0) + 1
                parts.append(_membership(_getter(key), [_coerce(key, v, here) for v in options], negate=False))
            else:
                parts.append(_all(subs) if upper == "AND" else _any(subs))
        elif upper == "NOT":
            sub = _compile(value, here, depth + 1, count)
            parts.append(lambda r, sub=sub: not sub(r))
        else:
            parts.append(_field_predicate(key, value, here, count))
    return _all(parts)


def _all(preds: list[Predicate]) -> Predicate:
    return preds[0] if len(preds) == 1 else (lambda r: all(p(r) for p in preds))


def _any(preds: list[Predicate]) -> Predicate:
    return lambda r: any(p(r) for p in preds)


#: The record fields whose values can be long (texts a writer chose, the tags); the
#: others are ids, kinds, numbers and dates, as short as their checks.
_LONG_FIELDS = {"topic", "concept", "section", "tags"}


def _can_be_long(key: str) -> bool:
    return key in _LONG_FIELDS or key not in _RECORD_FIELDS


def _getter(key: str) -> Callable[[MemoryRecord], Any]:
    if key.startswith("metadata."):
        name = key[len("metadata.") :]
        return lambda r: r.metadata.get(name, _MISSING)
    if key in _RECORD_FIELDS:
        return _RECORD_FIELDS[key]
    return lambda r: r.metadata.get(key, _MISSING)


def _coerce(key: str, value: Any, path: str) -> Any:
    """Dates given as ISO strings or datetimes compare as epoch seconds, to the
    microsecond (:func:`reported_time`); every other value must be JSON data (see
    the module docstring)."""
    seconds = timestamp(value, field=path) if key in _DATE_FIELDS else None
    if seconds is not None:
        return reported_time(seconds)
    return json_value(path, value)


def _field_predicate(key: str, spec: Any, path: str, count: _State) -> Predicate:
    get = _getter(key)
    if not isinstance(spec, Mapping):
        spec = {"eq": spec}
    if not spec:
        raise ValidationError(path, "operator mapping is empty")
    checks: list[Predicate] = []
    for op, raw in spec.items():
        if op not in _OPERATORS:
            named = isinstance(op, str) and op.isprintable()  # no control character, no surrogate
            raise ValidationError(
                f"{path}.{op}" if named else path, f"unknown operator {show(op)}; use one of {', '.join(sorted(_OPERATORS))}"
            )
        where = f"{path}.{op}"
        nested = _values_in(raw)
        count.add(1 + nested)
        if op in ("in", "nin"):
            if not isinstance(raw, list | tuple | set | frozenset):
                raise ValidationError(where, f"{op} takes a list, got {type(raw).__name__}")
            options = [_coerce(key, v, where) for v in raw]
            # Plain values are looked up at once; lists and mappings compared one by one.
            compound = [o for o in options if _typed(o) is None]
            count.cost += CONDITION + sum(CONDITION + _values_in(o) for o in compound)
            count.reads[key] = count.reads.get(key, 0) + 1 + len(compound)
            checks.append(_membership(get, options, negate=op == "nin"))
            continue
        count.cost += CONDITION + nested
        count.reads[key] = count.reads.get(key, 0) + 1 + nested
        if op == "exists":
            if not isinstance(raw, bool):
                raise ValidationError(where, "exists takes true or false")
            checks.append(lambda r, g=get, want=raw: (g(r) not in (_MISSING, None)) == want)
        elif op == "contains":
            wanted = json_value(where, raw)
            # Folded once here, not per memory checked.
            folded = wanted.casefold() if isinstance(wanted, str) else None
            if folded is not None:
                whole, capped = count.needles.get(key, (0, 0))
                count.needles[key] = (whole + len(folded), capped + min(len(folded), 100))
            checks.append(lambda r, g=get, v=wanted, f=folded, c=count: _contains(g(r), v, f, c.fold))
        else:
            value = _coerce(key, raw, where)
            if op in ("gt", "gte", "lt", "lte") and not _comparable(value):
                raise ValidationError(where, f"{op} takes a number, string or date, got {show(raw)}")
            if op in ("eq", "ne") and _typed(value) is not None:
                # A plain value: what 'in' of it matches, looked up as 'in' does (faster).
                checks.append(_membership(get, [value], negate=op == "ne"))
            else:
                checks.append(_comparison(get, op, value))
    return _all(checks)


def _one_key_values(branches: list[Any] | tuple[Any, ...]) -> tuple[str, list[Any]] | None:
    """The key and values of an OR whose branches (valid ones) each compare that one
    key with plain values, by ``eq`` or ``in``; None for any other OR. An ``eq`` of
    a list or mapping compares the whole value, which an ``in`` does not: such an OR
    stays as it is."""
    key: str | None = None
    values: list[Any] = []
    for branch in branches:
        if len(branch) != 1:
            return None
        ((name, spec),) = branch.items()
        if name.upper() in ("AND", "OR", "NOT") or (key is not None and name != key):
            return None
        key = name
        if not isinstance(spec, Mapping):
            spec = {"eq": spec}
        if len(spec) != 1:  # (several operators: all of them must hold)
            return None
        ((op, raw),) = spec.items()
        given = [raw] if op == "eq" else raw if op == "in" else None
        if given is None or any(_typed(v) is None for v in given):
            return None
        values += given
    return (key, values) if key is not None else None


def _values_in(value: Any) -> int:
    """How many values ``value`` holds at every depth (a list's items, a mapping's values,
    and theirs): comparing a stored value with it walks as far as it goes. Counted
    without recursion, and only up to just past :data:`MAX_NODES` (past it the filter is
    refused anyway)."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            items: Any = item.values()
        elif isinstance(item, list | tuple | set | frozenset):
            items = item
        else:
            continue
        count += len(items)
        if count > MAX_NODES:
            break
        stack.extend(v for v in items if isinstance(v, Mapping | list | tuple | set | frozenset))
    return count


def _comparable(value: Any) -> bool:
    return isinstance(value, int | float | str) and not isinstance(value, bool)


def _equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: Python's ``True == 1`` is not JSON's, so a boolean
    equals only a boolean (in lists and objects too); ``1`` still equals ``1.0``."""
    if type(a) is str:  # the common case, first
        return isinstance(b, str) and a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list | tuple | Mapping) or isinstance(b, list | tuple | Mapping):
        return False
    return bool(a == b)


def _typed(value: Any) -> Any:
    """A key under which equal JSON scalars (and only they) meet in a set: ``True``
    and ``1`` get different keys. None for a list or object (compared one by one)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if value is None or isinstance(value, str):
        return ("text", value)
    return None


def _membership(get: Callable[[MemoryRecord], Any], options: list[Any], *, negate: bool) -> Predicate:
    # Scalars are looked up by their typed key; lists and objects compared one by one.
    keys = {key for key in map(_typed, options) if key is not None}
    compound = [o for o in options if _typed(o) is None]

    def one_of(value: Any) -> bool:
        key = _typed(value)
        if key is not None:
            return key in keys
        return any(_equal(value, o) for o in compound)

    def check(r: MemoryRecord) -> bool:
        actual = get(r)
        if isinstance(actual, list):
            hit = any(one_of(a) for a in actual)
        else:
            hit = actual is not _MISSING and one_of(actual)
        return hit != negate

    return check


def _contains(actual: Any, value: Any, folded: str | None, fold: Callable[[str], str]) -> bool:
    if isinstance(actual, str) and folded is not None:
        return len(folded) <= len(actual) * 3 and folded in fold(actual)  # casefold grows a string at most 3x
    if isinstance(actual, list | tuple):
        if folded is not None:  # text: an element equal to it but for case, as in a string
            return any(isinstance(a, str) and a.casefold() == folded for a in actual)
        return any(_equal(a, value) for a in actual)
    return False


def _equals(actual: Any, value: Any) -> bool:
    """What ``eq`` matches: an equal value, or a list holding it (a list given is
    compared whole)."""
    if actual is _MISSING:
        return False
    if isinstance(actual, list) and not isinstance(value, list):
        return any(_equal(a, value) for a in actual)
    return _equal(actual, value)


def _comparison(get: Callable[[MemoryRecord], Any], op: str, value: Any) -> Predicate:
    def check(r: MemoryRecord) -> bool:
        actual = get(r)
        if op == "eq":
            return _equals(actual, value)
        if op == "ne":
            return not _equals(actual, value)
        if actual is _MISSING or actual is None:
            return False
        # Compare numbers with numbers and strings with strings; anything else
        # simply does not match instead of raising mid-search.
        if isinstance(actual, bool) or not (
            (isinstance(actual, int | float) and isinstance(value, int | float))
            or (isinstance(actual, str) and isinstance(value, str))
        ):
            return False
        if op == "gt":
            return actual > value
        if op == "gte":
            return actual >= value
        if op == "lt":
            return actual < value
        return actual <= value

    return check


# Narrowings ---------------------------------------------------------------------------

#: The memory fields a store keeps in a column of their own, and how a filter names
#: them. The other record fields (``user_id``, ``agent_id``, ``run_id``, ``tags``) are not narrowed.
COLUMN_FIELDS = frozenset({"created_at", "updated_at", "importance", "helpful", "harmful", "kind", "memory_class",
                           "topic", "concept", "section"})

#: The largest integer a narrowing carries (a store's 64-bit integers); a filter
#: comparing with a larger one is not narrowed by that condition.
_INT_RANGE = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Narrowing:
    """A condition every memory a filter keeps meets, in a form a store's query
    language can check (SQL on both backends).

    ``op`` is ``"all"`` or ``"any"`` of ``parts``, or a condition on one field:
    ``key`` names a memory column (:data:`COLUMN_FIELDS`, ``column`` true) or a
    metadata key. On a column, ``"in"`` keeps a value equal to one of ``values``
    and ``"gt"``/``"gte"``/``"lt"``/``"lte"`` compare with ``values[0]``. On a
    metadata key, ``"in"`` keeps a stored value equal to one of ``values`` (strings,
    booleans or numbers) and any stored list; the comparisons keep a stored value of
    the same type (number or string) on that side of ``values[0]``; ``"exists"``
    keeps a value other than null; ``"contains"`` keeps any list, and a string
    holding ``values[0]`` but for case when that is a string. A store may keep
    more than a narrowing says, never less: numbers may compare within a rounding
    error, times (``created_at``; ``updated_at``, or ``created_at`` for a memory
    never updated) within a few microseconds of the stored ones, and a text that is
    not ASCII is kept whatever it holds.
    """

    op: str
    key: str = ""
    column: bool = False
    values: tuple[Any, ...] = ()
    parts: tuple[Narrowing, ...] = ()


#: The most conditions and values a narrowing holds: a store checks them on every
#: row of the scope, so a larger filter is checked memory by memory instead, within
#: the bounds of :data:`MAX_CHECKS`.
MAX_NARROWING = 64


def narrowing(filters: Mapping[str, Any]) -> Narrowing | None:
    """The narrowing of a valid filter (one :func:`compile_filters` took), or None
    when none of its conditions can be checked by a store: the conditions joined by
    AND that can, an OR when each of its branches can; ``NOT``, ``ne``, ``nin``,
    ``exists: false``, and comparisons with null, lists or objects never narrow.
    None too past :data:`MAX_NARROWING` conditions and values."""
    found = _narrowing(filters)
    return found if found is not None and _weight(found) <= MAX_NARROWING else None


def _weight(narrowing: Narrowing) -> int:
    if narrowing.parts:
        return 1 + sum(_weight(part) for part in narrowing.parts)
    return 1 + len(narrowing.values)


def _narrowing(filters: Mapping[str, Any]) -> Narrowing | None:
    parts: list[Narrowing] = []
    for key, value in filters.items():
        upper = key.upper()
        if upper == "AND":
            parts += [part for sub in value if (part := _narrowing(sub)) is not None]
        elif upper == "OR":
            branches = [_narrowing(sub) for sub in value]
            if all(branch is not None for branch in branches):
                parts.append(_any_of(branches))  # type: ignore[arg-type]
        elif upper != "NOT":
            parts += _field_narrowings(key, value)
    return _join("all", parts) if parts else None


def _join(op: str, parts: list[Narrowing]) -> Narrowing:
    return parts[0] if len(parts) == 1 else Narrowing(op, parts=tuple(parts))


def _any_of(branches: list[Narrowing]) -> Narrowing:
    """The narrowing of an OR: one ``"in"`` of all the values when every branch is
    an ``"in"`` of one key (an OR of its values: lighter, and narrowed by the store
    up to :data:`MAX_NARROWING` values), else any of the branches."""
    first = branches[0]
    if all(b.op == "in" and b.key == first.key and b.column == first.column for b in branches):
        # (Deduplicated as JSON values: True is not 1 here.)
        values = tuple({_typed(v): v for b in branches for v in b.values}.values())
        return Narrowing("in", first.key, first.column, values)
    return _join("any", branches)


def _field_narrowings(key: str, spec: Any) -> list[Narrowing]:
    if key.startswith("metadata."):
        name, column = key[len("metadata.") :], False
    elif key in _RECORD_FIELDS:
        if key not in COLUMN_FIELDS:
            return []
        name, column = key, True
    else:
        name, column = key, False
    if not column and name == UNREADABLE_KEY:
        return []  # a row Python could not decode shows its text under this key only
    if not isinstance(spec, Mapping):
        spec = {"eq": spec}
    out: list[Narrowing] = []
    for op, raw in spec.items():
        if op in ("eq", "in"):
            options = raw if op == "in" else [raw]
            values = [_coerce(key, v, key) for v in options]
            if all(_narrowable(v) for v in values):
                out.append(Narrowing("in", name, column, tuple(values)))
        elif op in ("gt", "gte", "lt", "lte"):
            value = _coerce(key, raw, key)
            if _narrowable(value) and not isinstance(value, bool):
                out.append(Narrowing(op, name, column, (value,)))
        elif op == "exists" and raw is True and not column:
            out.append(Narrowing("exists", name))
        elif op == "contains" and not column:
            out.append(Narrowing("contains", name, values=(raw,)))
    return out


def _narrowable(value: Any) -> bool:
    """A value a store compares as the filter does: a string (with no NUL, where
    SQLite's JSON functions end a string), a boolean, or a number its integers hold."""
    if isinstance(value, int) and not isinstance(value, bool):
        return -_INT_RANGE <= value <= _INT_RANGE
    if isinstance(value, str):
        return "\x00" not in value
    return isinstance(value, bool | float)
