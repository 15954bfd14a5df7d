"""Playbook rules: the configuration presets, context ranking and capacity pruning. Pure.

Two named presets (configuration is data):

- :meth:`PlaybookConfig.per_learner_preset` — the default: one playbook per
  learner, reinforce-over-clone curation with a cap on new bullets per turn,
  canonical semantic dedup, one memory class per bullet, state loaded once a turn.
- :meth:`PlaybookConfig.baseline` — the ACE baseline it improves on: one playbook
  shared by every learner, a new bullet for every lesson, Jaccard dedup keeping the
  first bullet seen, state reloaded on every access.

Both prune to ``max_bullets`` by the same decay score.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import config
from ..errors import ConfigurationError
from ..model import MemoryClass
from ..reserved import PER_LEARNER_PLAYBOOK, playbook_name
from ..validate import finite_number
from .decay import decay_rates

#: How much each class adds to a bullet's context score: procedural > episodic > semantic.
CLASS_PRIORITY: Mapping[str, float] = {
    MemoryClass.PROCEDURAL.value: 0.06,
    MemoryClass.EPISODIC.value: 0.04,
    MemoryClass.SEMANTIC.value: 0.01,
}


@dataclass(frozen=True, slots=True)
class ContextWeights:
    """How retrieval for the prompt combines relevance with the playbook's signals.

    ``context score = relevance_weight * cosine + score_weight * min(decay score, 1)
    + class priority + learner boost + topic boost``. The boosts are small next to
    relevance on purpose: they order bullets of similar relevance, they never bring
    an unrelated bullet into the prompt.
    """

    relevance: float = 0.6
    score: float = 0.1
    learner_match: float = 0.06
    learner_mismatch: float = -0.02
    topic_match: float = 0.03
    class_priority: Mapping[str, float] = field(default_factory=lambda: dict(CLASS_PRIORITY))


def context_score(
    relevance: float,
    decay_score: float,
    memory_class: str,
    *,
    learner_match: bool | None = None,
    topic_match: bool = False,
    weights: ContextWeights = ContextWeights(),  # noqa: B008 - frozen, shared safely
) -> float:
    """The rank of a bullet for a query. ``learner_match`` None: the bullet names no learner."""
    total = weights.relevance * relevance + weights.score * min(max(decay_score, 0.0), 1.0)
    total += weights.class_priority.get(memory_class, 0.0)
    if learner_match is True:
        total += weights.learner_match
    elif learner_match is False:
        total += weights.learner_mismatch
    if topic_match:
        total += weights.topic_match
    return total


def prune_order(items: Sequence[tuple[str, float, int, float]]) -> list[str]:
    """Ids ranked for retention, best first: by decay score, then helpful count, then
    the newer (``created_at``), then id. ``items`` are ``(id, score, helpful, created_at)``."""
    ranked = sorted(items, key=lambda it: (round(it[1], 12), it[2], it[3], it[0]), reverse=True)
    return [it[0] for it in ranked]


def prune_plan(items: Sequence[tuple[str, float, int, float]], max_bullets: int) -> list[str]:
    """The ids to remove so at most ``max_bullets`` remain, in ranking order."""
    if len(items) <= max_bullets:
        return []
    return prune_order(items)[max_bullets:]


def room_for_new(count: int, cap: int | None) -> bool:
    """The cap on new bullets per turn: whether a turn that already has
    ``count`` new bullets may add one more (``cap`` None: no cap).

    The one statement of the rule: the heuristic and LLM curators apply it while
    they decide, and the learning pipeline applies it again to whatever a curator
    returned. A lesson past the cap is not lost; see
    :func:`memorist.roles.curator.reinforce_overflow`.
    """
    return cap is None or count < cap


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _whole(value: Any, low: int) -> bool:
    """Whether ``value`` is a whole number >= ``low`` (not a bool, not 2.9 cut to 2)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


