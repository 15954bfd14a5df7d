"""The evaluation run over a project's minutes index.

Scores every indexed minute (:mod:`memorist.policies.evaluation`), then, by the
policy's :func:`~memorist.policies.evaluation.plan`: deduplicates near-identical
minutes, resolves contradicting ones (the lower-scored is superseded, each side
linked to the other in its lineage), and prunes those scoring under 0.3. Every
removal archives the index entry only — the minute stays in the log, and
:meth:`memorist.pipelines.minutes.Minutes.reindex` brings it back. The run's
statistics (minutes in the log, kept in the index, pruned, average score) are
appended to the log as a ``minute_evaluation`` event, all in one transaction.

``dry_run=True`` computes the same report and writes nothing, not even the event.

The run's work grows with the project: it is counted on the caller's meter
(:func:`memorist.work.charge`: a unit per minute read, scored and embedded, and per
comparison row ``1 + n/16``), so a service charges it and gives it up when its client
leaves. Duplicates and contradictions are looked for among the
:data:`~memorist.policies.evaluation.MAX_COMPARED` best minutes and the rest
(``remaining`` says how many are below them: compared with those only).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..model import Scope, Status
from ..policies.evaluation import MAX_COMPARED, Candidate, EvaluationConfig, Removal, plan, score
from ..policies.minutes import Insight, is_negated, outcome_of
from ..work import charge
from .minutes import OP_DUPLICATE, OP_LINK, OP_PRUNE, OP_SUPERSEDE, Minutes, minute_of
from .undo import OP_EVALUATION, OP_EVALUATION_UNDO, OPERATION_ID, UNDO, new_operation_id, undo_payload

_EMBED_CHUNK = 512  # texts embedded at a time (each charged: a caller that left stops the run)
_OPS = {"duplicate": OP_DUPLICATE, "superseded": OP_SUPERSEDE, "low_score": OP_PRUNE}
_LINKS = {"duplicate": "duplicate_of", "superseded": "superseded_by"}


def evaluate(
    minutes: Minutes,
    *,
    project_id: str | None = None,
    now: float,
    dry_run: bool = False,
    config: EvaluationConfig | None = None,
) -> dict[str, Any]:
    """Score, deduplicate, resolve, prune; returns the report::

        {"dry_run", "project_id", "in_log", "in_index", "kept_in_index", "pruned",
         "deduplicated", "superseded", "pruned_low_score", "average_score",
         "removed": [{"id", "reason", "link", "composite"}], "scores": {id: {...}},
         "remaining", "event_seq"}

    ``pruned`` counts every entry that left the index (the three reasons together);
    ``average_score`` is the mean composite of those kept (0.0 when none is);
    ``remaining`` the minutes ranked below the :data:`MAX_COMPARED` best, compared
    for duplicates and contradictions with those only (0 in a smaller index).
    """
    config = config or EvaluationConfig()
    scope = minutes.scope(project_id)
    minutes.store.flush()  # buffered retrievals count in relevance
    # As of ``now``: a minute that happened later is neither scored nor counted.
    log = [e for e in minutes.iter_log(scope) if minute_of(e).ts <= now]
    referenced_by: Counter[str] = Counter(ref for e in log for ref in dict.fromkeys(minute_of(e).context_references))
    records = [r for r in minutes.index_records(scope) if r.created_at <= now]  # read: charged
    charge(len(records))  # scored
    insights = {r.id: [Insight.from_dict(i) for i in (r.metadata.get("minute") or {}).get("insights") or ()] for r in records}
    max_retrieved = max((r.access_count for r in records), default=0)
    max_refs = max((referenced_by[r.id] for r in records), default=0)
    scores = {}
    candidates = []
    for r in records:
        outcome = outcome_of(insights[r.id])
        s = score(
            age_seconds=now - r.created_at,
            retrieved=r.access_count,
            max_retrieved=max_retrieved,
            outcome=None if outcome is None else outcome.confidence,
            referenced_by=referenced_by[r.id],
            max_referenced_by=max_refs,
            weeks=config.recency_weeks,
        )
        scores[r.id] = s
        note = str((r.metadata.get("minute") or {}).get("memory_note") or "")
        candidates.append(Candidate(r.id, r.created_at, s.composite, None if outcome is None else outcome.confidence, is_negated(note)))
    removals = plan(candidates, _vectors(minutes, records), config)
    gone = {x.id for x in removals}
    kept = [scores[r.id].composite for r in records if r.id not in gone]
    reasons = Counter(x.reason for x in removals)
    report: dict[str, Any] = {
        "dry_run": dry_run,
        "project_id": scope.user_id,
        "in_log": len(log),
        "in_index": len(records),
        "kept_in_index": len(kept),
        "pruned": len(removals),
        "deduplicated": reasons["duplicate"],
        "superseded": reasons["superseded"],
        "pruned_low_score": reasons["low_score"],
        "average_score": round(sum(kept) / len(kept), 4) if kept else 0.0,
        "removed": [{"id": x.id, "reason": x.reason, "link": x.link, "composite": round(x.composite, 4)} for x in removals],
        "scores": {rid: s.to_dict() for rid, s in scores.items()},
        "remaining": max(0, len(records) - MAX_COMPARED),
        "event_seq": None,
    }
    if dry_run:
        return report
    _write(minutes, removals, scores, report, now)
    return report


def _vectors(minutes: Minutes, records: list[Any]) -> np.ndarray:
    """The records' embeddings, a chunk at a time, each text charged."""
    parts = []
    for start in range(0, len(records), _EMBED_CHUNK):
        texts = [r.search_text or r.text for r in records[start:start + _EMBED_CHUNK]]
        charge(len(texts))
        parts.append(np.asarray(minutes.host.embedder.embed(texts), dtype=np.float32))
    return np.concatenate(parts) if parts else np.zeros((0, 1), dtype=np.float32)


