"""What every route of the service shares: the caller, the service (the tenants'
Memories, the keys, the limits, and :meth:`Service.admit`, which the middleware of
:mod:`.app` asks about each request), :class:`Reach` (what a request acts on: the one
place of the scope rule) and the error responses routes document. The routes are in
:mod:`.routes`, one module per resource.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPBearer

from .. import validate
from ..api import Scoped
from ..errors import MemoristError, NotFoundError
from ..memory import Memory
from ..pipelines.minutes import project_of
from ..policies import relations as rules
from ..relations import Subject, Target
from . import schemas as s
from .errors import ApiError, error_response, memorist_error_response, retry_after
from .keys import KeyStore
from .limits import RateLimiter, ServerLimits
from .tenants import Tenants


# the caller -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the key's tenant (``""`` on a development server), the user
    the key is bound to (None: any user of the tenant), the key's id, the rate
    limiter's bucket the request is charged to, and the agent the key is bound to
    (None: none; the key acts as its user, or is the tenant's)."""

    tenant_id: str = ""
    user_id: str | None = None
    key_id: str | None = None
    bucket: str = ""
    agent_id: str | None = None


_bearer = HTTPBearer(auto_error=False, description="A Memorist API key: `Authorization: Bearer ek_...`.")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="A Memorist API key in the `X-API-Key` header.")


async def current_caller(request: Request, _b: Annotated[Any, Depends(_bearer)], _k: Annotated[Any, Depends(_api_key)]) -> Caller:
    """The caller the middleware admitted (the security dependencies only document the keys).

    ``async``, as :func:`current_reach`: it only reads the request, and FastAPI would
    otherwise run each on a worker thread, a thread hop per dependency per request."""
    return request.scope.get("memorist.caller") or Caller()


CallerDep = Annotated[Caller, Depends(current_caller)]