@dataclass(frozen=True, slots=True)
class PlaybookConfig:
    """How a :class:`~memorist.Playbook` learns, dedups, prunes and retrieves.

    ``max_new`` None means: ``ACE_CURATOR_MAX_NEW`` from the environment when the
    playbook is built, else 2. ``use_llm`` None means: ``ACE_CURATOR_USE_LLM``
    (default false). ``dedup_threshold`` is a cosine for ``dedup="semantic"`` and a
    word Jaccard for ``dedup="jaccard"``. ``name`` is the name the playbooks are stored
    under; empty (the default) means the per-learner preset's own.
    """

    name: str = ""
    per_learner: bool = True  # False: one playbook shared by every learner
    shared_user_id: str = "ace-shared"  # the shared playbook's user id
    agent_id: str = ""  # the agent whose playbooks these are ("" for none)
    max_bullets: int = 100
    max_new: int | None = None
    cap_new: bool = True  # False: no cap on new bullets per turn (the baseline)
    reinforce_threshold: float | None = 0.9  # None: never reinforce, always append
    dedup: str = "semantic"  # "semantic" (cosine, canonical survivor) or "jaccard" (first seen survives)
    dedup_threshold: float = 0.9
    normalise_tags: bool = True
    reload_every_access: bool = False
    prune_threshold: float = 0.3  # retrieval skips bullets scoring below it; pruning ignores it
    decay_rates: Mapping[str, float] | None = None
    top_k: int = 10
    min_relevance: float = 0.1  # a bullet less similar than this to the query is never injected
    candidates: int = 5  # similar bullets shown to the curator per lesson
    use_llm: bool | None = None
    weights: ContextWeights = field(default_factory=ContextWeights)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", playbook_name(self.name) or PER_LEARNER_PLAYBOOK)

    @property
    def preset_name(self) -> str:
        """The preset's name: ``"per-learner"`` for the default configuration, else ``name``."""
        return self.name

    @property
    def new_cap(self) -> int | None:
        """The cap on new bullets per turn that applies (see :func:`room_for_new`):
        ``max_new``, or None when the preset does not cap (the baseline)."""
        return self.max_new if self.cap_new else None

    @classmethod
    def per_learner_preset(cls, **overrides: Any) -> PlaybookConfig:
        """The per-learner preset (the default): one playbook per learner, lessons
        reinforced instead of cloned, a cap on new bullets per turn, semantic dedup."""
        return dataclasses.replace(cls(), **overrides)

    @classmethod
    def baseline(cls, **overrides: Any) -> PlaybookConfig:
        """The ACE baseline: shared store, always append, Jaccard dedup (first seen), reload per access."""
        base = cls(
            name="baseline",
            per_learner=False,
            cap_new=False,
            reinforce_threshold=None,
            dedup="jaccard",
            dedup_threshold=0.85,
            normalise_tags=False,
            reload_every_access=True,
        )
        return dataclasses.replace(base, **overrides)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> PlaybookConfig:
        """A named preset with ``overrides``: ``"per-learner"`` (the default; its former
        name is still accepted) or ``"baseline"`` (the ACE baseline)."""
        # The two after "per-learner": its former names, still accepted.
        if name in ("per-learner", "ltmbse", "ltmbse-ace", "default"):
            return cls.per_learner_preset(**overrides)
        if name in ("baseline", "ace", "ace-baseline"):
            return cls.baseline(**overrides)
        raise ConfigurationError(f"unknown playbook preset {name!r}; use 'per-learner' or 'baseline'")

    def resolved(self, environ: Mapping[str, str] | None = None) -> PlaybookConfig:
        """A checked copy with the environment's defaults filled in (read now, not at import)."""
        env = config.playbook_environment() if environ is None else environ
        max_new = self.max_new
        if max_new is None:
            raw = env.get("ACE_CURATOR_MAX_NEW", "")
            text = raw.strip()
            if not text:
                max_new = 2
            elif text.isascii() and text.isdigit():  # not "2.9" cut to 2, nor "-1"
                max_new = int(text)
            else:  # refused here, so that the message names the variable the user set
                raise ConfigurationError(f"ACE_CURATOR_MAX_NEW must be a whole number >= 0, got {raw!r}")
        elif not _whole(max_new, 0):
            raise ConfigurationError(f"max_new must be a whole number >= 0, got {max_new!r}")
        use_llm = self.use_llm
        if use_llm is None:
            raw = env.get("ACE_CURATOR_USE_LLM", "false").strip().lower()
            if raw not in _TRUE | _FALSE:
                raise ConfigurationError(f"ACE_CURATOR_USE_LLM must be true or false, got {raw!r}")
            use_llm = raw in _TRUE
        elif not isinstance(use_llm, bool):
            raise ConfigurationError(f"use_llm must be True, False or None, got {use_llm!r}")
        for name, low in (("max_bullets", 1), ("top_k", 1), ("candidates", 1)):
            if not _whole(getattr(self, name), low):
                raise ConfigurationError(f"{name} must be a whole number >= {low}, got {getattr(self, name)!r}")
        if self.dedup not in ("semantic", "jaccard"):
            raise ConfigurationError(f"dedup must be 'semantic' or 'jaccard', got {self.dedup!r}")
        for name in ("dedup_threshold", "prune_threshold", "min_relevance"):
            value = getattr(self, name)
            if not finite_number(value):
                raise ConfigurationError(f"{name} must be a finite number, got {value!r}")
        if self.reinforce_threshold is not None and not (finite_number(self.reinforce_threshold) and 0.0 <= self.reinforce_threshold <= 1.0):
            raise ConfigurationError(f"reinforce_threshold must be in [0, 1], got {self.reinforce_threshold!r}")
        if not self.per_learner and not self.shared_user_id:
            raise ConfigurationError("a shared playbook needs a shared_user_id")
        return dataclasses.replace(self, max_new=max_new, use_llm=use_llm, decay_rates=decay_rates(self.decay_rates))


def curation_key(label: str, tenant: str, user: str, agent: str, name: str) -> str:
    """How a reflection remembers a playbook it was curated into (never twice): the
    playbook's scope label, its space's ids and its name."""
    return f"{label}:{tenant}:{user}:{agent}:{name}"


# The preset's former name, kept for code written against it (set here rather than
# declared in the class, so the API reference shows only the current name).
setattr(PlaybookConfig, "ltmbse", PlaybookConfig.per_learner_preset)  # noqa: B010

__all__ = ["CLASS_PRIORITY", "ContextWeights", "PlaybookConfig", "context_score", "curation_key", "prune_order", "prune_plan", "room_for_new"]
