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

:func:`rollback` writes every snapshot back (the vector recomputed from the text),
retires (deletes) what the operation made, and logs a ``rollback`` event naming the
operation (``payload["rolled_back"]``) and on each memory it restored. It refuses:

- an id that names no reversible operation of the caller's scope (NotFoundError);
- an operation already rolled back (ConflictError naming the rollback's seq);
- an operation one of whose memories changed again since (ConflictError naming the
  later event): writing the old state back would silently lose that later change.
  Roll the later operation back first, or leave it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import numpy as np

from ..errors import ConflictError, NotFoundError, ValidationError
from ..model import EventRecord, Kind, MemoryClass, MemoryRecord, Scope, Status, Tier
from ..store.base import ScopeFilter, Store
from ..validate import MAX_SEQ

UNDO = "undo"
OP_ROLLBACK = "rollback"
#: Most memories one operation may name (a consolidation batch is far below it).
MAX_UNDO_MEMORIES = 100_000


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
    """The memory a :func:`snapshot` holds."""
    fields = dict(snap)
    fields["scope"] = Scope(*fields["scope"])
    fields["kind"] = Kind(fields["kind"])
    fields["memory_class"] = MemoryClass(fields["memory_class"])
    fields["tier"] = Tier(fields["tier"])
    fields["status"] = Status(fields["status"])
    fields["tags"] = list(fields["tags"])
    return MemoryRecord(**fields)


def undo_payload(before: Sequence[MemoryRecord], created: Sequence[str] = ()) -> dict[str, Any]:
    """The ``"undo"`` entry of an operation's event payload."""
    return {"before": [snapshot(r) for r in before], "created": list(created)}


def _event_by_seq(store: Store, seq: int) -> EventRecord | None:
    found = store.events(None, since=seq - 1, limit=1)
    return found[0] if found and found[0].seq == seq else None


def find_operation(store: Store, target: Any, scope: ScopeFilter) -> tuple[list[EventRecord], Any]:
    """The events of the reversible operation ``target`` names (a seq, or a run id:
    a run may span several transactions, one event each) and the id its rollback
    records. NotFoundError for anything else, and for an operation outside ``scope``."""
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
        if event is not None and isinstance(event.payload.get(UNDO), dict):
            run = event.payload.get("run_id")
            if isinstance(run, str) and run == event.memory_id:
                label = run  # one transaction of a run: the run is what is rolled back
            else:
                events = [event]
    if isinstance(label, str):
        label = label.strip()
        if not label or len(label) > 200:
            raise ValidationError("event_or_run_id", "must be an event's seq number or a run id")
        events = [e for e in store.history(label) if isinstance(e.payload.get(UNDO), dict)]
    if not events or not all(scope.matches(e.scope) for e in events):
        raise NotFoundError("reversible operation", str(target))
    return events, label


def _later_change(store: Store, events: Sequence[EventRecord], label: Any) -> None:
    """Refuse when the operation was rolled back already, or one of its memories
    changed after it."""
    seqs = {e.seq for e in events}
    run = label if isinstance(label, str) else None
    if run is not None:
        for other in store.history(run):
            if other.op == OP_ROLLBACK:
                raise ConflictError(f"operation {label} was already rolled back (event {other.seq})")
    later: EventRecord | None = None
    for event in events:
        undo = event.payload[UNDO]
        ids = [s["id"] for s in undo.get("before", [])] + [str(i) for i in undo.get("created", [])]
        for mid in ids:
            history = store.history(mid)
            # A later operation that was rolled back, and its rollback, changed nothing:
            # its reversible events, and the events of a run it rolled back (the
            # memory's own "consolidate" event of a consolidation run).
            rollbacks = [e for e in history if e.op == OP_ROLLBACK]
            undone = {int(s) for e in rollbacks for s in e.payload.get("event_seqs", ())}
            undone_runs = {e.payload["rolled_back"] for e in rollbacks if isinstance(e.payload.get("rolled_back"), str)}
            for other in history:
                if other.seq <= event.seq or other.seq in seqs:
                    continue
                if other.op == OP_ROLLBACK and (event.seq in other.payload.get("event_seqs", ()) or (run and other.payload.get("rolled_back") == run)):
                    raise ConflictError(f"operation {label} was already rolled back (event {other.seq})")
                if other.seq in undone or other.payload.get("run_id") in undone_runs:
                    continue
                if other.op == OP_ROLLBACK and set(other.payload.get("event_seqs", ())) <= undone:
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


def _reversible(store: Store, event: EventRecord) -> str | None:
    """How to name the reversible operation ``event`` belongs to ("event N" or
    "run R"), or None when it belongs to none (an expiry, a plain add)."""
    if isinstance(event.payload.get(UNDO), dict):
        return f"event {event.seq}"
    run = event.payload.get("run_id")
    if isinstance(run, str) and any(isinstance(e.payload.get(UNDO), dict) for e in store.history(run)):
        return f"run {run}"
    return None


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
    _later_change(store, events, label)
    final: dict[str, MemoryRecord] = {}
    for record in befores:
        final[record.id] = record  # the last written is the oldest state
    active = [r for r in final.values() if r.status is Status.ACTIVE]
    vectors = embed([r.search_text or r.text for r in active]) if active else None
    vector_of = {r.id: vectors[i] for i, r in enumerate(active)} if vectors is not None else {}
    first = min(events, key=lambda e: e.seq)
    payload: dict[str, Any] = {"rolled_back": label, "operation": first.op, "event_seqs": sorted(e.seq for e in events)}
    retired: list[str] = []
    with store.transaction() as batch:
        current = batch.get_many([*final, *created])
        for mid in dict.fromkeys(created):
            made = current.get(mid)
            if made is not None and made.status is not Status.DELETED and mid not in final:
                batch.delete(made, op=OP_ROLLBACK, actor=actor, payload=payload)
                retired.append(mid)
        for record in final.values():
            held = current.get(record.id)
            if held is not None:
                batch.update(record, vector_of.get(record.id), old_text=held.text, op=OP_ROLLBACK, actor=actor, payload=payload)
            else:
                batch.add(record, vector_of.get(record.id), actor=actor, payload=payload)
        seq = batch.event(OP_ROLLBACK, first.scope, memory_id=label if isinstance(label, str) else None, actor=actor,
                          payload={**payload, "restored": list(final), "retired": retired})
    return {"rolled_back": label, "op": first.op, "event_seqs": sorted(e.seq for e in events), "restored": list(final),
            "retired": retired, "rollback_seq": seq}


__all__ = ["OP_ROLLBACK", "UNDO", "find_operation", "restored", "rollback", "snapshot", "undo_payload"]
