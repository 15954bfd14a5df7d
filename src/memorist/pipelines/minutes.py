"""The minutes: an append-only coordination log with a prunable search index.

:class:`Minutes` is :attr:`memorist.Memory.minutes`. Recording a minute writes, in one
transaction, its ``minute`` event (the record: the whole minute in the payload) and
its index entry, a memory of kind :attr:`~memorist.model.Kind.MINUTE` with the same id
(embedded and in the full-text index, with its category and insights). The log is
never changed; the index entry is. Pruning archives the entry (it leaves both
indexes, a ``minute_prune`` event says why); :meth:`Minutes.reindex` rebuilds every
entry from the log. Index entries are never facts: ``search``, ``get_all`` and the
other fact calls never return them (:func:`memorist.model.is_fact`).

Where a minute lives (Memorist's :class:`~memorist.model.Scope`): the Memory's tenant;
``user_id`` = the *project* (a project's minutes, of all its agents, form one
shared space per agent, as a user's memories do); ``agent_id`` = the agent of the
event (empty when none); ``run_id`` = an optional session. So ``recent`` and
``search`` read the project across its agents, and an agent's own memory is the
space (tenant, project, agent): its minutes, and the facts added with
``user_id=project, agent_id=agent``. A minute without a project is in the project
``"default"``.

>>> from memorist import Memory
>>> m = Memory(":memory:", embedder="hashing")
>>> first = m.minutes.record("task_assigned", agent_id="planner", project_id="apollo",
...                          data={"task_id": "t1", "assignment_reasoning": "coder knows the parser"})
>>> second = m.minutes.record("task_completed", agent_id="coder", project_id="apollo",
...                           data={"task_id": "t1", "success_criteria_met": 90}, context_references=[first["id"]])
>>> [x["event_type"] for x in m.minutes.recent(10, project_id="apollo")]
['task_assigned', 'task_completed']
>>> first["category"], second["insights"][0]["confidence"]
('task_assignment', 0.9)
"""

from __future__ import annotations

import heapq
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from .. import validate
from ..config import MemoryConfig
from ..embed.base import Embedder
from ..errors import NotFoundError, ValidationError
from ..model import DEFAULT_CLASS, EventRecord, Kind, MemoryRecord, Scope, Status, from_epoch
from ..policies.fusion import reciprocal_rank_fusion
from ..policies.minutes import (
    INSIGHT_TYPES,
    Category,
    Insight,
    Minute,
    categorize,
    derive_insights,
    merge_insights,
    minute_text,
)
from ..policies.text import content_hash
from ..store.base import ScopeFilter, Store
from ..validate import CLOCK_SKEW
from ..work import charge

#: The minute's own event: the record of truth.
OP_MINUTE = "minute"
#: Index bookkeeping (the log says what happened to each index entry).
OP_PRUNE = "minute_prune"
OP_DUPLICATE = "minute_duplicate"
OP_SUPERSEDE = "minute_supersede"
OP_LINK = "minute_link"
OP_REINDEX = "minute_reindex"
DEFAULT_PROJECT = "default"
#: Not a project: every project of the tenant, which only a reindex of the whole
#: store takes (``memory.minutes.reindex(project_id="*")``, ``memorist minutes reindex
#: --all-projects``). Refused as a project, so that no handle or key bound to a user
#: of that name reaches the other projects through it.
ALL_PROJECTS = "*"
_EVENT_TYPE_CHARS = 64
_NOTE_CHARS = 4000
_MAX_REFERENCES = 100
#: A minute's given insights, and each one's contexts (short texts: when it applies).
_MAX_INSIGHTS = 100
_MAX_CONTEXTS = 100
_CONTEXT_CHARS = 256
_PAGE = 500


class Host(Protocol):
    """What the minutes need of their :class:`~memorist.Memory`."""

    store: Store
    embedder: Embedder
    config: MemoryConfig


# argument checks ----------------------------------------------------------------------------
def project_of(value: Any) -> str:
    if value is None:
        return DEFAULT_PROJECT
    if not isinstance(value, str):
        raise ValidationError("project_id", f"must be a string, got {validate.show(value)}")
    project = validate.scope_id("project_id", value) or DEFAULT_PROJECT
    if project == ALL_PROJECTS:
        raise ValidationError("project_id", f"{ALL_PROJECTS!r} is not a project: it stands for every project, which only a reindex of the whole store takes")
    return project


