"""Playbooks as objects of their own, over the store contract.

A playbook is named and belongs to one space — (tenant, user, agent): an agent's,
a user's (the per-learner playbooks are these), the tenant's (user and agent
empty) or the global one (tenant, user and agent empty). It is made of memories
that no fact call sees (:func:`memorist.model.is_fact`):

- **strategies**: memories with a ``section`` whose metadata ``playbook`` is the
  playbook's name — the very shape of the tutor's bullets, so a learner's tutoring
  playbook *is* the playbook of the learner's space named after its preset
  (``per-learner``). Their kind gives the category: ``strategy`` ✓ helpful,
  ``anti_pattern`` ✗ harmful, anything else ○ neutral.
- **the header**: one memory of kind ``playbook`` (run ``memorist:playbook``), found by
  its content address (SHA-256 of the name) with ``find_active_hash`` inside the
  writing transaction, so two writers creating the same playbook make one. Its
  metadata holds the visibility, description, version, usage count, success
  scores, and the index of the versions kept.
- **versions**: every change makes one immutable memory of kind
  ``playbook_version`` (run ``memorist:playbook-versions``) holding a snapshot of
  every strategy. Retention
  (:class:`~memorist.policies.learning.VersionRetention`) deletes the others in the
  same transaction — versions are memories, not events, precisely so that they can
  be pruned.

Evidence lives on each strategy: how many trajectories support it and by how
much, the newest evidence time and the last few (trajectory, outcome) pairs; a
confidence is computed from it when read, so old evidence decays. An entry given by
hand (``update_playbook``) keeps the confidence it was given until trajectories
add evidence; a tutoring bullet's counters are read as evidence
(``helpful / (helpful + harmful)``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..embed.base import Embedder
from ..model import DEFAULT_CLASS, Kind, MemoryClass, MemoryRecord, Scope, Status, from_epoch, new_id
from ..policies.dedup import finalize_bullet
from ..policies.learning import (
    HARMFUL,
    HELPFUL,
    NEUTRAL,
    SYMBOLS,
    VersionRetention,
    confidence,
    recency_factor,
    version_label,
    versions_to_keep,
)
from ..policies.learning import support as support_for
from ..policies.taxonomy import GENERAL_TOPIC, section_for, snake_case
from ..policies.text import content_hash
from ..reserved import (
    PER_LEARNER_PLAYBOOK,
    PREVIOUS_PER_LEARNER_PLAYBOOK,
    RUN_PLAYBOOK_VERSIONS,
    RUN_PLAYBOOKS,
    RUN_PREFIX,
    header_digest,
    renamed_playbook_fields,
)
from ..store.base import Batch, ScopeFilter, Store

#: The run ids of playbook headers and of their versions (runs of their own, so a
#: list by run reads only them: listing playbooks never decodes version snapshots).
RUN_VERSIONS = RUN_PLAYBOOK_VERSIONS
PLAYBOOK_KEY = "playbook"  # metadata key: the playbook a strategy belongs to
SCOPES = ("agent", "user", "tenant", "global")
_KIND_OF = {HELPFUL: Kind.STRATEGY, HARMFUL: Kind.ANTI_PATTERN, NEUTRAL: Kind.OBSERVATION}


@dataclass(frozen=True, slots=True)
class PlaybookRef:
    """A playbook: its space (``run_id`` empty), its name, and its scope label."""

    scope: Scope
    name: str
    label: str

    @property
    def space(self) -> ScopeFilter:
        """Exactly the playbook's space (empty ids match only empty ids)."""
        return ScopeFilter(self.scope.tenant_id, self.scope.user_id, self.scope.agent_id)

    def at(self, run_id: str) -> Scope:
        return Scope(self.scope.tenant_id, self.scope.user_id, self.scope.agent_id, run_id)


def playbook_of(record: MemoryRecord, default: str) -> str:
    name = record.metadata.get(PLAYBOOK_KEY)
    return name if isinstance(name, str) and name else default


