"""The role seams of the learning pipeline: :class:`Reflector` and :class:`Curator`.

Spec 000's loop is reflect → curate → apply the delta. The two roles are pure: plain,
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

The deterministic heuristics (:class:`~engram.roles.reflector.HeuristicReflector`,
:class:`~engram.roles.curator.HeuristicCurator`) are the default. An LLM
implementation subclasses the same base and implements ``_reflect`` / ``_curate``;
the base owns the fallback (through :class:`~engram.roles.base.FallbackRole`, as the
LLM extractor and reconciler do): when ``_reflect`` / ``_curate`` raises, the
failure is logged and the role's ``fallback`` (the heuristic by default) answers
instead, so no turn's input is ever lost.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from ..model import Message, from_epoch, to_epoch
from .base import FallbackRole

logger = logging.getLogger("engram.ace.roles")

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

    _nested: ClassVar[Mapping[str, Any]] = {
        "reflection": Reflection,
        "candidates": (Similar,),
        "existing": Bullet,
    }


@dataclass(frozen=True, slots=True)
class NewBullet(_Plain):
    """A bullet the curator wants added. ``helpful`` starts at 1 (the lesson itself)."""

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


class _LearningRole(FallbackRole):
    """Spec 000's log line for a learning role that falls back."""

    #: Shown in log lines.
    label: str = ""

    def _log_fallback(self, exc: Exception) -> None:
        logger.warning("[%s] Falling back to %s: %s: %s", self.label, type(self.fallback).__name__, type(exc).__name__, exc)


class Reflector(_LearningRole):
    """Turns a :class:`Trace` into a :class:`Reflection`.

    Subclasses implement :meth:`_reflect`. :meth:`reflect` calls it and, when it
    raises, logs the failure and asks :attr:`fallback` instead (None: re-raise).
    """

    role = "reflector"
    #: Answers when :meth:`_reflect` fails. Subclasses set it (the heuristic, usually).
    fallback: Reflector | None = None
    label: str = "Reflector"

    def reflect(self, trace: Trace) -> Reflection:
        return self._or_fallback(lambda: self._reflect(trace), lambda backup: backup.reflect(trace))

    @abc.abstractmethod
    def _reflect(self, trace: Trace) -> Reflection:
        """Lessons from the trace, and a tag for each bullet of ``trace.injected`` that
        clearly helped or hurt (others may be left out)."""


class Curator(_LearningRole):
    """Turns a :class:`CurationInput` into a :class:`Delta`.

    Rules every curator follows (the pipeline enforces the first two anyway): at
    most ``max_new`` new bullets; updates and removals only name ids shown in
    ``candidates``, ``existing`` or the reflection's bullet tags. A lesson at least
    ``reinforce_threshold`` similar to a candidate reinforces it instead of adding.
    """

    role = "curator"
    fallback: Curator | None = None
    label: str = "Curator"

    def curate(self, data: CurationInput) -> Delta:
        return self._or_fallback(lambda: self._curate(data), lambda backup: backup.curate(data))

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
    "Lesson",
    "NewBullet",
    "Reflection",
    "Reflector",
    "Similar",
    "Trace",
    "bullet_from",
    "messages_of",
]
