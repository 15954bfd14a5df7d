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

One item per (namespace, key), as in LangGraph's stores, also under concurrent
writes: the store's writes of one key are serialised in the process (threads,
``abatch``, parallel graph nodes), and several processes sharing one store (a SQLite
file, a PostgreSQL database, a served Memorist) converge on one copy: should two of
them add the same key at once, the copy created last is the item, every write makes
sure its value ends in that copy, and each write, ``get`` and delete removes the other
copies (a delete removes every copy).

Values are kept as JSON, as LangGraph's PostgreSQL store keeps them (tuples become
lists, non-string keys strings; NaN, NUL and lone surrogates are kept); the limits
that remain (the first label is a Memorist user id; keys and labels hold no NUL or
lone surrogate; a value's size; its nesting, at most :data:`MAX_VALUE_DEPTH` levels and
no cycle) are checked here first and named ``namespace``, ``key`` or ``value``
(docs/integrations.md lists them).

``memory`` is anything with Memorist's memory calls: a :class:`~memorist.Memory`, or a
:class:`~memorist.Client` of a served Memorist. The store has no TTL
(``supports_ttl`` is False); Memorist's own validity window (``decay_days``) still
applies.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
import unicodedata
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

from .. import validate
from ..errors import NotFoundError, ValidationError
from ..reserved import STORE_ITEM_KEY
from ..validate import MAX_LIMIT

#: The most candidates a search with a ``filter`` ranks before filtering.
MAX_SCAN = 10_000
#: The agent id of the store's memories.
DEFAULT_AGENT = "langgraph"
#: The most levels of dicts and lists a value nests (the value itself is the first):
#: Python's JSON encoder and decoder recurse once per level, and its default recursion
#: limit (1,000) leaves them about 990; this leaves the caller's stack room for 100 frames.
MAX_VALUE_DEPTH = 900
#: The most copies of one key read at once (more only after concurrent writes of
#: several processes; the extra ones are removed as they are found).
MAX_COPIES = 100
# How often a write starts again when a concurrent write of another process moved
# its item (each round ends with the value in the newest copy, or the item deleted).
_ROUNDS = 8

_NS = "lg_namespace"  # the labels after the first
_KEY = STORE_ITEM_KEY
_VALUE = "lg_value"  # the value, when it is metadata Memorist takes as it is
_JSON = "lg_json"  # else the value as JSON text
_TEXT_AT = "lg_text_at"  # the value's field that is the memory's text (a large value)
_NOINDEX = "lg_noindex"
_DEPTH = "lg_depth"

# The store's writes of one (agent, namespace, key) are serialised in the process by
# one of these locks (a fixed set, shared by every store of the process).
_LOCKS = tuple(threading.Lock() for _ in range(64))


def _lock(agent: str, namespace: tuple[str, ...], key: str) -> threading.Lock:
    return _LOCKS[hash((agent, namespace, key)) % len(_LOCKS)]


def _prefix_key(n: int) -> str:
    return f"lg_p{n}"


def _storable(name: str, text: str) -> str | None:
    """Why ``text`` cannot be stored as text (a NUL, a lone surrogate), or None."""
    try:
        validate.unicode(name, text)
    except ValidationError as exc:
        return str(exc).split(": ", 1)[1]
    return None


def _check_namespace(namespace: Any, *, empty_ok: bool = False) -> tuple[str, ...]:
    if not isinstance(namespace, tuple | list):
        raise InvalidNamespaceError(f"a namespace is a tuple of strings, got {type(namespace).__name__}")
    namespace = tuple(namespace)
    if not namespace and not empty_ok:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError(f"Namespace labels must be non-empty strings, got {label!r} in {namespace}")
        why = _storable("namespace", label)
        if why:
            raise InvalidNamespaceError(f"namespace: the label {validate.show(label)} {why}")
    return namespace


def _not_a_user(label: str) -> str | None:
    """Why ``label``, a namespace's first label, cannot be a Memorist user id, or None."""
    try:
        validate.scope_id("user_id", label)
    except ValidationError as exc:
        return f"namespace: its first label is a Memorist user id, and {validate.show(label)} {str(exc).split(': ', 1)[1]}"
    return None


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise ValidationError("key", f"must be a non-empty string, got {validate.show(key)}")
    return key


