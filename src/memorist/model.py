"""Memorist's domain types. No I/O here.

A :class:`MemoryRecord` is one unit of memory in a :class:`Scope`. Every field the
later capabilities need (counters for playbooks, per-class strengths and access
indices for decay, energy and tier, lineage) exists from the start, so adding
behaviour never needs a schema redesign.

The values the ingest roles exchange (:class:`Message`, :class:`Fact`,
:class:`Existing`, :class:`Decision` and its :class:`Action`) live here too, not
beside the role seams in :mod:`memorist.roles.base`: argument checks, prompts and
policies read them, and none of those may depend on the roles.
"""

from __future__ import annotations

import enum
import os
import secrets
import threading
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, NotRequired

# typing_extensions: pydantic reads these TypedDicts (the REST schemas) only in this form before 3.12.
from typing_extensions import TypedDict


class Kind(enum.StrEnum):
    """What a memory is."""

    FACT = "fact"
    PREFERENCE = "preference"
    EXPERIENCE = "experience"
    STRATEGY = "strategy"
    ANTI_PATTERN = "anti_pattern"
    OBSERVATION = "observation"
    REFLECTION = "reflection"
    CONSOLIDATED = "consolidated"
    TURN = "turn"
    # The learning loop's own objects, never facts: a task execution,
    # its content-addressed step sequence, a named playbook and one immutable
    # version of it.
    TRAJECTORY = "trajectory"
    TRACE = "trace"
    PLAYBOOK = "playbook"
    PLAYBOOK_VERSION = "playbook_version"
    # The minutes: the search-index entry of one coordination event of the
    # log (memorist.pipelines.minutes). The log is the record; this is its index.
    MINUTE = "minute"


#: Kinds whose content hash is an address of their own (a playbook's name, a version's
#: entries, a trace's steps, or unique per execution), not the hash of their text:
#: the integrity check does not compare it with the text.
ADDRESSED_KINDS = frozenset({Kind.TRAJECTORY, Kind.TRACE, Kind.PLAYBOOK, Kind.PLAYBOOK_VERSION, Kind.REFLECTION})


class MemoryClass(enum.StrEnum):
    """The one memory class of every memory: what it remembers."""

    SEMANTIC = "semantic"  # facts about the world or the user
    EPISODIC = "episodic"  # things that happened
    PROCEDURAL = "procedural"  # how to do things: strategies, anti-patterns


