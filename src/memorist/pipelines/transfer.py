"""Export and import: a store's memories as JSON lines, and back.

An export line is a whole memory — its id, text, scope, dates, metadata, kind,
class, counters, tier and lineage — so importing it restores the memory as it was
(the vector is recomputed with the importing store's embedder). Importing is
idempotent: a memory whose id the store already holds is left alone when the file's
copy is not newer, and updated in place when it is, so re-importing a file never
doubles anything, and export → import → export gives the same file. An import never
moves a memory: an id the store gives to a memory of another scope is a bad line.
The store's copy is as new as its dates, or as its last rollback in the store when
later (a rollback restores a memory with the dates it had). A line naming no
tenant is the importing Memory's. A trajectory's line carries its steps (events of
the log), which the import logs again.

An import file may also hold conversation turns, ``{"messages": [...] | "text": ...}``,
which go through :meth:`memorist.Memory.add` like any conversation (verbatim turns
in batched calls, one per scope, each scope's in the file's order, see
:class:`Importer`), and the event lines of an export with events. A verbatim turn
with a time is idempotent too: a memory of its scope with its text, time, role and
speaker is "already there" (counted ``unchanged``), so running an import again adds
nothing twice; a turn to infer from goes through the reconciler again, which
decides. Event lines are not replayed: the event log records what happened to
*this* store, and the import itself writes an ``add`` (or ``update``) event per
memory, with ``{"import": true}`` in its payload.

An export of the whole tenant (``all_scopes``) also carries its relation tuples, one
``{"type": "relation", "subject": [type, id], "relation": ..., "object": [type, id],
"created_at": ..., "tenant_id": ...}`` line each, after the memories: an import writes
each tuple the store does not hold yet (with its date), so the imported store makes the
same access decisions, and importing twice adds nothing. As for a memory, a tuple of
another tenant is refused. A playbook is named by its path there
(``agent_a/default``), as exports write it.

A bad line stops the import with an :class:`~memorist.errors.ImportLineError` naming
it; the lines before it stay imported and none after it is (``memorist import
--from-line`` goes on from it once it is fixed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Any

from .. import validate
from ..embed.base import Embedder
from ..errors import ImportLineError, MemoristError, StoreError, ValidationError
from ..model import (
    DEFAULT_CLASS,
    LEARNING_KINDS,
    MINUTE_KINDS,
    Kind,
    MemoryClass,
    MemoryRecord,
    Message,
    RelationTuple,
    Scope,
    Status,
    Tier,
    from_epoch,
)
from ..policies import relations as rules
from ..policies.consolidation import DEFAULT_IMPORTANCE
from ..policies.text import content_hash
from ..reserved import PREVIOUS_RUN_PREFIX, RUN_PLAYBOOKS, RUN_PREFIX
from ..store.base import ScopeFilter, Store
from ..store.sqlite.errors import is_busy, retry_busy
from .minutes import log_imported
from .playbooks import as_filed, strategy_playbook, with_current_names
from .trajectories import STEP_OP, logged_step, step_of
from .undo import OP_ROLLBACK

log = logging.getLogger("memorist.import")
#: The most strategy ids a version made by an import lists in its change.
_CHANGE_IDS = 100

#: Most lines written (memories) or messages added (verbatim turns) in one call.
IMPORT_BATCH = 500
#: With a progress function, the first batch of verbatim turns; each next one is
#: twice as large, up to IMPORT_BATCH. Progress is counted as lines are read, and a
#: batch is read before it is written: small first batches keep the first rate a
#: progress bar sees (its time estimate) close to the import's. Without one, every
#: batch is whole from the start.
FIRST_TURN_BATCH = 16
#: Attempts at one batch while the store stays locked by other writers. Each
#: attempt already waits the store's busy timeout for the lock; a batch is one
#: transaction, so a failed attempt wrote nothing and the batch is retried whole.
IMPORT_BUSY_ATTEMPTS = 3
#: Verbatim conversation lines wait in one buffer per scope (lines of several users
#: interleaved in a file still go in large calls). When more scopes than this wait,
#: the oldest buffer is written; when more messages than MAX_WAITING_MESSAGES wait
#: in all of them (with a progress function: more than one batch may hold), the largest.
MAX_WAITING_SCOPES = 256
MAX_WAITING_MESSAGES = 4 * IMPORT_BATCH
_SCOPE_KEYS = ("user_id", "agent_id", "run_id")
_EXPORT_STATUSES = (Status.ACTIVE, Status.ARCHIVED)
_MAX_NUMBER = 1.7976931348623157e308  # the largest finite float
_MAX_COUNT = 2**63 - 1  # counters are SQLite INTEGERs


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else from_epoch(seconds).isoformat()


def export_item(record: MemoryRecord) -> dict[str, Any]:
    """One memory as an export line: everything :func:`import` needs to restore it."""
    item = record.to_item()
    item = {"type": "memory", **item}
    item.update(
        {
            "status": record.status.value,
            "topic": record.topic,
            "concept": record.concept,
            "section": record.section,
            "tags": list(record.tags),
            "helpful": record.helpful,
            "harmful": record.harmful,
            "importance": record.importance,
            "energy": record.energy,
            "tier": record.tier.value,
            "strengths": dict(record.strengths),
            "access_count": record.access_count,
            "valid_to": _iso(record.valid_to),
            "lineage": record.lineage,
        }
    )
    if record.search_text and record.search_text != record.text:
        item["search_text"] = record.search_text
    return item


def export_lines(store: Store, scope: ScopeFilter, *, events: bool = False, relations: bool = False) -> Iterator[dict[str, Any]]:
    """The scope's memories (active and archived), oldest first, then the tenant's
    relation tuples if asked (an export of the whole tenant), then its events if asked."""
    records = [r for status in _EXPORT_STATUSES for r in store.list(scope, status=status)]
    steps = _logged_steps(store, scope) if any(r.kind is Kind.TRAJECTORY for r in records) else {}
    # Oldest first; list() is newest first with rowid as the tie-break, so reversing
    # before a stable sort keeps insertion order among equal times, and a re-import
    # exports identically.
    for record in sorted(reversed(records), key=lambda r: r.created_at):
        item = export_item(record)
        if record.kind is Kind.TRAJECTORY and steps.get(record.id):
            item["steps"] = steps[record.id]
        yield item
    if relations:
        # Every tuple of the tenant: they are few next to its memories, and this export
        # reads every memory of the tenant too.
        for row in store.relations(scope.tenant_id, limit=_MAX_COUNT):
            yield relation_item(row, scope.tenant_id)
    if events:
        for event in store.events(scope):
            yield {"type": "event", **event.to_item()}


def _logged_steps(store: Store, scope: ScopeFilter) -> dict[str, list[dict[str, Any]]]:
    """The steps of the scope's trajectories, by trajectory, as their line carries them.

    A trajectory's steps are events of the log (and of a stored trace only when it
    was sampled): without them in its line, an imported trajectory has none."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event in store.events(scope, ops=(STEP_OP,)):
        if event.memory_id:
            out.setdefault(event.memory_id, []).append(logged_step(event))
    return out


def relation_item(row: RelationTuple, tenant_id: str) -> dict[str, Any]:
    """One relation tuple of ``tenant_id`` as an export line."""
    return {"type": "relation", **row.to_item(), "tenant_id": tenant_id}


_RELATION_KEYS = frozenset({"type", "subject", "relation", "object", "created_at", "tenant_id"})
#: The fields of a memory line: those :func:`export_item` writes (every version of it:
#: none was ever taken out), ``tenant_id`` included.
_MEMORY_KEYS = frozenset({
    "type", "id", "memory", *_SCOPE_KEYS, "tenant_id", "created_at", "updated_at", "metadata", "kind", "memory_class",
    "importance", "status", "topic", "concept", "section", "tags", "helpful", "harmful", "energy", "tier", "strengths",
    "access_count", "valid_to", "lineage", "search_text", "steps",
})
#: The fields of a conversation line (``{"messages": [...] | "text": ...}``).
_TURN_KEYS = frozenset({"type", "messages", "text", *_SCOPE_KEYS, "metadata", "timestamp", "infer", "importance"})


