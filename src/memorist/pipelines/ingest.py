"""Ingest: a conversation turn becomes memories.

``infer=True``: extract facts → find similar stored memories → reconcile
(ADD / UPDATE / DELETE / NONE) → apply every decision and the turn's event in one
transaction. ``infer=False``: every non-system message is stored verbatim, with one
batched embedding call for the whole list.

What a turn is reconciled against is :func:`candidates_of` its scope: a user's or an
agent's memories last across conversations, so a turn of one run of theirs may
confirm, update or delete what another run said; a scope of a run alone is that run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import validate
from ..embed.base import Embedder
from ..errors import ValidationError
from ..llm.base import recording
from ..model import (
    DEFAULT_CLASS,
    Action,
    Decision,
    Existing,
    Fact,
    Kind,
    MemoryRecord,
    Message,
    Scope,
    Status,
    from_epoch,
    is_fact,
    new_id,
)
from ..policies.consolidation import DEFAULT_IMPORTANCE
from ..policies.search_keys import memory_key
from ..policies.text import content_hash
from ..reserved import STORE_ITEM_KEY
from ..roles.base import Extractor, Reconciler
from ..roles.extractor import MAX_FACTS_PER_TURN, first_facts
from ..store.base import Batch, ScopeFilter, Store
from ..store.sql import CHANGED_BY_RUNS
from .llm_events import turn_flags, write_llm_calls
from .undo import BOOKKEEPING, OPERATION_ID, UNDO, new_operation_id, undo_payload

logger = logging.getLogger("memorist")


# How many times a turn's reconciliation is decided before it is decided inside the
# write transaction (see Ingestor.add_inferred).
DECIDE_TRIES = 3
#: How much less similar than the least similar candidate shown a memory written
#: meanwhile must be to leave the candidates unchanged (float32 products of the
#: index and of this check may differ in their last bits).
_SCORE_MARGIN = 1e-4


def candidates_of(scope: Scope) -> ScopeFilter:
    """The memories a turn added in ``scope`` is reconciled against, and checked for
    duplicates in: its space (tenant, user, agent), whatever the run, when a user or
    an agent is named (their memories last across conversations); else the run's
    own. The space of no user and no agent holds every run-only conversation of the
    tenant, unrelated people's: one must neither change nor absorb another's facts."""
    if scope.user_id or scope.agent_id:
        return ScopeFilter(scope.tenant_id, scope.user_id, scope.agent_id)
    return ScopeFilter(scope.tenant_id, "", "", scope.run_id)


def _holds(record: MemoryRecord | None, candidates: ScopeFilter) -> bool:
    """Whether ``record`` is a stored fact a turn of ``candidates`` may find its text
    in: active, among them, a fact (no strategy saying the same words), and no
    LangGraph store's item (the app owns it and may delete it: the reconciler is
    never shown one either, see :meth:`Ingestor._similar_facts`)."""
    return (
        record is not None
        and record.status is Status.ACTIVE
        and candidates.matches(record.scope)
        and is_fact(record)
        and STORE_ITEM_KEY not in record.metadata
    )


class _ScopeMoved(Exception):
    """The scope's candidates changed between the decision and the write."""


def _shown(existing: list[list[Existing]]) -> list[list[tuple[str, str]]]:
    """What a reconciler's decision depends on: the candidates' ids and texts."""
    return [[(e.id, e.text) for e in group] for group in existing]


