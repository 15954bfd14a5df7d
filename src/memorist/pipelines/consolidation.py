"""Consolidation: similar memories of low importance folded into one, undoably.

A run reads the facts of a scope (never the learning loop's objects or the minutes),
keeps apart every memory at or above ``min_importance`` (and, with
``preserve_high_importance``, at or above ``importance_threshold`` whatever
``min_importance`` says), and takes the rest oldest first, in batches of
``batch_size`` memories of one scope (at most ``MAX_BATCHES`` batches a run; the rest
is reported as ``remaining``, and the next run starts where this one stopped, going
round: memories that merge with nothing do not hold every run at the oldest ones). Each memory of a batch not yet grouped seeds a group:
the candidates of its scope at least ``similarity`` alike to it (cosine of their
embeddings; every member that close to the seed, not merely chained through others),
wherever they are in the scope, at most ``MAX_GROUP``. The similarities are computed
here, a batch against the scope, so the cost is the same on every backend.

Alike is not enough: memories that are different facts however alike they read
stay apart (:func:`_compatible`): another speaker (``metadata.name``, its presence
too: an unattributed memory is not given a speaker), another value of any metadata
key both hold (another role, session, type, source), and, for something that
happened (an episodic memory: a conversation turn, an experience), another day (UTC):
"I went there yesterday" said on two days is two events. A seed looks at its
``5 * MAX_GROUP`` closest candidates at most, so that many alike memories that may not
merge cost no more than a full group. Each group becomes one ``consolidated`` memory:

- its text is the heuristic merge (every clause of every source once), or with an
  LLM the model's merge under the brevity-bias guard (:mod:`memorist.prompts.consolidation`);
  an LLM that fails falls back to the heuristic merge;
- a merge that drops a named entity, number or date one of its sources had is
  rejected: the sources stay as they are and the report says which details were lost;
- its importance is the highest of its sources'; its counters their sums as they
  are when it is written (retrievals not yet flushed included: the write flushes
  them first), its per-class strengths and last accesses the highest; its metadata
  theirs (they agree); its lineage ``consolidated_from`` the source ids;
- its date (``created_at``) is the oldest source's, when it was first known, and its
  ``updated_at`` the newest source's own date (when a source was last said or
  renewed): a later source's date is kept, and the merged memory stays in view under
  ``decay_days`` as long as its newest source would have, not renewed by the merge;
- its search key says who said it when its sources' did (``"<name>: <text>"``);
- its energy and tier (the energy policy) are the highest any source has when it is
  written, decayed to then: it is never weaker, nor decays faster, than its strongest
  source, and its decay counts from then (:meth:`EnergyTiers.prepare
  <memorist.pipelines.tiers.EnergyTiers.prepare>`); without the policy, the highest
  stored energy;
- the sources are archived (never deleted) with ``consolidated_into`` in their lineage.

Memories that searches no longer see (older than ``decay_days``, or past their
``valid_to``) are not read: a merge would bring their text back as new.

Each batch is one transaction whose last event, ``consolidation``, names the run
(its ``memory_id`` is the run id) and holds every source as it was: the run is undone
by :func:`memorist.pipelines.undo.rollback` with the run id or that event's seq.
A source that changed between the batch's read and its write is left alone (reported).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..embed.base import Embedder
from ..errors import ProviderError
from ..model import Kind, MemoryClass, MemoryRecord, Scope, Status, is_fact, new_id
from ..policies.consolidation import MAX_GROUP, MAX_MERGED_CHARS, key_terms, merge_texts, missing_terms
from ..policies.energy import LIVE_TIERS
from ..policies.search_keys import memory_key
from ..policies.text import content_hash
from ..policies.validity import validity_cutoff
from ..prompts import consolidation as prompt
from ..store.base import ScopeFilter, Store
from ..store.codec import speaker_of
from ..work import charge
from .undo import UNDO, undo_payload

logger = logging.getLogger("memorist.consolidation")

OP_CONSOLIDATION = "consolidation"
#: Where a run that could not take every candidate stopped (bookkeeping: the next run
#: of the scope starts after it).
OP_WINDOW = "consolidation_window"
OP_CONSOLIDATE = "consolidate"
#: Most batches one run works through; what is left is reported as ``remaining``.
MAX_BATCHES = 50
#: Seeds compared with their scope at once.
_BLOCK = 128
#: The closest candidates a seed looks at (some may be other facts, see _compatible).
_EXAMINED = 5 * MAX_GROUP


@dataclass(slots=True)
class Settings:
    min_importance: float
    importance_threshold: float
    preserve_high_importance: bool
    kinds: frozenset[Kind] | None
    dry_run: bool
    batch_size: int
    similarity: float
    max_chars: int


@dataclass(slots=True)
class _Plan:
    sources: list[MemoryRecord]
    text: str = ""
    missing: list[str] = field(default_factory=list)
    reason: str = ""
    fallback: bool = False


def _merge(sources: Sequence[MemoryRecord], llm: Any) -> _Plan:
    texts = [r.text for r in sources]
    plan = _Plan(list(sources))
    if llm is not None:
        details = sorted(set().union(*(key_terms(t) for t in texts)))
        try:
            answer = llm.generate_json(
                prompt.ConsolidatedMemory, prompt.render(texts, details), system=prompt.SYSTEM,
                role="consolidator", prompt_version=prompt.VERSION,
            )
            plan.text = " ".join(answer.memory.split())
        except ProviderError as exc:
            logger.warning("memorist: the consolidation model failed (%s); merging heuristically", exc)
            plan.fallback = True
    if not plan.text:
        plan.text = merge_texts(texts)
    plan.missing = missing_terms(texts, plan.text)
    if plan.missing:
        plan.reason = f"the merge dropped {', '.join(repr(t) for t in plan.missing)}, which a source had: the sources are kept"
    return plan


def _day(epoch: float) -> tuple[int, int, int]:
    return time.gmtime(epoch)[:3]


def _compatible(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Whether ``a`` and ``b`` may be one memory (see the module's docstring): the same
    speaker (or neither has one), no metadata key both hold with different values,
    and, when either is episodic, the same day."""
    if speaker_of(a.metadata) != speaker_of(b.metadata):
        return False
    if any(a.metadata[k] != b.metadata[k] for k in a.metadata.keys() & b.metadata.keys() if k != "name"):
        return False
    episodic = MemoryClass.EPISODIC in (a.memory_class, b.memory_class)
    return not episodic or _day(a.created_at) == _day(b.created_at)


