"""Learn: reflect → curate → apply the delta atomically → dedup → prune → version.

A learner's playbook is the set of bullets (memories with a ``section``) in the
learner's space whose metadata ``playbook`` is the preset's name — or, for the ACE
baseline preset, in one space shared by every learner. It is a versioned
playbook like any other (:mod:`memorist.pipelines.playbooks`): every change it takes makes
an immutable version in the same transaction. :meth:`LearningPipeline.load` reads
it once into a :class:`PlaybookState`; retrieval and learning in the same turn work
on that state.

Access counting: every bullet retrieved and
every bullet reinforced is one access event — the space's clock advances once per
bullet, and each bullet is stamped with its own tick — so decay runs at the
specified rate whatever ``top_k`` is.

Concurrency: the delta is applied inside one store transaction. The state carries
the space's version from when it was loaded; inside the transaction, before any
write, the version is checked again and, if another writer got there first, the
bullets are re-read. Every new bullet is then checked against them (normalised hash
and similarity), so two writers adding the same lesson at once end with one bullet
and one reinforcement, never two bullets.

Everything is logged in the ACE log format (``[ACE Memory] ...``) through the ``memorist.ace`` loggers.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..embed.base import Embedder
from ..model import Kind, MemoryClass, MemoryRecord, Scope, Status, new_id
from ..policies.decay import CLASSES, record_score
from ..policies.dedup import (
    SOURCES_KEY,
    choose_first_seen,
    choose_survivor,
    finalize_bullet,
    jaccard,
    merge_into,
    union,
)
from ..policies.playbook import PlaybookConfig, context_score, prune_plan
from ..policies.taxonomy import infer_topic, snake_case
from ..policies.text import content_hash, normalize, preview
from ..roles.learning import (
    Bullet,
    CurationInput,
    Curator,
    Delta,
    NewBullet,
    Reflection,
    Reflector,
    Similar,
    Trace,
    bullet_from,
)
from ..store.base import Batch, ScopeFilter, Store
from .playbooks import PlaybookRef, PlaybookStore, is_strategy_of
from .undo import OPERATION_ID, UNDO, new_operation_id, undo_payload

memory_log = logging.getLogger("memorist.ace.memory")
runner_log = logging.getLogger("memorist.ace.runner")
reflector_log = logging.getLogger("memorist.ace.reflector")
curator_log = logging.getLogger("memorist.ace.curator")

@dataclass
class PlaybookState:
    """One playbook as loaded for a turn: its bullets, their vectors, the space's
    access clock and version, and the tag (category) and hash indexes."""

    scope: Scope  # the playbook's space (run_id empty)
    learner_id: str
    records: dict[str, MemoryRecord] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    clock: int = 0
    version: int = 0
    categories: dict[str, set[str]] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.records)

    def fill(self, rows: Iterable[tuple[MemoryRecord, np.ndarray | None]]) -> None:
        self.records.clear()
        self.vectors.clear()
        self.categories.clear()
        self.hashes.clear()
        for record, vector in rows:
            self.put(record, vector)

    def put(self, record: MemoryRecord, vector: np.ndarray | None) -> None:
        old = self.records.get(record.id)
        if old is not None:
            self._unindex(old)
        self.records[record.id] = record
        if vector is not None:
            self.vectors[record.id] = np.asarray(vector, dtype=np.float32)
        for tag in record.tags:
            self.categories.setdefault(tag, set()).add(record.id)
        self.hashes[record.content_hash] = record.id

    def remove(self, memory_id: str) -> MemoryRecord | None:
        record = self.records.pop(memory_id, None)
        self.vectors.pop(memory_id, None)
        if record is not None:
            self._unindex(record)
        return record

    def _unindex(self, record: MemoryRecord) -> None:
        for tag in record.tags:
            ids = self.categories.get(tag)
            if ids is not None:
                ids.discard(record.id)
                if not ids:
                    del self.categories[tag]
        if self.hashes.get(record.content_hash) == record.id:
            del self.hashes[record.content_hash]

    def similarities(self, vector: np.ndarray, ids: Sequence[str]) -> np.ndarray:
        """Cosine of ``vector`` with each of ``ids`` (0 for a bullet without a vector)."""
        if not ids:
            return np.zeros(0, dtype=np.float32)
        dim = vector.shape[0]
        matrix = np.stack([self.vectors.get(i, np.zeros(dim, np.float32)) for i in ids])
        return matrix @ vector.astype(np.float32)


@dataclass
class LearnResult:
    """What one learning step changed."""

    new: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    merged: list[tuple[str, str]] = field(default_factory=list)  # (kept, merged)
    pruned: list[str] = field(default_factory=list)
    lessons: list[dict[str, Any]] = field(default_factory=list)
    reflection: Reflection | None = None
    delta: Delta | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_new_bullets": len(self.new),
            "num_updates": len(self.updated),
            "num_removals": len(self.removed),
            "new_ids": list(self.new),
            "updated_ids": list(self.updated),
            "removed_ids": list(self.removed),
            "merged": [list(p) for p in self.merged],
            "pruned_ids": list(self.pruned),
            "lessons": list(self.lessons),
        }


class LearningPipeline:
    """Loads playbooks, retrieves bullets for a prompt and applies what a turn taught."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        config: PlaybookConfig,
        reflector: Reflector,
        curator: Curator,
        *,
        tenant_id: str = "",
        playbooks: PlaybookStore | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.reflector = reflector
        self.curator = curator
        self.tenant_id = tenant_id
        self.rates: Mapping[str, float] = config.decay_rates or {}
        self.backend = type(store).__name__.removesuffix("Store") or "store"
        #: Where each change's version goes: the playbook of the space named after the preset.
        self.playbooks = playbooks if playbooks is not None else PlaybookStore(store, embedder)

    # spaces and state ---------------------------------------------------------------
    def space(self, learner_id: str) -> Scope:
        user = learner_id if self.config.per_learner else self.config.shared_user_id
        return Scope(self.tenant_id, user, self.config.agent_id)

    def _filter(self, scope: Scope) -> ScopeFilter:
        return ScopeFilter(scope.tenant_id, scope.user_id, scope.agent_id)

    def ref(self, scope: Scope, name: str | None = None) -> PlaybookRef:
        """The versioned playbook this preset (or ``name``) keeps in ``scope``'s space."""
        return PlaybookRef(Scope(scope.tenant_id, scope.user_id, scope.agent_id), name or self.config.name, "agent" if scope.agent_id else "user")

    def _mine(self, rows: Iterable[tuple[MemoryRecord, np.ndarray | None]]) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        """The bullets of this preset's playbook among a space's (other playbooks' strategies stay out)."""
        name = self.config.name
        return [(r, v) for r, v in rows if is_strategy_of(r, name, default=name)]

    def load(self, learner_id: str) -> PlaybookState:
        """Read the learner's playbook (one query) and log the ``Loaded`` line."""
        scope = self.space(learner_id)
        # Retrievals of earlier turns may still be buffered: write them, so every
        # bullet is read with its latest access (usually a no-op: learning flushed them).
        self.store.flush()
        version = self.store.space_version(scope)  # first: a write after it shows as a new version
        state = PlaybookState(scope=scope, learner_id=learner_id, version=version)
        state.fill(self._mine(self.store.list_bullets(self._filter(scope))))
        state.clock = self.store.access_clock(scope)
        memory_log.info("[ACE Memory] Loaded %d bullets from %s for learner=%s", len(state), self.backend, learner_id)
        return state

    def score(self, state: PlaybookState, record: MemoryRecord) -> float:
        return record_score(record, state.clock, self.rates)

    # retrieval ---------------------------------------------------------------------------
    def retrieve(
        self,
        state: PlaybookState,
        query: str,
        *,
        top_k: int | None = None,
        topic: str | None = None,
        memory_types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        touch: bool = True,
        log: bool = True,
    ) -> list[Bullet]:
        """The bullets most relevant to ``query``, best first (at most ``top_k``).

        Candidates are filtered by memory type and tags, by the prune threshold (a
        decayed bullet is not shown) and by a minimum relevance; they are ranked by
        relevance plus the class priority (procedural > episodic > semantic) and the
        learner and topic boosts. With ``touch`` the retrieval is an access event:
        the space's clock advances and each returned bullet is touched.
        """
        cfg = self.config
        top_k = cfg.top_k if top_k is None else top_k
        chosen = self.rank(state, self.embedder.embed_query(query), top_k=top_k, topic=topic, memory_types=memory_types, tags=tags)
        bullets = [bullet_from(state.records[i], score=s, relevance=r) for i, s, r, _ in chosen]
        if touch and chosen:
            # One access event per bullet: each retrieval
            # of one bullet advances the clock and stamps that bullet with the tick.
            records = [state.records[i] for i, *_ in chosen]
            start = self.store.access_clock(state.scope)
            for record in records:
                self.store.touch([record], query=query)
            state.clock = self.store.access_clock(state.scope)
            for k, record in enumerate(records, 1):
                record.last_access[record.memory_class.value] = min(state.clock, start + k)
                record.access_count += 1
        if log:
            memory_log.info("[ACE Memory][Inject] Retrieved %d bullets for question: %s", len(bullets), preview(query))
            for b in bullets:
                memory_log.info(
                    "[ACE Memory][Inject] id=%s score=%.3f helpful=%d harmful=%d tags=%s content=%s",
                    b.id, b.score, b.helpful, b.harmful, list(b.tags), preview(b.content),
                )
        return bullets

    def rank(
        self,
        state: PlaybookState,
        query_vector: np.ndarray,
        *,
        top_k: int,
        topic: str | None = None,
        memory_types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        learner_id: str | None = None,
    ) -> list[tuple[str, float, float, float]]:
        """``(id, decay score, relevance, context score)`` of the best ``top_k`` bullets."""
        cfg = self.config
        types = {snake_case(t) for t in memory_types} if memory_types else None
        wanted = {snake_case(t) for t in tags} if tags else None
        ids = []
        scores = []
        for mid, record in state.records.items():
            if types is not None and record.memory_class.value not in types:
                continue
            if wanted is not None and not wanted.intersection(record.tags):
                continue
            s = self.score(state, record)
            if s < cfg.prune_threshold:
                continue
            ids.append(mid)
            scores.append(s)
        if not ids:
            return []
        relevance = np.clip(state.similarities(query_vector, ids), 0.0, 1.0)
        learner = learner_id if learner_id is not None else state.learner_id
        topic = snake_case(topic) if topic else None
        ranked = []
        for mid, s, rel in zip(ids, scores, relevance.tolist(), strict=True):
            if rel < cfg.min_relevance:
                continue
            record = state.records[mid]
            owner = record.metadata.get("learner_id")
            if owner:
                match: bool | None = owner == learner
            else:
                match = True if cfg.per_learner else None
            combined = context_score(
                rel, s, record.memory_class.value, learner_match=match,
                topic_match=bool(topic) and record.topic == topic, weights=cfg.weights,
            )
            ranked.append((mid, s, rel, combined, record.created_at))
        ranked.sort(key=lambda t: (-t[3], -t[2], -t[4], t[0]))
        return [(mid, s, rel, c) for mid, s, rel, c, _ in ranked[:top_k]]

    # learning --------------------------------------------------------------------------
    def learn(self, state: PlaybookState, trace: Trace, *, conversation_id: str = "", now: float | None = None) -> LearnResult:
        """Reflect on ``trace``, curate a delta and apply it with dedup and pruning,
        atomically. Returns what changed and logs the delta summary."""
        cfg = self.config
        now = time.time() if now is None else now
        topic = snake_case(trace.topic) if trace.topic else infer_topic(trace.question)
        trace = dataclasses.replace(trace, topic=topic)
        reflection = self.reflector.reflect(trace)
        lessons = tuple(x for x in reflection.lessons if x.content and x.content.strip())
        for i, lesson in enumerate(lessons, 1):
            reflector_log.info("[Reflector] Lesson %d/%d type=%s content=%s", i, len(lessons), lesson.type, preview(lesson.content))
        vectors = self._embed([x.content for x in lessons])
        lesson_topics = [snake_case(x.topic) if x.topic else topic for x in lessons]
        candidates = tuple(
            tuple(self._similar(state, vectors[x.content], lesson_topics[i]))
            for i, x in enumerate(lessons)
        )
        matrix = np.stack([vectors[x.content] for x in lessons]) if lessons else np.zeros((0, 1), np.float32)
        lesson_similarity = tuple(tuple(round(float(x), 6) for x in row) for row in (matrix @ matrix.T))
        existing: tuple[Bullet, ...] = ()
        if cfg.use_llm and state.records:  # context for a model; the heuristics do not need it
            qv = self.embedder.embed_query(trace.question)
            existing = tuple(bullet_from(state.records[i], score=s, relevance=r) for i, s, r, _ in self.rank(state, qv, top_k=10, topic=topic))
        data = CurationInput(
            reflection=Reflection(lessons=lessons, bullet_tags=reflection.bullet_tags, summary=reflection.summary, outcome=reflection.outcome),
            question=trace.question,
            learner_id=state.learner_id,
            topic=topic,
            candidates=candidates,
            existing=existing,
            lesson_similarity=lesson_similarity,
            max_new=cfg.new_cap,
            reinforce_threshold=cfg.reinforce_threshold,
        )
        # The curator base applies the cap on new bullets (Curator.curate).
        delta = self.curator.curate(data) if (lessons or reflection.bullet_tags) else Delta()
        missing = [nb.content for nb in delta.new if nb.content not in vectors]
        vectors.update(self._embed(missing))
        result = LearnResult(reflection=reflection, delta=delta, lessons=[x.to_dict() for x in lessons])
        if not delta.empty:
            try:
                with self.store.transaction() as batch:
                    self._apply(batch, state, delta, vectors, conversation_id, now, result)
            except BaseException:
                state.version = -1  # half-applied in memory: re-read on the next write
                raise
        runner_log.info(
            "[ACE Runner] Memory delta summary new=%d updates=%d removals=%d",
            len(result.new), len(result.updated), len(result.removed),
        )
        return result

    def _embed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        unique = list(dict.fromkeys(t for t in texts if t))
        if not unique:
            return {}
        matrix = self.embedder.embed(unique)
        return {t: matrix[i] for i, t in enumerate(unique)}

    def _same_topic(self, state: PlaybookState, topic: str | None) -> list[str]:
        if not topic:
            return list(state.records)
        return [i for i, r in state.records.items() if r.topic == topic]

    def _similar(self, state: PlaybookState, vector: np.ndarray, topic: str | None) -> list[Similar]:
        ids = self._same_topic(state, topic)
        if not ids:
            return []
        sims = state.similarities(vector, ids)
        order = np.argsort(-sims, kind="stable")[: self.config.candidates]
        return [
            Similar(bullet_from(state.records[ids[k]], score=self.score(state, state.records[ids[k]])), round(float(max(0.0, min(1.0, sims[k]))), 6))
            for k in order.tolist()
        ]

    # the transaction ----------------------------------------------------------------------
    def _apply(self, batch: Batch, state: PlaybookState, delta: Delta, vectors: dict[str, np.ndarray], run_id: str, now: float, result: LearnResult) -> None:
        cfg = self.config
        scope = state.scope
        if batch.space_version(scope) != state.version:
            # Someone wrote to this playbook since it was loaded: work on what is there now.
            state.fill(self._mine(batch.list_bullets(self._filter(scope))))
            memory_log.info("[ACE Memory] Playbook changed since it was loaded; re-read %d bullets for learner=%s", len(state), state.learner_id)
        state.clock = batch.advance_clock(scope, 0)
        removed: list[str] = result.removed

        for rid in delta.removals:
            record = state.records.get(rid)
            if record is None:
                continue
            batch.delete(record, op="remove", actor="curator", payload={"reason": delta.reasoning})
            state.remove(rid)
            removed.append(rid)
            memory_log.info("[ACE Memory][Delta Remove] id=%s tags=%s content=%s", rid, record.tags, preview(record.text))

        pending: dict[str, list[Any]] = {}

        def support(bullet_id: str, helpful: int, harmful: int, sources: Sequence[str]) -> None:
            entry = pending.setdefault(bullet_id, [0, 0, []])
            entry[0] += helpful
            entry[1] += harmful
            entry[2] = union(entry[2], list(sources))

        for upd in delta.updates:
            target = self._resolve(batch, state, upd.id)
            if target is None:
                memory_log.debug("[ACE Memory][Delta Update] skipped unknown id=%s", upd.id)
                continue
            support(target, int(upd.helpful), int(upd.harmful), upd.sources)

        changed: list[str] = []
        for nb in delta.new:
            vector = vectors.get(nb.content)
            duplicate, similarity = self._existing_twin(batch, state, nb, vector)
            if duplicate is not None:
                support(duplicate, nb.helpful, nb.harmful, nb.sources)
                memory_log.info("[ACE Memory][Delta Merge] kept=%s merged_score=%.3f", duplicate, similarity)
                continue
            record = self._new_record(state, nb, run_id, now)
            batch.add(record, vector, actor="curator", payload={"delta": "new", "topic": record.topic, "sources": list(nb.sources)})
            state.put(record, vector)
            result.new.append(record.id)
            changed.append(record.id)
            memory_log.info(
                "[ACE Memory][Delta Add] id=%s helpful=%d harmful=%d tags=%s content=%s",
                record.id, record.helpful, record.harmful, record.tags, preview(record.text),
            )

        if pending:
            # One access event per reinforced bullet: the
            # clock advances once per bullet and each is stamped with its own tick.
            fresh = batch.get_many(list(pending))
            live = [b for b in pending if fresh.get(b) is not None and fresh[b].status is Status.ACTIVE]
            start = batch.advance_clock(scope, 0)
            state.clock = batch.advance_clock(scope, len(live)) if live else start
            tick = {b: start + k for k, b in enumerate(live, 1)}
            for bullet_id, (helpful, harmful, sources) in pending.items():
                current = fresh.get(bullet_id)
                if current is None or current.status is not Status.ACTIVE:
                    continue
                cls = current.memory_class.value
                meta = dict(current.metadata)
                if sources:
                    meta[SOURCES_KEY] = union(meta.get(SOURCES_KEY, []), sources)
                updated = finalize_bullet(
                    current.copy(
                        helpful=current.helpful + helpful,
                        harmful=current.harmful + harmful,
                        access_count=current.access_count + 1,
                        last_access={**current.last_access, cls: max(int(current.last_access.get(cls, 0)), tick[bullet_id])},
                        metadata=meta,
                        updated_at=now,
                    ),
                    normalise_tags=cfg.normalise_tags,
                )
                batch.update(updated, None, old_text=current.text, op="reinforce", actor="curator",
                             payload={"helpful": helpful, "harmful": harmful, "clock": tick[bullet_id]})
                state.put(updated, state.vectors.get(bullet_id))
                if bullet_id not in result.new and bullet_id not in result.updated:
                    result.updated.append(bullet_id)
                changed.append(bullet_id)
                memory_log.info(
                    "[ACE Memory][Delta Update] id=%s applied=%s new_helpful=%d new_harmful=%d",
                    bullet_id, {"helpful": helpful, "harmful": harmful}, updated.helpful, updated.harmful,
                )

        self._dedup(batch, state, list(dict.fromkeys(changed)), now, result)
        self._prune(batch, state, result)
        if result.new or result.updated or result.removed:
            self.record_version(batch, state, now, change={"added": list(result.new), "updated": list(result.updated), "removed": list(result.removed)})
        state.version = batch.space_version(scope)

    def record_version(self, batch: Batch, state: PlaybookState, now: float, *, change: dict[str, Any], reason: str = "learn", name: str | None = None) -> None:
        """The playbook's next version: a snapshot of the state, in ``batch``."""
        ref = self.ref(state.scope, name)
        header, _ = self.playbooks.ensure_header(batch, ref, now)
        self.playbooks.record_version(batch, ref, header, state.records.values(), now, reason=reason, change=change)

    def _resolve(self, batch: Batch, state: PlaybookState, bullet_id: str) -> str | None:
        """The live bullet an id names: itself, or what it was merged into."""
        seen = set()
        current = bullet_id
        while current not in state.records:
            if current in seen or len(seen) > 8:
                return None
            seen.add(current)
            record = batch.get_many([current]).get(current)
            if record is None or record.scope.space != state.scope.space:
                return None
            nxt = record.lineage.get("merged_into")
            if not nxt:
                return None
            current = nxt
        return current

    def _existing_twin(self, batch: Batch, state: PlaybookState, nb: NewBullet, vector: np.ndarray | None) -> tuple[str | None, float]:
        """An existing bullet the new one duplicates (merge on write), and the similarity."""
        cfg = self.config
        digest = content_hash(nb.content)
        same_hash = batch.find_active_hash(state.scope, digest)
        if same_hash is not None and same_hash in state.records:
            other = state.records[same_hash]
            if cfg.dedup == "jaccard" or (other.topic == nb.topic and other.memory_class.value == nb.memory_type):
                return same_hash, 1.0
        if cfg.dedup != "semantic" or vector is None:
            return None, 0.0
        ids = [i for i, r in state.records.items() if r.topic == nb.topic and r.memory_class.value == nb.memory_type]
        if not ids:
            return None, 0.0
        sims = state.similarities(vector, ids)
        k = int(np.argmax(sims))
        if float(sims[k]) >= cfg.dedup_threshold - 1e-6:
            return ids[k], float(sims[k])
        return None, 0.0

    def _new_record(self, state: PlaybookState, nb: NewBullet, run_id: str, now: float) -> MemoryRecord:
        cfg = self.config
        kind = Kind(nb.kind) if nb.kind in Kind._value2member_map_ else Kind.STRATEGY
        cls = MemoryClass(nb.memory_type) if nb.memory_type in MemoryClass._value2member_map_ else MemoryClass.PROCEDURAL
        metadata: dict[str, Any] = {"playbook": cfg.name}
        if nb.sources:
            metadata[SOURCES_KEY] = list(nb.sources)
        # The learner whose turn taught it: retrieval boosts a learner's own bullets
        # (the retrieval's learner match), in a shared playbook too.
        metadata["learner_id"] = state.learner_id
        if not cfg.per_learner:
            metadata["taught_by"] = state.learner_id
        record = MemoryRecord(
            id=new_id(),
            scope=Scope(state.scope.tenant_id, state.scope.user_id, state.scope.agent_id, run_id),
            text=nb.content,
            kind=kind,
            memory_class=cls,
            topic=nb.topic,
            concept=nb.concept,
            section=nb.section or "strategies_and_hard_rules",
            tags=list(nb.tags),
            helpful=int(nb.helpful),
            harmful=int(nb.harmful),
            strengths={c: (1.0 if c == cls.value else 0.0) for c in CLASSES},
            last_access={c: state.clock for c in CLASSES},
            created_at=now,
            content_hash=content_hash(nb.content),
            metadata=metadata,
        )
        return finalize_bullet(record, normalise_tags=cfg.normalise_tags)

    # dedup and prune -----------------------------------------------------------------------
    def _partner(self, state: PlaybookState, bullet_id: str) -> tuple[str | None, float]:
        """The bullet ``bullet_id`` duplicates, under the preset's rule."""
        cfg = self.config
        record = state.records[bullet_id]
        if cfg.dedup == "jaccard":
            best, best_sim = None, 0.0
            for other_id, other in state.records.items():
                if other_id == bullet_id:
                    continue
                sim = jaccard(record.text, other.text)
                if sim > cfg.dedup_threshold and sim > best_sim:
                    best, best_sim = other_id, sim
            return best, best_sim
        ids = [
            i for i, r in state.records.items()
            if i != bullet_id and r.topic == record.topic and r.memory_class is record.memory_class
        ]
        if not ids or bullet_id not in state.vectors:
            return None, 0.0
        sims = state.similarities(state.vectors[bullet_id], ids)
        for i, other_id in enumerate(ids):  # the normalised hash is a duplicate whatever the vectors say
            if normalize(state.records[other_id].text) == normalize(record.text):
                sims[i] = 1.0
        k = int(np.argmax(sims))
        if float(sims[k]) >= cfg.dedup_threshold - 1e-6:
            return ids[k], float(sims[k])
        return None, 0.0

    def _dedup(self, batch: Batch, state: PlaybookState, changed: Sequence[str], now: float, result: LearnResult) -> None:
        """Merge each bullet this turn added or changed with its duplicates, if any."""
        queue = list(changed)
        while queue:
            bullet_id = queue.pop(0)
            if bullet_id not in state.records:
                continue
            other, _ = self._partner(state, bullet_id)
            if other is None:
                continue
            kept = self.merge(batch, state, bullet_id, other, now)
            dropped = other if kept == bullet_id else bullet_id
            result.merged.append((kept, dropped))
            # Counted net: a bullet born this turn and merged away is no removal, and
            # what absorbed it is an update.
            if dropped in result.new:
                result.new.remove(dropped)
            else:
                result.removed.append(dropped)
            if dropped in result.updated:
                result.updated.remove(dropped)
            if kept not in result.new and kept not in result.updated:
                result.updated.append(kept)
            queue.insert(0, kept)  # the survivor may duplicate yet another bullet

    def merge(self, batch: Batch, state: PlaybookState, a: str, b: str, now: float, *,
              combine: Callable[[MemoryRecord, MemoryRecord, MemoryRecord], MemoryRecord] | None = None) -> str:
        """Merge two bullets of ``state`` inside ``batch``; returns the survivor's id.
        ``combine(keep, drop, merged)`` adds to the merged bullet what else of both it
        keeps (a playbook's cleanup: the evidence of both)."""
        cfg = self.config
        fresh = batch.get_many([a, b])
        ra, rb = fresh.get(a, state.records[a]), fresh.get(b, state.records[b])
        keep, drop = choose_first_seen(ra, rb) if cfg.dedup == "jaccard" else choose_survivor(ra, rb)
        merged = merge_into(keep, drop, normalise_tags=cfg.normalise_tags).copy(updated_at=now)
        if combine is not None:
            merged = combine(keep, drop, merged)
        # Both events carry the merge's id: once it is rolled back, the survivor's
        # update is not a later change standing in the way of an earlier merge's rollback.
        operation = new_operation_id("merge")
        batch.update(merged, None, old_text=keep.text, op="merge", actor="dedup", payload={"merged": drop.id, OPERATION_ID: operation})
        gone = drop.copy(status=Status.DELETED, updated_at=now, lineage={**drop.lineage, "merged_into": keep.id})
        # The merge's last event holds both bullets as they were: memory.rollback(seq) undoes it.
        batch.update(gone, None, old_text=drop.text, op="merge", actor="dedup",
                     payload={"kept": keep.id, OPERATION_ID: operation, UNDO: undo_payload([keep, drop])})
        state.remove(drop.id)
        state.put(merged, state.vectors.get(keep.id))
        memory_log.info("[ACE Memory][Dedup Merge] kept=%s merged=%s", keep.id, drop.id)
        return keep.id

    def _prune(self, batch: Batch, state: PlaybookState, result: LearnResult) -> None:
        """Keep the ``max_bullets`` best by (score, helpful); remove the rest in one sweep."""
        items = [(i, self.score(state, r), r.helpful, r.created_at) for i, r in state.records.items()]
        doomed = prune_plan(items, self.config.max_bullets)
        if not doomed:
            return
        scores = {i: s for i, s, _, _ in items}
        for bullet_id in doomed:
            record = state.records[bullet_id]
            batch.delete(record, op="prune", actor="pruner", payload={"score": round(scores[bullet_id], 6), "helpful": record.helpful, "harmful": record.harmful})
            memory_log.info(
                "[ACE Memory][Prune] Removing id=%s score=%.3f helpful=%d harmful=%d tags=%s content=%s",
                bullet_id, scores[bullet_id], record.helpful, record.harmful, record.tags, record.text,
            )
            state.remove(bullet_id)
            result.pruned.append(bullet_id)
            if bullet_id in result.new:  # born and pruned in one turn: counted as neither
                result.new.remove(bullet_id)
            else:
                result.removed.append(bullet_id)
            if bullet_id in result.updated:
                result.updated.remove(bullet_id)
        memory_log.info("[ACE Memory] Pruned %d low-quality bullets", len(doomed))


__all__ = ["LearnResult", "LearningPipeline", "PlaybookState"]