def _path(labels: Sequence[str]) -> str:
    """A namespace (or a prefix of one) as one metadata value: a JSON list, so no label
    can pass for two, whatever characters it holds."""
    return json.dumps(list(labels), ensure_ascii=False)


def _texts(value: Any) -> list[str]:
    """Every string in ``value``, in order (walked without recursion)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, Mapping):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
    return found


def _check_shape(value: Mapping[str, Any], max_bytes: int) -> None:
    """Refuse, before anything else reads it, a value JSON cannot hold: one that holds
    itself, that nests deeper than :data:`MAX_VALUE_DEPTH`, or that has more dicts,
    lists and values than ``max_bytes`` of JSON and a main text hold (each takes a byte
    at least). Walked without recursion, so no value raises ``RecursionError``."""
    inside: set[int] = set()  # the dicts and lists the walk is in
    stack: list[tuple[Any, int, bool]] = [(value, 1, True)]
    seen = 0
    while stack:
        item, depth, entering = stack.pop()
        if not entering:
            inside.discard(id(item))
            continue
        seen += 1
        if seen > max_bytes + 1:
            raise ValidationError("value", f"is larger than {max_bytes:,} bytes as JSON")
        if not isinstance(item, Mapping | list | tuple):
            continue
        if id(item) in inside:
            raise ValidationError("value", "must be JSON data (dicts, lists, strings, numbers, booleans, None): "
                                           "Circular reference detected")
        if depth > MAX_VALUE_DEPTH:
            raise ValidationError("value", f"nests too deep to be stored as JSON: more than {MAX_VALUE_DEPTH} "
                                           "levels of dicts and lists")
        inside.add(id(item))
        stack.append((item, depth, False))
        stack.extend((v, depth + 1, True) for v in (item.values() if isinstance(item, Mapping) else item))


def _as_json(value: Any) -> str:
    """``value`` as JSON text Memorist can store (NUL and lone surrogates escaped)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise ValidationError("value", "nests too deep to be stored as JSON") from None
    except (TypeError, ValueError) as exc:
        raise ValidationError("value", f"must be JSON data (dicts, lists, strings, numbers, booleans, None): {exc}") from None
    if _storable("value", text):  # a lone surrogate: \\uXXXX escapes instead
        text = json.dumps(value, separators=(",", ":"))
    return text


def _searchable(text: str, max_chars: int) -> str:
    """``text`` as a memory's text: NUL dropped, a lone surrogate replaced (U+FFFD), at
    most ``max_chars`` characters (the value keeps the rest, only unsearched)."""
    if _storable("text", text):
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text.replace("\x00", ""))
    return text[:max_chars]