def _key(plan: _Plan) -> str:
    """The merged memory's search key: its text, after the speaker's name when every
    source was keyed by it (as :func:`memorist.policies.search_keys.memory_key` keys a turn)."""
    name = plan.sources[0].metadata.get("name")
    if not isinstance(name, str) or not name:
        return plan.text
    keyed = all((s.search_text or s.text).startswith(f"{s.metadata.get('name')}: ") for s in plan.sources)
    return memory_key(plan.text, name=name) if keyed else plan.text


def _age(record: MemoryRecord) -> tuple[float, str]:
    return record.created_at, record.id


def _consolidated(plan: _Plan, sources: Sequence[MemoryRecord], run_id: str) -> MemoryRecord:
    """The memory ``plan`` makes of ``sources`` (as read inside the writing transaction)."""
    first = sources[0]
    metadata: dict[str, Any] = {}
    for source in sources:
        for key, value in source.metadata.items():
            metadata.setdefault(key, value)
    tags = list(dict.fromkeys(t for s in sources for t in s.tags))
    memory_class = Counter(s.memory_class for s in sources).most_common(1)[0][0]
    key = _key(plan)
    return MemoryRecord(
        id=new_id(),
        scope=first.scope,
        text=plan.text,
        kind=Kind.CONSOLIDATED,
        memory_class=memory_class,
        topic=first.topic,
        concept=first.concept,
        tags=tags,
        helpful=sum(s.helpful for s in sources),
        harmful=sum(s.harmful for s in sources),
        strengths={c: max(float(s.strengths.get(c, 0.0)) for s in sources) for c in {c for s in sources for c in s.strengths}},
        last_access={c: max(int(s.last_access.get(c, 0)) for s in sources) for c in {c for s in sources for c in s.last_access}},
        access_count=sum(s.access_count for s in sources),
        importance=max(s.importance for s in sources),
        energy=max(s.energy for s in sources),
        tier=max((s.tier for s in sources), key=lambda t: LIVE_TIERS.index(t) if t in LIVE_TIERS else -1),
        created_at=min(s.created_at for s in sources),
        updated_at=max(s.updated_at if s.updated_at is not None else s.created_at for s in sources),
        # It holds what each source said: it stays valid while one of them would have.
        valid_to=None if any(s.valid_to is None for s in sources) else max(s.valid_to for s in sources if s.valid_to is not None),
        content_hash=content_hash(plan.text),
        metadata=metadata,
        lineage={"consolidated_from": [s.id for s in sources], "consolidation_run": run_id},
        search_text=key if key != plan.text else "",
    )


def _unchanged(before: MemoryRecord, now: MemoryRecord | None) -> bool:
    return (
        now is not None and now.status is Status.ACTIVE and now.text == before.text
        and now.updated_at == before.updated_at and now.importance == before.importance
    )


