"""Self-evolving playbooks per learner, on a :class:`~memorist.Memory`.

A playbook is what an agent has learned about teaching one learner: strategies that
helped, mistakes to avoid, what the learner struggles with and prefers. Each bullet
is a memory in the learner's space (``user_id`` = the learner), so it lasts across
conversations (``run_id`` = the conversation) and the normal API sees it.

>>> from memorist import Memory, Playbook
>>> memory = Memory(":memory:", embedder="hashing")
>>> playbook = Playbook(memory)
>>> turn = playbook.turn("sam", "monday")
>>> turn.learn(question="I get confused when adding fractions with different denominators", feedback="Thanks, that helped")["num_new_bullets"]
1
>>> turn = playbook.turn("sam", "friday")   # a new conversation, the same learner
>>> [b.content for b in turn.retrieve("How do I add fractions with different denominators?")]
['Learner gets confused when adding fractions with different denominators']
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import validate
from ..errors import ValidationError
from ..model import MemoryRecord, Message
from ..pipelines.learn import LearningPipeline, PlaybookState
from ..pipelines.playbooks import category, evidence_of, is_strategy_of, playbook_of, with_evidence
from ..policies.decay import record_score
from ..policies.dedup import choose_first_seen, choose_survivor, clusters, cosine_matrix
from ..policies.learning import HARMFUL
from ..policies.playbook import PlaybookConfig
from ..policies.taxonomy import CLASS_KEYWORDS, LESSON_KINDS, snake_case
from ..roles.curator import AppendCurator, HeuristicCurator
from ..roles.learning import Bullet, Curator, Lesson, Reflector, Trace, bullet_from, messages_of
from ..roles.reflector import HeuristicReflector
from ..store.base import ScopeFilter
from .context import format_context
from .learning import _bool
from .runner import check_outcome, optional_id, optional_text, run_turn

logger = logging.getLogger("memorist.ace.memory")


def _learner(value: Any, name: str = "learner_id") -> str:
    """A learner's id, by the rules of the scope ids: it names the playbook's space."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(name, f"must be a non-empty string, got {validate.show(value)}")
    validate.scope_id(name, value)
    return value


def _items(value: Any, name: str, what: str) -> Sequence[Any]:
    """A list (or tuple) argument; a string or a mapping would be iterated item by item."""
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Sequence):
        raise ValidationError(name, f"must be a list of {what}, got {type(value).__name__}")
    return value


def _learning_model(memory: Any) -> Any:
    """The model of the learning roles: the Memory's, else the one the environment configures
    (``MEMORIST_LLM``, else Gemini with ``GEMINI_API_KEY``: :func:`memorist.roles.llm.learning_llm`);
    None, with a warning, when neither is configured."""
    llm = getattr(memory, "llm", None)
    if llm is not None:
        return llm
    from ..errors import ConfigurationError
    from ..pipelines.llm_events import watched
    from ..roles.llm import learning_llm

    try:
        return watched(memory, learning_llm(None, enabled=True))
    except ConfigurationError as exc:
        logger.warning("[Curator] %s; using the heuristic", exc)
        return None


def _llm_role(memory: Any, name: str, llm: Any) -> Any:
    """The LLM implementation ``name`` of a role (``memorist.roles.llm``) on ``llm``."""
    if llm is None:
        return None
    from ..roles import llm as llm_roles

    cls = getattr(llm_roles, name, None)
    return None if cls is None else cls(llm)