class Status(enum.StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
    DELETED = "deleted"


class Tier(enum.StrEnum):
    """A memory's tier under the energy policy (see :mod:`memorist.policies.energy`).

    ``EXPIRED``: its energy decayed below the expiry threshold; it is archived,
    hidden from retrieval, and its history stays in the log.
    """

    WORKING = "working"
    SHORT_TERM = "short_term"
    LONG_TERM = "long_term"
    EXPIRED = "expired"


#: The metadata key under which a stored metadata text that cannot be decoded is
#: shown, whole (:func:`memorist.store.codec.loads`): the memory stays readable.
UNREADABLE_KEY = "_unreadable"

#: The memory class a kind gets when none is given.
DEFAULT_CLASS: dict[Kind, MemoryClass] = {
    Kind.FACT: MemoryClass.SEMANTIC,
    Kind.PREFERENCE: MemoryClass.SEMANTIC,
    Kind.OBSERVATION: MemoryClass.SEMANTIC,
    Kind.CONSOLIDATED: MemoryClass.SEMANTIC,
    Kind.EXPERIENCE: MemoryClass.EPISODIC,
    Kind.REFLECTION: MemoryClass.EPISODIC,
    Kind.TURN: MemoryClass.EPISODIC,
    Kind.STRATEGY: MemoryClass.PROCEDURAL,
    Kind.ANTI_PATTERN: MemoryClass.PROCEDURAL,
    Kind.TRAJECTORY: MemoryClass.EPISODIC,
    Kind.TRACE: MemoryClass.EPISODIC,
    Kind.PLAYBOOK: MemoryClass.PROCEDURAL,
    Kind.PLAYBOOK_VERSION: MemoryClass.PROCEDURAL,
    Kind.MINUTE: MemoryClass.EPISODIC,
}

#: Kinds that belong to the learning loop, whatever their section: strategies and
#: anti-patterns, reflections, trajectories, traces, playbooks and their versions.
LEARNING_KINDS: frozenset[Kind] = frozenset({
    Kind.STRATEGY,
    Kind.ANTI_PATTERN,
    Kind.REFLECTION,
    Kind.TRAJECTORY,
    Kind.TRACE,
    Kind.PLAYBOOK,
    Kind.PLAYBOOK_VERSION,
})

#: Kinds that index the coordination log (the minutes): never facts; only the
#: minutes calls (:attr:`memorist.Memory.minutes`) read or change them.
MINUTE_KINDS: frozenset[Kind] = frozenset({Kind.MINUTE})


@dataclass(frozen=True, slots=True)
class Scope:
    """Who a memory belongs to.

    A *space* — (tenant_id, user_id, agent_id) — persists across conversations;
    ``run_id`` names the conversation (or task run) a memory came from. Empty
    strings are "not set"; the store keeps them that way so equality is simple.
    """

    tenant_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    run_id: str = ""

    @property
    def space(self) -> tuple[str, str, str]:
        return (self.tenant_id, self.user_id, self.agent_id)

    def as_dict(self) -> dict[str, str | None]:
        return {
            "tenant_id": self.tenant_id or None,
            "user_id": self.user_id or None,
            "agent_id": self.agent_id or None,
            "run_id": self.run_id or None,
        }


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_epoch(moment: datetime) -> float:
    """Seconds since the epoch; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class _IdSequence:
    """Memory ids: UUID-shaped, unguessable, and near each other when made together.

    The last 96 bits are random (uuid4's, with its version and variant). The first
    32 count up from a random start, taken again every ``RUN`` ids and in a forked
    child: ids a process makes in a row sit side by side in every index keyed on
    them (the store's id index, the event log's per-memory index), so a batch of a
    thousand memories writes a few index pages instead of a thousand scattered ones,
    however many memories the store already holds. Short prefixes still tell ids
    apart, as tables print them.
    """

    RUN = 1 << 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._left = 0
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._left = 0

    def __call__(self) -> str:
        with self._lock:
            if not self._left:
                self._next, self._left = secrets.randbits(32), self.RUN
            head = self._next
            self._next = (head + 1) & 0xFFFFFFFF
            self._left -= 1
        tail = uuid.uuid4().hex
        return f"{head:08x}-{tail[8:12]}-{tail[12:16]}-{tail[16:20]}-{tail[20:]}"


#: A new memory id (see :class:`_IdSequence`).
new_id = _IdSequence()


@dataclass(slots=True)
class MemoryRecord:
    """One stored memory, as the store holds it."""

    id: str
    scope: Scope
    text: str
    kind: Kind = Kind.FACT
    memory_class: MemoryClass = MemoryClass.SEMANTIC
    topic: str = ""
    concept: str = ""
    section: str = ""
    tags: list[str] = field(default_factory=list)
    helpful: int = 0
    harmful: int = 0
    # Per-class strength and the space's access-clock value when that class
    # component was last touched (decay counts access events, not seconds).
    strengths: dict[str, float] = field(
        default_factory=lambda: {c.value: 1.0 for c in MemoryClass}
    )
    last_access: dict[str, int] = field(default_factory=lambda: {c.value: 0 for c in MemoryClass})
    access_count: int = 0
    importance: float = 0.5
    energy: float = 1.0
    tier: Tier = Tier.WORKING
    created_at: float = 0.0  # when it happened (epoch seconds, UTC)
    updated_at: float | None = None
    valid_to: float | None = None
    content_hash: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    lineage: dict[str, Any] = field(default_factory=dict)
    status: Status = Status.ACTIVE
    search_text: str = ""  # what the full-text index sees; defaults to text

    def copy(self, **changes: Any) -> MemoryRecord:
        return replace(self, **changes)

    def to_item(self, score: float | None = None) -> dict[str, Any]:
        """The result item of the public API (mem0's shape plus Memorist's fields)."""
        created = from_epoch(self.created_at).isoformat()
        item: dict[str, Any] = {
            "id": self.id,
            "memory": self.text,
            "user_id": self.scope.user_id or None,
            "agent_id": self.scope.agent_id or None,
            "run_id": self.scope.run_id or None,
            "created_at": created,
            # The memory service reports a never-updated memory with updated_at == created_at.
            "updated_at": created if self.updated_at is None else from_epoch(self.updated_at).isoformat(),
            "metadata": self.metadata.copy(),
            "kind": self.kind.value,
            "memory_class": self.memory_class.value,
            "importance": self.importance,
        }
        if self.scope.tenant_id:
            item["tenant_id"] = self.scope.tenant_id
        if score is not None:
            item["score"] = round(float(score), 6)
        return item


# typed results of the public calls ---------------------------------------------------------
# The shapes every surface returns (Memory, AsyncMemory, the clients, the REST schemas):
# plain dicts at run time, described once here. Items may carry more keys than these
# (the energy policy adds ``energy`` and ``tier``): readers ignore unknown keys.


class MemoryItem(TypedDict):
    """One memory as the calls return it."""

    id: str
    memory: str
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    created_at: str
    updated_at: str
    metadata: dict[str, Any]
    kind: str
    memory_class: str
    importance: float  # 0 to 1 (consolidation never merges one at or above its threshold)
    tenant_id: NotRequired[str]
    score: NotRequired[float]  # search only: the fused rank score (it orders, it does not measure)
    similarity: NotRequired[float]  # search only: cosine of memory and query
    energy: NotRequired[float]  # the energy policy only
    tier: NotRequired[str]  # the energy policy only


class MemoryList(TypedDict):
    """``search`` and ``get_all``: memories, best (search) or newest (get_all) first."""

    results: list[MemoryItem]


class Change(TypedDict):
    """One memory an ``add`` changed."""

    id: str
    memory: str
    event: str  # ADD, UPDATE, DELETE or NONE


class AddResult(TypedDict):
    results: list[Change]
    message: str


class UpdateResult(TypedDict):
    id: str
    memory: str
    event: str  # UPDATE
    previous_memory: str


class DeleteResult(TypedDict):
    id: str
    memory: str
    event: str  # DELETE
    message: str


class DeleteAllResult(TypedDict):
    deleted: int
    message: str


#: What an erasure counts, one entry per capability (:func:`erased_capability`).
ERASED_CAPABILITIES = (
    "facts", "playbook_bullets", "playbooks", "playbook_versions", "trajectories", "reflections", "minutes", "test_memories",
)


def erased_capability(kind: str, bullet: bool, test: bool) -> str:
    """The capability a stored memory of ``kind`` belongs to, as an erasure counts it:
    ``bullet``, it has a playbook section; ``test``, it is a test memory."""
    if test:
        return "test_memories"
    if bullet or kind in (Kind.STRATEGY, Kind.ANTI_PATTERN):
        return "playbook_bullets"
    return {
        Kind.PLAYBOOK: "playbooks", Kind.PLAYBOOK_VERSION: "playbook_versions", Kind.TRAJECTORY: "trajectories",
        Kind.TRACE: "trajectories", Kind.REFLECTION: "reflections", Kind.MINUTE: "minutes",
    }.get(kind, "facts")  # type: ignore[call-overload]


class EraseResult(TypedDict):
    """What :meth:`~memorist.Memory.erase` removed (``dry_run``: would remove)."""

    dry_run: bool
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    erased: dict[str, int]  # memories per capability (ERASED_CAPABILITIES), and "relations": tuples removed
    vectors: int
    events: int  # events of the owner, now tombstones (shape kept, text gone)
    event: int | None  # the erasure's own event (seq); None in a dry run
    store: dict[str, Any]  # what was done so that no byte of the text stays in the store
    message: str


class EventItem(TypedDict):
    """One event of the log (``history``, ``events``)."""

    seq: int
    event: str
    memory_id: str | None
    old_memory: str | None
    new_memory: str | None
    created_at: str
    actor: str | None
    tenant_id: str | None
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    payload: Any


class EventList(TypedDict):
    """The REST form of ``history`` and ``events``: ``{"results": [...]}``."""

    results: list[EventItem]


class RollbackResult(TypedDict):
    """What ``rollback`` undid: the operation, the memories it restored and retired."""

    rolled_back: int | str  # the event seq or run id asked for
    op: str  # the operation's event: consolidation, update, delete, curation, merge...
    event_seqs: list[int]
    restored: list[str]
    retired: list[str]
    rollback_seq: int


class ConsolidationReport(TypedDict):
    """What ``consolidate`` merged, kept and refused."""

    run_id: str | None  # None for a dry run; else what ``rollback`` takes
    dry_run: bool
    considered: int
    candidates: int
    merged_count: int  # source memories merged
    consolidated_count: int  # memories written
    preserved_count: int  # memories kept for their importance
    space_saved_bytes: int
    batches: int
    remaining: int  # candidates left for another run
    results: list[dict[str, Any]]
    rejected: list[dict[str, Any]]
    event_seqs: list[int]


class PolicyChange(TypedDict):
    policy: str
    previous: str | None


# the capabilities' results -------------------------------------------------------------------
# What memory.learning and memory.tiers return, and the service answers (the REST schemas are
# these types). As above, readers ignore keys they do not know.


class TrajectoryStarted(TypedDict):
    trajectory_id: str


class StepLogged(TypedDict):
    trajectory_id: str
    logged: str


class TrajectoryItem(TypedDict):
    """One recorded task execution (``memory.learning.get_trajectory``)."""

    trajectory_id: str
    status: str
    task_description: str
    steps: NotRequired[list[dict[str, Any]] | None]


class TrajectoryList(TypedDict):
    results: list[TrajectoryItem]


class ReflectionItem(TypedDict):
    """What a reflection on a trajectory found, by kind of insight."""

    memory_id: str
    insights: dict[str, list[str]]


class ReflectionList(TypedDict):
    results: list[ReflectionItem]


class StrategyItem(TypedDict):
    """One strategy (bullet) of a versioned playbook."""

    id: str
    category: str  # helpful, harmful or neutral
    pattern: str
    confidence: float
    evidence_count: int


class PlaybookItem(TypedDict):
    """A versioned playbook, with its strategies by category."""

    playbook_id: str | None
    name: str
    version: int
    strategies: NotRequired[dict[str, list[StrategyItem]] | None]


class PlaybookList(TypedDict):
    results: list[PlaybookItem]


class CurationResult(TypedDict):
    """What a curation (or a rollback) changed in a playbook, and its new version."""

    playbook_id: str
    version: int
    added: list[StrategyItem]
    updated: list[StrategyItem]
    removed: list[StrategyItem]


class DeletedPlaybook(TypedDict):
    """What deleting a playbook removed: its header, strategies and versions."""

    playbook_id: str | None
    name: str
    scope: str
    strategies: int
    versions: int
    message: str


class VersionItem(TypedDict):
    version: int
    version_label: NotRequired[str | None]
    major: bool


class VersionList(TypedDict):
    results: list[VersionItem]


class TierRun(TypedDict):
    """One maintenance run of the energy tiers: its counts and changes."""

    run: str
    decayed: int
    expired: int
    promoted: int
    results: list[dict[str, Any]]


class Scheduled(TypedDict):
    """A background run asked for at the end of a conversation."""

    scheduled: bool
    coalesced: bool


class TierItem(TypedDict):
    """A memory with its energy and tier."""

    id: str
    memory: str
    energy: float
    tier: str


class TierItems(TypedDict):
    results: list[TierItem]


class TierStatus(TypedDict):
    tiers: dict[str, Any]
    total: int


class TierHealth(TypedDict):
    status: str  # ok, warn or fail
    healthy: bool
    checks: list[dict[str, Any]]


class TierConfig(TypedDict):
    config: dict[str, Any]
    persisted: bool


class RelationItem(TypedDict):
    """A relation tuple: ``subject`` (type, id) has ``relation`` on ``object`` (type, id)."""

    subject: list[str]
    relation: str
    object: list[str]
    created_at: str | None


class RelationList(TypedDict):
    results: list[RelationItem]


class RelationChange(TypedDict):
    """What ``relations.create`` or ``relations.delete`` did: the tuple, and whether it changed the store."""

    subject: list[str]
    relation: str
    object: list[str]
    changed: bool


class RelationCheck(TypedDict):
    """Whether ``subject`` may act as ``relation`` on ``object``, and why (``via``:
    ``"owner"``, ``"grant"``, ``"group"``, ``"visibility"``; None when it may not)."""

    subject: list[str]
    relation: str
    object: list[str]
    allowed: bool
    via: str | None


@dataclass(frozen=True, slots=True)
class RelationTuple:
    """A stored relation tuple of one tenant."""

    subject_type: str
    subject_id: str
    relation: str
    object_type: str
    object_id: str
    created_at: float = 0.0

    @property
    def subject(self) -> tuple[str, str]:
        return (self.subject_type, self.subject_id)

    @property
    def object(self) -> tuple[str, str]:
        return (self.object_type, self.object_id)

    def to_item(self) -> RelationItem:
        return {"subject": list(self.subject), "relation": self.relation, "object": list(self.object),
                "created_at": from_epoch(self.created_at).isoformat() if self.created_at else None}


def is_fact(record: MemoryRecord) -> bool:
    """Whether the fact calls (``search``, ``get_all``, ``get``, ``update``,
    ``delete``, ``delete_all``, ``history``, the reconciler's candidates) may see
    ``record``.

    Not a playbook bullet (a memory with a ``section``: a per-learner playbook's bullets
    and the learning loop's strategies) and not one of the :data:`LEARNING_KINDS`. Those live
    beside the facts in the same space but only the learning calls read or change
    them.
    """
    return not record.section and record.kind not in LEARNING_KINDS and record.kind not in MINUTE_KINDS


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One entry of the append-only event log."""

    seq: int
    ts: float
    op: str
    memory_id: str | None
    scope: Scope
    old_text: str | None
    new_text: str | None
    payload: dict[str, Any]
    actor: str = ""

    @property
    def erased(self) -> bool:
        """Whether an erasure left this event a tombstone (its shape, no text or payload)."""
        return self.old_text is None and self.new_text is None and self.payload == {"erased": True}

    def to_item(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "event": self.op.upper(),
            "memory_id": self.memory_id,
            "old_memory": self.old_text,
            "new_memory": self.new_text,
            "created_at": from_epoch(self.ts).isoformat(),
            "actor": self.actor or None,
            **self.scope.as_dict(),
            "payload": self.payload,
        }


@dataclass(frozen=True, slots=True)
class Message:
    """One conversation message. ``role`` is ``"user"``, ``"assistant"`` or ``"system"``."""

    role: str
    content: str
    name: str | None = None
    # Optional per-message extras (``add(..., infer=False)`` stores them on the
    # message's memory): metadata merged over the call's, and when it was said.
    metadata: dict[str, Any] | None = None
    timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact extracted from a conversation.

    ``text`` is concise and self-contained, in the language of the input, starting
    directly with the fact ("Is vegetarian", not "The user is vegetarian").
    ``kind`` is one of the memory kinds (``"fact"``, ``"preference"``, ...).
    ``source_role`` is the role of the message the fact came from. ``importance``
    is the extractor's estimate in [0, 1], None when it proposes none.
    """

    text: str
    kind: str = "fact"
    source_role: str = "user"
    importance: float | None = None


class Action(enum.StrEnum):
    """What the reconciler decided to do with a fact: ADD, UPDATE, DELETE or NONE
    (as mem0's reconciler decides).

    Not called ``Event``: the event log (:class:`EventRecord`) is another thing. The
    public API still reports the action under the key ``"event"`` (mem0's format).
    """

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NONE = "NONE"


@dataclass(frozen=True, slots=True)
class Existing:
    """A memory already stored in the fact's scope, shown to the reconciler.

    ``score`` is its similarity to the fact being reconciled, in [0, 1] (cosine for
    the semantic embedder); higher is more similar.
    """

    id: str
    text: str
    score: float = 0.0


@dataclass(frozen=True, slots=True)
class Decision:
    """One reconciliation decision.

    - ``ADD``: store ``text`` as a new memory (``target_id`` is None).
    - ``UPDATE``: replace the text of memory ``target_id`` with ``text``;
      ``old_text`` is its text before.
    - ``DELETE``: delete memory ``target_id`` (its text is ``old_text``).
    - ``NONE``: nothing changes; ``target_id`` names the memory that already holds
      the fact, when there is one.
    """

    action: Action
    text: str
    target_id: str | None = None
    old_text: str | None = None
    fact: Fact | None = None
    reason: str = ""


__all__ = [
    "DEFAULT_CLASS",
    "ERASED_CAPABILITIES",
    "DeletedPlaybook",
    "EraseResult",
    "LEARNING_KINDS",
    "MINUTE_KINDS",
    "Action",
    "Decision",
    "EventRecord",
    "erased_capability",
    "Existing",
    "Fact",
    "Kind",
    "MemoryClass",
    "MemoryRecord",
    "Message",
    "RelationTuple",
    "Scope",
    "Status",
    "Tier",
    "from_epoch",
    "is_fact",
    "new_id",
    "to_epoch",
    "utcnow",
]