def _write(minutes: Minutes, removals: list[Removal], scores: dict[str, Any], report: dict[str, Any], now: float) -> None:
    # Both sides of every link: the removed entry names the one it gave way to, and
    # that one lists what it absorbed (merged_from) or superseded (supersedes).
    gained: dict[str, dict[str, list[str]]] = {}
    for removal in removals:
        if removal.link is not None:
            key = "supersedes" if removal.reason == "superseded" else "merged_from"
            gained.setdefault(removal.link, {}).setdefault(key, []).append(removal.id)

    def with_links(record: Any, extra: dict[str, Any]) -> dict[str, Any]:
        lineage = {**record.lineage, **extra}
        for key, ids in gained.get(record.id, {}).items():
            lineage[key] = list(dict.fromkeys([*record.lineage.get(key, []), *ids]))
        return lineage

    stats = {k: report[k] for k in ("in_log", "in_index", "kept_in_index", "pruned", "deduplicated", "superseded",
                                    "pruned_low_score", "average_score")}
    removed = {x.id for x in removals}
    # Every event of the run carries its id: once the run is rolled back, its
    # per-minute events are no later change standing in the way of an earlier run's.
    operation = new_operation_id("minute-evaluation")
    with minutes.store.transaction() as batch:
        # Read again inside the transaction: retrievals or a run that committed since
        # are kept, not overwritten; an entry another run already removed is left.
        by_id = {i: r for i, r in batch.get_many([*removed, *gained]).items() if r.status is Status.ACTIVE}
        changed = []
        for removal in removals:
            record = by_id.get(removal.id)
            if record is None:
                continue
            extra: dict[str, Any] = {"pruned": {"reason": removal.reason, "at": now, "composite": round(removal.composite, 4)}}
            if removal.link is not None:
                extra[_LINKS[removal.reason]] = removal.link
            changed.append(record)
            minutes.remove_from_index(
                batch, record, op=_OPS[removal.reason], lineage=with_links(record, extra), now=now,
                payload={"reason": removal.reason, "link": removal.link, "scores": scores[removal.id].to_dict(), OPERATION_ID: operation},
            )
        for winner, links in gained.items():
            record = by_id.get(winner)
            if winner in removed or record is None:
                continue  # its links went with its own removal above (or it is gone)
            changed.append(record)
            batch.update(record.copy(lineage=with_links(record, {})), None, old_text=record.text, op=OP_LINK,
                         payload={**links, OPERATION_ID: operation})
        scope = Scope(minutes.tenant, report["project_id"])
        report["event_seq"] = batch.event(OP_EVALUATION, scope, payload=stats)
        if changed:
            # The run's last event holds every entry it archived or linked, as it was:
            # memory.rollback(report["rollback_id"]) puts back what it dropped.
            report["rollback_id"] = batch.event(OP_EVALUATION_UNDO, scope, payload={"evaluation_event": report["event_seq"],
                                                                                   OPERATION_ID: operation, UNDO: undo_payload(changed)})


__all__ = ["OP_EVALUATION", "OP_EVALUATION_UNDO", "evaluate"]