class Playbook:
    """The learning playbooks of one :class:`~memorist.Memory`.

    ``config`` (or ``preset="per-learner"`` / ``"baseline"`` plus keyword overrides such
    as ``max_bullets=50``, ``decay_rates={"episodic": 0.08}``) sets the rules; see
    :class:`~memorist.policies.playbook.PlaybookConfig`. Settings from the environment
    (``ACE_CURATOR_MAX_NEW``, ``ACE_CURATOR_USE_LLM``) are read here, when the
    playbook is built.

    ``reflector`` / ``curator``: LLM (or other) implementations of the roles. They are
    used when ``ACE_CURATOR_USE_LLM`` (or ``use_llm=True``) is on; otherwise, and
    whenever they fail, the deterministic heuristics are. With ``use_llm`` on and no
    role given, the roles of ``memorist.roles.llm`` are built on ``memory.llm`` when
    both exist.
    """

    def __init__(
        self,
        memory: Any,
        config: PlaybookConfig | None = None,
        *,
        preset: str = "per-learner",
        reflector: Reflector | None = None,
        curator: Curator | None = None,
        **overrides: Any,
    ) -> None:
        base = config if config is not None else PlaybookConfig.preset(preset)
        if overrides:
            unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(PlaybookConfig)})
            if unknown:
                raise ValidationError(unknown[0], f"is not a playbook setting; known: {', '.join(f.name for f in dataclasses.fields(PlaybookConfig))}")
            base = dataclasses.replace(base, **overrides)
        self.config = base.resolved()
        self.memory = memory
        heuristic_reflector = HeuristicReflector()
        heuristic_curator: Curator = (
            HeuristicCurator(normalise_tags=self.config.normalise_tags)
            if self.config.reinforce_threshold is not None
            else AppendCurator()
        )
        if self.config.use_llm:
            model = _learning_model(memory) if reflector is None or curator is None else None
            reflector = reflector or _llm_role(memory, "LLMReflector", model)
            curator = curator or _llm_role(memory, "LLMCurator", model)
            if (reflector is None or curator is None) and model is not None:
                logger.warning("[Curator] ACE_CURATOR_USE_LLM is on but no LLM %s is available; using the heuristic",
                               "reflector" if reflector is None else "curator")
        else:
            reflector = curator = None
        self.reflector: Reflector = self._with_fallback(reflector, heuristic_reflector)
        self.curator: Curator = self._with_fallback(curator, heuristic_curator)
        learning = getattr(memory, "learning", None)  # the Memory's versioning of playbooks
        self.pipeline = LearningPipeline(
            memory.store, memory.embedder, self.config, self.reflector, self.curator, tenant_id=memory.config.tenant_id,
            playbooks=getattr(learning, "playbooks", None),
        )

    @staticmethod
    def _with_fallback(role: Any, heuristic: Any) -> Any:
        if role is None:
            return heuristic
        if getattr(role, "fallback", None) is None:
            role.fallback = heuristic
        return role

    @classmethod
    def baseline(cls, memory: Any, **overrides: Any) -> Playbook:
        """The ACE baseline preset (for comparison): see :meth:`PlaybookConfig.baseline`."""
        return cls(memory, PlaybookConfig.baseline(), **overrides)

    # turns ------------------------------------------------------------------------------
    def turn(self, learner_id: str, conversation_id: str | None = None, *, topic: str | None = None) -> PlaybookTurn:
        """One turn (or task) of ``learner_id`` in conversation ``conversation_id``.
        The learner's playbook is loaded once, on first use, for the whole turn."""
        return PlaybookTurn(self, learner_id, conversation_id, topic=topic)

    def retrieve(self, query: str, *, learner_id: str, conversation_id: str | None = None, **options: Any) -> list[Bullet]:
        """:meth:`PlaybookTurn.retrieve` in a turn of its own."""
        return self.turn(learner_id, conversation_id).retrieve(query, **options)

    def learn(self, *, learner_id: str, conversation_id: str | None = None, **trace: Any) -> dict[str, Any]:
        """:meth:`PlaybookTurn.learn` in a turn of its own."""
        return self.turn(learner_id, conversation_id).learn(**trace)

    def run_turn(self, payload: Mapping[str, Any], *, answerer: Callable[..., str] | None = None) -> dict[str, Any]:
        """The runner protocol (``memorist run-turn``): see :mod:`memorist.ace.runner`."""
        return run_turn(self, payload, answerer=answerer)

    # inspection ---------------------------------------------------------------------------
    def _spaces(self, learner_id: str | None) -> ScopeFilter:
        tenant = self.pipeline.tenant_id
        if learner_id is None:
            return ScopeFilter(tenant, None, self.config.agent_id)
        return ScopeFilter(tenant, self.pipeline.space(_learner(learner_id)).user_id, self.config.agent_id)

    def _rows(self, learner_id: str | None) -> list[tuple[Any, Any]]:
        """Every bullet of the spaces (inspection shows every playbook, whatever the preset), with vectors."""
        return self.memory.store.list_bullets(self._spaces(learner_id))

    def bullets(self, learner_id: str | None = None) -> list[Bullet]:
        """Every bullet (of one learner, or of every playbook), oldest first, each with
        its current decay score. Reading does not touch anything."""
        rows = self._rows(learner_id)
        clocks: dict[tuple[str, str, str], int] = {}
        out = []
        for record, _ in rows:
            clock = clocks.get(record.scope.space)
            if clock is None:
                clock = clocks[record.scope.space] = self.memory.store.access_clock(record.scope)
            out.append(bullet_from(record, score=_score(self.pipeline, record, clock)))
        return out

    def search(self, query: str, *, learner_id: str | None = None, limit: int = 10) -> list[Bullet]:
        """Bullets by similarity to ``query`` (cosine), without touching them."""
        validate.text("query", query, max_chars=self.memory.config.max_message_chars)
        limit = validate.limit(limit)
        rows = self._rows(learner_id)
        if not rows:
            return []
        qv = self.memory.embedder.embed_query(query)
        dim = qv.shape[0]
        matrix = np.stack([v if v is not None and v.shape[0] == dim else np.zeros(dim, np.float32) for _, v in rows])
        sims = matrix @ qv
        order = np.argsort(-sims, kind="stable")[:limit]
        out = []
        for k in order.tolist():
            record = rows[k][0]
            clock = self.memory.store.access_clock(record.scope)
            out.append(bullet_from(record, score=_score(self.pipeline, record, clock), relevance=float(sims[k])))
        return out

    def stats(self, learner_id: str | None = None) -> dict[str, Any]:
        """Counts and averages over the bullets (of one learner, or all)."""
        bullets = self.bullets(learner_id)
        n = len(bullets)
        categories: dict[str, int] = {}
        for b in bullets:
            for tag in b.tags:
                categories[tag] = categories.get(tag, 0) + 1

        def count(attr: str) -> dict[str, int]:
            out: dict[str, int] = {}
            for b in bullets:
                key = getattr(b, attr) or "-"
                out[key] = out.get(key, 0) + 1
            return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

        return {
            "preset": self.config.preset_name,
            "total_bullets": n,
            "learners": len({b.learner_id for b in bullets}),
            "avg_score": round(sum(b.score for b in bullets) / n, 4) if n else 0.0,
            "avg_helpful": round(sum(b.helpful for b in bullets) / n, 4) if n else 0.0,
            "avg_harmful": round(sum(b.harmful for b in bullets) / n, 4) if n else 0.0,
            "by_memory_type": count("memory_type"),
            "by_section": count("section"),
            "by_topic": count("topic"),
            "categories": dict(sorted(categories.items(), key=lambda kv: (-kv[1], kv[0]))),
            "max_bullets": self.config.max_bullets,
        }

    def cleanup(self, learner_id: str | None = None, *, threshold: float = 0.9, dry_run: bool = False) -> dict[str, Any]:
        """Merge near-duplicate bullets: clusters at cosine ``>= threshold`` within each
        playbook, each merged into its survivor by the same rule and helper as at run
        time (the survivor's rule and the merge; unlike the run-time pass, across topics
        and memory classes). An anti-pattern (✗) is never merged with a bullet that is
        not one — a strategy and the anti-pattern that warns against its opposite are
        alike in words, not in advice — and a learning-loop strategy only with one of
        its category (✓ helpful, ✗ harmful, ○ neutral), as curation merges them. A
        merge keeps the evidence of both (a learning-loop strategy's trajectories and
        declared confidence are combined, as curation combines them). ``dry_run``:
        report the plan, write nothing."""
        if validate.threshold(threshold) is None:
            raise ValidationError("threshold", "must be a number from -1 to 1, got None")
        _bool(dry_run, "dry_run")
        rows = self._rows(learner_id)
        # Within one playbook (a space may hold several: the learning loop's named
        # playbooks) and one kind of advice (_advice).
        by_space: dict[tuple[tuple[str, str, str], str, str], list[tuple[Any, Any]]] = {}
        for record, vector in rows:
            key = (record.scope.space, playbook_of(record, self.config.name), _advice(record))
            by_space.setdefault(key, []).append((record, vector))
        plan = []
        for (_space, name, _), space_rows in by_space.items():
            if len(space_rows) < 2:
                continue
            dim = max((v.shape[0] for _, v in space_rows if v is not None), default=0)
            if not dim:
                continue
            matrix = np.stack([v if v is not None else np.zeros(dim, np.float32) for _, v in space_rows])
            for group in clusters(cosine_matrix(matrix), threshold):
                members = [space_rows[i][0] for i in group]
                survivor = members[0]
                for other in members[1:]:
                    survivor = (choose_first_seen if self.config.dedup == "jaccard" else choose_survivor)(survivor, other)[0]
                plan.append({
                    "learner_id": survivor.scope.user_id,
                    "playbook": name,
                    "kept": survivor.id,
                    "kept_content": survivor.text,
                    "merged": [m.id for m in members if m.id != survivor.id],
                    "merged_content": [m.text for m in members if m.id != survivor.id],
                })
        merged = 0
        if not dry_run:
            for item in plan:
                merged += self._apply_cleanup(item["learner_id"], item["playbook"], item["kept"], item["merged"])
        return {"dry_run": dry_run, "threshold": threshold, "clusters": plan,
                "would_merge" if dry_run else "merged": sum(len(p["merged"]) for p in plan) if dry_run else merged}

    def _apply_cleanup(self, user_id: str, name: str, kept: str, others: Sequence[str]) -> int:
        pipeline = self.pipeline
        scope = pipeline.space(user_id) if self.config.per_learner else pipeline.space("")
        state = PlaybookState(scope=scope, learner_id=user_id)
        merged = 0
        now = time.time()
        with self.memory.store.transaction() as batch:
            rows = batch.list_bullets(ScopeFilter(scope.tenant_id, scope.user_id, scope.agent_id))
            state.fill([(r, v) for r, v in rows if is_strategy_of(r, name, default=self.config.name)])
            state.clock = batch.advance_clock(scope, 0)
            survivor = kept
            gone = []
            for other in others:
                if survivor in state.records and other in state.records:
                    new = self._merge(batch, state, survivor, other, now)
                    gone.append(other if new == survivor else survivor)
                    survivor = new
                    merged += 1
            if merged:
                pipeline.record_version(batch, state, now, change={"updated": [survivor], "removed": gone}, reason="cleanup", name=name)
        return merged

    def _merge(self, batch: Any, state: PlaybookState, a: str, b: str, now: float) -> str:
        """Merge two bullets as at run time (:meth:`LearningPipeline.merge`); two whose
        evidence the learning loop keeps (trajectories, a declared confidence) are
        merged with both evidences combined (the run-time merge keeps the survivor's)."""
        fresh = batch.get_many([a, b])
        if not any(_LOOP_EVIDENCE & r.metadata.keys() for r in (fresh.get(a, state.records[a]), fresh.get(b, state.records[b]))):
            return self.pipeline.merge(batch, state, a, b, now)
        learning = self.memory.learning.config

        def combined(keep: MemoryRecord, drop: MemoryRecord, merged: MemoryRecord) -> MemoryRecord:
            evidence = evidence_of(keep).merge(evidence_of(drop), learning.evidence_kept)
            return with_evidence(merged, evidence, now=now, half_life_days=learning.confidence_half_life_days)

        return self.pipeline.merge(batch, state, a, b, now, combine=combined)