def strategy_playbook(record: MemoryRecord) -> tuple[Scope, str] | None:
    """The space (run id empty) and name of the playbook ``record`` is a strategy of,
    when it is one that names its playbook (a strategy's run is the conversation it
    was learnt in; its playbook is the space's)."""
    name = record.metadata.get(PLAYBOOK_KEY)
    if not record.section or not isinstance(name, str) or not name or record.scope.run_id.startswith(RUN_PREFIX):
        return None
    return Scope(record.scope.tenant_id, record.scope.user_id, record.scope.agent_id), name


def is_strategy_of(record: MemoryRecord, name: str, *, default: str = PER_LEARNER_PLAYBOOK) -> bool:
    """Whether ``record`` is an active strategy (bullet) of the playbook ``name``."""
    return bool(record.section) and record.status is Status.ACTIVE and playbook_of(record, default) == name


def with_current_names(record: MemoryRecord) -> MemoryRecord:
    """A memory written before the per-learner playbook took its current name and
    read from outside the store (an undo record, an export line), as it is stored
    now (:func:`memorist.reserved.renamed_playbook_fields`); a header also gets the
    content address of its name, which an export does not carry."""
    if not (record.section or record.scope.run_id.startswith(RUN_PREFIX)):
        return record  # a fact: never renamed (the common line of an import)
    metadata = dict(record.metadata)
    renamed = renamed_playbook_fields(record.scope.run_id, record.kind.value, record.section, record.text,
                                      record.search_text, metadata, {PREVIOUS_PER_LEARNER_PLAYBOOK: PER_LEARNER_PLAYBOOK})
    if renamed is not None:
        text, search_text, digest = renamed
        record = record.copy(text=text, search_text=search_text, metadata=metadata, content_hash=digest or record.content_hash)
    name = record.metadata.get("name")
    if record.kind is Kind.PLAYBOOK and record.scope.run_id == RUN_PLAYBOOKS and isinstance(name, str):
        record = record.copy(content_hash=header_digest(name))
    return record


def as_filed(record: MemoryRecord, held: MemoryRecord | None) -> MemoryRecord:
    """A past state of a playbook's memory (an undo restores it) filed under the
    playbook its stored row ``held`` belongs to now: a header keeps its name (and its
    label and address), a strategy, version or trajectory the playbook it names. A
    memory's playbook never changes but by a rename (a store of release 0.2.0
    migrated), which its past states predate."""
    if held is None or not (record.section or record.scope.run_id.startswith(RUN_PREFIX)):
        return record
    if record.kind is Kind.PLAYBOOK and record.scope.run_id == RUN_PLAYBOOKS and isinstance(held.metadata.get("name"), str):
        if record.metadata.get("name") == held.metadata["name"]:
            return record
        return record.copy(metadata={**record.metadata, "name": held.metadata["name"]}, text=held.text,
                           search_text=held.search_text, content_hash=held.content_hash)
    owner = held.metadata.get(PLAYBOOK_KEY)
    if isinstance(owner, str) and record.metadata.get(PLAYBOOK_KEY) != owner:
        return record.copy(metadata={**record.metadata, PLAYBOOK_KEY: owner})
    return record


def category(record: MemoryRecord) -> str:
    """✓ helpful (kind ``strategy``), ✗ harmful (``anti_pattern``) or ○ neutral."""
    declared = record.metadata.get("category")
    if declared in (HELPFUL, HARMFUL, NEUTRAL):
        return str(declared)
    if record.kind is Kind.STRATEGY:
        return HELPFUL
    if record.kind is Kind.ANTI_PATTERN:
        return HARMFUL
    return NEUTRAL