class Consolidator:
    """One store's consolidation runs (see the module's docstring)."""

    def __init__(
        self, store: Store, embedder: Embedder, *, prepare: Callable[..., None] | None = None, decay_days: float | None = None
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.prepare = prepare  # the energy policy's hook (EnergyTiers.prepare), called with the merge's sources
        self.decay_days = decay_days  # memories it hides are not brought back by a merge

    def run(self, scope: ScopeFilter, settings: Settings, *, llm: Any = None, event_scope: Scope, actor: str = "consolidation") -> dict[str, Any]:
        run_id = f"consolidation-{uuid.uuid4().hex}"
        # What searches see: a memory hidden by decay or past its validity is left as
        # it is (a merge would show its text again, as new).
        now = time.time()
        records = [r for r in self.store.list(scope, cutoff=validity_cutoff(now, self.decay_days), now=now) if is_fact(r)]
        if settings.kinds is not None:
            records = [r for r in records if r.kind in settings.kinds]
        preserved: list[MemoryRecord] = []
        candidates: list[MemoryRecord] = []
        for record in records:
            high = settings.preserve_high_importance and record.importance >= settings.importance_threshold
            (preserved if high or record.importance >= settings.min_importance else candidates).append(record)
        by_scope: dict[Scope, list[MemoryRecord]] = {}
        most = MAX_BATCHES * settings.batch_size  # a run's bound; the rest waits for the next run
        window = self._window(sorted(candidates, key=_age), most, event_scope)
        for record in sorted(window, key=_age):
            by_scope.setdefault(record.scope, []).append(record)
        batches = [(scope_, i) for scope_, members in by_scope.items() for i in range(0, len(members), settings.batch_size)]
        report: dict[str, Any] = {
            "run_id": None if settings.dry_run else run_id,
            "dry_run": settings.dry_run,
            "considered": len(records),
            "candidates": len(candidates),
            "merged_count": 0,
            "consolidated_count": 0,
            "preserved_count": len(preserved),
            "space_saved_bytes": 0,
            "batches": len(batches),
            "remaining": max(0, len(candidates) - most),
            "results": [],
            "rejected": [],
            "event_seqs": [],
        }
        for members in by_scope.values():
            unit = self._unit_vectors(members, settings.batch_size)
            taken = np.zeros(len(members), dtype=bool)
            for start in range(0, len(members), settings.batch_size):
                plans = self._plan(members, unit, taken, start, settings, llm, report)
                if plans:
                    self._write(plans, settings, run_id, event_scope, actor, report)
        if len(window) < len(candidates) and not settings.dry_run:
            last = window[-1]
            with self.store.transaction() as batch:
                batch.event(OP_WINDOW, event_scope, actor=actor, payload={"run_id": run_id, "after": [last.created_at, last.id]})
        return report

    def _window(self, candidates: list[MemoryRecord], most: int, event_scope: Scope) -> list[MemoryRecord]:
        """The ``most`` candidates (oldest first) a run takes: those after where the
        scope's last bounded run stopped, then from the oldest on."""
        if len(candidates) <= most:
            return candidates
        last = self.store.events(ScopeFilter(*event_scope.space, event_scope.run_id or None), ops=[OP_WINDOW],
                                 newest_first=True, limit=1)
        after = last[0].payload.get("after") if last else None
        start = 0
        if isinstance(after, list) and len(after) == 2:
            mark = (float(after[0]), str(after[1]))
            start = next((i for i, r in enumerate(candidates) if _age(r) > mark), 0)
        return (candidates[start:] + candidates[:start])[:most]

    def _unit_vectors(self, members: list[MemoryRecord], chunk: int) -> np.ndarray:
        """The members' embeddings, unit length (embedded ``chunk`` at a time)."""
        parts = []
        for i in range(0, len(members), chunk):
            texts = [r.text for r in members[i:i + chunk]]
            charge(len(texts))  # the work meter: cost, and a caller that left
            parts.append(np.asarray(self.embedder.embed(texts), np.float32))
        vectors = np.concatenate(parts) if parts else np.zeros((0, self.embedder.dim), np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return vectors / norms

    def _plan(self, members: list[MemoryRecord], unit: np.ndarray, taken: np.ndarray, start: int, settings: Settings,
              llm: Any, report: dict[str, Any]) -> list[_Plan]:
        """The groups seeded by the batch ``members[start:start + batch_size]`` (oldest
        first): each seed takes the members of its scope not yet grouped at least
        ``similarity`` alike to it, wherever they are in the scope (not only in this
        batch), the most alike first."""
        stop = min(len(members), start + settings.batch_size)
        plans: list[_Plan] = []
        sims = np.zeros((0, len(members)), np.float32)
        for seed in range(start, stop):
            # A seed compared with every member (a unit per 16) and its group examined:
            # 50,000 candidates took 50 s, which the meter did not see nor could stop.
            charge(1 + (len(members) >> 4))
            row = (seed - start) % _BLOCK
            if row == 0:  # _BLOCK seeds against the scope at a time: memory stays small
                sims = unit[seed:min(stop, seed + _BLOCK)] @ unit.T
            if taken[seed]:
                continue
            close = np.nonzero((sims[row] >= settings.similarity - 1e-6) & ~taken)[0]
            close = close[close != seed]
            if not len(close):
                continue
            chosen = [seed]
            for other in close[np.argsort(-sims[row][close], kind="stable")][:_EXAMINED].tolist():
                if len(chosen) == MAX_GROUP:
                    break
                # Alike but another fact (another speaker, another day's event): left for another group.
                if all(_compatible(members[other], members[i]) for i in chosen):
                    chosen.append(other)
            if len(chosen) == 1:
                continue
            taken[chosen] = True
            limit = min(MAX_MERGED_CHARS, settings.max_chars)
            longest = max(len(members[i].text) for i in chosen)
            if llm is None and longest > limit:  # the heuristic merge keeps every clause: it cannot fit
                plan = _Plan([members[i] for i in chosen], reason=f"a source has {longest} characters; the limit of a merged memory is {limit}")
            else:
                plan = _merge([members[i] for i in chosen], llm)
            if not plan.reason and len(plan.text) > limit:
                plan.reason = f"the merged memory would be {len(plan.text)} characters; the limit is {limit}"
            if plan.reason:
                report["rejected"].append({"consolidated_from": [s.id for s in plan.sources], "sources": [s.text for s in plan.sources],
                                           "memory": plan.text, "reason": plan.reason, "missing": plan.missing})
            else:
                plans.append(plan)
        return plans

    def _write(self, plans: list[_Plan], settings: Settings, run_id: str, event_scope: Scope, actor: str, report: dict[str, Any]) -> None:
        if settings.dry_run:
            for plan in plans:
                self._count(report, plan, None)
            return
        merged_vectors = self.embedder.embed([_key(p) for p in plans])
        now = time.time()
        with self.store.transaction() as batch:
            # The sources as they are now, not as the plan read them: a write transaction
            # first writes the retrievals buffered before it (Store.flush), so their
            # counters hold every retrieval up to here. (The buffer's own count must not
            # be added: until the transaction commits it still holds what it is writing.)
            current = batch.get_many([s.id for p in plans for s in p.sources])
            before: list[MemoryRecord] = []
            created: list[str] = []
            for plan, vector in zip(plans, merged_vectors, strict=True):
                if not all(_unchanged(s, current.get(s.id)) for s in plan.sources):
                    report["rejected"].append({"consolidated_from": [s.id for s in plan.sources], "sources": [s.text for s in plan.sources],
                                               "memory": plan.text, "reason": "a source changed during the run: the sources are kept",
                                               "missing": []})
                    continue
                held = [current[s.id] for s in plan.sources]
                record = _consolidated(plan, held, run_id)
                if self.prepare is not None:
                    self.prepare(record, sources=held, now=now)  # the energy policy: the sources' state, not a new memory's
                batch.add(record, vector, actor=actor, payload={"run_id": run_id, "consolidated_from": [s.id for s in plan.sources]})
                for source in held:
                    before.append(source)
                    # valid_to: when it stopped being current (an import of a later
                    # export tells a retired copy from the one it held by it).
                    retired = source.copy(status=Status.ARCHIVED, valid_to=min(source.valid_to or now, now),
                                          lineage={**source.lineage, "consolidated_into": record.id})
                    batch.update(retired, None, old_text=source.text, op=OP_CONSOLIDATE, actor=actor,
                                 payload={"run_id": run_id, "consolidated_into": record.id})
                created.append(record.id)
                self._count(report, plan, record.id)
            if created:
                seq = batch.event(OP_CONSOLIDATION, event_scope, memory_id=run_id, actor=actor, payload={
                    "run_id": run_id, "merged": len(before), "consolidated": created, UNDO: undo_payload(before, created),
                })
                report["event_seqs"].append(seq)

    @staticmethod
    def _count(report: dict[str, Any], plan: _Plan, memory_id: str | None) -> None:
        saved = sum(len(s.text.encode()) for s in plan.sources) - len(plan.text.encode())
        report["merged_count"] += len(plan.sources)
        report["consolidated_count"] += 1
        report["space_saved_bytes"] += saved
        item = {"id": memory_id, "memory": plan.text, "consolidated_from": [s.id for s in plan.sources]}
        if plan.fallback:
            item["fallback"] = "the model failed: merged heuristically"
        report["results"].append(item)


__all__ = ["OP_CONSOLIDATE", "OP_CONSOLIDATION", "Consolidator", "Settings"]
