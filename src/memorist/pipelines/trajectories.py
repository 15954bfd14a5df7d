"""Trajectories, traces and reflections, over the store contract.

- A **trajectory** is a memory of kind ``trajectory`` (run ``memorist:trajectories``)
  in its owner's space: the task description is its text; task type, status
  (``running`` until completed, then ``success``, ``failure`` or ``partial``),
  score, error, metrics (tokens, cost, duration), parent, start and completion
  times and the trace's hash are its metadata.
- Each **step** is an event of the append-only log (``trajectory_step``, filed
  under the trajectory's id), written as it happens: the log is the record of
  what happened, and it survives a crash mid-task.
- When the trajectory completes, its **trace** — the canonical step sequence — is
  addressed by content: SHA-256 of the canonical JSON
  (:func:`~memorist.policies.learning.trace_digest`). A trace is stored once per
  space, as a memory of kind ``trace`` (run ``memorist:traces``), found with
  ``find_active_hash``; identical step sequences share it. Failures (and
  partial runs) always store their trace, successes at the sample rate; an
  unsampled success keeps its hash, and its steps stay readable from the log.
- A **reflection** is a memory of kind ``reflection`` (run ``memorist:reflections``)
  linked to its trajectory (or trajectories, for a batch), holding the insights.

Retention: trajectories that completed (or started, if never completed)
more than ``trajectory_retention_days`` ago are deleted with their reflections;
a trace goes when no remaining trajectory uses it. These are memory rows, so they
can go; the step events stay in the log.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..embed.base import Embedder
from ..model import DEFAULT_CLASS, EventRecord, Kind, MemoryRecord, Scope, Status, from_epoch
from ..policies.learning import CREDIT_HISTORY, DAY, LearningConfig, canonical_steps, keep_trace, trace_digest
from ..policies.text import preview
from ..reserved import RUN_PREFIX, RUN_TRAJECTORIES
from ..roles.learning import Insights, Step, Trajectory
from ..store.base import ScopeFilter, Store

RUN_TRACES = f"{RUN_PREFIX}traces"
RUN_REFLECTIONS = f"{RUN_PREFIX}reflections"
#: Where each space keeps the outcomes of its runs per task type (what association
#: credit reads: it outlives the trajectories and reflections retention expires).
RUN_OUTCOMES = f"{RUN_PREFIX}outcomes"
STEP_OP = "trajectory_step"
RUNNING = "running"
DEFAULT_SCORES = {"success": 1.0, "partial": 0.5, "failure": 0.0}


def _iso(value: Any) -> str | None:
    return from_epoch(float(value)).isoformat() if isinstance(value, int | float) and not isinstance(value, bool) else None


def step_of(event: EventRecord) -> dict[str, Any]:
    """The step a ``trajectory_step`` event logged."""
    p = event.payload
    return {"type": p.get("type", ""), "description": p.get("description", ""), "metadata": p.get("metadata") or {}}


def step_time(event: EventRecord) -> float:
    """When a step was taken: when it was logged, or, for a step an import logged,
    the time its export gave it (``at`` in its payload)."""
    at = event.payload.get("at")
    return float(at) if isinstance(at, int | float) and not isinstance(at, bool) else event.ts


def logged_step(event: EventRecord) -> dict[str, Any]:
    """The step a ``trajectory_step`` event logged, with when it was taken (ISO-8601):
    as a trajectory shows it, and as its export line carries it."""
    return {**step_of(event), "at": from_epoch(step_time(event)).isoformat()}


def trajectory_view(record: MemoryRecord, steps: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A trajectory as the API returns it, one field per column of a trajectory."""
    meta = record.metadata
    out = {
        "trajectory_id": record.id,
        "tenant_id": record.scope.tenant_id or None,
        "user_id": record.scope.user_id or None,
        "agent_id": record.scope.agent_id or None,
        "task_description": record.text,
        "task_type": meta.get("task_type"),
        "status": meta.get("status", RUNNING),
        "success_score": meta.get("success_score"),
        "error_message": meta.get("error_message"),
        "duration_ms": meta.get("duration_ms"),
        "tokens_used": meta.get("tokens_used"),
        "cost_usd": meta.get("cost_usd"),
        "metrics": dict(meta.get("metrics") or {}),
        "parent_trajectory_id": meta.get("parent_trajectory_id"),
        "started_at": _iso(meta.get("started_at", record.created_at)),
        "completed_at": _iso(meta.get("completed_at")),
        "trace_hash": meta.get("trace_hash"),
        "trace_stored": bool(meta.get("trace_id")),
        "step_count": int(meta.get("step_count") or 0),
        "playbook": meta.get("playbook"),
    }
    if steps is not None:
        out["steps"] = [dict(s) for s in steps]
        out["step_count"] = len(steps)
    return out


