"""The storage contract every backend implements.

A store is the system of record: memories, their vectors and the append-only event
log, with a full-text index and a vector index that can always be rebuilt from it.
Writes happen inside :meth:`Store.transaction`, whose :class:`Batch` writes every
change together with its event, so a change never exists without its event and an
event never exists without its change.

Isolation, the rule every backend keeps:

- A transaction is atomic and durable: all of its writes and events commit, or none;
  once :meth:`Store.transaction` returned, they survive a crash.
- Writes to one space (tenant, user, agent) are serialised: while a transaction holds
  a space, no other transaction — in this process, another process or another
  machine — commits to it. A transaction holds a space from its first read or write
  of it through the :class:`Batch` (``space_version``, ``find_active_hash``,
  ``get_many``, ``list_bullets``, ``advance_clock``, or a write) until it ends. So a
  writer that reads a space's version, candidates or hashes inside its transaction
  decides on the space as it is when it commits. SQLite keeps the rule with one
  writer per file; PostgreSQL with a transaction-scoped lock per space.
- The batch's reads see the transaction's own writes.
- Reads outside a transaction see committed data only; a search may run while writers
  commit and sees each transaction whole or not at all.

Rules no backend re-invents live in shared modules: the row codec and the speaker
rule in :mod:`memorist.store.codec`, the access clock's stamping in
:mod:`memorist.store.touches`, the scope and validity filters in :mod:`memorist.store.sql`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CorruptStoreError
from ..model import EventRecord, MemoryRecord, RelationTuple, Scope, Status
from ..policies.filters import Narrowing


@dataclass(frozen=True, slots=True)
class ScopeFilter:
    """Which memories a call may see: ids left as None match any value.

    ``tenant_id`` always applies. At least one of user/agent/run is set for every
    public call, so no call ever spans all users by accident.
    """

    tenant_id: str = ""
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None

    def matches(self, scope: Scope) -> bool:
        return (
            scope.tenant_id == self.tenant_id
            and (self.user_id is None or scope.user_id == self.user_id)
            and (self.agent_id is None or scope.agent_id == self.agent_id)
            and (self.run_id is None or scope.run_id == self.run_id)
        )


#: The payload an erased event keeps (see :meth:`Store.erase`): its shape (seq, time,
#: op, space, memory id, run, actor) stays, its text and payload do not. The event
#: log's append-only rule lets an update through only when it writes exactly this.
TOMBSTONE = '{"erased":true}'

#: Operations that change memories without an event naming each one: an erasure
#: deletes the owner's rows (its one event names no memory), keys adopt moves rows to
#: another space. A process's in-process indexes reload after one instead of catching
#: up from the log. As SQL: :data:`UNNAMED_CHANGES_SQL` (PostgreSQL's partial index
#: ``events_unnamed``, schema version 6, is on the same condition).
UNNAMED_CHANGES = ("erase", "adopt")
UNNAMED_CHANGES_SQL = "op IN (" + ", ".join(f"'{op}'" for op in UNNAMED_CHANGES) + ")"


def upgraded_message(label: str, found: int, understood: int) -> str:
    """Why a write is refused in a store a newer Memorist migrated while this process
    had it open."""
    return (f"{label} was upgraded to schema version {found} by a newer Memorist since this process opened it "
            f"(it understands {understood}); restart it with that Memorist: nothing was written")


def version_of(value: Any, label: str) -> int:
    """A store's stored ``schema_version``, which only damage makes other than a number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise CorruptStoreError(f"{label}: its schema version {value!r} is not a number; the store is damaged") from None


def holds_text_of(payload: dict[str, Any], owners: Sequence[ScopeFilter], memories: Collection[str] = ()) -> bool:
    """Whether an event's payload keeps a copy of a memory of one of ``owners``, or of
    one of ``memories``: the ``"undo"`` snapshots a reversible operation logs (a
    consolidation or an evaluation may be logged in a wider scope than the memories it
    changed). An erasure makes such an event a tombstone too, wherever it is logged."""
    undo = payload.get("undo")
    if not isinstance(undo, dict):
        return False
    for snap in undo.get("before") or ():
        if not isinstance(snap, dict):
            continue
        ids = snap.get("scope")
        if isinstance(ids, list) and len(ids) == 4 and any(owner.matches(Scope(*map(str, ids))) for owner in owners):
            return True
        if snap.get("id") in memories:
            return True
    return False