class _Turn:
    """The facts of one turn and the decision on them, with the scope version it
    was taken at (see :meth:`Ingestor.add_inferred`)."""

    def __init__(self, ingestor: Ingestor, scope: Scope, space: ScopeFilter, facts: Sequence[Fact], vectors: np.ndarray) -> None:
        self.ingestor = ingestor
        self.scope = scope
        self.space = space
        self.facts = facts
        self.vectors = vectors
        self.vector_of = {f.text: vectors[i] for i, f in enumerate(facts)}
        self.version = 0
        self.position: int | None = None
        self.existing: list[list[Existing]] = []
        self.decisions: list[Decision] = []

    def decide(self) -> None:
        """Read the candidates (the version and the log's end first) and decide on them."""
        store = self.ingestor.store
        self.version = store.space_version(self.scope)
        self.position = store.log_position()
        self.existing = self.ingestor.similar(self.space, self.facts, self.vectors)
        self.decisions = self.ingestor.reconciler.reconcile(self.facts, self.existing) if self.facts else []

    def refresh(self, batch: Batch, version: int, *, decide: bool = False) -> bool:
        """Bring the decision up to the scope's ``version`` (inside the write
        transaction). With the same candidates the decision stands; with others, a
        local reconciler (any, with ``decide``) decides again; otherwise this
        returns False and the decision must be taken again outside the lock."""
        if version == self.version or self._unmoved(batch):
            self.version = version
            return True
        fresh = self.ingestor.similar(self.space, self.facts, self.vectors)
        self.version = version
        if _shown(fresh) == _shown(self.existing):
            return True
        if not (decide or self.ingestor.reconciler.local):
            return False
        self.existing = fresh
        self.decisions = self.ingestor.reconciler.reconcile(self.facts, fresh)
        return True


    def _unmoved(self, batch: Batch) -> bool:
        """Whether the candidates shown are still the nearest, judged from the
        memories written since they were read alone (no search of the space): none
        of the shown ones changed, and every memory written since is less similar to
        each fact than the least similar shown. Under many writers to one space this
        keeps the write transaction short. False whenever in doubt."""
        changes = None if self.position is None else batch.changes_since(self.scope, self.position)
        if changes is None:
            return False
        changed = {memory_id for memory_id, _ in changes}
        vectors = [v for _, v in changes if v is not None and v.shape[0] == self.vectors.shape[1]]
        for shown, vector in zip(self.existing, self.vectors, strict=True):
            if any(e.id in changed for e in shown):
                return False
            if not vectors:
                continue
            # Shown scores are clamped to [0, 1]: a floor of 0 may hide lower ones.
            floor = min((e.score for e in shown), default=0.0)
            if len(shown) < self.ingestor.similar_k or floor <= 0.0:
                return False
            if float(np.max(np.stack(vectors) @ vector)) >= floor - _SCORE_MARGIN:
                return False
        return True


def make_record(
    text: str,
    scope: Scope,
    *,
    kind: Kind,
    at: float,
    metadata: dict[str, Any],
    lineage: dict[str, Any] | None = None,
    importance: float | None = None,
) -> MemoryRecord:
    return MemoryRecord(
        importance=DEFAULT_IMPORTANCE if importance is None else importance,
        id=new_id(),
        scope=scope,
        text=text,
        kind=kind,
        memory_class=DEFAULT_CLASS[kind],
        created_at=at,
        content_hash=content_hash(text),
        metadata=metadata,
        lineage=lineage or {},
    )


#: The most runs a memory's lineage lists as having changed it (the oldest go first;
#: the store's own log still names them all).
_CHANGED_BY_RUNS_KEPT = 500


def changed_by(record: MemoryRecord, run_id: str, lineage: dict[str, Any]) -> dict[str, Any]:
    """``lineage`` (the new one of ``record``) with ``run_id`` among the runs whose turns
    changed it, when it is another run's memory: an erasure of that run finds it so
    in a store it was imported into, whose log holds no turn of that run."""
    if not run_id or run_id == record.scope.run_id:
        return lineage
    runs = [r for r in record.lineage.get(CHANGED_BY_RUNS) or () if isinstance(r, str)]
    if run_id in runs:
        return lineage
    return {**lineage, CHANGED_BY_RUNS: [*runs, run_id][-_CHANGED_BY_RUNS_KEPT:]}


def _replacements(decisions: Sequence[Decision]) -> list[list[int]]:
    """The decisions (their positions) in the order they are written, grouped: an
    ADD of a fact, then the DELETEs of the memories that fact contradicts (decisions
    naming the same fact), as one group; every other decision alone, in its place."""
    deletes: dict[int, list[int]] = {}
    for i, d in enumerate(decisions):
        if d.action is Action.DELETE and d.fact is not None:
            deletes.setdefault(id(d.fact), []).append(i)
    adds = {id(d.fact) for d in decisions if d.action is Action.ADD and d.fact is not None}
    paired = {i for key, found in deletes.items() if key in adds for i in found}
    groups: list[list[int]] = []
    for i, d in enumerate(decisions):
        if i in paired:
            continue  # written after its ADD
        if d.action is Action.ADD and d.fact is not None and id(d.fact) in deletes:
            groups.append([i, *deletes.pop(id(d.fact))])  # (a second ADD of the fact: alone)
        else:
            groups.append([i])
    return groups


