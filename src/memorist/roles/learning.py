"""The role seams of the learning pipeline: :class:`Reflector` and :class:`Curator`.

The tutoring loop is reflect → curate → apply the delta. The two roles are pure: plain,
JSON-friendly dataclasses in and out (every one has ``to_dict`` / ``from_dict``), no
I/O. The learning pipeline does the I/O: it loads the learner's playbook, finds for
each lesson the most similar existing bullets, and applies the delta in one
transaction.

- A :class:`Reflector` looks at one turn or task — the question, the answer, the
  feedback or outcome, and the bullets that were in the prompt — and returns a
  :class:`Reflection`: lessons, and a helpful/harmful tag for each bullet used.
- A :class:`Curator` turns a reflection into a :class:`Delta`: new bullets, counter
  updates of existing bullets, removals. It sees, per lesson, the existing bullets
  most similar to it (:class:`Similar`) and the policy it must follow
  (``max_new``, ``reinforce_threshold``).

The learning loop over tasks reflects on task executions instead of tutoring turns: the same
:class:`Reflector` turns a :class:`Trajectory` (a task, its steps and outcome) into
:class:`Insights` — ✓ successful patterns, ✗ failure patterns, ○ neutral
observations, recommendations — with :meth:`Reflector.reflect_trajectory`, and
several trajectories into the patterns they share with :meth:`Reflector.reflect_batch`.

The deterministic heuristics (:class:`~memorist.roles.reflector.HeuristicReflector`,
:class:`~memorist.roles.curator.HeuristicCurator`) are the default. An LLM
implementation subclasses the same base and implements ``_reflect`` / ``_curate``
(and ``_reflect_trajectory`` / ``_reflect_batch``); the base owns the fallback
(through :class:`~memorist.roles.base.FallbackRole`, as the LLM extractor and
reconciler do): when one of them raises, the failure is logged and the role's
``fallback`` (the heuristic by default) answers instead, so no turn's input is
ever lost. The :class:`Curator` base also owns the cap on new bullets per
turn: whatever a curator proposes, :meth:`Curator.curate` keeps at most
``max_new`` new bullets and turns the overflow into reinforcements.
"""

from __future__ import annotations

import abc
import contextvars
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from ..model import Message, from_epoch, to_epoch
from ..policies.playbook import room_for_new
from .base import FallbackRole

logger = logging.getLogger("memorist.ace.roles")
curator_log = logging.getLogger("memorist.ace.curator")

T = TypeVar("T")

HELPFUL = "helpful"
HARMFUL = "harmful"
NEUTRAL = "neutral"


