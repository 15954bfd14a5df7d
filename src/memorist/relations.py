"""Sharing through relation tuples: ``memory.relations`` and the subject's handle.

``memory.relations`` (:class:`Relations`) writes, removes, lists and checks tuples such
as ``(("agent", "agent_b"), "viewer", ("playbook", "agent_a/default"))`` (their grammar:
:mod:`memorist.policies.relations`). They widen what a *subject* reaches, and nothing
else does:

- ``memory.as_subject(agent_id="agent_b")`` (:class:`Subject`) is a handle that acts
  as that agent (or user, or both): its calls are Memory's, and a call naming another
  owner's ids or playbook is checked on each call against the tuples of the store
  (a revoked tuple is gone for the next call; nothing is cached). Without a relation
  the thing answers exactly as a missing one would (an empty search, an empty
  playbook, :class:`~memorist.errors.NotFoundError` for an id); a subject that may
  read but not write gets :class:`~memorist.errors.PermissionDeniedError` on a write.
- The service acts as the user and/or agent a key is bound to; the MCP server as its
  configured ids. A :class:`~memorist.Memory` itself (and ``memory.scope(...)``) is the
  application that owns the store: it names any scope, and manages every tuple.

Who may what, for a subject (its user and/or agent, and every group it is a member
of, through groups of groups up to :data:`~memorist.policies.relations.MAX_GROUP_DEPTH`):

- its own space (each id of the handle is the space's) and its own playbooks: all;
- another space's memories and trajectories: a relation on a space that covers them
  (``scope`` objects); viewer reads, editor and owner write;
- another owner's playbook: a relation on the playbook or on its space; a playbook's
  ``visibility`` widens reading only, and only an owner changes it: ``private`` (the
  owners and the relations), ``shared`` (also the members of its owners' teams: a
  group one of them holds ``owner`` of, or a group of the tenant's, which nobody holds
  ``owner`` of, that one of them is a direct member of), ``tenant`` (every subject of
  the tenant). The tenant's and the global playbooks are read by every subject;
  writing them takes editor on ``tenant/<name>``. Curating one takes editor on it and
  reading the space whose reflections are curated.
- tuples: a subject creates and deletes tuples on what it owns (its spaces and
  playbooks) or holds ``owner`` of (a group, another's playbook, a space and what it
  covers); it lists the tuples of its own subjects and groups and of the objects it
  manages (with no ``object`` filter, both: an owner sees whom it shares with).

Tenants never cross: a Memory serves one tenant and every tuple is that tenant's.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import validate
from .api import CALLS, MemoryAPI, Scoped
from .capabilities import Minutes
from .errors import NotFoundError, PermissionDeniedError, ValidationError
from .model import RelationChange, RelationCheck, RelationList, RelationTuple, is_fact
from .pipelines.minutes import project_of
from .policies import relations as rules
from .policies.relations import EDITOR, MEMBER, OWNER, VIEWER


@dataclass(frozen=True, slots=True)
class Target:
    """What a call acts on: a space (``name`` None) or a playbook of it."""

    user: str
    agent: str
    name: str | None = None
    label: str = "agent"  # a playbook's scope: agent, user, tenant or global

    @property
    def key(self) -> tuple[str, str]:
        if self.name is None:
            return ("scope", rules.space_key(self.user, self.agent))
        return ("playbook", rules.playbook_key(rules.PlaybookPath(self.label, self.user, self.agent, self.name)))


class Access:
    """The decisions over one Memory's tuples (its tenant's): who reaches what."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    @property
    def tenant(self) -> str:
        return str(self.memory.config.tenant_id)

    def groups(self, subjects: frozenset[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The groups ``subjects`` are members of, directly or through groups, each
        with its depth (bounded: :data:`MAX_GROUP_DEPTH` levels, :data:`MAX_GROUPS` groups)."""
        found: dict[tuple[str, str], int] = {}
        frontier = list(subjects)
        for depth in range(1, rules.MAX_GROUP_DEPTH + 1):
            if not frontier or len(found) >= rules.MAX_GROUPS:
                break
            rows = self.memory.store.relations(self.tenant, subjects=frontier, relations=[MEMBER], limit=rules.MAX_GROUPS)
            frontier = []
            for row in rows:
                if row.object not in found and row.object not in subjects and len(found) < rules.MAX_GROUPS:
                    found[row.object] = depth
                    frontier.append(row.object)
        return found

    def target_of(self, obj: tuple[str, str]) -> Target | None:
        """The space or playbook an object id names (None: a group, or a playbook id unknown here)."""
        kind, ident = obj
        if kind == "scope":
            space = rules.parse_space(ident)
            return Target(*space) if space else None
        if kind == "playbook":
            path = rules.parse_playbook(ident)
            if path is None:
                return None
            return Target(path.user, path.agent, path.name, path.label)
        return None

    def canonical(self, obj: tuple[str, str], subjects: frozenset[tuple[str, str]] | None = None) -> tuple[str, str]:
        """A playbook named by its id becomes its path; other objects are already canonical.
        An id of another tenant's playbook (only the global ones are everyone's) is
        not found; so is, for acting ``subjects``, one of a playbook they may not read,
        exactly as a missing one (its path, owner and name are not told)."""
        if obj[0] == "playbook" and rules.parse_playbook(obj[1]) is None:
            record = self.memory.store.get(obj[1])
            from .model import Kind

            scope = record.scope if record is not None else None
            everyones = scope is not None and scope.tenant_id == "" and not scope.user_id and not scope.agent_id
            if record is None or record.kind is not Kind.PLAYBOOK or not (record.scope.tenant_id == self.tenant or everyones):
                raise NotFoundError("playbook", obj[1])
            name = record.metadata.get("name")
            if record.scope.user_id or record.scope.agent_id:
                label = "agent" if record.scope.agent_id else "user"
            else:  # the default tenant's playbooks are the global ones
                label = "tenant" if record.scope.tenant_id == self.tenant else "global"
            target = Target(record.scope.user_id, record.scope.agent_id, str(name), label)
            if subjects is not None and self.decide(subjects, VIEWER, target) is None:
                raise NotFoundError("playbook", obj[1])
            return target.key
        return obj

    def visibility(self, target: Target) -> str:
        """A playbook's visibility, as stored on its header (a missing one: private)."""
        if target.label in ("tenant", "global"):
            return "tenant"
        from .pipelines.playbooks import PlaybookRef

        learning = self.memory.learning
        space = learning.owner(target.user or None, target.agent or None)
        header = learning.playbooks.header(PlaybookRef(space, target.name or "", target.label))
        value = header.metadata.get("visibility") if header is not None else None
        return value if value in ("private", "shared", "tenant") else "private"

    def decide(self, subjects: frozenset[tuple[str, str]], relation: str, target: Target | None,
               obj: tuple[str, str] | None = None) -> str | None:
        """How ``subjects`` hold ``relation`` on ``target`` (or on the group ``obj``):
        ``"owner"``, ``"grant"``, ``"group"``, ``"visibility"``, or None (they do not)."""
        if target is not None and target.label not in ("tenant", "global") and rules.owns(subjects, target.user, target.agent):
            return "owner"
        groups = self.groups(subjects)
        holders = [*subjects, *groups]
        objects: list[tuple[str, str]] = []
        if target is None:
            if obj is None:
                return None
            objects.append(obj)
        else:
            objects.append(target.key)
            if target.label not in ("tenant", "global"):
                objects += [("scope", k) for k in rules.covering_scopes(target.user, target.agent)]
        rows = self.memory.store.relations(self.tenant, subjects=holders, relations=rules.satisfying(relation), objects=objects, limit=1)
        if rows:
            return "grant" if rows[0].subject in subjects else "group"
        if relation == VIEWER and target is not None and target.name is not None:
            seen = self.visibility(target)
            if seen == "tenant":
                return "visibility"
            if seen == "shared" and groups and self.teams_with(rules.owners_of(target.user, target.agent), groups):
                return "visibility"
        return None

    def teams_with(self, owners: list[tuple[str, str]], groups: dict[tuple[str, str], int]) -> bool:
        """Whether one of ``groups`` (a subject's) is a team of ``owners`` (a playbook's),
        one its owners agreed to share with: a group one of them holds ``owner`` of (it
        chooses the members), or a group no subject holds ``owner`` of (the tenant
        manages it) that one of them is a direct member of. A group someone else
        manages is no team of theirs, whoever it enrolled: a subject cannot reach
        another's ``shared`` playbook by adding its owner to a group of its own."""
        candidates = list(groups)
        if not owners or not candidates:
            return False
        store = self.memory.store
        if store.relations(self.tenant, subjects=owners, relations=[OWNER], objects=candidates, limit=1):
            return True
        joined = store.relations(self.tenant, subjects=owners, relations=[MEMBER], objects=candidates, limit=rules.MAX_GROUPS)
        return any(not store.relations(self.tenant, relations=[OWNER], objects=[row.object], limit=1) for row in joined)


# the calls of memory.relations ------------------------------------------------------------
class Relations:
    """Relation tuples (``memory.relations``; see the module). On a
    :class:`~memorist.Memory` the calls manage every tuple of its tenant; on a
    subject's handle (``memory.as_subject(...).relations``) only what that subject
    owns or manages.

    >>> from memorist import Memory
    >>> m = Memory(":memory:", embedder="hashing")
    >>> m.relations.create(("agent", "agent_b"), "viewer", ("playbook", "agent_a/default"))["changed"]
    True
    >>> m.relations.check(("agent", "agent_b"), "viewer", ("playbook", "agent_a/default"))["allowed"]
    True
    >>> m.relations.check(("agent", "agent_b"), "editor", ("playbook", "agent_a/default"))["allowed"]
    False
    """

    #: The public calls.
    CALLS = ("create", "delete", "list", "check")

    def __init__(self, host: Any, subjects: frozenset[tuple[str, str]] | None = None) -> None:
        self._host = host
        self._subjects = subjects

    @property
    def _access(self) -> Access:
        return Access(self._host)

    def _object(self, obj: Any) -> tuple[str, str]:
        """The canonical object (a playbook's id resolved: for a subject, only one it may read)."""
        return self._access.canonical(rules.object_of(obj), self._subjects)

    def _tuple(self, subject: Any, relation: Any, obj: Any) -> RelationTuple:
        who = rules.subject_of(subject)
        rel = rules.relation_of(relation)
        what = self._object(obj)
        rules.check_tuple(who, rel, what)
        return RelationTuple(who[0], who[1], rel, what[0], what[1], time.time())

    def _manages(self, obj: tuple[str, str]) -> bool:
        """Whether the handle may write tuples on ``obj`` (the application may on any)."""
        if self._subjects is None:
            return True
        access = self._access
        return access.decide(self._subjects, OWNER, access.target_of(obj), obj) is not None

    def _require_manage(self, obj: tuple[str, str]) -> None:
        if not self._manages(obj):
            raise PermissionDeniedError(f"{obj[0]} {obj[1]!r}: only its owner manages who shares it")

    def create(self, subject: Any, relation: str, object: Any) -> RelationChange:  # noqa: A002 (what a relation tuple calls it)
        """Grant ``subject`` (``("user"|"agent"|"group", id)`` or ``"type:id"``)
        ``relation`` (``owner``, ``editor``, ``viewer``; ``member`` of a group) on
        ``object`` (``("playbook", "agent_a/default")``, ``("scope", "user:alex")``,
        ``("group", "team")``). Takes effect on the next call; logged. ``changed`` is
        False when the tuple was already there."""
        row = self._tuple(subject, relation, object)
        self._require_manage(row.object)
        with self._host.store.transaction() as batch:
            changed = batch.put_relation(self._access.tenant, row)
        return {"subject": list(row.subject), "relation": row.relation, "object": list(row.object), "changed": changed}

    def delete(self, subject: Any, relation: str, object: Any) -> RelationChange:  # noqa: A002
        """Revoke a tuple (the next call no longer has it); logged. ``changed`` is False
        when there was no such tuple."""
        row = self._tuple(subject, relation, object)
        self._require_manage(row.object)
        with self._host.store.transaction() as batch:
            changed = batch.remove_relation(self._access.tenant, row)
        return {"subject": list(row.subject), "relation": row.relation, "object": list(row.object), "changed": changed}

    def list(self, *, subject: Any = None, relation: str | None = None, object: Any = None, limit: int = 100) -> RelationList:  # noqa: A002
        """The tuples of the tenant, filtered by ``subject``, ``relation`` and ``object``
        (each optional), at most ``limit``, in a stable order (by object, relation,
        subject). A subject's handle lists the tuples it may see: its own (its subjects'
        and its groups') and those on the objects it manages (:meth:`_on_managed`: what
        it shares, and with whom); given an ``object``, all of that object's tuples when
        it manages it, else its own."""
        count = validate.limit(limit)
        who = rules.subject_of(subject) if subject is not None else None
        rel = rules.relation_of(relation) if relation is not None else None
        what = self._object(object) if object is not None else None
        store, tenant = self._host.store, self._access.tenant
        relations, objects = ([rel] if rel else None), ([what] if what else None)
        if self._subjects is None or (what is not None and self._manages(what)):
            rows = store.relations(tenant, subjects=[who] if who else None, relations=relations, objects=objects, limit=count)
            return {"results": [r.to_item() for r in rows]}
        holders = [*self._subjects, *self._access.groups(self._subjects)]
        mine = [s for s in holders if who is None or s == who]
        rows = store.relations(tenant, subjects=mine, relations=relations, objects=objects, limit=count)
        if what is None:
            rows = _first(count, rows, *self._on_managed(holders, [who] if who else None, relations, count))
        return {"results": [r.to_item() for r in rows]}

    def _on_managed(self, holders: list[tuple[str, str]], subjects: list[tuple[str, str]] | None, relations: list[str] | None,
                    count: int) -> list[list[RelationTuple]]:
        """The tuples (of ``subjects`` and ``relations``, None: any; at most ``count``
        each read) on the objects the handle manages, as :meth:`_manages` decides: the
        spaces and playbooks it owns, and what ``holders`` (its subjects and groups)
        hold ``owner`` of: a group, a playbook, a space and every space and playbook
        that space covers. At most :data:`~memorist.policies.relations.MAX_GROUPS`
        ``owner`` tuples are followed, so a listing costs a bounded number of reads."""
        store, tenant = self._host.store, self._access.tenant
        ids = dict(self._subjects or ())
        spaces = [(ids.get("user", ""), ids.get("agent", ""))]
        exact: list[tuple[str, str]] = []
        for row in store.relations(tenant, subjects=holders, relations=[OWNER], limit=rules.MAX_GROUPS):
            space = rules.parse_space(row.object_id) if row.object_type == "scope" else None
            if space is not None:
                spaces.append(space)
            elif row.object not in exact:
                exact.append(row.object)
        patterns = list(dict.fromkeys(p for user, agent in dict.fromkeys(spaces) for p in rules.owner_object_patterns(user, agent)))

        def covered(row: RelationTuple) -> bool:
            return any(rules.names_owned(row.object_type, row.object_id, user, agent) for user, agent in spaces)

        found = [self._read(covered, count, subjects=subjects, relations=relations, object_like=patterns)]
        if exact:
            found.append(store.relations(tenant, subjects=subjects, relations=relations, objects=exact, limit=count))
        return found

    def _read(self, keep: Callable[[RelationTuple], bool], count: int, **query: Any) -> list[RelationTuple]:
        """Up to ``count`` tuples of ``query`` that ``keep`` accepts. A LIKE pattern
        reads a superset (SQLite's ignores ASCII case: ``user:ALEX`` matches
        ``user:alex``); while refused rows crowd the accepted ones out, the read is
        made again with a larger limit, up to :data:`SCAN_PAST` rows past ``count``."""
        store, tenant = self._host.store, self._access.tenant
        fetch = count
        while True:
            rows = store.relations(tenant, limit=fetch, **query)
            kept = [r for r in rows if keep(r)]
            if len(kept) >= count or len(rows) < fetch or fetch >= count + SCAN_PAST:
                return kept[:count]
            fetch = min(2 * fetch, count + SCAN_PAST)

    def check(self, subject: Any, relation: str, object: Any) -> RelationCheck:  # noqa: A002
        """Whether ``subject`` may act as ``relation`` on ``object`` now: its own
        spaces and playbooks, a tuple (its own or a group's), or a playbook's
        visibility. ``via`` says which. A subject's handle checks its own subjects, or
        any subject on an object it manages."""
        who = rules.subject_of(subject)
        rel = rules.relation_of(relation)
        what = self._object(object)
        if self._subjects is not None and who not in self._subjects and not self._manages(what):
            raise PermissionDeniedError("a subject checks its own access, or anyone's on what it manages")
        access = self._access
        if rel == MEMBER:
            via = "group" if what in access.groups(frozenset([who])) else None
        else:
            via = access.decide(frozenset([who]), rel, access.target_of(what), what)
        return {"subject": list(who), "relation": rel, "object": list(what), "allowed": via is not None, "via": via}


#: How many tuples a subject's listing reads past those it lists, when tuples it may not
#: see crowd the LIKE read of what it manages (ids that differ from its own in case only).
SCAN_PAST = 10_000


def _first(count: int, *reads: list[RelationTuple]) -> list[RelationTuple]:
    """The first ``count`` tuples of ``reads`` together, each once, by object, relation and subject."""
    rows = {(r.object_type, r.object_id, r.relation, r.subject_type, r.subject_id): r for read in reads for r in read}
    return [rows[key] for key in sorted(rows)][:count]


# the subject's handle ----------------------------------------------------------------------
_WRITES = frozenset({"add", "update", "delete", "delete_all", "rollback"})
#: Calls no relation grants: only the owner of a space (or the application, the tenant) makes them.
_OWNERS_ONLY = frozenset({"erase"})
#: The learning calls on a playbook (the others act on the trajectories of a space).
_PLAYBOOK_CALLS = {
    "get_playbook": False, "list_playbook_versions": False, "get_playbook_version": False,
    "create_playbook": True, "update_playbook": True, "curate_playbook": True, "rollback_playbook": True,
    "delete_playbook": True,
}
#: The learning calls on a space (True: they write it). Curation reads the space's
#: reflections (and marks them curated) and writes the playbook, checked as a playbook write.
_SPACE_CALLS = {
    "start_trajectory": True, "log_step": True, "complete_trajectory": True, "get_trajectory": False,
    "query_trajectories": False, "prune_trajectories": True, "reflect": True, "batch_reflect": True,
    "execute_with_learning": True, "curate_playbook": False, "list_playbooks": False, "consolidate": True,
}
_PLAYBOOK_NAME = {"get_playbook": "name", "list_playbook_versions": "name", "get_playbook_version": "name",
                  "create_playbook": "name", "update_playbook": "name", "curate_playbook": "playbook_name",
                  "rollback_playbook": "name", "execute_with_learning": "playbook_name", "delete_playbook": "name"}


def _denied_write(target: Target, visible: bool) -> Exception:
    if visible:
        what = "playbook" if target.name is not None else "memories of"
        return PermissionDeniedError(f"{what} {target.key[1]!r}: this subject may read but not write it (it holds no editor relation)")
    if target.user:
        return NotFoundError("user", target.user)
    return NotFoundError("agent", target.agent)


class Subject:
    """A :class:`~memorist.Memory` acting as a subject: ``memory.as_subject(agent_id="agent_b")``.

    Its calls are the Memory's; with no ids they act in the subject's own space, and
    naming another owner's ids or playbook is allowed only as the relation tuples say
    (see :mod:`memorist.relations`), checked on every call.

    >>> from memorist import Memory
    >>> m = Memory(":memory:", embedder="hashing")
    >>> _ = m.learning.update_playbook([{"pattern": "Retry with backoff"}], agent_id="agent_a")
    >>> agent_b = m.as_subject(agent_id="agent_b")
    >>> agent_b.learning.get_playbook("default", agent_id="agent_a")["strategies"]["helpful"]
    []
    >>> _ = m.relations.create(("agent", "agent_b"), "viewer", ("playbook", "agent_a/default"))
    >>> [s["pattern"] for s in agent_b.learning.get_playbook("default", agent_id="agent_a")["strategies"]["helpful"]]
    ['Retry with backoff']
    """

    def __init__(self, memory: Any, *, user_id: str | None = None, agent_id: str | None = None) -> None:
        user, agent = validate.scope_id("user_id", user_id), validate.scope_id("agent_id", agent_id)
        if user is None and agent is None:
            raise ValidationError("user_id", "a subject is a user or an agent: give user_id and/or agent_id")
        self.memory = memory
        self.ids: dict[str, str | None] = {"user_id": user, "agent_id": agent}
        self.subjects = frozenset(rules.owners_of(user or "", agent or ""))

    @property
    def access(self) -> Access:
        return Access(self.memory)

    @property
    def relations(self) -> Relations:
        """The tuples this subject manages (:class:`Relations`, restricted to it)."""
        return Relations(self.memory, self.subjects)

    @property
    def learning(self) -> SubjectLearning:
        """The learning loop, acting as this subject (another owner's trajectories and
        playbooks as the tuples say)."""
        return SubjectLearning(self)

    @property
    def tiers(self) -> Any:
        """The energy tiers of the subject's own space (``memory.scope(...).tiers``)."""
        return Scoped(self.memory, **self.ids).tiers

    @property
    def minutes(self) -> Any:
        """The minutes of the subject's user's project (as ``memory.scope(user_id=...).minutes``),
        whose context windows and PAIR rounds read only what the subject may read
        (:class:`SubjectMinutes`)."""
        return Scoped(_MinutesHost(self), user_id=self.ids["user_id"]).minutes

    def scope(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> Scoped:
        """A handle bound to a scope whose calls act as this subject."""
        return Scoped(self, user_id=user_id, agent_id=agent_id, run_id=run_id)

    def fill(self, arguments: dict[str, Any]) -> None:
        """A call naming neither a user nor an agent acts in the subject's own space."""
        if arguments.get("user_id") is None and arguments.get("agent_id") is None:
            arguments.update(self.ids)

    def may(self, target: Target, write: bool) -> tuple[bool, bool]:
        """(visible, writable) for this subject."""
        access = self.access
        if write:
            if access.decide(self.subjects, EDITOR, target) is not None:
                return True, True
            return access.decide(self.subjects, VIEWER, target) is not None, False
        return access.decide(self.subjects, VIEWER, target) is not None, False

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.ids.items() if v is not None)
        return f"Subject({shown})"


def _space(arguments: dict[str, Any]) -> Target:
    return Target(arguments.get("user_id") or "", arguments.get("agent_id") or "")


def _memory_call(name: str) -> Callable[..., Any]:
    declared = getattr(MemoryAPI, name)
    signature = inspect.signature(declared)
    write = name in _WRITES

    @functools.wraps(declared)
    def call(self: Subject, *args: Any, **kwargs: Any) -> Any:
        arguments = dict(signature.bind(self, *args, **kwargs).arguments)
        arguments.pop("self")
        self.fill(arguments)
        target = _space(arguments)
        visible, writable = self.may(target, write)
        if write and not writable:
            raise _denied_write(target, visible)
        if name in _OWNERS_ONLY and not rules.owns(self.subjects, target.user, target.agent):
            if not visible:
                raise _denied_write(target, False)
            raise PermissionDeniedError(f"{name}: only the owner of {target.key[1]!r} (or the tenant) may; a relation does not grant it")
        if not visible:
            if name in ("search", "get_all"):
                validate.limit(arguments.get("limit", 5))
                return {"results": []}
            if name == "events":
                return []
            raise NotFoundError("memory", validate.memory_id(arguments["memory_id"]))
        kw = {k: v for k, v in arguments.items() if signature.parameters[k].kind is not inspect.Parameter.VAR_KEYWORD}
        if name == "events" and not rules.owns(self.subjects, target.user, target.agent):
            return _shared_events(self.memory, kw)
        return getattr(self.memory, name)(**kw)

    return call


def _shared_events(memory: Any, arguments: dict[str, Any]) -> list[Any]:
    """The events of another owner's space that a relation shares: those of its
    memories (facts: adds, updates, deletes, merges of them). The owner's other events
    (searches, conversation turns, minutes, playbooks, trajectories, maintenance runs)
    are not shared, as the calls that read those objects are not. Pages are read until
    ``limit`` shared events are found or the log ends, so a page the filter empties
    does not end a reader's paging early."""
    limit = arguments.get("limit")
    since = arguments.get("since", 0)
    shared: list[Any] = []
    while True:
        page = memory.events(**{**arguments, "since": since})
        ids = [e["memory_id"] for e in page if e["memory_id"]]
        records = memory.store.get_many(ids) if ids else {}
        for event in page:
            record = records.get(event["memory_id"]) if event["memory_id"] else None
            if record is not None and is_fact(record):
                shared.append(event)
                if limit is not None and len(shared) == limit:
                    return shared
        if limit is None or len(page) < limit:
            return shared
        since = page[-1]["seq"]


for _call in CALLS:
    setattr(Subject, _call.name, _memory_call(_call.name))
del _call


class SubjectMinutes(Minutes):
    """A subject's minutes calls: the project's log as ``memory.minutes`` (the minutes of
    a project are its user's, and of all its agents), but what a context window or a
    PAIR round reads of the project's *memories* is checked as the subject's reads are.

    - ``build_context(agent_id)`` shows that agent's own memory: the subject must be
      able to read the space of the project's user and that agent (another agent's,
      without a relation, answers as an agent that does not exist);
    - ``pair``/``pair_round`` log the round in the space of ``agent_id`` (checked the
      same way; none given: the subject's own agent) and retrieve the facts of the whole
      project only when the subject may read it all (its user's own, or a relation on
      the user's scope); otherwise those of that agent's space only.
    """

    def __init__(self, subject: Subject) -> None:
        super().__init__(subject.memory)
        self._subject = subject

    def _agent(self, agent_id: Any, project_id: Any) -> str | None:
        """``agent_id`` (checked; None: the subject's own agent), refused as a missing agent
        when the subject may not read its space of the project."""
        agent = validate.scope_id("agent_id", agent_id) if agent_id is not None else self._subject.ids["agent_id"]
        if agent is not None and not self._subject.may(Target(project_of(project_id), agent), False)[0]:
            raise NotFoundError("agent", agent)
        return agent

    def build_context(self, agent_id: str, task: str | None = None, *, budget_tokens: int = 4000, project_id: str | None = None,
                      now: Any = None) -> Any:
        """:meth:`memorist.capabilities.Minutes.build_context`, for an agent whose space the subject may read."""
        if agent_id is not None:
            self._agent(agent_id, project_id)
        return super().build_context(agent_id, task, budget_tokens=budget_tokens, project_id=project_id, now=now)

    def pair(self, task: str, criteria: str, output: str, revise: Callable[[str, list[dict[str, Any]]], str], threshold: float = 95,
             max_rounds: int = 5, *, project_id: str | None = None, agent_id: str | None = None, evaluator: Any = None,
             memories_per_gap: int = 5) -> Any:
        """:meth:`memorist.capabilities.Minutes.pair`, retrieving what the subject may read."""
        return super().pair(task, criteria, output, revise, threshold, max_rounds, project_id=project_id,
                            agent_id=self._agent(agent_id, project_id), evaluator=evaluator, memories_per_gap=memories_per_gap)

    def pair_round(self, task: str, criteria: str, output: str, *, threshold: float = 95, project_id: str | None = None,
                   agent_id: str | None = None, evaluator: Any = None, memories_per_gap: int = 5) -> dict[str, Any]:
        """:meth:`memorist.capabilities.Minutes.pair_round`, retrieving what the subject may read."""
        return super().pair_round(task, criteria, output, threshold=threshold, project_id=project_id,
                                  agent_id=self._agent(agent_id, project_id), evaluator=evaluator, memories_per_gap=memories_per_gap)

    def _pair_facts(self, query: str, k: int, project: str, agent: str) -> list[dict[str, Any]]:
        subject = self._subject
        if subject.may(Target(project, ""), False)[0]:
            return super()._pair_facts(query, k, project, agent)
        if not agent:
            return []
        return list(subject.search(query, user_id=project, agent_id=agent, limit=k)["results"])


class _MinutesHost:
    """What the subject's project handle (``Subject.minutes``) calls: its checked minutes."""

    def __init__(self, subject: Subject) -> None:
        self.minutes = SubjectMinutes(subject)

    def __repr__(self) -> str:
        return repr(self.minutes._subject)


class SubjectLearning:
    """``Subject.learning``: the learning calls, checked for the subject."""

    def __init__(self, subject: Subject) -> None:
        self._subject = subject

    def __dir__(self) -> list[str]:
        from .capabilities import LEARNING_CALLS

        return sorted(LEARNING_CALLS)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        from .capabilities import LEARNING_CALLS

        if name not in LEARNING_CALLS:
            raise AttributeError(name)
        subject = self._subject
        target = getattr(subject.memory.learning, name)
        signature = inspect.signature(target)

        @functools.wraps(target)
        def call(*args: Any, **kwargs: Any) -> Any:
            arguments = dict(signature.bind(*args, **kwargs).arguments)
            if "user_id" in signature.parameters:
                subject.fill(arguments)
            return _learning_call(subject, name, target, signature, arguments)

        return call


def _learning_call(subject: Subject, name: str, target: Callable[..., Any], signature: inspect.Signature, arguments: dict[str, Any]) -> Any:
    learning = subject.memory.learning
    space = _space(arguments)
    if name == "consolidate":
        space = _widened(space, arguments.get("scope"))
    if name in _SPACE_CALLS and "user_id" in signature.parameters:
        # A consolidation's dry run only reads: a viewer may preview it.
        write = _SPACE_CALLS[name] and not (name == "consolidate" and arguments.get("dry_run") is True)
        visible, writable = subject.may(space, write)
        if name == "list_playbooks":
            if not visible:
                return [p for p in target(**arguments) if subject.may(_playbook(learning, p["name"], arguments), False)[0]]
        elif write and not writable:
            if not visible and "trajectory_id" in arguments:
                raise NotFoundError("trajectory", str(arguments["trajectory_id"]))
            raise _denied_write(space, visible)
        elif not visible:
            if name == "query_trajectories":
                return []
            if name == "curate_playbook":
                _curation_denied(subject, learning, signature, arguments, space)
            if name in ("consolidate", "curate_playbook"):
                raise _denied_write(space, False)
            raise NotFoundError("trajectory", str(arguments.get("trajectory_id")))
    if name in ("start_trajectory", "execute_with_learning") and arguments.get("parent_trajectory_id") is not None:
        _readable_parent(subject, arguments["parent_trajectory_id"])
    if name in _PLAYBOOK_NAME:
        default = signature.parameters[_PLAYBOOK_NAME[name]].default
        book = _playbook(learning, arguments.get(_PLAYBOOK_NAME[name], default), arguments)
        write = _PLAYBOOK_CALLS.get(name, True)
        visible, writable = subject.may(book, write)
        if write and not writable:
            raise _denied_write(book, visible)
        if name == "delete_playbook" and subject.access.decide(subject.subjects, OWNER, book) is None:
            raise PermissionDeniedError(f"playbook {book.key[1]!r}: only an owner deletes it (an editor changes its strategies)")
        if name == "create_playbook" and _changes_visibility(subject, book, arguments.get("visibility")):
            raise PermissionDeniedError(f"playbook {book.key[1]!r}: only an owner changes its visibility (who may read it); "
                                        "an editor changes its strategies")
        if not visible:
            if name == "get_playbook":
                from .pipelines.playbooks import PlaybookRef, playbook_view

                ref = learning.ref(book.name, arguments.get("user_id"), arguments.get("agent_id"), arguments.get("scope"))
                return playbook_view(PlaybookRef(ref.scope, ref.name, ref.label), None, [], now=learning.clock(),
                                     half_life_days=learning.config.confidence_half_life_days)
            if name == "list_playbook_versions":
                return []
            raise NotFoundError("playbook version", f"{book.name} v{validate.limit(arguments.get('version'), name='version')}")
    return target(**arguments)


def _changes_visibility(subject: Subject, book: Target, visibility: Any) -> bool:
    """Whether a ``create_playbook`` by a subject that does not own ``book`` would change
    its visibility (sharing it wider or narrower is its owner's decision, as tuples are)."""
    if visibility is None or subject.access.decide(subject.subjects, OWNER, book) is not None:
        return False
    return visibility != subject.access.visibility(book)


def _curation_denied(subject: Subject, learning: Any, signature: inspect.Signature, arguments: dict[str, Any], space: Target) -> None:
    """Curation from a space whose reflections the subject may not read, into a playbook
    it may see: a permission error (the playbook is no secret to it), naming the space
    when it may write the playbook. A playbook it cannot see is left to the caller's
    not-found answer."""
    default = signature.parameters["playbook_name"].default
    book = _playbook(learning, arguments.get("playbook_name", default), arguments)
    visible, writable = subject.may(book, True)
    if visible and not writable:
        raise _denied_write(book, True)
    if writable:
        raise PermissionDeniedError(f"curate_playbook: the reflections are of {space.key[1]!r}, which this subject may not read "
                                    "(it needs viewer on that space; its editor relation on the playbook lets it update and roll it back)")


def _readable_parent(subject: Subject, parent: Any) -> None:
    """A trajectory's parent is one the subject may read; another owner's answers as a
    missing one (so its id's existence is not told, and nothing is linked under it)."""
    found = subject.memory.learning.get_trajectory(parent)
    if not subject.may(Target(found.get("user_id") or "", found.get("agent_id") or ""), False)[0]:
        raise NotFoundError("trajectory", str(parent))


def _widened(space: Target, scope: Any) -> Target:
    """The space a consolidation acts on: ``scope="user"`` is every memory of the user
    (any agent), ``"agent"`` every memory of the agent (any user), so the subject is
    checked on that space, not on the ids it names (a scope missing its id, or
    another value, is the call's own error)."""
    if scope == "user" and space.user:
        return Target(space.user, "")
    if scope == "agent" and space.agent:
        return Target("", space.agent)
    return space


def _playbook(learning: Any, name: Any, arguments: dict[str, Any]) -> Target:
    ref = learning.ref(name, arguments.get("user_id"), arguments.get("agent_id"), arguments.get("scope"))
    return Target(ref.scope.user_id, ref.scope.agent_id, ref.name, ref.label)


__all__ = ["Access", "Relations", "Subject", "SubjectLearning", "SubjectMinutes", "Target"]