# the service ------------------------------------------------------------------------------
def _presented_key(headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = headers.get("x-api-key", "").strip()
    return key or None


def is_loopback_host(host_header: str) -> bool:
    """Whether a request's ``Host`` header (``name[:port]``, ``[v6]:port``) names this
    machine: a development server answers only such requests."""
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:6060
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def development_bucket(client: str, headers: dict[str, str]) -> str:
    """The rate limiter's bucket of a development server's request: the client's
    address and the program it says it is (``User-Agent``).

    A development server has no keys, and on loopback every client has the same
    address, so the address alone would put the panel, an agent and a runaway script
    in one bucket, the script starving the others. The port would tell connections
    apart, not clients: a client escapes its bucket by reconnecting. The program's
    name tells the local tools apart (a browser's panel, the Python client, curl, an
    agent framework); it can be forged, but a development server is open to every
    local program anyway: the bucket is there for fairness between them, not as a
    defence, which keys give.
    """
    agent = headers.get("user-agent", "")[:200]
    return f"client:{client} agent:{agent}"


def too_many(why: str, wait: float) -> JSONResponse:
    """A 429 answer: ``why``, and when to retry (in the message and ``Retry-After``)."""
    return error_response(429, f"{why}; retry in {max(1, round(wait))} s", headers=retry_after(wait))


class Service:
    """What the routes share: the tenants' Memories, the keys, the limits."""

    def __init__(self, path: str, *, tenants: Tenants, keys: KeyStore, limits: ServerLimits, require_keys: bool, local_only: bool) -> None:
        self.path = path
        self.tenants = tenants
        self.keys = keys
        self.limits = limits
        self.limiter = RateLimiter(limits.rate_per_minute, limits.burst)
        # Wrong keys, per client address: past the limit that address's wrong keys are
        # refused (429) before they are counted; a valid key is never refused for it.
        failures = limits.auth_failures_per_minute
        self.guesses = RateLimiter(failures, max(1, round(failures)))
        # Erasures per caller: each rewrites the whole store (see ServerLimits).
        self.erasures = RateLimiter(limits.erasures_per_minute, 2)
        # Once keys were seen (or the server was started for them) they stay
        # required: revoking the last key must not turn the server open.
        self.require_keys = require_keys
        self.local_only = local_only

    def keys_required(self) -> bool:
        if not self.require_keys and self.keys.has_active_keys():
            self.require_keys = True
        return self.require_keys

    def admit(self, headers: dict[str, str], client: str) -> Caller | JSONResponse:
        """The caller of a request, or the error answer (401, 403, 429, 503)."""
        try:
            if self.keys_required():
                presented = _presented_key(headers)
                if presented is None:
                    return error_response(401, "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
                record = self.keys.authenticate(presented)
                if record is None:
                    # Wrong keys are limited per address; a valid key never is: behind
                    # a proxy every client shares one address, and one client sending a
                    # revoked key must not lock the others out. (A key's secret is 256
                    # random bits: no guess finds one, the limit bounds their cost.)
                    guessing = self.guesses.wait(f"address:{client}")
                    if guessing is not None:
                        return too_many(f"too many requests with a wrong API key from this address "
                                        f"({self.limits.auth_failures_per_minute:g} per minute)", guessing)
                    self.guesses.acquire(f"address:{client}")
                    return error_response(401, "the API key is not valid (unknown, malformed or revoked)")
                bucket = f"key:{record.key_id}"
                caller = Caller(record.tenant_id, record.user_id, record.key_id, bucket, record.agent_id)
            else:
                if self.local_only and not is_loopback_host(headers.get("host", "")):
                    return error_response(
                        403, "this development server (no API keys) answers only requests addressed to localhost"
                    )
                bucket = development_bucket(client, headers)
                caller = Caller(bucket=bucket)
            wait = self.limiter.acquire(bucket)
            if wait is not None:
                rate = self.limits.rate_per_minute
                return too_many(f"rate limit exceeded: {rate:g} requests per minute, bursts of {self.limits.burst}", wait)
            if self.keys.usage_due():
                self.keys.flush_usage()
            return caller
        except MemoristError as exc:
            return memorist_error_response(exc)

    def memory(self, caller: Caller) -> Memory:
        return self.tenants.get(caller.tenant_id)

    def health(self) -> tuple[int, dict[str, Any]]:
        """``/healthz``'s status code and body: 503 once the store is known to be damaged,
        or while it does not answer (its database server down)."""
        damage = self.tenants.damage
        if damage is not None:
            return 503, {"status": "damaged", "store": {"healthy": False, "problem": damage}}
        down = self.tenants.unreachable()
        if down is not None:
            return 503, {"status": "unavailable", "store": {"healthy": False, "problem": down}}
        return 200, {"status": "ok", "store": {"healthy": True}}

    def close(self) -> None:
        self.tenants.close()
        self.keys.close()


def store_damage(path: str) -> str | None:
    """What is wrong with a SQLite store's pages (SQLite's quick_check and the store's
    own invariants), or None: healthy, or not a SQLite file. Read-only."""
    from ..store import sqlite_path, store_kind
    from ..store.sqlite.check import check_store

    if store_kind(path) != "sqlite" or str(sqlite_path(path)) == ":memory:" or not os.path.isfile(sqlite_path(path)):
        return None
    report = check_store(str(sqlite_path(path)), quick=True)
    if report["healthy"]:
        return None
    shown = "; ".join(p["problem"] for p in report["problems"][:3])
    if all(p["check"] in ("fts", "vectors") for p in report["problems"]):
        # Its search indexes only: rebuilt from the memories, no backup needed.
        return f"the store's search indexes are damaged ({shown}): stop the service and repair them as said, then start it again"
    return f"the store is damaged ({shown}): run `memorist check`, restore the last backup"


def has_key_table(path: str) -> bool:
    """Whether a SQLite store holds the API keys' table (read-only; True for other stores)."""
    import sqlite3

    from ..store import sqlite_path, store_kind

    if store_kind(path) != "sqlite":
        return True
    try:
        with sqlite3.connect(f"file:{sqlite_path(path)}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'api_keys'").fetchone() is not None
    except sqlite3.Error:
        return False


def request_service(request: Request) -> Service:
    """The service the app runs (its tenants' Memories, keys and limits)."""
    return request.app.state.service


# what a request acts on -------------------------------------------------------------------
class Reach:
    """What a request acts on: the caller's tenant Memory, narrowed to the scope the
    request names under the one scope rule of the service.

    The rule: a tenant key acts on any user of its tenant; a key bound to a user acts as
    that user only. A request of a bound key naming no user acts as its user; naming
    another answers 404, exactly as a user (or the memory, trajectory or project named
    under it) that does not exist would. A key bound to an agent (alone or with a user)
    acts as that subject the same way: a request naming no agent (no user) acts as its
    agent (its user); its own space is its, another's is 404 unless a relation lets it
    read, and then every call is checked as that subject (a viewer's write: 403).

    Each method answers with what the route calls: a :class:`~memorist.api.Scoped`
    handle when ids remain, so the call cannot leave that scope; the tenant's Memory
    itself when none does, which only a tenant key reaches: a by-id call across the
    tenant, a tier run over the whole tenant, or a call that refuses to act without a
    scope (``add``, ``search``), exactly as Memory does.
    """

    def __init__(self, service: Service, caller: Caller) -> None:
        self.service = service
        self.caller = caller
        self._memory: Memory | None = None

    def erasure_refused(self) -> JSONResponse | None:
        """The 429 answer when the caller already started its ``erasures_per_minute``
        erasures of the minute (each rewrites the whole store); None: it may start one."""
        wait = self.service.erasures.acquire(self.caller.bucket)
        if wait is None:
            return None
        limit = self.service.limits.erasures_per_minute
        return too_many(f"too many erasures: {limit:g} per minute per API key, each rewrites the whole store", wait)

    @property
    def memory(self) -> Memory:
        """The caller's tenant's Memory (opened on first use, after the request's checks)."""
        if self._memory is None:
            self._memory = self.service.memory(self.caller)
        return self._memory

    @property
    def bound_user(self) -> str | None:
        """The user the key is bound to (None: a tenant key, any user of the tenant)."""
        return self.caller.user_id

    @property
    def bound_agent(self) -> str | None:
        """The agent the key is bound to (None: none)."""
        return self.caller.agent_id

    def scope(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
              checked: bool = False) -> Scoped | Memory:
        """For a call in the scope the ids name (a bound key naming another user: 404
        user, unless a relation lets its user read that scope). ``checked``: the call's
        arguments may reach past the ids (a consolidation's ``scope``, a trajectory's parent), so a bound key's
        call is checked as its subject even in its own space."""
        if self.caller.agent_id is not None:
            handle = self._as_agent(*self._agent_ids(user_id, agent_id), run_id, None, None)
        else:
            handle = self._handle(self._user(user_id, "user", share=self._sees_space(agent_id)), agent_id, run_id)
        subject = self.subject() if checked else None
        if subject is not None and isinstance(handle, _RequestScope) and not isinstance(handle, _SharedScope):
            return _SharedScope(subject, handle.ids["user_id"], handle.ids["agent_id"], handle.ids["run_id"])
        return handle

    def by_id(self, what: str, ident: str, *, user_id: str | None = None, agent_id: str | None = None,
              run_id: str | None = None) -> Scoped | Memory:
        """For a call on one ``what`` (a memory, a trajectory) by its id ``ident``: a bound
        key naming it under another user finds nothing (404 ``what``; a malformed memory
        id is 422 first, as Memory's by-id calls check it before anything), unless a
        relation lets its user read that scope."""
        if what == "memory":
            ident = validate.memory_id(ident)
        if self.caller.agent_id is not None:
            return self._as_agent(*self._agent_ids(user_id, agent_id), run_id, what, ident)
        return self._handle(self._user(user_id, what, ident, share=self._sees_space(agent_id)), agent_id, run_id)

    def playbook(self, name: str, *, user_id: str | None = None, agent_id: str | None = None, scope: str | None = None) -> Scoped | Memory:
        """For a call on the playbook ``name`` of the scope the ids name: a bound key
        naming another user's reaches it when a relation or the playbook's visibility
        lets its user read it (404 user otherwise)."""
        if self.caller.agent_id is not None:
            # A user's playbook belongs to no agent: the key's agent is not filled in for it.
            user, agent = self._agent_ids(user_id, agent_id) if scope != "user" else (user_id or self.caller.user_id, agent_id)
            ref = self.memory.learning.ref(name, user, agent, scope)
            if ref.label in ("tenant", "global"):
                return self._everyones(user, agent)
            return self._as_agent(user, agent, None, None, None,
                                  target=Target(ref.scope.user_id, ref.scope.agent_id, ref.name, ref.label))

        if scope in ("tenant", "global") and self.caller.user_id is not None:
            return self._everyones(self.caller.user_id, agent_id)

        def sees(other: str) -> bool:
            subject = self.subject()
            assert subject is not None
            ref = self.memory.learning.ref(name, other, agent_id, scope)
            book = Target(ref.scope.user_id, ref.scope.agent_id, ref.name, ref.label)
            return subject.may(book, False)[0] or self._sees_space(agent_id)(other)

        return self._handle(self._user(user_id, "user", share=sees), agent_id, None)

    def _everyones(self, user: str | None, agent: str | None) -> Scoped:
        """The tenant's or the global playbook, for a bound key: read by every subject,
        written by its editors, deleted by its owners, as the subject's calls check."""
        subject = self.subject()
        assert subject is not None
        return _SharedScope(subject, user, agent, None)

    def subject(self) -> Subject | None:
        """The subject a key bound to a user and/or an agent acts as (None: a tenant key,
        the tenant's administrator)."""
        user, agent = self.caller.user_id, self.caller.agent_id
        if user is None and agent is None:
            return None
        return self.memory.as_subject(user_id=user, agent_id=agent)

    def _agent_ids(self, user_id: str | None, agent_id: str | None) -> tuple[str | None, str | None]:
        """The ids a request of an agent-bound key acts on: those it names, else the key's."""
        return (self.caller.user_id if user_id is None else user_id, self.caller.agent_id if agent_id is None else agent_id)

    def _as_agent(self, user: str | None, agent: str | None, run_id: str | None, what: str | None,
                  ident: str | None, *, target: Target | None = None) -> Scoped | Memory:
        """The scope rule of a key bound to an agent (and maybe a user), for the space
        of ``user`` and ``agent`` (or the playbook ``target``): its own space (each id
        of the key is the space's) is its own; another's is reached when a relation
        lets the subject read it, through a handle whose every call is checked as the
        subject; otherwise the answer is 404, as for a missing ``what`` (``ident``),
        or the other agent (user) named."""
        subject = self.subject()
        assert subject is not None
        if target is None:
            target = Target(user or "", agent or "")
        if rules.owns(subject.subjects, target.user, target.agent):
            return _RequestScope(self.memory, user, agent, run_id)
        if subject.may(target, False)[0]:
            return _SharedScope(subject, user, agent, run_id)
        if what is not None and ident is not None:
            raise NotFoundError(what, ident)
        if agent is not None and agent != self.caller.agent_id:
            raise NotFoundError("agent", agent)
        raise NotFoundError("user", str(user))

    def _sees_space(self, agent_id: str | None) -> Callable[[str], bool]:
        def sees(other: str) -> bool:
            subject = self.subject()
            assert subject is not None
            return subject.may(Target(other, agent_id or ""), False)[0]

        return sees

    def project(self, project_id: str | None) -> Scoped | Memory | _SubjectProject:
        """For a call on a project's minutes: a minute's project is Memorist's user (a
        bound key naming another project: 404 project). ``.minutes`` of the answer is
        that project's; a tenant key naming none acts on the default project. A key
        bound to an agent alone has no project of its own (404); with a user, its
        user's, whose context windows and PAIR rounds read only what its subject may
        (another agent's memories: 404 agent unless a relation lets it read them).
        ``"*"`` is no project, named or bound (422): a handle of it would reindex every
        project of the tenant (:data:`memorist.pipelines.minutes.ALL_PROJECTS`)."""
        if self.caller.agent_id is not None:
            if self.caller.user_id is None:
                raise NotFoundError("project", project_id or "default")
            project_of(self._user(project_id, "project"))
            subject = self.subject()
            assert subject is not None
            return _SubjectProject(subject)
        user = self._user(project_id, "project")
        if user is not None:
            project_of(user)
        return self._handle(user, None, None)

    def tenant(self, what: str, *, field: str | None = None) -> Memory:
        """For a change of the tenant's own (its configuration, its shared playbooks):
        a key bound to a user or an agent cannot make it (403)."""
        if self.caller.user_id is not None or self.caller.agent_id is not None:
            kind = "a user" if self.caller.agent_id is None else "an agent"
            raise ApiError(403, f"a key bound to {kind} cannot change {what}", field=field)
        return self.memory

    def _user(self, user_id: str | None, what: str, ident: str | None = None, *,
              share: Callable[[str], bool] | None = None) -> str | None:
        """The scope rule: the user a request acts as, the one it names or the key's
        bound user; a bound key naming another finds no ``what`` (``ident``, default
        the user named) unless ``share`` says a relation lets it see that user's."""
        bound = self.caller.user_id
        if bound is None:
            return user_id
        if user_id is not None and user_id != bound:
            if share is None or not isinstance(user_id, str) or not share(user_id):
                raise NotFoundError(what, user_id if ident is None else ident)
            return user_id
        return bound

    def _handle(self, user_id: str | None, agent_id: str | None, run_id: str | None) -> Scoped | Memory:
        if user_id is None and agent_id is None and run_id is None:
            return self.memory
        bound = self.caller.user_id
        if bound is not None and user_id != bound:
            # Another user's, shared with this key's user: every call is checked against
            # the relations as that subject (a viewer cannot write).
            return _SharedScope(self.memory.as_subject(user_id=bound), user_id, agent_id, run_id)
        return _RequestScope(self.memory, user_id, agent_id, run_id)


class _RequestScope(Scoped):
    """The scoped handle of one request. Its ids are checked by its calls, each in the
    order the call checks its arguments, rather than when it is made (as
    ``memory.scope(...)`` does): a request naming a malformed id and another bad
    argument is answered exactly as the call itself would answer it, the field it names
    included (``project_id`` for a minute's project, not ``user_id``)."""

    # What a request may reach was decided by the Reach that made the handle: all of
    # the tenant for a tenant's key, what its subject's relations allow for a bound key.
    guards_reach = False

    def __init__(self, memory: Memory, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
        # Not Scoped.__init__, which checks the ids now; at least one is given (Reach._handle).
        self.memory = memory
        self.ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


class _SharedScope(_RequestScope):
    """The handle of a request on another user's scope that a relation shares with the
    key's user: its calls act as that subject. Energy tiers and minutes are not shared."""

    def __init__(self, subject: Subject, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
        super().__init__(subject, user_id, agent_id, run_id)  # type: ignore[arg-type]

    @property
    def tiers(self) -> Any:
        if self.ids["user_id"] is None:  # an agent's space, shared with an agent-bound key
            raise NotFoundError("agent", str(self.ids["agent_id"]))
        raise NotFoundError("user", str(self.ids["user_id"]))

    @property
    def minutes(self) -> Any:
        raise NotFoundError("project", str(self.ids["user_id"]))


class _SubjectProject:
    """The project of a key bound to an agent and a user: its user's minutes, read as
    that subject (:attr:`memorist.relations.Subject.minutes`)."""

    def __init__(self, subject: Subject) -> None:
        self.subject = subject

    @property
    def minutes(self) -> Any:
        return self.subject.minutes


async def current_reach(request: Request, caller: CallerDep) -> Reach:
    """What the request acts on (see :class:`Reach`; it opens nothing until used)."""
    return Reach(request_service(request), caller)


ReachDep = Annotated[Reach, Depends(current_reach)]


#: The error responses every ``/api/`` route documents.
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": s.ErrorResponse, "description": "No valid API key."},
    404: {"model": s.ErrorResponse, "description": "Not found (or outside the key's tenant and user)."},
    413: {"model": s.ErrorResponse, "description": "The body or the number of messages is over the limit."},
    422: {"model": s.ErrorResponse, "description": "Invalid input; `field` names it."},
    429: {"model": s.ErrorResponse, "description": "Rate limited; see `Retry-After`."},
    503: {"model": s.ErrorResponse, "description": "The store or a model provider is unavailable."},
}