def _clean(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _tuples(value: Any) -> Any:
    """JSON lists back into the tuples the frozen dataclasses hold."""
    if isinstance(value, list | tuple):
        return tuple(_tuples(v) for v in value)
    return value


class _Plain:
    """``to_dict`` / ``from_dict`` for the frozen dataclasses below."""

    _nested: ClassVar[Mapping[str, Any]] = {}

    def to_dict(self) -> dict[str, Any]:
        return _clean(asdict(self))  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
        """Build from a mapping (e.g. parsed JSON). Unknown keys are ignored; lists
        become tuples; nested objects are built from their mappings."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}.from_dict needs a mapping, got {type(data).__name__}")
        nested = getattr(cls, "_nested", {})
        kwargs: dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name not in data:
                continue
            value = data[f.name]
            inner = nested.get(f.name)
            if inner is not None and value is not None:
                if isinstance(inner, tuple):  # a sequence of sequences of the type
                    value = tuple(tuple(inner[0].from_dict(v) for v in group) for group in value)
                elif isinstance(value, list | tuple):
                    value = tuple(inner.from_dict(v) for v in value)
                else:
                    value = inner.from_dict(value)
            elif isinstance(value, list):
                value = _tuples(value)
            kwargs[f.name] = value
        return cls(**kwargs)


@dataclass(frozen=True, slots=True)
class Bullet(_Plain):
    """One playbook bullet as roles, callers and prompts see it.

    ``memory_type`` is its one memory class; ``score`` its decay score when it was
    read; ``relevance`` its cosine similarity to the query, when it was retrieved.
    ``sources`` are what it was learned from (lesson keys, dialog ids).
    """

    id: str
    content: str
    section: str = ""
    kind: str = "strategy"
    memory_type: str = "procedural"
    topic: str = ""
    concept: str = ""
    tags: tuple[str, ...] = ()
    helpful: int = 0
    harmful: int = 0
    score: float = 0.0
    relevance: float | None = None
    learner_id: str = ""
    conversation_id: str = ""
    created_at: float = 0.0
    sources: tuple[str, ...] = ()

    def format(self) -> str:
        """The ACE prompt line: ``[id] helpful=X harmful=Y :: content``."""
        return f"[{self.id}] helpful={self.helpful} harmful={self.harmful} :: {self.content}"

    def to_dict(self) -> dict[str, Any]:
        """As plain data, ``created_at`` an ISO-8601 date like every date the API shows."""
        data = _Plain.to_dict(self)
        data["created_at"] = from_epoch(self.created_at).isoformat()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bullet:  # type: ignore[override]
        """Build from :meth:`to_dict`'s output (``created_at`` ISO or epoch seconds)."""
        created = data.get("created_at") if isinstance(data, Mapping) else None
        if isinstance(created, str):
            data = {**data, "created_at": to_epoch(datetime.fromisoformat(created))}
        # Not super(): slots dataclasses are rebuilt, so the implicit class cell is stale.
        return _Plain.from_dict.__func__(cls, data)  # type: ignore[attr-defined,no-any-return]


@dataclass(frozen=True, slots=True)
class Lesson(_Plain):
    """Something learned from a turn, not yet a bullet.

    ``type``: ``"strategy"`` (what helped), ``"anti_pattern"`` (what hurt),
    ``"observation"`` / ``"experience"`` (about the learner or the task),
    ``"preference"``, ``"fact"``. Unset fields are inferred by the curator.
    ``source`` names where it came from (a lesson key, a dialog id) and is kept on
    the bullet that holds the lesson.
    """

    content: str
    type: str = "strategy"
    tags: tuple[str, ...] = ()
    memory_type: str | None = None
    concept: str | None = None
    section: str | None = None
    topic: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class BulletTag(_Plain):
    """The reflector's verdict on a bullet that was in the prompt."""

    id: str
    tag: str = NEUTRAL  # "helpful", "harmful" or "neutral"


@dataclass(frozen=True, slots=True)
class Trace(_Plain):
    """What happened in one turn or task, as the reflector sees it.

    ``outcome``: ``"success"``, ``"failure"``, ``"partial"`` or None (unknown: the
    reflector reads ``feedback``). ``injected`` are the bullets that were in the
    prompt. ``lessons`` are lessons already known (from an upstream system or a
    data set); the heuristic reflector then adds none of its own. ``answer_mode``
    says where the answer came from (``"llm"``, ``"deterministic"``, ...).
    """

    question: str
    answer: str = ""
    feedback: str | None = None
    outcome: str | None = None
    injected: tuple[Bullet, ...] = ()
    messages: tuple[Message, ...] = ()
    learner_id: str = ""
    topic: str = ""
    lessons: tuple[Lesson, ...] = ()
    answer_mode: str = ""

    _nested: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trace:
        data = dict(data)
        data["injected"] = tuple(Bullet.from_dict(b) for b in data.get("injected") or ())
        data["lessons"] = tuple(Lesson.from_dict(b) for b in data.get("lessons") or ())
        data["messages"] = tuple(
            m if isinstance(m, Message) else Message(m["role"], m["content"], m.get("name"))
            for m in data.get("messages") or ()
        )
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, slots=True)
class Reflection(_Plain):
    """The reflector's output: lessons, and tags for the bullets that were used."""

    lessons: tuple[Lesson, ...] = ()
    bullet_tags: tuple[BulletTag, ...] = ()
    summary: str = ""
    outcome: str | None = None

    _nested: ClassVar[Mapping[str, Any]] = {"lessons": Lesson, "bullet_tags": BulletTag}


@dataclass(frozen=True, slots=True)
class Similar(_Plain):
    """An existing bullet and its similarity (cosine, [0, 1]) to a lesson."""

    bullet: Bullet
    score: float

    _nested: ClassVar[Mapping[str, Any]] = {"bullet": Bullet}


#: The similarity a lesson past the cap on new bullets needs to its nearest bullet to
#: reinforce it (cosine; the hashing and MiniLM embedders put unrelated sentences
#: well below it and paraphrases above).
OVERFLOW_FLOOR = 0.5


