"""Deterministic curators: reinforce-over-clone (per-learner) and always-append (the ACE baseline).

:class:`HeuristicCurator` follows the per-learner rules: a lesson at least
``reinforce_threshold`` similar to an existing bullet of the learner and topic
increments that bullet's helpful count instead of cloning it; every other lesson
is proposed as a new bullet with inferred tags, topic, concept, memory type and
section. The cap of ``max_new`` new bullets per turn is applied by the
:class:`~memorist.roles.learning.Curator` base to whatever a curator proposes: the
overflow falls back to reinforcing the most similar bullet (logged ``Heuristic
ReinforceOverflow``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from ..policies.taxonomy import (
    GENERAL_TOPIC,
    infer_concept,
    infer_memory_type,
    infer_topic,
    lesson_kind,
    normalize_tags,
    section_for,
    snake_case,
)
from .learning import (
    HARMFUL,
    HELPFUL,
    CounterUpdate,
    CurationInput,
    Curator,
    Delta,
    Lesson,
    NewBullet,
    Similar,
    reinforce_overflow,
    standing_in,
)

logger = logging.getLogger("memorist.ace.curator")


def new_bullet(lesson: Lesson, *, topic: str = "", normalise: bool = True, index: int | None = None) -> NewBullet:
    """A lesson as a new bullet, with every attribute it lacks inferred (``index``:
    the lesson's place in its reflection)."""
    kind = lesson_kind(lesson.type)
    memory_type = lesson.memory_type if lesson.memory_type in ("semantic", "episodic", "procedural") else None
    memory_type = memory_type or infer_memory_type(lesson.content, kind, lesson.tags)
    topic = snake_case(lesson.topic or topic or infer_topic(lesson.content)) or GENERAL_TOPIC
    concept = snake_case(lesson.concept or "") or infer_concept(lesson.content)
    raw_tags = [*lesson.tags, lesson.type, topic, *([concept] if concept else [])]
    tags = normalize_tags(raw_tags) if normalise else list(dict.fromkeys(t for t in raw_tags if t))
    return NewBullet(
        content=lesson.content.strip(),
        kind=kind.value,
        memory_type=memory_type,
        section=lesson.section or section_for(kind),
        topic=topic,
        concept=concept,
        tags=tuple(tags),
        helpful=1,
        harmful=0,
        sources=(lesson.source,) if lesson.source else (),
        lesson=index,
    )


class _Counts:
    def __init__(self) -> None:
        self.order: list[str] = []
        self.values: dict[str, list] = {}

    def add(self, bullet_id: str, *, helpful: int = 0, harmful: int = 0, source: str | None = None) -> None:
        if bullet_id not in self.values:
            self.order.append(bullet_id)
            self.values[bullet_id] = [0, 0, []]
        entry = self.values[bullet_id]
        entry[0] += helpful
        entry[1] += harmful
        if source and source not in entry[2]:
            entry[2].append(source)

    def updates(self) -> tuple[CounterUpdate, ...]:
        return tuple(
            CounterUpdate(i, self.values[i][0], self.values[i][1], tuple(self.values[i][2])) for i in self.order
        )


def _tag_counts(data: CurationInput) -> _Counts:
    counts = _Counts()
    for tag in data.reflection.bullet_tags:
        if tag.tag == HELPFUL:
            counts.add(tag.id, helpful=1)
        elif tag.tag == HARMFUL:
            counts.add(tag.id, harmful=1)
    return counts


class HeuristicCurator(Curator):
    """Reinforce-over-clone with a cap on new bullets (the per-learner preset's curator)."""

    label = "Curator"

    def __init__(self, *, normalise_tags: bool = True) -> None:
        self.normalise_tags = normalise_tags

    @staticmethod
    def _twin(data: CurationInput, i: int, outcome: dict[int, tuple[str, Any]], threshold: float | None) -> int | None:
        """An earlier lesson of this turn that says the same as lesson ``i``, if any."""
        if threshold is None or i >= len(data.lesson_similarity):
            return None
        row = data.lesson_similarity[i]
        best = max((j for j in outcome if j < i and j < len(row)), key=lambda j: row[j], default=None)
        return best if best is not None and row[best] >= threshold else None

    def _curate(self, data: CurationInput) -> Delta:
        lessons = data.reflection.lessons
        counts = _tag_counts(data)
        if lessons:
            if standing_in():
                logger.info("[Curator] Using heuristic delta generation (LLM failed; the heuristic stands in).")
            else:
                logger.info("[Curator] Using heuristic delta generation (LLM disabled).")
        new: list[NewBullet] = []
        threshold = data.reinforce_threshold
        # What each earlier lesson of this turn became: ("new", index) or ("bullet", id).
        outcome: dict[int, tuple[str, Any]] = {}
        for i, lesson in enumerate(lessons):
            content = lesson.content.strip()
            if not content:
                continue
            twin = self._twin(data, i, outcome, threshold)
            if twin is not None:
                what, ref = outcome[twin]
                outcome[i] = outcome[twin]
                if what == "new":
                    held = new[ref]
                    sources = held.sources + ((lesson.source,) if lesson.source and lesson.source not in held.sources else ())
                    new[ref] = dataclasses.replace(held, helpful=held.helpful + 1, sources=sources)
                else:
                    counts.add(ref, helpful=1, source=lesson.source)
                logger.info("[Curator][Heuristic Reinforce] lesson=%d same as lesson=%d content=%s", i + 1, twin + 1, content)
                continue
            candidates: Sequence[Similar] = data.candidates[i] if i < len(data.candidates) else ()
            best = candidates[0] if candidates else None
            if threshold is not None and best is not None and best.score >= threshold:
                counts.add(best.bullet.id, helpful=1, source=lesson.source)
                outcome[i] = ("bullet", best.bullet.id)
                logger.info("[Curator][Heuristic Reinforce] id=%s score=%.3f content=%s", best.bullet.id, best.score, content)
                continue
            # New; past the cap the base turns it into a reinforcement (Curator.curate).
            outcome[i] = ("new", len(new))
            new.append(new_bullet(lesson, topic=data.topic, normalise=self.normalise_tags, index=i))
        return Delta(
            new=tuple(new),
            updates=counts.updates(),
            reasoning="heuristic: reinforce over clone",
            metadata={"num_lessons": len(lessons), "learner_id": data.learner_id, "topic": data.topic},
        )


class AppendCurator(Curator):
    """The ACE baseline's curator: every lesson becomes a new bullet."""

    label = "Curator"

    def _curate(self, data: CurationInput) -> Delta:
        counts = _tag_counts(data)
        new = [
            new_bullet(lesson, topic=data.topic, normalise=False, index=i)
            for i, lesson in enumerate(data.reflection.lessons)
            if lesson.content.strip()
        ]
        return Delta(new=tuple(new), updates=counts.updates(), reasoning="heuristic: lessons to bullets")


__all__ = ["AppendCurator", "HeuristicCurator", "new_bullet", "reinforce_overflow"]
