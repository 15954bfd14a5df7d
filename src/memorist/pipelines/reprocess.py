"""Reprocess: turns whose extraction failed get a second chance.

When an LLM extractor fails (after its retries and its repair retry), the turn is
still written to the log — its messages are never lost — with
``{"pending": true, "reason": ...}``, and the heuristic extractor's facts are
applied so the user has memories right away. Those additions are *provisional*.

:func:`reprocess` takes each pending turn, oldest first, and runs extraction again
from the messages stored in its event:

- if extraction fails again, nothing changes but a ``reprocess_failed`` event (with
  the reason and the calls it cost); the turn stays pending;
- if it succeeds, in one transaction: the provisional memories the turn added that
  nobody has changed since are kept when the model extracted the same fact and
  retracted otherwise (a ``delete`` event saying why); the model's other facts are
  reconciled with the scope's memories as in ``add`` (with the importance the caller
  gave ``add``, which the turn keeps); a ``turn_processed`` event
  names the turn, which resolves it. Changes the fallback made to *older* memories
  (a heuristic UPDATE or DELETE) stay; their history keeps the earlier text.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import StoreError
from ..llm.base import recording
from ..model import EventRecord, MemoryRecord, Message, Status
from ..policies.text import content_hash
from ..store.base import ScopeFilter
from .ingest import candidates_of
from .llm_events import turn_flags, write_llm_calls

if TYPE_CHECKING:
    from .ingest import Ingestor

logger = logging.getLogger("memorist")

RETRACT_REASON = "provisional memory of a pending turn, replaced when the turn was reprocessed"


def _messages(payload: dict[str, Any]) -> list[Message]:
    out = []
    for m in payload.get("messages") or []:
        if isinstance(m, dict) and isinstance(m.get("content"), str):
            out.append(Message(role=str(m.get("role") or "user"), content=m["content"], name=m.get("name")))
    return out


def _when(event: EventRecord) -> float:
    raw = event.payload.get("timestamp")
    if isinstance(raw, str):
        try:
            return datetime.fromisoformat(raw).timestamp()
        except ValueError:
            pass
    return event.ts


def provisional_memories(ingestor: Ingestor, event: EventRecord) -> list[MemoryRecord]:
    """The memories a pending turn added that are still active and never changed."""
    scope = event.scope
    # The turn's own transaction wrote its add events right after it.
    window = len(event.payload.get("facts") or []) + 1
    adds = ingestor.store.events(
        ScopeFilter(scope.tenant_id, scope.user_id, scope.agent_id, scope.run_id),
        since=event.seq, ops=("add",), limit=window,
    )
    ids = [e.memory_id for e in adds if e.memory_id and e.payload.get("turn_event") == event.seq]
    records = ingestor.store.get_many(ids)
    return [
        r for mid in ids
        if (r := records.get(mid)) is not None and r.status is Status.ACTIVE and r.updated_at is None
    ]


def _importance(payload: dict[str, Any]) -> float | None:
    """The importance the caller gave ``add`` (kept in the turn's payload), if any."""
    value = payload.get("importance")
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        return None
    return float(value)


def reprocess_turn(ingestor: Ingestor, event: EventRecord) -> dict[str, Any]:
    """Run one pending turn again; see the module docstring."""
    seq, scope, payload = event.seq, event.scope, event.payload
    messages = _messages(payload)
    at = _when(event)
    metadata = payload.get("metadata") if isinstance(payload.get("metadata"), dict) else {}
    importance = _importance(payload)
    with recording(turn=True) as rec:
        facts = ingestor.extract(messages, at=at)  # capped per turn, as an add's
        failed = rec.failed("extractor")
        if failed is None:
            provisional = provisional_memories(ingestor, event)
            by_hash = {r.content_hash: r for r in provisional}
            kept: dict[str, MemoryRecord] = {}
            new_facts = []
            for fact in facts:
                match = by_hash.get(content_hash(fact.text))
                if match is not None:
                    kept[match.id] = match
                else:
                    new_facts.append(fact)
            retract = [r for r in provisional if r.id not in kept]
            gone = {r.id for r in retract}
            space = candidates_of(scope)
            vectors = (
                ingestor.embedder.embed([f.text for f in new_facts])
                if new_facts else np.zeros((0, ingestor.embedder.dim), np.float32)
            )
            existing = [[e for e in group if e.id not in gone] for group in ingestor.similar(space, new_facts, vectors)]
            decisions = ingestor.reconciler.reconcile(new_facts, existing) if new_facts else []
    if failed is not None:
        with ingestor.store.transaction() as batch:
            batch.event("reprocess_failed", scope, payload={"turn_event": seq, "reason": failed.reason})
            write_llm_calls(batch, scope, rec.calls, turn_event=seq)
        logger.warning("memorist: turn %d is still pending: %s", seq, failed.reason)
        return {"turn_event": seq, "status": "failed", "reason": failed.reason}
    vector_of = {f.text: vectors[i] for i, f in enumerate(new_facts)}
    allowed = {e.id for group in existing for e in group}
    results: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    with ingestor.store.transaction() as batch:
        for record in retract:
            batch.delete(record, payload={"turn_event": seq, "reason": RETRACT_REASON})
        for decision in decisions:
            outcome = ingestor.apply(batch, decision, scope=scope, metadata=metadata, at=at, turn=seq, vector_of=vector_of, allowed=allowed,
                                     importance=importance)
            if outcome is not None:
                results.append(outcome)
                counts[outcome["event"]] = counts.get(outcome["event"], 0) + 1
        flags = {k: v for k, v in turn_flags(rec).items() if k not in ("pending", "reason")}
        batch.event(
            "turn_processed",
            scope,
            payload={
                "turn_event": seq,
                "facts": [f.text for f in facts],
                "kept": sorted(kept),
                "retracted": sorted(gone),
                **flags,
            },
        )
        write_llm_calls(batch, scope, rec.calls, turn_event=seq)
    retracted = [{"id": r.id, "memory": r.text, "event": "DELETE", "reason": "retracted"} for r in retract]
    return {"turn_event": seq, "status": "processed", "results": retracted + results, "kept": len(kept)}


def reprocess(ingestor: Ingestor, scope: ScopeFilter | None, *, limit: int | None = None) -> dict[str, Any]:
    """Reprocess the pending turns of ``scope`` (all of them with None), oldest first."""
    turns = ingestor.store.pending_turns(scope, limit=limit)
    out = []
    for event in turns:
        try:
            out.append(reprocess_turn(ingestor, event))
        except StoreError as exc:  # e.g. another process reprocessed it meanwhile
            logger.warning("memorist: turn %d could not be reprocessed: %s", event.seq, exc)
            out.append({"turn_event": event.seq, "status": "failed", "reason": str(exc)})
    processed = sum(1 for r in out if r["status"] == "processed")
    return {
        "results": out,
        "processed": processed,
        "failed": len(out) - processed,
        "pending": len(ingestor.store.pending_turns(scope)),
    }


__all__ = ["RETRACT_REASON", "provisional_memories", "reprocess", "reprocess_turn"]
