"""Memorist's calls, declared once; the surfaces that serve them; the scoped handle.

:class:`MemoryAPI` declares each public memory call: its signature, its result type
and its docstring. :class:`~memorist.Memory` implements it (its methods take their
docstrings from here, with :func:`implements`); :class:`~memorist.AsyncMemory` is
derived from it; :class:`~memorist.Client` and :class:`~memorist.AsyncClient`
implement it over HTTP. :data:`CALLS` says where each call is served: its REST
route, MCP tool and CLI command, with the parameters a surface names differently
and those it does not take (and why). ``tests/docs/test_api_conformance.py`` reads
every surface (the signatures, the service's OpenAPI document, the MCP server's
tool schemas, the CLI's parameters) against these declarations, so a parameter
added here and not everywhere fails it.

:class:`Scoped` (``memory.scope(user_id="alex")``) is a handle bound to one scope:
its calls take no ids and reach nothing outside it. The service builds one from the
caller's key, the MCP server from its configuration: the scope rule lives here.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from . import validate
from .errors import NotFoundError, ValidationError
from .model import (
    AddResult,
    DeleteAllResult,
    DeleteResult,
    EraseResult,
    EventItem,
    MemoryItem,
    MemoryList,
    RollbackResult,
    UpdateResult,
)

_F = TypeVar("_F", bound=Callable[..., Any])

#: The ids of a scope: every scoped call takes them, a :class:`Scoped` handle binds them.
SCOPE_IDS = ("user_id", "agent_id", "run_id")
#: The events the service answers when a request names no limit (a page: the next
#: starts after its last seq); ``Client.events()`` without a limit reads them all so.
EVENTS_PAGE = 1_000


class MemoryAPI(Protocol):
    """The memory calls (mem0's) and the store's lifecycle calls, as every surface serves them."""

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
        """Remember a conversation turn (a string, one message, or a list of messages).

        With ``infer=True`` facts are extracted and reconciled with what the scope
        already holds; with ``infer=False`` each non-system message is stored as is.
        ``timestamp`` is when the conversation happened (default: now). Returns
        ``{"results": [{"id", "memory", "event"}], "message": ...}``. The turn is
        written to the event log even when nothing is extracted.

        ``test=True`` (or ``metadata={"is_test": True}``) makes test memories: they
        are kept apart, never returned, counted or maintained by the normal calls,
        only by :meth:`test_memories` and ``maintain(test_only=True)``. Under the
        energy policy, ``metadata`` may say the start energy: ``"type"`` (insight,
        reminder, learning...), or ``"energy"`` and ``"tier"`` (see
        :mod:`memorist.policies.energy`).

        ``importance`` (0 to 1) is how much the new memories matter: consolidation
        never merges one at or above its threshold (0.8). Without it the extractor's
        estimate applies (the heuristic one's rules are in
        :mod:`memorist.policies.consolidation`), and 0.5 for a memory stored as is.
        """
        ...

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
        """The memories of the scope most relevant to ``query``, best first.

        Vector similarity and BM25 candidates are fused by reciprocal rank fusion,
        then the ranking policy's terms apply. Two more rankings join the fusion
        when the query asks for them: a time expression ("last week", "in May
        2023") adds the memories of that window, relative to ``reference_time``
        (when the question is asked; default now); a speaker named in the query
        adds that speaker's memories. ``filters`` restrict by metadata and fields
        (see :mod:`memorist.policies.filters`).

        Each result has a ``score`` (the fused rank score: 1.0 is first in every
        ranking; it orders, it does not measure) and a ``similarity``, the cosine of
        memory and query (1 the same meaning, about 0 unrelated), which is what
        ``threshold`` bounds: only memories at least that similar are returned, as in
        mem0.

        Only facts are searched: playbook strategies, trajectories, reflections and
        versions of the same space never come back (:func:`memorist.model.is_fact`).
        """
        ...

    def get(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> MemoryItem:
        """One memory by id.

        :class:`~memorist.errors.NotFoundError` if it is unknown, deleted, outside the
        validity window (``decay_days``: no read returns an expired memory), or not
        the caller's: pass the caller's ``user_id`` (``agent_id``, ``run_id``) and a
        memory of any other scope answers exactly like a missing one. Every by-id
        call (:meth:`update`, :meth:`delete`, :meth:`history`) takes the same ids.
        """
        ...

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int = 100,
        filters: Mapping[str, Any] | None = None,
    ) -> MemoryList:
        """The scope's memories, newest first (at most ``limit``). Playbook strategies,
        trajectories and the other learning objects are not memories of this call:
        the learning calls (``get_playbook``, ``query_trajectories``) read them."""
        ...

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
        """Replace a memory's text (re-embedded); ``metadata`` keys are merged in.
        The ids restrict it to the caller's memories, as in :meth:`get`; a memory
        :meth:`get` hides (outside the ``decay_days`` window) is not found."""
        ...

    def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> DeleteResult:
        """Delete one memory. Its history stays readable through :meth:`history`.
        The ids restrict it to the caller's memories, as in :meth:`get`; one that
        :meth:`get` hides (archived by a consolidation, outside the ``decay_days``
        window) is deleted too."""
        ...

    def delete_all(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> DeleteAllResult:
        """Delete every memory of a scope. At least one id is required: never a wipe.
        The scope's playbooks and trajectories stay (they are not memories of the fact calls)."""
        ...

    def erase(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None, dry_run: bool = False) -> EraseResult:
        """Forget a person (or an agent, or a run) of this tenant for good: everything
        the scope owns, in every capability, and every byte of its text in the store.

        Removed: its facts (deleted ones too), test memories, playbook strategies,
        playbooks and their versions, trajectories, reflections, minutes, their
        energy-tier state and vectors, their full-text index entries, and the relation
        tuples that share its memories and playbooks or grant it access. Its events
        stay in the log as tombstones, each with its shape (sequence, time, kind of
        event, whose, which memory id) but no text, metadata or payload; the erasure
        is logged too (an ``erase`` event of the tenant naming the scope and the
        counts, not the text). The store's files are then scrubbed: on SQLite the
        full-text index is merged, the file rewritten (VACUUM) and its write-ahead
        log checkpointed and truncated; on PostgreSQL the touched tables are vacuumed
        (``store`` in the result says what was done).

        At least one id is required, as in :meth:`delete_all`; ``user_id`` alone is
        the user across all agents, ``agent_id`` alone the agent across all users,
        ``run_id`` only that run's memories and events. Playbooks of the tenant or of
        everyone are not a person's and stay. ``dry_run=True`` counts what would go
        and changes nothing. Returns the counts per capability (``erased``), the
        ``vectors`` removed and the ``events`` made tombstones.
        """
        ...

    def history(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> list[EventItem]:
        """Every event of a memory, oldest first, with old and new text: the audit
        trail, so a memory :meth:`get` hides (deleted, or outside the ``decay_days``
        window) keeps its events readable. The ids restrict it to the caller's
        memories, as in :meth:`get`."""
        ...

    def events(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        since: int = 0,
        limit: int | None = None,
    ) -> list[EventItem]:
        """The event log of a scope (turns, adds, updates, deletes, retrievals), oldest
        first: the events after sequence number ``since``, at most ``limit``."""
        ...

    def rollback(
        self, event_or_run_id: int | str, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> RollbackResult:
        """Undo a merge or a reconciliation: a consolidation run (its ``run_id``, or the
        seq of its ``consolidation`` event), a reconciler UPDATE or DELETE (the seq of
        its ``update``/``delete`` event), a curation that merged or dropped strategies,
        a playbook's dedup merge, or an evaluation that dropped duplicate minutes.

        The memories it changed come back exactly as they were (text, metadata,
        counters, dates, ids) and what it made is deleted; the rollback is logged
        (``rollback`` events). :class:`~memorist.errors.ConflictError` when the
        operation was rolled back already, or when one of its memories changed again
        since (the message names that later event: roll it back first);
        :class:`~memorist.errors.NotFoundError` for an id that names no such operation
        of the caller's scope. Returns ``{"rolled_back", "op", "event_seqs",
        "restored", "retired", "rollback_seq"}``.
        """
        ...


def parameters(fn: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """``fn``'s parameters as (name, kind, default), ``self`` left out: what two
    surfaces must agree on (annotations may be spelled differently)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def implements(declared: Callable[..., Any]) -> Callable[[_F], _F]:
    """Mark ``fn`` as the implementation of the declared call: it takes the
    declaration's docstring (written once, in :class:`MemoryAPI`). The conformance
    test checks that the signatures agree."""

    def apply(fn: _F) -> _F:
        fn.__doc__ = declared.__doc__
        fn.__implements__ = declared  # type: ignore[attr-defined]
        return fn

    return apply


@dataclass(frozen=True, slots=True)
class Surface:
    """Where one surface serves a call: its ``name`` (a REST route ``"METHOD /path"``,
    an MCP tool, a CLI command such as ``"delete-all"``), the declaration's parameters
    it names otherwise (``renamed``; ``"a|b"``: served as two parameters), those it does
    not take, each with the reason (``omitted``), and its own parameters beyond the
    declaration (``extra``). Every other parameter of the declaration must be there by
    its name, and nothing else."""

    name: str
    renamed: Mapping[str, str] = field(default_factory=dict)
    omitted: Mapping[str, str] = field(default_factory=dict)
    #: The surface's own parameters beyond the declaration, each with what it is for.
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Call:
    """A declared call and the surfaces that serve it (None: not served there, on purpose).

    A memory call is declared in :class:`MemoryAPI`; a capability's call is declared by
    its method on the capability (``capability``: ``"learning"``, ``"tiers"`` or
    ``"minutes"`` or ``"relations"``, whose classes :data:`CAPABILITY_CLASSES` names)."""

    name: str
    rest: Surface | None
    mcp: Surface | None
    cli: Surface | None
    capability: str | None = None

    @property
    def qualname(self) -> str:
        return f"{self.capability}.{self.name}" if self.capability else self.name

    @property
    def declared(self) -> Callable[..., Any]:
        if self.capability is None:
            return getattr(MemoryAPI, self.name)
        module, _, cls = CAPABILITY_CLASSES[self.capability].partition(":")
        return getattr(getattr(importlib.import_module(module), cls), self.name)


#: Where each capability's calls are declared (imported when a declaration is read).
CAPABILITY_CLASSES = {
    "learning": "memorist.ace.learning:Learning",
    "tiers": "memorist.capabilities:Tiers",
    "minutes": "memorist.capabilities:Minutes",
    "relations": "memorist.relations:Relations",
}


# The MCP server acts in one scope (its configuration): no tool takes the ids.
_MCP_SCOPED = {k: "the server's scope" for k in SCOPE_IDS}

#: Every declared call and where it is served.
CALLS: tuple[Call, ...] = (
    Call(
        "add",
        rest=Surface("POST /api/memories/"),
        mcp=Surface("add_memory", renamed={"messages": "messages|text"}, omitted={
            **_MCP_SCOPED,
            "timestamp": "an agent remembers what is said now",
            "test": "an agent's memories are real ones",
        }),
        cli=Surface("add", renamed={"messages": "text"}, extra={"role": "store TEXT as one message of this role"}),
    ),
    Call(
        "search",
        rest=Surface("POST /api/memories/search/"),
        mcp=Surface("search_memories", omitted={
            **_MCP_SCOPED,
            "reference_time": "an agent asks now",
            "threshold": "an agent reads the similarity of each result instead",
        }),
        cli=Surface("search"),
    ),
    Call(
        "get",
        rest=Surface("GET /api/memories/{user_id}/{memory_id}/"),
        mcp=Surface("get_memory", omitted=_MCP_SCOPED),
        cli=Surface("get"),
    ),
    Call(
        "get_all",
        rest=Surface("GET /api/memories/"),
        mcp=Surface("list_memories", omitted={**_MCP_SCOPED, "filters": "search_memories filters"}),
        cli=Surface("list"),
    ),
    Call(
        "update",
        rest=Surface("PUT /api/memories/{id}/", renamed={"memory_id": "id"}),
        mcp=Surface("update_memory", omitted=_MCP_SCOPED),
        cli=Surface("update"),
    ),
    Call(
        "delete",
        rest=Surface("DELETE /api/memories/{id}/", renamed={"memory_id": "id"}),
        mcp=Surface("delete_memory", omitted=_MCP_SCOPED),
        cli=Surface("delete"),
    ),
    Call(
        "delete_all",
        rest=Surface("DELETE /api/memories/"),
        mcp=None,  # an agent forgets one memory at a time; wiping a scope is the application's call
        cli=Surface("delete-all", extra={"yes": "skip the confirmation"}),
    ),
    Call(
        "erase",
        rest=Surface("POST /api/erase/"),
        mcp=Surface("erase_memories", omitted=_MCP_SCOPED),
        cli=Surface("erase", extra={"yes": "skip the confirmation"}),
    ),
    Call(
        "history",
        rest=Surface("GET /api/memories/{user_id}/{memory_id}/history/"),
        mcp=Surface("memory_history", omitted=_MCP_SCOPED),
        cli=Surface("history"),
    ),
    Call(
        "events",
        rest=Surface("GET /api/memories/{user_id}/events/"),
        mcp=None,  # the log is for audits, not for an agent's turn
        cli=Surface("events"),
    ),
    Call(
        "rollback",
        rest=Surface("POST /api/memories/rollback/"),
        mcp=Surface("rollback", omitted=_MCP_SCOPED),
        cli=Surface("rollback"),
    ),
)

_LIBRARY = "a function or model object of the caller's process"
_SCOPE = {k: "the key's scope" for k in ("user_id", "agent_id", "run_id")}


def _learning(name: str, rest: Surface | None, cli: Surface | None) -> Call:
    return Call(name, rest=rest, mcp=None, cli=cli, capability="learning")


def _tiers(name: str, rest: Surface | None, cli: Surface | None, mcp: Surface | None = None) -> Call:
    return Call(name, rest=rest, mcp=mcp, cli=cli, capability="tiers")


def _minutes(name: str, rest: Surface | None, cli: Surface | None) -> Call:
    return Call(name, rest=rest, mcp=None, cli=cli, capability="minutes")


def _relations(name: str, rest: Surface, mcp: Surface, cli: Surface) -> Call:
    return Call(name, rest=rest, mcp=mcp, cli=cli, capability="relations")


# The capabilities' calls. MCP serves an agent's own memory, so only end_conversation
# and the sharing of what the agent owns are tools there; a call served nowhere but the
# library runs the caller's code.
CAPABILITY_CALLS: tuple[Call, ...] = (
    _learning("start_trajectory", Surface("POST /api/trajectories/"),
              Surface("trajectory start", renamed={"task_description": "task", "parent_trajectory_id": "parent"})),
    _learning("log_step", Surface("POST /api/trajectories/{trajectory_id}/steps/"), Surface("trajectory log")),
    _learning("complete_trajectory", Surface("POST /api/trajectories/{trajectory_id}/complete/"),
              Surface("trajectory complete", renamed={"success_score": "score"})),
    _learning("get_trajectory", Surface("GET /api/trajectories/{trajectory_id}/"), Surface("trajectory show")),
    _learning("query_trajectories",
              Surface("GET /api/trajectories/", omitted={"parent_trajectory_id": "a workflow's steps are read by their ids"}),
              Surface("trajectory list", omitted={"parent_trajectory_id": "a workflow's steps are read by their ids"})),
    _learning("prune_trajectories", None, None),  # retention runs with every completed trajectory; this is a manual pass
    _learning("reflect", Surface("POST /api/trajectories/{trajectory_id}/reflect/", omitted={"llm": _LIBRARY}),
              Surface("reflect", omitted={"llm": _LIBRARY},
                      extra={"batch": "reflect on many (batch_reflect)", "since": "with --batch", "task_type": "with --batch",
                             "min_trajectories": "with --batch"})),
    _learning("batch_reflect", Surface("POST /api/reflections/batch/", omitted={"llm": _LIBRARY}),
              Surface("reflect", omitted={"llm": _LIBRARY, "until": "the command reflects on everything since --since"},
                      extra={"batch": "selects this call", "trajectory_id": "without --batch: one trajectory"})),
    _learning("get_playbook", Surface("GET /api/playbooks/{name}/"),
              Surface("playbook get", extra={"version": "a kept version instead (get_playbook_version)"})),
    _learning("list_playbooks", Surface("GET /api/playbooks/"), Surface("playbook list")),
    _learning("create_playbook", None, None),  # over the service and the CLI a playbook is made by its first update
    _learning("update_playbook", Surface("PUT /api/playbooks/{name}/"),
              Surface("playbook update", renamed={"strategies": "file|patterns", "merge": "replace"},
                      omitted={"major": "--replace makes a major version"},
                      extra={"category": "of the --pattern strategies", "context": "of the --pattern strategies",
                             "confidence": "of the --pattern strategies", "evidence_count": "of the --pattern strategies"})),
    _learning("curate_playbook", Surface("POST /api/playbooks/{name}/curate/", renamed={"playbook_name": "name"}, omitted={"llm": _LIBRARY}),
              Surface("playbook curate", renamed={"playbook_name": "name"}, omitted={"llm": _LIBRARY})),
    _learning("delete_playbook", Surface("DELETE /api/playbooks/{name}/"),
              Surface("playbook delete", extra={"yes": "skip the confirmation"})),
    _learning("list_playbook_versions", Surface("GET /api/playbooks/{name}/versions/"), Surface("playbook versions")),
    _learning("get_playbook_version", Surface("GET /api/playbooks/{name}/versions/{version}/"), Surface("playbook get")),
    _learning("rollback_playbook", Surface("POST /api/playbooks/{name}/rollback/"), Surface("playbook rollback")),
    _learning("execute_with_learning", None, None),  # it runs the caller's task function
    Call("consolidate", capability="learning",
         rest=Surface("POST /api/memories/consolidate/", omitted={"llm": "the service's own model (MEMORIST_LLM)"}),
         mcp=Surface("consolidate_memories", omitted={"llm": "the server's own model", "user_id": "the server's scope",
                                                      "agent_id": "the server's scope", "scope": "the server's scope"}),
         cli=Surface("consolidate", renamed={"preserve_high_importance": "preserve"},
                     omitted={"llm": "the store's configured model (MEMORIST_LLM)"})),
    _tiers("maintain", Surface("POST /api/tiers/maintain/"), Surface("maintain")),
    _tiers("boost", Surface("POST /api/tiers/boost/"), Surface("boost")),
    _tiers("end_conversation", Surface("POST /api/tiers/end-conversation/"), None,  # the CLI runs `maintain` at once
           mcp=Surface("end_conversation", omitted={**{k: "the server's scope" for k in SCOPE_IDS}, "now": "an agent ends it now"})),
    _tiers("wait", None, None),  # the background worker of the caller's process
    _tiers("status", Surface("GET /api/tiers/", omitted=_SCOPE), Surface("tiers status")),
    _tiers("health", Surface("GET /api/tiers/health/", omitted=_SCOPE), Surface("tiers health")),
    _tiers("config", Surface("PUT /api/tiers/config/"), Surface("tiers config", renamed={"changes": "settings"})),
    _tiers("test_memories", Surface("GET /api/tiers/tests/"), Surface("tiers tests", extra={"delete": "deletes them (delete_test_memories)", "yes": "with --delete: skip the confirmation"})),
    _tiers("delete_test_memories", None,  # test memories are the library's and the CLI's testing aid
           Surface("tiers tests", extra={"delete": "selects this call", "limit": "without --delete: how many to list",
                                         "yes": "skip the confirmation"})),
    _minutes("record", Surface("POST /api/minutes/", renamed={"now": "timestamp"}),
             Surface("minutes record", renamed={"context_references": "refs", "memory_note": "note", "now": "at"},
                     omitted={"insights": "written through the library or the service", "run_id": "a command is no session"})),
    _minutes("recent", Surface("GET /api/minutes/"), Surface("minutes recent")),
    _minutes("by_ids", None, Surface("minutes show", omitted={"project_id": "ids name minutes of any project of the store"})),
    _minutes("get", Surface("GET /api/minutes/{minute_id}/"), None),  # `minutes show` takes several ids (by_ids)
    _minutes("history", Surface("GET /api/minutes/history/"), Surface("minutes history")),
    _minutes("search", Surface("POST /api/minutes/search/", omitted={"touch": "a search over the service counts as a retrieval"}),
             Surface("minutes search", omitted={"touch": "a search from the CLI counts as a retrieval"})),
    _minutes("reindex", Surface("POST /api/minutes/reindex/"), Surface("minutes reindex", extra={"all_projects": "every project"})),
    _minutes("build_context", Surface("POST /api/context/"), Surface("context", renamed={"budget_tokens": "budget"})),
    _minutes("evaluate", Surface("POST /api/evaluate/", omitted={"config": "the store's own settings"}),
             Surface("evaluate", omitted={"config": "the store's own settings"})),
    _minutes("pair", None, None),  # its revise callback is the caller's function
    _minutes("pair_round", Surface("POST /api/pair/", omitted={"evaluator": _LIBRARY}),
             Surface("pair", renamed={"memories_per_gap": "per_gap"}, omitted={"evaluator": _LIBRARY},
                     extra={"output_file": "the output read from a file"})),
    _relations("create", Surface("POST /api/relations/"), Surface("create_relation"), Surface("relations create")),
    _relations("delete", Surface("DELETE /api/relations/"), Surface("delete_relation"), Surface("relations delete")),
    _relations("list", Surface("GET /api/relations/"), Surface("list_relations"), Surface("relations list")),
    _relations("check", Surface("GET /api/relations/check/"), Surface("check_relation"), Surface("relations check")),
)

CALLS_BY_NAME = {c.name: c for c in CALLS}


#: The calls of each capability that act in one scope (their ids are the scope's): a
#: scoped handle's ``tiers``, ``learning`` and ``minutes`` offer these, with its ids. The
#: others act beyond one scope (the tenant's configuration, a background wait).
SCOPED_CALLS: dict[str, tuple[str, ...]] = {
    "tiers": ("maintain", "boost", "end_conversation", "status", "health", "test_memories", "delete_test_memories"),
    "learning": (
        "start_trajectory", "log_step", "complete_trajectory", "get_trajectory", "query_trajectories", "prune_trajectories",
        "reflect", "batch_reflect", "get_playbook", "list_playbooks", "create_playbook", "update_playbook", "curate_playbook",
        "delete_playbook", "list_playbook_versions", "get_playbook_version", "rollback_playbook", "execute_with_learning", "consolidate",
    ),
    "minutes": ("record", "recent", "by_ids", "get", "history", "search", "reindex", "build_context", "evaluate", "pair", "pair_round"),
}


def _bound(name: str) -> Callable[..., Any]:
    """``Scoped.<name>``: the declared call with the handle's ids filled in."""
    declared = getattr(MemoryAPI, name)
    signature = inspect.signature(declared)
    unscoped = [p for p in signature.parameters.values() if p.name not in SCOPE_IDS]

    @functools.wraps(declared)
    def call(self: Scoped, *args: Any, **kwargs: Any) -> Any:
        for key in SCOPE_IDS:
            if key in kwargs:
                raise TypeError(f"{name}() of a scoped handle takes no {key}: the handle's scope is {self.ids}")
        return getattr(self.memory, name)(*args, **kwargs, **self.ids)

    call.__signature__ = signature.replace(parameters=unscoped)  # type: ignore[attr-defined]
    return call


class Scoped:
    """A :class:`~memorist.Memory` bound to one scope: its calls take no ids and reach
    nothing outside it (a by-id call on another scope's memory answers as a missing
    memory would). Made by :meth:`Memory.scope`.

    >>> from memorist import Memory
    >>> alex = Memory(":memory:", embedder="hashing").scope(user_id="alex")
    >>> alex.add("I'm a vegetarian.")["results"][0]["memory"]
    'Is vegetarian'
    >>> [m["memory"] for m in alex.search("food")["results"]]
    ['Is vegetarian']
    """

    #: Whether the handle itself refuses arguments that reach past its scope (a
    #: consolidation's ``scope``, a playbook write's ``"tenant"``, another's parent
    #: trajectory). A service request's handle leaves that to the service, which knows
    #: what its key may reach.
    guards_reach = True

    def __init__(self, memory: Any, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> None:
        user, agent, run = validate.require_scope(user_id, agent_id, run_id)
        self.memory = memory
        self.ids: dict[str, str | None] = {"user_id": user, "agent_id": agent, "run_id": run}

    @property
    def tiers(self) -> ScopedCapability:
        """The energy tiers of this scope's memories only: ``maintain``, ``boost``,
        ``end_conversation``, ``status``, ``health``, ``test_memories`` and
        ``delete_test_memories`` (``memory.tiers``'s calls without the ids). The
        configuration is the tenant's, not a scope's: it is not here."""
        return ScopedCapability(self, "tiers", self.ids)

    @property
    def learning(self) -> ScopedCapability:
        """The learning loop of this scope (``memory.learning``'s calls without the ids):
        the trajectories, reflections and playbooks of the handle's user and agent.
        Trajectories and playbooks belong to no run: a handle with a ``run_id`` has no
        learning loop (:class:`~memorist.errors.ValidationError`)."""
        if self.ids["run_id"] is not None:
            raise ValidationError("run_id", "trajectories and playbooks belong to a user and an agent, not to a run: scope the handle by user_id or agent_id")
        return ScopedCapability(self, "learning", {"user_id": self.ids["user_id"], "agent_id": self.ids["agent_id"]})

    @property
    def minutes(self) -> ScopedMinutes:
        """The minutes of one project, the handle's user (a minute's project is its
        ``user_id``): ``memory.scope(user_id="apollo").minutes.recent(10)``. The calls
        are ``memory.minutes``'s without ``project_id``; ``get`` finds only the project's
        minutes. A handle of an agent or a run names no project
        (:class:`~memorist.errors.ValidationError`)."""
        user, agent, run = self.ids["user_id"], self.ids["agent_id"], self.ids["run_id"]
        if user is None or agent is not None or run is not None:
            raise ValidationError("user_id", "minutes belong to a project: scope the handle by user_id (the project) alone")
        from .pipelines.minutes import project_of

        project_of(user)  # not "*", which stands for every project: a handle holds one
        return ScopedMinutes(self, "minutes", {"project_id": user})

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.ids.items() if v is not None)
        return f"Scoped({shown})"


class ScopedCapability:
    """A capability of a scoped handle's Memory (``Scoped.tiers``, ``.learning``,
    ``.minutes``): each of the capability's calls that takes the scope's ids, with the
    handle's filled in and refused as arguments. A call that takes none (the tenant's
    configuration, a background wait) acts beyond one scope and is not here.

    The calls are the capability's own, read when first used: the handle works over a
    :class:`~memorist.Memory` and an :class:`~memorist.AsyncMemory` (whose calls are
    awaited) alike.
    """

    def __init__(self, handle: Scoped, capability: str, ids: Mapping[str, str | None]) -> None:
        self._handle = handle
        self._capability = capability
        self._ids = dict(ids)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in SCOPED_CALLS.get(self._capability, ()):
            raise AttributeError(f"{self._capability}.{name} is not a call of one scope")
        target = getattr(getattr(self._handle.memory, self._capability), name)
        signature = inspect.signature(target)
        missing = set(self._ids) - set(signature.parameters)
        if missing:
            raise AttributeError(f"{self._capability}.{name} takes no {', '.join(sorted(missing))}: it is not a call of one scope")
        reaches = self._handle.guards_reach and {"scope", "parent_trajectory_id"} & set(signature.parameters)
        check = functools.partial(_within_handle, name, self._ids, self._handle) if reaches else None
        return _filled(target, signature, self._ids, f"{self._capability}.{name}", self._handle, check=check)

    def __dir__(self) -> list[str]:
        return sorted(SCOPED_CALLS.get(self._capability, ()))

    def __repr__(self) -> str:
        return f"{self._handle!r}.{self._capability}"


class ScopedMinutes(ScopedCapability):
    """``Scoped.minutes``: the minutes of the handle's project."""

    def get(self, minute_id: str) -> Any:
        """One minute by id, if it is the project's (another project's answers as a
        missing one would): ``memory.minutes.get``."""
        project = self._ids["project_id"]
        found = self._handle.memory.minutes.get(minute_id)
        if inspect.isawaitable(found):  # an AsyncMemory's

            async def checked() -> Any:
                return _of_project(await found, project, minute_id)

            return checked()
        return _of_project(found, project, minute_id)


def _of_project(minute: dict[str, Any], project: str | None, minute_id: str) -> dict[str, Any]:
    if minute["project_id"] != project:
        raise NotFoundError("minute", minute_id)
    return minute


#: The learning calls that write a playbook: from a scoped handle, only its own.
_PLAYBOOK_WRITES = frozenset({"create_playbook", "update_playbook", "curate_playbook", "delete_playbook", "rollback_playbook", "execute_with_learning"})


def _within_handle(name: str, ids: Mapping[str, Any], handle: Scoped, arguments: Mapping[str, Any]) -> None:
    """Refuse arguments that reach past the handle: a ``scope`` consolidating all the
    user's memories (``"user"``) from a handle of one agent of the user, or all the
    agent's users (``"agent"``) from a handle of one user; a write to the tenant's or
    the global playbooks (everyone's; reading them stays open); a parent trajectory
    that is not the handle's (another's answers as a missing one would)."""
    parent = arguments.get("parent_trajectory_id")
    if parent is not None:
        sync = getattr(handle.memory, "memory", handle.memory)  # an AsyncMemory's Memory
        sync.learning.get_trajectory(parent, user_id=ids.get("user_id"), agent_id=ids.get("agent_id"))
    scope = arguments.get("scope")
    user, agent = ids.get("user_id"), ids.get("agent_id")
    if name == "consolidate":
        wider = (scope == "user" and agent is not None) or (scope == "agent" and user is not None)
    else:
        wider = scope in ("tenant", "global") and name in _PLAYBOOK_WRITES
    if wider:
        raise ValidationError(
            "scope", f"{scope!r} reaches past this handle's scope {handle.ids}: call memory.learning.{name} for it"
        )


def _filled(
    target: Callable[..., Any], signature: inspect.Signature, ids: Mapping[str, Any], name: str, handle: Scoped,
    *, check: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[..., Any]:
    """``target`` with ``ids`` filled in: its other parameters, bound by name (so the
    arguments after a positional id still land where they belong), passed to
    ``check`` first (which raises for arguments that reach past the handle)."""
    free = signature.replace(parameters=[p for p in signature.parameters.values() if p.name not in ids])

    @functools.wraps(target)
    def call(*args: Any, **kwargs: Any) -> Any:
        for key in ids:
            if key in kwargs:
                raise TypeError(f"{name}() of a scoped handle takes no {key}: the handle's scope is {handle.ids}")
        arguments: dict[str, Any] = {}
        for key, value in free.bind(*args, **kwargs).arguments.items():
            if free.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
                arguments.update(value)
            else:
                arguments[key] = value
        if check is not None:
            if inspect.iscoroutinefunction(target):  # an AsyncMemory's: the check reads the store off the loop
                return _checked_first(check, arguments, target, ids)
            check(arguments)
        return target(**arguments, **ids)

    call.__signature__ = free  # type: ignore[attr-defined]
    return call


async def _checked_first(check: Callable[[dict[str, Any]], None], arguments: dict[str, Any], target: Callable[..., Any],
                         ids: Mapping[str, Any]) -> Any:
    """``check`` in a worker thread, as an AsyncMemory's calls read the store, then the call."""
    await asyncio.to_thread(check, arguments)
    return await target(**arguments, **ids)


for _call in CALLS:
    setattr(Scoped, _call.name, _bound(_call.name))
del _call


__all__ = [
    "CALLS", "CALLS_BY_NAME", "CAPABILITY_CALLS", "CAPABILITY_CLASSES", "SCOPED_CALLS", "SCOPE_IDS", "Call", "MemoryAPI", "Scoped",
    "ScopedCapability", "ScopedMinutes", "Surface", "implements", "parameters",
]
