"""The learning loop on a :class:`~memorist.Memory`: trajectories, reflection,
curation, versioned playbooks and ``execute_with_learning``.

:class:`Learning` is what the Memory's learning calls delegate to
(``Memory.start_trajectory``, ``Memory.reflect``, ``Memory.get_playbook``, ...);
:attr:`memorist.Memory.learning` is the instance. It checks arguments, resolves who a
call acts for, and drives the pipelines (:mod:`memorist.pipelines.trajectories`,
:mod:`memorist.pipelines.playbooks`, :mod:`memorist.pipelines.curation`) and the
reflector role.

Who a call acts for: ``user_id`` and/or ``agent_id``, as for facts; with neither,
the agent ``LearningConfig.default_agent_id`` (``"default"``), so examples written
for a connection bound to one agent read the same. A playbook
call may name a ``scope``: ``"agent"``, ``"user"`` (the space of those ids),
``"tenant"`` (the tenant's shared playbooks) or ``"global"`` (every tenant's; only
the default tenant writes them). By-id calls (a trajectory, a reflection) answer
:class:`~memorist.errors.NotFoundError` outside the caller's tenant and ids, exactly
as for an id that does not exist.

>>> from memorist import Memory
>>> m = Memory(":memory:", embedder="hashing")
>>> def task(run):
...     run.decision("Validate the input before calling the API")
...     return "ok", "success"
>>> result, tid = m.learning.execute_with_learning(task, "Call the API", task_type="api_call", playbook_name="api_client")
>>> [s["pattern"] for s in m.learning.get_playbook("api_client")["strategies"]["helpful"]]
['Validate the input before calling the API']
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .. import validate
from ..errors import CancelledCallError, ConfigurationError, NotFoundError, ValidationError
from ..model import (
    LEARNING_KINDS,
    MINUTE_KINDS,
    ConsolidationReport,
    CurationResult,
    DeletedPlaybook,
    Kind,
    MemoryRecord,
    PlaybookItem,
    ReflectionItem,
    Scope,
    Status,
    TrajectoryItem,
    VersionItem,
)
from ..pipelines.curation import Candidate, Curation
from ..pipelines.playbooks import (
    RUN_PLAYBOOKS,
    SCOPES,
    PlaybookRef,
    PlaybookStore,
    playbook_view,
    version_view,
)
from ..pipelines.trajectories import (
    DEFAULT_SCORES,
    RUN_REFLECTIONS,
    RUNNING,
    Trajectories,
    reflection_view,
    trajectory_view,
)
from ..policies.consolidation import IMPORTANCE_THRESHOLD, MIN_IMPORTANCE, default_similarity
from ..policies.learning import (
    HARMFUL,
    HELPFUL,
    NEUTRAL,
    STATUSES,
    LearningConfig,
    category_of,
    improvement,
)
from ..policies.playbook import curation_key
from ..reserved import playbook_name
from ..roles.learning import Insights, Reflector, Trajectory
from ..roles.reflector import HeuristicReflector
from ..store.base import ScopeFilter
from ..work import charge, metered

logger = logging.getLogger("memorist.ace.learning")

_ACTIVE: contextvars.ContextVar[LearningRun | None] = contextvars.ContextVar("memorist_learning_run", default=None)
_LIST_CATEGORY = {
    "successful_patterns": HELPFUL,
    "recommendations": HELPFUL,
    "failure_patterns": HARMFUL,
    "neutral_observations": NEUTRAL,
}
_SCORES_KEPT = 10
#: The most evidence a strategy given to ``update_playbook`` may declare (counts are
#: summed into whole-number columns: a larger one overflowed them).
MAX_EVIDENCE_COUNT = 1_000_000_000
_NAME_CHARS = 256
_TYPE_CHARS = 64


# argument checks ---------------------------------------------------------------------------------
#: The most strategies one update_playbook call takes, and the most patterns one
#: curate_playbook call curates (more when a playbook may hold more): curating compares
#: each with every strategy of the playbook, and merging every strategy with every other.
MAX_STRATEGIES_PER_CALL = 500
#: The most reflection ids one curate_playbook call takes.
MAX_REFLECTIONS_PER_CALL = 100
#: A batch reflection reads the newest this many trajectories of each task type: one
#: prompt holds them all (each shown in at most ``prompts.trajectory.BATCH_STEP_CHARS``).
BATCH_TRAJECTORIES = 50


def _name(value: Any, field: str = "name") -> str:
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a non-empty string, got {validate.show(value)}")
    name = validate.scope_id(field, value)
    assert name is not None
    return name


def _short(value: Any, field: str, *, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(field, f"must be a non-empty string, got {validate.show(value)}")
    if len(value) > _TYPE_CHARS:
        raise ValidationError(field, f"is {len(value)} characters; the limit is {_TYPE_CHARS}")
    validate.unicode(field, value)
    return value.strip()


def _when(value: Any, field: str) -> float | None:
    return validate.timestamp(value, field=field)


def _score(value: Any, field: str = "success_score") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValidationError(field, f"must be a number from 0 to 1, got {validate.show(value)}")
    return float(value)


def _status(value: Any, accepted: tuple[str, ...] = STATUSES) -> str:
    """A trajectory's status, one of ``accepted`` (a completion's outcome by default)."""
    if not isinstance(value, str) or value.strip().lower() not in accepted:
        raise ValidationError("status", f"must be one of {', '.join(accepted)}, got {validate.show(value)}")
    return value.strip().lower()


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, f"must be True or False, got {validate.show(value)}")
    return value


def _describe(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    first = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    return first or getattr(fn, "__name__", "task").replace("_", " ")


def _wants_run(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` takes a positional argument (the :class:`LearningRun`)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            return True
        if p.kind is p.VAR_POSITIONAL:
            return False
    return False


def _is_async(fn: Callable[..., Any]) -> bool:
    call = type(fn).__call__ if not inspect.isroutine(fn) and callable(fn) else None
    return inspect.iscoroutinefunction(fn) or (call is not None and inspect.iscoroutinefunction(call))


def _cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` stopped a run rather than the task failing: a cancellation
    (``asyncio.CancelledError``, a timeout's), ``KeyboardInterrupt``, ``SystemExit``,
    a call given up by its caller (:class:`~memorist.errors.CancelledCallError`)."""
    return not isinstance(exc, Exception) or isinstance(exc, CancelledCallError)


def _discard(awaitable: Any) -> None:
    """Close a coroutine nobody will await (no "never awaited" warning)."""
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


def _outcome(value: Any) -> tuple[Any, str, Any]:
    """The learning loop's task protocol: ``(result, status)`` or ``(result, status, score)``;
    anything else is a result of a successful run. The score is returned as given
    (checked by the caller, once the result is safe)."""
    if isinstance(value, tuple) and len(value) in (2, 3) and isinstance(value[1], str) and value[1].strip().lower() in STATUSES:
        return value[0], value[1].strip().lower(), value[2] if len(value) == 3 else None
    return value, "success", None