@dataclass(frozen=True, slots=True)
class CurationInput(_Plain):
    """Everything a curator decides from.

    ``candidates[i]`` lists the learner's existing bullets (same topic) most similar
    to ``reflection.lessons[i]``, best first. ``existing`` are the playbook bullets
    relevant to the question (context for an LLM curator). ``lesson_similarity[i][j]``
    is the similarity of lessons ``i`` and ``j`` of this turn (a lesson said twice is
    one lesson). ``max_new`` None means no cap; ``reinforce_threshold`` None means
    never reinforce instead of adding.
    """

    reflection: Reflection
    question: str = ""
    learner_id: str = ""
    topic: str = ""
    candidates: tuple[tuple[Similar, ...], ...] = ()
    existing: tuple[Bullet, ...] = ()
    lesson_similarity: tuple[tuple[float, ...], ...] = ()
    max_new: int | None = 2
    reinforce_threshold: float | None = 0.9
    #: A lesson past the cap reinforces its nearest bullet only at this similarity or
    #: more (an unrelated bullet must not gain from it); below, the lesson is dropped.
    overflow_floor: float = OVERFLOW_FLOOR

    _nested: ClassVar[Mapping[str, Any]] = {
        "reflection": Reflection,
        "candidates": (Similar,),
        "existing": Bullet,
    }


@dataclass(frozen=True, slots=True)
class NewBullet(_Plain):
    """A bullet the curator wants added. ``helpful`` starts at 1 (the lesson itself).
    ``lesson`` is the index of the reflection's lesson it holds, when known (past
    the cap on new bullets, that lesson's nearest bullet is reinforced instead)."""

    content: str
    kind: str = "strategy"
    memory_type: str = "procedural"
    section: str = ""
    topic: str = ""
    concept: str = ""
    tags: tuple[str, ...] = ()
    helpful: int = 1
    harmful: int = 0
    sources: tuple[str, ...] = ()
    lesson: int | None = None


@dataclass(frozen=True, slots=True)
class CounterUpdate(_Plain):
    """Counter increments for an existing bullet. ``sources`` are lessons it now also
    stands for (a reinforcement by a near-identical lesson)."""

    id: str
    helpful: int = 0
    harmful: int = 0
    sources: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Delta(_Plain):
    """A batch of playbook changes, applied atomically."""

    new: tuple[NewBullet, ...] = ()
    updates: tuple[CounterUpdate, ...] = ()
    removals: tuple[str, ...] = ()
    reasoning: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    _nested: ClassVar[Mapping[str, Any]] = {"new": NewBullet, "updates": CounterUpdate}

    @property
    def empty(self) -> bool:
        return not (self.new or self.updates or self.removals)


@dataclass(frozen=True, slots=True)
class Step(_Plain):
    """One step of a trajectory: ``type`` is ``"decision"``, ``"action"`` or
    ``"observation"`` (others are kept as given)."""

    type: str
    description: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Trajectory(_Plain):
    """One task execution as a reflector sees it: the task, its steps in
    order and how it ended (``status`` ``"success"``, ``"failure"`` or
    ``"partial"``; ``score`` in [0, 1])."""

    task: str
    task_type: str = ""
    status: str = ""
    score: float | None = None
    error: str | None = None
    steps: tuple[Step, ...] = ()
    id: str = ""

    _nested: ClassVar[Mapping[str, Any]] = {"steps": Step}