def relation_from_item(obj: dict[str, Any]) -> RelationTuple:
    """The tuple of a relation line, checked as ``memory.relations.create`` checks one
    (a playbook must be named by its path, as exports write it)."""
    extra = sorted(set(obj) - _RELATION_KEYS)
    if extra:
        raise ValidationError(extra[0], "is not a field of a relation line (subject, relation, object, created_at, tenant_id)")
    who = rules.subject_of(obj.get("subject"))
    rel = rules.relation_of(obj.get("relation"))
    what = rules.object_of(obj.get("object"))
    rules.check_tuple(who, rel, what)
    if what[0] == "playbook" and rules.parse_playbook(what[1]) is None:
        raise ValidationError("object", f"a playbook is named by its path here (such as agent_a/default), got {what[1]!r}")
    created = obj.get("created_at")
    when = validate.timestamp(created, field="created_at") if created is not None else None
    return RelationTuple(who[0], who[1], rel, what[0], what[1], when if when is not None else 0.0)


# import --------------------------------------------------------------------------------------
def _str(obj: dict[str, Any], key: str, default: str = "") -> str:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValidationError(key, f"must be a string, got {type(value).__name__}")
    return validate.unicode(key, value)


def _number(obj: dict[str, Any], key: str, default: float, *, whole: bool = False, low: float = -_MAX_NUMBER) -> Any:
    value = obj.get(key, default)
    if value is None:
        return default
    # Comparisons before any conversion: an int of any size compares exactly, NaN fails.
    if isinstance(value, bool) or not isinstance(value, int | float) or not -_MAX_NUMBER <= value <= _MAX_NUMBER:
        raise ValidationError(key, f"must be a finite number, got {validate.show(value)}")
    if value < low:
        raise ValidationError(key, f"must be a number >= {low:g}, got {validate.show(value)}")
    if whole:
        if not 0 <= value <= _MAX_COUNT or int(value) != value:
            raise ValidationError(key, f"must be a whole number >= 0, got {validate.show(value)}")
        return int(value)
    return float(value)


def _importance(obj: dict[str, Any]) -> float:
    """An exported memory's importance: 0 to 1; a line without one gets the default."""
    value = validate.importance(obj.get("importance"))
    return DEFAULT_IMPORTANCE if value is None else value


def _enum(obj: dict[str, Any], key: str, kind: type[Any], default: Any) -> Any:
    value = obj.get(key)
    if value is None:
        return default
    try:
        if isinstance(value, str):
            return kind(value)
    except ValueError:
        pass
    allowed = ", ".join(m.value for m in kind)
    raise ValidationError(key, f"must be one of {allowed}, got {validate.show(value)}")


#: The kinds of a playbook's strategies (✓ helpful, ✗ harmful, ○ neutral).
_STRATEGY_KINDS = frozenset({Kind.STRATEGY.value, Kind.ANTI_PATTERN.value, Kind.OBSERVATION.value})


def _tenants_strategy(obj: dict[str, Any]) -> bool:
    """Whether an export line is a strategy of a tenant's or the global playbook,
    which belongs to no user, agent or run (the import's default ids are not its)."""
    return (not any(obj.get(k) for k in _SCOPE_KEYS) and obj.get("kind") in _STRATEGY_KINDS
            and isinstance(obj.get("section"), str) and bool(obj["section"].strip()))


def record_from_item(
    obj: dict[str, Any],
    tenant_id: str,
    *,
    max_chars: int,
    max_metadata_depth: int = validate.METADATA_DEPTH,
    max_metadata_bytes: int = validate.METADATA_BYTES,
) -> MemoryRecord:
    """The memory an export line describes (validated; the vector is not part of it;
    a playbook header found again by its name, under its current name)."""
    mid = validate.memory_id(obj.get("id"))
    text = validate.text("memory", obj.get("memory"), max_chars=max_chars)
    scope_ids = [validate.scope_id(k, obj.get(k)) for k in _SCOPE_KEYS]
    if not any(scope_ids) and not _tenants_strategy(obj):
        raise ValidationError("user_id", "an exported memory needs one of user_id, agent_id or run_id "
                                         "(only a strategy of a tenant's or the global playbook names none)")
    created = validate.timestamp(obj.get("created_at"), field="created_at")
    if created is None:
        raise ValidationError("created_at", "is required for an exported memory")
    updated = validate.timestamp(obj.get("updated_at"), field="updated_at")
    kind = _enum(obj, "kind", Kind, Kind.FACT)
    tags = obj.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValidationError("tags", "must be a list of strings")
    for tag in tags:
        validate.unicode("tags", tag)
    strengths = obj.get("strengths")
    defaults = MemoryRecord(id="", scope=Scope(), text="")
    if strengths is None:
        strengths = defaults.strengths
    elif not isinstance(strengths, dict) or set(strengths) - {c.value for c in MemoryClass}:
        raise ValidationError("strengths", "must map memory classes to numbers")
    else:
        strengths = {**defaults.strengths, **{k: _number(strengths, k, 1.0) for k in strengths}}
    lineage = obj.get("lineage") or {}
    if not isinstance(lineage, dict):
        raise ValidationError("lineage", f"must be an object, got {type(lineage).__name__}")
    # Lineage is stored as JSON like metadata, and held to the same limits.
    lineage = validate.metadata(lineage, field="lineage", max_depth=max_metadata_depth, max_bytes=max_metadata_bytes)
    search_text = obj.get("search_text") or text
    if not isinstance(search_text, str):
        raise ValidationError("search_text", f"must be a string, got {type(search_text).__name__}")
    if search_text is not text:
        validate.text("search_text", search_text, max_chars=max_chars)
    record = MemoryRecord(
        id=mid,
        scope=Scope(tenant_id, *(s or "" for s in scope_ids)),
        text=text,
        kind=kind,
        memory_class=_enum(obj, "memory_class", MemoryClass, DEFAULT_CLASS[kind]),
        topic=_str(obj, "topic"),
        concept=_str(obj, "concept"),
        section=_str(obj, "section"),
        tags=list(tags),
        helpful=_number(obj, "helpful", 0, whole=True),
        harmful=_number(obj, "harmful", 0, whole=True),
        strengths=strengths,
        access_count=_number(obj, "access_count", 0, whole=True),
        importance=_importance(obj),
        energy=_number(obj, "energy", defaults.energy, low=0),  # decay never takes energy below 0
        tier=_enum(obj, "tier", Tier, defaults.tier),
        created_at=created,
        # The memory service shows a never-updated memory with updated_at == created_at.
        updated_at=None if updated is None or updated == created else updated,
        valid_to=validate.timestamp(obj.get("valid_to"), field="valid_to"),
        content_hash=content_hash(text),
        metadata=validate.metadata(obj.get("metadata"), max_depth=max_metadata_depth, max_bytes=max_metadata_bytes),
        lineage=dict(lineage),
        status=_enum(obj, "status", Status, Status.ACTIVE),
        search_text=search_text,
    )
    return with_current_names(record)