# evidence -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Evidence:
    """What a strategy rests on. ``count``/``supporting``: trajectory evidence (the
    summed support of ``count`` trajectories); ``declared``: a confidence given by
    hand (or read from a tutoring bullet's counters) for ``declared_count`` pieces of
    evidence; ``items``: the latest ``[trajectory_id, status, at, support]``."""

    count: int = 0
    supporting: float = 0.0
    declared: float | None = None
    declared_count: int = 0
    last_at: float | None = None
    items: tuple[tuple[str, str, float, float], ...] = ()

    @property
    def total(self) -> int:
        return self.count + self.declared_count

    def confidence(self, now: float, half_life_days: float | None) -> float:
        if self.count == 0:
            base = 0.5 if self.declared is None else self.declared
            return round(max(0.0, min(1.0, base)) * recency_factor(self.last_at, now, half_life_days), 4)
        declared = (self.declared if self.declared is not None else 0.5) * self.declared_count
        return confidence(self.supporting + declared, self.total, last_evidence_at=self.last_at, now=now, half_life_days=half_life_days)

    def add(self, items: Iterable[tuple[str, str, float, float]], keep: int) -> Evidence:
        """This evidence plus trajectory evidence ``items`` (a trajectory already
        listed is not counted twice)."""
        seen = {i[0] for i in self.items}
        fresh = [i for i in items if i[0] not in seen]
        if not fresh:
            return self
        merged = sorted([*self.items, *fresh], key=lambda i: i[2])[-keep:]
        last = max([i[2] for i in fresh] + ([self.last_at] if self.last_at is not None else []))
        return Evidence(
            self.count + len(fresh),
            round(self.supporting + sum(i[3] for i in fresh), 6),
            self.declared,
            self.declared_count,
            last,
            tuple(merged),
        )

    def merge(self, other: Evidence, keep: int) -> Evidence:
        """Two strategies' evidence combined (evidence counts add; a trajectory
        both list counts once)."""
        mine = {i[0] for i in self.items}
        twice = [i for i in other.items if i[0] in mine]
        items = sorted({i[0]: i for i in (*other.items, *self.items)}.values(), key=lambda i: i[2])[-keep:]
        n = self.declared_count + other.declared_count
        given = [(c, k) for c, k in ((self.declared, self.declared_count), (other.declared, other.declared_count)) if c is not None]
        if not given:
            declared = None
        elif n:
            declared = sum(c * k for c, k in given) / max(1, sum(k for _, k in given))
        else:
            declared = max(c for c, _ in given)
        lasts = [x for x in (self.last_at, other.last_at) if x is not None]
        return Evidence(
            self.count + other.count - len(twice),
            round(self.supporting + other.supporting - sum(i[3] for i in twice), 6),
            declared,
            n,
            max(lasts) if lasts else None,
            tuple(items),
        )

    def to_metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "trajectory_evidence": self.count,
            "supporting": self.supporting,
            "evidence": [list(i) for i in self.items],
        }
        if self.declared is not None or self.declared_count:
            out["declared"] = {"confidence": self.declared, "count": self.declared_count}
        if self.last_at is not None:
            out["last_evidence_at"] = self.last_at
        return out


def evidence_of(record: MemoryRecord) -> Evidence:
    """The evidence a stored strategy carries (a tutoring bullet's counters otherwise)."""
    meta = record.metadata
    if "trajectory_evidence" not in meta and "declared" not in meta:
        n = max(0, record.helpful) + max(0, record.harmful)
        declared = record.helpful / n if n else None
        return Evidence(declared=declared, declared_count=n, last_at=record.updated_at or record.created_at)
    declared = meta.get("declared") or {}
    items = []
    for item in meta.get("evidence") or ():
        try:
            tid, status, at, sup = item
            items.append((str(tid), str(status), float(at), float(sup)))
        except (TypeError, ValueError):
            continue
    d = declared.get("confidence")
    return Evidence(
        count=int(meta.get("trajectory_evidence") or 0),
        supporting=float(meta.get("supporting") or 0.0),
        declared=float(d) if isinstance(d, int | float) and not isinstance(d, bool) else None,
        declared_count=int(declared.get("count") or 0),
        last_at=meta.get("last_evidence_at") if isinstance(meta.get("last_evidence_at"), int | float) else (record.updated_at or record.created_at),
        items=tuple(items),
    )


