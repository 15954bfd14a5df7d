"""The :class:`Memory` facade: Memorist's composition root and public API.

>>> from memorist import Memory
>>> m = Memory(":memory:", embedder="hashing")
>>> m.add("Hi, I'm Alex. I'm a vegetarian and allergic to nuts.", user_id="alex")["message"]
'Added 3 memories successfully'
>>> [r["memory"] for r in m.get_all(user_id="alex")["results"]]  # newest first
['Allergic to nuts', 'Is vegetarian', 'Name is Alex']
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from . import validate
from .api import MemoryAPI, Scoped, implements
from .capabilities import Minutes, Tiers
from .config import MemoryConfig, default_db_path, refuse_unknown
from .embed import Embedder, embedder_for_identity, resolve_embedder, spec_for_identity
from .errors import ConfigurationError, EmbedderMismatchError, MemoristError, NotFoundError, ValidationError
from .llm import LLM, resolve_llm
from .model import (
    AddResult,
    DeleteAllResult,
    DeleteResult,
    EraseResult,
    EventItem,
    MemoryItem,
    MemoryList,
    MemoryRecord,
    RollbackResult,
    Scope,
    Status,
    UpdateResult,
    is_fact,
)
from .pipelines.ingest import Ingestor
from .pipelines.llm_events import CallLog
from .pipelines.search import Searcher, reported_similarity
from .pipelines.settings import settle_policy
from .policies.filters import Filter, compile_filters
from .policies.ranking import RankingPolicy
from .policies.search_keys import memory_key
from .policies.text import content_hash
from .policies.validity import is_valid, validity_cutoff
from .relations import Relations, Subject
from .roles.base import Extractor, Reconciler
from .store import open_store
from .store.base import Batch, ScopeFilter, Store
from .store.sqlite import SQLiteStore
from .work import charge

log = logging.getLogger("memorist")

_QUERY_CACHE = 256
#: Adds of a space between two looks at its size (automatic consolidation).
_CHECK_EVERY = 100
#: How far by-id calls follow a promoted memory's ``promoted_to`` link.
_MAX_HOPS = 16
#: How many memories a filtered listing (``get_all(filters=...)``) takes from the
#: store's own check of the filter; when it keeps more, the listing reads the scope
#: newest first instead, and fills its page long before the end.
NARROWED_READ = 10_000
#: Memories ``delete_all`` deletes in one transaction (see there).
DELETE_ALL_BATCH = 1_000


def _promoted(record: MemoryRecord | None, get: Callable[[str], MemoryRecord | None]) -> MemoryRecord | None:
    """``record``, or the memory it was promoted to (energy tiers: a promotion
    archives the original and links it to its successor), followed to the end. A
    promotion keeps the scope: a link out of it (an imported lineage can name any id)
    is not followed."""
    for _ in range(_MAX_HOPS):
        if record is None or record.status is not Status.ARCHIVED:
            return record
        target = record.lineage.get("promoted_to")
        if not isinstance(target, str):
            return record
        successor = get(target)
        if successor is None or successor.scope != record.scope:
            return record
        record = successor
    return record


def _current_in(batch: Batch, memory_id: str) -> MemoryRecord:
    """The memory ``memory_id`` as ``batch`` reads it (inside the write transaction,
    so a promotion or a delete that committed since is seen), promotions followed;
    NotFoundError when it is gone."""
    current = _promoted(batch.get_many([memory_id]).get(memory_id), lambda i: batch.get_many([i]).get(i))
    if current is None or current.status is Status.DELETED:
        raise NotFoundError("memory", memory_id)
    return current


def _new_sqlite_file(target: Any) -> str | None:
    """The path of the SQLite file opening ``target`` would create (None: it exists,
    is in memory, or is a database server's)."""
    from .store import sqlite_path, store_kind

    try:
        if store_kind(target) != "sqlite":
            return None
        path = os.fspath(sqlite_path(target))
    except (ConfigurationError, TypeError):
        return None  # open_store says what is wrong with it
    return None if path == ":memory:" or os.path.exists(path) else path


def _remove_new_store(path: str | None) -> None:
    """Remove the store file (and its log files) an open that failed had created, if
    it holds nothing yet: another process may have made it first and written to it."""
    if path is None:
        return
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            if any(conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in ("memories", "events")):
                return
    except sqlite3.Error:
        return  # not what the open made (or unreadable): left as it is
    for name in (path, f"{path}-wal", f"{path}-shm", f"{path}-journal"):
        with contextlib.suppress(OSError):
            os.remove(name)


class Memory:
    """Long-term memory for agents: per-user memories that last across conversations.

    ``path`` is the SQLite file (created if missing; ``":memory:"`` for a throwaway
    store; None for ``MEMORIST_DB`` or the user data directory). ``embedder`` is an
    :class:`~memorist.embed.base.Embedder`, ``"hashing"`` or
    ``"sentence-transformers:<model>"``; by default the store's own embedder, else
    all-MiniLM-L6-v2 when installed, else the hashing fallback. ``decay_days``:
    memories not updated for that many days are no longer returned (0 or None: never).
    ``policy``: ``"default"``, or ``"energy"`` for energy tiers (items
    then carry ``energy`` and ``tier``; see :meth:`maintain`); None: ``MEMORIST_POLICY``.
    Any other setting of :class:`~memorist.config.MemoryConfig` is taken by name
    (``busy_timeout=5``, ``retrieval={"candidates": 50}``).
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        embedder: str | Embedder | None = None,
        decay_days: float | None = None,
        tenant_id: str | None = None,
        extractor: Extractor | None = None,
        reconciler: Reconciler | None = None,
        ranking: RankingPolicy | None = None,
        store: Store | None = None,
        config: MemoryConfig | None = None,
        llm: str | LLM | None = None,
        policy: str | None = None,
        **settings: Any,
    ) -> None:
        # Overrides go to a copy: the caller's config object is never changed.
        base = dataclasses.replace(config) if config is not None else MemoryConfig()
        # Any other setting of MemoryConfig by name (``busy_timeout=5``, ``retrieval={...}``).
        refuse_unknown(settings, MemoryConfig, "setting")
        for name, value in settings.items():
            setattr(base, name, value)
        if path is not None:
            base.path = path
        if embedder is not None:
            base.embedder = embedder
        if decay_days is not None:
            base.decay_days = decay_days
        if tenant_id is not None:  # "" too: the default tenant, whatever MEMORIST_TENANT says
            base.tenant_id = tenant_id
        if llm is not None:
            base.llm = llm
        if policy is not None:
            base.policy = policy
        self.config = base.resolved()
        # Before the store is opened: a missing key must not leave a new file behind.
        self.llm: LLM | None = resolve_llm(self.config.llm)
        # A model built here from its name is this Memory's to close; one given is the caller's.
        self._own_llm = self.llm is not None and not isinstance(self.config.llm, LLM)
        made: str | None = None  # the SQLite file this open creates, if it does
        if store is None:
            target = self.config.path if self.config.path is not None else str(default_db_path())
            made = _new_sqlite_file(target)
            store = open_store(target, busy_timeout=self.config.busy_timeout)
        self.store = store
        try:
            self.embedder = self._bind_embedder(self.config.embedder)
            # What changes how memories are stored is the store's, not the caller's.
            self.config.policy = settle_policy(store, self.config.policy)
        except BaseException:
            store.close()
            _remove_new_store(made)  # an open that failed (a model not installed) leaves no empty store
            raise
        if self.llm is not None:
            # LLM roles fall back to the heuristics below them when the model fails.
            from .roles.llm import LLMExtractor, LLMReconciler

            # The model's texts are held to the limit a caller's are (a fact, an update).
            limit = self.config.max_message_chars
            extractor = extractor if extractor is not None else LLMExtractor(self.llm, max_chars=limit)
            reconciler = reconciler if reconciler is not None else LLMReconciler(self.llm, max_chars=limit)
        if extractor is None:
            from .roles.extractor import HeuristicExtractor

            extractor = HeuristicExtractor()
        if reconciler is None:
            from .roles.reconciler import HeuristicReconciler

            reconciler = HeuristicReconciler()
        self.extractor = extractor
        self.reconciler = reconciler
        # The calls its model makes outside add and reprocess (consolidation, learning,
        # evaluation) are logged too, as llm_call events of the tenant.
        self._call_log = CallLog(store, Scope(self.config.tenant_id, "", ""))
        self._call_log.watch(self.llm)
        policy = ranking or RankingPolicy()
        self._ingest = Ingestor(
            self.store,
            self.embedder,
            self.extractor,
            self.reconciler,
            similar_k=self.config.similar_k,
            decay_days=self.config.decay_days,
            speaker_keys=self.config.retrieval.speaker_keys,
            context_keys=self.config.retrieval.context_keys,
            fact_keys=self.config.retrieval.fact_keys,
            max_metadata_depth=self.config.max_metadata_depth,
            max_metadata_bytes=self.config.max_metadata_bytes,
        )
        self._search = Searcher(self.store, self.config, policy)
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        # One Memory serves many threads (the service's workers): the cache is
        # guarded; the store guards itself, and add's decision is checked at commit.
        self._cache_lock = threading.Lock()
        self._tiers: Any = None
        self._adds_since_check: dict[tuple[str, str, str], int] = {}
        self._background_consolidation: Any = None
        if self.energy:
            try:
                self._ingest.prepare = self._energy_engine().prepare  # new memories get their start energy and tier
            except BaseException:
                store.close()
                raise

    @property
    def ranking(self) -> RankingPolicy:
        """The ranking policy searches apply (assignable)."""
        return self._search.ranking

    @ranking.setter
    def ranking(self, policy: RankingPolicy) -> None:
        self._search.ranking = policy

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Memory:
        """Build from a plain mapping, e.g. ``{"path": "mem.db", "decay_days": 6}``.

        Keys are those of :class:`~memorist.config.MemoryConfig`; unknown keys are an error.
        """
        return cls(config=MemoryConfig.from_mapping(config))

    def _bind_embedder(self, spec: str | Embedder | None) -> Embedder:
        """Choose the embedder and check it against the vectors already stored."""
        identity = self.store.embedder_identity()
        if spec is None and identity is not None:
            known = embedder_for_identity(identity[0])
            if known is None:
                raise EmbedderMismatchError(
                    f"this store's vectors were made by {identity[0]} ({identity[1]} dims), which "
                    f"is not available here; install memorist-model-minilm-l6-v2 (the default install's model), pass "
                    f"embedder={spec_for_identity(identity[0])!r}, or re-embed the store with "
                    f"memorist.reembed(path, embedder) (CLI: `memorist reindex --embedder ...`)"
                )
            self.store.bind_embedder(known.name, known.dim)
            return known
        embedder = resolve_embedder(spec)
        if identity is not None and identity != (embedder.name, embedder.dim):
            raise EmbedderMismatchError(
                f"this store's vectors were made by {identity[0]} ({identity[1]} dims) but the "
                f"configured embedder is {embedder.name} ({embedder.dim} dims); open it with "
                f"embedder={spec_for_identity(identity[0])!r}, or re-embed it with "
                f"memorist.reembed(path, embedder) (CLI: `memorist reindex --embedder ...`)"
            )
        # Recorded with the first vector written, not now: reading must not pin it.
        self.store.bind_embedder(embedder.name, embedder.dim)
        return embedder

    # helpers ---------------------------------------------------------------------
    @property
    def energy(self) -> bool:
        """Whether this Memory runs the energy policy (energy tiers)."""
        return self.config.policy == "energy"

    def _item(self, record: MemoryRecord, score: float | None = None, *, tiers: Any = None) -> dict[str, Any]:
        """The public item; under the energy policy with the energy as of now
        (``tiers``: the configuration of :meth:`_tier_view`, read once per call)."""
        if self.energy:
            from .pipelines.tiers import tier_item

            config = tiers if tiers is not None else self._tier_view()
            return tier_item(record, score, now=time.time(), config=config)
        return record.to_item(score)

    def _tier_view(self) -> Any:
        """The energy configuration items are shown with (None: not under the energy policy)."""
        return self._energy_engine().shown_config() if self.energy else None

    def _scope_filter(self, user_id: Any, agent_id: Any, run_id: Any) -> ScopeFilter:
        u, a, r = validate.require_scope(user_id, agent_id, run_id)
        return ScopeFilter(self.config.tenant_id, u, a, r)

    def _query_vector(self, query: str) -> np.ndarray:
        with self._cache_lock:
            vec = self._query_vectors.get(query)
            if vec is not None:
                self._query_vectors.move_to_end(query)
                return vec
        vec = self.embedder.embed_query(query)  # outside the lock: it may be slow
        with self._cache_lock:
            self._query_vectors[query] = vec
            if len(self._query_vectors) > _QUERY_CACHE:
                self._query_vectors.popitem(last=False)
        return vec

    def _visible(self, record: MemoryRecord | None, now: float) -> bool:
        return (
            record is not None
            and record.status is Status.ACTIVE
            and record.scope.tenant_id == self.config.tenant_id
            and is_valid(record.created_at, record.updated_at, record.valid_to, now=now, decay_days=self.config.decay_days)
        )

    def _get_record(self, memory_id: Any, user_id: Any = None, agent_id: Any = None, run_id: Any = None, *, deleted: bool = False) -> MemoryRecord:
        """The memory ``memory_id`` if the caller owns it: of this tenant and, for
        each of ``user_id``/``agent_id``/``run_id`` given, of that id. Anything else
        is :class:`NotFoundError`, exactly as for an id that does not exist, so a
        caller cannot learn whether another user's memory exists."""
        mid = validate.memory_id(memory_id)
        owner = self._optional_scope(user_id, agent_id, run_id)
        record = _promoted(self.store.get(mid), self.store.get)
        if record is None or (record.status is Status.DELETED and not deleted) or not owner.matches(record.scope):
            raise NotFoundError("memory", mid)
        if not is_fact(record):  # a playbook's strategy, a trajectory...: the learning calls' own
            raise NotFoundError("memory", mid)
        return record

    # the mem0-style API ------------------------------------------------------------
    @implements(MemoryAPI.add)
    def add(
        self,
        messages: Any,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        infer: bool = True,
        timestamp: Any = None,
        test: bool = False,
        importance: float | None = None,
    ) -> AddResult:
        return self._add(messages, user_id=user_id, agent_id=agent_id, run_id=run_id, metadata=metadata, infer=infer,
                         timestamp=timestamp, test=test, importance=importance)

    def _add_texts(self, messages: Any, **kwargs: Any) -> AddResult:
        """:meth:`add` of several plain texts at once, given as user messages (each
        with its own metadata and time): stored as ``add(text)`` stores each, in one
        transaction (imports batch their text lines through it)."""
        return self._add(messages, plain=True, **kwargs)

    def _add(
        self,
        messages: Any,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        infer: bool = True,
        timestamp: Any = None,
        test: bool = False,
        importance: float | None = None,
        plain: bool = False,
    ) -> AddResult:
        u, a, r = validate.require_scope(user_id, agent_id, run_id)
        weight = validate.importance(importance)
        msgs, plain_text = validate.messages(
            messages,
            max_chars=self.config.max_message_chars,
            max_metadata_depth=self.config.max_metadata_depth,
            max_metadata_bytes=self.config.max_metadata_bytes,
        )
        meta = validate.metadata(metadata, max_depth=self.config.max_metadata_depth, max_bytes=self.config.max_metadata_bytes)
        if not isinstance(infer, bool):
            raise ValidationError("infer", f"must be True or False, got {validate.show(infer)}")
        at = validate.timestamp(timestamp)
        at = time.time() if at is None else at
        if not isinstance(test, bool):
            raise ValidationError("test", f"must be True or False, got {validate.show(test)}")
        tenant = self.config.tenant_id
        if test or meta.get("is_test") is True:
            if not self.energy:  # a test memory is the energy tiers' (listed, maintained and deleted by them)
                raise ValidationError("test", f"a test memory belongs to the energy tiers, and this store is under the {self.config.policy!r} "
                                      "policy; switch it with Memory.set_policy('energy') or `memorist config set policy energy`")
            from .pipelines.tiers import test_tenant

            meta = {**meta, "is_test": True}
            tenant = test_tenant(tenant)
        if self.energy:
            self._energy_engine().check_start(meta, at)  # a bad start energy, tier or date fails here, before anything is extracted or written
        scope = Scope(tenant, u or "", a or "", r or "")
        if infer:
            result = self._ingest.add_inferred(msgs, scope, metadata=meta, at=at, importance=weight, note=plain_text)
        else:
            result = self._ingest.add_verbatim(msgs, scope, metadata=meta, at=at, plain_text=plain_text or plain, importance=weight)
        self._consolidation_trigger(scope, result)
        return result

    @implements(MemoryAPI.search)
    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int = 5,
        filters: Mapping[str, Any] | None = None,
        reference_time: Any = None,
        threshold: float | None = None,
    ) -> MemoryList:
        scope = self._scope_filter(user_id, agent_id, run_id)
        query = validate.text("query", query, max_chars=self.config.max_message_chars)
        limit = validate.limit(limit)
        predicate = compile_filters(filters)
        reference = validate.timestamp(reference_time, field="reference_time")
        threshold = validate.threshold(threshold)
        qvec = self._query_vector(query)
        ranked, similarity = self._search.search(
            scope, query, qvec, limit=limit, predicate=predicate, reference=reference, now=time.time(), threshold=threshold
        )
        results = []
        tiers = self._tier_view()
        for record, score in ranked:
            item = self._item(record, score, tiers=tiers)
            if record.id in similarity:
                item["similarity"] = reported_similarity(similarity[record.id])
            results.append(item)
        return {"results": results}

    @implements(MemoryAPI.get)
    def get(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> MemoryItem:
        record = self._get_record(memory_id, user_id, agent_id, run_id)
        if not self._visible(record, time.time()):
            raise NotFoundError("memory", record.id)
        if self.energy:
            # Buffered retrievals count in the energy shown, as a maintenance run counts
            # them (read from the buffer: a get writes nothing).
            uses = self.store.buffered_uses(record.id)
            if uses:
                record = dataclasses.replace(record, access_count=record.access_count + uses)
        return self._item(record)

    @implements(MemoryAPI.get_all)
    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int = 100,
        filters: Mapping[str, Any] | None = None,
    ) -> MemoryList:
        scope = self._scope_filter(user_id, agent_id, run_id)
        limit = validate.limit(limit)
        predicate = compile_filters(filters)
        now = time.time()
        cutoff = validity_cutoff(now, self.config.decay_days)
        if predicate is None:
            records = self._list_facts(scope, limit=limit, cutoff=cutoff, now=now)
        else:
            records = self._list_filtered(scope, predicate, limit=limit, cutoff=cutoff, now=now)
        # A page's cost to the work meter: its records and its text (a unit per 1,000 characters).
        charge(len(records) + sum(len(r.text) for r in records) // 1000)
        tiers = self._tier_view()
        return {"results": [self._item(r, tiers=tiers) for r in records]}

    def _list_filtered(
        self, scope: ScopeFilter, predicate: Filter, *, limit: int, cutoff: float | None, now: float
    ) -> list[MemoryRecord]:
        """The scope's newest ``limit`` facts that ``predicate`` keeps: of the memories
        the store narrowed the filter to when it can (a few thousand at most), else of
        all of them, newest first, read until the page is full."""
        narrowed = None
        if predicate.narrowing is not None:
            narrowed = self.store.narrowed_ids(scope, predicate.narrowing, cutoff=cutoff, now=now, limit=NARROWED_READ)
        if narrowed is None:
            rows = self._list_paged(scope, first=4 * limit, cutoff=cutoff, now=now)
        else:
            charge(len(narrowed))
            rows = self._read_in_order(narrowed, scope)
        records = []
        for record in rows:
            if is_fact(record) and predicate(record):
                records.append(record)
                if len(records) >= limit:
                    break
        return records

    def _list_paged(self, scope: ScopeFilter, *, first: int, cutoff: float | None, now: float) -> Iterator[MemoryRecord]:
        """The scope's memories newest first, ``first`` at a time, then each page
        from where the last one ended (``until`` its oldest moment) and twice as
        large: a caller that stops early reads little more than it took, and one
        that reads all reads each memory about once."""
        seen: set[str] = set()
        want, until = first, None
        while True:
            rows = self.store.list(scope, limit=want, cutoff=cutoff, now=now, until=until)
            fresh = [record for record in rows if record.id not in seen]  # (a page's first moment was the last one's)
            for record in fresh:
                seen.add(record.id)
                yield record
            if len(rows) < want:
                return
            # A page of one moment's memories only: the next takes more of that moment.
            want = want * 2 if fresh else want * 8
            until = rows[-1].created_at

    def _read_in_order(self, memory_ids: list[str], scope: ScopeFilter) -> Iterator[MemoryRecord]:
        """The records of ``memory_ids`` still active, in their order, read a page at a time."""
        for start in range(0, len(memory_ids), 100):
            page = memory_ids[start : start + 100]
            records = self.store.get_many(page, scope=scope)
            # (One deleted since the ids were read is left out, as a listing would.)
            yield from (r for mid in page if (r := records.get(mid)) is not None and r.status is Status.ACTIVE)

    def _list_facts(self, scope: ScopeFilter, *, limit: int, cutoff: float | None, now: float) -> list[MemoryRecord]:
        """The scope's newest ``limit`` facts: playbooks and trajectories share the
        space, so read further while they fill the page."""
        want = limit
        while True:
            rows = self.store.list(scope, limit=want, cutoff=cutoff, now=now)
            facts = [r for r in rows if is_fact(r)]
            if len(facts) >= limit or len(rows) < want:
                return facts[:limit]
            want *= 4

    @implements(MemoryAPI.update)
    def update(
        self,
        memory_id: str,
        text: str,
        metadata: dict[str, Any] | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> UpdateResult:
        record = self._get_record(memory_id, user_id, agent_id, run_id)
        if not self._visible(record, time.time()):  # as get: an update must not bring an expired memory back
            raise NotFoundError("memory", record.id)
        text = validate.text("text", text, max_chars=self.config.max_message_chars)
        meta = validate.metadata(metadata, max_depth=self.config.max_metadata_depth, max_bytes=self.config.max_metadata_bytes)
        merged, key = self._merged(record, text, meta)
        vector = self.embedder.embed_one(key)
        with self.store.transaction() as batch:
            # Read again inside the transaction: a write that committed since (a
            # maintenance run's decay or promotion, a boost) is kept, not overwritten.
            current = _current_in(batch, record.id)
            if current.metadata != record.metadata:
                merged, fresh_key = self._merged(current, text, meta)
                if fresh_key != key:
                    key, vector = fresh_key, self.embedder.embed_one(fresh_key)
            updated = current.copy(
                text=text,
                search_text=key,
                content_hash=content_hash(text),
                updated_at=time.time(),
                metadata=merged,
            )
            batch.update(updated, vector, old_text=current.text, payload={"metadata": meta} if meta else None)
        return {"id": current.id, "memory": text, "event": "UPDATE", "previous_memory": current.text}

    def _merged(self, record: MemoryRecord, text: str, meta: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The metadata of ``record`` with ``meta`` merged in (checked), and the search
        key of ``text`` under it."""
        merged = {**record.metadata, **meta}
        if meta:  # merging must not grow a memory's metadata past the limits either
            try:
                validate.metadata(merged, max_depth=self.config.max_metadata_depth, max_bytes=self.config.max_metadata_bytes)
            except ValidationError as exc:
                raise ValidationError("metadata", f"merged into the memory's metadata, {str(exc).split(': ', 1)[1]}") from None
        name = merged.get("name") if self.config.retrieval.speaker_keys else None
        return merged, memory_key(text, name=name if isinstance(name, str) and name else None)

    @implements(MemoryAPI.delete)
    def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> DeleteResult:
        # Any memory of the caller's by id, also one that get hides (archived by a
        # consolidation, outside the decay window): deleting it brings nothing back.
        record = self._get_record(memory_id, user_id, agent_id, run_id)
        with self.store.transaction() as batch:
            # Inside the transaction: a promotion that committed since moved the memory.
            current = _current_in(batch, record.id)
            batch.delete(current)
        return {"id": current.id, "memory": current.text, "event": "DELETE", "message": "Memory deleted successfully"}

    @implements(MemoryAPI.delete_all)
    def delete_all(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> DeleteAllResult:
        scope = self._scope_filter(user_id, agent_id, run_id)
        records = [r for r in self.store.list(scope) if is_fact(r)]  # playbooks and trajectories stay
        payload = {"delete_all": {k: v for k, v in (("user_id", scope.user_id), ("agent_id", scope.agent_id), ("run_id", scope.run_id)) if v}}
        # A transaction per DELETE_ALL_BATCH memories: one for 100,000 held the store's
        # writes (every user's, on SQLite) for 10 s. What a crash interrupts, the
        # same call again finishes.
        deleted = 0
        for start in range(0, len(records), DELETE_ALL_BATCH):
            with self.store.transaction() as batch:
                # As they are now: another caller may have deleted or changed one since.
                current = batch.get_many([r.id for r in records[start : start + DELETE_ALL_BATCH]])
                for record in current.values():
                    if record.status is Status.ACTIVE and is_fact(record):
                        batch.delete(record, payload=payload)
                        deleted += 1
        charge(len(records))  # (after: a call given up midway would leave a part)
        noun = "memory" if deleted == 1 else "memories"
        return {"deleted": deleted, "message": f"Deleted {deleted} {noun}"}

    @implements(MemoryAPI.erase)
    def erase(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, dry_run: bool = False) -> EraseResult:
        from .pipelines.erase import erase

        scope = self._scope_filter(user_id, agent_id, run_id)
        if not isinstance(dry_run, bool):
            raise ValidationError("dry_run", f"must be True or False, got {validate.show(dry_run)}")
        result = erase(self.store, scope, dry_run=dry_run)
        if not dry_run:
            with self._cache_lock:
                self._query_vectors.clear()  # queries are text too
        return result

    @implements(MemoryAPI.history)
    def history(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> list[EventItem]:
        # The audit trail: a memory get hides (deleted, archived, outside the validity
        # window) keeps its events readable, to its owner only; nothing here revives it.
        record = self._get_record(memory_id, user_id, agent_id, run_id, deleted=True)
        chain = [record.id]
        source = record.lineage.get("promoted_from")
        while isinstance(source, str) and len(chain) < _MAX_HOPS:  # a promoted memory's history starts with its originals'
            earlier = self.store.get(source)
            if earlier is None or earlier.scope != record.scope:  # a promotion keeps the scope; an imported lineage may name any id
                break
            chain.append(earlier.id)
            source = earlier.lineage.get("promoted_from")
        if len(chain) == 1:
            return [e.to_item() for e in self.store.history(record.id)]
        events = sorted((e for mid in chain for e in self.store.history(mid)), key=lambda e: e.seq)
        return [e.to_item() for e in events]

    def reset(self) -> None:
        """Delete everything in the store: memories, vectors and the event log. The
        store's configuration stays: its policy is recorded again, the log's one event."""
        from .pipelines.settings import change_policy

        self.store.reset()
        change_policy(self.store, self.config.policy, actor="reset")
        self._query_vectors.clear()
        if self._tiers is not None:
            self._tiers.forget()

    def scope(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> Scoped:
        """A handle bound to one scope (at least one id): its calls take no ids and
        reach nothing outside it. ``memory.scope(user_id="alex").search("food")`` is
        ``memory.search("food", user_id="alex")``."""
        return Scoped(self, user_id=user_id, agent_id=agent_id, run_id=run_id)

    # inspection and maintenance ------------------------------------------------------
    @implements(MemoryAPI.events)
    def events(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, since: int = 0, limit: int | None = None) -> list[EventItem]:
        scope = self._scope_filter(user_id, agent_id, run_id)
        if limit is not None:
            limit = validate.limit(limit)
        since = validate.since(since)
        return [e.to_item() for e in self.store.events(scope, since=since, limit=limit)]

    @implements(MemoryAPI.rollback)
    def rollback(
        self, event_or_run_id: int | str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> RollbackResult:
        from .pipelines.playbooks import strategy_playbook
        from .pipelines.undo import rollback

        result = rollback(self.store, event_or_run_id, self._optional_scope(user_id, agent_id, run_id), self.embedder.embed)
        # Undoing a playbook's curation or merge changes its strategies: that state is a
        # version too, so its versions still hold what it holds.
        # (The undo is done and durable: a version that cannot be written now is the
        # next curation's to write, not a failure of the undo.)
        touched = {t for r in self.store.get_many([*result["restored"], *result["retired"]]).values() if (t := strategy_playbook(r))}
        for scope, name in sorted(touched):
            try:
                self.learning.playbooks.version_if_changed(scope, name, time.time(), reason="undo",
                                                           change={"rolled_back": result["rolled_back"], "rollback_seq": result["rollback_seq"]})
            except MemoristError as exc:
                log.warning("rollback: the playbook %r was not versioned after the undo: %s", name, exc)
        return result  # type: ignore[return-value]

    # consolidation -----------------------------------------------------------------------
    def _consolidator(self) -> Any:
        from .pipelines.consolidation import Consolidator

        return Consolidator(self.store, self.embedder, prepare=self._ingest.prepare, decay_days=self.config.decay_days)

    def _consolidation_trigger(self, scope: Scope, result: Mapping[str, Any]) -> None:
        """After an add: when ``auto_consolidate_threshold`` is set and the space (user,
        agent) now holds more active memories than that, consolidate it with the default
        settings, in the background (``run_consolidation_async``) or at once. The count
        is read every ``CHECK_EVERY`` adds of a space in this process, not on every add."""
        threshold = self.config.auto_consolidate_threshold
        added = sum(1 for r in result.get("results", ()) if r.get("event") == "ADD")
        if not threshold or not added or not (scope.user_id or scope.agent_id):
            return  # consolidation acts on a user's or an agent's memories: a run-only add's space is every run's
        key = scope.space
        with self._cache_lock:
            counts = self._adds_since_check
            counts[key] = counts.get(key, 0) + added
            if counts[key] < min(_CHECK_EVERY, threshold):
                return
            counts[key] = 0
        space = ScopeFilter(scope.tenant_id, scope.user_id or None, scope.agent_id or None)
        if self.store.count(space) <= threshold:  # type: ignore[attr-defined]
            return
        if self.config.run_consolidation_async:
            self._consolidation_runs().request(space, None, {"trigger": "auto", "threshold": threshold})
            return
        try:
            self._auto_consolidate(space, None, {})
        except Exception:  # the add is stored: its caller must not retry it, nor the run fail it
            log.exception("auto-consolidation (user_id=%r, agent_id=%r) failed after the add was stored; "
                          "the next adds over the threshold try again", space.user_id, space.agent_id)

    def _auto_consolidate(self, space: ScopeFilter, _now: float | None, _trigger: dict[str, Any]) -> dict[str, Any]:
        return self.learning._consolidate(None, None, 0.5, True, 0.8, None, False, user_id=space.user_id, agent_id=space.agent_id,
                                          actor="auto-consolidation")

    def _consolidation_runs(self) -> Any:
        runs = self._background_consolidation
        if runs is None:
            from .pipelines.tiers import BackgroundRuns

            with self._cache_lock:
                runs = self._background_consolidation
                if runs is None:
                    runs = self._background_consolidation = BackgroundRuns(self._auto_consolidate)
        return runs

    def _wait_consolidation(self, timeout: float | None = None) -> bool:
        """``memory.learning.wait_consolidation``."""
        runs = self._background_consolidation
        return True if runs is None else runs.wait(timeout)

    def stats(self) -> dict[str, Any]:
        """This tenant's counts (memories by status and kind, users, spaces, events;
        its energy tiers' test memories apart, as ``test_memories``) and the store's
        identity (path, schema version, embedder, size). A store several tenants
        share (the service's) counts each tenant apart."""
        from .pipelines.tiers import test_tenant

        tenant = self.config.tenant_id
        stats = {"tenant_id": tenant, **self.store.stats(tenant)}
        stats["decay_days"] = self.config.decay_days
        tests = self.store.stats(test_tenant(tenant))["memories"]
        if tests:
            stats["test_memories"] = tests
        stats["policy"] = self.config.policy
        return stats

    # LLM roles: pending turns and usage -----------------------------------------------
    def _optional_scope(self, user_id: Any, agent_id: Any, run_id: Any) -> ScopeFilter:
        """Like ``_scope_filter`` but no id means the whole tenant (maintenance calls)."""
        ids = (validate.scope_id(n, v) for n, v in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)))
        return ScopeFilter(self.config.tenant_id, *ids)

    def pending(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Turns whose LLM extraction failed and that wait for :meth:`reprocess`, oldest
        first (every scope of the tenant when no id is given). Each item is the turn's
        event (``seq``, messages in ``payload``, ``payload["reason"]``)."""
        if limit is not None:
            limit = validate.limit(limit)
        return [e.to_item() for e in self.store.pending_turns(self._optional_scope(user_id, agent_id, run_id), limit=limit)]

    def reprocess(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """Run extraction again on pending turns (those whose LLM extraction failed),
        oldest first; every scope of the tenant when no id is given.

        A turn whose extraction succeeds now is resolved: the provisional memories its
        heuristic fallback added give way to the model's facts, reconciled as in
        :meth:`add`. One that fails again stays pending. Returns ``{"results": [...],
        "processed", "failed", "pending"}`` (``pending``: how many are left). Needs an
        LLM (``llm=`` or ``MEMORIST_LLM``): the heuristics never fail, so re-running them
        would prove nothing.
        """
        from .pipelines.reprocess import reprocess

        if getattr(self.extractor, "llm", None) is None:
            raise ConfigurationError(
                "reprocess needs an LLM extractor: pass llm='openai:gpt-5-mini' (or another provider) "
                "or set MEMORIST_LLM"
            )
        if limit is not None:
            limit = validate.limit(limit)
        return reprocess(self._ingest, self._optional_scope(user_id, agent_id, run_id), limit=limit)

    def llm_usage(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, since: int = 0) -> dict[str, Any]:
        """Totals of the ``llm_call`` events in the log: calls, failed calls, tokens and
        estimated cost (USD), overall and per role. Calls made outside a turn
        (consolidation, learning, evaluation) are the tenant's: counted when no id is given."""
        from .pipelines.llm_events import usage_summary

        scope = self._optional_scope(user_id, agent_id, run_id)
        since = validate.since(since)
        self._call_log.flush()
        return usage_summary(self.store.events(scope, since=since, ops=("llm_call",)))

    def reindex(self, *, embedder: str | Embedder | None = None, progress: Any = None) -> dict[str, int]:
        """Rebuild the indexes from the store; with ``embedder``, re-embed everything with it."""
        if embedder is None:
            return self.store.reindex()
        new = resolve_embedder(embedder)
        result = self.store.reindex(new.embed, name=new.name, dim=new.dim, progress=progress)
        self.store.bind_embedder(new.name, new.dim)
        self.embedder = new
        self._ingest.embedder = new
        self._query_vectors.clear()
        return result

    @property
    def playbooks(self) -> Any:
        """Self-evolving playbooks per learner: a :class:`~memorist.Playbook` with the
        default settings (``run_turn``, ``analyze``...). For others build one:
        ``Playbook(memory, preset="baseline", max_bullets=50)``."""
        from .ace.playbook import Playbook

        return Playbook(self)

    # the learning loop ------------------------------------------------------------------
    @property
    def learning(self) -> Any:
        """The learning loop's engine (:class:`memorist.ace.learning.Learning`), built on
        first use with :attr:`learning_config`. The calls below delegate to it."""
        engine = getattr(self, "_learning", None)
        if engine is None:
            from .ace.learning import Learning

            with self._cache_lock:
                engine = getattr(self, "_learning", None)
                if engine is None:
                    engine = self._learning = Learning(self, getattr(self, "_learning_config", None))
        return engine

    @property
    def learning_config(self) -> Any:
        """How trajectories are kept and playbooks curated and versioned
        (:class:`memorist.policies.learning.LearningConfig`; assign one, or a mapping of
        its fields such as ``{"trajectory_sample_rate": 1.0, "versions": {"keep_latest": 3}}``)."""
        return self.learning.config

    @learning_config.setter
    def learning_config(self, config: Any) -> None:
        from .policies.learning import LearningConfig

        if isinstance(config, Mapping):
            config = LearningConfig.from_mapping(config)
        if not isinstance(config, LearningConfig):
            raise ValidationError("learning_config", f"must be a LearningConfig or a mapping, got {type(config).__name__}")
        from .ace.learning import Learning

        current = getattr(self, "_learning", None)
        # Built (and so checked) before it is kept: a refused setting leaves the one in force.
        engine = Learning(self, config, clock=current.clock if current is not None else time.time)
        self._learning_config, self._learning = config, engine

    # minutes, context window, evaluation, PAIR -------------------------------------------
    @property
    def minutes(self) -> Minutes:
        """Coordination minutes (:class:`memorist.capabilities.Minutes`): ``record``,
        ``recent``, ``by_ids``, ``get``, ``history``, ``search``, ``reindex``, the
        context window (``build_context``), ``evaluate``, ``pair`` and ``pair_round``."""
        return Minutes(self)

    def _minutes_engine(self) -> Any:
        engine = getattr(self, "_minutes", None)
        if engine is None:
            from .pipelines.minutes import Minutes as MinutesLog

            with self._cache_lock:
                engine = getattr(self, "_minutes", None)
                if engine is None:
                    engine = self._minutes = MinutesLog(self)
        return engine

    # sharing through relation tuples ------------------------------------------------------
    @property
    def relations(self) -> Relations:
        """Relation tuples (:class:`memorist.relations.Relations`): ``create``,
        ``delete``, ``list``, ``check``. They widen what a subject's handle
        (:meth:`as_subject`) reaches; this Memory itself manages every tuple of its tenant."""
        return Relations(self)

    def as_subject(self, *, user_id: str | None = None, agent_id: str | None = None) -> Subject:
        """A handle acting as a user and/or an agent (:class:`memorist.relations.Subject`):
        its calls are this Memory's, in the subject's own space when they name no ids;
        another owner's memories and playbooks answer as missing unless a relation tuple
        (or a playbook's visibility) lets the subject read them, and only editor or owner
        lets it write. ``memory.as_subject(agent_id="agent_b").learning.get_playbook("default", agent_id="agent_a")``."""
        return Subject(self, user_id=user_id, agent_id=agent_id)

    # energy tiers -------------------------------------------------------------------------
    @property
    def tiers(self) -> Tiers:
        """Energy tiers (:class:`memorist.capabilities.Tiers`): ``maintain``, ``boost``,
        ``end_conversation``, ``wait``, ``status``, ``health``, ``config``,
        ``test_memories``, ``delete_test_memories``."""
        return Tiers(self)

    def _energy_engine(self) -> Any:
        """The energy tiers' engine, built on first use."""
        engine = self._tiers
        if engine is None:
            from .pipelines.tiers import EnergyTiers

            with self._cache_lock:
                engine = self._tiers
                if engine is None:
                    engine = self._tiers = EnergyTiers(
                        self.store, self.config.tenant_id, lambda: self.embedder, log_path=self._maintenance_log_path()
                    )
        return engine

    def _maintenance_log_path(self) -> str | None:
        import os

        setting = self.config.maintenance_log
        if setting is not None:
            return None if setting.strip().lower() in ("off", "none", "-") else os.path.expanduser(setting)
        if isinstance(self.store, SQLiteStore) and self.store.path != ":memory:":
            root, _ = os.path.splitext(os.fspath(self.store.path))
            return root + ".maintenance.log"
        return None

    def _require_energy(self, what: str) -> None:
        if not self.energy:
            raise ConfigurationError(
                f"{what} needs the energy policy, and this store is under the {self.config.policy!r} policy "
                "(energy tiers would decay and expire memories it keeps); switch it with "
                "Memory.set_policy('energy') or `memorist config set policy energy`"
            )

    def set_policy(self, policy: str) -> dict[str, Any]:
        """Change the store's policy (``"default"`` or ``"energy"``) for every process
        that opens it from now on; logged in the event log. Returns ``{"policy",
        "previous"}``. Under the energy policy, memories added from now on get a start
        energy, and maintenance decays, expires and promotes the store's memories."""
        from .pipelines.settings import change_policy

        if not isinstance(policy, str):
            raise ValidationError("policy", f"must be 'default' or 'energy', got {validate.show(policy)}")
        changed = change_policy(self.store, policy.strip().lower(), actor="set_policy")
        self.config.policy = changed["policy"]
        self._ingest.prepare = self._energy_engine().prepare if self.energy else None
        return changed

    # ids, export and import -------------------------------------------------------------
    def resolve_id(
        self, prefix: str, *, include_deleted: bool = False, user_id: str | None = None, agent_id: str | None = None,
        run_id: str | None = None,
    ) -> str:
        """The full id of the memory whose id is ``prefix`` or starts with it.

        Lets people type the short ids tables show. :class:`NotFoundError` when no
        memory of this tenant matches, :class:`ValidationError` when several do. The
        ids restrict it to the caller's memories, as in :meth:`get`: only their ids
        are matched, so another scope's ids are never shown and never make a prefix
        ambiguous.
        """
        prefix = validate.memory_id(prefix).strip()
        owner = self._optional_scope(user_id, agent_id, run_id)
        matches = self.store.ids_with_prefix(
            owner.tenant_id, prefix, include_deleted=include_deleted, limit=6, user_id=owner.user_id, agent_id=owner.agent_id,
            run_id=owner.run_id,
        )
        if prefix in matches:
            return prefix
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise NotFoundError("memory", prefix)
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise ValidationError("memory_id", f"{prefix!r} is the start of several ids ({shown}); give more of it")

    def export(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        all_scopes: bool = False,
        events: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """The scope's memories as export objects, oldest first (``all_scopes=True``:
        every memory of the store, of this tenant, then its relation tuples as
        ``{"type": "relation", ...}`` objects). With ``events``, the scope's event
        log follows as ``{"type": "event", ...}`` objects. Test memories of the energy
        policy (``add(..., test=True)``) are kept apart and not exported.

        Each memory object is a whole memory (id, text, scope, dates, metadata, kind,
        class, counters, tier, lineage): :meth:`import_` restores it as it was.
        Written one JSON object per line, this is the file ``memorist export`` writes.
        """
        from .pipelines.transfer import export_lines

        if not isinstance(all_scopes, bool) or not isinstance(events, bool):
            raise ValidationError("all_scopes" if not isinstance(all_scopes, bool) else "events", "must be True or False")
        if all_scopes:
            if any(v is not None for v in (user_id, agent_id, run_id)):
                raise ValidationError("all_scopes", "exports every scope; do not pass user_id, agent_id or run_id with it")
            scope = ScopeFilter(self.config.tenant_id)
        else:
            scope = self._scope_filter(user_id, agent_id, run_id)
        return export_lines(self.store, scope, events=events, relations=all_scopes)

    def import_(
        self,
        source: Any,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        infer: bool | None = None,
        progress: Callable[[int], None] | None = None,
        from_line: int = 1,
    ) -> dict[str, int]:
        """Import JSON lines: a path, an open text file, or an iterable of lines or dicts.

        A line is a memory written by :meth:`export` (restored with its id and dates;
        one the store already holds is updated only if the line is newer, so importing
        twice changes nothing) or a conversation turn, ``{"messages": [...] | "text":
        "...", "user_id"?, "metadata"?, "timestamp"?, "infer"?, "importance"?}``, added like
        :meth:`add` does. Lines that name no scope get ``user_id``/``agent_id``/
        ``run_id``; ``infer`` is the default of turns without ``"infer"``.

        A relation line of a whole-tenant export restores its tuple (one already held
        changes nothing).

        A playbook the file brings to a scope that has a playbook of its name already
        (under other ids) joins it: its strategies are added, its header and versions
        left out (counted as skipped), with a warning.

        Returns counts: ``lines``, ``added``, ``updated``, ``unchanged``, ``skipped``
        (deleted here since, or a playbook's header joining one), ``joined`` (of the skipped: the
        headers and versions of a playbook joining one of its name), ``deleted`` (by reconciliation), ``events`` (event lines,
        which are not replayed), ``relations`` (tuples written) and ``calls``. A bad line raises
        :class:`~memorist.ImportLineError` naming it; the lines before
        it stay imported. ``progress(line)`` is called as each line is read, with its number (a function that raises stops the import with a ValidationError).

        ``from_line``: the first line imported; the lines before it are read and left
        alone, and line numbers (in errors, in ``progress``) stay the source's. To go
        on after an import that stopped at a bad line N, once it is fixed:
        ``from_line=N``. ``lines`` then counts the lines from it on.
        """
        import os

        from .pipelines.transfer import Importer, import_lines

        ids = self._optional_scope(user_id, agent_id, run_id)
        defaults = {"user_id": ids.user_id, "agent_id": ids.agent_id, "run_id": ids.run_id}
        if infer is not None and not isinstance(infer, bool):
            raise ValidationError("infer", f"must be True, False or None, got {validate.show(infer)}")
        if progress is not None and not callable(progress):
            raise ValidationError("progress", f"must be a function of the lines read, got {type(progress).__name__}")
        validate.line_number(from_line)
        importer = Importer(
            self.store,
            self.embedder,
            self.config.tenant_id,
            self.add,
            defaults,
            infer,
            add_texts=self._add_texts,
            max_chars=self.config.max_message_chars,
            max_metadata_depth=self.config.max_metadata_depth,
            max_metadata_bytes=self.config.max_metadata_bytes,
            playbooks=lambda: self.learning.playbooks,
        )
        if isinstance(source, str | os.PathLike):
            try:
                # surrogateescape: a line that is not UTF-8 fails as that line.
                with open(source, encoding="utf-8", errors="surrogateescape") as handle:
                    return import_lines(importer, handle, progress=progress, from_line=from_line)
            except OSError as exc:
                raise ValidationError("source", f"cannot read {validate.show(os.fspath(source))}: {exc.strerror or exc}") from exc
            except (UnicodeEncodeError, ValueError) as exc:
                if isinstance(exc, ValidationError):  # an ImportLineError of the file's lines
                    raise
                # A path with a lone surrogate or a NUL byte names no file.
                raise ValidationError("source", f"is not a usable path: {validate.show(source)}") from exc
        if isinstance(source, bytes | dict) or not hasattr(source, "__iter__"):
            raise ValidationError("source", f"must be a path, a text file or an iterable of lines, got {type(source).__name__}")
        return import_lines(importer, source, progress=progress, from_line=from_line)

    # integrity and backup -------------------------------------------------------------
    def _sqlite_store(self, what: str) -> SQLiteStore:
        if not isinstance(self.store, SQLiteStore):
            hint = " (for PostgreSQL use its own tools: amcheck, pg_dump)" if type(self.store).__name__ == "PostgresStore" else ""
            raise ConfigurationError(f"{what} works on the SQLite store; this Memory uses {type(self.store).__name__}{hint}")
        return self.store

    def check(self, *, quick: bool = False) -> dict[str, Any]:
        """Look for damage: SQLite's integrity check (``quick``: its faster
        ``quick_check``) and Memorist's own invariants (every active memory in the
        full-text and vector indexes, no index entry without its memory, the event
        log whole). Read-only, and on its own snapshot: writers are not blocked.

        Returns ``{"healthy", "problems": [{"check", "problem", "count",
        "examples"}], "counts", ...}``; see :func:`memorist.store.sqlite.check.check_store`,
        which also checks a file that does not open (``memorist check`` uses it).
        """
        from .store.sqlite.check import check_store

        if not isinstance(quick, bool):
            raise ValidationError("quick", f"must be True or False, got {quick!r}")
        store = self._sqlite_store("check")
        if store.path == ":memory:":
            with store._lock:  # the only connection that sees an in-memory store
                return check_store(store.path, quick=quick, conn=store._conn)
        return check_store(store.path, quick=quick, busy_timeout=self.config.busy_timeout)

    def backup(self, dest: str, *, force: bool = False) -> dict[str, Any]:
        """Copy the store to the file ``dest`` with SQLite's online backup API.

        The copy is one consistent state of the store, taken while other processes
        may go on writing; it is checked before it replaces ``dest``, and an
        existing ``dest`` is refused unless ``force``. (Copying the ``.db`` file
        alone is not a backup: recent commits live in its ``-wal`` file until a
        checkpoint.) Returns ``{"path", "source", "bytes", "memories", "seconds"}``.
        """
        from .store.sqlite.check import backup_store

        store = self._sqlite_store("backup")
        store.flush()  # retrieval bookkeeping buffered here goes into the copy too
        if store.path == ":memory:":
            with store._lock:
                return backup_store(store._conn, dest, force=force, source_path=store.path)
        return backup_store(store.path, dest, force=force, busy_timeout=self.config.busy_timeout)

    def close(self) -> None:
        """Wait for background maintenance (see :meth:`end_conversation`), flush
        buffered bookkeeping and close the store."""
        if self._tiers is not None:
            self._tiers.close()
        if self._background_consolidation is not None:
            self._background_consolidation.close()
        self._call_log.close()
        if self._own_llm and self.llm is not None:
            self.llm.close()  # its connections (a request past its deadline ends by itself)
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memory(path={getattr(self.store, 'path', None)!r}, embedder={self.embedder.name!r})"


def reembed(path: str, embedder: str | Embedder, *, progress: Any = None) -> dict[str, int]:
    """Re-embed every active memory of the store at ``path`` with ``embedder``.

    Works without the store's old embedder (a retired model, a missing extra): it
    needs only the stored texts. The store then belongs to the new embedder.
    """
    new = resolve_embedder(embedder)
    store = open_store(path, busy_timeout=MemoryConfig().resolved().busy_timeout)
    try:
        return store.reindex(new.embed, name=new.name, dim=new.dim, progress=progress)
    finally:
        store.close()