@dataclass(frozen=True, slots=True)
class Insights(_Plain):
    """What a reflection of trajectories found: ✓ successful
    patterns, ✗ failure patterns, ○ neutral (context-dependent) observations and
    recommendations, each one short reusable sentence.

    ``evidence`` maps a pattern to the ids of the trajectories that show it (a
    batch reflection's; a single reflection's patterns all rest on its one
    trajectory and leave it empty).
    """

    successful_patterns: tuple[str, ...] = ()
    failure_patterns: tuple[str, ...] = ()
    neutral_observations: tuple[str, ...] = ()
    recommendations: tuple[str, ...] = ()
    summary: str = ""
    evidence: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The patterns whose category was credited across trajectories (by their
    #: association with outcomes, not this run alone): curation moves a strategy to it.
    credited: tuple[str, ...] = ()
    #: The patterns the runs have not credited yet though both outcomes were seen: a
    #: strategy that only one run ever made ✓ or ✗ goes back to ○ until they do.
    doubted: tuple[str, ...] = ()

    #: The four lists, in the order a reflection gives them.
    LISTS: ClassVar[tuple[str, ...]] = ("successful_patterns", "failure_patterns", "neutral_observations", "recommendations")

    def lists(self) -> dict[str, list[str]]:
        """The four lists as plain data (what ``reflect`` returns under ``"insights"``)."""
        return {name: list(getattr(self, name)) for name in self.LISTS}

    @property
    def empty(self) -> bool:
        return not any(getattr(self, name) for name in self.LISTS)


# Set while a role's fallback answers for it: the heuristic then says it stands in
# for a model that failed, not for one that is switched off.
_STANDING_IN: contextvars.ContextVar[bool] = contextvars.ContextVar("memorist_standing_in", default=False)


def standing_in() -> bool:
    """Whether the running role answers as the fallback of a role that failed."""
    return _STANDING_IN.get()


def _as_fallback(call: Callable[[], T]) -> T:
    token = _STANDING_IN.set(True)
    try:
        return call()
    finally:
        _STANDING_IN.reset(token)


class _LearningRole(FallbackRole):
    """The ACE log line for a learning role that falls back."""

    #: Shown in log lines.
    label: str = ""

    def _log_fallback(self, exc: Exception) -> None:
        logger.warning("[%s] Falling back to %s: %s: %s", self.label, type(self.fallback).__name__, type(exc).__name__, exc)


class Reflector(_LearningRole):
    """Turns a :class:`Trace` into a :class:`Reflection`, and a :class:`Trajectory`
    (or several) into :class:`Insights`.

    Subclasses implement :meth:`_reflect` (and, to reflect on trajectories
    themselves, :meth:`_reflect_trajectory` / :meth:`_reflect_batch`; without
    them the fallback answers). Each public method calls its ``_`` method and, when
    it raises, logs the failure and asks :attr:`fallback` instead (None: re-raise).
    """

    role = "reflector"
    #: Answers when :meth:`_reflect` fails. Subclasses set it (the heuristic, usually).
    fallback: Reflector | None = None
    label: str = "Reflector"

    def reflect(self, trace: Trace) -> Reflection:
        return self._or_fallback(lambda: self._reflect(trace), lambda backup: _as_fallback(lambda: backup.reflect(trace)))

    def reflect_trajectory(self, trajectory: Trajectory) -> Insights:
        """What one trajectory shows (``memory.learning.reflect``)."""
        return self._or_fallback(
            lambda: self._reflect_trajectory(trajectory),
            lambda backup: _as_fallback(lambda: backup.reflect_trajectory(trajectory)),
        )

    def reflect_batch(self, trajectories: Sequence[Trajectory]) -> Insights:
        """The patterns several trajectories share (``memory.learning.batch_reflect``),
        each with the trajectories that show it in :attr:`Insights.evidence`."""
        items = tuple(trajectories)
        return self._or_fallback(
            lambda: self._reflect_batch(items),
            lambda backup: _as_fallback(lambda: backup.reflect_batch(items)),
        )

    @abc.abstractmethod
    def _reflect(self, trace: Trace) -> Reflection:
        """Lessons from the trace, and a tag for each bullet of ``trace.injected`` that
        clearly helped or hurt (others may be left out)."""

    def _reflect_trajectory(self, trajectory: Trajectory) -> Insights:
        raise NotImplementedError(f"{type(self).__name__} does not reflect on trajectories")

    def _reflect_batch(self, trajectories: Sequence[Trajectory]) -> Insights:
        raise NotImplementedError(f"{type(self).__name__} does not reflect on batches of trajectories")


def reinforce_overflow(
    nearest: tuple[str, float] | None, content: str, *, by: str = "Heuristic", log: logging.Logger | None = None,
    floor: float = 0.0,
) -> str | None:
    """What becomes of a lesson past the cap on new bullets (:func:`room_for_new`).

    It still counts, as one more helpful for ``nearest`` — the ``(id, similarity)``
    of the bullet most similar to it — whose id is returned, when that similarity is
    at least ``floor``; with no bullet that similar it is dropped (None): a lesson
    must not reinforce a bullet it says nothing about. Logged ``[Curator][<by>
    ReinforceOverflow]`` either way.
    """
    log = log or curator_log
    if nearest is None:
        log.info("[Curator][%s ReinforceOverflow] id=- score=0.000 dropped (no similar bullet) content=%s", by, content)
        return None
    if nearest[1] < floor:
        log.info("[Curator][%s ReinforceOverflow] id=%s score=%.3f dropped (below the floor %.2f) content=%s",
                 by, nearest[0], nearest[1], floor, content)
        return None
    log.info("[Curator][%s ReinforceOverflow] id=%s score=%.3f content=%s", by, nearest[0], nearest[1], content)
    return nearest[0]


def _lesson_of(data: CurationInput, bullet: NewBullet) -> int | None:
    lessons = data.reflection.lessons
    if bullet.lesson is not None and 0 <= bullet.lesson < len(lessons):
        return bullet.lesson
    key = bullet.content.strip().casefold()
    return next((i for i, x in enumerate(lessons) if x.content.strip().casefold() == key), None)


def cap_new(delta: Delta, data: CurationInput, *, by: str = "Heuristic") -> Delta:
    """The cap on new bullets per turn, applied to any curator's proposal:
    the first ``data.max_new`` new bullets stay (each logged ``[Curator][<by> New
    i]``), each one past the cap reinforces the bullet most similar to its lesson
    when it is at least ``data.overflow_floor`` similar, and is dropped otherwise
    (``[Curator][<by> ReinforceOverflow]``, :func:`reinforce_overflow`)."""
    keep: list[NewBullet] = []
    overflow: list[NewBullet] = []
    for bullet in delta.new:
        (keep if room_for_new(len(keep), data.max_new) else overflow).append(bullet)
    for i, bullet in enumerate(keep, 1):
        curator_log.info("[Curator][%s New %d] type=%s tags=%s content=%s", by, i, bullet.memory_type, list(bullet.tags), bullet.content)
    if not overflow:
        return delta
    updates = list(delta.updates)
    for bullet in overflow:
        index = _lesson_of(data, bullet)
        near = data.candidates[index] if index is not None and index < len(data.candidates) else ()
        target = reinforce_overflow((near[0].bullet.id, near[0].score) if near else None, bullet.content, by=by,
                                    floor=data.overflow_floor)
        if target is not None:  # every lesson the bullet stood for counts
            updates.append(CounterUpdate(target, helpful=max(1, bullet.helpful)))
    touched = {u.id for u in updates}
    return Delta(
        new=tuple(keep),
        updates=tuple(updates),
        removals=tuple(r for r in delta.removals if r not in touched),
        reasoning=delta.reasoning,
        metadata=delta.metadata,
    )


class Curator(_LearningRole):
    """Turns a :class:`CurationInput` into a :class:`Delta`.

    Rules every curator follows: updates and removals only name ids shown in
    ``candidates``, ``existing`` or the reflection's bullet tags; a lesson at least
    ``reinforce_threshold`` similar to a candidate reinforces it instead of adding.
    The cap of ``max_new`` new bullets is this base's: :meth:`curate` applies it
    (:func:`cap_new`) to whatever ``_curate`` — or the fallback — proposed.
    """

    role = "curator"
    fallback: Curator | None = None
    label: str = "Curator"
    #: Names the curator in log lines: ``[Curator][<by> New 1]``.
    by: ClassVar[str] = "Heuristic"

    def curate(self, data: CurationInput) -> Delta:
        by, delta = self._propose(data)
        return cap_new(delta, data, by=by)

    def _propose(self, data: CurationInput) -> tuple[str, Delta]:
        """The delta before the cap, and the ``by`` of the curator that answered."""
        return self._or_fallback(
            lambda: (self.by, self._curate(data)),
            lambda backup: _as_fallback(lambda: backup._propose(data)),
        )

    @abc.abstractmethod
    def _curate(self, data: CurationInput) -> Delta: ...


def bullet_from(record: Any, *, score: float = 0.0, relevance: float | None = None) -> Bullet:
    """The :class:`Bullet` view of a stored memory record."""
    return Bullet(
        id=record.id,
        content=record.text,
        section=record.section,
        kind=record.kind.value,
        memory_type=record.memory_class.value,
        topic=record.topic,
        concept=record.concept,
        tags=tuple(record.tags),
        helpful=record.helpful,
        harmful=record.harmful,
        score=round(float(score), 6),
        relevance=None if relevance is None else round(float(relevance), 6),
        learner_id=record.scope.user_id,
        conversation_id=record.scope.run_id,
        created_at=record.created_at,
        sources=tuple(record.metadata.get("sources", ())),
    )


def messages_of(items: Sequence[Any]) -> tuple[Message, ...]:
    """Messages from ``Message`` objects or ``{"role", "content"}`` mappings."""
    out = []
    for m in items:
        if isinstance(m, Message):
            out.append(m)
        else:
            out.append(Message(str(m.get("role", "user")), str(m.get("content", "")), m.get("name")))
    return tuple(out)


__all__ = [
    "HARMFUL",
    "HELPFUL",
    "NEUTRAL",
    "Bullet",
    "BulletTag",
    "CounterUpdate",
    "CurationInput",
    "Curator",
    "Delta",
    "Insights",
    "Lesson",
    "NewBullet",
    "Reflection",
    "Reflector",
    "Similar",
    "Step",
    "Trace",
    "Trajectory",
    "bullet_from",
    "OVERFLOW_FLOOR",
    "cap_new",
    "messages_of",
    "reinforce_overflow",
    "standing_in",
]