#: The metadata of a strategy whose evidence the learning loop keeps.
_LOOP_EVIDENCE = frozenset({"trajectory_evidence", "declared"})


def _advice(record: Any) -> str:
    """What cleanup never merges across: a learning-loop strategy's category (its
    metadata names it); for a tutoring bullet, whether it is an anti-pattern."""
    if "category" in record.metadata:
        return category(record)
    return HARMFUL if category(record) == HARMFUL else "advice"


def _score(pipeline: LearningPipeline, record: Any, clock: int) -> float:
    return record_score(record, clock, pipeline.rates)


class PlaybookTurn:
    """One turn of one learner: retrieve bullets for the prompt, then learn from what happened.

    The learner's playbook is loaded at most once for the turn (the baseline preset
    reloads it on every access, as the ACE baseline did).
    """

    def __init__(self, playbook: Playbook, learner_id: str, conversation_id: str | None = None, *, topic: str | None = None) -> None:
        self.playbook = playbook
        self.learner_id = _learner(learner_id)
        self.conversation_id = optional_id(conversation_id, "conversation_id") or ""
        self.topic = optional_id(topic, "topic")
        self.injected: list[Bullet] = []
        self._state: PlaybookState | None = None

    @property
    def state(self) -> PlaybookState:
        if self._state is None or self.playbook.config.reload_every_access:
            self._state = self.playbook.pipeline.load(self.learner_id)
        return self._state

    @property
    def size(self) -> int:
        """How many bullets the learner's playbook holds, as this turn last saw it."""
        return len(self._state) if self._state is not None else len(self.state)

    def retrieve(
        self,
        query: str,
        *,
        top_k: int | None = None,
        topic: str | None = None,
        memory_types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        touch: bool = True,
    ) -> list[Bullet]:
        """The learner's bullets most relevant to ``query``, best first; remembered as
        this turn's injected bullets (what :meth:`learn` tags helpful or harmful)."""
        query = validate.text("query", query, max_chars=self.playbook.memory.config.max_message_chars)
        if top_k is not None:
            validate.limit(top_k, name="top_k")
        topic = optional_id(topic, "topic")
        if memory_types is not None:
            for i, kind in enumerate(_items(memory_types, "memory_types", "memory classes")):
                if not isinstance(kind, str) or snake_case(kind) not in CLASS_KEYWORDS:
                    raise ValidationError(f"memory_types[{i}]", f"must be one of {', '.join(sorted(CLASS_KEYWORDS))}, got {validate.show(kind)}")
        if tags is not None:
            for i, tag in enumerate(_items(tags, "tags", "strings")):
                if not isinstance(tag, str):
                    raise ValidationError(f"tags[{i}]", f"must be a string, got {type(tag).__name__}")
        _bool(touch, "touch")
        bullets = self.playbook.pipeline.retrieve(
            self.state, query, top_k=top_k, topic=topic or self.topic, memory_types=memory_types, tags=tags, touch=touch
        )
        self.injected.extend(b for b in bullets if b.id not in {i.id for i in self.injected})
        return bullets

    def context(self, query: str, **options: Any) -> str:
        """:func:`format_context` of :meth:`retrieve`."""
        return format_context(self.retrieve(query, **options), title=f"ACE playbook (learner {self.learner_id})")

    def learn(
        self,
        *,
        question: str | None = None,
        answer: str = "",
        feedback: str | None = None,
        outcome: str | None = None,
        used: Sequence[Bullet] | None = None,
        lessons: Sequence[Lesson | Mapping[str, Any] | str] | None = None,
        messages: Sequence[Any] = (),
        topic: str | None = None,
        answer_mode: str = "",
    ) -> dict[str, Any]:
        """Learn from this turn: reflect → curate → apply atomically → dedup → prune.

        ``used``: the bullets that were in the prompt (default: what :meth:`retrieve`
        returned in this turn). ``lessons``: lessons already known (they replace the
        reflector's own). ``outcome``: ``"success"``, ``"failure"`` or None (the
        feedback decides). Returns ``{"num_new_bullets", "num_updates",
        "num_removals", ...}``.

        Every argument is checked before anything is written: a ValidationError names
        the wrong one (``lessons[2].type``) and the playbook is left as it was.
        """
        limit = self.playbook.memory.config.max_message_chars
        msgs = _messages(messages, limit)
        if question is None:
            question = next((m.content for m in reversed(msgs) if m.role == "user"), "")
        elif not isinstance(question, str):
            raise ValidationError("question", f"must be a string, got {type(question).__name__}")
        optional_text(question, "question", max_chars=limit)
        if answer is None:
            answer = ""
        elif not isinstance(answer, str):
            raise ValidationError("answer", f"must be a string, got {type(answer).__name__}")
        # Not bounded: the answer is the model's (or lists the bullets injected) and
        # only its first sentence is ever kept; but that must be text a store can hold.
        validate.unicode("answer", answer)
        given: tuple[Lesson, ...] = ()
        if lessons is not None:
            items = _items(lessons, "lessons", "lessons (strings, mappings or Lessons)")
            given = tuple(_lesson(x, f"lessons[{i}]", max_chars=limit) for i, x in enumerate(items))
        injected = self.injected if used is None else list(_items(used, "used", "Bullets"))
        for i, bullet in enumerate(injected):
            if not isinstance(bullet, Bullet):
                raise ValidationError(f"used[{i}]", f"must be a Bullet (from retrieve), got {type(bullet).__name__}")
        trace = Trace(
            question=question,
            answer=answer,
            feedback=optional_text(feedback, "feedback", max_chars=limit),
            outcome=check_outcome(outcome),
            injected=tuple(injected),
            messages=msgs,
            learner_id=self.learner_id,
            topic=optional_id(topic, "topic") or self.topic or "",
            lessons=given,
            answer_mode=optional_text(answer_mode, "answer_mode", max_chars=validate.MAX_ID_CHARS) or "",
        )
        result = self.playbook.pipeline.learn(self.state, trace, conversation_id=self.conversation_id)
        return result.to_dict()


