"""Memorist as LangGraph's long-term store: :class:`MemoristStore`, a
``langgraph.store.base.BaseStore``.

A LangGraph app that compiles its graph with ``store=MemoristStore(memory)`` keeps
its long-term items in Memorist: each item is one memory, found by Memorist's hybrid
search (vectors and BM25 fused) and as durable as the store it lives in.

Namespaces map onto scopes. The first label of a namespace is the user (the scope's
``user_id``); the store's ``agent_id`` (``"langgraph"`` by default) is the agent; the
labels after the first, the key and the value are kept with the memory. So
``("sam", "facts")`` and ``("sam", "preferences")`` are two namespaces of the user
``sam``, and ``memory.search(..., user_id="sam", agent_id="langgraph")`` sees their
items too. A memory of that scope written without the store (``memory.add(...,
user_id="sam", agent_id="langgraph")``) is an item of the namespace ``("sam",)``,
its key its id and its value ``{"text": ...}``.

- ``put`` stores the value; the memory's text is the value's text at the item's
  ``index`` paths (LangGraph's path syntax), else its ``"text"`` (or ``"content"``,
  ``"memory"``) string, else every string in the value. A
  ``put`` with ``value=None`` deletes the item. ``index=False`` keeps the item out of
  searches by ``query`` (it is still listed and read by key).
- ``search(prefix, query=..., filter=...)``: with a query, Memorist's ranking, each
  result's ``score`` its similarity to the query; without, newest first. ``filter``
  takes LangGraph's operators (``$eq $ne $gt $gte $lt $lte``, nested mappings). A
  search with a filter ranks at most :data:`MAX_SCAN` candidates, so no request costs
  unbounded work.
- ``list_namespaces`` with prefix / suffix conditions (``"*"`` matches any label),
  ``max_depth``, ``limit``, ``offset``.

Labels are stored as a list, never joined, so ops given to ``batch`` directly may
hold periods (a user id such as ``"sam.lee@example.com"``); LangGraph's own ``put`` /
``get`` / ``search`` refuse them before any store sees them.

``memory`` is anything with Memorist's memory calls: a :class:`~memorist.Memory`, or a
:class:`~memorist.Client` of a served Memorist. The store has no TTL
(``supports_ttl`` is False); Memorist's own validity window (``decay_days``) still
applies.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
    from langgraph.store.base.embed import get_text_at_path, tokenize_path
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "memorist.integrations.langgraph needs LangGraph: pip install 'memorist[agent]'"
    ) from exc

from ..errors import NotFoundError, ValidationError
from ..validate import MAX_LIMIT

#: The most candidates a search with a ``filter`` ranks before filtering.
MAX_SCAN = 10_000
#: The agent id of the store's memories.
DEFAULT_AGENT = "langgraph"

_NS = "lg_namespace"  # the labels after the first
_KEY = "lg_key"
_VALUE = "lg_value"
_NOINDEX = "lg_noindex"
_DEPTH = "lg_depth"


def _prefix_key(n: int) -> str:
    return f"lg_p{n}"


def _check_namespace(namespace: Any, *, empty_ok: bool = False) -> tuple[str, ...]:
    if not isinstance(namespace, tuple | list):
        raise InvalidNamespaceError(f"a namespace is a tuple of strings, got {type(namespace).__name__}")
    namespace = tuple(namespace)
    if not namespace and not empty_ok:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError(f"Namespace labels must be non-empty strings, got {label!r} in {namespace}")
        if "\x00" in label:
            raise InvalidNamespaceError(f"Namespace label {label!r} in {namespace} contains a NUL byte")
    return namespace


def _path(labels: Sequence[str]) -> str:
    """A namespace (or a prefix of one) as one metadata value: a JSON list, so no label
    can pass for two, whatever characters it holds."""
    return json.dumps(list(labels), ensure_ascii=False)


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _texts(v)]
    return []


def _matches(item_value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics (those of its in-memory and PostgreSQL stores)."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(item_value, op, v) for op, v in wanted.items())
        return isinstance(item_value, Mapping) and all(_matches(item_value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(item_value, list | tuple) and len(item_value) == len(wanted)
                and all(_matches(a, b) for a, b in zip(item_value, wanted, strict=True)))
    return item_value == wanted


def _operator(value: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return value == wanted
    if op == "$ne":
        return value != wanted
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(wanted)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValidationError("filter", f"unsupported operator {op!r}; use $eq, $ne, $gt, $gte, $lt or $lte")


def _when(text: Any) -> datetime:
    return datetime.fromisoformat(text) if isinstance(text, str) else text


class MemoristStore(BaseStore):
    """A LangGraph ``BaseStore`` over a Memorist memory (see the module docstring).

    >>> from memorist import Memory
    >>> store = MemoristStore(Memory(":memory:", embedder="hashing"))
    >>> store.put(("sam", "facts"), "pets", {"text": "Has a cat named Miso"})
    >>> store.get(("sam", "facts"), "pets").value
    {'text': 'Has a cat named Miso'}
    >>> [i.key for i in store.search(("sam",), query="cat")]
    ['pets']
    """

    supports_ttl = False

    def __init__(self, memory: Any, *, agent_id: str = DEFAULT_AGENT, index_fields: Sequence[str] | None = None) -> None:
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise ValidationError("agent_id", f"must be a non-empty string, got {agent_id!r}")
        self.memory = memory
        self.agent_id = agent_id
        self.index_fields = list(index_fields) if index_fields else None

    # the operations ------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; each result at its op's place (None for a put)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValidationError("op", f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (Memorist's calls block)."""
        return await asyncio.to_thread(self.batch, list(ops))

    # helpers -------------------------------------------------------------------------------
    def _scope(self, user: str | None) -> dict[str, Any]:
        return {"user_id": user, "agent_id": self.agent_id} if user else {"agent_id": self.agent_id}

    def _prefix_filter(self, namespace: tuple[str, ...]) -> dict[str, Any] | None:
        return {_prefix_key(len(namespace)): _path(namespace)} if len(namespace) >= 2 else None

    def _find(self, namespace: tuple[str, ...], key: str) -> dict[str, Any] | None:
        if len(namespace) == 1 and not key.startswith(_KEY):
            # A memory of the scope written without the store: its key is its id.
            try:
                row = self.memory.get(key, **self._scope(namespace[0]))
            except (NotFoundError, ValidationError):
                row = None
            if row is not None and _KEY not in (row.get("metadata") or {}):
                return row
        filters = {_DEPTH: len(namespace), _KEY: key, **(self._prefix_filter(namespace) or {})}
        rows = self.memory.get_all(**self._scope(namespace[0]), filters=filters, limit=1)["results"]
        return rows[0] if rows else None

    @staticmethod
    def _namespace_of(row: Mapping[str, Any]) -> tuple[str, ...]:
        meta = row.get("metadata") or {}
        return (row["user_id"], *meta.get(_NS, ())) if _KEY in meta else (row["user_id"],)

    def _item(self, row: Mapping[str, Any], cls: type = Item, **extra: Any) -> Any:
        meta = row.get("metadata") or {}
        if _KEY in meta:
            key, value = meta[_KEY], meta.get(_VALUE, {})
        else:
            key, value = row["id"], {"text": row["memory"]}
        return cls(namespace=self._namespace_of(row), key=key, value=value,
                   created_at=_when(row["created_at"]), updated_at=_when(row["updated_at"]), **extra)

    def _text(self, value: Mapping[str, Any], index: Sequence[str] | None) -> str:
        fields = list(index) if index else self.index_fields
        if fields:
            parts = [t for f in fields for t in (get_text_at_path(value, tokenize_path(f)) if f != "$" else [json.dumps(value)])]
        else:
            main = next((value[k] for k in ("text", "content", "memory") if isinstance(value.get(k), str)), None)
            parts = [main] if main else _texts(value)
        text = "\n".join(p for p in parts if isinstance(p, str) and p.strip())
        return text or json.dumps(value, ensure_ascii=False, sort_keys=True)

    # get / put ----------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Item | None:
        namespace = _check_namespace(op.namespace)
        row = self._find(namespace, op.key)
        return None if row is None else self._item(row)

    def _put(self, op: PutOp) -> None:
        namespace = _check_namespace(op.namespace)
        if not isinstance(op.key, str) or not op.key:
            raise ValidationError("key", f"must be a non-empty string, got {op.key!r}")
        row = self._find(namespace, op.key)
        scope = self._scope(namespace[0])
        if op.value is None:
            if row is not None:
                self.memory.delete(row["id"], **scope)
            return
        if not isinstance(op.value, Mapping):
            raise ValidationError("value", f"must be a dict, got {type(op.value).__name__}")
        value = dict(op.value)
        text = self._text(value, op.index if isinstance(op.index, list) else None)
        if row is not None and _KEY not in (row.get("metadata") or {}):
            # A memory written without the store: its text is what the store may change.
            self.memory.update(row["id"], str(value.get("text", text)), None, **scope)
            return
        meta: dict[str, Any] = {_KEY: op.key, _VALUE: value, _NS: list(namespace[1:]), _DEPTH: len(namespace),
                                _NOINDEX: op.index is False}
        for n in range(2, len(namespace) + 1):
            meta[_prefix_key(n)] = _path(namespace[:n])
        if row is None:
            self.memory.add(text, **scope, metadata=meta, infer=False)
        else:
            self.memory.update(row["id"], text, meta, **scope)

    # search -------------------------------------------------------------------------------
    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = _check_namespace(op.namespace_prefix, empty_ok=True)
        for name, value in (("limit", op.limit), ("offset", op.offset)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(name, f"must be a whole number >= 0, got {value!r}")
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise ValidationError("filter", f"must be a mapping, got {type(op.filter).__name__}")
        if op.limit == 0:
            return []
        want = op.offset + op.limit
        scan = min(MAX_SCAN, MAX_LIMIT) if op.filter else want
        filters = self._prefix_filter(prefix)
        scope = self._scope(prefix[0] if prefix else None)
        if op.query:
            qfilters = {**(filters or {}), _NOINDEX: {"ne": True}}
            rows = self.memory.search(op.query, **scope, limit=scan, filters=qfilters)["results"]
        else:
            rows = self.memory.get_all(**scope, limit=scan, filters=filters)["results"]
        items = []
        for row in rows:
            item = self._item(row, SearchItem, score=row.get("similarity") if op.query else None)
            if op.filter and not all(_matches(item.value.get(k), v) for k, v in op.filter.items()):
                continue
            items.append(item)
            if len(items) >= want:
                break
        return items[op.offset: want]

    # namespaces ---------------------------------------------------------------------------
    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions: Sequence[MatchCondition] = op.match_conditions or ()
        for c in conditions:
            _check_namespace(tuple(label for label in c.path if label != "*"), empty_ok=True)
        user = None
        for c in conditions:
            if c.match_type == "prefix" and c.path and c.path[0] != "*":
                user = c.path[0]
        rows = self.memory.get_all(**self._scope(user), limit=MAX_LIMIT)["results"]
        found: set[tuple[str, ...]] = set()
        for row in rows:
            ns = self._namespace_of(row)
            if all(_condition(c, ns) for c in conditions):
                found.add(ns[: op.max_depth] if op.max_depth is not None else ns)
        return sorted(found)[op.offset: op.offset + op.limit]


def _condition(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path, strict=False) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path), strict=False)
    if condition.match_type not in ("prefix", "suffix"):
        raise ValidationError("match_type", f"must be 'prefix' or 'suffix', got {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


__all__ = ["DEFAULT_AGENT", "MAX_SCAN", "MemoristStore"]
