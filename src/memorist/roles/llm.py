"""LLM implementations of the roles, each falling back to its heuristic.

Every role here calls its model through :meth:`memorist.llm.base.LLM.generate_json`
(timeouts, retries, JSON repair, accounting) with its prompt module from
:mod:`memorist.prompts`. When the model still fails — unreachable, rate limited,
unusable output after the repair retry — :class:`~memorist.roles.base.FallbackRole`
(the one home of that rule, for these roles and the learning roles' bases alike)
logs why, tells the open :func:`~memorist.llm.base.recording` (so the pipeline can
mark the turn pending), and returns the heuristic's answer. A failing model never
costs the user a memory.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..errors import ProviderError
from ..llm.base import LLM
from ..model import Decision, Existing, Fact, Message
from ..policies.text import preview
from ..prompts import MAX_TEXT_CHARS, normalize, too_long
from ..prompts import curation as curation_prompt
from ..prompts import evaluation as evaluation_prompt
from ..prompts import extraction as extraction_prompt
from ..prompts import memory_update as update_prompt
from ..prompts import reflection as reflection_prompt
from ..prompts import trajectory as trajectory_prompt
from .base import Extractor, FallbackRole, Reconciler
from .evaluator import Evaluation, Evaluator, Gap, HeuristicEvaluator
from .extractor import MAX_FACTS_PER_TURN, first_facts
from .learning import (
    HARMFUL,
    HELPFUL,
    BulletTag,
    CounterUpdate,
    CurationInput,
    Curator,
    Delta,
    Insights,
    Lesson,
    NewBullet,
    Reflection,
    Reflector,
    Trace,
    Trajectory,
)

logger = logging.getLogger("memorist")


class _ModelRole(FallbackRole):
    """The log line of a model-backed ingest or evaluation role that falls back."""

    llm: LLM

    def _log_fallback(self, exc: Exception) -> None:
        logger.warning(
            "memorist: %s %s failed, using the heuristic %s instead: %s",
            self.llm.name, self.role, self.role, preview(str(exc), 300),
            exc_info=not isinstance(exc, ProviderError),  # a traceback only for the unexpected
        )


class LLMExtractor(_ModelRole, Extractor):
    """Fact extraction by a model.

    ``fallback`` (default :class:`~memorist.roles.extractor.HeuristicExtractor`) answers
    when the model fails; with ``fallback=None`` a failed extraction yields no facts
    (the turn stays in the log, pending, for :meth:`memorist.Memory.reprocess`).
    A reply with a fact longer than ``max_chars`` is unusable (repair retry, then the
    fallback). Repeated facts are dropped, then the first ``max_facts`` kept (the cut
    is logged).
    """

    role = "extractor"

    def __init__(self, llm: LLM, *, fallback: Extractor | None | str = "heuristic", max_facts: int = MAX_FACTS_PER_TURN,
                 max_chars: int = MAX_TEXT_CHARS) -> None:
        if fallback == "heuristic":
            from .extractor import HeuristicExtractor

            fallback = HeuristicExtractor()
        self.llm = llm
        self.fallback: Extractor | None = fallback  # type: ignore[assignment]
        self.max_facts = max_facts
        self.max_chars = max_chars

    def extract(self, messages: Sequence[Message], *, timestamp: datetime | None = None) -> list[Fact]:
        kept = [m for m in messages if m.role != "system" and m.content.strip()]
        if not kept:
            return []
        # Without a fallback a failed extraction yields no facts, but is still noted:
        # that is what leaves the turn pending.
        return self._or_fallback(
            lambda: self._ask(kept, timestamp),
            lambda backup: backup.extract(messages, timestamp=timestamp),
            without=[],
        )

    def _check(self, result: extraction_prompt.ExtractionResult) -> None:
        problems = too_long(((f"facts[{i}]", f.text) for i, f in enumerate(result.facts)), self.max_chars)
        if problems:
            raise ValueError("; ".join(problems[:8]))

    def _ask(self, kept: Sequence[Message], timestamp: datetime | None) -> list[Fact]:
        result = self.llm.generate_json(
            extraction_prompt.ExtractionResult,
            extraction_prompt.render(kept, timestamp),
            system=extraction_prompt.SYSTEM,
            role=self.role,
            prompt_version=extraction_prompt.VERSION,
            check=self._check,
        )
        facts: list[Fact] = []
        seen: set[str] = set()
        # Repeats first, the cap second: fifty copies of one fact must not crowd out the next.
        for item in result.facts:
            text = " ".join(item.text.split())
            key = normalize(text)
            if key and key not in seen:
                seen.add(key)
                facts.append(Fact(text, kind=item.kind, source_role=item.source_role, importance=item.importance))
        return first_facts(facts, self.max_facts, f"{self.llm.name} extractor", found="returned", noun="distinct facts")


class LLMReconciler(_ModelRole, Reconciler):
    """Memory update (ADD / UPDATE / DELETE / NONE) by a model.

    The memories the pipeline found for the facts are shown under small integer ids;
    :func:`memorist.prompts.memory_update.check` rejects any other id (and a fact left
    without a decision), which earns the model one repair retry and then the
    heuristic. With no stored memory to compare against, no model is called: the
    heuristic's de-duplication of the new facts is all there is to decide. A reply
    that deletes or changes more memories than the new facts can justify, or writes
    a memory longer than ``max_chars``, is refused the same way
    (:func:`memorist.prompts.memory_update.check`).
    """

    role = "reconciler"

    def __init__(self, llm: LLM, *, fallback: Reconciler | None = None, max_chars: int = MAX_TEXT_CHARS) -> None:
        if fallback is None:
            from .reconciler import HeuristicReconciler

            fallback = HeuristicReconciler()
        self.llm = llm
        self.fallback = fallback
        self.max_chars = max_chars

    def reconcile(self, facts: Sequence[Fact], existing: Sequence[Sequence[Existing]]) -> list[Decision]:
        if not facts:
            return []
        shown = update_prompt.shown_memories(existing)
        if not shown:
            return self.fallback.reconcile(facts, existing)
        return self._or_fallback(lambda: self._ask(facts, shown), lambda backup: backup.reconcile(facts, existing))

    def _ask(self, facts: Sequence[Fact], shown: Sequence[Existing]) -> list[Decision]:
        result = self.llm.generate_json(
            update_prompt.MemoryUpdateResult,
            update_prompt.render(shown, facts),
            system=update_prompt.SYSTEM,
            role=self.role,
            prompt_version=update_prompt.VERSION,
            check=lambda r: update_prompt.check(r, shown, facts, max_chars=self.max_chars),
        )
        return update_prompt.to_decisions(result, shown, facts)


class LLMEvaluator(_ModelRole, Evaluator):
    """Fresh-context evaluation by a model: each call carries only the
    task, the criteria and the output."""

    role = "evaluator"

    def __init__(self, llm: LLM, *, fallback: Evaluator | None = None) -> None:
        self.llm = llm
        self.fallback = fallback or HeuristicEvaluator()

    def evaluate(self, task: str, criteria: str, output: str) -> Evaluation:
        return self._or_fallback(
            lambda: self._ask(task, criteria, output), lambda backup: backup.evaluate(task, criteria, output)
        )

    def _ask(self, task: str, criteria: str, output: str) -> Evaluation:
        result = self.llm.generate_json(
            evaluation_prompt.EvaluationResult,
            evaluation_prompt.render(task, criteria, output),
            system=evaluation_prompt.SYSTEM,
            role=self.role,
            prompt_version=evaluation_prompt.VERSION,
        )
        # A gap of no words (whitespace) says nothing: left out, the model's verdict kept.
        gaps = [Gap(g.description.strip(), g.severity, g.criterion.strip()) for g in result.identified_gaps if g.description.strip()]
        # Unrounded: PAIR compares it with the threshold (94.96 is below 95); displays round.
        return Evaluation(float(result.success_criteria_met), gaps, result.summary.strip(), self.llm.name)


class LLMReflector(Reflector):
    """Reflection by a model: ✓ successful and ✗ failure patterns, ○ neutral
    observations, recommendations, what the turn showed about the learner, and a
    helpful/harmful tag for each bullet that was in the prompt (shown under small
    ids; any other id is rejected). Lessons a trace already carries are used as
    they are (the heuristic answers; no model call). The :class:`Reflector` base
    falls back to ``fallback`` (the heuristic) when the model fails.

    On trajectories it asks the trajectory reflection prompt
    (:mod:`memorist.prompts.trajectory`); a batch names, per pattern, the
    trajectories that show it (any other number is rejected: repair retry, then
    the heuristic).
    """

    label = "Reflector"
    role = "reflector"
    #: (result field, lesson type), in the order lessons are listed.
    FIELDS = (
        ("successful_patterns", "strategy"),
        ("recommendations", "strategy"),
        ("failure_patterns", "anti_pattern"),
        ("learner_observations", "experience"),
        ("neutral_observations", "observation"),
    )

    def __init__(self, llm: LLM, *, fallback: Reflector | None = None, max_lessons: int = 8) -> None:
        if fallback is None:
            from .reflector import HeuristicReflector

            fallback = HeuristicReflector()
        self.llm = llm
        self.fallback = fallback
        self.max_lessons = max_lessons

    def _reflect(self, trace: Trace) -> Reflection:
        if trace.lessons:
            return self.fallback.reflect(trace)  # type: ignore[union-attr]
        bullets = list(trace.injected)
        conversation = "\n".join(f"{m.role}: {m.content}" for m in trace.messages if m.role != "system")
        result = self.llm.generate_json(
            reflection_prompt.ReflectionResult,
            reflection_prompt.render(
                question=trace.question, answer=trace.answer, feedback=trace.feedback, outcome=trace.outcome,
                bullets=[b.content for b in bullets], conversation=conversation, topic=trace.topic,
            ),
            system=reflection_prompt.SYSTEM,
            role=self.role,
            prompt_version=reflection_prompt.VERSION,
            check=lambda r: reflection_prompt.check(r, len(bullets), max_chars=MAX_TEXT_CHARS),
            on_reply=lambda raw: logger.info("[Reflector][LLM] raw output: %s", preview(raw, 500)),
        )
        lessons: list[Lesson] = []
        seen: set[str] = set()
        for name, kind in self.FIELDS:
            for text in getattr(result, name):
                key = normalize(text)
                if key and key not in seen and len(lessons) < self.max_lessons:
                    seen.add(key)
                    lessons.append(Lesson(content=text, type=kind, topic=trace.topic or None))
        tags: dict[str, str] = {}
        for verdict in result.bullet_tags:
            if verdict.tag in (HELPFUL, HARMFUL):
                tags.setdefault(bullets[int(verdict.id)].id, verdict.tag)
        for i, lesson in enumerate(lessons, 1):
            logger.info("[Reflector][LLM Lesson %d] type=%s content=%s", i, lesson.type, lesson.content)
        outcome = result.outcome if result.outcome != "unknown" else trace.outcome
        summary = result.summary.strip() or f"{len(lessons)} lesson(s); outcome={outcome or 'unknown'}"
        return Reflection(
            lessons=tuple(lessons),
            bullet_tags=tuple(BulletTag(i, t) for i, t in tags.items()),
            summary=summary,
            outcome=outcome,
        )

    def _reflect_trajectory(self, trajectory: Trajectory) -> Insights:
        steps = [s.to_dict() for s in trajectory.steps]
        result = self.llm.generate_json(
            trajectory_prompt.TrajectoryInsights,
            trajectory_prompt.render(
                task=trajectory.task, status=trajectory.status or "unknown", score=trajectory.score,
                steps=steps, error=trajectory.error, task_type=trajectory.task_type,
            ),
            system=trajectory_prompt.SYSTEM,
            role=self.role,
            prompt_version=trajectory_prompt.VERSION,
            check=_patterns_fit,
            on_reply=lambda raw: logger.info("[Reflector][LLM] raw output: %s", preview(raw, 500)),
        )
        return Insights(
            successful_patterns=self._kept(result.successful_patterns),
            failure_patterns=self._kept(result.failure_patterns),
            neutral_observations=self._kept(result.neutral_observations),
            recommendations=self._kept(result.recommendations),
            summary=result.summary.strip(),
        )

    def _reflect_batch(self, trajectories: Sequence[Trajectory]) -> Insights:
        listed = [
            {"task": t.task, "status": t.status, "score": t.score, "error": t.error, "steps": [s.to_dict() for s in t.steps]}
            for t in trajectories
        ]
        result = self.llm.generate_json(
            trajectory_prompt.BatchInsights,
            trajectory_prompt.render_batch(listed),
            system=trajectory_prompt.BATCH_SYSTEM,
            role=self.role,
            prompt_version=trajectory_prompt.BATCH_VERSION,
            check=lambda r: _patterns_fit(r) or trajectory_prompt.check_batch(r, len(listed)),
            on_reply=lambda raw: logger.info("[Reflector][LLM] raw output: %s", preview(raw, 500)),
        )
        lists: dict[str, tuple[str, ...]] = {}
        evidence: dict[str, tuple[str, ...]] = {}
        for name in Insights.LISTS:
            kept = []
            for item in getattr(result, name):
                text = " ".join(item.pattern.split())
                if not text or len(kept) >= self.max_lessons:
                    continue
                kept.append(text)
                evidence[text] = tuple(dict.fromkeys(trajectories[n].id for n in item.trajectories))
            lists[name] = tuple(kept)
        return Insights(**lists, summary=result.summary.strip(), evidence=evidence)

    def _kept(self, items: Sequence[str]) -> tuple[str, ...]:
        seen: set[str] = set()
        out: list[str] = []
        for text in items:
            key = normalize(text)
            if key and key not in seen and len(out) < self.max_lessons:
                seen.add(key)
                out.append(text)
        return tuple(out)


def _patterns_fit(result: Any) -> None:
    """Reject a trajectory reflection with a pattern longer than a memory may be."""
    texts = (
        (f"{name}[{i}]", item if isinstance(item, str) else item.pattern)
        for name in ("successful_patterns", "failure_patterns", "neutral_observations", "recommendations")
        for i, item in enumerate(getattr(result, name))
    )
    problems = too_long(texts)
    if problems:
        raise ValueError("; ".join(problems[:8]))


class LLMCurator(Curator):
    """The tutoring playbooks' curator by a model, JSON only: current bullets + lessons → a delta.

    The model decides, per lesson, to reinforce an existing bullet or add a new one,
    and may remove bullets the lessons show wrong. The curator's rules hold whatever the
    model says: a new bullet whose lesson is at least ``reinforce_threshold``
    similar to an existing bullet reinforces it instead; past ``max_new`` new
    bullets the overflow reinforces the nearest bullet (``LLM ReinforceOverflow``);
    the reflection's helpful/harmful tags are counted as the heuristic counts them;
    an id that was not shown is rejected (repair retry, then the heuristic). A
    bullet reinforced several times in one reply counts once per lesson, and the
    reply adds at most ``MAX_INCREMENT`` (5) to any bullet's helpful and harmful
    counters. The raw output is logged. The :class:`Curator` base falls back to
    ``fallback``.
    """

    label = "Curator"
    role = "curator"
    by = "LLM"

    def __init__(self, llm: LLM, *, fallback: Curator | None = None) -> None:
        if fallback is None:
            from .curator import HeuristicCurator

            fallback = HeuristicCurator()
        self.llm = llm
        self.fallback = fallback

    def _curate(self, data: CurationInput) -> Delta:
        from .curator import new_bullet

        lessons = list(data.reflection.lessons)
        if not any(lesson.content.strip() for lesson in lessons):
            return self.fallback._curate(data)  # type: ignore[union-attr]  # tags only: nothing to ask
        shown: dict[str, int] = {}
        texts: list[str] = []
        ids: list[str] = []

        def show(bullet_id: str, content: str) -> int:
            if bullet_id not in shown:
                shown[bullet_id] = len(ids)
                ids.append(bullet_id)
                texts.append(content)
            return shown[bullet_id]

        candidates = [
            [(show(s.bullet.id, s.bullet.content), s.score) for s in (data.candidates[i] if i < len(data.candidates) else ())]
            for i in range(len(lessons))
        ]
        for bullet in data.existing:
            show(bullet.id, bullet.content)
        result = self.llm.generate_json(
            curation_prompt.CurationResult,
            curation_prompt.render(
                question=data.question, lessons=[lesson.content for lesson in lessons], candidates=candidates,
                bullets=texts, threshold=data.reinforce_threshold,
            ),
            system=curation_prompt.system(data.max_new),
            role=self.role,
            prompt_version=curation_prompt.VERSION,
            check=lambda r: curation_prompt.check(r, shown=len(ids), lessons=len(lessons)),
            on_reply=lambda raw: logger.info("[Curator][LLM] raw output: %s", preview(raw, 500)),
        )
        counts: dict[str, list] = {}

        def count(bullet_id: str, helpful: int = 0, harmful: int = 0, source: str | None = None) -> None:
            entry = counts.setdefault(bullet_id, [0, 0, []])
            entry[0] += helpful
            entry[1] += harmful
            if source and source not in entry[2]:
                entry[2].append(source)

        for tag in data.reflection.bullet_tags:
            if tag.tag == HELPFUL:
                count(tag.id, helpful=1)
            elif tag.tag == HARMFUL:
                count(tag.id, harmful=1)
        # One reinforcement per (bullet, lesson), and at most MAX_INCREMENT per bullet
        # from the whole reply: repeating an entry must not inflate a counter.
        cap = curation_prompt.MAX_INCREMENT
        given: dict[str, list[int]] = {}
        seen_pairs: set[tuple[str, int | None]] = set()

        def reinforce(bullet_id: str, lesson_no: int | None, helpful: int, harmful: int, source: str | None) -> bool:
            if (bullet_id, lesson_no) in seen_pairs:
                return False
            seen_pairs.add((bullet_id, lesson_no))
            so_far = given.setdefault(bullet_id, [0, 0])
            helpful, harmful = min(helpful, cap - so_far[0]), min(harmful, cap - so_far[1])
            so_far[0] += helpful
            so_far[1] += harmful
            count(bullet_id, helpful, harmful, source)
            return True

        repeated = 0
        for r in result.reinforce:
            lesson = lessons[r.lesson] if r.lesson is not None and r.lesson < len(lessons) else None
            if reinforce(ids[int(r.id)], r.lesson, r.helpful, r.harmful, lesson.source if lesson else None):
                logger.info("[Curator][LLM Reinforce] id=%s content=%s", ids[int(r.id)], texts[int(r.id)])
            else:
                repeated += 1
        new: list[NewBullet] = []
        added: set[str] = set()
        # One new bullet per lesson (each lesson gets one decision), as many unnumbered
        # ones as there are lessons: past the cap on new bullets each would reinforce.
        decided: set[int] = set()
        unnumbered = 0
        for out in result.new_bullets:
            if out.lesson is not None and out.lesson in decided or out.lesson is None and unnumbered >= len(lessons):
                repeated += 1
                continue
            if out.lesson is None:
                unnumbered += 1
            else:
                decided.add(out.lesson)
            lesson = lessons[out.lesson] if out.lesson is not None and out.lesson < len(lessons) else None
            near = candidates[out.lesson] if lesson is not None else []
            best = max(near, key=lambda c: c[1], default=None)
            source = lesson.source if lesson else None
            threshold = data.reinforce_threshold
            if best is not None and threshold is not None and best[1] >= threshold:
                if reinforce(ids[best[0]], out.lesson, 1, 0, source):
                    logger.info("[Curator][LLM Reinforce] id=%s score=%.3f content=%s", ids[best[0]], best[1], out.content)
                else:
                    repeated += 1
                continue
            key = normalize(out.content)
            if not key or key in added:
                continue
            # Past the cap on new bullets the Curator base reinforces instead.
            added.add(key)
            base = Lesson(
                content=out.content,
                type=lesson.type if lesson else "strategy",
                tags=tuple(out.tags),
                memory_type=out.memory_type,
                concept=lesson.concept if lesson else None,
                section=out.section.strip() or (lesson.section if lesson else None),
                topic=lesson.topic if lesson else None,
                source=source,
            )
            new.append(new_bullet(base, topic=data.topic, index=out.lesson if lesson is not None else None))
        if repeated:
            logger.warning("[Curator][LLM] %d repeated reinforcement(s) ignored", repeated)
        removals = tuple(dict.fromkeys(ids[int(r.id)] for r in result.remove if ids[int(r.id)] not in counts))
        for r in result.remove:
            logger.info("[Curator][LLM Remove] id=%s reason=%s", ids[int(r.id)], preview(r.reason, 200))
        return Delta(
            new=tuple(new),
            updates=tuple(CounterUpdate(i, v[0], v[1], tuple(v[2])) for i, v in counts.items()),
            removals=removals,
            reasoning=result.reasoning.strip() or "llm curation",
            metadata={"num_lessons": len(lessons), "learner_id": data.learner_id, "topic": data.topic, "curator": self.llm.name},
        )


def curator_uses_llm() -> bool:
    """``ACE_CURATOR_USE_LLM`` (default false): whether the learning roles
    (reflector and curator) call a model."""
    from .. import config

    return config.curator_uses_llm()


def learning_llm(spec: str | LLM | None = None, *, enabled: bool | None = None) -> LLM | None:
    """The model of the learning roles, or None for the heuristics.

    ``spec`` when given (``"none"`` for no model); else, only when the learning
    roles use a model (``enabled``; None: ``ACE_CURATOR_USE_LLM``):
    ``MEMORIST_LLM``, else Gemini when ``GEMINI_API_KEY`` is set (configured by
    ``GEMINI_MODEL`` and ``ACE_LLM_TEMPERATURE``). Nothing is called
    unless so configured.
    """
    from .. import config
    from ..llm import resolve_llm

    if spec is not None:
        return resolve_llm(spec)
    if not (curator_uses_llm() if enabled is None else enabled):
        return None
    if config.llm_spec():
        return resolve_llm(None)
    if config.gemini_api_key():
        return resolve_llm("gemini")
    from ..errors import ConfigurationError

    raise ConfigurationError(
        "ACE_CURATOR_USE_LLM is true but no model is configured: set MEMORIST_LLM (e.g. openai:gpt-5-mini) or GEMINI_API_KEY"
    )


__all__ = [
    "LLMCurator",
    "LLMEvaluator",
    "LLMExtractor",
    "LLMReconciler",
    "LLMReflector",
    "curator_uses_llm",
    "learning_llm",
]