def _curation_key(ref: PlaybookRef) -> str:
    """How a reflection remembers the playbooks it was curated into (never twice)."""
    return curation_key(ref.label, ref.scope.tenant_id, ref.scope.user_id, ref.scope.agent_id, ref.name)


class LearningRun:
    """The open trajectory of :meth:`Learning.execute_with_learning`, handed to a task
    that takes an argument (and returned by :meth:`Learning.current_run` inside it).

    ``playbook`` is the playbook loaded for the task (``get_playbook``'s dict);
    :attr:`helpful` and :attr:`harmful` its ✓ and ✗ patterns, best first. Log steps
    with :meth:`decision`, :meth:`action`, :meth:`observation` (or :meth:`log`);
    put ``tokens``, ``cost_usd``... in :attr:`metrics`.
    """

    def __init__(self, learning: Learning, trajectory_id: str, playbook: dict[str, Any], owner: Scope) -> None:
        self.learning = learning
        self.trajectory_id = trajectory_id
        self.playbook = playbook
        self.owner = owner
        self.metrics: dict[str, Any] = {}

    @property
    def helpful(self) -> list[str]:
        return [s["pattern"] for s in self.playbook["strategies"][HELPFUL]]

    @property
    def harmful(self) -> list[str]:
        return [s["pattern"] for s in self.playbook["strategies"][HARMFUL]]

    def log(self, step_type: str, description: str, metadata: dict[str, Any] | None = None) -> None:
        self.learning.log_step(self.trajectory_id, step_type, description, metadata,
                               user_id=self.owner.user_id or None, agent_id=self.owner.agent_id or None)

    def decision(self, description: str, **metadata: Any) -> None:
        self.log("decision", description, metadata or None)

    def action(self, description: str, **metadata: Any) -> None:
        self.log("action", description, metadata or None)

    def observation(self, description: str, **metadata: Any) -> None:
        self.log("observation", description, metadata or None)

    def __repr__(self) -> str:
        return f"LearningRun(trajectory_id={self.trajectory_id!r}, playbook={self.playbook['name']!r})"


