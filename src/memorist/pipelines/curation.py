"""Curation: candidate strategies become a playbook's
strategies, atomically, with a new version.

Each candidate — a pattern, its category (✓ helpful, ✗ harmful, ○ neutral), a
context, and the trajectories it rests on — lands on the playbook like this:

1. the same text as an existing strategy (normalised): its evidence is added there,
   whatever the category (a pattern named once as a success and once as a failure
   is one strategy whose outcomes disagree, and its confidence shows it);
2. else a strategy at cosine ≥ ``merge_threshold`` (0.85) of the same category —
   or of any category, for a neutral observation (a step that was taken in a run
   that did not succeed is evidence against the strategy that prescribed it): its
   evidence is added there;
3. else it is a new strategy. Harmful patterns become anti-patterns; nothing is
   dropped for being harmful.

A candidate whose category was credited across trajectories (the reflector's
association of a decision with outcomes) moves the strategy it lands on to that
category. A ○ neutral strategy not so credited whose listed trajectories mostly
succeeded (≥ 60 %, three at least) becomes ✓ helpful. (The other way round is left to the confidence: a
helpful strategy that keeps failing loses it, but is not turned into an
anti-pattern on outcomes alone — early on most runs fail, whatever a habit does.
What a failure directly follows is named a failure pattern by the reflector.) Then strategies of one category at
cosine ≥ ``merge_threshold`` are merged, their evidence combined; and a playbook
over ``max_strategies`` loses its lowest-confidence entries. The diff — added, updated, removed — is returned, and
the whole change, its version and the retention of old versions commit in one
transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import MemoryRecord, Status
from ..policies.learning import HARMFUL, HELPFUL, NEUTRAL, LearningConfig, support
from ..policies.text import normalize
from ..reserved import PER_LEARNER_PLAYBOOK
from ..store.base import Batch
from ..work import charge
from .playbooks import (
    Evidence,
    PlaybookRef,
    PlaybookStore,
    category,
    evidence_of,
    new_id,
    outcome_share,
    recategorized,
    record_from_snapshot,
    snapshot_digest,
    snapshot_entry,
    strategy_entry,
    with_evidence,
)
from .undo import OPERATION_ID, UNDO, new_operation_id, undo_payload

#: When a neutral strategy becomes helpful: the share of its listed trajectories that
#: succeeded, and the fewest trajectories.
PROMOTE = (0.6, 3)
#: The metadata keys of a strategy whose category was credited across trajectories,
#: and of one the runs have doubted (both outcomes seen, no credit yet).
SETTLED = "credited"
DOUBTED = "doubted"

logger = logging.getLogger("memorist.curation")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A strategy to curate into a playbook.

    ``evidence``: ``(trajectory_id, status, at, support)`` of the trajectories that
    show it; a support of None is the outcome's support of the category of the
    strategy the candidate lands on (:func:`~memorist.policies.learning.support`).
    ``declared``/``declared_count``: a confidence given by hand for that much
    evidence (``update_playbook``).
    """

    category: str
    pattern: str
    context: str = ""
    evidence: tuple[tuple[str, str, float, float | None], ...] = ()
    declared: float | None = None
    declared_count: int = 0
    #: The category was credited across trajectories: the strategy it lands on moves
    #: to it, and is no longer promoted on its outcomes alone.
    settles: bool = False
    #: Both outcomes were seen and the runs do not credit it (or no longer do): a ✓
    #: strategy it lands on goes back to neutral.
    doubts: bool = False


@dataclass(slots=True)
class _Plan:
    """A curation worked out: the strategies ``before`` and after (``records``, their
    ``vectors``), the new ones, those candidates landed on, the merges (kept, merged)
    and the strategies the capacity removed (``pruned``)."""

    before: dict[str, MemoryRecord]
    records: dict[str, MemoryRecord]
    vectors: dict[str, np.ndarray]
    new_ids: list[str]
    touched: list[str]
    merged: list[tuple[str, str]]
    pruned: dict[str, MemoryRecord]