def with_evidence(record: MemoryRecord, evidence: Evidence, *, now: float, half_life_days: float | None) -> MemoryRecord:
    """``record`` carrying ``evidence``: metadata, a cached confidence, and counters
    (helpful = the support, harmful = the rest) that the tutoring playbook's views read."""
    meta = {k: v for k, v in record.metadata.items() if k not in ("declared", "last_evidence_at")}
    meta.update(evidence.to_metadata())
    meta["evidence_count"] = evidence.total
    meta["confidence"] = evidence.confidence(now, half_life_days)
    examples = [i[0] for i in evidence.items]
    if examples:
        meta["examples"] = examples
    support_total = evidence.supporting + (evidence.declared or 0.0) * evidence.declared_count
    helpful = int(round(support_total))
    return record.copy(metadata=meta, helpful=helpful, harmful=max(0, evidence.total - helpful), updated_at=now)


def outcome_share(evidence: Evidence) -> float | None:
    """The share of the listed evidence trajectories that succeeded (a partial run
    counts half); None without any."""
    if not evidence.items:
        return None
    score = {"success": 1.0, "partial": 0.5}
    return sum(score.get(i[1], 0.0) for i in evidence.items) / len(evidence.items)


def recategorized(record: MemoryRecord, new: str, *, now: float, half_life_days: float | None) -> MemoryRecord:
    """``record`` moved to category ``new`` (kind, class, section, tags follow); its
    trajectory support is counted again for that category."""
    kind = _KIND_OF[new]
    cls = DEFAULT_CLASS[kind]
    ev = evidence_of(record)
    items = tuple((t, st, at, support_for(new, st)) for t, st, at, _ in ev.items)
    share = sum(i[3] for i in items) / len(items) if items else 0.0
    ev = Evidence(ev.count, round(share * ev.count, 6), ev.declared, ev.declared_count, ev.last_at, items)
    tags = [new if t in (HELPFUL, HARMFUL, NEUTRAL) else t for t in record.tags]
    moved = record.copy(
        kind=kind,
        memory_class=cls,
        section=section_for(kind),
        strengths={c.value: (1.0 if c is cls else 0.0) for c in MemoryClass},
        tags=tags,
        metadata={**record.metadata, "category": new, "recategorized_from": category(record)},
    )
    return with_evidence(finalize_bullet(moved), ev, now=now, half_life_days=half_life_days)


# views ------------------------------------------------------------------------------------------
def strategy_entry(record: MemoryRecord, *, now: float, half_life_days: float | None) -> dict[str, Any]:
    """A stored strategy as a playbook lists it, plus its id and symbol."""
    evidence = evidence_of(record)
    cat = category(record)
    examples = record.metadata.get("examples") or record.metadata.get("sources") or []
    return {
        "id": record.id,
        "category": cat,
        "symbol": SYMBOLS[cat],
        "pattern": record.text,
        "context": str(record.metadata.get("context") or record.topic or ""),
        "confidence": evidence.confidence(now, half_life_days),
        "evidence_count": evidence.total,
        "examples": [str(x) for x in examples][-20:],
        "created_at": from_epoch(record.created_at).isoformat(),
        "updated_at": from_epoch(record.updated_at or record.created_at).isoformat(),
    }


def _order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: (-e["confidence"], -e["evidence_count"], e["created_at"], e["id"]))