@dataclass(frozen=True, slots=True)
class Erased:
    """What :meth:`Store.erase` removed (or, in a dry run, would remove).

    ``memories``: ``(tenant_id, kind, is_bullet)`` -> rows (every status: a deleted
    memory's text goes too); ``vectors``: embeddings; ``events``: events blanked to
    tombstones; ``spaces``: the spaces the owner had; ``seq``: the erasure's own
    event (None in a dry run); ``scrub``: what was done so that no byte of the text
    stays in the files (backend-specific, for the report)."""

    memories: dict[tuple[str, str, bool], int]
    vectors: int
    events: int
    spaces: int
    seq: int | None = None
    scrub: dict[str, Any] | None = None


class Batch(abc.ABC):
    """The writes of one transaction. Each method also appends its event."""

    @abc.abstractmethod
    def add(self, record: MemoryRecord, vector: np.ndarray | None, *, actor: str = "", payload: dict[str, Any] | None = None) -> None: ...

    @abc.abstractmethod
    def update(
        self,
        record: MemoryRecord,
        vector: np.ndarray | None,
        *,
        old_text: str,
        op: str = "update",
        actor: str = "",
        payload: dict[str, Any] | None = None,
    ) -> None:
        """Replace a stored memory's fields with ``record``'s (same id)."""

    @abc.abstractmethod
    def delete(self, record: MemoryRecord, *, op: str = "delete", actor: str = "", payload: dict[str, Any] | None = None) -> None:
        """Mark a memory deleted; it leaves every index but its history stays."""

    @abc.abstractmethod
    def find_active_hash(self, scope: Scope, content_hash: str) -> str | None:
        """The id of an active memory of the same space with this content hash.

        Read inside the transaction, so two writers adding the same text cannot
        both miss each other."""

    @abc.abstractmethod
    def event(
        self,
        op: str,
        scope: Scope,
        *,
        memory_id: str | None = None,
        old_text: str | None = None,
        new_text: str | None = None,
        actor: str = "",
        payload: dict[str, Any] | None = None,
    ) -> int:
        """Append an event that goes with no memory row change (a turn, a run)."""

    # relation tuples (sharing): each change appends its event to the log.
    def put_relation(self, tenant_id: str, relation: RelationTuple) -> bool:
        """Store ``relation`` in ``tenant_id``; False when it was already there."""
        raise NotImplementedError

    def remove_relation(self, tenant_id: str, relation: RelationTuple) -> bool:
        """Remove ``relation`` (its ``created_at`` is ignored); False when it was not there."""
        raise NotImplementedError

    # Reads and bookkeeping inside the transaction (the learning pipeline's
    # read-modify-write: what it reads here no other writer can change before commit).
    @abc.abstractmethod
    def get_many(self, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """Memories by id, whatever their status, as this transaction sees them."""

    @abc.abstractmethod
    def list_bullets(self, scope: ScopeFilter) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        """:meth:`Store.list_bullets`, as this transaction sees it."""

    @abc.abstractmethod
    def space_version(self, scope: Scope) -> int:
        """:meth:`Store.space_version`, as this transaction sees it: before its
        first write to the space, the last committed version (what a writer compares
        with the version its candidates were read at); after it, a value that also
        counts this transaction's writes."""

    def changes_since(self, scope: Scope, position: int) -> list[tuple[str, np.ndarray | None]] | None:
        """The memories of the space of ``scope`` named by events logged after
        ``position`` (a :meth:`Store.log_position`), as this transaction sees them:
        each id with its vector, None when the memory is no longer active or has
        none. None when the backend cannot tell cheaply (the default; also after
        the log was reset or the store re-embedded): the caller then reads the
        space again. A writer uses it to check that what it decided on still
        holds without re-reading the whole space inside its transaction."""
        return None

    @abc.abstractmethod
    def advance_clock(self, scope: Scope, n: int = 1) -> int:
        """Advance the space's access clock by ``n`` access events (0: just read it)
        and return its new value; buffered retrievals are already counted in it."""


class Store(abc.ABC):
    """A backend: SQLite (embedded, default) or PostgreSQL."""

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[Batch]: ...

    # embedder identity ---------------------------------------------------------
    @abc.abstractmethod
    def embedder_identity(self) -> tuple[str, int] | None: ...

    @abc.abstractmethod
    def set_embedder_identity(self, name: str, dim: int) -> None:
        """Record the identity now (used by reindex and reset)."""

    @abc.abstractmethod
    def bind_embedder(self, name: str, dim: int) -> None:
        """Declare the embedder of this session's writes.

        A store with no identity yet records it in the transaction that writes its
        first vector, so merely reading a new store never pins an embedder. A store
        whose recorded identity differs refuses that write."""

    # reads ---------------------------------------------------------------------
    def reading(self) -> AbstractContextManager[None]:
        """Group the reads of one operation (a search).

        A backend may use it to check once, instead of on every call, whether
        other writers changed the store. Writes inside it stay correct.
        """
        return nullcontext()

    def released(self) -> AbstractContextManager[None]:
        """Inside a :meth:`reading` group, let the store's other callers in while this
        thread works on what it read, for as long as the caller's request makes it
        (a search checking a filter, fusing a large pool), and take the group back
        after. A backend whose reading group holds nothing others wait for keeps
        the default, which does nothing.
        """
        return nullcontext()

    @abc.abstractmethod
    def get(self, memory_id: str) -> MemoryRecord | None: ...

    @abc.abstractmethod
    def get_many(
        self, memory_ids: Sequence[str], *, scope: ScopeFilter | None = None, exact_access: bool = True
    ) -> dict[str, MemoryRecord]:
        """Memories by id, whatever their status.

        ``scope`` (where the ids were found) and ``exact_access=False`` are hints
        for showing search results: the backend may then answer from what it holds
        in memory, with access counts and last-access marks that lag behind.
        """

    @abc.abstractmethod
    def list(
        self,
        scope: ScopeFilter,
        *,
        limit: int | None = None,
        cutoff: float | None = None,
        now: float | None = None,
        status: Status = Status.ACTIVE,
        until: float | None = None,
    ) -> list[MemoryRecord]:
        """Memories of the scope, newest first; with ``until``, only those created at
        or before it (so ``limit`` counts them, not the later ones)."""

    @abc.abstractmethod
    def find_by_hash(self, scope: ScopeFilter, content_hash: str) -> list[MemoryRecord]: ...

    @abc.abstractmethod
    def similarities(self, scope: ScopeFilter, vector: np.ndarray, memory_ids: Sequence[str]) -> dict[str, float]:
        """The cosine similarity of ``vector`` with each of ``memory_ids`` that is an
        active memory of the scope with a vector (the others are left out)."""

    def created_times(self, scope: ScopeFilter, memory_ids: Sequence[str]) -> dict[str, float]:
        """When each of ``memory_ids`` that is an active memory of the scope was
        created (``created_at``: when it happened); the others are left out.

        Search reads it for its candidates; a backend may answer from its index.
        """
        records = self.get_many(list(memory_ids), scope=scope, exact_access=False)
        return {
            mid: r.created_at
            for mid, r in records.items()
            if r.status is Status.ACTIVE and scope.matches(r.scope)
        }

    @abc.abstractmethod
    def ids_with_prefix(
        self, tenant_id: str, prefix: str, *, include_deleted: bool = False, limit: int = 2, user_id: str | None = None,
        agent_id: str | None = None, run_id: str | None = None,
    ) -> list[str]:
        """Ids of the tenant's memories that start with ``prefix`` (at most ``limit``,
        sorted); deleted ones only with ``include_deleted``; for each of ``user_id``,
        ``agent_id``, ``run_id`` given, only the memories of that id."""

    @abc.abstractmethod
    def vector_search(
        self,
        scope: ScopeFilter,
        vector: np.ndarray,
        *,
        k: int | None,
        cutoff: float | None,
        now: float,
        window: tuple[float, float] | None = None,
        speaker: str | None = None,
    ) -> list[tuple[str, float]]:
        """``(memory_id, cosine)`` of active, valid memories, best first; ``window``
        keeps those created inside it, ``speaker`` those whose metadata ``name``
        is that (casefolded) speaker."""

    def narrowed_ids(
        self, scope: ScopeFilter, narrowing: Narrowing, *, cutoff: float | None, now: float, limit: int
    ) -> list[str] | None:
        """Ids of the scope's active memories, valid at ``now`` and effective since
        ``cutoff``, that ``narrowing`` keeps (and maybe a few more), newest first; None
        when more than ``limit`` are, or when the backend cannot check it. A filtered
        read then checks only these memories, not the whole scope.

        This default checks nothing: every filter reads memories one by one.
        """
        return None

    def speakers(self, scope: ScopeFilter) -> set[str]:
        """Casefolded speaker names (metadata ``name``, the rule of
        :func:`memorist.store.codec.speaker_of`) of the scope's memories."""
        return set()

    @abc.abstractmethod
    def text_search(
        self, scope: ScopeFilter, query: str, *, k: int, cutoff: float | None, now: float
    ) -> list[tuple[str, float]]:
        """``(memory_id, score)`` of active, valid memories sharing a term with ``query``,
        best first. ``score`` is the backend's full-text relevance (SQLite: BM25,
        PostgreSQL: ``ts_rank``): higher is better, and scores compare only within
        one result list (ranking fuses lists by rank, never by score). The backend
        tokenises ``query`` the way its index does."""

    @abc.abstractmethod
    def user_counts(
        self, tenant_id: str, *, now: float, cutoff: float | None = None, only: str | None = None, limit: int = 1000,
        agent: str | None = None,
    ) -> dict[str, int]:
        """The tenant's users (by id, at most ``limit``), each with its number of
        active memories valid at ``now`` and effective since ``cutoff``; with
        ``only``, just that user if it has a space; with ``agent``, the users of that
        agent's spaces, counting its memories. Users whose memories were all
        deleted are listed with 0."""

    def relations(
        self,
        tenant_id: str,
        *,
        subjects: Sequence[tuple[str, str]] | None = None,
        relations: Sequence[str] | None = None,
        objects: Sequence[tuple[str, str]] | None = None,
        object_like: Sequence[tuple[str, str]] | None = None,
        limit: int = 1000,
    ) -> list[RelationTuple]:
        """The relation tuples of ``tenant_id`` with one of ``subjects``, ``relations``
        and ``objects`` (None: any), and an object matching one of ``object_like``'s
        ``(object_type, LIKE pattern)`` (backslash escapes; SQLite ignores ASCII case
        there), at most ``limit``. Never cached: a revoked tuple is gone for the next read."""
        raise NotImplementedError

    @abc.abstractmethod
    def history(self, memory_id: str) -> list[EventRecord]: ...

    @abc.abstractmethod
    def events(
        self,
        scope: ScopeFilter | None = None,
        *,
        since: int = 0,
        limit: int | None = None,
        ops: Sequence[str] | None = None,
        newest_first: bool = False,
        before: int | None = None,
    ) -> list[EventRecord]:
        """Events of the scope (None: every scope) after seq ``since`` (and before seq
        ``before``, when given), of the ops ``ops`` (None: all), oldest first;
        ``newest_first`` reads from the end of the log, so ``limit`` keeps the latest
        (and ``before`` pages back from there)."""

    def pending_turns(self, scope: ScopeFilter | None = None, *, limit: int | None = None) -> list[EventRecord]:
        """Turns still waiting to be processed, oldest first.

        The log is append-only, so "pending" is expressed by events: a ``turn`` event
        written with ``payload["pending"] is True`` (its extraction failed) stays
        pending until a ``turn_processed`` event of the same space with
        ``payload["turn_event"]`` equal to its seq resolves it. This default reads the
        log through :meth:`events`; a backend may override it with one query.
        """
        events = self.events(scope, ops=("turn", "turn_processed"))
        resolved = {(e.scope.space, e.payload.get("turn_event")) for e in events if e.op == "turn_processed"}
        pending = [
            e for e in events
            if e.op == "turn" and e.payload.get("pending") is True and (e.scope.space, e.seq) not in resolved
        ]
        return pending if limit is None else pending[:limit]

    @abc.abstractmethod
    def stats(self, tenant_id: str | None = None) -> dict[str, Any]:
        """Counts and identity of the store. With ``tenant_id``, the counts (memories
        by status and kind, users, spaces, events) are that tenant's; the identity
        (path, schema, embedder, size) is the store's."""

    # access clock ----------------------------------------------------------------
    @abc.abstractmethod
    def touch(self, records: Sequence[MemoryRecord], *, query: str = "") -> None:
        """Record one retrieval in each space of ``records``: the space's access
        clock advances by one and each record's class component is touched, by the
        rule of :class:`memorist.store.touches.TouchBuffer`."""

    @abc.abstractmethod
    def access_clock(self, scope: Scope) -> int: ...

    def flush(self) -> None:
        """Write buffered retrieval bookkeeping now, so that reads return each touched
        memory's latest access. A backend that does not buffer has nothing to do."""
        return None

    def buffered_uses(self, memory_id: str) -> int:
        """Retrievals of ``memory_id`` buffered and not yet in its ``access_count``
        (read without writing them, unlike :meth:`flush`)."""
        return 0

    # playbooks -----------------------------------------------------------------------
    @abc.abstractmethod
    def list_bullets(self, scope: ScopeFilter) -> list[tuple[MemoryRecord, np.ndarray | None]]:
        """The active playbook bullets of the scope — memories with a non-empty
        ``section`` — with their vectors, oldest first. Proportional to the scope's
        memories, never to the whole store."""

    @abc.abstractmethod
    def space_version(self, scope: Scope) -> int:
        """A number that changes whenever a transaction writes to the space of
        ``scope`` (0 for a space never written). Readers compare it to know whether
        what they loaded is still current."""

    def log_position(self) -> int | None:
        """The event log's end now, for :meth:`Batch.changes_since`: every event
        committed later is after it. None (the default) when the backend's log
        order is not its commit order, so no such position exists."""
        return None

    # maintenance -------------------------------------------------------------------
    @abc.abstractmethod
    def reindex(self, embed: Callable[[list[str]], np.ndarray] | None = None, *, name: str | None = None, dim: int | None = None, progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
        """Rebuild the full-text index and the in-memory vector index from the store;
        with ``embed``, re-embed every active memory and record the new identity."""

    @abc.abstractmethod
    def adopt(self, moves: Sequence[tuple[str, str]], *, user_id: str | None = None, actor: str = "",
              payload: dict[str, Any] | None = None) -> dict[str, int]:
        """Move every record (memories of every kind, with their vectors) of each
        ``(source, target)`` tenant pair into the target tenant, in one transaction;
        with ``user_id``, only that user's spaces. A space the target lacks changes
        tenant whole (its events follow it); into one the target has (and out of the
        tenant's own space, which holds its configuration), the records move and
        their events stay. One ``adopt`` event in the first target's tenant space
        records a move (none when nothing moved). Returns ``{"memories", "spaces", "merged"}``; a second call
        finds nothing to move."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Remove every memory, vector and event."""

    @abc.abstractmethod
    def erase(
        self,
        owners: Sequence[ScopeFilter],
        *,
        dry_run: bool = False,
        log: Scope | None = None,
        describe: Callable[[Erased], dict[str, Any]] | None = None,
    ) -> Erased:
        """Forget an owner: every memory (whatever its status) and vector of the spaces
        each of ``owners`` matches (of its run only, when it names one) is removed, and
        every event of those spaces (of that run) keeps its shape but loses its text
        and payload (:data:`TOMBSTONE`), in one transaction that also appends the
        erasure's own ``erase`` event in the space of ``log`` (payload:
        ``describe(counts)``; without ``log``, in no space: other processes learn
        from it that their indexes of those spaces must be read again). Then the
        backend makes sure the removed bytes leave its files (SQLite: the full-text
        index merged, the file rewritten, the log checkpointed and truncated, the
        index files removed; PostgreSQL: the touched tables vacuumed).
        ``dry_run``: count only, write nothing."""

    @abc.abstractmethod
    def close(self) -> None: ...

    def unreachable(self) -> str | None:
        """Why the store cannot answer now (a database server that is down), or None.
        Quick: a service's health check asks it. A file answers while it is open."""
        return None

    def iter_all(self, scope: ScopeFilter) -> Iterator[MemoryRecord]:
        yield from self.list(scope)