def _same(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Equal as an export shows them (access marks aside)."""
    return export_item(a) == export_item(b)


#: A verbatim line waiting: its number, its messages (its metadata and time folded
#: into them) and the same messages as add() checks them.
_Line = tuple[int, list[dict[str, Any]], list[Message]]


@dataclass
class _Pending:
    """Verbatim message lines of one scope (and importance) waiting for one ``add``
    call: each line with its messages (its metadata and time folded into them, see
    :func:`_folded`) and the same messages as ``add`` checked them."""

    key: tuple[Any, ...]
    scope: Scope
    kwargs: dict[str, Any]
    plain: bool = False  # text lines ({"text": ...}): stored as add(text) stores them
    lines: list[_Line] = field(default_factory=list)
    size: int = 0  # messages


@dataclass
class Importer:
    """Reads import lines one by one and writes them in batches.

    ``add`` is :meth:`memorist.Memory.add` (conversation lines go through it);
    ``defaults`` is the scope of lines that name none; ``infer`` the default of
    conversation lines without ``"infer"`` (None: infer).

    Verbatim conversation lines wait in one buffer per scope (and importance), so
    that lines of several users interleaved in a file still go in large ``add``
    calls, each scope's lines in the file's order; memory lines wait in a buffer of
    their own, relation lines in another. Every line is checked as it is read, and
    a line ``add`` would refuse, or that must see the lines before it (an inferred
    turn: its reconciler reads the store), is written alone after everything read
    before it. So when line N is bad, every line before it is written and none
    after it; a memory line whose id another scope holds, found when its buffer is
    written, is the one check made late, and the writes stop at it the same way.
    """

    store: Store
    embedder: Embedder
    tenant_id: str
    add: Callable[..., dict[str, Any]]
    defaults: dict[str, str | None]
    infer: bool | None = None
    max_chars: int = 100_000
    max_metadata_depth: int = validate.METADATA_DEPTH
    max_metadata_bytes: int = validate.METADATA_BYTES
    # Several text lines in one call, each stored as add(text) stores it (None: each
    # text line is added alone).
    add_texts: Callable[..., dict[str, Any]] | None = None
    counts: dict[str, int] = field(
        default_factory=lambda: {
            "added": 0, "updated": 0, "unchanged": 0, "skipped": 0, "joined": 0, "deleted": 0, "events": 0, "relations": 0,
        }
    )
    calls: int = 0
    _turns: dict[tuple[Any, ...], _Pending] = field(default_factory=dict)  # oldest first
    _waiting: int = 0  # messages in _turns
    _turn_batches: int = 0  # batches of turns written
    _through: int = 0  # the last line written
    ramp: bool = False  # small first batches (see FIRST_TURN_BATCH): set when progress is reported
    _records: list[tuple[int, MemoryRecord]] = field(default_factory=list)
    _relations: list[tuple[int, RelationTuple]] = field(default_factory=list)
    # Whether each scope held no active memory when the import first wrote to it
    # (then none of its lines can be there already), and, for the others, how many
    # more occurrences of each verbatim memory (see _already) are there already.
    _fresh: dict[Scope, bool] = field(default_factory=dict)
    _there: dict[bytes, int] = field(default_factory=dict)
    # The lines read and not written yet (an interrupted import goes on from the first),
    # and whether the line being fed went into a buffer.
    _open: dict[int, None] = field(default_factory=dict)
    _held: bool = False
    # The playbook headers this import wrote, by scope and address, and those it left
    # out because their scope has a playbook of that name already (see _joining).
    _headers: dict[tuple[Scope, str], str] = field(default_factory=dict)
    _joined: set[str] = field(default_factory=set)
    # The store's playbooks (PlaybookStore), asked for when an import changed a
    # playbook's strategies without bringing its version (see version_playbooks);
    # and the playbooks, by space and name, whose strategies / versions it wrote.
    playbooks: Callable[[], Any] | None = None
    _strategies_written: dict[tuple[Scope, str], list[str]] = field(default_factory=dict)
    _versions_written: set[tuple[Scope, str]] = field(default_factory=set)
    # The steps of the trajectory lines read, by id: logged when the trajectory is added.
    _steps: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def first_open(self) -> int | None:
        """The first line read and not written yet (None: every line read is written)."""
        return min(self._open, default=None)

    # the lines ---------------------------------------------------------------------------
    def feed(self, line_no: int, raw: str | dict[str, Any]) -> None:
        self._open[line_no] = None
        self._held = False
        try:
            self._line(line_no, raw)
            if not self._held:  # written (or left alone) as it was read
                self._open.pop(line_no, None)
        except ImportLineError:
            raise  # a write of earlier lines failed; it names its own line
        except MemoristError as exc:
            if is_busy(exc):
                raise self.stopped(exc, line_no) from exc
            self.flush()  # the lines before a bad one are kept
            raise ImportLineError(line_no, str(exc), self.summary()) from exc

    def _line(self, line_no: int, raw: str | dict[str, Any]) -> None:
        if isinstance(raw, str):
            if not raw.strip():
                return
            try:
                validate.unicode("line", raw)
            except ValidationError:
                # Files are read with surrogateescape: bytes that are not UTF-8 show up
                # here, so the error names their line.
                raise _Bad("is not valid UTF-8 text") from None
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                # The character it stopped at, counted in the line (its newline aside:
                # a line cut short ends there, not at "column 1" of what follows).
                raise _Bad(f"not valid JSON: {exc.msg} (column {min(exc.pos, len(raw.rstrip(chr(13) + chr(10)))) + 1})") from exc
            except RecursionError:
                raise _Bad("nests too deep to be read") from None
        else:
            obj = raw
        if not isinstance(obj, dict):
            raise _Bad(f"must be a JSON object, got {type(obj).__name__}")
        kind = obj.get("type")
        if kind == "event":
            self.counts["events"] += 1
            return
        if kind == "relation":
            tenant = self._tenant(obj)
            if tenant != self.tenant_id:
                raise _Bad(f"the relation belongs to tenant {validate.show(tenant)}, not this Memory's tenant {self.tenant_id!r}")
            self._relations.append((line_no, relation_from_item(obj)))
            self._held = True
            if len(self._relations) >= IMPORT_BATCH:
                self._flush_records()  # a memory line before them is checked first
                self._flush_relations()
            return
        present = [k for k in ("messages", "text", "memory") if k in obj]
        if kind not in (None, "memory") or len(present) != 1 or (kind == "memory" and present != ["memory"]):
            raise _Bad(
                'needs exactly one of "messages", "text" (a conversation turn) or "memory" (an exported memory)'
                + (f"; found {', '.join(present)}" if present else "")
            )
        if present[0] == "memory":
            self._memory(line_no, obj)
        else:
            self._turn(line_no, obj, obj[present[0]])

    def _memory(self, line_no: int, obj: dict[str, Any]) -> None:
        _refuse_unknown(obj, _MEMORY_KEYS, "memory", "the fields `memorist export` writes: "
                        "id, memory, the scope's ids, created_at, updated_at, metadata, kind, status, ...")
        if obj.get("status") == Status.DELETED.value:
            # Exports hold active and archived memories only; a deleted one would be
            # stored as a tombstone and counted as added.
            raise ValidationError("status", '"deleted" is not imported: an import restores active and archived memories; '
                                  "leave the line out (or delete the memory once it is imported)")
        tenant = self._tenant(obj)
        if tenant != self.tenant_id:
            raise _Bad(f"the memory belongs to tenant {validate.show(tenant)}, not this Memory's tenant {self.tenant_id!r}")
        if not any(obj.get(k) is not None for k in _SCOPE_KEYS) and not _tenants_strategy(obj):
            obj = {**obj, **self.defaults}
        if "id" not in obj:
            # An exported memory of an older format, or written by hand: it gets an
            # id derived from what it is, so importing it twice is still idempotent.
            obj = {**obj, "id": _derived_id(obj)}
        record = record_from_item(
            obj,
            self.tenant_id,
            max_chars=self.max_chars,
            max_metadata_depth=self.max_metadata_depth,
            max_metadata_bytes=self.max_metadata_bytes,
        )
        if obj.get("steps") is not None:
            if record.kind is not Kind.TRAJECTORY:
                raise ValidationError("steps", f"are a trajectory's; this line's memory is a {record.kind.value}")
            self._steps[record.id] = self._checked_steps(obj["steps"])
        self._records.append((line_no, record))
        self._held = True
        if len(self._records) >= IMPORT_BATCH:
            self._flush_records()

    def _checked_steps(self, steps: Any) -> list[dict[str, Any]]:
        """A trajectory line's steps, checked as ``log_step`` checks a step."""
        if not isinstance(steps, list):
            raise ValidationError("steps", f"must be a list of steps, got {type(steps).__name__}")
        out = []
        for i, step in enumerate(steps):
            where = f"steps[{i}]"
            if not isinstance(step, dict) or set(step) - {"type", "description", "metadata", "at"}:
                raise ValidationError(where, "must be a step {type, description, metadata, at}")
            at = validate.timestamp(step.get("at"), field=f"{where}.at")
            out.append({
                "type": validate.text(f"{where}.type", step.get("type"), max_chars=self.max_chars),
                "description": _str(step, "description"),
                "metadata": validate.metadata(step.get("metadata"), field=f"{where}.metadata",
                                              max_depth=self.max_metadata_depth, max_bytes=self.max_metadata_bytes),
                **({} if at is None else {"at": at}),
            })
        return out

    def _tenant(self, obj: dict[str, Any]) -> Any:
        """The tenant a line names; a line naming none is this Memory's (a file written
        by hand, a memories.json file, an export of the default tenant), as a line
        naming no scope gets the import's."""
        tenant = obj.get("tenant_id")
        return self.tenant_id if tenant is None else tenant

    def _turn(self, line_no: int, obj: dict[str, Any], messages: Any) -> None:
        _refuse_unknown(obj, _TURN_KEYS, "conversation", "messages or text, the scope's ids, metadata, timestamp, infer, importance")
        ids = {k: obj.get(k) for k in _SCOPE_KEYS}
        if not any(v is not None for v in ids.values()):
            ids = dict(self.defaults)
        metadata = obj.get("metadata")
        timestamp = obj.get("timestamp")
        infer = obj.get("infer", True if self.infer is None else self.infer)
        kwargs = {**ids, "metadata": metadata, "infer": infer, "timestamp": timestamp}
        if obj.get("importance") is not None:
            kwargs["importance"] = obj["importance"]  # add() checks it
        if infer is False and isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
            # The line's metadata and time ride on its messages: lines of one scope go
            # in one call whatever their times (each line of a conversation log usually
            # has its own). Its importance acts on the whole call: lines share a call
            # only with lines of the same.
            folded = _folded(messages, metadata, timestamp)
            importance = kwargs.get("importance")
            checked = None if folded is None else self._checked(ids, importance, folded)
            if checked is not None:
                self._wait(line_no, ids, importance, folded, checked)
                return
        if infer is False and isinstance(messages, str) and self.add_texts is not None:
            # A text line: a user message carrying the line's metadata and time,
            # written with other text lines of its scope as add(text) writes each.
            folded = _folded([{"role": "user", "content": messages}], metadata, timestamp)
            importance = kwargs.get("importance")
            checked = None if folded is None else self._checked(ids, importance, folded, text=messages)
            if checked is not None:
                self._wait(line_no, ids, importance, folded, checked, plain=True)
                return
        # Alone, after every line read before it: an inferred turn's reconciler must
        # see them, and a line add() refuses stops the import with the lines before
        # it written (add() names what is wrong with it).
        self.flush()
        self._alone(messages, kwargs)

    def _checked(self, ids: dict[str, Any], importance: Any, folded: list[dict[str, Any]], *, text: str | None = None) -> list[Message] | None:
        """The folded messages as ``add`` reads them; None when add would refuse
        them (the line is then added alone, and add names what is wrong). ``text``:
        the line's text, for a text line (checked as add(text) checks it)."""
        try:
            validate.require_scope(*ids.values())
            validate.importance(importance)
            if text is not None:
                validate.messages(text, max_chars=self.max_chars)
            checked, _ = validate.messages(
                folded, max_chars=self.max_chars, max_metadata_depth=self.max_metadata_depth, max_metadata_bytes=self.max_metadata_bytes
            )
        except MemoristError:
            return None
        return checked

    def _wait(
        self, line_no: int, ids: dict[str, Any], importance: Any, folded: list[dict[str, Any]], checked: list[Message], *, plain: bool = False,
    ) -> None:
        """Put a checked verbatim line in its scope's buffer; write buffers that are full."""
        scope = Scope(self.tenant_id, *(ids[k] or "" for k in _SCOPE_KEYS))
        key = (scope, json.dumps(importance), plain)
        room = min(IMPORT_BATCH, FIRST_TURN_BATCH << min(self._turn_batches, 16)) if self.ramp else IMPORT_BATCH
        # One buffer a scope at a time: a line of another importance writes the scope's
        # buffer first, so the scope's lines are stored in the file's order.
        for other in [p for k, p in self._turns.items() if k[0] == scope and k != key]:
            self._flush_turns(other)
        pending = self._turns.get(key)
        if pending is not None and pending.size + len(folded) > room:
            self._flush_turns(pending)
            pending = None
        if pending is None:
            kwargs = {**ids, "metadata": None, "infer": False, "timestamp": None, **({"importance": importance} if importance is not None else {})}
            pending = self._turns[key] = _Pending(key, scope, kwargs, plain)
        pending.lines.append((line_no, folded, checked))
        self._held = True
        pending.size += len(folded)
        self._waiting += len(folded)
        # Bounded: too many scopes waiting writes the oldest buffer, too many messages the
        # largest. Under a progress bar no more wait in all the buffers than in one (the
        # lines read but not written yet, which make the bar's first rate too high).
        if len(self._turns) > MAX_WAITING_SCOPES:
            self._flush_turns(next(iter(self._turns.values())))
        elif self._waiting > (min(room, MAX_WAITING_MESSAGES) if self.ramp else MAX_WAITING_MESSAGES):
            self._flush_turns(max(self._turns.values(), key=lambda p: p.size))

    # the writes ----------------------------------------------------------------------------
    def flush(self) -> None:
        """Write every line waiting: memory lines first (the one late check), then each
        scope's turns, oldest buffer first, then relation tuples."""
        self._flush_records()
        for pending in list(self._turns.values()):
            self._write_turns(pending)
        self._flush_relations()

    def _flush_before(self, line_no: int) -> None:
        """Before stopping at ``line_no``: write the turns and relation tuples of the
        lines before it, drop those of the lines after it (memory lines are written
        before any turn, so none waits here)."""
        for pending in list(self._turns.values()):
            self._write_turns(pending, before=line_no)
        before = [(n, row) for n, row in self._relations if n < line_no]
        self._write_relations([row for _, row in before])
        self._wrote(before)
        self._relations = []

    def _flush_relations(self) -> None:
        pending, self._relations = self._relations, []
        self._write_relations([row for _, row in pending])
        self._wrote(pending)

    def _write_relations(self, pending: list[RelationTuple]) -> None:
        """Write the tuples the store does not hold yet, in one transaction
        (``relations`` counts them; one already there changes nothing)."""
        if not pending:
            return
        now = time.time()

        def write() -> int:
            with self.store.transaction() as batch:
                return sum(batch.put_relation(self.tenant_id, row if row.created_at else replace(row, created_at=now)) for row in pending)

        self.counts["relations"] += retry_busy(write, attempts=IMPORT_BUSY_ATTEMPTS)

    def _call(self, messages: Any, kwargs: dict[str, Any], *, plain: bool = False) -> None:
        # One add is one transaction: retried whole while the store is locked.
        add = self.add_texts if plain and self.add_texts is not None else self.add
        result = retry_busy(lambda: add(messages, **kwargs), attempts=IMPORT_BUSY_ATTEMPTS)
        self.calls += 1
        for item in result["results"]:
            key = {"ADD": "added", "UPDATE": "updated", "DELETE": "deleted"}.get(item["event"])
            if key:
                self.counts[key] += 1

    def _alone(self, messages: Any, kwargs: dict[str, Any]) -> None:
        """Add one line by itself; a verbatim one without what the store already
        holds of it (see :meth:`_new_messages`)."""
        if kwargs.get("infer") is False:
            messages = self._new_messages(messages, kwargs)
            if messages is None:
                return
        self._call(messages, kwargs)

    def _flush_turns(self, pending: _Pending) -> None:
        """Write one scope's buffer (before the import reads on)."""
        # A memory line read before these lines is checked before they are written.
        self._flush_records()
        self._write_turns(pending)

    def _write_turns(self, pending: _Pending, *, before: int | None = None) -> None:
        """Write a buffer's lines (those before line ``before``) in one add call."""
        if self._turns.pop(pending.key, None) is pending:
            self._waiting -= pending.size
        lines = pending.lines if before is None else [line for line in pending.lines if line[0] < before]
        taken = lines  # done once written, the lines already there with them
        if lines and not self._fresh_scope(pending.scope):
            lines = self._unseen(pending.scope, lines, plain=pending.plain)
        if not lines:
            self._done(taken)
            return
        self._turn_batches += 1  # the ramp grows by calls, however many scopes share the room
        if len(lines) > 1:
            try:
                self._call([m for _, ms, _ in lines for m in ms], pending.kwargs, plain=pending.plain)
                self._wrote(lines)
                self._done(taken)
                return
            except MemoristError as exc:
                if is_busy(exc):
                    raise  # no line is bad: the store stayed locked
                # The batch wrote nothing (its lines were checked: a model or the
                # store failed); line by line, the error names the line it fails at.
        for line_no, messages, _ in lines:
            try:
                self._call(messages, pending.kwargs, plain=pending.plain)
            except MemoristError as exc:
                if is_busy(exc):
                    raise
                self._flush_before(line_no)
                later = self._through if self._through > line_no else None
                raise ImportLineError(line_no, str(exc), self.summary(), later=later) from exc
            self._wrote([(line_no,)])
        self._done(taken)

    # lines already imported ----------------------------------------------------------------
    def _fresh_scope(self, scope: Scope) -> bool:
        """Whether ``scope`` held no active memory when the import first wrote a
        verbatim line to it: then none of its lines can be there already, and they
        are not looked up. Asked before the first write, answered once."""
        fresh = self._fresh.get(scope)
        if fresh is None:
            fresh = self._fresh[scope] = not self.store.list(_exactly(scope), limit=1)
        return fresh

    def _unseen(self, scope: Scope, lines: list[_Line], *, plain: bool = False) -> list[_Line]:
        """A buffer's lines without the messages the store already holds. When it
        holds no memory of the scope in the span of their times (one read: a new
        conversation of a known user), none is looked up."""
        times = [m.timestamp for _, _, checked in lines for m in checked if _kept(m) and m.timestamp is not None]
        if not times:
            return lines
        newest = self.store.list(_exactly(scope), until=max(times), limit=1)
        look = bool(newest) and newest[0].created_at >= min(times)
        return [line for line in map(self._new_lines, repeat(scope), lines, repeat(look), repeat(plain)) if line is not None]

    def _new_lines(self, scope: Scope, line: _Line, look: bool, plain: bool = False) -> _Line | None:
        """A waiting line without the messages the store already holds; None when
        it holds them all. Its messages carry their times, so leaving one out moves
        no other. ``look``: False when the store holds none of their times."""
        line_no, folded, checked = line
        out: list[dict[str, Any]] = []
        out_checked: list[Message] = []
        new = False
        for raw, message in zip(folded, checked, strict=True):
            if _kept(message):
                meta = message.metadata or {}
                # A text line's memory is a fact, with no role or name but its metadata's.
                kind, speaker = (Kind.FACT, (meta.get("role"), meta.get("name"))) if plain else (Kind.TURN, _speaker(meta, message))
                if message.timestamp is not None and self._already(scope, kind, message.content, message.timestamp, *speaker, look=look):
                    continue
                new = True
            out.append(raw)
            out_checked.append(message)
        return (line_no, out, out_checked) if new else None

    def _new_messages(self, messages: Any, kwargs: dict[str, Any]) -> Any:
        """A verbatim line added alone, without the messages the store already holds
        (their times written into the others, so that leaving one out moves none);
        None when it holds them all. A line add() refuses is returned as it is."""
        try:
            u, a, r = validate.require_scope(*(kwargs.get(k) for k in _SCOPE_KEYS))
            checked, plain = validate.messages(
                messages, max_chars=self.max_chars, max_metadata_depth=self.max_metadata_depth, max_metadata_bytes=self.max_metadata_bytes
            )
            meta = validate.metadata(kwargs.get("metadata"), max_depth=self.max_metadata_depth, max_bytes=self.max_metadata_bytes)
            at = validate.timestamp(kwargs.get("timestamp"))
        except MemoristError:
            return messages  # add() says what is wrong
        scope = Scope(self.tenant_id, u or "", a or "", r or "")
        if meta.get("is_test") is True or self._fresh_scope(scope):
            return messages  # a test memory goes to the test tenant: not looked up
        if plain:
            if at is None or not self._already(scope, Kind.FACT, checked[0].content, at, meta.get("role"), meta.get("name")):
                return messages
            return None
        raws = [messages] if isinstance(messages, dict) else list(messages)
        out: list[Any] = []
        dropped = new = False
        i = 0
        for raw, message in zip(raws, checked, strict=True):
            if not _kept(message):
                out.append(raw)
                continue
            when = message.timestamp if message.timestamp is not None else None if at is None else at + i * _STEP
            i += 1
            if when is not None and self._already(scope, Kind.TURN, message.content, when, *_speaker({**meta, **(message.metadata or {})}, message)):
                dropped = True
                continue
            new = True
            out.append(raw if when is None or raw.get("timestamp") is not None else {**raw, "timestamp": when})
        if not new:
            return None
        return out if dropped else messages

    def _already(self, scope: Scope, kind: Kind, text: str, when: float, role: Any, name: Any, *, look: bool = True) -> bool:
        """Whether the store already holds this verbatim memory: one of ``scope`` and
        ``kind`` with this text, time (``created_at``), role and speaker (metadata
        ``role``, ``name``). Counted as ``unchanged``.

        A file may hold the same memory twice (the same words said twice at one
        time): the i-th occurrence is there already when the store held at least i
        before the import wrote any (read at the first occurrence, through the
        content-hash index, unless ``look`` is False: the store holds none); later
        ones are added."""
        try:
            key = json.dumps([scope.tenant_id, scope.user_id, scope.agent_id, scope.run_id, kind.value, role, name, text, when], default=str)
        except (TypeError, ValueError, RecursionError):
            return False
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        left = self._there.get(digest)
        if left is None and not look:
            left = 0
        elif left is None:
            left = sum(
                1
                for r in self.store.find_by_hash(_exactly(scope), content_hash(text))
                if r.scope == scope and r.kind is kind and r.text == text and r.created_at == when
                and (r.metadata.get("role"), r.metadata.get("name")) == (role, name)
            )
        if left:
            self._there[digest] = left - 1
            self.counts["unchanged"] += 1
            return True
        self._there[digest] = 0
        return False

    def _flush_records(self) -> None:
        pending, self._records = self._records, []
        if not pending:
            return
        # One id given to memories of two scopes in the file: the lines before the
        # later one are written (they are good), and the import stops at it.
        clash = _clash(pending)
        if clash is not None:
            line_no, first, mid = clash
            self._write_records([p for p in pending if p[0] < line_no])
            self._flush_before(line_no)
            raise ImportLineError(
                line_no,
                f"id {mid!r} is also the id of line {first}'s memory, of another scope (another user, agent or run); "
                "a memory has one scope: to give this line's memory an id of its own, leave out its \"id\"",
                self.summary(),
            )
        self._write_records(pending)

    def _joining(self, record: MemoryRecord) -> bool:
        """Whether ``record``, a memory the store does not hold, is left out because it
        is a playbook's header (or one of its versions) whose scope has a playbook of
        that name already, in the store or from an earlier line: a scope holds one
        playbook of a name, so its strategies join the one there (a backup restored
        after the playbook was made again, a release 0.2.0 export of a learner beside a
        playbook its owner had named so). A warning says which."""
        if record.kind is Kind.PLAYBOOK_VERSION:
            return record.lineage.get("playbook_id") in self._joined
        if record.kind is not Kind.PLAYBOOK or record.scope.run_id != RUN_PLAYBOOKS or record.status is not Status.ACTIVE:
            return False
        key = (record.scope, record.content_hash)
        other = self._headers.get(key)
        if other is None:
            found = [r.id for r in self.store.find_by_hash(_exactly(record.scope), record.content_hash)
                     if r.kind is Kind.PLAYBOOK and r.status is Status.ACTIVE and r.id != record.id]
            other = found[0] if found else None
        if other is None or other == record.id:
            self._headers[key] = record.id
            return False
        self._joined.add(record.id)
        log.warning("import: the playbook %r of %s is there already (%s); the file's one (%s) joins it: its strategies "
                    "are added to it, its header and versions are left out", record.metadata.get("name"),
                    ", ".join(f"{k} {v!r}" for k, v in zip(("user", "agent"), record.scope.space[1:], strict=True) if v) or "the tenant",
                    other, record.id)
        return True

    def _write_records(self, pending: list[tuple[int, MemoryRecord]]) -> None:
        if not pending:
            return
        # A file may name one id twice (two exports concatenated): the newest wins.
        latest: dict[str, MemoryRecord] = {}
        for _, record in pending:
            held = latest.get(record.id)
            if held is None or _version(record) > _version(held):
                latest[record.id] = record
        stored = self.store.get_many(list(latest))
        writes: list[tuple[MemoryRecord, MemoryRecord | None]] = []
        for record in latest.values():
            old = stored.get(record.id)
            if old is None and self._joining(record):
                # Skipped, though nothing was deleted: ``joined`` tells them apart.
                self.counts["skipped"] += 1
                self.counts["joined"] += 1
            elif old is None:
                writes.append((record, None))
            elif old.scope != record.scope:
                # An import never moves a memory: the id is another scope's (another
                # user's copy, or a file edited to copy memories to a new user).
                first_line = {r.id: n for n, r in reversed(pending)}
                line_no = first_line[record.id]
                self._flush_before(line_no)
                self.flush_writes([w for w in writes if first_line[w[0].id] < line_no])
                raise ImportLineError(line_no, _taken(record.id, old, self.tenant_id), self.summary())
            elif old.status is Status.DELETED:
                # Deleted here after the export was made: the deletion is newer.
                self.counts["skipped"] += 1
            elif (_version(record) > _version(old) and not _same(record := as_filed(record, old), old)
                  and _version(record) > self._stored_version(old)):
                # (An import never moves a memory to another playbook, nor renames one.)
                writes.append((record, old))
            else:
                self.counts["unchanged"] += 1
        self.counts["unchanged"] += len(pending) - len(latest)
        self.flush_writes(writes)
        self._steps.clear()  # every trajectory line read was in pending
        self._wrote(pending)

    def _stored_version(self, old: MemoryRecord) -> tuple[float, bool]:
        """How new the store's copy is: its dates, or its last rollback here, when
        later. A rollback restores a memory as it was, dates and all, so a copy
        exported before it looks newer by its dates alone. Other changes date the
        memory themselves, and bookkeeping (a decay, a boost) is no edit: a copy
        edited elsewhere since still wins. Read only for a copy the file would
        replace, so importing a file again reads no history."""
        edited, archived = _version(old)
        changed = max((e.ts for e in self.store.history(old.id) if e.op == OP_ROLLBACK), default=edited)
        return max(edited, changed), archived

    def flush_writes(self, writes: list[tuple[MemoryRecord, MemoryRecord | None]]) -> None:
        """Write new memories and newer copies, in one transaction."""
        if not writes:
            return
        vectors = self.embedder.embed([r.search_text or r.text for r, _ in writes])
        steps = {record.id: self._new_steps(record.id, old) for record, old in writes if record.id in self._steps}

        def write() -> None:
            with self.store.transaction() as batch:
                for (record, old), vector in zip(writes, vectors, strict=True):
                    live = vector if record.status is Status.ACTIVE else None
                    if old is None:
                        batch.add(record, live, payload={"import": True})
                        log_imported(batch, record)  # a minute's index entry brings its log entry
                    else:
                        record.last_access = old.last_access
                        batch.update(record, live, old_text=old.text, payload={"import": True})
                    for step in steps.get(record.id, ()):
                        # A trajectory's steps, in the log where its own would be.
                        batch.event(STEP_OP, record.scope, memory_id=record.id, new_text=step["description"],
                                    actor="trajectory", payload=step)

        retry_busy(write, attempts=IMPORT_BUSY_ATTEMPTS)  # one transaction: retried whole
        for record, old in writes:
            self.counts["added" if old is None else "updated"] += 1
            name = record.metadata.get("playbook")
            playbook = strategy_playbook(record)
            if record.kind is Kind.PLAYBOOK_VERSION and isinstance(name, str):
                self._versions_written.add((replace(record.scope, run_id=""), name))
            elif playbook is not None:
                self._strategies_written.setdefault(playbook, []).append(record.id)

    def _new_steps(self, trajectory_id: str, old: MemoryRecord | None) -> list[dict[str, Any]]:
        """The steps of a trajectory line the store's log does not hold yet: all of them
        for a new trajectory; for one the store holds, those after the steps its log
        holds when these begin the line's (a copy exported while it ran, completed
        since), else none (the log records what happened here)."""
        steps = self._steps.get(trajectory_id, [])
        if old is None:
            return steps
        logged = [step_of(e) for e in self.store.history(trajectory_id) if e.op == STEP_OP]
        filed = [{k: v for k, v in step.items() if k != "at"} for step in steps[:len(logged)]]
        return steps[len(logged):] if filed == logged else []

    def version_playbooks(self) -> int:
        """Make a version of each playbook whose strategies this import changed
        without bringing the version that holds them (strategies joining a playbook of
        the same name, a file of strategies only): every state of a playbook is a
        version, so a rollback can always come back to this one. Returns how many."""
        if not self._strategies_written or self.playbooks is None:
            return 0
        playbooks = self.playbooks()
        made = 0
        for (scope, name), ids in self._strategies_written.items():
            if (scope, name) in self._versions_written:
                continue  # the file's own version of them came along
            imported = sorted(set(ids))
            change = {"imported": len(imported), "ids": imported[:_CHANGE_IDS]}  # (a large import names its first ones)
            made += playbooks.version_if_changed(scope, name, time.time(), reason="import", change=change)
        self._strategies_written.clear()
        return made

    def _wrote(self, lines: Sequence[tuple[Any, ...]]) -> None:
        """Note lines written, each ``(line number, ...)`` (for :attr:`ImportLineError.later`)."""
        if lines:
            self._through = max(self._through, *(line[0] for line in lines))
        self._done(lines)

    def _done(self, lines: Sequence[tuple[Any, ...]]) -> None:
        for line in lines:
            self._open.pop(line[0], None)

    def summary(self) -> dict[str, int]:
        return {**self.counts, "calls": self.calls}

    def stopped(self, exc: MemoristError, line_no: int) -> StoreError:
        """The error ending an import that found the store locked, batch after retry.

        Not an :class:`ImportLineError`: no line is bad. The batches written before
        stay; the batch that failed wrote nothing. Lines of several scopes wait at
        once, so what was written is not all the lines before ``line_no``: running the
        import again finishes it (memory lines and verbatim turns with a time are
        not added twice).
        """
        done = self.summary()
        return StoreError(
            f"{exc} (tried {IMPORT_BUSY_ATTEMPTS} times); the import stopped at line {line_no}: "
            f"the batches written before it stay ({done['added']} added, {done['updated']} updated), "
            "and running the import again adds the rest"
        )


class ImportInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during an import: a KeyboardInterrupt that says what was written.

    ``summary`` counts what was written; ``resume`` is the first line read and not
    written yet (``from_line`` goes on from it: the lines before it are all written);
    ``later`` the last line written when lines of other scopes after ``resume`` were
    written already, else None.
    """

    def __init__(self, summary: dict[str, int], resume: int, later: int | None) -> None:
        super().__init__(f"import interrupted; go on from line {resume}")
        self.summary = summary
        self.resume = resume
        self.later = later


class _Bad(MemoristError):
    """A line that is not an import line at all (its message is the reason)."""


#: Metadata keys that act on the whole ``add`` call (the test tenant, the start
#: energy or tier): a line with any of them keeps its metadata at call level.
_CALL_METADATA = frozenset({"is_test", "tier", "energy", "type"})
#: Apart in time, within one line, of messages that have no time of their own (as add).
_STEP = 1e-6


def _folded(messages: list[Any], metadata: Any, timestamp: Any) -> list[dict[str, Any]] | None:
    """A line's messages carrying its metadata and timestamp, so that it can share
    an ``add`` call with lines of other metadata and times; None when it cannot (a
    bad value, which add() then names, or metadata that acts on the whole call).

    Equivalent to adding the line alone: add merges call metadata under each
    message's own, and gives a message without a time the call's, plus its index.
    """
    if metadata is not None and (not isinstance(metadata, dict) or _CALL_METADATA & metadata.keys()):
        return None
    try:
        at = validate.timestamp(timestamp)
    except ValidationError:
        return None
    out = []
    i = 0  # add counts the messages it keeps (not system ones, not blank ones)
    for message in messages:
        own = message.get("metadata")
        if own is not None and not isinstance(own, dict):
            return None
        folded = dict(message)
        if metadata:
            folded["metadata"] = {**metadata, **(own or {})}
        content = message.get("content")
        if message.get("role") != "system" and (not isinstance(content, str) or content.strip()):
            if at is not None and message.get("timestamp") is None:
                folded["timestamp"] = at + i * _STEP
            i += 1
        out.append(folded)
    return out


def _kept(message: Message) -> bool:
    """Whether add() stores ``message`` (it leaves out system and blank messages)."""
    return message.role != "system" and bool(message.content.strip())


def _speaker(meta: dict[str, Any], message: Message) -> tuple[Any, Any]:
    """The ``role`` and ``name`` add() writes in the metadata of a verbatim turn's
    memory, from its metadata (``meta``: the call's under the message's own)."""
    role = meta.get("role", message.role)
    name = meta.get("name", message.name or None)
    return role, name


def _exactly(scope: Scope) -> ScopeFilter:
    """The filter of this one scope (its run too)."""
    return ScopeFilter(scope.tenant_id, scope.user_id, scope.agent_id, scope.run_id)


def _taken(mid: str, old: MemoryRecord, tenant_id: str) -> str:
    """Why a memory line cannot take ``mid``: the store gives it to a memory of another
    scope. Ids are unique across a store, and an import updates a memory in place
    only within its own scope (as :func:`check_memories_json_ids` refuses a memories.json file)."""
    if old.scope.tenant_id != tenant_id:
        return f"id {mid!r} belongs to another tenant's memory"
    return (
        f"id {mid!r} is already the id of a memory of another scope in this store (another user, agent or run); "
        "an import never moves a memory: to copy it into this scope, leave out the line's \"id\" and a new one is made"
    )


def _refuse_unknown(obj: dict[str, Any], known: frozenset[str], kind: str, fields: str) -> None:
    """Refuse a ``kind`` line holding a field not among ``known`` (a misspelt "metdata"
    or "timestmap" would be left out silently), naming the first and the ``fields``."""
    extra = sorted(set(obj) - known, key=str)
    if extra:
        raise _Bad(f"{validate.show(extra[0])} is not a field of a {kind} line ({fields})")


def _clash(pending: list[tuple[int, MemoryRecord]]) -> tuple[int, int, str] | None:
    """The first memory line of ``pending`` whose id an earlier line gives to a memory
    of another scope: ``(its line, the earlier line, the id)``, or None."""
    first: dict[str, tuple[int, Scope]] = {}
    for line_no, record in pending:
        seen = first.setdefault(record.id, (line_no, record.scope))
        if seen[1] != record.scope:
            return line_no, seen[0], record.id
    return None


def _version(record: MemoryRecord) -> tuple[float, bool]:
    """How new a copy is: its last edit, or when it was retired (archived by a
    consolidation, an expiry or a promotion, which leave ``updated_at`` as it was);
    of two copies of one time, the archived one (retiring comes after)."""
    edited = record.updated_at if record.updated_at is not None else record.created_at
    if record.status is Status.ARCHIVED:
        return max(edited, record.valid_to if record.valid_to is not None else edited), True
    return edited, False


def _derived_id(obj: dict[str, Any]) -> str:
    import uuid

    try:
        basis = json.dumps([obj.get(k) for k in ("memory", *_SCOPE_KEYS, "created_at")], default=str)
    except (TypeError, ValueError, RecursionError):
        raise _Bad("has no id, and its memory, scope and created_at are not plain JSON values") from None
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "memorist-import:" + basis))


def import_lines(
    importer: Importer, lines: Iterable[str | dict[str, Any]], *, progress: Callable[[int], None] | None = None, from_line: int = 1,
) -> dict[str, int]:
    """Feed every line from line ``from_line`` on to ``importer`` and flush; returns
    the summary (``lines``: the lines read from ``from_line`` on). The playbooks whose
    strategies the lines written changed get their version, also when the import
    stops early (:meth:`Importer.version_playbooks`)."""
    try:
        return _import_lines(importer, lines, progress=progress, from_line=from_line)
    finally:
        try:
            importer.version_playbooks()
        except Exception:  # what the import wrote stays, and its own answer (or error) says more
            log.warning("import: the playbooks whose strategies it changed were not versioned", exc_info=True)


def _import_lines(
    importer: Importer, lines: Iterable[str | dict[str, Any]], *, progress: Callable[[int], None] | None, from_line: int,
) -> dict[str, int]:
    n = 0
    try:
        importer.ramp = progress is not None
        iterator = iter(lines)
        while True:
            try:
                raw = next(iterator)
            except StopIteration:
                break
            except UnicodeDecodeError as exc:
                # A text file opened by the caller that is not UTF-8: the lines read before
                # are kept, as for a bad line (the decoder reads ahead, so the bad bytes
                # may lie a few lines further on).
                importer.flush()
                raise ImportLineError(n + 1, f"the text from here on is not UTF-8 ({exc.reason})", importer.summary()) from exc
            n += 1
            if n == 1 and isinstance(raw, str):
                raw = raw.removeprefix("\ufeff")  # a byte order mark, as some editors write one
            if n < from_line:
                continue  # read, not imported: the numbers in errors stay the source's
            if progress is not None:  # told before the line is fed: a failing function changes nothing of it
                try:
                    progress(n)
                except Exception as exc:  # the caller's function failed: stop, as for a bad argument
                    raise ValidationError("progress", f"the progress function raised {type(exc).__name__}: {exc}; "
                                          f"the import stopped before line {n} (batches written before it stay)") from exc
            importer.feed(n, raw)
        try:
            importer.flush()
        except ImportLineError:
            raise
        except MemoristError as exc:
            if is_busy(exc):
                raise importer.stopped(exc, n) from exc
            raise ImportLineError(n, str(exc), importer.summary()) from exc
    except KeyboardInterrupt as exc:
        # Ctrl-C: the batches written stay; say what they were and where to go on from.
        first = importer.first_open
        resume = first if first is not None else max(n + 1, from_line)
        later = importer._through if importer._through > resume else None
        raise ImportInterrupted(importer.summary(), resume, later) from exc
    if from_line > 1 and n < from_line:  # (an empty source, read from its start, imports nothing)
        raise ValidationError("from_line", f"is {from_line}, but the source has {n} lines; nothing was imported")
    return {"lines": n - from_line + 1, **importer.summary()}


# the minimal memories.json format -----------------------------------------------------------
#: The keys of a memory in the minimal ``memories.json`` format,
#: and the scope ids Memorist adds when a memory has them. Other keys are not kept.
MEMORIES_JSON_KEYS = ("id", "memory", "user_id", "created_at", "updated_at", "metadata")
_MEMORIES_JSON_SCOPE_KEYS = ("agent_id", "run_id")
_MEMORIES_JSON_SHAPE = "{id, memory, user_id, created_at, updated_at?, metadata?}"


def memories_json_items(
    source: str | Any,
    *,
    defaults: dict[str, str | None] | None = None,
    max_chars: int = 100_000,
    max_metadata_depth: int = validate.METADATA_DEPTH,
    max_metadata_bytes: int = validate.METADATA_BYTES,
) -> list[dict[str, Any]]:
    """The memories of a ``memories.json`` file (one JSON array of memory objects,
    as a project keeps them in its ``memories.json``) as export items.

    ``source`` is the file's text or its parsed JSON: an array of memories
    ``{id, memory, user_id, created_at, updated_at?, metadata?}``. Each becomes the
    export item :meth:`memorist.Memory.import_` restores with its id and dates; a
    memory without user_id (agent_id, run_id) gets ``defaults``. Dates without a
    timezone are UTC, as everywhere in Memorist.

    The whole file is checked before anything is imported: a bad one raises
    :class:`~memorist.errors.ValidationError` naming the memory and field
    (``memories[2].created_at``) and saying what is wrong.
    """
    data = source
    if isinstance(source, str):
        data = _parse_memories_json(source)
    if not isinstance(data, list):
        hint = ""
        if isinstance(data, dict) and isinstance(data.get("results"), list):
            hint = ' (an API response? its memories are under "results")'
        raise ValidationError(
            "file",
            f"must be a JSON array of memories {_MEMORIES_JSON_SHAPE}, as a memories.json file holds them; "
            f"got {_json_kind(data)}{hint}",
        )
    items = []
    scopes: dict[Any, tuple[int, tuple[Any, ...]]] = {}  # id -> first index, scope
    for i, obj in enumerate(data):
        where = f"memories[{i}]"
        if not isinstance(obj, dict):
            raise ValidationError(where, f"must be a memory object {_MEMORIES_JSON_SHAPE}, got {_json_kind(obj)}")
        for key in ("id", "memory", "created_at"):
            if obj.get(key) is None:
                raise ValidationError(f"{where}.{key}", f"is required in a memory {_MEMORIES_JSON_SHAPE}")
        run = obj.get("run_id")
        if isinstance(run, str) and run.startswith((RUN_PREFIX, PREVIOUS_RUN_PREFIX)):
            # Written by an export of an earlier release: it would be imported as a fact.
            raise ValidationError(
                f"{where}.run_id",
                f"{validate.show(run)} is a run Memorist keeps for its own records (a playbook, a version of one, a "
                "trajectory, a reflection), not a memory; a memories-json file holds memories only: leave it out "
                "(`memorist export` in JSON lines carries those records)",
            )
        item: dict[str, Any] = {"type": "memory"}
        item.update((k, obj[k]) for k in (*MEMORIES_JSON_KEYS, *_MEMORIES_JSON_SCOPE_KEYS) if obj.get(k) is not None)
        if not any(item.get(k) is not None for k in _SCOPE_KEYS):
            if not defaults or not any(defaults.values()):
                raise ValidationError(f"{where}.user_id", "is missing, and no default scope was given")
            item.update((k, v) for k, v in defaults.items() if v is not None)
        try:
            record_from_item(
                item,
                "",
                max_chars=max_chars,
                max_metadata_depth=max_metadata_depth,
                max_metadata_bytes=max_metadata_bytes,
            )
        except ValidationError as exc:
            message = str(exc)[len(exc.field) + 2 :] if str(exc).startswith(f"{exc.field}: ") else str(exc)
            ident = obj.get("id")
            named = f" (memory {validate.show(ident)})" if exc.field != "memory_id" else ""
            field = "id" if exc.field == "memory_id" else exc.field
            raise ValidationError(f"{where}.{field}", message + named) from None
        # The same id twice is one memory (the newest copy wins), unless the scopes differ.
        scope = tuple(item.get(k) for k in _SCOPE_KEYS)
        first, seen = scopes.setdefault(item["id"], (i, scope))
        if seen != scope:
            raise ValidationError(
                f"{where}.id", f"{validate.show(item['id'])} is also the id of memories[{first}], of another scope"
            )
        items.append(item)
    return items


def check_memories_json_ids(store: Store, items: list[dict[str, Any]], tenant_id: str) -> None:
    """Refuse items (from :func:`memories_json_items`) whose id the store already gives to a
    memory of another scope.

    The importer takes a known id for the same memory and updates it in place; but
    a memories.json file's ids (``mem_1``, ``mem_2``, ...) are only unique within one project's
    file, so a second project's ``mem_1`` would overwrite the first's. Raises
    :class:`~memorist.errors.ValidationError` naming the memory.
    """
    stored = store.get_many(list(dict.fromkeys(item["id"] for item in items)))
    for i, item in enumerate(items):
        old = stored.get(item["id"])
        if old is None:
            continue
        if old.scope != Scope(tenant_id, *(item.get(k) or "" for k in _SCOPE_KEYS)):
            raise ValidationError(
                f"memories[{i}].id",
                f"{validate.show(item['id'])} is already the id of a memory of another scope in this store "
                "(a memories.json file's ids are unique only within its own project); nothing was imported",
            )


def _parse_memories_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        hint = ""
        if exc.msg == "Extra data":
            first = text.lstrip().split("\n", 1)[0]
            try:
                if isinstance(json.loads(first), dict):
                    hint = "; it looks like JSON lines (one object per line), Memorist's own export format"
            except ValueError:
                pass
        raise ValidationError("file", f"is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}){hint}") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ValidationError("file", f"is not usable JSON: {exc}") from None
    except RecursionError:
        raise ValidationError("file", "nests too deep to be read") from None


def _json_kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    for kind, name in names.items():
        if isinstance(value, kind):
            return name
    return "a number" if isinstance(value, int | float) else type(value).__name__


def memories_json_memory(item: dict[str, Any]) -> dict[str, Any]:
    """An export item as a memory of the minimal ``memories.json`` format:
    ``{id, memory, user_id, created_at, updated_at, metadata}`` (``updated_at`` equals
    ``created_at`` for a memory never updated, as that format writes it), plus ``agent_id`` and
    ``run_id`` when the memory has them."""
    memory = {key: item.get(key) for key in MEMORIES_JSON_KEYS}
    memory["metadata"] = memory["metadata"] or {}
    memory.update((k, item[k]) for k in _MEMORIES_JSON_SCOPE_KEYS if item.get(k) is not None)
    return memory


def memories_json_memories(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The active memories among export items (:func:`export_lines`) as the array
    a project keeps in its ``memories.json``, oldest first.
    It has no archived state, no event log and no kinds: those are left out, and so
    are the learning loop's records and the minutes (playbooks, their versions and
    strategies, trajectories, reflections), which would come back as plain facts."""
    return [
        memories_json_memory(item)
        for item in items
        if item.get("type") == "memory" and item.get("status", Status.ACTIVE.value) == Status.ACTIVE.value
        and _fact_item(item)
    ]


def _fact_item(item: dict[str, Any]) -> bool:
    """Whether an export item is one of the user's memories (:func:`~memorist.model.is_fact`)."""
    try:
        kind = Kind(item.get("kind") or Kind.FACT.value)
    except ValueError:
        return False
    return not item.get("section") and kind not in LEARNING_KINDS and kind not in MINUTE_KINDS


__all__ = [
    "MEMORIES_JSON_KEYS",
    "IMPORT_BATCH",
    "ImportInterrupted",
    "Importer",
    "check_memories_json_ids",
    "memories_json_items",
    "memories_json_memories",
    "memories_json_memory",
    "export_item",
    "export_lines",
    "import_lines",
    "record_from_item",
]