def _weighed(items: tuple[tuple[str, str, float, float | None], ...], cat: str) -> tuple[tuple[str, str, float, float], ...]:
    return tuple((t, st, at, support(cat, st) if w is None else w) for t, st, at, w in items)


_CODE = {HELPFUL: 0, HARMFUL: 1, NEUTRAL: 2}
#: Candidates (or strategies) compared with the playbook at a time: one matrix product each.
_BLOCK = 256


class _Index:
    """Where each candidate lands (rules 1 and 2 of the module), candidate after
    candidate: the playbook's vectors are stacked once and compared with ``_BLOCK``
    candidates at a time; a candidate may land on a strategy an earlier one made
    (those columns follow the playbook's)."""

    def __init__(self, records: dict[str, MemoryRecord], vectors: dict[str, np.ndarray], cand_vectors: np.ndarray, threshold: float) -> None:
        self.threshold = threshold - 1e-6
        self.by_text: dict[str, str] = {}
        for rid, record in records.items():
            self.by_text.setdefault(normalize(record.text), rid)
        self.ids = [rid for rid in records if rid in vectors]
        self.column = {rid: k for k, rid in enumerate(self.ids)}
        self.candidates = np.asarray(cand_vectors, np.float32)
        self.codes = np.empty(len(self.ids) + len(self.candidates), np.int8)  # each column's category
        self.codes[: len(self.ids)] = [_CODE[category(records[rid])] for rid in self.ids]
        self.existing = np.stack([vectors[i] for i in self.ids]) if self.ids else None
        self.made: list[int] = []  # the candidate each column after the playbook's came from
        self.block = -1
        self.against_old = self.against_new = np.zeros((0, 0), np.float32)

    def match(self, i: int, cand: Candidate) -> str | None:
        charge(1 + (len(self.ids) >> 4))  # compared with every strategy: 16 a unit
        target = self.by_text.get(normalize(cand.pattern))
        if target is not None or not self.ids:
            return target
        if i // _BLOCK != self.block:
            self.block = i // _BLOCK
            rows = self.candidates[self.block * _BLOCK:(self.block + 1) * _BLOCK]
            self.against_old = rows @ self.existing.T if self.existing is not None else np.zeros((len(rows), 0), np.float32)
            self.against_new = rows @ self.candidates.T
        row = i % _BLOCK
        sims = np.concatenate([self.against_old[row], self.against_new[row][self.made]]) if self.made else self.against_old[row]
        if cand.category != NEUTRAL:
            sims = np.where(self.codes[: len(self.ids)] == _CODE[cand.category], sims, -np.inf)
        k = int(np.argmax(sims))
        return self.ids[k] if float(sims[k]) >= self.threshold else None

    def landed(self, record: MemoryRecord) -> None:
        """A candidate landed on ``record`` (its category may have changed)."""
        if record.id in self.column:
            self.codes[self.column[record.id]] = _CODE[category(record)]

    def added(self, i: int, record: MemoryRecord) -> None:
        """Candidate ``i`` made the new strategy ``record`` (its vector is the candidate's)."""
        self.by_text.setdefault(normalize(record.text), record.id)
        self.codes[len(self.ids)] = _CODE[category(record)]
        self.column[record.id] = len(self.ids)
        self.ids.append(record.id)
        self.made.append(i)


