"""The capabilities of a :class:`~memorist.Memory`, one attribute each, with their calls.

- ``memory.tiers`` (:class:`Tiers`): energy tiers: maintenance runs, boosts, the end of
  a conversation, status, health, configuration and test memories.
- ``memory.minutes`` (:class:`Minutes`): coordination minutes, the context window of an
  agent, evaluation of the minutes index and PAIR rounds.

(``memory.learning``, the learning loop, is :class:`memorist.ace.learning.Learning`;
``memory.playbooks``, self-evolving playbooks per learner, a :class:`memorist.Playbook`.)

Each call checks its arguments as the memory calls do and acts in the Memory's tenant;
the ids restrict it to a scope as in :meth:`memorist.Memory.get`.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from . import validate
from .errors import ValidationError
from .model import Scheduled, Scope, TierConfig, TierHealth, TierItem, TierItems, TierRun, TierStatus
from .pipelines.context_window import build_context
from .pipelines.evaluation import evaluate
from .pipelines.minutes import Minutes as MinutesLog
from .pipelines.minutes import project_of
from .pipelines.pair import PairLoop, combined_retriever, evaluator_of, rounds_of, threshold_of
from .pipelines.tiers import EnergyTiers, tier_item
from .policies.energy import MAX_ENERGY
from .policies.evaluation import EvaluationConfig
from .roles.evaluator import HeuristicEvaluator
from .store.base import ScopeFilter

#: The learning loop's calls (``memory.learning``, :class:`memorist.ace.learning.Learning`).
LEARNING_CALLS = (
    "start_trajectory", "log_step", "complete_trajectory", "get_trajectory", "query_trajectories", "prune_trajectories",
    "reflect", "batch_reflect", "get_playbook", "list_playbooks", "create_playbook", "update_playbook", "curate_playbook",
    "delete_playbook", "list_playbook_versions", "get_playbook_version", "rollback_playbook", "execute_with_learning", "consolidate",
)

#: The calls that wait for this process's background runs (the energy tiers' end of a
#: conversation, consolidation started by adds): they read no store, so an
#: :class:`~memorist.AsyncMemory` awaits them outside its queue, and its other calls go on
#: meanwhile. (``learning.wait_consolidation`` acts beyond any scope and is served by no
#: other surface: it is declared here only.)
BACKGROUND_WAITS: dict[str, tuple[str, ...]] = {"tiers": ("wait",), "learning": ("wait_consolidation",)}

#: The calls of ``memory.playbooks`` (:class:`memorist.Playbook`) and of one of its turns
#: (:class:`memorist.ace.playbook.PlaybookTurn`): the library's only (they run the
#: caller's turns); an AsyncMemory awaits them.
PLAYBOOK_CALLS = ("retrieve", "learn", "run_turn", "bullets", "search", "stats", "cleanup")
PLAYBOOK_TURN_CALLS = ("retrieve", "context", "learn")


class Tiers:
    """Energy tiers (``memory.tiers``). Every call but :meth:`wait` needs a store under
    the energy policy, and refuses any other with a ConfigurationError saying how to
    switch it: the command line's tier commands refuse it the same way."""

    #: The public calls.
    CALLS = ("maintain", "boost", "end_conversation", "wait", "status", "health", "config", "test_memories", "delete_test_memories")
    #: Why a maintenance run refuses a ``now`` in the future.
    _RUN_AHEAD = "a run decays memories up to then, and runs dated before then would leave them alone"

    def __init__(self, host: Any) -> None:
        self._host = host

    @property
    def engine(self) -> EnergyTiers:
        """The engine the calls run on (its configuration, runs and background worker)."""
        return self._host._energy_engine()

    def boost(self, memory_id: str, amount: float | None = None, now: Any = None, *, user_id: str | None = None,
              agent_id: str | None = None, run_id: str | None = None) -> TierItem:
        """Add energy to a memory: ``amount``, default the configured boost
        (1.0). Its energy is first decayed to ``now`` (default: the current time); a
        memory promoted since is boosted in its new tier. Test memories are boosted
        too. Returns the memory's item with ``energy``, ``tier``, ``amount`` and
        ``energy_before`` (its decayed energy before the boost). The ids restrict it
        to the caller's memories, as in :meth:`memorist.Memory.get`. A ``now`` more
        than 5 minutes ahead of this machine's clock is refused. Needs ``policy="energy"``."""
        self._host._require_energy("tiers.boost")
        mid = validate.memory_id(memory_id)
        owner = self._host._optional_scope(user_id, agent_id, run_id)
        at = self._now(now, ahead="a boost decays the memory up to then, and runs dated before then would leave it alone")
        config = self.engine.config()
        if amount is None:
            amount = config.boost
        if isinstance(amount, bool) or not isinstance(amount, int | float) or not 0 < amount <= MAX_ENERGY:
            raise ValidationError("amount", f"must be a number > 0 and ≤ {MAX_ENERGY:,.0f}, got {validate.show(amount)}")
        record = self.engine.boost(mid, float(amount), at, owner)
        item = tier_item(record)
        item.update(amount=float(amount), energy_before=round(record.energy - float(amount), 6))
        return item

    @staticmethod
    def _now(now: Any, *, ahead: str | None = None) -> float:
        """``now`` as epoch seconds (None: the current time); with ``ahead`` (why), a
        call that writes refuses one more than 5 minutes in the future."""
        at = validate.timestamp(now, field="now")
        if at is None:
            return time.time()
        if ahead is not None:
            validate.not_ahead("now", now, at, ahead)
        return at

    def maintain(self, now: Any = None, test_only: bool = False, *, user_id: str | None = None, agent_id: str | None = None,
                 run_id: str | None = None) -> TierRun:
        """One maintenance run of the energy tiers, at ``now`` (default: the
        current time; a datetime, ISO-8601 or epoch seconds): decay every memory of the
        scope (no id: the whole tenant), expire those below the expiry threshold,
        promote those above their tier's threshold, within the configured batch sizes.
        ``test_only=True`` runs over the test memories, and only them.

        Returns the run's counts: ``memories``, ``decayed``, ``expired``,
        ``promoted`` (``promoted_to_short_term``, ``promoted_to_long_term``),
        ``use_boosted``, ``pending`` (left for later runs), ``skipped``, with its
        ``run`` id, ``now``, ``scopes``, ``results`` (one per changed memory) and the
        ``log`` file it was appended to. A ``now`` more than 5 minutes ahead of this
        machine's clock is refused. Needs ``policy="energy"``.
        """
        self._host._require_energy("tiers.maintain")
        if not isinstance(test_only, bool):
            raise ValidationError("test_only", f"must be True or False, got {validate.show(test_only)}")
        at = self._now(now, ahead=self._RUN_AHEAD)
        ids = self._host._optional_scope(user_id, agent_id, run_id)
        scope = self.engine.scope_for(test_only=test_only, user_id=ids.user_id, agent_id=ids.agent_id, run_id=ids.run_id)
        return self.engine.run(scope, now=at)

    def end_conversation(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
                         now: Any = None) -> Scheduled:
        """The conversation ended: maintain its space in the background (the
        end-of-conversation consolidation). Returns at once with ``{"scheduled",
        "coalesced", "running", "waiting", "scopes"}``.

        One run at a time per store; a request for a space that already waits for a
        run is merged into it (``coalesced``), none is lost. The run covers the
        user's and agent's memories of every conversation (only ``run_id``: that
        conversation's). :meth:`wait` waits for it; :meth:`close`
        does too. A ``now`` more than 5 minutes ahead of this machine's clock is
        refused. Needs ``policy="energy"``.
        """
        self._host._require_energy("tiers.end_conversation")
        u, a, r = validate.require_scope(user_id, agent_id, run_id)
        at = None if now is None else self._now(now, ahead=self._RUN_AHEAD)
        scope = self.engine.scope_for(test_only=False, user_id=u, agent_id=a, run_id=None if (u or a) else r)
        trigger = {k: v for k, v in (("user_id", u), ("agent_id", a), ("run_id", r)) if v}
        answer = self.engine.background.request(scope, at, trigger)
        return {**answer, "scopes": {"user_id": scope.user_id, "agent_id": scope.agent_id, "run_id": scope.run_id}}

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no background maintenance runs or waits; False if ``timeout``
        (seconds) ran out first."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0):
            raise ValidationError("timeout", f"must be seconds >= 0 or None, got {validate.show(timeout)}")
        if self._host._tiers is None:
            return True
        return self._host._tiers.background.wait(timeout)

    def status(self, *, test_only: bool = False, now: Any = None, user_id: str | None = None,
               agent_id: str | None = None, run_id: str | None = None) -> TierStatus:
        """The distribution of memories over the tiers (count and energy at ``now``
        per tier; archived and expired counts), the configuration, the last run: the
        tenant's, or with ids only those memories'."""
        self._host._require_energy("tiers.status")
        if not isinstance(test_only, bool):
            raise ValidationError("test_only", f"must be True or False, got {validate.show(test_only)}")
        owner = self._owner_or_tenant(user_id, agent_id, run_id)
        return {"policy": self._host.config.policy, **self.engine.status(now=self._now(now), test_only=test_only, owner=owner)}

    def health(self, *, now: Any = None, user_id: str | None = None, agent_id: str | None = None,
               run_id: str | None = None) -> TierHealth:
        """Health checks of the energy tiers: ``{"status": ok|warn|fail, "healthy",
        "checks": [{"check", "status", "detail"}]}`` (configuration present and sane,
        counts, stale decays, due promotions and expiries, links, last run, log): the
        tenant's, or with ids only those memories'."""
        self._host._require_energy("tiers.health")
        return self.engine.health(now=self._now(now), owner=self._owner_or_tenant(user_id, agent_id, run_id))

    def _owner_or_tenant(self, user_id: Any, agent_id: Any, run_id: Any) -> ScopeFilter | None:
        """The ids' scope, or None when no id is given (the whole tenant)."""
        owner = self._host._optional_scope(user_id, agent_id, run_id)
        return None if (owner.user_id, owner.agent_id, owner.run_id) == (None, None, None) else owner

    def config(self, changes: Mapping[str, Any] | None = None, *, reset: bool = False) -> TierConfig:
        """The energy tiers' configuration, persisted in the store: ``{"config",
        "persisted", "seq", "changed_at"}``. ``changes`` (``{"decay_batch": 50,
        "start_energy.reminder": 3}``) are checked and persisted first; ``reset``
        starts from the defaults."""
        self._host._require_energy("tiers.config")
        if changes is not None and not isinstance(changes, Mapping):
            raise ValidationError("changes", f"must be a mapping of settings, got {type(changes).__name__}")
        if not isinstance(reset, bool):
            raise ValidationError("reset", f"must be True or False, got {validate.show(reset)}")
        if not changes and not reset:
            return self.engine.config_info()
        return self.engine.set_config(dict(changes or {}), reset=reset)

    def test_memories(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
                      limit: int = 100) -> TierItems:
        """The test memories (``add(..., test=True)``), newest first, with their energy
        and tier; every scope of the tenant when no id is given."""
        self._host._require_energy("tiers.test_memories")
        limit = validate.limit(limit)
        ids = self._host._optional_scope(user_id, agent_id, run_id)
        scope = self.engine.scope_for(test_only=True, user_id=ids.user_id, agent_id=ids.agent_id, run_id=ids.run_id)
        config, now = self.engine.shown_config(), time.time()
        return {"results": [tier_item(r, now=now, config=config) for r in self.engine.test_memories(scope, limit=limit)]}

    def delete_test_memories(self, *, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any]:
        """Delete test memories (every scope of the tenant when no id is given); the
        real ones are never touched. Returns ``{"deleted": n}``."""
        self._host._require_energy("tiers.delete_test_memories")
        ids = self._host._optional_scope(user_id, agent_id, run_id)
        scope = self.engine.scope_for(test_only=True, user_id=ids.user_id, agent_id=ids.agent_id, run_id=ids.run_id)
        return {"deleted": self.engine.delete_test_memories(scope)}