class Learning:
    """The learning calls of one :class:`~memorist.Memory` (``memory.learning``):
    trajectories, reflection, curation and versioned playbooks (see the module).

    ``config``: :class:`~memorist.policies.learning.LearningConfig` (None: the
    defaults and the environment). ``clock``: the time source (seconds since
    the epoch), replaceable for tests and simulations; ``rng`` draws the trace
    sampling.
    """

    def __init__(self, memory: Any, config: LearningConfig | None = None, *, clock: Callable[[], float] = time.time, rng: Any = None) -> None:
        self.memory = memory
        self.config = (config or LearningConfig()).resolved()
        self.clock = clock
        store, embedder = memory.store, memory.embedder
        self.playbooks = PlaybookStore(store, embedder, retention=self.config.versions, half_life_days=self.config.confidence_half_life_days)
        self.curation = Curation(self.playbooks, self.config)
        self.trajectories = Trajectories(store, embedder, self.config, rng=rng)
        self._reflector: Reflector | None = None

    @property
    def tenant_id(self) -> str:
        return str(self.memory.config.tenant_id)

    # who a call acts for --------------------------------------------------------------------------
    def _ids(self, user_id: Any, agent_id: Any) -> tuple[str | None, str | None]:
        return validate.scope_id("user_id", user_id), validate.scope_id("agent_id", agent_id)

    def owner(self, user_id: Any = None, agent_id: Any = None) -> Scope:
        """The space a trajectory or reflection of these ids lives in."""
        user, agent = self._ids(user_id, agent_id)
        if user is None and agent is None:
            agent = self.config.default_agent_id
        return Scope(self.tenant_id, user or "", agent or "")

    def ref(self, name: Any, user_id: Any = None, agent_id: Any = None, scope: Any = None, *, writing: bool = False,
            field: str = "name") -> PlaybookRef:
        """The playbook ``name`` of the scope these arguments name (the per-learner
        playbook's former name reads as its current one); ``field``: the argument that
        gave the name, as an error names it."""
        name = playbook_name(_name(name, field))
        user, agent = self._ids(user_id, agent_id)
        if scope is not None and scope not in SCOPES:
            raise ValidationError("scope", f"must be one of {', '.join(SCOPES)}, got {validate.show(scope)}")
        if scope is None:
            scope = "agent" if agent or not user else "user"
        if scope == "agent":
            space = Scope(self.tenant_id, user or "", agent or self.config.default_agent_id)
        elif scope == "user":
            if user is None:
                raise ValidationError("user_id", "a user playbook needs the user's id")
            if agent is not None:
                raise ValidationError("agent_id", "a user playbook belongs to no agent; use scope 'agent' for the agent's playbook of this user")
            space = Scope(self.tenant_id, user, "")
        elif scope == "tenant":
            space = Scope(self.tenant_id, "", "")
        else:
            if writing and self.tenant_id:
                raise ValidationError("scope", "global playbooks are written by the default tenant only; this Memory serves tenant " + repr(self.tenant_id))
            space = Scope("", "", "")
        return PlaybookRef(space, name, scope)

    def _owned(self, record: MemoryRecord | None, kind: Kind, user_id: Any, agent_id: Any) -> bool:
        user, agent = self._ids(user_id, agent_id)
        return (
            record is not None
            and record.kind is kind
            and record.status is Status.ACTIVE
            and record.scope.tenant_id == self.tenant_id
            and (user is None or record.scope.user_id == user)
            and (agent is None or record.scope.agent_id == agent)
        )

    def _trajectory(self, trajectory_id: Any, user_id: Any, agent_id: Any) -> MemoryRecord:
        tid = validate.memory_id(trajectory_id) if isinstance(trajectory_id, str) else None
        if tid is None:
            raise ValidationError("trajectory_id", f"must be a non-empty string, got {validate.show(trajectory_id)}")
        record = self.memory.store.get(tid)
        if not self._owned(record, Kind.TRAJECTORY, user_id, agent_id):
            raise NotFoundError("trajectory", tid)
        return record

    # trajectories ---------------------------------------------------------------------------------
    def start_trajectory(
        self,
        task_description: str,
        task_type: str | None = None,
        parent_trajectory_id: str | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        _extra: Mapping[str, Any] | None = None,
    ) -> str:
        """Start recording a task execution; returns its id. Its steps follow
        (:meth:`log_step`), then its outcome (:meth:`complete_trajectory`).
        ``parent_trajectory_id`` makes it a step of a workflow."""
        task = validate.text("task_description", task_description, max_chars=self.memory.config.max_message_chars)
        task_type = _short(task_type, "task_type")
        owner = self.owner(user_id, agent_id)
        parent = None
        if parent_trajectory_id is not None:
            parent = self._trajectory(parent_trajectory_id, None, None).id
        record = self.trajectories.start(owner, task, task_type=task_type, parent=parent, now=self.clock(), extra=_extra)
        return record.id

    def log_step(
        self,
        trajectory_id: str,
        step_type: str,
        description: str,
        metadata: dict[str, Any] | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        """Append a step (``step_type``: a decision, an action, an observation...) to
        the running trajectory ``trajectory_id``."""
        record = self._trajectory(trajectory_id, user_id, agent_id)
        step_type = _short(step_type, "step_type", optional=False)
        description = validate.text("description", description, max_chars=self.memory.config.max_message_chars)
        meta = validate.metadata(metadata, max_depth=self.memory.config.max_metadata_depth, max_bytes=self.memory.config.max_metadata_bytes)
        try:
            self.trajectories.log_step(record, {"type": step_type, "description": description, "metadata": meta})
        except LookupError:
            raise NotFoundError("trajectory", record.id) from None
        except RuntimeError as exc:
            raise ValidationError("trajectory_id", str(exc)) from None

    def complete_trajectory(
        self,
        trajectory_id: str,
        status: str,
        success_score: float | None = None,
        error_message: str | None = None,
        metrics: dict[str, Any] | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        _extra: Mapping[str, Any] | None = None,
    ) -> TrajectoryItem:
        """Close a trajectory with its outcome: ``status`` ``"success"``,
        ``"failure"`` or ``"partial"``, a ``success_score`` from 0 to 1 (default: 1,
        0.5 or 0 by status), the error and metrics. Returns the trajectory."""
        record = self._trajectory(trajectory_id, user_id, agent_id)
        status = _status(status)
        score = _score(success_score)
        if score is None:
            score = DEFAULT_SCORES[status]
        if error_message is not None:
            error_message = validate.text("error_message", error_message, max_chars=self.memory.config.max_message_chars)
        metrics = validate.metadata(metrics, field="metrics", max_depth=self.memory.config.max_metadata_depth, max_bytes=self.memory.config.max_metadata_bytes)
        for key in ("tokens", "tokens_used", "duration_ms", "cost_usd", "cost"):
            value = metrics.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0):
                raise ValidationError(f"metrics.{key}", f"must be a number >= 0, got {validate.show(value)}")
        try:
            done = self.trajectories.complete(record, status=status, score=score, error=error_message, metrics=metrics, now=self.clock(), extra=_extra)
        except LookupError:
            raise NotFoundError("trajectory", record.id) from None
        except RuntimeError as exc:
            raise ValidationError("trajectory_id", str(exc)) from None
        return trajectory_view(done)

    def get_trajectory(self, trajectory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> TrajectoryItem:
        """A trajectory with its steps (:class:`~memorist.errors.NotFoundError`
        outside the caller's ids)."""
        record = self._trajectory(trajectory_id, user_id, agent_id)
        return trajectory_view(record, self.trajectories.steps(record))

    def query_trajectories(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        status: str | None = None,
        task_type: str | None = None,
        since: Any = None,
        until: Any = None,
        parent_trajectory_id: str | None = None,
        limit: int = 100,
    ) -> list[TrajectoryItem]:
        """Trajectories by agent, user, status, task type and time
        (``since``/``until``: ISO-8601 or epoch seconds), newest first, at most ``limit``."""
        user, agent = self._ids(user_id, agent_id)
        if user is None and agent is None:
            agent = self.config.default_agent_id
        if status is not None:  # a running trajectory's too
            status = _status(status, (*STATUSES, RUNNING))
        rows = self.trajectories.query(
            ScopeFilter(self.tenant_id, user, agent),
            status=status,
            task_type=_short(task_type, "task_type"),
            since=_when(since, "since"),
            until=_when(until, "until"),
            parent=validate.scope_id("parent_trajectory_id", parent_trajectory_id),
            limit=validate.limit(limit),
        )
        return [trajectory_view(r) for r in rows]

    def prune_trajectories(self, *, user_id: str | None = None, agent_id: str | None = None) -> dict[str, int]:
        """Apply the retention rules of the configuration to the caller's
        trajectories now (they also run with every completed trajectory); returns the counts."""
        user, agent = self._ids(user_id, agent_id)
        return self.trajectories.prune(ScopeFilter(self.tenant_id, user, agent), now=self.clock())

    # reflection ----------------------------------------------------------------------------------
    @property
    def reflector(self) -> Reflector:
        """The reflector: an LLM one when the Memory has a model (or the learning
        roles are switched to one, ``ACE_CURATOR_USE_LLM``), the heuristic otherwise."""
        if self._reflector is None:
            self._reflector = self._make_reflector(None)
        return self._reflector

    @reflector.setter
    def reflector(self, role: Reflector) -> None:
        if getattr(role, "fallback", None) is None and not isinstance(role, HeuristicReflector):
            role.fallback = HeuristicReflector()
        self._reflector = role

    def _make_reflector(self, llm: Any) -> Reflector:
        model = None
        if llm is not None:
            from ..llm import resolve_llm

            model = resolve_llm(llm)
        else:
            model = getattr(self.memory, "llm", None)
            if model is None:
                from ..roles.llm import curator_uses_llm, learning_llm

                if curator_uses_llm():
                    try:
                        model = learning_llm()
                    except ConfigurationError as exc:
                        logger.warning("[Reflector] %s; reflecting with the heuristic", exc)
        if model is None:
            return HeuristicReflector()
        from ..pipelines.llm_events import watched
        from ..roles.llm import LLMReflector

        return LLMReflector(watched(self.memory, model))

    def reflect(self, trajectory_id: str, llm: Any = None, *, user_id: str | None = None, agent_id: str | None = None) -> ReflectionItem:
        """What a completed trajectory shows: successful and failure patterns,
        neutral observations, recommendations. ``llm``: a model for this reflection
        (default: the configured reflector, else the heuristic one)."""
        record = self._trajectory(trajectory_id, user_id, agent_id)
        if record.metadata.get("status", RUNNING) == RUNNING:
            raise ValidationError("trajectory_id", f"trajectory {record.id!r} is still running; complete it first")
        reflector = self.reflector if llm is None else self._make_reflector(llm)
        view = self._view_of(record)
        owner = Scope(record.scope.tenant_id, record.scope.user_id, record.scope.agent_id)
        if isinstance(reflector, HeuristicReflector):
            insights = reflector.reflect_in_context(view, self._history(owner, record))
        else:
            insights = reflector.reflect_trajectory(view)
        saved = self.trajectories.save_reflection(owner, insights, trajectories=[record], batch_of=False, now=self.clock())
        return reflection_view(saved)

    def _view_of(self, record: MemoryRecord) -> Trajectory:
        """The trajectory as the reflector reads it, its steps counted on the call's meter."""
        steps = self.trajectories.steps(record)
        charge(1 + len(steps))
        return self.trajectories.as_role_view(record, steps)

    def _history(self, owner: Scope, record: MemoryRecord) -> list[tuple[bool, list[str]]]:
        """The outcomes and decisions of the runs of ``record``'s task type reflected on
        before it in its space (:meth:`Trajectories.outcomes`: kept beyond retention)."""
        return self.trajectories.outcomes(owner, record.metadata.get("task_type"), exclude=record.id)

    def batch_reflect(
        self,
        agent_id: str | None = None,
        since: Any = None,
        task_type: str | None = None,
        min_trajectories: int = 5,
        *,
        user_id: str | None = None,
        until: Any = None,
        llm: Any = None,
    ) -> list[ReflectionItem]:
        """Patterns across completed trajectories (``since``/``until``, one
        ``task_type`` or all), one reflection per task type that has at least
        ``min_trajectories`` of them, drawn from its newest ``BATCH_TRAJECTORIES``
        (50)."""
        minimum = validate.limit(min_trajectories, name="min_trajectories")
        user, agent = self._ids(user_id, agent_id)
        if user is None and agent is None:
            agent = self.config.default_agent_id
        rows = self.trajectories.query(
            ScopeFilter(self.tenant_id, user, agent),
            task_type=_short(task_type, "task_type"),
            since=_when(since, "since"),
            until=_when(until, "until"),
        )
        done = [r for r in rows if r.metadata.get("status", RUNNING) != RUNNING]
        groups: dict[tuple[tuple[str, str, str], str], list[MemoryRecord]] = {}
        for r in reversed(done):  # oldest first
            groups.setdefault((r.scope.space, str(r.metadata.get("task_type") or "")), []).append(r)
        reflector = self.reflector if llm is None else self._make_reflector(llm)
        out = []
        charge(len(rows))
        for (space, kind), records in groups.items():
            if len(records) < minimum:
                continue
            records = records[-BATCH_TRAJECTORIES:]
            views = [self._view_of(r) for r in records]
            insights = reflector.reflect_batch(views)
            saved = self.trajectories.save_reflection(
                Scope(*space), insights, trajectories=records, batch_of=True, now=self.clock(), task_type=kind or None
            )
            out.append(reflection_view(saved))
        return out

    def _reflection(self, memory_id: Any, user_id: Any, agent_id: Any) -> MemoryRecord:
        if not isinstance(memory_id, str):
            raise ValidationError("reflections", f"each reflection id must be a string, got {validate.show(memory_id)}")
        mid = validate.memory_id(memory_id)
        record = self.memory.store.get(mid)
        if not self._owned(record, Kind.REFLECTION, user_id, agent_id) or record.scope.run_id != RUN_REFLECTIONS:
            raise NotFoundError("reflection", mid)
        return record

    @staticmethod
    def _candidates(record: MemoryRecord, now: float) -> list[Candidate]:
        meta = record.metadata
        insights = Insights.from_dict({**(meta.get("insights") or {}), "evidence": meta.get("evidence") or {}})
        statuses: dict[str, str] = dict(meta.get("statuses") or {})
        times: dict[str, float] = {k: float(v) for k, v in (meta.get("times") or {}).items()}
        every = tuple(statuses)
        context = str(meta.get("task_type") or "")
        out = []
        credited = {p.casefold() for p in meta.get("credited") or () if isinstance(p, str)}
        doubted = {p.casefold() for p in meta.get("doubted") or () if isinstance(p, str)}
        for name in Insights.LISTS:
            cat = _LIST_CATEGORY[name]
            for pattern in getattr(insights, name):
                ids = insights.evidence.get(pattern) or every
                evidence = []
                for tid in ids:
                    status = statuses.get(tid, "partial")
                    # Advice is not yet proven: it counts half until runs bear it out. Other
                    # evidence counts by the category of the strategy it lands on.
                    weight = 0.5 if name == "recommendations" else None
                    evidence.append((tid, status, times.get(tid, now), weight))
                out.append(Candidate(cat, pattern, context, tuple(evidence),
                                     settles=name != "recommendations" and pattern.casefold() in credited,
                                     doubts=name != "recommendations" and pattern.casefold() in doubted))
        return out

    # playbooks ---------------------------------------------------------------------------------------
    def _view(self, ref: PlaybookRef) -> dict[str, Any]:
        now = self.clock()
        header = self.playbooks.header(ref)
        strategies = [r for r, _ in self.playbooks.strategies(ref)]
        return playbook_view(ref, header, strategies, now=now, half_life_days=self.config.confidence_half_life_days)

    def get_playbook(self, name: str = "default", agent_id: str | None = None, *, user_id: str | None = None, scope: str | None = None) -> PlaybookItem:
        """A playbook with its strategies by category (helpful, harmful, neutral),
        best first; one never written is empty, at version 0."""
        return self._view(self.ref(name, user_id, agent_id, scope))

    def list_playbooks(self, *, user_id: str | None = None, agent_id: str | None = None, scope: str | None = None) -> list[PlaybookItem]:
        """The playbooks of a scope, without their strategies."""
        ref = self.ref("default", user_id, agent_id, scope)
        run = ScopeFilter(ref.scope.tenant_id, ref.scope.user_id, ref.scope.agent_id, RUN_PLAYBOOKS)
        out = []
        for header in self.memory.store.list(run):
            if header.kind is Kind.PLAYBOOK and isinstance(header.metadata.get("name"), str):
                view = self._view(PlaybookRef(ref.scope, header.metadata["name"], ref.label))
                view.pop("strategies")
                out.append(view)
        return sorted(out, key=lambda v: v["name"])

    def create_playbook(
        self,
        name: str,
        *,
        scope: str | None = None,
        visibility: str | None = None,
        description: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> str:
        """Create an empty playbook (its first version); returns its id. An
        update creates a playbook too: this one also sets its visibility and description."""
        ref = self.ref(name, user_id, agent_id, scope, writing=True)
        if visibility is not None and visibility not in ("private", "shared", "tenant"):
            raise ValidationError("visibility", f"must be 'private', 'shared' or 'tenant', got {validate.show(visibility)}")
        if description is not None:
            description = validate.text("description", description, max_chars=self.memory.config.max_message_chars)
        now = self.clock()
        with self.memory.store.transaction() as batch:
            header, created = self.playbooks.ensure_header(batch, ref, now, visibility=visibility, description=description)
            if not created and (visibility or description):
                changes = {k: v for k, v in (("visibility", visibility), ("description", description)) if v is not None}
                header = self.playbooks.update_header(batch, header, now, **changes)
        return header.id

    def _strategy_candidates(self, strategies: Any) -> list[Candidate]:
        if not isinstance(strategies, list | tuple):
            raise ValidationError("strategies", f"must be a list of strategy objects, got {type(strategies).__name__}")
        # Curating compares each strategy with the playbook's (and merges run over all
        # of them): a call is bounded to what a playbook can hold, several times over.
        most = self._most_per_call()
        if len(strategies) > most:
            raise ValidationError("strategies", f"holds {len(strategies):,} strategies; one call takes at most {most:,} "
                                  f"(a playbook keeps {self.config.max_strategies:,}): send them in several calls")
        limit = self.memory.config.max_message_chars
        out = []
        for i, item in enumerate(strategies):
            where = f"strategies[{i}]"
            if isinstance(item, str):
                item = {"pattern": item}
            if not isinstance(item, Mapping):
                raise ValidationError(where, f"must be an object with a 'pattern', got {type(item).__name__}")
            pattern = validate.text(f"{where}.pattern", item.get("pattern"), max_chars=limit)
            cat = category_of(item.get("category", HELPFUL))
            if cat is None:
                raise ValidationError(f"{where}.category", f"must be helpful, harmful or neutral (✓ ✗ ○), got {validate.show(item.get('category'))}")
            context = item.get("context") or ""
            if not isinstance(context, str):
                raise ValidationError(f"{where}.context", f"must be a string, got {type(context).__name__}")
            if len(context) > limit:
                raise ValidationError(f"{where}.context", f"is {len(context):,} characters; the limit is {limit:,}")
            validate.unicode(f"{where}.context", context)
            conf = _score(item.get("confidence"), f"{where}.confidence")
            count = item.get("evidence_count", 1 if conf is not None else 0)
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_EVIDENCE_COUNT:
                raise ValidationError(f"{where}.evidence_count", f"must be a whole number from 0 to {MAX_EVIDENCE_COUNT:,}, got {validate.show(count)}")
            examples = item.get("examples") or []
            if not isinstance(examples, list | tuple) or not all(isinstance(x, str) for x in examples):
                raise ValidationError(f"{where}.examples", "must be a list of trajectory ids")
            for j, example in enumerate(examples):
                if len(example) > validate.MAX_ID_CHARS:
                    raise ValidationError(f"{where}.examples[{j}]", f"is {len(example):,} characters; the limit is {validate.MAX_ID_CHARS}")
                validate.unicode(f"{where}.examples[{j}]", example)
            now = self.clock()
            evidence = tuple((str(x), "success" if cat == HELPFUL else "failure" if cat == HARMFUL else "partial", now,
                              conf if conf is not None else 0.5) for x in examples[:50])
            out.append(Candidate(cat, " ".join(pattern.split()), context.strip(), evidence,
                                 declared=conf if conf is not None else (None if evidence else 0.5),
                                 declared_count=max(0, count - len(evidence))))
        return out

    def update_playbook(
        self,
        strategies: list[dict[str, Any]],
        name: str = "default",
        merge: bool = True,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        scope: str | None = None,
        major: bool = False,
    ) -> str:
        """Add ``strategies`` (``{"pattern", "category", "context",
        "confidence", ...}``), merged into similar ones, or with ``merge=False`` replace the
        playbook's. Every change is a new version (``major``: a major one); returns the playbook's id."""
        ref = self.ref(name, user_id, agent_id, scope, writing=True)
        candidates = self._strategy_candidates(strategies)
        replace = not _bool(merge, "merge")
        result = self.curation.apply(ref, candidates, now=self.clock(), replace=replace, reason="replace" if replace else "update",
                                     major=_bool(major, "major"))
        return str(result["playbook_id"])

    def curate_playbook(
        self,
        reflections: list[str],
        playbook_name: str = "default",
        llm: Any = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        scope: str | None = None,
    ) -> CurationResult:
        """Curate reflections (their ids) into the playbook: their patterns
        become strategies, added, merged into similar ones or removed. Returns
        ``{"added", "updated", "removed", "left_out"}`` (``left_out``: strategies this
        call made that the playbook's capacity, ``max_strategies``, did not keep).

        One call takes at most ``MAX_REFLECTIONS_PER_CALL`` (100) reflections
        holding at most ``MAX_STRATEGIES_PER_CALL`` (500) patterns (or
        ``max_strategies``, if more); more is a
        :class:`~memorist.errors.ValidationError`: send them in several calls. One
        reflection of more patterns alone is curated from that many of them, its
        neutral observations left out first (as a run's own curation takes it)."""
        if isinstance(reflections, str) or not isinstance(reflections, list | tuple):
            raise ValidationError("reflections", "must be a list of reflection memory ids")
        distinct = len(dict.fromkeys(r for r in reflections if isinstance(r, str))) + sum(not isinstance(r, str) for r in reflections)
        if distinct > MAX_REFLECTIONS_PER_CALL:
            raise ValidationError("reflections", f"holds {distinct:,} ids; one call curates at most {MAX_REFLECTIONS_PER_CALL} "
                                  "reflections: send them in several calls")
        ref = self.ref(playbook_name, user_id, agent_id, scope, writing=True, field="playbook_name")
        records = [self._reflection(mid, user_id, agent_id) for mid in dict.fromkeys(reflections)]
        charge(len(records))
        key = _curation_key(ref)
        now = self.clock()
        fresh = [r for r in records if key not in (r.metadata.get("curated_into") or ())]
        candidates = [c for r in fresh for c in self._candidates(r, now)]
        most = self._most_per_call()
        if len(candidates) > most:
            if len(fresh) > 1:
                raise ValidationError("reflections", f"hold {len(candidates):,} patterns; one call curates at most {most:,} "
                                      f"(a playbook keeps {self.config.max_strategies:,}): send fewer reflections per call")
            # One reflection of more (a trajectory of many decisions): curated as a run's
            # own curation takes it, not refused, which no call could then curate.
            candidates = self._bounded(candidates, f"reflection {fresh[0].id}")
        analyzed = {tid for r in fresh for tid in (r.metadata.get("statuses") or {})}

        def mark(batch: Any) -> None:
            for r in batch.get_many([r.id for r in fresh]).values():
                if r.status is Status.ACTIVE:
                    marks = [*list(r.metadata.get("curated_into") or ())[-20:], key]
                    batch.update(r.copy(metadata={**r.metadata, "curated_into": marks}), None, old_text=r.text, actor="curator",
                                 payload={"curated_into": ref.name})

        def header_changes(h: MemoryRecord) -> dict[str, Any]:
            return {"trajectories_analyzed": int(h.metadata.get("trajectories_analyzed") or 0) + len(analyzed)} if analyzed else {}

        result = self.curation.apply(ref, candidates, now=now, reason="curate", within=mark if fresh else None, header_changes=header_changes)
        result["reflections"] = [r.id for r in fresh]
        result["skipped"] = [r.id for r in records if r not in fresh]
        return result

    def delete_playbook(self, name: str, *, user_id: str | None = None, agent_id: str | None = None, scope: str | None = None) -> DeletedPlaybook:
        """Delete the playbook ``name`` of the scope the ids and ``scope`` name (as
        :meth:`get_playbook` finds it): its strategies, every version kept and the
        playbook itself, in one transaction. Their history stays in the log (as for
        a deleted memory; :meth:`memorist.Memory.erase` forgets the text too).
        :class:`~memorist.errors.NotFoundError` if the scope has no such playbook."""
        ref = self.ref(name, user_id, agent_id, scope, writing=True)
        header, strategies, versions = self.playbooks.delete(ref)
        if header is None and not strategies and not versions:
            raise NotFoundError("playbook", ref.name)
        return {
            "playbook_id": header.id if header is not None else None,
            "name": ref.name,
            "scope": ref.label,
            "strategies": strategies,
            "versions": versions,
            "message": f"Deleted playbook {ref.name!r} with {strategies} strateg{'y' if strategies == 1 else 'ies'} "
                       f"and {versions} version{'' if versions == 1 else 's'}",
        }

    def list_playbook_versions(self, name: str = "default", *, user_id: str | None = None, agent_id: str | None = None, scope: str | None = None) -> list[VersionItem]:
        """The versions kept (the latest, every major one, the recent
        ones, as the configuration says), oldest first."""
        ref = self.ref(name, user_id, agent_id, scope)
        return self.playbooks.version_index(self.playbooks.header(ref))

    def get_playbook_version(self, name: str, version: int, *, user_id: str | None = None, agent_id: str | None = None, scope: str | None = None) -> PlaybookItem:
        """A kept version of the playbook, with its strategies."""
        ref = self.ref(name, user_id, agent_id, scope)
        number = validate.limit(version, name="version")
        record = self.playbooks.version_record(self.playbooks.header(ref), number)
        if record is None:
            raise NotFoundError("playbook version", f"{ref.name} v{number}")
        return version_view(record, ref, now=self.clock(), half_life_days=self.config.confidence_half_life_days)

    def rollback_playbook(self, name: str, version: int, *, user_id: str | None = None, agent_id: str | None = None, scope: str | None = None) -> CurationResult:
        """Make a new (major) version equal to ``version``; nothing is lost:
        the versions in between stay. When the playbook holds those strategies
        already (``version`` is the current one), nothing is written and the
        result's ``message`` says so."""
        ref = self.ref(name, user_id, agent_id, scope, writing=True)
        number = validate.limit(version, name="version")
        record = self.playbooks.version_record(self.playbooks.header(ref), number)
        if record is None:
            raise NotFoundError("playbook version", f"{ref.name} v{number}")
        return self.curation.rollback(ref, record, now=self.clock())

    # consolidation ---------------------------------------------------------------------------------
    def consolidate(
        self,
        memory_type: str | None = None,
        scope: str | None = None,
        min_importance: float = MIN_IMPORTANCE,
        preserve_high_importance: bool = True,
        importance_threshold: float = IMPORTANCE_THRESHOLD,
        llm: Any = None,
        dry_run: bool = False,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> ConsolidationReport:
        """Merge similar memories of low importance into one each, keeping every name,
        number and date (so a memory does not fill up with near-copies of itself).

        Memories below ``min_importance`` are candidates; with
        ``preserve_high_importance`` (the default) none at or above
        ``importance_threshold`` is ever touched. Candidates whose embeddings are
        alike (cosine at least ``MemoryConfig.consolidation_similarity``: 0.9 with a
        semantic model, 0.8 with the hashing embedder) form a
        group, merged into one ``consolidated`` memory with ``consolidated_from``
        lineage; the sources are archived, not deleted. The merge is heuristic (every
        clause of every source once) unless ``llm`` (a ``"provider:model"`` string
        or an :class:`~memorist.llm.LLM`) or the Memory's LLM is given: then the
        model merges under the brevity-bias guard. A merge that drops a named entity,
        number or date of a source is rejected and its sources are kept.

        ``memory_type``: only memories of that kind (``"fact"``, ``"preference"``,
        ``"experience"``...). ``scope``: ``None`` for the memories of exactly the ids
        given, ``"user"`` for every memory of ``user_id`` (any agent), ``"agent"`` for
        every memory of ``agent_id``. ``dry_run``: report what would be merged, write
        nothing. Works in batches of ``MemoryConfig.consolidation_batch_size``.

        Returns the report: ``merged_count`` (sources merged), ``consolidated_count``,
        ``preserved_count`` (kept for their importance), ``space_saved_bytes``,
        ``results`` (each new memory and its sources), ``rejected`` (each refused group,
        its ``reason`` and the ``missing`` details) and ``run_id``, which
        :meth:`memorist.Memory.rollback` takes to undo the whole run.
        """
        return self._consolidate(memory_type, scope, min_importance, preserve_high_importance, importance_threshold, llm, dry_run,
                                 user_id=user_id, agent_id=agent_id)

    def wait_consolidation(self, timeout: float | None = None) -> bool:
        """Wait until the automatic consolidation runs that adds started in the background
        (``MemoryConfig.auto_consolidate_threshold``) have ended; False if ``timeout`` ran out."""
        return bool(self.memory._wait_consolidation(timeout))

    def _consolidate(self, memory_type: Any, scope: Any, min_importance: Any, preserve_high_importance: Any, importance_threshold: Any,
                     llm: Any, dry_run: Any, *, user_id: Any, agent_id: Any, actor: str = "consolidation") -> ConsolidationReport:
        from ..llm import resolve_llm
        from ..pipelines.consolidation import Settings

        user, agent = self._ids(user_id, agent_id)
        if user is None and agent is None:
            raise ValidationError("user_id", "consolidation acts on one user's or agent's memories: give user_id or agent_id")
        if scope not in (None, "user", "agent"):
            raise ValidationError("scope", f"must be 'user', 'agent' or None, got {validate.show(scope)}")
        if scope == "user":
            if user is None:
                raise ValidationError("user_id", "scope 'user' needs the user's id")
            agent = None
        elif scope == "agent":
            if agent is None:
                raise ValidationError("agent_id", "scope 'agent' needs the agent's id")
            user = None
        kinds = None
        if memory_type is not None:
            allowed = [k.value for k in Kind if k not in LEARNING_KINDS and k not in MINUTE_KINDS]
            if not isinstance(memory_type, str) or memory_type.strip().lower() not in allowed:
                raise ValidationError("memory_type", f"must be one of {', '.join(allowed)}, got {validate.show(memory_type)}")
            kinds = frozenset({Kind(memory_type.strip().lower())})
        low = validate.importance(min_importance, "min_importance")
        high = validate.importance(importance_threshold, "importance_threshold")
        if low is None or high is None:
            raise ValidationError("min_importance" if low is None else "importance_threshold", "must be a number from 0 to 1, got None")
        settings = Settings(
            min_importance=low,
            importance_threshold=high,
            preserve_high_importance=_bool(preserve_high_importance, "preserve_high_importance"),
            kinds=kinds,
            dry_run=_bool(dry_run, "dry_run"),
            batch_size=self.memory.config.consolidation_batch_size,
            similarity=self.memory.config.consolidation_similarity or default_similarity(self.memory.embedder.name),
            max_chars=self.memory.config.max_message_chars,
        )
        from ..pipelines.llm_events import watched

        model = watched(self.memory, resolve_llm(llm)) if llm is not None else self.memory.llm
        filter_ = ScopeFilter(self.tenant_id, user, agent)
        return self.memory._consolidator().run(  # type: ignore[no-any-return]
            filter_, settings, llm=model, event_scope=Scope(self.tenant_id, user or "", agent or ""), actor=actor
        )

    # the loop ------------------------------------------------------------------------------------------
    @staticmethod
    def current_run() -> LearningRun | None:
        """The :class:`LearningRun` of the task running under ``execute_with_learning``, if any."""
        return _ACTIVE.get()

    def _note_use(self, ref: PlaybookRef, score: float, now: float) -> None:
        with self.memory.store.transaction() as batch:
            header, _ = self.playbooks.ensure_header(batch, ref, now)
            self.playbooks.update_header(batch, header, now, **self._use_changes(header, score, now))

    @staticmethod
    def _use_changes(header: MemoryRecord, score: float, now: float) -> dict[str, Any]:
        meta = header.metadata
        first = list(meta.get("first_scores") or [])
        recent = [*list(meta.get("recent_scores") or []), score][-_SCORES_KEPT:]
        if len(first) < _SCORES_KEPT:
            first.append(score)
        return {
            "usage_count": int(meta.get("usage_count") or 0) + 1,
            "scored_uses": int(meta.get("scored_uses") or 0) + 1,
            "score_sum": round(float(meta.get("score_sum") or 0.0) + score, 6),
            "first_scores": first,
            "recent_scores": recent,
            "avg_improvement": improvement(first, recent),
            "last_used_at": now,
        }

    def _begin(self, task_description: Any, task_type: Any, playbook_name: Any, user_id: Any, agent_id: Any, scope: Any, parent: Any) -> tuple[LearningRun, PlaybookRef]:
        # A run writes its playbook (its use, then the curation): a tenant that may not
        # write a global playbook may not run against one either.
        ref = self.ref(playbook_name, user_id, agent_id, scope, writing=True, field="playbook_name")
        playbook = self._view(ref)
        owner = self.owner(user_id, agent_id)
        extra = {"playbook": ref.name, "playbook_scope": ref.label, "playbook_version": playbook["version"]}
        tid = self.start_trajectory(task_description, task_type, parent, user_id=user_id, agent_id=agent_id, _extra=extra)
        return LearningRun(self, tid, playbook, owner), ref

    def _finish(self, run: LearningRun, ref: PlaybookRef, status: str, score: float | None, error: str | None, auto_reflect: bool, auto_curate: bool) -> None:
        ids = {"user_id": run.owner.user_id or None, "agent_id": run.owner.agent_id or None}
        metrics = {k: v for k, v in run.metrics.items()}
        done = self.complete_trajectory(run.trajectory_id, status, score, error, metrics, **ids)
        used = float(done["success_score"] if done["success_score"] is not None else DEFAULT_SCORES[status])
        if not auto_reflect:
            self._note_use(ref, used, self.clock())
            return
        reflection = self.reflect(run.trajectory_id, **ids)
        if not auto_curate:
            self._note_use(ref, used, self.clock())
            return
        now = self.clock()
        record = self.memory.store.get(reflection["memory_id"])
        candidates = self._bounded(self._candidates(record, now), f"trajectory {run.trajectory_id}")
        key = _curation_key(ref)

        def mark(batch: Any) -> None:
            current = batch.get_many([record.id]).get(record.id)
            if current is not None:
                batch.update(current.copy(metadata={**current.metadata, "curated_into": [key]}), None, old_text=current.text,
                             actor="curator", payload={"curated_into": ref.name})

        def header_changes(h: MemoryRecord) -> dict[str, Any]:
            changes = self._use_changes(h, used, now)
            changes["trajectories_analyzed"] = int(h.metadata.get("trajectories_analyzed") or 0) + 1
            return changes

        self.curation.apply(ref, candidates, now=now, reason="curate", within=mark, header_changes=header_changes)

    def _most_per_call(self) -> int:
        """The most strategies (or patterns) one call curates."""
        return max(MAX_STRATEGIES_PER_CALL, self.config.max_strategies)

    def _bounded(self, candidates: list[Candidate], source: str) -> list[Candidate]:
        """The patterns of a run (or of one reflection, ``source`` names it) as a
        curation takes them: at most :meth:`_most_per_call`, the uncredited ○ neutral
        observations left out first (a run of thousands of decisions would otherwise
        make one curation compare them all)."""
        most = self._most_per_call()
        if len(candidates) <= most:
            return candidates
        order = sorted(range(len(candidates)), key=lambda i: (candidates[i].category == NEUTRAL and not candidates[i].settles, i))
        logger.warning("[Learning] %s shows %d patterns; its curation takes at most %d (the neutral observations last)",
                       source, len(candidates), most)
        return [candidates[i] for i in sorted(order[:most])]

    def execute_with_learning(
        self,
        task_fn: Callable[..., Any] | None = None,
        task_description: str | None = None,
        task_type: str | None = None,
        auto_reflect: bool = True,
        auto_curate: bool = True,
        playbook_name: str = "default",
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        scope: str | None = None,
        parent_trajectory_id: str | None = None,
    ) -> Any:
        """Run ``task_fn`` inside a trajectory, then reflect and curate.

        Returns ``(result, trajectory_id)``; for an async ``task_fn``, an awaitable of
        it. Without ``task_fn``, a decorator: the decorated function, called with its
        own arguments, runs this way and returns ``(result, trajectory_id)``.

        An exception of the task closes its trajectory as a failure and is raised
        again. An outcome that cannot be recorded (a score outside 0-1, a metric such
        as ``tokens`` below 0) closes the trajectory as a failure naming the error,
        with no reflection, and the :class:`~memorist.errors.ValidationError` is
        raised with the task's result as its ``result`` and the trajectory's id as its
        ``trajectory_id``.
        """
        flags = {"auto_reflect": _bool(auto_reflect, "auto_reflect"), "auto_curate": _bool(auto_curate, "auto_curate")}
        options = dict(task_type=task_type, playbook_name=playbook_name, user_id=user_id, agent_id=agent_id, scope=scope,
                       parent=parent_trajectory_id, **flags)
        if task_fn is None:
            def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
                if not callable(fn):
                    raise ValidationError("task_fn", f"must be a function, got {type(fn).__name__}")
                description = task_description or _describe(fn)
                if _is_async(fn):
                    @functools.wraps(fn)
                    async def run_async(*args: Any, **kwargs: Any) -> Any:
                        return await self._run_async(lambda _run: fn(*args, **kwargs), description, **options)
                    return run_async

                @functools.wraps(fn)
                def run(*args: Any, **kwargs: Any) -> Any:
                    return self._run(lambda _run: fn(*args, **kwargs), description, **options)
                return run

            return decorate
        if not callable(task_fn):
            raise ValidationError("task_fn", f"must be a function, got {type(task_fn).__name__}")
        description = task_description if task_description is not None else _describe(task_fn)
        call = (lambda run: task_fn(run)) if _wants_run(task_fn) else (lambda _run: task_fn())
        if _is_async(task_fn):
            return self._run_async(call, description, **options)
        return self._run(call, description, **options)

    def _run(self, call: Callable[[LearningRun], Any], description: Any, *, task_type: Any, playbook_name: Any, user_id: Any,
             agent_id: Any, scope: Any, parent: Any, auto_reflect: bool, auto_curate: bool) -> tuple[Any, str]:
        run, ref = self._begin(description, task_type, playbook_name, user_id, agent_id, scope, parent)
        token = _ACTIVE.set(run)
        try:
            outcome = call(run)
        except BaseException as exc:
            _ACTIVE.reset(token)
            if _cancelled(exc):
                self._close_failed(run, exc, cancelled=True)
            else:
                self._after_failure(run, ref, exc, auto_reflect, auto_curate)
            raise
        _ACTIVE.reset(token)
        if inspect.isawaitable(outcome):
            _discard(outcome)
            error = ValidationError("task_fn", "returned an awaitable (a coroutine) that a sync task cannot await: pass an "
                                    "async function (async def) to execute_with_learning, and await what it returns")
            self._close_failed(run, error)
            error.trajectory_id = run.trajectory_id  # type: ignore[attr-defined]
            raise error
        return self._close(run, ref, outcome, auto_reflect, auto_curate)

    async def _run_async(self, call: Callable[[LearningRun], Any], description: Any, *, task_type: Any, playbook_name: Any,
                         user_id: Any, agent_id: Any, scope: Any, parent: Any, auto_reflect: bool, auto_curate: bool) -> tuple[Any, str]:
        run, ref = await self._begin_async(description, task_type, playbook_name, user_id, agent_id, scope, parent)
        token = _ACTIVE.set(run)
        try:
            outcome = call(run)
            while inspect.isawaitable(outcome):  # an async task, or a sync one handing back a coroutine
                outcome = await outcome
        except BaseException as exc:
            _ACTIVE.reset(token)
            if _cancelled(exc):  # not the task failing: closed, neither reflected on nor curated
                await asyncio.to_thread(self._close_failed, run, exc, cancelled=True)
            else:
                await asyncio.to_thread(self._after_failure, run, ref, exc, auto_reflect, auto_curate)
            raise
        _ACTIVE.reset(token)
        return await asyncio.to_thread(self._close, run, ref, outcome, auto_reflect, auto_curate)

    async def _begin_async(self, *args: Any) -> tuple[LearningRun, PlaybookRef]:
        """:meth:`_begin` in a thread. A cancellation while it runs does not stop the
        thread: the trajectory it opens is then closed as cancelled (by the thread, or
        here if it had ended), never left running."""
        lock = threading.Lock()
        state: dict[str, Any] = {"abandoned": False, "begun": None}

        def begin() -> tuple[LearningRun, PlaybookRef]:
            begun = self._begin(*args)
            with lock:
                abandoned = state["abandoned"]
                state["begun"] = begun
            if abandoned:
                self._close_failed(begun[0], asyncio.CancelledError(), cancelled=True)
            return begun

        try:
            return await asyncio.to_thread(begin)
        except BaseException as exc:
            with lock:
                state["abandoned"] = True
                begun = state["begun"]
            if begun is not None:  # begun, and cancelled before it was handed over
                await asyncio.to_thread(self._close_failed, begun[0], exc, cancelled=True)
            raise

    def _close(self, run: LearningRun, ref: PlaybookRef, outcome: Any, auto_reflect: bool, auto_curate: bool) -> tuple[Any, str]:
        """Record what the task returned, then reflect and curate; returns ``(result,
        trajectory_id)``.

        The task has run, so its trajectory is never left running and its result never
        lost: when recording fails (a score outside 0-1, a metric such as ``tokens``
        that is not a number >= 0, a store error), the trajectory is closed as a failure
        naming the error (not reflected on: the task's real outcome is unknown), and
        the error is raised carrying the task's ``result`` and the ``trajectory_id``.
        An error of the reflection or curation after the trajectory was closed is
        raised the same way, the trajectory as the task left it."""
        result, status, score = _outcome(outcome)
        try:
            self._finish(run, ref, status, _score(score, "score"), None, auto_reflect, auto_curate)
        except Exception as exc:
            self._close_failed(run, exc)
            try:
                exc.result = result  # type: ignore[attr-defined]
                exc.trajectory_id = run.trajectory_id  # type: ignore[attr-defined]
                exc.add_note(f"trajectory {run.trajectory_id}: the task ran; its result is this error's 'result'")
            except AttributeError:  # an exception that takes no attributes: raised as it is
                pass
            raise
        return result, run.trajectory_id

    def _close_failed(self, run: LearningRun, exc: BaseException, *, cancelled: bool = False) -> None:
        """Complete a trajectory still running as a failure naming ``exc``: with the
        task's metrics, or without them when they are what was refused. ``cancelled``:
        the run was cancelled or interrupted (``exc`` is no failure of the task): its
        error is ``"cancelled"`` (with the interruption's name, unless it is an asyncio
        cancellation) and its metadata says ``cancelled``."""
        ids = {"user_id": run.owner.user_id or None, "agent_id": run.owner.agent_id or None}
        if cancelled:
            message = "cancelled" if isinstance(exc, asyncio.CancelledError) else f"cancelled ({type(exc).__name__})"
        else:
            message = (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__).replace("\x00", "")
        try:
            with metered():  # recorded even when the call's own meter was given up
                record = self.memory.store.get(run.trajectory_id)
                if record is None or record.metadata.get("status", RUNNING) != RUNNING:
                    return
                for metrics in (run.metrics, None):
                    try:
                        self.complete_trajectory(run.trajectory_id, "failure", 0.0, message[: self.memory.config.max_message_chars], metrics,
                                                 _extra={"cancelled": True} if cancelled else None, **ids)
                        return
                    except ValidationError:
                        if metrics is None:
                            raise
        except Exception:  # the error that made the task's outcome unrecordable is what the caller must see
            logger.exception("[Learning] could not close trajectory %s as a failure", run.trajectory_id)

    def _after_failure(self, run: LearningRun, ref: PlaybookRef, exc: BaseException, auto_reflect: bool, auto_curate: bool) -> None:
        """The task raised: its trajectory is a failure (the exception is re-raised by the caller)."""
        message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        try:
            run.observation(f"Error: {message}"[: self.memory.config.max_message_chars], error=type(exc).__name__)
            self._finish(run, ref, "failure", 0.0, message[: self.memory.config.max_message_chars], auto_reflect, auto_curate)
        except Exception:  # the task's own exception is what the caller must see
            logger.exception("[Learning] could not record the failure of trajectory %s", run.trajectory_id)


__all__ = ["Learning", "LearningRun"]