class Curation:
    """Applies candidates, replacements and rollbacks to playbooks."""

    def __init__(self, playbooks: PlaybookStore, config: LearningConfig, *, default_name: str = PER_LEARNER_PLAYBOOK) -> None:
        self.playbooks = playbooks
        self.config = config
        self.default_name = default_name

    @property
    def store(self) -> Any:
        return self.playbooks.store

    # the plan ---------------------------------------------------------------------------------
    def _dedup(self, records: dict[str, MemoryRecord], vectors: dict[str, np.ndarray], now: float) -> list[tuple[str, str]]:
        """Merge strategies of one category at cosine >= the threshold; returns (kept, merged) pairs.

        As if every pair were examined in the playbook's order, the first close pair
        merged and the examination started again: the strategies before a merged pair
        have no close partner left (merging changes no vector nor category), so one pass
        in that order, each strategy merging its close partners until it is merged
        itself, gives the same merges. The similarities are computed per category,
        ``_BLOCK`` rows at a time."""
        threshold = self.config.merge_threshold - 1e-6
        ids = [i for i in records if i in vectors]
        if len(ids) < 2:
            return []
        groups: dict[str, list[int]] = {}
        for k, rid in enumerate(ids):
            groups.setdefault(category(records[rid]), []).append(k)
        partners: list[np.ndarray] = [np.zeros(0, np.int64)] * len(ids)
        for members in groups.values():
            if len(members) < 2:
                continue
            where = np.asarray(members, np.int64)
            matrix = np.stack([vectors[ids[k]] for k in members])
            for start in range(0, len(members), _BLOCK):
                rows = matrix[start:start + _BLOCK]
                charge(len(rows) * (1 + (len(members) >> 4)))  # every pair of the category: 16 a unit
                sims = rows @ matrix.T
                for row in range(len(rows)):
                    close = np.flatnonzero(sims[row, start + row + 1:] >= threshold) + start + row + 1
                    if len(close):
                        partners[members[start + row]] = where[close]
        alive = np.ones(len(ids), bool)
        merged: list[tuple[str, str]] = []
        for a in range(len(ids)):
            if not alive[a] or not len(partners[a]):
                continue
            for b in partners[a][alive[partners[a]]].tolist():
                ra, rb = records[ids[a]], records[ids[b]]
                ea, eb = evidence_of(ra), evidence_of(rb)
                keep, drop = (ra, rb) if (ea.total, -ra.created_at) >= (eb.total, -rb.created_at) else (rb, ra)
                ek, ed = (ea, eb) if keep is ra else (eb, ea)
                survivor = with_evidence(keep, ek.merge(ed, self.config.evidence_kept), now=now, half_life_days=self.playbooks.half_life_days)
                if not survivor.metadata.get("context") and drop.metadata.get("context"):
                    survivor = survivor.copy(metadata={**survivor.metadata, "context": drop.metadata["context"]})
                records[keep.id] = survivor
                del records[drop.id]
                vectors.pop(drop.id, None)
                merged.append((keep.id, drop.id))
                alive[a if drop is ra else b] = False
                if drop is ra:
                    break
        return merged

    def _follow_evidence(self, record: MemoryRecord, now: float) -> MemoryRecord:
        ev = evidence_of(record)
        share = outcome_share(ev)
        if share is None:
            return record
        bound, fewest = PROMOTE
        judged = record.metadata.get(SETTLED) or record.metadata.get(DOUBTED)  # the runs' association decides it, not its share
        if category(record) == NEUTRAL and not judged and len(ev.items) >= fewest and share >= bound:
            return recategorized(record, HELPFUL, now=now, half_life_days=self.playbooks.half_life_days)
        return record

    def _over_capacity(self, records: dict[str, MemoryRecord], now: float) -> list[str]:
        excess = len(records) - self.config.max_strategies
        if excess <= 0:
            return []
        hl = self.playbooks.half_life_days

        def rank(r: MemoryRecord) -> tuple[float, int, float, str]:
            ev = evidence_of(r)
            return (ev.confidence(now, hl), ev.total, r.updated_at or r.created_at, r.id)

        return [r.id for r in sorted(records.values(), key=rank)[:excess]]

    def _plan(self, ref: PlaybookRef, rows: Sequence[tuple[MemoryRecord, Any]], candidates: Sequence[Candidate], cand_vectors: np.ndarray,
              *, now: float, replace: bool) -> _Plan:
        """What curating ``candidates`` into the strategies ``rows`` makes of them (no write)."""
        keep = self.config.evidence_kept
        hl = self.playbooks.half_life_days
        charge(len(rows))  # the playbook read
        before = {r.id: r for r, _ in rows}
        records = dict(before)
        vectors = {r.id: np.asarray(v, np.float32) for r, v in rows if v is not None}
        if replace:
            records.clear()
            vectors.clear()
        index = _Index(records, vectors, cand_vectors, self.config.merge_threshold)
        new_ids: list[str] = []
        touched: list[str] = []
        for i, (cand, vector) in enumerate(zip(candidates, cand_vectors, strict=True)):
            target = index.match(i, cand)
            if target is not None:
                current = records[target]
                ev = evidence_of(current)
                if cand.declared is not None or cand.declared_count:
                    ev = ev.merge(Evidence(declared=cand.declared, declared_count=cand.declared_count, last_at=now), keep)
                ev = ev.add(_weighed(cand.evidence, category(current)), keep)
                updated = with_evidence(current, ev, now=now, half_life_days=hl)
                if cand.settles:
                    if category(updated) != cand.category:
                        updated = recategorized(updated, cand.category, now=now, half_life_days=hl)
                    updated = updated.copy(metadata={**updated.metadata, SETTLED: True})
                elif cand.doubts:
                    # A ✓ the runs no longer credit (one success made it, or a credit
                    # that more runs have not borne out) goes back to ○; a ✗ stays until
                    # the runs credit it otherwise (trying a harmful step again costs more).
                    if category(updated) == HELPFUL:
                        updated = recategorized(updated, NEUTRAL, now=now, half_life_days=hl)
                    meta = {k: v for k, v in updated.metadata.items() if k != SETTLED or category(updated) == HARMFUL}
                    updated = updated.copy(metadata={**meta, DOUBTED: True})
                if cand.context and not updated.metadata.get("context"):
                    updated = updated.copy(metadata={**updated.metadata, "context": cand.context})
                records[target] = updated
                index.landed(updated)
                touched.append(target)
                continue
            ev = Evidence(declared=cand.declared, declared_count=cand.declared_count, last_at=now if cand.declared is not None else None)
            ev = ev.add(_weighed(cand.evidence, cand.category), keep)
            record = self.playbooks.new_strategy(ref, cand.pattern, cand.category, context=cand.context, evidence=ev, now=now)
            if cand.settles or cand.doubts:
                record = record.copy(metadata={**record.metadata, (SETTLED if cand.settles else DOUBTED): True})
            records[record.id] = record
            vectors[record.id] = np.asarray(vector, np.float32)
            index.added(i, record)
            new_ids.append(record.id)
        for rid in dict.fromkeys(touched):
            records[rid] = self._follow_evidence(records[rid], now)
        merged = self._dedup(records, vectors, now)
        pruned = self._over_capacity(records, now)
        gone = {rid: records.pop(rid) for rid in pruned}
        return _Plan(before, records, vectors, new_ids, touched, merged, gone)

    # the transaction -------------------------------------------------------------------------------
    def apply(
        self,
        ref: PlaybookRef,
        candidates: Sequence[Candidate],
        *,
        now: float,
        replace: bool = False,
        reason: str = "curate",
        major: bool = False,
        header_changes: Callable[[MemoryRecord], dict[str, Any]] | None = None,
        within: Callable[[Batch], None] | None = None,
    ) -> dict[str, Any]:
        """Curate ``candidates`` into the playbook ``ref`` (``replace``: instead of
        what it holds). ``within(batch)`` runs in the same transaction (e.g. marking
        reflections curated); ``header_changes(header)`` gives header metadata to set.

        The comparisons are made before the write transaction, on the playbook as
        read then; in the transaction the playbook is read again, and compared again
        only if another writer changed it meanwhile. Strategies this call made that
        the playbook's capacity (``max_strategies``) left out are the result's
        ``left_out``."""
        hl = self.playbooks.half_life_days
        cand_vectors = self.playbooks.embedder.embed([c.pattern for c in candidates]) if candidates else np.zeros((0, 1), np.float32)
        cand_vectors = np.asarray(cand_vectors, np.float32)
        read = self.playbooks.strategies(ref, default=self.default_name)
        plan = self._plan(ref, read, candidates, cand_vectors, now=now, replace=replace)
        with self.store.transaction() as batch:
            header, _ = self.playbooks.ensure_header(batch, ref, now)
            rows = self.playbooks.strategies_in(batch, ref, default=self.default_name)
            if [r for r, _ in rows] != [r for r, _ in read]:  # another writer came between: compare again
                plan = self._plan(ref, rows, candidates, cand_vectors, now=now, replace=replace)
            before, records, vectors, merged = plan.before, plan.records, plan.vectors, plan.merged
            new_ids, touched, pruned = plan.new_ids, plan.touched, plan.pruned
            if pruned:
                logger.warning("memorist: playbook %s holds at most %d strategies (max_strategies): removed the %d of least confidence",
                               ref.name, self.config.max_strategies, len(pruned))
            # Write the difference between before and after.
            added = [rid for rid in new_ids if rid in records]
            removed: list[MemoryRecord] = []
            merged_into = {drop: kept for kept, drop in merged}
            # A curation that merges or drops strategies is reversible: each of its
            # events carries its id, so that once it is rolled back none of them stands
            # in the way of rolling back an earlier one.
            part = {OPERATION_ID: new_operation_id("curation")} if any(rid not in records for rid in before) else {}
            for rid, old in before.items():
                if rid in records:
                    continue
                kept = merged_into.get(rid)
                while kept is not None and kept not in records:
                    kept = merged_into.get(kept)
                if kept is not None:
                    gone = old.copy(status=Status.DELETED, updated_at=now, lineage={**old.lineage, "merged_into": kept})
                    batch.update(gone, None, old_text=old.text, op="merge", actor="curator", payload={"playbook": ref.name, "kept": kept, **part})
                else:
                    batch.delete(old, op="remove", actor="curator",
                                 payload={"playbook": ref.name, "reason": "replace" if replace else "capacity", **part})
                removed.append(old)
            for rid in added:
                batch.add(records[rid], vectors.get(rid), actor="curator", payload={"playbook": ref.name, "delta": "new", **part})
            updated_ids = [rid for rid in dict.fromkeys(touched + [k for k, _ in merged]) if rid in before and rid in records]
            for rid in updated_ids:
                batch.update(records[rid], None, old_text=before[rid].text, op="reinforce", actor="curator", payload={"playbook": ref.name, **part})
            if within is not None:
                within(batch)
            changed = bool(added or removed or updated_ids)
            extra = header_changes(header) if header_changes is not None else {}
            if changed:
                header = self.playbooks.record_version(
                    batch, ref, header, records.values(), now, major=major or replace, reason=reason,
                    change={"added": added, "updated": updated_ids, "removed": [r.id for r in removed]},
                    header_changes=extra,
                )
            elif extra:
                header = self.playbooks.update_header(batch, header, now, **extra)
            undo_seq = None
            if removed:
                # A curation that merged or dropped strategies is undoable (memory.rollback):
                # its last event holds every strategy it changed, as it was.
                undo_seq = batch.event("curation", ref.scope, actor="curator", payload={
                    "playbook": ref.name, "merged": [list(p) for p in merged], "removed": [r.id for r in removed], **part,
                    UNDO: undo_payload([*removed, *(before[i] for i in updated_ids)], added),
                })
        result = {
            "playbook_id": header.id,
            "name": ref.name,
            "version": int(header.metadata.get("version") or 0),
            "version_label": header.metadata.get("label") or "0.0",
            "added": [strategy_entry(records[i], now=now, half_life_days=hl) for i in added],
            "updated": [strategy_entry(records[i], now=now, half_life_days=hl) for i in updated_ids],
            "removed": [strategy_entry(r, now=now, half_life_days=hl) for r in removed],
            "merged": [list(p) for p in merged],
            # Strategies this call made that the playbook's capacity left out (never stored).
            "left_out": [strategy_entry(pruned[i], now=now, half_life_days=hl) for i in new_ids if i in pruned],
        }
        if undo_seq is not None:
            result["rollback_id"] = undo_seq
        return result

    def rollback(self, ref: PlaybookRef, version: MemoryRecord, *, now: float) -> dict[str, Any]:
        """A new (major) version whose strategies are those of ``version``; when the
        playbook holds them already (``version`` is the current one), nothing is
        written, as for a curation that changes nothing, and ``message`` says so."""
        entries = list(version.metadata.get("strategies") or ())
        vectors = self.playbooks.embedder.embed([str(e.get("text", "")) for e in entries]) if entries else []
        number = int(version.metadata.get("version") or 0)
        hl = self.playbooks.half_life_days
        with self.store.transaction() as batch:
            header, _ = self.playbooks.ensure_header(batch, ref, now)
            current = {r.id: r for r, _ in self.playbooks.strategies_in(batch, ref, default=self.default_name)}
            if snapshot_digest(snapshot_entry(r) for r in current.values()) == snapshot_digest(entries):
                at = int(header.metadata.get("version") or 0)
                return {
                    "playbook_id": header.id,
                    "name": ref.name,
                    "version": at,
                    "version_label": header.metadata.get("label"),
                    "rolled_back_to": number,
                    "added": [],
                    "updated": [],
                    "removed": [],
                    "message": f"Playbook {ref.name!r} already holds the strategies of version {number}: "
                               f"nothing to roll back, no version written (it stays at version {at}).",
                }
            wanted = {str(e["id"]): (e, vectors[i]) for i, e in enumerate(entries)}
            stored = batch.get_many(list(wanted))
            added: list[MemoryRecord] = []
            updated: list[MemoryRecord] = []
            removed: list[MemoryRecord] = []
            for rid, record in current.items():
                if rid not in wanted:
                    batch.delete(record, op="remove", actor="rollback", payload={"playbook": ref.name, "rolled_back_to": number})
                    removed.append(record)
            final: list[MemoryRecord] = []
            for rid, (entry, vector) in wanted.items():
                restored = record_from_snapshot(entry, ref.at(""), ref.name)
                if rid in current:
                    old = current[rid]
                    restored = restored.copy(
                        strengths=old.strengths, last_access=old.last_access, access_count=old.access_count,
                        scope=old.scope, updated_at=now,
                    )
                    batch.update(restored, None, old_text=old.text, op="rollback", actor="rollback", payload={"playbook": ref.name, "rolled_back_to": number})
                    updated.append(restored)
                else:
                    was = stored.get(rid)
                    restored = restored.copy(id=new_id() if was is not None else rid, lineage={"restored_from": rid}, updated_at=None)
                    batch.add(restored, np.asarray(vector, np.float32), actor="rollback", payload={"playbook": ref.name, "rolled_back_to": number})
                    added.append(restored)
                final.append(restored)
            header = self.playbooks.record_version(
                batch, ref, header, final, now, major=True, reason="rollback",
                change={"rolled_back_to": number, "added": [r.id for r in added], "updated": [r.id for r in updated], "removed": [r.id for r in removed]},
            )
        return {
            "playbook_id": header.id,
            "name": ref.name,
            "version": int(header.metadata.get("version") or 0),
            "version_label": header.metadata.get("label"),
            "rolled_back_to": number,
            "added": [strategy_entry(r, now=now, half_life_days=hl) for r in added],
            "updated": [strategy_entry(r, now=now, half_life_days=hl) for r in updated],
            "removed": [strategy_entry(r, now=now, half_life_days=hl) for r in removed],
        }


__all__ = ["Candidate", "Curation"]