def _event_type(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("event_type", f"must be a non-empty string, got {validate.show(value)}")
    if len(value) > _EVENT_TYPE_CHARS:
        raise ValidationError("event_type", f"is {len(value)} characters; the limit is {_EVENT_TYPE_CHARS}")
    validate.unicode("event_type", value)
    return value.strip()


def _ids(value: Any, field: str, *, limit: int = _MAX_REFERENCES) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValidationError(field, f"must be a list of ids, got {validate.show(value)}")
    ids = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise ValidationError(f"{field}[{i}]", f"must be a non-empty id, got {validate.show(item)}")
        ids.append(validate.memory_id(item).strip())
    if len(ids) > limit:
        raise ValidationError(field, f"has {len(ids)} ids; the limit is {limit}")
    return list(dict.fromkeys(ids))


def _success(data: Mapping[str, Any]) -> None:
    """``data["success_criteria_met"]``, when given, is a percentage: a number from 0
    to 100 (250 or -5 would be reported as 100 % or 0 %)."""
    if data.get("success_criteria_met") is None:
        return
    value = data["success_criteria_met"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise ValidationError(
            "data.success_criteria_met", f"must be a percentage, a number from 0 to 100, got {validate.show(value)}"
        )


def category_of(value: Any) -> Category | None:
    if value is None:
        return None
    try:
        return Category(str(value).strip().lower())
    except ValueError:
        raise ValidationError("category", f"must be one of {', '.join(c.value for c in Category)}, got {validate.show(value)}") from None


def _contexts(value: Any, where: str) -> tuple[str, ...]:
    """An insight's contexts: a list of short texts (when it applies), as REST takes them."""
    if value is None:
        return ()
    if isinstance(value, str | Mapping) or not isinstance(value, list | tuple):
        raise ValidationError(where, f"must be a list of strings, got {validate.show(value)}")
    if len(value) > _MAX_CONTEXTS:
        raise ValidationError(where, f"has {len(value)} contexts; the limit is {_MAX_CONTEXTS}")
    for j, context in enumerate(value):
        if not isinstance(context, str):
            raise ValidationError(f"{where}[{j}]", f"must be a string, got {validate.show(context)}")
        if len(context) > _CONTEXT_CHARS:
            raise ValidationError(f"{where}[{j}]", f"is {len(context):,} characters; the limit is {_CONTEXT_CHARS}")
        validate.unicode(f"{where}[{j}]", context)
    return tuple(value)


def _insights(value: Any) -> list[Insight]:
    if value is None:
        return []
    if isinstance(value, str | Mapping) or not isinstance(value, Iterable):
        raise ValidationError("insights", f"must be a list of insights, got {validate.show(value)}")
    value = list(value)
    if len(value) > _MAX_INSIGHTS:
        raise ValidationError("insights", f"has {len(value)} insights; the limit is {_MAX_INSIGHTS}")
    found = []
    for i, item in enumerate(value):
        where = f"insights[{i}]"
        if isinstance(item, Insight):
            item = item.to_dict()
        if not isinstance(item, Mapping):
            raise ValidationError(where, f"must be an object with type and finding, got {validate.show(item)}")
        kind = item.get("type")
        if kind not in INSIGHT_TYPES:
            raise ValidationError(f"{where}.type", f"must be one of {', '.join(INSIGHT_TYPES)}, got {validate.show(kind)}")
        finding = item.get("finding")
        if not isinstance(finding, str) or not finding.strip():
            raise ValidationError(f"{where}.finding", f"must be a non-empty string, got {validate.show(finding)}")
        validate.text(f"{where}.finding", finding, max_chars=_NOTE_CHARS)
        confidence = item.get("confidence", 0.5)
        if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
            raise ValidationError(f"{where}.confidence", f"must be a number from 0 to 1, got {validate.show(confidence)}")
        named = "contexts" if "contexts" in item else "applicable_contexts"
        contexts = _contexts(item.get(named), f"{where}.{named}")
        found.append(Insight(kind, finding.strip(), float(confidence), contexts))
    return found


def minute_of(event: EventRecord) -> Minute:
    return Minute.from_payload(event.payload)


def log_imported(batch: Any, record: MemoryRecord) -> bool:
    """Append the ``minute`` event of an imported minute's index entry.

    An export carries the index entries (each holds its whole minute in
    ``metadata["minute"]``), not the event log; without this, an imported store would
    have index entries no log stands behind, and a reindex would drop them. Returns
    whether ``record`` was one.
    """
    payload = record.metadata.get("minute") if record.kind is Kind.MINUTE else None
    if not isinstance(payload, dict):
        return False
    try:
        minute = Minute.from_payload(payload)
    except (KeyError, TypeError, ValueError):
        return False  # not a well-formed minute: imported as a plain entry
    batch.event(OP_MINUTE, record.scope, memory_id=record.id, new_text=minute.memory_note or None,
                actor=minute.agent_id, payload=minute.to_payload())
    return True


def _ts_of(event: EventRecord) -> float:
    """When a minute happened (its payload's ``ts``; the event's own time if absent)."""
    ts = event.payload.get("ts")
    return float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else event.ts


def view_of(event: EventRecord) -> dict[str, Any]:
    """The public shape of a minute: its payload plus the log position ``seq``."""
    return {**event.payload, "seq": event.seq}


class Minutes:
    """The minutes of one :class:`~memorist.Memory` (an append-only log and
    its search index, over Memorist's event log and indexes)."""

    def __init__(self, host: Host, *, clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self.clock = clock

    @property
    def store(self) -> Store:
        return self.host.store

    @property
    def tenant(self) -> str:
        return self.host.config.tenant_id

    def scope(self, project_id: Any = None, agent_id: Any = None) -> ScopeFilter:
        """The minutes of a project (and of one agent in it, when given)."""
        return ScopeFilter(self.tenant, project_of(project_id), validate.scope_id("agent_id", agent_id))

    def _now(self, now: Any) -> float:
        at = validate.timestamp(now, field="now")
        return self.clock() if at is None else at

    def past(self, now: Any, why: str) -> float:
        """``now`` (default: the clock), refused more than :data:`CLOCK_SKEW` ahead of
        the clock: ``why`` says what a time to come would falsify."""
        at = self._now(now)
        if now is not None:
            validate.not_ahead("now", now, at, why, clock=self.clock())
        return at

    # recording --------------------------------------------------------------------------------
    def record(
        self,
        event_type: str,
        *,
        agent_id: str | None = None,
        project_id: str | None = None,
        data: Mapping[str, Any] | None = None,
        context_references: Sequence[str] | None = None,
        memory_note: str | None = None,
        category: str | None = None,
        insights: Sequence[Mapping[str, Any]] | None = None,
        run_id: str | None = None,
        now: Any = None,
    ) -> dict[str, Any]:
        """Append one coordination event and index it; returns the minute.

        ``context_references`` must name minutes of the same project already in the
        log that happened before this one (related *past* events; another project's
        minute is refused, as an unknown one, and so is one dated more than
        :data:`CLOCK_SKEW` after ``now``). ``category`` overrides the heuristic one;
        ``insights`` come first, then the derived ones of other types (an outcome
        insight from ``data["success_criteria_met"]``, 0-100). ``now`` is when it
        happened (ISO-8601, epoch seconds or a datetime; default: now).
        """
        conf = self.host.config
        kind = _event_type(event_type)
        project = project_of(project_id)
        agent = validate.scope_id("agent_id", agent_id) or ""
        run = validate.scope_id("run_id", run_id) or ""
        payload = validate.metadata(data, field="data", max_depth=conf.max_metadata_depth, max_bytes=conf.max_metadata_bytes)
        refs = _ids(context_references, "context_references")
        note = "" if memory_note is None else validate.text("memory_note", memory_note, max_chars=_NOTE_CHARS)
        _success(payload)
        chosen = category_of(category)
        given = _insights(insights)
        at = self.past(now, "a minute records what happened")
        known = self._events_of(refs)
        missing = [r for r in refs if r not in known or known[r].scope.user_id != project]
        if missing:
            raise ValidationError(
                "context_references",
                f"{missing[0]!r} is not a minute of project {project!r} (references name the project's earlier minutes)",
            )
        # A reference names what happened before (a back-filled minute cannot cite a
        # later one); the clocks of the machines that record minutes may drift apart.
        later = [r for r in refs if _ts_of(known[r]) > at + CLOCK_SKEW]
        if later:
            raise ValidationError(
                "context_references",
                f"{later[0]!r} happened at {from_epoch(_ts_of(known[later[0]])).isoformat(timespec='seconds')}, after this minute "
                f"({from_epoch(at).isoformat(timespec='seconds')}); references name the project's earlier minutes",
            )
        draft = Minute(str(uuid.uuid4()), at, kind, project, agent, payload, tuple(refs), note, run_id=run)
        minute = Minute(
            draft.id, at, kind, project, agent, payload, tuple(refs), note,
            category=chosen or categorize(draft),
            insights=merge_insights(given, derive_insights(draft)),
            run_id=run,
        )
        record = self._index_record(minute)
        vector = self.host.embedder.embed_one(record.search_text)
        with self.store.transaction() as batch:
            seq = batch.event(OP_MINUTE, record.scope, memory_id=minute.id, new_text=note or None, actor=agent,
                              payload=minute.to_payload())
            batch.add(record, vector, actor=agent, payload={"index": "minutes", "minute_seq": seq})
        return {**minute.to_payload(), "seq": seq}

    def _index_record(self, minute: Minute, base: MemoryRecord | None = None) -> MemoryRecord:
        text = minute_text(minute)
        fields: dict[str, Any] = {
            "scope": Scope(self.tenant, minute.project_id, minute.agent_id, minute.run_id),
            "text": text,
            "search_text": text,
            "kind": Kind.MINUTE,
            "memory_class": DEFAULT_CLASS[Kind.MINUTE],
            "topic": minute.category.value,
            "concept": minute.event_type,
            "created_at": minute.ts,
            "content_hash": content_hash(text),
            "metadata": {"minute": minute.to_payload()},
            "status": Status.ACTIVE,
        }
        if base is None:
            return MemoryRecord(id=minute.id, **fields)
        lineage = {k: v for k, v in base.lineage.items() if k not in ("superseded_by", "duplicate_of", "pruned")}
        return base.copy(lineage=lineage, valid_to=None, **fields)

    # reading the log --------------------------------------------------------------------------------
    def _events_of(self, ids: Sequence[str]) -> dict[str, EventRecord]:
        found: dict[str, EventRecord] = {}
        for mid in ids:
            charge(1)
            for event in self.store.history(mid):
                if event.op == OP_MINUTE and event.scope.tenant_id == self.tenant and not event.erased:
                    found[mid] = event
                    break
        return found

    def recent(self, n: int = 50, *, project_id: str | None = None, agent_id: str | None = None) -> list[dict[str, Any]]:
        """The ``n`` latest minutes of the project (of one agent, when given) by the
        time each happened, oldest first: a minute recorded late with an earlier
        time (back-filled) takes its place in time, not the end of the log."""
        n = validate.limit(n, name="n")
        return [view_of(e) for e in self.latest(self.scope(project_id, agent_id), n)]

    def latest(self, scope: ScopeFilter, n: int, *, until: float | None = None) -> list[EventRecord]:
        """The ``n`` minute events of ``scope`` latest in time (at or before ``until``,
        when given), oldest first; equal times in log order.

        The log is in the order minutes were recorded, not the order they happened:
        it is read from its end, a page at a time, keeping the ``n`` latest in time,
        until the pages reach minutes recorded too early to be among them. A minute
        happens at most :data:`CLOCK_SKEW` after it is recorded (later is refused),
        so once a minute was recorded more than that before the ``n``-th kept one
        happened, no earlier-recorded minute can displace it."""
        kept: list[tuple[float, int, EventRecord]] = []
        before: int | None = None
        while True:
            page = self.store.events(scope, ops=(OP_MINUTE,), limit=_PAGE, newest_first=True, before=before)
            charge(len(page))  # a back-filled log is read to its start: counted, and given up with its caller
            for event in page:
                if event.erased:  # an erased minute is no minute
                    continue
                ts = _ts_of(event)
                if until is not None and ts > until:
                    continue
                entry = (ts, event.seq, event)
                if len(kept) < n:
                    heapq.heappush(kept, entry)
                elif entry[:2] > kept[0][:2]:
                    heapq.heapreplace(kept, entry)
            if len(page) < _PAGE or (len(kept) == n and page[-1].ts + CLOCK_SKEW < kept[0][0]):
                break
            before = page[-1].seq
        return [e for _, _, e in sorted(kept, key=lambda t: t[:2])]

    def by_ids(self, ids: Sequence[str], *, project_id: str | None = None) -> list[dict[str, Any]]:
        """The minutes of these ids that exist (in this tenant, and this project when
        given), in the order asked; unknown ids are left out."""
        wanted = _ids(ids, "ids", limit=validate.MAX_LIMIT)
        project = project_of(project_id) if project_id is not None else None
        found = self._events_of(wanted)
        return [view_of(found[i]) for i in wanted if i in found and (project is None or found[i].scope.user_id == project)]

    def get(self, minute_id: str) -> dict[str, Any]:
        """One minute by id (:class:`~memorist.errors.NotFoundError` if this tenant has none)."""
        mid = validate.memory_id(minute_id).strip()
        found = self._events_of([mid])
        if mid not in found:
            raise NotFoundError("minute", mid)
        view = view_of(found[mid])
        record = self.store.get(mid)
        view["indexed"] = record is not None and record.status is Status.ACTIVE
        if record is not None and record.lineage:
            view["lineage"] = dict(record.lineage)
        return view

    def history(self, *, project_id: str | None = None, agent_id: str | None = None, since: int = 0, limit: int = 100) -> dict[str, Any]:
        """The full log of the project, oldest first, a page at a time: ``{"minutes":
        [...], "next": seq}``; pass ``since=next`` for the next page (``next`` is None
        on the last page). Pruning never removes a minute from here."""
        since = validate.since(since)
        limit = validate.limit(limit)
        events = self.store.events(self.scope(project_id, agent_id), since=since, ops=(OP_MINUTE,), limit=limit + 1)
        page = events[:limit]
        return {"minutes": [view_of(e) for e in page if not e.erased], "next": page[-1].seq if len(events) > limit else None}

    def iter_log(self, scope: ScopeFilter) -> Iterator[EventRecord]:
        """Every minute event of ``scope``, oldest first, read in pages."""
        since = 0
        while True:
            events = self.store.events(scope, since=since, ops=(OP_MINUTE,), limit=_PAGE)
            charge(len(events))  # a project's log may be long: counted, and given up with its caller
            yield from (e for e in events if not e.erased)  # an erased minute is no minute
            if len(events) < _PAGE:
                return
            since = events[-1].seq

    # the index --------------------------------------------------------------------------------
    def index_records(self, scope: ScopeFilter) -> list[MemoryRecord]:
        """The scope's minutes now in the index (active entries), newest first (the
        records read are charged: the project's facts are read too)."""
        records = self.store.list(scope)
        charge(len(records))
        return [r for r in records if r.kind is Kind.MINUTE]

    def search(
        self,
        query: str,
        limit: int = 5,
        *,
        project_id: str | None = None,
        agent_id: str | None = None,
        category: str | None = None,
        touch: bool = True,
    ) -> list[dict[str, Any]]:
        """The indexed minutes most relevant to ``query``, best first (vector and BM25
        rankings fused by reciprocal rank; pruned minutes are not in the index).

        Each result is the minute with ``score`` (fused; orders, does not measure) and
        ``similarity`` (cosine). A search counts as a retrieval of what it returns
        (the evaluator's relevance), unless ``touch=False``.
        """
        query = validate.text("query", query, max_chars=self.host.config.max_message_chars)
        return self.ranked(query, validate.limit(limit), self.scope(project_id, agent_id), category=category_of(category), touch=touch)

    def ranked(
        self, query: str, limit: int, scope: ScopeFilter, *, category: Category | None = None, until: float | None = None, touch: bool = True,
    ) -> list[dict[str, Any]]:
        """:meth:`search` with checked arguments; with ``until``, only minutes dated at
        or before it, so the ``limit`` best are the best of those (a window built for
        an earlier time)."""
        conf = self.host.config
        wanted = category
        qvec = self.host.embedder.embed_query(query)
        now = self.clock()
        pool = max(conf.retrieval.candidates, 4 * limit)
        results: list[tuple[MemoryRecord, float]] = []
        with self.store.reading():
            # Minutes share their project's spaces with facts: rank the whole space by
            # vector (exact search is what the store does at this size anyway).
            vector_hits = self.store.vector_search(scope, qvec, k=None, cutoff=None, now=now)
            charge(len(vector_hits))  # every memory of the space scored: counted, and given up with its caller
            text_hits = self.store.text_search(scope, query, k=pool * 4, cutoff=None, now=now)
            charge(len(text_hits))
            fused = reciprocal_rank_fusion(
                {"vector": [m for m, _ in vector_hits], "text": [m for m, _ in text_hits]},
                {"vector": conf.retrieval.vector_weight, "text": conf.retrieval.text_weight},
                k=conf.retrieval.rrf_k,
            )
            similarity = dict(vector_hits)
            # Ties (one list's first is the other's second) go to the more similar.
            ordered = sorted(fused, key=lambda m: (-fused[m], -similarity.get(m, -2.0), m))
            for start in range(0, len(ordered), pool):
                chunk = ordered[start : start + pool]
                charge(len(chunk))
                records = self.store.get_many(chunk, scope=scope)
                for mid in chunk:
                    r = records.get(mid)
                    if r is None or r.kind is not Kind.MINUTE or r.status is not Status.ACTIVE:
                        continue
                    if wanted is not None and r.topic != wanted.value:
                        continue
                    if until is not None and r.created_at > until:
                        continue
                    results.append((r, fused[mid]))
                if len(results) >= limit:
                    break
            results = results[:limit]
            if touch and results:
                self.store.touch([r for r, _ in results], query=query)
        return [self.result_view(r, score, similarity.get(r.id)) for r, score in results]

    @staticmethod
    def result_view(record: MemoryRecord, score: float | None = None, similarity: float | None = None) -> dict[str, Any]:
        view = dict(record.metadata.get("minute") or {})
        view["memory"] = record.text
        if score is not None:
            view["score"] = round(float(score), 6)
        if similarity is not None:
            view["similarity"] = round(float(similarity), 6)
        return view

    def reindex(self, *, project_id: str | None = None) -> dict[str, int]:
        """Rebuild the index entries of the project's minutes (every project's, with
        ``project_id="*"`` on the Memory's own ``minutes``: :data:`ALL_PROJECTS` is no
        project, and every other call refuses it) from the log: pruned, superseded and duplicate entries
        come back, missing ones are re-created, every one re-embedded from the minute.
        Returns ``{"minutes", "restored", "created", "unchanged"}``."""
        scope = ScopeFilter(self.tenant) if project_id == ALL_PROJECTS else self.scope(project_id)
        counts = {"minutes": 0, "restored": 0, "created": 0, "unchanged": 0}
        batch_events: list[EventRecord] = []
        for event in self.iter_log(scope):
            batch_events.append(event)
            if len(batch_events) >= _PAGE:
                self._reindex_some(batch_events, counts)
                batch_events = []
        if batch_events:
            self._reindex_some(batch_events, counts)
        return counts

    def _reindex_some(self, events: list[EventRecord], counts: dict[str, int]) -> None:
        minutes = [minute_of(e) for e in events]
        existing = self.store.get_many([m.id for m in minutes])
        plans: list[tuple[Minute, MemoryRecord | None, MemoryRecord]] = []
        for minute in minutes:
            counts["minutes"] += 1
            current = existing.get(minute.id)
            wanted = self._index_record(minute, current)
            if current is not None and current.status is Status.ACTIVE and current.text == wanted.text and current.metadata == wanted.metadata:
                counts["unchanged"] += 1
                continue
            plans.append((minute, current, wanted))
        if not plans:
            return
        vectors = self.host.embedder.embed([w.search_text for _, _, w in plans])
        with self.store.transaction() as batch:
            # Read again inside the transaction: what committed since (retrievals) is kept.
            fresh = batch.get_many([m.id for m, _, _ in plans])
            for (minute, _, wanted), vector in zip(plans, np.asarray(vectors), strict=True):
                current = fresh.get(minute.id)
                if current is None:
                    batch.add(wanted, vector, payload={"index": "minutes", "reindex": True})
                    counts["created"] += 1
                else:
                    batch.update(self._index_record(minute, current), vector, old_text=current.text, op=OP_REINDEX,
                                 payload={"was": current.status.value, "lineage": current.lineage or None})
                    counts["restored"] += 1

    def remove_from_index(self, batch: Any, record: MemoryRecord, *, op: str, lineage: Mapping[str, Any], payload: Mapping[str, Any], now: float) -> None:
        """Archive an index entry inside ``batch`` (the minute stays in the log)."""
        gone = record.copy(status=Status.ARCHIVED, valid_to=now, lineage={**record.lineage, **lineage})
        batch.update(gone, None, old_text=record.text, op=op, payload=dict(payload))


__all__ = [
    "CLOCK_SKEW",
    "ALL_PROJECTS",
    "DEFAULT_PROJECT",
    "OP_DUPLICATE",
    "OP_LINK",
    "OP_MINUTE",
    "OP_PRUNE",
    "OP_REINDEX",
    "OP_SUPERSEDE",
    "Minutes",
    "category_of",
    "minute_of",
    "project_of",
    "view_of",
]