def _dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` when it can, else :func:`_as_json`."""
    try:
        text = json.dumps(value, **options)
    except (TypeError, ValueError, RecursionError):
        return _as_json(value)
    return text if not _storable("value", text) else _as_json(value)


def _blank(text: str) -> bool:
    return not any(not (c.isspace() or unicodedata.category(c) in ("Cc", "Cf")) for c in text)


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


def _identity(namespace: Any, row: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """``(namespace, key)`` of a row, ``(namespace, ("id", memory id))`` for a memory
    the store did not key, or None for a row that is no item (no namespace, or a key
    that is not a string)."""
    if namespace is None:
        return None
    meta = row.get("metadata") or {}
    if _KEY not in meta:
        return namespace, ("id", row["id"])
    return (namespace, meta[_KEY]) if isinstance(meta[_KEY], str) else None


def _age(row: Mapping[str, Any]) -> tuple[datetime, str]:
    """The order of the copies of one key: the copy created last (then the greatest
    id) is the item, in every process that sees them."""
    return _when(row["created_at"]), str(row["id"])


def _check_memory(memory: Any) -> None:
    """Refuse at once what the store cannot use (it failed on its first operation):
    it calls a synchronous, unscoped memory (its async methods run those calls in a
    thread), with each item's namespace as the user."""
    from ..api import Scoped

    if isinstance(memory, Scoped):
        raise ValidationError("memory", "must be a Memory or a Client, not a scoped handle: the store takes each item's "
                              "user from its namespace; pass the Memory the handle came from")
    calls = [getattr(memory, name, None) for name in ("add", "get_all", "search", "update", "delete")]
    if not all(callable(call) for call in calls):
        raise ValidationError("memory", f"must be a Memory or a Client, got {type(memory).__name__}")
    if any(inspect.iscoroutinefunction(call) for call in calls):
        raise ValidationError("memory", f"must be a synchronous Memory or Client, got {type(memory).__name__}: the store's "
                              "async methods run its calls in a thread; pass Memory (or Client) instead of AsyncMemory (or AsyncClient)")


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
        _check_memory(memory)
        self.memory = memory
        self.agent_id = agent_id
        self.index_fields = list(index_fields) if index_fields else None
        config = getattr(memory, "config", None)  # a Client's service has its own: the defaults

        def setting(name: str, default: int) -> int:
            value = getattr(config, name, default)
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default

        self._max_depth = setting("max_metadata_depth", validate.METADATA_DEPTH)
        self._max_bytes = setting("max_metadata_bytes", validate.METADATA_BYTES)
        self._max_chars = setting("max_message_chars", 100_000)

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

    def _unscoped(self, namespace: tuple[str, ...], key: str) -> dict[str, Any] | None:
        """The memory of the scope written without the store that ``key`` names (its id)."""
        if len(namespace) != 1 or key.startswith(_KEY):
            return None
        try:
            row = self.memory.get(key, **self._scope(namespace[0]))
        except (NotFoundError, ValidationError):
            return None
        return row if row is not None and _KEY not in (row.get("metadata") or {}) else None

    def _copies(self, namespace: tuple[str, ...], key: str) -> list[dict[str, Any]]:
        """The store's memories of (namespace, key), the item first (see :func:`_age`):
        one, but for a moment after concurrent writes of several processes."""
        filters = {_DEPTH: len(namespace), _KEY: key, **(self._prefix_filter(namespace) or {})}
        rows = self.memory.get_all(**self._scope(namespace[0]), filters=filters, limit=MAX_COPIES)["results"]
        return sorted((r for r in rows if self._namespace_of(r) == namespace), key=_age, reverse=True)

    def _drop(self, rows: Iterable[Mapping[str, Any]], scope: Mapping[str, Any]) -> None:
        for row in rows:
            with contextlib.suppress(NotFoundError):  # removed by another process meanwhile
                self.memory.delete(row["id"], **scope)

    @staticmethod
    def _namespace_of(row: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The namespace of a memory, or None for one that is no item of the store (no
        user; store metadata that is not the store's shape)."""
        user = row.get("user_id")
        if not isinstance(user, str) or not user:
            return None
        meta = row.get("metadata") or {}
        if _KEY not in meta:
            return (user,)
        rest = meta.get(_NS, [])
        if not isinstance(meta[_KEY], str) or not isinstance(rest, list) or not all(isinstance(x, str) and x for x in rest):
            return None
        return (user, *rest)

    @staticmethod
    def _value_of(row: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = row.get("metadata") or {}
        if _KEY not in meta:
            return {"text": row["memory"]}
        value: Any = meta.get(_VALUE, {})
        if isinstance(meta.get(_JSON), str):
            try:
                value = json.loads(meta[_JSON])
            except ValueError:
                return None
        if not isinstance(value, dict):
            return None
        at = meta.get(_TEXT_AT)
        if isinstance(at, str):
            value[at] = row["memory"]
        return value

    def _item(self, row: Mapping[str, Any], cls: type = Item, **extra: Any) -> Any:
        """``row`` as an item, or None for a memory that is no item of the store."""
        namespace, value = self._namespace_of(row), self._value_of(row)
        ident = _identity(namespace, row)
        if ident is None or value is None:
            return None
        key = ident[1] if isinstance(ident[1], str) else row["id"]
        return cls(namespace=namespace, key=key, value=value,
                   created_at=_when(row["created_at"]), updated_at=_when(row["updated_at"]), **extra)

    def _text(self, value: Mapping[str, Any], index: Sequence[str] | None) -> str:
        fields = list(index) if index else self.index_fields
        if fields:
            parts = [t for f in fields for t in (get_text_at_path(value, tokenize_path(f)) if f != "$" else [_dumps(value)])]
        else:
            main = next((value[k] for k in ("text", "content", "memory") if isinstance(value.get(k), str)), None)
            parts = [main] if main else _texts(value)
        text = _searchable("\n".join(p for p in parts if isinstance(p, str) and p.strip()), self._max_chars)
        return text if not _blank(text) else _searchable(_dumps(value, ensure_ascii=False, sort_keys=True), self._max_chars)

    def _meta(self, namespace: tuple[str, ...], key: str, value: dict[str, Any], text: str, noindex: bool) -> dict[str, Any]:
        """The metadata of an item, within Memorist's metadata limits; the value as
        metadata when Memorist takes it as it is, else as JSON text, and when that is
        too large, without the field that is the memory's text."""
        meta: dict[str, Any] = {_KEY: key, _NS: list(namespace[1:]), _DEPTH: len(namespace), _NOINDEX: noindex,
                                _VALUE: None, _JSON: None, _TEXT_AT: None}
        for n in range(2, len(namespace) + 1):
            meta[_prefix_key(n)] = _path(namespace[:n])
        base = self._size(meta)
        if base > self._max_bytes // 2:
            name = "key" if len(key.encode("utf-8", "replace")) > base // 2 else "namespace"
            raise ValidationError(name, f"is too large: the key and the namespace's labels may take at most "
                                        f"{self._max_bytes // 2:,} bytes as JSON, these take {base:,}")
        at = next((k for k, v in value.items() if isinstance(k, str) and v == text), None)
        for elided in (None, at) if at is not None else (None,):
            stored = {**value, elided: None} if elided is not None else value
            try:  # as metadata when Memorist takes it as it is (deep, NaN, NUL... it does not)
                fields = {_VALUE: validate.json_value("value", stored, max_depth=self._max_depth - 1, max_bytes=self._max_bytes)}
            except ValidationError:
                fields = {_JSON: _as_json(stored)}
            candidate = {**meta, **fields, _TEXT_AT: elided}
            size = self._size(candidate)
            if size <= self._max_bytes:
                return candidate
        limit = self._max_bytes - base
        raise ValidationError("value", f"is {size - base:,} bytes as JSON; the limit is {limit:,} (a value's "
                                       f"main text, 'text' or 'content', may be longer: up to {self._max_chars:,} characters)")

    @staticmethod
    def _size(meta: Mapping[str, Any]) -> int:
        return len(json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))

    # get / put ----------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Item | None:
        namespace, key = _check_namespace(op.namespace), _check_key(op.key)
        if _storable("key", key) or _not_a_user(namespace[0]):
            return None  # such an item is never stored
        row = self._unscoped(namespace, key)
        if row is None:
            copies = self._copies(namespace, key)
            if len(copies) > 1:  # left by concurrent writes of several processes
                with _lock(self.agent_id, namespace, key):
                    copies = self._copies(namespace, key)
                    self._drop(copies[1:], self._scope(namespace[0]))
            row = copies[0] if copies else None
        return None if row is None else self._item(row)

    def _put(self, op: PutOp) -> None:
        namespace, key = _check_namespace(op.namespace), _check_key(op.key)
        if op.value is None:
            if not (_storable("key", key) or _not_a_user(namespace[0])):  # else never stored
                with _lock(self.agent_id, namespace, key):
                    self._delete(namespace, key)
            return
        why = _not_a_user(namespace[0])
        if why:
            raise InvalidNamespaceError(why)
        why = _storable("key", key)
        if why:
            raise ValidationError("key", f"{why} (a key is matched by Memorist's metadata filters, which refuse it)")
        if not isinstance(op.value, Mapping):
            raise ValidationError("value", f"must be a dict, got {type(op.value).__name__}")
        value = dict(op.value)
        _check_shape(value, self._max_bytes)
        text = self._text(value, op.index if isinstance(op.index, list) else None)
        scope = self._scope(namespace[0])
        with _lock(self.agent_id, namespace, key):
            row = self._unscoped(namespace, key)
            if row is not None:
                # A memory written without the store: its text is what the store may change.
                main = value.get("text")
                main = _searchable(main, self._max_chars) if isinstance(main, str) else ""
                self._write(self.memory.update, row["id"], main if not _blank(main) else text, None, **scope)
                return
            meta = self._meta(namespace, key, value, text, op.index is False)
            self._write_item(namespace, key, text, meta, scope)

    def _write(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """``call``, its refusal of the memory's text or metadata named as the value's."""
        try:
            return call(*args, **kwargs)
        except ValidationError as exc:
            if exc.field.split(".")[0].split("[")[0] in ("messages", "text", "metadata"):
                raise ValidationError("value", f"cannot be stored: {exc}") from None
            raise

    def _write_item(self, namespace: tuple[str, ...], key: str, text: str, meta: dict[str, Any], scope: dict[str, Any]) -> None:
        """Leave the value in the item's one copy. Within the process the key's lock
        makes this the only write of it; another process may add a copy at the same
        moment: then the copy created last is the item, and whichever write sees two
        copies leaves its value in that one and removes the others."""
        for _ in range(_ROUNDS):
            copies = self._copies(namespace, key)
            if copies:
                try:
                    self._write(self.memory.update, copies[0]["id"], text, meta, **scope)
                except NotFoundError:  # deleted meanwhile by another process: look again
                    continue
                # A copy another process adds from now on comes from a write at the
                # same time as this one, which may come after it: nothing to check.
                self._drop(copies[1:], scope)
                return
            fresh = {k: v for k, v in meta.items() if v is not None}  # None only overwrites an update's old fields
            added = self._write(self.memory.add, text, **scope, metadata=fresh, infer=False)["results"]
            if not added:
                raise ValidationError("value", "was not stored")
            mine = added[0]["id"]
            after = self._copies(namespace, key)
            if not after:
                return  # a delete of another process came after this write
            if after[0]["id"] == mine:
                self._drop(after[1:], scope)
                return
            # Another process added a newer copy meanwhile: the value goes there.

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        scope = self._scope(namespace[0])
        row = self._unscoped(namespace, key)
        if row is not None:
            self._drop([row], scope)
            return
        for _ in range(_ROUNDS):
            copies = self._copies(namespace, key)
            self._drop(copies, scope)
            if len(copies) < MAX_COPIES:
                return

    # search -------------------------------------------------------------------------------
    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = _check_namespace(op.namespace_prefix, empty_ok=True)
        for name, value in (("limit", op.limit), ("offset", op.offset)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(name, f"must be a whole number >= 0, got {value!r}")
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise ValidationError("filter", f"must be a mapping, got {type(op.filter).__name__}")
        if op.limit == 0 or (prefix and _not_a_user(prefix[0])):
            return []  # no item has such a first label
        if op.offset >= MAX_LIMIT:
            return []  # past the most a search reads: nothing there (as LangGraph's own stores answer)
        want = min(op.offset + op.limit, MAX_LIMIT)
        scan = min(MAX_SCAN, MAX_LIMIT) if op.filter else want
        filters = self._prefix_filter(prefix)
        scope = self._scope(prefix[0] if prefix else None)
        if op.query:
            qfilters = {**(filters or {}), _NOINDEX: {"ne": True}}
            rows = self.memory.search(op.query, **scope, limit=scan, filters=qfilters)["results"]
        else:
            rows = self.memory.get_all(**scope, limit=scan, filters=filters)["results"]
        # One item per key: of copies left by concurrent writes, the newest (see _age).
        newest: dict[tuple[Any, ...], Mapping[str, Any]] = {}
        for row in rows:
            ident = _identity(self._namespace_of(row), row)
            if ident is not None and (ident not in newest or _age(row) > _age(newest[ident])):
                newest[ident] = row
        items = []
        for row in rows:
            ident = _identity(self._namespace_of(row), row)
            if ident is None or newest.get(ident) is not row:
                continue
            item = self._item(row, SearchItem, score=row.get("similarity") if op.query else None)
            if item is None or (op.filter and not all(_matches(item.value.get(k), v) for k, v in op.filter.items())):
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
                if _not_a_user(c.path[0]):
                    return []  # no item has such a first label
                user = c.path[0]
        rows = self.memory.get_all(**self._scope(user), limit=MAX_LIMIT)["results"]
        found: set[tuple[str, ...]] = set()
        for row in rows:
            ns = self._namespace_of(row)
            if ns is not None and all(_condition(c, ns) for c in conditions):
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


__all__ = ["DEFAULT_AGENT", "MAX_COPIES", "MAX_SCAN", "MAX_VALUE_DEPTH", "MemoristStore"]