class Minutes:
    """Coordination minutes (``memory.minutes``): an append-only log as the record,
    its search index, the context window built from it, its evaluation and PAIR."""

    #: The public calls.
    CALLS = ("record", "recent", "by_ids", "get", "history", "search", "reindex", "build_context", "evaluate", "pair", "pair_round")

    def __init__(self, host: Any) -> None:
        self._host = host

    @property
    def engine(self) -> MinutesLog:
        """The log and its index."""
        return self._host._minutes_engine()

    def build_context(self, agent_id: str, task: str | None = None, *, budget_tokens: int = 4000, project_id: str | None = None,
                      now: Any = None) -> Any:
        """The bounded context window for ``agent_id``: the project's last 50
        minutes, the minutes they reference, the agent's own memory and the 5 minutes
        most relevant to ``task``, each once, cut to ``budget_tokens`` (counted by the
        bundled embedding model's tokenizer, as :func:`memorist.pipelines.context.pack_context`
        counts them; :func:`memorist.pipelines.context_window.build_context` takes
        another). Returns a :class:`memorist.pipelines.context_window.ContextWindow`
        (``text``, ``sections``, ``tokens``, ``cut``; ``to_dict()``)."""
        return build_context(self.engine, agent_id, task, budget_tokens=budget_tokens, project_id=project_id, now=now)

    def evaluate(self, *, project_id: str | None = None, dry_run: bool = False, now: Any = None, config: Any = None) -> dict[str, Any]:
        """An evaluation run over the project's minutes index: score each
        (recency, relevance, accuracy, impact, composite), drop duplicates, supersede
        the lower-scored of contradicting ones, prune composites under 0.3 — from the
        index only, never the log — and log the run's stats, as of ``now`` (default: the
        current time; not more than 5 minutes ahead of it). ``dry_run``: report only.
        ``config``: an :class:`memorist.policies.evaluation.EvaluationConfig` or a mapping."""
        if not isinstance(dry_run, bool):
            raise ValidationError("dry_run", f"must be True or False, got {validate.show(dry_run)}")
        if isinstance(config, Mapping):
            config = EvaluationConfig.from_mapping(config)
        if config is not None and not isinstance(config, EvaluationConfig):
            raise ValidationError("config", f"must be an EvaluationConfig or a mapping, got {type(config).__name__}")
        # A time to come would score fresh minutes as aged and prune them, stamped then.
        at = self.engine.past(now, "an evaluation scores what has happened")
        return evaluate(self.engine, project_id=project_id, now=at, dry_run=dry_run, config=config)

    def _pair_texts(self, task: Any, criteria: Any, output: Any) -> list[str]:
        return [validate.text(name, value, max_chars=self._host.config.max_message_chars)
                for name, value in (("task", task), ("criteria", criteria), ("output", output))]

    def _pair_loop(self, project_id: Any, agent_id: Any, evaluator: Any, memories_per_gap: Any) -> Any:
        project = project_of(project_id)
        agent = validate.scope_id("agent_id", agent_id) or ""
        per_gap = validate.limit(memories_per_gap, name="memories_per_gap")
        if evaluator is None and self._host.llm is not None:
            from .roles.llm import LLMEvaluator

            evaluator = LLMEvaluator(self._host.llm)
        chosen = evaluator_of(evaluator, HeuristicEvaluator())
        sources = [
            lambda q, k: [{**m, "source": "minute"} for m in self.engine.search(q, k, project_id=project)],
            lambda q, k: [{**f, "source": "fact"} for f in self._pair_facts(q, k, project, agent)],
        ]
        return PairLoop(self._host.store, Scope(self._host.config.tenant_id, project, agent), chosen, combined_retriever(sources), memories_per_gap=per_gap)

    def _pair_facts(self, query: str, k: int, project: str, agent: str) -> list[dict[str, Any]]:
        """The facts a PAIR round retrieves for a gap: the project's, of all its agents
        (a subject's minutes read only what it may: :class:`memorist.relations.SubjectMinutes`)."""
        return list(self._host.search(query, user_id=project, limit=k)["results"])

    def pair(self, task: str, criteria: str, output: str, revise: Callable[[str, list[dict[str, Any]]], str], threshold: float = 95,
             max_rounds: int = 5, *, project_id: str | None = None, agent_id: str | None = None, evaluator: Any = None,
             memories_per_gap: int = 5) -> Any:
        """The PAIR loop (evaluate, find the gaps, retrieve, revise), bounded: a fresh evaluator (the Memory's LLM, else
        the heuristic; or ``evaluator``) scores ``output`` 0-100 against ``criteria``
        seeing nothing else, and names gaps; for each gap ``memories_per_gap`` memories
        of the project (minutes and facts) are retrieved; ``revise(output,
        improvements)`` returns the next output (``improvements``: per gap ``{"gap",
        "memories", "suggestions"}``). Until the score reaches ``threshold`` or after
        ``max_rounds`` evaluations. Every round is logged. Returns a
        :class:`memorist.pipelines.pair.PairResult` (``output``, ``score``,
        ``converged``, ``rounds``; ``to_dict()``)."""
        texts = self._pair_texts(task, criteria, output)
        if not callable(revise):
            raise ValidationError("revise", f"must be a function (output, improvements) -> revised output, got {type(revise).__name__}")
        limit, bound = threshold_of(threshold), rounds_of(max_rounds)
        loop = self._pair_loop(project_id, agent_id, evaluator, memories_per_gap)
        return loop.run(*texts, revise, threshold=limit, max_rounds=bound)

    def pair_round(self, task: str, criteria: str, output: str, *, threshold: float = 95, project_id: str | None = None,
                   agent_id: str | None = None, evaluator: Any = None, memories_per_gap: int = 5) -> dict[str, Any]:
        """One PAIR evaluation round, without revising: ``{"score", "met", "gaps",
        "improvements", ...}`` (improvements only below ``threshold``). Logged like a
        round of :meth:`pair`."""
        texts = self._pair_texts(task, criteria, output)
        limit = threshold_of(threshold)
        loop = self._pair_loop(project_id, agent_id, evaluator, memories_per_gap)
        r = loop.round(*texts, number=1, session=str(uuid.uuid4()), threshold=limit, improve=True)
        return {**r.to_dict(), "threshold": limit}


def _of_the_log(name: str) -> Callable[..., Any]:
    """``Minutes.<name>``: the log's call of that name (its signature and docstring)."""
    target = getattr(MinutesLog, name)

    @functools.wraps(target)
    def call(self: Minutes, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.engine, name)(*args, **kwargs)

    return call


#: The calls of the log itself: record, read, search, reindex.
LOG_CALLS = ("record", "recent", "by_ids", "get", "history", "search", "reindex")
for _name in LOG_CALLS:
    setattr(Minutes, _name, _of_the_log(_name))
del _name


__all__ = ["BACKGROUND_WAITS", "LEARNING_CALLS", "LOG_CALLS", "PLAYBOOK_CALLS", "PLAYBOOK_TURN_CALLS", "Minutes", "Tiers"]