def _summary(counts: dict[str, int]) -> str:
    parts = [
        f"{verb} {counts[event]}"
        for event, verb in (("ADD", "added"), ("UPDATE", "updated"), ("DELETE", "deleted"))
        if counts.get(event)
    ]
    if not parts:
        return "No new memories; nothing changed"
    total = sum(counts.get(e, 0) for e in ("ADD", "UPDATE", "DELETE"))
    noun = "memory" if total == 1 else "memories"
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{text[0].upper()}{text[1:]} {noun} successfully"


class Ingestor:
    """Runs the ingest pipeline against one store with one embedder."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        extractor: Extractor,
        reconciler: Reconciler,
        *,
        similar_k: int = 5,
        speaker_keys: bool = True,
        context_keys: bool = True,
        fact_keys: bool = True,
        decay_days: float | None = None,
        max_metadata_depth: int = validate.METADATA_DEPTH,
        max_metadata_bytes: int = validate.METADATA_BYTES,
    ) -> None:
        from ..roles.extractor import HeuristicExtractor

        self.speaker_keys = speaker_keys
        self.context_keys = context_keys
        self.fact_keys = fact_keys
        # Every fact of a turn is a search key (not memories to reconcile): no cap.
        self._key_extractor = HeuristicExtractor(max_facts=None)
        self.store = store
        self.embedder = embedder
        self.extractor = extractor
        self.reconciler = reconciler
        self.similar_k = similar_k
        self.decay_days = decay_days
        #: The limits of a memory's metadata (``MemoryConfig``'s), which a merge of the
        #: call's metadata with a message's or a memory's must keep to as well.
        self.max_metadata_depth = max_metadata_depth
        self.max_metadata_bytes = max_metadata_bytes
        #: Called on every new memory before it is written (a policy's start
        #: values: the energy policy sets energy and tier). None: nothing.
        self.prepare: Callable[[MemoryRecord], None] | None = None

    def _turn_payload(self, messages: Sequence[Message], metadata: dict[str, Any], at: float, infer: bool,
                      importance: float | None = None) -> dict[str, Any]:
        """The turn event's payload: what reprocessing needs to run the turn again as
        ``add`` ran it (messages, metadata, time, the caller's importance)."""
        return {
            "messages": [
                {
                    "role": m.role,
                    "content": m.content,
                    **({"name": m.name} if m.name else {}),
                    **({"metadata": m.metadata} if m.metadata else {}),
                    **({"timestamp": from_epoch(m.timestamp).isoformat()} if m.timestamp is not None else {}),
                }
                for m in messages
            ],
            "metadata": metadata,
            "timestamp": from_epoch(at).isoformat(),
            "infer": infer,
            **({"importance": importance} if importance is not None else {}),
        }

    def _keys(self, kept: Sequence[Message], *, conversation: bool, at: float) -> list[str]:
        """Search keys of verbatim memories (see :mod:`memorist.policies.search_keys`).

        Plain text keeps its text as key. Turns of a conversation get their
        speaker, the turn they reply to and their facts, as configured. Facts come
        from the heuristic extractor even when an LLM extractor is configured: keys
        must stay cheap, local and deterministic for bulk imports.
        """
        if not conversation:
            return [m.content for m in kept]
        keys = []
        for i, m in enumerate(kept):
            # Only a reply carries context: consecutive messages of one speaker are
            # separate statements (a list of facts must not blur into each other).
            prev = kept[i - 1] if i and self.context_keys else None
            if prev is not None and (prev.role, prev.name) == (m.role, m.name):
                prev = None
            facts = None
            if self.fact_keys:
                when = from_epoch(m.timestamp if m.timestamp is not None else at)
                facts = [f.text for f in self._key_extractor.extract([Message("user", m.content)], timestamp=when)]
            keys.append(
                memory_key(
                    m.content,
                    name=m.name if self.speaker_keys else None,
                    previous=prev.content if prev else None,
                    # The replied-to speaker's name stays out: "what did Melanie
                    # say" must not find Caroline's replies to her.
                    facts=facts,
                )
            )
        return keys

    def add_verbatim(self, messages: Sequence[Message], scope: Scope, *, metadata: dict[str, Any], at: float, plain_text: bool,
                     importance: float | None = None) -> dict[str, Any]:
        """Store each non-system message as it is; refused (:class:`ValidationError`,
        nothing written) when a message's metadata merged with the call's is past the
        limits."""
        kept: list[Message] = []
        metas: list[dict[str, Any]] = []
        for position, message in enumerate(messages):
            if message.role != "system" and message.content.strip():
                kept.append(message)
                metas.append(self._verbatim_metadata(message, position, metadata, plain_text=plain_text))
        keys = self._keys(kept, conversation=not plain_text, at=at)
        vectors = self.embedder.embed(keys)
        kind = Kind.FACT if plain_text else Kind.TURN
        results = []
        with self.store.transaction() as batch:
            turn = batch.event("turn", scope, payload=self._turn_payload(messages, metadata, at, False, importance))
            for i, (message, meta, vector) in enumerate(zip(kept, metas, vectors, strict=True)):
                # Later messages of one call are later in time, so order survives.
                when = message.timestamp if message.timestamp is not None else at + i * 1e-6
                record = make_record(message.content, scope, kind=kind, at=when, metadata=meta, lineage={"turn_event": turn}, importance=importance)
                record.search_text = keys[i]
                if self.prepare is not None:
                    self.prepare(record)
                batch.add(record, vector)
                results.append({"id": record.id, "memory": record.text, "event": "ADD"})
        return {"results": results, "message": _summary({"ADD": len(results)})}

    def _verbatim_metadata(self, message: Message, position: int, metadata: dict[str, Any], *, plain_text: bool) -> dict[str, Any]:
        """The metadata ``message`` (``messages[position]``) is stored with: the
        call's, the message's over it, and in a conversation its role and speaker.
        Each was checked alone; the merge is checked too (a memory stored past the
        limits could not be updated or imported again), and refused naming the
        message's metadata (the call's when the message has none)."""
        meta = {**metadata, **(message.metadata or {})}
        if not plain_text:
            meta.setdefault("role", message.role)
            if message.name:
                meta.setdefault("name", message.name)
        field = f"messages[{position}].metadata" if message.metadata else "metadata"
        try:
            validate.metadata(meta, field=field, max_depth=self.max_metadata_depth, max_bytes=self.max_metadata_bytes)
        except ValidationError as exc:
            merged = ("merged with the call's metadata" if message.metadata
                      else f"with the role{' and name' if message.name else ''} of messages[{position}]")
            raise ValidationError(field, f"{merged}, {str(exc).split(': ', 1)[1]}") from None
        return meta

    def extract(self, messages: Sequence[Message], *, at: float, note: bool = False) -> list[Fact]:
        """The facts of a turn: the extractor's (its :meth:`~Extractor.note` with
        ``note``, when it found none), at most its ``max_facts`` or
        :data:`~memorist.roles.extractor.MAX_FACTS_PER_TURN`, the first ones (the cut
        is logged): whatever the extractor, one turn's reconciliation is bounded."""
        facts = self.extractor.extract(messages, timestamp=from_epoch(at))
        if not facts and note:
            facts = self.extractor.note(messages[0].content)
        limit = getattr(self.extractor, "max_facts", None)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            limit = MAX_FACTS_PER_TURN
        return first_facts(list(facts), limit, f"the {type(self.extractor).__name__}")

    def add_inferred(self, messages: Sequence[Message], scope: Scope, *, metadata: dict[str, Any], at: float,
                     importance: float | None = None, note: bool = False) -> dict[str, Any]:
        """Extract, reconcile against the scope as it is when the write commits, apply.

        Extraction and the reconciler's decision run outside any lock (they may be
        slow LLM calls), against the scope's memories as read then. The write
        transaction checks the scope's version: if another writer changed the space
        meanwhile and the candidates the reconciler was shown are no longer what the
        store holds, the decision is taken again on fresh candidates: at once, inside
        the transaction, by a :attr:`~memorist.roles.base.Reconciler.local`
        reconciler; by any other outside the lock, up to ``DECIDE_TRIES`` times, the
        last one inside. Concurrent writers end as if they had run one after the
        other.

        ``note``: ``messages`` is one text the caller gave as a thing to remember; if
        extraction finds no fact in it, the extractor's :meth:`~Extractor.note` may.
        """
        space = candidates_of(scope)
        # The recording sees the LLM calls and role fallbacks of this turn: a failed
        # extraction leaves the turn pending (see pipelines/reprocess.py). The turn's
        # calls are written with it; a model that just failed on the way is not asked
        # again in it (the reconciler then decides heuristically).
        with recording(turn=True) as rec:
            facts = self.extract(messages, at=at, note=note)
            vectors = self.embedder.embed([f.text for f in facts]) if facts else np.zeros((0, self.embedder.dim), np.float32)
            turn = _Turn(self, scope, space, facts, vectors)
            turn.decide()
            for attempt in range(1, DECIDE_TRIES + 1):
                try:
                    return self._write_inferred(messages, turn, metadata=metadata, at=at, rec=rec, last_try=attempt == DECIDE_TRIES,
                                                importance=importance)
                except _ScopeMoved:
                    logger.debug("memorist: scope %s changed while reconciling; deciding again (try %d)", scope.space, attempt + 1)
                    turn.decide()
        raise AssertionError("unreachable: the last try decides inside the transaction")

    def _write_inferred(self, messages: Sequence[Message], turn: _Turn, *, metadata: dict[str, Any], at: float, rec: Any, last_try: bool,
                        importance: float | None = None) -> dict[str, Any]:
        scope = turn.scope
        results: list[dict[str, Any]] = []
        counts: dict[str, int] = {}
        with self.store.transaction() as batch:
            # If someone wrote to the space since the candidates were read, only what
            # the reconciler was shown matters: unchanged, the decision stands. The
            # last try decides here whatever the reconciler (serialised).
            version = batch.space_version(scope) if turn.facts else turn.version
            if not turn.refresh(batch, version, decide=last_try):
                raise _ScopeMoved  # rolls back; nothing was written yet
            allowed = {e.id for group in turn.existing for e in group}
            flags = turn_flags(rec)
            seq = batch.event("turn", scope, payload=self._turn_payload(messages, metadata, at, True, importance)
                              | {"facts": [f.text for f in turn.facts]} | flags)
            outcomes: dict[int, dict[str, Any] | None] = {}
            for group in _replacements(turn.decisions):
                # A fact that contradicts memories replaces them: its ADD, then their
                # DELETEs, as one operation, so that rolling back any of its events
                # brings the old memories back and retires the new one (undone alone,
                # the DELETE left both, contradicting each other).
                operation = new_operation_id("replace") if len(group) > 1 else None
                created: list[str] = []
                replaced: list[MemoryRecord] = []
                for i in group:
                    outcome = self.apply(batch, turn.decisions[i], scope=scope, metadata=metadata, at=at, turn=seq, vector_of=turn.vector_of,
                                         allowed=allowed, importance=importance, operation=operation, created=created, replaced=replaced)
                    if outcome is not None and outcome["event"] == "ADD":
                        created.append(outcome["id"])
                    outcomes[i] = outcome
            for i in range(len(turn.decisions)):  # the results in the reconciler's order
                outcome = outcomes.get(i)
                if outcome is not None:
                    results.append(outcome)
                    counts[outcome["event"]] = counts.get(outcome["event"], 0) + 1
            write_llm_calls(batch, scope, rec.calls, turn_event=seq)
        found = turn.facts or flags.get("pending")  # (a failed extraction says so under "pending")
        message = _summary(counts) if found else "No fact found to remember; nothing changed" + self.extractor.nothing_found_hint
        out: dict[str, Any] = {"results": results, "message": message}
        if flags.get("pending"):
            out["pending"] = {"turn_event": seq, "reason": flags["reason"]}
        return out

    def similar(self, space: ScopeFilter, facts: Sequence[Fact], vectors: np.ndarray) -> list[list[Existing]]:
        """What the reconciler is shown: for each fact (``vectors[i]`` is its
        embedding), the ``similar_k`` stored memories of ``space`` nearest to it, best
        first, expired ones included (a fact may confirm or replace them).

        Public because :mod:`memorist.pipelines.reprocess` reconciles a pending turn's
        facts exactly as :meth:`add_inferred` does.
        """
        if not facts:
            return []
        now = time.time()
        return [self._similar_facts(space, vectors[i], now) for i in range(len(facts))]

    def _similar_facts(self, space: ScopeFilter, vector: np.ndarray, now: float) -> list[Existing]:
        """The ``similar_k`` facts nearest to ``vector``. Playbook strategies and the
        other learning objects of the space are never shown (:func:`is_fact`), nor a
        LangGraph store's items: when they fill the first hits, further hits are read."""
        k = self.similar_k
        while True:
            group = self.store.vector_search(space, vector, k=k, cutoff=None, now=now)
            # Only their texts are shown: the loaded index answers, with no read.
            records = self.store.get_many([mid for mid, _ in group], scope=space, exact_access=False)
            shown = [
                Existing(mid, records[mid].text, max(0.0, min(1.0, score)))
                for mid, score in group
                # A LangGraph store's item is its value: an UPDATE would leave the value
                # the store returns as it was, under a text that says otherwise.
                if mid in records and is_fact(records[mid]) and STORE_ITEM_KEY not in records[mid].metadata
            ]
            if len(shown) >= self.similar_k or len(group) < k:
                return shown[: self.similar_k]
            k *= 4

    def apply(
        self,
        batch: Batch,
        decision: Decision,
        *,
        scope: Scope,
        metadata: dict[str, Any],
        at: float,
        turn: int,
        vector_of: dict[str, np.ndarray],
        allowed: set[str],
        importance: float | None = None,
        operation: str | None = None,
        created: Sequence[str] = (),
        replaced: list[MemoryRecord] | None = None,
    ) -> dict[str, Any] | None:
        """Write one reconciler decision into ``batch``; returns its result item
        (``{"id", "memory", "event", ...}``) or None when nothing changed.

        ``turn`` is the seq of the turn event the change is attributed to;
        ``vector_of`` maps fact texts to the embeddings already computed (others are
        embedded here); ``allowed`` are the ids the reconciler was shown, the only
        ones it may update or delete. An ADD of a text already stored (as a fact
        among :func:`candidates_of` the scope) is a NONE; an UPDATE to such a text
        is a DELETE of its target (the fact it now states is held already).
        Under a decay window (``decay_days``), a fact judged already stored renews
        the memory holding it: repeating a fact keeps it (or brings it back) in view.
        ``importance`` (the caller's) wins over the extractor's estimate for the fact;
        an UPDATE keeps the memory's importance unless the caller gave one, and merges
        ``metadata`` into the memory's unless that passes the limits (it then keeps
        its own). An UPDATE or DELETE logs the memory as it was, so
        :func:`memorist.pipelines.undo.rollback` can restore it. ``operation``: the id
        of the replacement this decision is part of, written in its event; a DELETE of
        it adds the memory to ``replaced`` and records them all, with ``created`` (the
        replacing memory, added just before), so that the operation's last DELETE
        undoes all of it. Public for the same reason as :meth:`similar`.
        """
        action = decision.action
        if action is not Action.ADD and decision.target_id not in allowed:
            # A reconciler may only touch memories it was shown; anything else is
            # dropped (the turn itself stays in the log).
            if action is not Action.NONE:
                logger.warning("memorist: ignored %s of unknown memory id %r", action.value, decision.target_id)
            return None
        payload: dict[str, Any] = {"turn_event": turn, "reason": decision.reason}
        if operation is not None:
            payload[OPERATION_ID] = operation
        if action is Action.ADD:
            duplicate = self._holder(batch, scope, content_hash(decision.text))
            if duplicate is not None:
                # Already stored, perhaps by a concurrent writer: a NONE.
                return self._renew(batch, duplicate, at=at, payload=payload)
            kind = Kind(decision.fact.kind) if decision.fact and decision.fact.kind in Kind._value2member_map_ else Kind.FACT
            proposed = decision.fact.importance if decision.fact is not None else None
            record = make_record(decision.text, scope, kind=kind, at=at, metadata=dict(metadata), lineage={"turn_event": turn},
                                 importance=importance if importance is not None else proposed)
            vector = vector_of.get(decision.text)
            if vector is None:
                vector = self.embedder.embed_one(decision.text)
            if self.prepare is not None:
                self.prepare(record)
            batch.add(record, vector, payload=payload)
            return {"id": record.id, "memory": record.text, "event": "ADD"}
        if action is Action.NONE:
            return None if decision.target_id is None else self._renew(batch, decision.target_id, at=at, payload=payload)
        current = self.store.get(decision.target_id)  # type: ignore[arg-type]
        if current is None or current.status.value != "active":
            return None
        digest = content_hash(decision.text)
        if action is Action.UPDATE and digest != current.content_hash:
            holder = self._holder(batch, scope, digest, besides=current.id)
            if holder is not None:
                # Another memory already says what this one would: it is retired, not
                # made a second copy (left as it was, it would state what the fact replaced),
                # and the holder is renewed, as a repeated fact is (under a decay window it
                # may have expired: the fact must stay in view).
                self._renew(batch, holder, at=at, payload=dict(payload))
                action = Action.DELETE
                payload["reason"] = f"updated to '{decision.text}', which memory {holder} already holds"
        if action is Action.UPDATE:
            vector = vector_of.get(decision.text)
            if vector is None:
                vector = self.embedder.embed_one(decision.text)
            updated = current.copy(
                text=decision.text,
                search_text=decision.text,
                content_hash=digest,
                updated_at=max(at, current.created_at),
                metadata=self._merged_metadata(current, metadata),
                lineage=changed_by(current, scope.run_id, {**current.lineage, "updated_by_turn": turn}),
                importance=current.importance if importance is None else importance,
            )
            batch.update(updated, vector, old_text=current.text, payload={**payload, UNDO: undo_payload([current])})
            return {"id": current.id, "memory": decision.text, "event": "UPDATE", "previous_memory": current.text}
        before = [current]
        if replaced is not None:
            replaced.append(current)
            before = list(replaced)
        batch.delete(current, payload={**payload, UNDO: undo_payload(before, created)})
        return {"id": current.id, "memory": current.text, "event": "DELETE"}

    def _holder(self, batch: Batch, scope: Scope, digest: str, *, besides: str | None = None) -> str | None:
        """The id of a stored fact among :func:`candidates_of` ``scope`` whose text
        has the hash ``digest`` (see :func:`_holds`), other than ``besides``; None when
        there is none. Read inside the write transaction, so two writers of one text
        cannot both miss each other."""
        candidates = candidates_of(scope)
        found = batch.find_active_hash(scope, digest)  # any row of the space, first
        if found is None:
            return None
        if found != besides and _holds(batch.get_many([found]).get(found), candidates):
            return found
        # That row is no such fact (another run's, an item, a strategy): another may be.
        return next((r.id for r in self.store.find_by_hash(candidates, digest) if r.id != besides and _holds(r, candidates)), None)

    def _merged_metadata(self, current: MemoryRecord, metadata: dict[str, Any]) -> dict[str, Any]:
        """``metadata`` merged into ``current``'s, or ``current``'s own when the merge
        would pass the limits (a memory past them could not be updated or imported
        again)."""
        merged = {**current.metadata, **metadata}
        if metadata:
            try:
                validate.metadata(merged, max_depth=self.max_metadata_depth, max_bytes=self.max_metadata_bytes)
            except ValidationError as exc:
                logger.warning("memorist: the turn's metadata is not merged into memory %s: %s", current.id, exc)
                return dict(current.metadata)
        return merged

    def _renew(self, batch: Batch, memory_id: str, *, at: float, payload: dict[str, Any]) -> dict[str, Any] | None:
        """A repeated fact under a decay window: the memory's validity restarts at ``at``.

        Without decay nothing expires by age, so nothing is written. The change is an
        ``update`` of the memory's time only (its text and vector stay), marked as
        bookkeeping: it does not stand in the way of rolling back an operation that made
        or changed the memory (a consolidation, the reconciler's UPDATE), and that
        rollback puts the memory back as it was.
        """
        if not self.decay_days:
            return None
        current = batch.get_many([memory_id]).get(memory_id)
        if current is None or current.status.value != "active":
            return None
        effective = current.updated_at if current.updated_at is not None else current.created_at
        if at <= effective:
            return None
        renewed = current.copy(updated_at=at)
        batch.update(renewed, None, old_text=current.text, payload={**payload, "reason": "repeated: validity renewed", BOOKKEEPING: "validity"})
        return {"id": current.id, "memory": current.text, "event": "UPDATE", "previous_memory": current.text}


__all__ = ["Ingestor", "make_record"]
