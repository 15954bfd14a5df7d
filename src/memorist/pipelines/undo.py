"""Rollback of any merge or reconciliation, from the event log.

An operation that merges, drops or rewrites memories is made reversible by one event
of its own: that event's payload holds ``"undo": {"before": [...], "created": [...]}``,
the whole of every memory it changed as it was before (:func:`snapshot`: text,
metadata, counters, strengths, dates, lineage, status and id) and the ids of the
memories it made. The operation's id is that event's ``seq``; a consolidation run is
also found by its run id, which is the event's ``memory_id``.

The reversible operations: a consolidation run (``consolidation``), a reconciler
UPDATE or DELETE (the ``update``/``delete`` event of the memory), a curation that merged
or dropped strategies (``curation``), a playbook's dedup merge (``merge``), and an
evaluation of the minutes (``minute_evaluation_undo``: its duplicates, superseded and
pruned entries back in the index).

An operation that writes several events (one per memory it changes, then its undo
record) writes the same operation id in each (``payload["operation_id"]``; a
consolidation's events carry its run id as ``run_id``), and its rollback records the
ids it undid (``operation_ids``): once an operation is rolled back, none of its events
counts as a later change of a memory, so operations undone newest first return the
store to before the oldest.

:func:`rollback` writes every snapshot back (the vector recomputed from the text),
retires (deletes) what the operation made, and logs a ``rollback`` event naming the
operation (``payload["rolled_back"]``) and on each memory it restored. It refuses:

- an id that names no reversible operation of the caller's scope (NotFoundError);
- an operation already rolled back (ConflictError naming the rollback's seq);
- an operation one of whose memories changed again since (ConflictError naming the
  later event): writing the old state back would silently lose that later change.
  Roll the later operation back first, or leave it.

A later event that changed only a memory's bookkeeping is no such change: an energy
``decay`` of a maintenance run, or the renewal of a fact's validity when it was said
again (payload ``"bookkeeping"``). The rollback puts the memory back as it was,
bookkeeping included: the next maintenance run decays it again from there, as it
would have; a renewal of a merged or rewritten memory belonged to the text the
rollback takes away.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import numpy as np

from ..errors import ConflictError, NotFoundError, ValidationError
from ..model import EventRecord, Kind, MemoryClass, MemoryRecord, Scope, Status, Tier
from ..store.base import ScopeFilter, Store
from ..validate import MAX_SEQ
from .playbooks import as_filed, with_current_names

UNDO = "undo"
OP_ROLLBACK = "rollback"
#: The payload key of the operation an event is part of (see the module's docstring).
OPERATION_ID = "operation_id"
#: A minutes evaluation's summary event, and the event that lets its removals be
#: rolled back (written next, in the same transaction, naming the summary's seq).
OP_EVALUATION = "minute_evaluation"
OP_EVALUATION_UNDO = "minute_evaluation_undo"
#: The payload key of an event that changed only a memory's bookkeeping (its value
#: says which: ``"validity"``); such an event never stands in the way of a rollback.
BOOKKEEPING = "bookkeeping"
#: Operations that change only bookkeeping, whatever their payload (a maintenance
#: run's energy decay: its energy and the time it was decayed to).
BOOKKEEPING_OPS = frozenset({"decay"})
#: Most memories one operation may name (a consolidation batch is far below it).
MAX_UNDO_MEMORIES = 100_000
#: How far past one of an operation's events its undo record is looked for (it is the
#: operation's last event, written in the same transaction): pages of the log, read
#: only to name the operation in an answer.
_SCAN_PAGE = 1_000
_SCAN_PAGES = 1 + 4 * MAX_UNDO_MEMORIES // _SCAN_PAGE


def snapshot(record: MemoryRecord) -> dict[str, Any]:
    """``record`` as a JSON object holding every stored field, exactly: one entry per
    field of :class:`MemoryRecord` (so a field added there is kept by a rollback too),
    the scope as its four ids, enums as their values, lists and mappings copied."""
    return {f.name: _plain(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _plain(value: Any) -> Any:
    if isinstance(value, Scope):
        return [value.tenant_id, value.user_id, value.agent_id, value.run_id]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def restored(snap: dict[str, Any]) -> MemoryRecord:
    """The memory a :func:`snapshot` holds (a playbook's former name as it is now)."""
    fields = dict(snap)
    fields["scope"] = Scope(*fields["scope"])
    fields["kind"] = Kind(fields["kind"])
    fields["memory_class"] = MemoryClass(fields["memory_class"])
    fields["tier"] = Tier(fields["tier"])
    fields["status"] = Status(fields["status"])
    fields["tags"] = list(fields["tags"])
    return with_current_names(MemoryRecord(**fields))


def undo_payload(before: Sequence[MemoryRecord], created: Sequence[str] = ()) -> dict[str, Any]:
    """The ``"undo"`` entry of an operation's event payload."""
    return {"before": [snapshot(r) for r in before], "created": list(created)}


def new_operation_id(kind: str) -> str:
    """A fresh id for one reversible operation of ``kind`` (``"merge"``, ``"curation"``),
    written in each of its events as ``payload[OPERATION_ID]``."""
    return f"{kind}-{uuid.uuid4().hex}"


def operation_of(event: EventRecord) -> str | None:
    """The id of the operation ``event`` is part of (a consolidation's: its run id), or None."""
    for key in (OPERATION_ID, "run_id"):
        value = event.payload.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def is_bookkeeping(event: EventRecord) -> bool:
    """Whether ``event`` changed only its memory's bookkeeping (see the module's docstring)."""
    return event.op in BOOKKEEPING_OPS or bool(event.payload.get(BOOKKEEPING))


def _undo_event(store: Store, event: EventRecord) -> EventRecord | None:
    """The event holding the undo record of the operation ``event`` is part of:
    ``event`` itself when it is of no operation, else the last of the operation's
    events from ``event`` on that carries one (an operation writes its whole record
    last, in the same transaction; a replacement's earlier DELETEs carry a part)."""
    operation = event.payload.get(OPERATION_ID)
    found = event if isinstance(event.payload.get(UNDO), dict) else None
    if event.op == OP_EVALUATION:
        # An evaluation's summary (the seq its report gives as event_seq): its undo
        # record, when it dropped any, is written next in the same transaction.
        return next((e for e in store.events(None, since=event.seq, limit=_SCAN_PAGE)
                     if e.op == OP_EVALUATION_UNDO and e.payload.get("evaluation_event") == event.seq), None)
    if not isinstance(operation, str) or not operation:
        return found
    since = event.seq
    for _ in range(_SCAN_PAGES):
        page = store.events(None, since=since, limit=_SCAN_PAGE)
        more = False  # whether this page still holds events of the operation
        for other in page:
            if other.payload.get(OPERATION_ID) == operation:
                more = True
                if isinstance(other.payload.get(UNDO), dict):
                    found = other
        if len(page) < _SCAN_PAGE or (found is not None and not more):
            return found
        since = page[-1].seq
    return found


def _event_by_seq(store: Store, seq: int) -> EventRecord | None:
    found = store.events(None, since=seq - 1, limit=1)
    return found[0] if found and found[0].seq == seq else None


def find_operation(store: Store, target: Any, scope: ScopeFilter) -> tuple[list[EventRecord], Any]:
    """The events of the reversible operation ``target`` names (the seq of any of its
    events, or a run id: a run may span several transactions, one event each) and the
    id its rollback records. NotFoundError for anything else, and for an operation
    outside ``scope``."""
    if isinstance(target, bool) or target is None or not isinstance(target, int | str):
        raise ValidationError("event_or_run_id", f"must be an event's seq number or a run id, got {target!r}")
    label: Any = target
    if isinstance(target, str) and target.strip().isdigit():
        label = int(target.strip())
    events: list[EventRecord] = []
    if isinstance(label, int):
        if not 1 <= label <= MAX_SEQ:
            raise ValidationError("event_or_run_id", f"an event's seq number is from 1 to {MAX_SEQ:,}, got {label}")
        event = _event_by_seq(store, label)
        run = event.payload.get("run_id") if event is not None else None
        if isinstance(run, str) and run:
            label = run  # an event of a run (one transaction's, one memory's): the run is what is rolled back
        elif event is not None:
            # Any event of a multi-event operation names the operation.
            undo = _undo_event(store, event)
            if undo is not None:
                events, label = [undo], undo.seq
    if isinstance(label, str):
        label = label.strip()
        if not label or len(label) > 200:
            raise ValidationError("event_or_run_id", "must be an event's seq number or a run id")
        # A run's events are logged under its id; a memory's id names no operation
        # (it found the memory's own reversible changes, all of them at once).
        events = [e for e in store.history(label) if isinstance(e.payload.get(UNDO), dict) and operation_of(e) == label]
    if not events or not all(scope.matches(e.scope) for e in events):
        raise NotFoundError("reversible operation", str(target))
    return events, label


def _later_change(store: Store, events: Sequence[EventRecord], label: Any) -> None:
    """Refuse when the operation was rolled back already, or one of its memories
    changed after it."""
    seqs = {e.seq for e in events}
    own = {op for op in map(operation_of, events) if op is not None}
    run = label if isinstance(label, str) else None
    if run is not None:
        for other in store.history(run):
            if other.op == OP_ROLLBACK:
                raise ConflictError(f"operation {label} was already rolled back (event {_summary_seq(store, other)})")
    later: EventRecord | None = None
    for event in events:
        undo = event.payload[UNDO]
        ids = [s["id"] for s in undo.get("before", [])] + [str(i) for i in undo.get("created", [])]
        for mid in ids:
            history = store.history(mid)
            # A later operation that was rolled back, and its rollback, changed nothing:
            # its reversible events, and every other event of an operation it rolled
            # back (a run's "consolidate" events, a merge's update of the survivor,
            # an evaluation's per-minute events), found by their operation id.
            rollbacks = [e for e in history if e.op == OP_ROLLBACK]
            undone = {int(s) for e in rollbacks for s in e.payload.get("event_seqs", ())}
            undone_ops = {e.payload["rolled_back"] for e in rollbacks if isinstance(e.payload.get("rolled_back"), str)}
            undone_ops.update(str(o) for e in rollbacks for o in e.payload.get("operation_ids", ()))
            for other in history:
                if other.seq <= event.seq or other.seq in seqs:
                    continue
                if other.op == OP_ROLLBACK and (event.seq in other.payload.get("event_seqs", ()) or (run and other.payload.get("rolled_back") == run)):
                    raise ConflictError(f"operation {label} was already rolled back (event {_summary_seq(store, other)})")
                operation = operation_of(other)
                if other.seq in undone or (operation is not None and (operation in undone_ops or operation in own)):
                    continue
                if other.op == OP_ROLLBACK and other.payload.get("event_seqs") and set(other.payload["event_seqs"]) <= undone:
                    continue  # (a playbook's return to a version names no event: it is a change)
                if is_bookkeeping(other):
                    continue
                if later is None or other.seq < later.seq:
                    later = other
    if later is not None:
        if _reversible(store, later) is None:
            raise ConflictError(
                f"memory {later.memory_id} changed after operation {label} (event {later.seq}, {later.op}), "
                "which cannot be rolled back: rolling back would lose that change"
            )
        raise ConflictError(
            f"memory {later.memory_id} changed after operation {label} (event {later.seq}, {later.op}); "
            f"rolling back would lose that change: roll {_reversible(store, later)} back first"
        )


def _summary_seq(store: Store, event: EventRecord) -> int:
    """The seq of the event that sums up the rollback ``event`` belongs to (the one
    :func:`rollback` returns as ``rollback_seq``: written last in the same
    transaction, naming what was restored); ``event``'s own when none is found."""
    if "restored" in event.payload:
        return event.seq
    for later in store.events(None, since=event.seq, ops=[OP_ROLLBACK], limit=_SCAN_PAGE):
        if "restored" in later.payload and later.payload.get("event_seqs") == event.payload.get("event_seqs"):
            return later.seq
    return event.seq


def _reversible(store: Store, event: EventRecord) -> str | None:
    """How to name the reversible operation ``event`` belongs to ("event N" or
    "run R"), or None when it belongs to none (an expiry, a plain add)."""
    if isinstance(event.payload.get(UNDO), dict):
        return f"event {event.seq}"
    run = event.payload.get("run_id")
    if isinstance(run, str) and any(isinstance(e.payload.get(UNDO), dict) for e in store.history(run)):
        return f"run {run}"
    undo = _undo_event(store, event)
    return f"event {undo.seq}" if undo is not None else None


def rollback(store: Store, target: Any, scope: ScopeFilter, embed: Callable[[list[str]], np.ndarray], *, actor: str = "rollback") -> dict[str, Any]:
    """Undo the operation ``target`` names (see the module's docstring). Returns
    ``{"rolled_back", "op", "event_seqs", "restored": [ids], "retired": [ids], "rollback_seq"}``."""
    events, label = find_operation(store, target, scope)
    befores: list[MemoryRecord] = []
    created: list[str] = []
    # Newest operation first: a memory two transactions of one run changed gets its
    # oldest state last, so that is the state it returns to.
    for event in sorted(events, key=lambda e: -e.seq):
        undo = event.payload[UNDO]
        befores.extend(restored(s) for s in undo.get("before", []))
        created.extend(str(i) for i in undo.get("created", []))
    if len(befores) + len(created) > MAX_UNDO_MEMORIES:
        raise ValidationError("event_or_run_id", f"operation {label} names more than {MAX_UNDO_MEMORIES} memories")
    _later_change(store, events, label)  # refused before the embedding, when it can be already
    final: dict[str, MemoryRecord] = {}
    for record in befores:
        final[record.id] = record  # the last written is the oldest state
    active = [r for r in final.values() if r.status is Status.ACTIVE]
    vectors = embed([r.search_text or r.text for r in active]) if active else None
    vector_of = {r.id: vectors[i] for i, r in enumerate(active)} if vectors is not None else {}
    first = min(events, key=lambda e: e.seq)
    payload: dict[str, Any] = {"rolled_back": label, "operation": first.op, "event_seqs": sorted(e.seq for e in events)}
    operations = sorted({op for op in map(operation_of, events) if op is not None})
    if operations:
        payload["operation_ids"] = operations
    retired: list[str] = []
    with store.transaction() as batch:
        # What was read above may have changed since (another writer, another
        # process): with the operation's spaces locked, no other writer can change
        # them now; read it again and judge it here, or a rollback racing an erasure
        # would bring the erased memory back, one racing an update overwrite it, and
        # two racing each other both pass.
        for space in sorted({e.scope.space for e in events}):
            batch.space_version(Scope(*space))
        again, _ = find_operation(store, target, scope)  # gone (erased): not found
        if sorted(e.seq for e in again) != sorted(e.seq for e in events):
            raise ConflictError(f"operation {label} changed while it was being rolled back; try again")
        _later_change(store, events, label)
        current = batch.get_many([*final, *created])
        # A memory is restored where it is filed now: a tenant's adoption of the
        # development tenant's memories (`memorist keys adopt`) moves them, and the
        # states the log keeps name their old tenant. One now outside the caller's
        # scope is not the caller's to change: the operation is refused whole.
        for mid, held in current.items():
            if not scope.matches(held.scope):
                raise ConflictError(
                    f"memory {mid} has moved out of this scope since operation {label} "
                    f"(it is now filed under tenant {held.scope.tenant_id!r}); it cannot be rolled back from here"
                )
        for mid in dict.fromkeys(created):
            made = current.get(mid)
            if made is not None and made.status is not Status.DELETED and mid not in final:
                batch.delete(made, op=OP_ROLLBACK, actor=actor, payload=payload)
                retired.append(mid)
        for record in final.values():
            held = current.get(record.id)
            record = as_filed(record, held)
            if held is not None and held.scope != record.scope:
                record = record.copy(scope=held.scope)
            if held is not None:
                # Retrievals since are no change of the memory, and no event: they stay
                # counted (an evaluation's relevance and the energy policy read them).
                record = record.copy(
                    access_count=max(record.access_count, held.access_count),
                    last_access={c: max(int(record.last_access.get(c, 0)), int(held.last_access.get(c, 0)))
                                 for c in {*record.last_access, *held.last_access}},
                )
            if held is not None:
                batch.update(record, vector_of.get(record.id), old_text=held.text, op=OP_ROLLBACK, actor=actor, payload=payload)
            else:
                batch.add(record, vector_of.get(record.id), actor=actor, payload=payload)
        seq = batch.event(OP_ROLLBACK, first.scope, memory_id=label if isinstance(label, str) else None, actor=actor,
                          payload={**payload, "restored": list(final), "retired": retired})
    return {"rolled_back": label, "op": first.op, "event_seqs": sorted(e.seq for e in events), "restored": list(final),
            "retired": retired, "rollback_seq": seq}


__all__ = [
    "BOOKKEEPING",
    "BOOKKEEPING_OPS",
    "OPERATION_ID",
    "OP_ROLLBACK",
    "UNDO",
    "find_operation",
    "is_bookkeeping",
    "new_operation_id",
    "operation_of",
    "restored",
    "rollback",
    "snapshot",
    "undo_payload",
]