def reflection_view(record: MemoryRecord) -> dict[str, Any]:
    meta = record.metadata
    out = {
        "memory_id": record.id,
        "insights": dict(meta.get("insights") or {}),
        "summary": meta.get("summary", ""),
        "created_at": from_epoch(record.created_at).isoformat(),
    }
    if meta.get("batch"):
        out.update(
            trajectory_ids=list(meta.get("trajectory_ids") or ()),
            trajectory_count=len(meta.get("trajectory_ids") or ()),
            task_type=meta.get("task_type"),
            success_rate=meta.get("success_rate"),
            evidence=dict(meta.get("evidence") or {}),
        )
    else:
        out.update(trajectory_id=meta.get("trajectory_id"), status=meta.get("status"), task_type=meta.get("task_type"))
    return out


def _trace_summary(steps: Sequence[Mapping[str, Any]]) -> str:
    if not steps:
        return "Empty trace"
    parts = "; ".join(f"{s.get('type')}: {s.get('description')}" for s in steps[:6])
    return preview(f"Trace of {len(steps)} steps: {parts}", 300)


class Trajectories:
    """Stores trajectories, their steps and traces, and reflections, for one store."""

    def __init__(self, store: Store, embedder: Embedder, config: LearningConfig, *, rng: random.Random | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.rng = rng or random.Random()
        self._completions = 0

    # trajectories --------------------------------------------------------------------------
    def start(self, owner: Scope, task: str, *, task_type: str | None, parent: str | None, now: float, extra: Mapping[str, Any] | None = None) -> MemoryRecord:
        record = MemoryRecord(
            id=str(uuid.uuid4()),
            scope=Scope(owner.tenant_id, owner.user_id, owner.agent_id, RUN_TRAJECTORIES),
            text=task,
            kind=Kind.TRAJECTORY,
            memory_class=DEFAULT_CLASS[Kind.TRAJECTORY],
            created_at=now,
            content_hash=str(uuid.uuid4()).replace("-", ""),  # every execution is its own; never a duplicate
            metadata={
                "task_type": task_type,
                "status": RUNNING,
                "parent_trajectory_id": parent,
                "started_at": now,
                "step_count": 0,
                **dict(extra or {}),
            },
            lineage={"parent_trajectory_id": parent} if parent else {},
        )
        vector = self.embedder.embed_one(task)
        with self.store.transaction() as batch:
            batch.add(record, vector, actor="trajectory", payload={"task_type": task_type, "parent_trajectory_id": parent})
        return record

    def log_step(self, record: MemoryRecord, step: Mapping[str, Any]) -> int:
        """Append a step event; returns its seq in the log."""
        with self.store.transaction() as batch:
            current = batch.get_many([record.id]).get(record.id)
            if current is None or current.status is not Status.ACTIVE:
                raise LookupError(record.id)
            if current.metadata.get("status", RUNNING) != RUNNING:
                raise RuntimeError(f"trajectory {record.id!r} is already completed ({current.metadata.get('status')})")
            return batch.event(STEP_OP, record.scope, memory_id=record.id, new_text=str(step.get("description", "")), actor="trajectory", payload=dict(step))

    def steps(self, record: MemoryRecord) -> list[dict[str, Any]]:
        """The steps in order: from the stored trace when there is one, else from the log."""
        trace_id = record.metadata.get("trace_id")
        if trace_id:
            trace = self.store.get(str(trace_id))
            if trace is not None and trace.status is Status.ACTIVE and trace.kind is Kind.TRACE:
                return [dict(s) for s in trace.metadata.get("steps") or ()]
        return self.logged_steps(record.id)

    def logged_steps(self, trajectory_id: str) -> list[dict[str, Any]]:
        return [logged_step(e) for e in self.store.history(trajectory_id) if e.op == STEP_OP]

    def complete(
        self,
        record: MemoryRecord,
        *,
        status: str,
        score: float | None,
        error: str | None,
        metrics: Mapping[str, Any] | None,
        now: float,
        extra: Mapping[str, Any] | None = None,
    ) -> MemoryRecord:
        """Close the trajectory: outcome and metrics, the trace content-addressed
        (stored when :func:`~memorist.policies.learning.keep_trace` says so). Returns the
        completed record."""
        steps = self.logged_steps(record.id)
        canonical = [{"type": s["type"], "description": s["description"], "metadata": s["metadata"]} for s in steps]
        digest = trace_digest(canonical)
        keep = keep_trace(
            status,
            sample_rate=float(self.config.trajectory_sample_rate or 0.0),
            always_store_failures=bool(self.config.always_store_failures),
            draw=self.rng.random(),
        )
        metrics = dict(metrics or {})
        started = float(record.metadata.get("started_at", record.created_at))
        duration = metrics.get("duration_ms")
        if not isinstance(duration, int | float) or isinstance(duration, bool):
            duration = round((now - started) * 1000.0, 3)
        tokens = metrics.get("tokens", metrics.get("tokens_used"))
        cost = metrics.get("cost_usd", metrics.get("cost"))
        summary = _trace_summary(canonical) if keep else ""
        vector = self.embedder.embed_one(summary) if keep else None
        with self.store.transaction() as batch:
            current = batch.get_many([record.id]).get(record.id)
            if current is None or current.status is not Status.ACTIVE:
                raise LookupError(record.id)
            if current.metadata.get("status", RUNNING) != RUNNING:
                raise RuntimeError(f"trajectory {record.id!r} is already completed ({current.metadata.get('status')})")
            trace_id = None
            if keep:
                found = batch.find_active_hash(current.scope, digest)
                trace = batch.get_many([found]).get(found) if found else None
                if trace is not None and trace.kind is Kind.TRACE:
                    ids = [*list(trace.metadata.get("trajectory_ids") or ())[-19:], record.id]
                    uses = int(trace.metadata.get("uses") or 1) + 1
                    batch.update(trace.copy(metadata={**trace.metadata, "uses": uses, "trajectory_ids": ids}, updated_at=now),
                                 None, old_text=trace.text, actor="trajectory", payload={"trace_hash": digest, "uses": uses})
                    trace_id = trace.id
                else:
                    trace = MemoryRecord(
                        id=str(uuid.uuid4()),
                        scope=Scope(current.scope.tenant_id, current.scope.user_id, current.scope.agent_id, RUN_TRACES),
                        text=summary,
                        kind=Kind.TRACE,
                        memory_class=DEFAULT_CLASS[Kind.TRACE],
                        created_at=now,
                        content_hash=digest,
                        metadata={"steps": canonical, "step_count": len(canonical), "uses": 1, "trajectory_ids": [record.id],
                                  "bytes": len(canonical_steps(canonical).encode("utf-8", "surrogatepass"))},
                    )
                    batch.add(trace, vector, actor="trajectory", payload={"trace_hash": digest})
                    trace_id = trace.id
            meta = {
                **current.metadata,
                **dict(extra or {}),
                "status": status,
                "success_score": score,
                "error_message": error,
                "metrics": metrics,
                "duration_ms": duration,
                "tokens_used": tokens,
                "cost_usd": cost,
                "completed_at": now,
                "trace_hash": digest,
                "trace_id": trace_id,
                "step_count": len(canonical),
            }
            done = current.copy(metadata=meta, updated_at=now)
            batch.update(done, None, old_text=current.text, op="complete", actor="trajectory",
                         payload={"status": status, "success_score": score, "trace_hash": digest, "trace_stored": trace_id is not None})
        self._completions += 1
        if self.config.trajectory_retention_days and self._completions % self.config.retention_every == 0:
            self.prune(ScopeFilter(record.scope.tenant_id, record.scope.user_id, record.scope.agent_id), now=now)
        return done

    def query(
        self,
        scope: ScopeFilter,
        *,
        status: str | None = None,
        task_type: str | None = None,
        since: float | None = None,
        until: float | None = None,
        parent: str | None = None,
        limit: int | None = None,
    ) -> list[MemoryRecord]:
        """Trajectories of ``scope``, newest first, filtered."""
        rows = self.store.list(ScopeFilter(scope.tenant_id, scope.user_id, scope.agent_id, RUN_TRAJECTORIES))
        out = []
        for r in rows:
            if r.kind is not Kind.TRAJECTORY:
                continue
            meta = r.metadata
            if status is not None and meta.get("status", RUNNING) != status:
                continue
            if task_type is not None and meta.get("task_type") != task_type:
                continue
            if parent is not None and meta.get("parent_trajectory_id") != parent:
                continue
            at = float(meta.get("started_at", r.created_at))
            if since is not None and at < since:
                continue
            if until is not None and at > until:
                continue
            out.append(r)
            if limit is not None and len(out) >= limit:
                break
        return out

    @staticmethod
    def as_role_view(record: MemoryRecord, steps: Sequence[Mapping[str, Any]]) -> Trajectory:
        meta = record.metadata
        return Trajectory(
            task=record.text,
            task_type=str(meta.get("task_type") or ""),
            status=str(meta.get("status", RUNNING)),
            score=meta.get("success_score"),
            error=meta.get("error_message"),
            steps=tuple(Step(str(s.get("type", "")), str(s.get("description", "")), dict(s.get("metadata") or {})) for s in steps),
            id=record.id,
        )

    # reflections ----------------------------------------------------------------------------
    def save_reflection(
        self,
        owner: Scope,
        insights: Insights,
        *,
        trajectories: Sequence[MemoryRecord],
        batch_of: bool,
        now: float,
        task_type: str | None = None,
    ) -> MemoryRecord:
        lists = insights.lists()
        counts = ", ".join(f"{len(v)} {k.replace('_', ' ')}" for k, v in lists.items() if v) or "no patterns"
        if batch_of:
            text = f"Reflection on {len(trajectories)} trajectories" + (f" of type {task_type}" if task_type else "") + f": {counts}"
        else:
            text = f"Reflection on '{preview(trajectories[0].text, 80)}' ({trajectories[0].metadata.get('status')}): {counts}"
        statuses = {t.id: str(t.metadata.get("status")) for t in trajectories}
        times = {t.id: float(t.metadata.get("completed_at") or t.created_at) for t in trajectories}
        meta: dict[str, Any] = {
            "insights": lists,
            "summary": insights.summary,
            "statuses": statuses,
            "times": times,
            "batch": batch_of,
            "task_type": task_type if batch_of else trajectories[0].metadata.get("task_type"),
            "curated_into": [],
        }
        if insights.credited:
            meta["credited"] = list(insights.credited)
        if insights.doubted:
            meta["doubted"] = list(insights.doubted)
        if batch_of:
            meta["trajectory_ids"] = [t.id for t in trajectories]
            meta["evidence"] = {k: list(v) for k, v in insights.evidence.items()}
            scored = [float(t.metadata.get("success_score") or 0.0) for t in trajectories]
            meta["success_rate"] = round(sum(1 for t in trajectories if t.metadata.get("status") == "success") / len(trajectories), 4)
            meta["mean_score"] = round(sum(scored) / len(scored), 4)
            lineage: dict[str, Any] = {"trajectory_ids": [t.id for t in trajectories][:100]}
        else:
            meta["trajectory_id"] = trajectories[0].id
            meta["status"] = statuses[trajectories[0].id]
            lineage = {"trajectory_id": trajectories[0].id}
        record = MemoryRecord(
            id=str(uuid.uuid4()),
            scope=Scope(owner.tenant_id, owner.user_id, owner.agent_id, RUN_REFLECTIONS),
            text=text,
            kind=Kind.REFLECTION,
            memory_class=DEFAULT_CLASS[Kind.REFLECTION],
            created_at=now,
            content_hash=str(uuid.uuid4()).replace("-", ""),
            metadata=meta,
            lineage=lineage,
        )
        vector = self.embedder.embed_one(text)
        with self.store.transaction() as batch:
            batch.add(record, vector, actor="reflector", payload={"trajectories": [t.id for t in trajectories][:100], "batch": batch_of})
            if not batch_of:
                decided = [p for name in ("successful_patterns", "failure_patterns", "neutral_observations") for p in lists[name]]
                self._note_outcome(batch, owner, meta.get("task_type"), trajectories[0].id, meta["status"] == "success", decided, now)
        return record

    # the outcomes of a space's runs, per task type ------------------------------------------------
    def _ledger(self, owner: Scope, task_type: Any, *, batch: Any = None) -> MemoryRecord | None:
        kind = str(task_type or "")
        rows = self.store.list(ScopeFilter(owner.tenant_id, owner.user_id, owner.agent_id, RUN_OUTCOMES))
        found = [r for r in rows if r.kind is Kind.REFLECTION and r.metadata.get("task_type", "") == kind]
        if not found:
            return None
        if batch is not None:  # as this transaction sees it
            return batch.get_many([found[0].id]).get(found[0].id)
        return found[0]

    def outcomes(self, owner: Scope, task_type: Any, *, exclude: str | None = None) -> list[tuple[bool, list[str]]]:
        """``(succeeded, decisions)`` of the space's runs of ``task_type`` reflected on,
        oldest first (at most :data:`CREDIT_HISTORY`; ``exclude``: a trajectory id)."""
        ledger = self._ledger(owner, task_type)
        if ledger is None:
            return []
        keys = list(ledger.metadata.get("keys") or [])
        out = []
        for tid, ok, idx in ledger.metadata.get("runs") or []:
            if tid != exclude:
                out.append((bool(ok), [keys[i] for i in idx if isinstance(i, int) and 0 <= i < len(keys)]))
        return out

    def _note_outcome(self, batch: Any, owner: Scope, task_type: Any, trajectory_id: str, ok: bool, decided: list[str], now: float) -> None:
        ledger = self._ledger(owner, task_type, batch=batch)
        meta = dict(ledger.metadata) if ledger is not None else {"task_type": str(task_type or "")}
        keys = list(meta.get("keys") or [])
        runs = [r for r in meta.get("runs") or [] if r[0] != trajectory_id]
        where = {k: i for i, k in enumerate(keys)}
        idx = []
        for pattern in dict.fromkeys(decided):
            if pattern not in where:
                where[pattern] = len(keys)
                keys.append(pattern)
            idx.append(where[pattern])
        runs = [*runs, [trajectory_id, ok, idx]][-CREDIT_HISTORY:]
        used = sorted({i for r in runs for i in r[2]})  # the keys no kept run names go
        renumber = {old: new for new, old in enumerate(used)}
        meta.update(keys=[keys[i] for i in used], runs=[[t, o, [renumber[i] for i in ix]] for t, o, ix in runs])
        if ledger is None:
            kind = meta["task_type"]
            record = MemoryRecord(
                id=str(uuid.uuid4()),
                scope=Scope(owner.tenant_id, owner.user_id, owner.agent_id, RUN_OUTCOMES),
                text=f"Outcomes of the runs of task type {kind!r}" if kind else "Outcomes of the runs",
                kind=Kind.REFLECTION,
                memory_class=DEFAULT_CLASS[Kind.REFLECTION],
                created_at=now,
                content_hash=str(uuid.uuid4()).replace("-", ""),
                metadata=meta,
            )
            batch.add(record, self.embedder.embed_one(record.text), actor="reflector", payload={"outcomes": kind})
        else:
            batch.update(ledger.copy(metadata=meta, updated_at=now), None, old_text=ledger.text, actor="reflector",
                         payload={"outcome": trajectory_id})

    # retention -------------------------------------------------------------------------------
    def prune(self, scope: ScopeFilter, *, now: float) -> dict[str, int]:
        """Delete what the retention has expired in ``scope``: trajectories and
        reflections older than the retention days, and traces no trajectory uses."""
        days = self.config.trajectory_retention_days
        counts = {"trajectories": 0, "traces": 0, "reflections": 0}
        if not days:
            return counts
        cutoff = now - days * DAY
        base = (scope.tenant_id, scope.user_id, scope.agent_id)
        trajectories = [r for r in self.store.list(ScopeFilter(*base, RUN_TRAJECTORIES)) if r.kind is Kind.TRAJECTORY]
        expired = [r for r in trajectories if float(r.metadata.get("completed_at") or r.metadata.get("started_at") or r.created_at) < cutoff]
        gone = {r.id for r in expired}
        used = {r.metadata.get("trace_hash") for r in trajectories if r.id not in gone}
        traces = [r for r in self.store.list(ScopeFilter(*base, RUN_TRACES)) if r.kind is Kind.TRACE and r.content_hash not in used]
        reflections = [r for r in self.store.list(ScopeFilter(*base, RUN_REFLECTIONS)) if r.kind is Kind.REFLECTION and r.created_at < cutoff]
        if not (expired or traces or reflections):
            return counts
        with self.store.transaction() as batch:
            for what, records in (("trajectories", expired), ("traces", traces), ("reflections", reflections)):
                for r in records:
                    batch.delete(r, op="expire", actor="retention", payload={"retention_days": days})
                    counts[what] += 1
        return counts


__all__ = [
    "DEFAULT_SCORES",
    "RUNNING",
    "RUN_OUTCOMES",
    "RUN_REFLECTIONS",
    "RUN_TRACES",
    "RUN_TRAJECTORIES",
    "STEP_OP",
    "Trajectories",
    "logged_step",
    "reflection_view",
    "step_of",
    "step_time",
    "trajectory_view",
]