def content_view(entries: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Entries grouped by category, best first: ``{"helpful", "harmful", "neutral"}``."""
    return {cat: _order([e for e in entries if e["category"] == cat]) for cat in (HELPFUL, HARMFUL, NEUTRAL)}


def playbook_view(
    ref: PlaybookRef, header: MemoryRecord | None, strategies: Iterable[MemoryRecord], *, now: float, half_life_days: float | None
) -> dict[str, Any]:
    """What ``get_playbook`` returns: the header's fields and the
    strategies by category. A playbook never written is empty, version 0."""
    meta = header.metadata if header is not None else {}
    entries = [strategy_entry(r, now=now, half_life_days=half_life_days) for r in strategies]
    uses = int(meta.get("scored_uses") or 0)
    return {
        "playbook_id": header.id if header is not None else None,
        "name": ref.name,
        "scope": ref.label,
        "visibility": meta.get("visibility") or ("shared" if ref.label in ("tenant", "global") else "private"),
        "description": meta.get("description") or "",
        "tenant_id": ref.scope.tenant_id or None,
        "user_id": ref.scope.user_id or None,
        "agent_id": ref.scope.agent_id or None,
        "version": int(meta.get("version") or 0),
        "version_label": meta.get("label") or "0.0",
        "usage_count": int(meta.get("usage_count") or 0),
        "success_rate": round(float(meta.get("score_sum") or 0.0) / uses, 4) if uses else 0.0,
        "avg_improvement": float(meta.get("avg_improvement") or 0.0),
        "total_trajectories_analyzed": int(meta.get("trajectories_analyzed") or 0),
        "created_at": from_epoch(header.created_at).isoformat() if header is not None else None,
        "updated_at": from_epoch(header.updated_at or header.created_at).isoformat() if header is not None else None,
        "last_used_at": from_epoch(meta["last_used_at"]).isoformat() if meta.get("last_used_at") else None,
        "size": len(entries),
        "strategies": content_view(entries),
    }


# snapshots -----------------------------------------------------------------------------------------
def snapshot_entry(record: MemoryRecord) -> dict[str, Any]:
    """Everything needed to restore a strategy as it is now."""
    return {
        "id": record.id,
        "text": record.text,
        "kind": record.kind.value,
        "memory_class": record.memory_class.value,
        "section": record.section,
        "topic": record.topic,
        "concept": record.concept,
        "tags": list(record.tags),
        "helpful": record.helpful,
        "harmful": record.harmful,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "metadata": dict(record.metadata),
    }


def record_from_snapshot(entry: Mapping[str, Any], scope: Scope, playbook: str | None = None) -> MemoryRecord:
    """A strategy as a snapshot holds it (its old id; the caller gives a new one if it
    was deleted), filed under ``playbook`` when given: the playbook it is restored
    into, whatever name the snapshot was taken under."""
    metadata = dict(entry.get("metadata") or {})
    if playbook is not None:
        metadata[PLAYBOOK_KEY] = playbook
    kind = Kind(entry.get("kind", "strategy")) if entry.get("kind") in Kind._value2member_map_ else Kind.STRATEGY
    cls = MemoryClass(entry["memory_class"]) if entry.get("memory_class") in MemoryClass._value2member_map_ else DEFAULT_CLASS[kind]
    text = str(entry.get("text", ""))
    return MemoryRecord(
        id=str(entry["id"]),
        scope=scope,
        text=text,
        kind=kind,
        memory_class=cls,
        topic=str(entry.get("topic", "")),
        concept=str(entry.get("concept", "")),
        section=str(entry.get("section") or section_for(kind)),
        tags=[str(t) for t in entry.get("tags") or ()],
        helpful=int(entry.get("helpful") or 0),
        harmful=int(entry.get("harmful") or 0),
        strengths={c.value: (1.0 if c is cls else 0.0) for c in MemoryClass},
        created_at=float(entry.get("created_at") or 0.0),
        updated_at=entry.get("updated_at"),
        content_hash=content_hash(text),
        metadata=metadata,
    )


def version_view(record: MemoryRecord, ref: PlaybookRef, *, now: float, half_life_days: float | None) -> dict[str, Any]:
    """One version: its number, label, change, and its strategies by category."""
    meta = record.metadata
    strategies = [record_from_snapshot(e, ref.scope) for e in meta.get("strategies") or ()]
    entries = [strategy_entry(r, now=now, half_life_days=half_life_days) for r in strategies]
    return {
        "playbook_id": meta.get("playbook_id"),
        "name": ref.name,
        "version": int(meta.get("version") or 0),
        "version_label": meta.get("label"),
        "major": bool(meta.get("major")),
        "reason": meta.get("reason", ""),
        "change": meta.get("change") or {},
        "created_at": from_epoch(record.created_at).isoformat(),
        "size": len(entries),
        "strategies": content_view(entries),
    }


def _canonical(entries: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(entries), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def snapshot_digest(entries: Iterable[Mapping[str, Any]]) -> str:
    """The digest of a version's strategies (:func:`snapshot_entry` each, in any
    order): two snapshots with the same digest hold the same strategies."""
    ordered = sorted(entries, key=lambda e: (float(e.get("created_at") or 0.0), str(e.get("id"))))
    return hashlib.sha256(_canonical(ordered).encode("utf-8", "surrogatepass")).hexdigest()


# the store side -------------------------------------------------------------------------------------
class PlaybookStore:
    """Reads and writes playbooks (headers, strategies, versions) through a store.

    The writes take the :class:`~memorist.store.base.Batch` of the caller's
    transaction, so a change, its version and the retention of old versions commit
    together or not at all.
    """

    def __init__(self, store: Store, embedder: Embedder, *, retention: VersionRetention | None = None, half_life_days: float | None = 90.0) -> None:
        self.store = store
        self.embedder = embedder
        self.retention = retention or VersionRetention()
        self.half_life_days = half_life_days
        self._vectors: dict[str, np.ndarray] = {}

    def vector(self, text: str) -> np.ndarray:
        """The embedding of a fixed label text (headers, versions), computed once."""
        vec = self._vectors.get(text)
        if vec is None:
            vec = self.embedder.embed_one(text)
            if len(self._vectors) >= 512:  # a few labels per playbook name: start over, rarely
                self._vectors = {}
            self._vectors[text] = vec
        return vec

    # headers -----------------------------------------------------------------------------
    @staticmethod
    def _is_header(record: MemoryRecord | None, name: str) -> bool:
        return (
            record is not None
            and record.kind is Kind.PLAYBOOK
            and record.status is Status.ACTIVE
            and record.metadata.get("name") == name
        )

    def header(self, ref: PlaybookRef) -> MemoryRecord | None:
        """The playbook's header, read outside a transaction (None: never written)."""
        for record in self.store.find_by_hash(ref.space, header_digest(ref.name)):
            if self._is_header(record, ref.name) and record.scope.space == ref.scope.space:
                return record
        return None

    def header_in(self, batch: Batch, ref: PlaybookRef) -> MemoryRecord | None:
        mid = batch.find_active_hash(ref.scope, header_digest(ref.name))
        if mid is None:
            return None
        record = batch.get_many([mid]).get(mid)
        return record if self._is_header(record, ref.name) else None

    def ensure_header(
        self, batch: Batch, ref: PlaybookRef, now: float, *, visibility: str | None = None, description: str | None = None
    ) -> tuple[MemoryRecord, bool]:
        """The header, created in ``batch`` when the playbook has none yet; and whether it was."""
        found = self.header_in(batch, ref)
        if found is not None:
            return found, False
        text = f"Playbook {ref.name}"
        record = MemoryRecord(
            id=new_id(),
            scope=ref.at(RUN_PLAYBOOKS),
            text=text,
            kind=Kind.PLAYBOOK,
            memory_class=DEFAULT_CLASS[Kind.PLAYBOOK],
            created_at=now,
            content_hash=header_digest(ref.name),
            metadata={
                "name": ref.name,
                "scope": ref.label,
                "visibility": visibility or ("shared" if ref.label in ("tenant", "global") else "private"),
                "description": description or "",
                "version": 0,
                "label": None,
                "versions": [],
                "usage_count": 0,
            },
        )
        batch.add(record, self.vector(text), actor="playbook", payload={"playbook": ref.name, "scope": ref.label})
        return record, True

    def update_header(self, batch: Batch, header: MemoryRecord, now: float, payload: dict[str, Any] | None = None, **changes: Any) -> MemoryRecord:
        updated = header.copy(metadata={**header.metadata, **changes}, updated_at=now)
        batch.update(updated, None, old_text=header.text, actor="playbook", payload=payload or {"playbook": header.metadata.get("name")})
        return updated

    # strategies ----------------------------------------------------------------------------
    def strategies(self, ref: PlaybookRef, *, default: str = PER_LEARNER_PLAYBOOK) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        return [(r, v) for r, v in self.store.list_bullets(ref.space) if is_strategy_of(r, ref.name, default=default)]

    def strategies_in(self, batch: Batch, ref: PlaybookRef, *, default: str = PER_LEARNER_PLAYBOOK) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        return [(r, v) for r, v in batch.list_bullets(ref.space) if is_strategy_of(r, ref.name, default=default)]

    def new_strategy(
        self,
        ref: PlaybookRef,
        pattern: str,
        cat: str,
        *,
        context: str,
        evidence: Evidence,
        now: float,
        extra: Mapping[str, Any] | None = None,
    ) -> MemoryRecord:
        """A new strategy record of the playbook (a valid tutoring bullet too)."""
        kind = _KIND_OF[cat]
        cls = DEFAULT_CLASS[kind]
        topic = snake_case(context)[:64] if context else ""
        record = MemoryRecord(
            id=new_id(),
            scope=ref.at(""),
            text=pattern,
            kind=kind,
            memory_class=cls,
            topic=topic or GENERAL_TOPIC,
            section=section_for(kind),
            tags=[cat, topic or GENERAL_TOPIC],
            strengths={c.value: (1.0 if c is cls else 0.0) for c in MemoryClass},
            created_at=now,
            content_hash=content_hash(pattern),
            metadata={PLAYBOOK_KEY: ref.name, "category": cat, "context": context, **(extra or {})},
        )
        record = finalize_bullet(record)
        return with_evidence(record, evidence, now=now, half_life_days=self.half_life_days).copy(updated_at=None)

    # versions -----------------------------------------------------------------------------------
    def record_version(
        self,
        batch: Batch,
        ref: PlaybookRef,
        header: MemoryRecord,
        strategies: Iterable[MemoryRecord],
        now: float,
        *,
        major: bool = False,
        reason: str = "update",
        change: Mapping[str, Any] | None = None,
        header_changes: Mapping[str, Any] | None = None,
    ) -> MemoryRecord:
        """Make the next version (a snapshot of ``strategies``), apply retention, and
        update the header; returns the updated header."""
        meta = header.metadata
        number = int(meta.get("version") or 0) + 1
        label = version_label(meta.get("label"), major=major or number == 1)
        entries = sorted((snapshot_entry(r) for r in strategies), key=lambda e: (e["created_at"], e["id"]))
        digest = snapshot_digest(entries)
        text = f"Playbook {ref.name} version"
        version = MemoryRecord(
            id=new_id(),
            scope=ref.at(RUN_VERSIONS),
            text=text,
            kind=Kind.PLAYBOOK_VERSION,
            memory_class=DEFAULT_CLASS[Kind.PLAYBOOK_VERSION],
            created_at=now,
            content_hash=digest,
            metadata={
                "playbook": ref.name,
                "playbook_id": header.id,
                "version": number,
                "label": label,
                "major": major or number == 1,
                "reason": reason,
                "change": dict(change or {}),
                "strategies": entries,
            },
            lineage={"playbook_id": header.id},
        )
        batch.add(version, self.vector(text), actor="playbook", payload={"playbook": ref.name, "version": number, "label": label})
        index = [list(v) for v in meta.get("versions") or ()]
        index.append([number, bool(version.metadata["major"]), now, version.id, label])
        keep = versions_to_keep([(int(v[0]), bool(v[1]), float(v[2])) for v in index], now=now, rule=self.retention)
        dropped = [v for v in index if int(v[0]) not in keep]
        if dropped:
            records = batch.get_many([str(v[3]) for v in dropped])
            for v in dropped:
                record = records.get(str(v[3]))
                if record is not None and record.status is Status.ACTIVE:
                    batch.delete(record, op="prune_version", actor="retention", payload={"playbook": ref.name, "version": int(v[0])})
        index = [v for v in index if int(v[0]) in keep]
        return self.update_header(
            batch, header, now, {"playbook": ref.name, "version": number, "label": label},
            version=number, label=label, versions=index, **dict(header_changes or {}),
        )

    def version_if_changed(self, scope: Scope, name: str, now: float, *, reason: str, change: Mapping[str, Any]) -> bool:
        """Make a version of the playbook ``name`` of ``scope``'s space when its
        strategies are not those of its current version (something outside a curation
        changed them: an import joining it, an undo); whether one was made. Every
        state of a playbook is a version, so a rollback can come back to this one."""
        space = Scope(scope.tenant_id, scope.user_id, scope.agent_id)
        header = self.header(PlaybookRef(space, name, ""))
        if header is None:
            return False  # strategies of no playbook: nothing to version
        ref = PlaybookRef(space, name, str(header.metadata.get("scope") or ""))
        with self.store.transaction() as batch:
            header = self.header_in(batch, ref)
            if header is None:
                return False
            strategies = [r for r, _ in self.strategies_in(batch, ref)]
            index = header.metadata.get("versions") or ()
            latest_id = str(index[-1][3]) if index and len(index[-1]) > 3 else None
            latest = batch.get_many([latest_id]).get(latest_id) if latest_id else None
            if latest is not None and latest.status is Status.ACTIVE and latest.content_hash == snapshot_digest(map(snapshot_entry, strategies)):
                return False
            self.record_version(batch, ref, header, strategies, now, reason=reason, change=change)
        return True

    def delete(self, ref: PlaybookRef, *, default: str = PER_LEARNER_PLAYBOOK) -> tuple[MemoryRecord | None, int, int]:
        """Delete the playbook: its header, its strategies and every version of it
        (those the header lists and any other of its name), in one transaction.
        Returns ``(header, strategies, versions)`` as deleted; nothing to delete:
        ``(None, 0, 0)``."""
        run = ScopeFilter(ref.scope.tenant_id, ref.scope.user_id, ref.scope.agent_id, RUN_VERSIONS)
        stray = [r.id for r in self.store.list(run) if r.kind is Kind.PLAYBOOK_VERSION and r.metadata.get("playbook") == ref.name]
        with self.store.transaction() as batch:
            header = self.header_in(batch, ref)
            strategies = [r for r, _ in self.strategies_in(batch, ref, default=default)]
            listed = [str(v[3]) for v in (header.metadata.get("versions") or ()) if len(v) > 3] if header is not None else []
            found = batch.get_many(list(dict.fromkeys([*listed, *stray])))
            versions = [
                r for r in found.values()
                if r.status is Status.ACTIVE and r.kind is Kind.PLAYBOOK_VERSION and r.scope.space == ref.scope.space
                and r.metadata.get("playbook") == ref.name
            ]
            payload = {"playbook": ref.name, "scope": ref.label}
            for record in [*strategies, *versions, *([header] if header is not None else [])]:
                batch.delete(record, op="delete_playbook", actor="playbook", payload=payload)
        return header, len(strategies), len(versions)

    @staticmethod
    def version_index(header: MemoryRecord | None) -> list[dict[str, Any]]:
        """The versions kept, oldest first: ``{"version", "version_label", "major", "created_at", "version_id"}``."""
        if header is None:
            return []
        return [
            {"version": int(v[0]), "version_label": v[4] if len(v) > 4 else None, "major": bool(v[1]),
             "created_at": from_epoch(float(v[2])).isoformat(), "version_id": str(v[3])}
            for v in header.metadata.get("versions") or ()
        ]

    def version_record(self, header: MemoryRecord | None, number: int) -> MemoryRecord | None:
        for v in (header.metadata.get("versions") or ()) if header is not None else ():
            if int(v[0]) == number:
                record = self.store.get(str(v[3]))
                if record is not None and record.status is Status.ACTIVE and record.kind is Kind.PLAYBOOK_VERSION:
                    return record
        return None


__all__ = [
    "PLAYBOOK_KEY",
    "RUN_PLAYBOOKS",
    "RUN_VERSIONS",
    "SCOPES",
    "Evidence",
    "PlaybookRef",
    "PlaybookStore",
    "category",
    "content_view",
    "evidence_of",
    "header_digest",
    "is_strategy_of",
    "outcome_share",
    "playbook_of",
    "recategorized",
    "playbook_view",
    "record_from_snapshot",
    "snapshot_digest",
    "with_current_names",
    "as_filed",
    "snapshot_entry",
    "strategy_entry",
    "version_view",
    "with_evidence",
]