def _messages(value: Any, max_chars: int) -> tuple[Message, ...]:
    """``learn``'s messages (``Message`` objects or ``{"role", "content"}`` mappings), checked."""
    for i, m in enumerate(_items(value, "messages", "messages")):
        if isinstance(m, Message):
            role, content = m.role, m.content
        elif isinstance(m, Mapping):
            role, content = m.get("role", "user"), m.get("content", "")
        else:
            raise ValidationError(f"messages[{i}]", f"must be a Message or a mapping with role and content, got {type(m).__name__}")
        if not isinstance(role, str):
            raise ValidationError(f"messages[{i}].role", f"must be a string, got {type(role).__name__}")
        optional_text(content, f"messages[{i}].content", max_chars=max_chars)
    return messages_of(value)


def _lesson(value: Lesson | Mapping[str, Any] | str, where: str, *, max_chars: int) -> Lesson:
    """A lesson given to :meth:`PlaybookTurn.learn`, every field checked (``where``:
    ``lessons[i]``): it becomes a bullet as it is, so what the store would refuse, and
    what the curator would silently drop or misread, is refused here."""
    if isinstance(value, str):
        return Lesson(content=validate.text(where, value, max_chars=max_chars))
    if isinstance(value, Mapping):
        if not isinstance(value.get("content"), str):
            raise ValidationError(f"{where}.content", f"each lesson needs a 'content' string, got {validate.show(value)}")
        lesson = Lesson.from_dict(value)
    elif isinstance(value, Lesson):
        lesson = value
    else:
        raise ValidationError(where, f"a lesson is a string, a mapping or a Lesson, got {type(value).__name__}")
    validate.text(f"{where}.content", lesson.content, max_chars=max_chars)
    if lesson.type is not None and (not isinstance(lesson.type, str) or lesson.type not in LESSON_KINDS):
        raise ValidationError(f"{where}.type", f"must be one of {', '.join(LESSON_KINDS)}, got {validate.show(lesson.type)}")
    if lesson.memory_type is not None and (not isinstance(lesson.memory_type, str) or lesson.memory_type not in CLASS_KEYWORDS):
        raise ValidationError(f"{where}.memory_type", f"must be one of {', '.join(sorted(CLASS_KEYWORDS))}, got {validate.show(lesson.memory_type)}")
    for j, tag in enumerate(_items(lesson.tags, f"{where}.tags", "strings")):
        if tag is None:
            raise ValidationError(f"{where}.tags[{j}]", "must be a string, got None")
        validate.scope_id(f"{where}.tags[{j}]", tag)
    for name in ("concept", "section", "topic", "source"):
        optional_id(getattr(lesson, name), f"{where}.{name}")
    return lesson


__all__ = ["Playbook", "PlaybookTurn"]
