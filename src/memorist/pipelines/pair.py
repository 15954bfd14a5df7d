"""The PAIR loop: evaluate fresh, find gaps, retrieve, revise — bounded.

Each round a fresh :class:`~memorist.roles.evaluator.Evaluator` (it is given the task,
the criteria and the output, nothing else: no memory of producing the output)
scores the output 0-100 and names its gaps. Below the threshold, each gap is looked
up in memory (the project's minutes index and its facts, fused, ``memories_per_gap``
of them) and turned into suggestions; the caller's ``revise(output, improvements)``
returns the next output. The loop ends when a score reaches the threshold or after
``max_rounds`` evaluations: it is always bounded.

Every round is a ``pair_round`` event in the log (score, gaps, the memories shown
for each, the output evaluated), and the session ends with a ``pair_result`` event.
An evaluator that fails — a model's malformed answer after its repair retry, an
exception in a custom evaluator, a result that is not an
:class:`~memorist.roles.evaluator.Evaluation` or whose gaps are not
:class:`~memorist.roles.evaluator.Gap` s — is replaced for that round by the
heuristic evaluator, so a round is never lost; the round records the fallback. Each
gap is a retrieval: a round keeps the :data:`MAX_GAPS` (10) most severe an evaluator
names (in its order within a severity), and logs how many it dropped.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import validate
from ..errors import ValidationError
from ..model import Scope
from ..policies.fusion import reciprocal_rank_fusion
from ..roles.evaluator import Evaluation, Evaluator, Gap, HeuristicEvaluator
from ..store.base import Store

logger = logging.getLogger("memorist.pair")

OP_PAIR_ROUND = "pair_round"
OP_PAIR_RESULT = "pair_result"
_OUTPUT_KEPT = 20_000  # characters of each round's output kept in its event
_MAX_ROUNDS = 100
#: The most gaps a round looks up in memory (one retrieval each); the rest are dropped.
MAX_GAPS = 10
_SEVERITY = {"high": 0, "medium": 1, "low": 2}

Retriever = Callable[[str, int], list[dict[str, Any]]]
Revise = Callable[[str, list[dict[str, Any]]], str]


def gap_view(gap: Gap) -> dict[str, str]:
    return {"description": gap.description, "severity": gap.severity, "criterion": gap.criterion}


@dataclass(slots=True)
class PairRound:
    """One evaluation: its score, gaps and, below the threshold, the improvements
    (per gap: the gap, the memories retrieved for it and suggestions)."""

    round: int
    score: float
    gaps: list[Gap]
    evaluator: str
    summary: str
    output: str
    improvements: list[dict[str, Any]] = field(default_factory=list)
    fallback: str | None = None
    seq: int | None = None
    #: Whether the score reached the threshold (compared unrounded: 94.99 is below 95).
    met: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "score": self.score,
            "met": self.met,
            "gaps": [gap_view(g) for g in self.gaps],
            "evaluator": self.evaluator,
            "summary": self.summary,
            "improvements": self.improvements,
            "fallback": self.fallback,
            "output": self.output,
            "seq": self.seq,
        }


@dataclass(slots=True)
class PairResult:
    """A PAIR session: the final ``output`` and its ``score``, whether it
    ``converged`` (reached ``threshold``) and every round."""

    session_id: str
    output: str
    score: float
    converged: bool
    threshold: float
    max_rounds: int
    rounds: list[PairRound]

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "output": self.output,
            "score": self.score,
            "converged": self.converged,
            "threshold": self.threshold,
            "max_rounds": self.max_rounds,
            "rounds": [r.to_dict() for r in self.rounds],
        }


# argument checks ---------------------------------------------------------------------------
def threshold_of(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 100:
        raise ValidationError("threshold", f"must be a percentage from 0 to 100, got {validate.show(value)}")
    return float(value)


def rounds_of(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_ROUNDS:
        raise ValidationError("max_rounds", f"must be a whole number from 1 to {_MAX_ROUNDS}, got {validate.show(value)}")
    return value


def evaluator_of(value: Any, default: Evaluator) -> Evaluator:
    if value is None:
        return default
    if not isinstance(value, Evaluator):
        raise ValidationError("evaluator", f"must be a memorist.roles.evaluator.Evaluator, got {type(value).__name__}")
    return value


# retrieval and suggestions ---------------------------------------------------------------------
def combined_retriever(sources: Sequence[Retriever]) -> Retriever:
    """One retriever over several (minutes, facts): their rankings fused by
    reciprocal rank, each memory once; a tie goes to the better rank, then to the
    source named first."""

    def retrieve(query: str, k: int) -> list[dict[str, Any]]:
        lists = [source(query, k) for source in sources]
        items: dict[str, dict[str, Any]] = {}
        rankings: dict[str, list[str]] = {}
        for n, found in enumerate(lists):
            rankings[str(n)] = [item["id"] for item in found]
            for item in found:
                items.setdefault(item["id"], item)
        fused = reciprocal_rank_fusion(rankings)
        # Ties (the first of each list) go to the earlier source: minutes before facts.
        first = {}
        for n, ids in enumerate(rankings.values()):
            for rank, i in enumerate(ids):
                first[i] = min(first.get(i, (rank, n)), (rank, n))
        return [items[i] for i in sorted(fused, key=lambda i: (-fused[i], first[i]))][:k]

    return retrieve


def gap_query(gap: Gap) -> str:
    """What is looked up for a gap: its description, and its criterion when the
    description does not already say it."""
    text = gap.description
    if gap.criterion and gap.criterion.lower() not in text.lower():
        text = f"{gap.criterion}: {text}"
    return text


def suggestions_for(gap: Gap, memories: Sequence[dict[str, Any]]) -> list[str]:
    """The suggestions for one gap, without a model: the gap to address, then
    what each retrieved memory teaches — a past outcome as something that worked
    (or, under 50%, to avoid), other insights to apply, else the memory itself."""
    found = [f"Address: {gap.description}"]
    for memory in memories:
        said = str(memory.get("memory_note") or memory.get("memory") or "").strip()
        insights = memory.get("insights") or []
        for insight in insights:
            if insight.get("type") == "outcome":
                pct = round(100 * float(insight.get("confidence", 0.5)))
                found.append((f"Worked before ({pct}%): " if pct >= 50 else f"Avoid, it failed before ({pct}%): ") + said)
            else:
                found.append("Apply: " + str(insight.get("finding")))
        if not insights and said:
            found.append("Consider: " + said)
    return list(dict.fromkeys(s for s in found if s.strip()))


def _checked_gaps(result: Evaluation) -> Evaluation:
    """``result`` with its gaps checked (a wrong one raises: the round falls back) and
    cut to the :data:`MAX_GAPS` most severe."""
    if not isinstance(result.gaps, list | tuple):
        raise TypeError(f"the evaluator's gaps are {type(result.gaps).__name__}, not a list of Gap")
    for i, gap in enumerate(result.gaps):
        if not isinstance(gap, Gap):
            raise TypeError(f"the evaluator's gap {i} is {type(gap).__name__}, not a Gap")
        if not isinstance(gap.description, str) or not gap.description.strip():
            raise ValueError(f"the evaluator's gap {i} has no description")
        if gap.severity not in _SEVERITY or not isinstance(gap.criterion, str):
            raise ValueError(f"the evaluator's gap {i} has severity {gap.severity!r} (low, medium or high) or a criterion that is no text")
    gaps = list(result.gaps)
    if len(gaps) > MAX_GAPS:
        logger.warning("memorist: the PAIR evaluator named %d gaps; the %d most severe are looked up, the rest dropped", len(gaps), MAX_GAPS)
        gaps = sorted(gaps, key=lambda g: _SEVERITY[g.severity])[:MAX_GAPS]
    return dataclasses.replace(result, gaps=gaps)


# the loop ------------------------------------------------------------------------------------
class PairLoop:
    """Runs PAIR rounds for one caller (``scope``: the tenant, the project as user,
    the agent) and writes each to the log."""

    def __init__(self, store: Store, scope: Scope, evaluator: Evaluator, retrieve: Retriever, *, memories_per_gap: int = 5) -> None:
        self.store = store
        self.scope = scope
        self.evaluator = evaluator
        self.retrieve = retrieve
        self.memories_per_gap = memories_per_gap

    def _judge(self, task: str, criteria: str, output: str) -> tuple[Evaluation, str | None]:
        try:
            result = self.evaluator.evaluate(task, criteria, output)
            if not isinstance(result, Evaluation):
                raise TypeError(f"the evaluator returned {type(result).__name__}, not an Evaluation")
            if isinstance(result.score, bool) or not isinstance(result.score, int | float) or not 0 <= result.score <= 100:
                raise ValueError(f"the evaluator's score {result.score!r} is not a percentage")
            return _checked_gaps(result), None
        except Exception as exc:  # never lose the round: the heuristic answers
            logger.warning("memorist: the PAIR evaluator failed, using the heuristic evaluator: %s", exc)
            return _checked_gaps(HeuristicEvaluator().evaluate(task, criteria, output)), f"{type(exc).__name__}: {exc}"[:500]

    def round(self, task: str, criteria: str, output: str, *, number: int, session: str, threshold: float, improve: bool) -> PairRound:
        """Evaluate ``output``; with ``improve`` and a score below ``threshold``,
        retrieve memories for each gap. Recorded in the log."""
        evaluation, fallback = self._judge(task, criteria, output)
        # The evaluator's score as it is, unrounded (the evaluators do not round either):
        # rounded, 94.99 would meet a threshold of 95.
        score = float(evaluation.score)
        met = score >= threshold
        gaps = list(evaluation.gaps)
        improvements: list[dict[str, Any]] = []
        if improve and not met:
            if not gaps:  # a score short of the threshold with no gap named is still a gap
                gaps = [Gap(f"the output meets {score:g}% of the criteria; {threshold:g}% is required", "medium", "")]
            for gap in gaps:
                memories = self.retrieve(gap_query(gap), self.memories_per_gap)
                improvements.append({"gap": gap_view(gap), "memories": memories, "suggestions": suggestions_for(gap, memories)})
        r = PairRound(number, score, gaps, evaluation.evaluator, evaluation.summary, output, improvements, fallback, met=met)
        payload = {
            "session": session,
            "round": number,
            "score": score,
            "threshold": threshold,
            "met": met,
            "evaluator": evaluation.evaluator,
            "fallback": fallback,
            "summary": evaluation.summary,
            "gaps": [gap_view(g) for g in gaps],
            "memories": [[m.get("id") for m in imp["memories"]] for imp in improvements],
            "output": output[:_OUTPUT_KEPT],
            "output_chars": len(output),
        }
        with self.store.transaction() as batch:
            r.seq = batch.event(OP_PAIR_ROUND, self.scope, actor="evaluator", payload=payload)
        return r

    def run(self, task: str, criteria: str, output: str, revise: Revise, *, threshold: float, max_rounds: int) -> PairResult:
        session = str(uuid.uuid4())
        rounds: list[PairRound] = []
        for number in range(1, max_rounds + 1):
            last = number == max_rounds
            r = self.round(task, criteria, output, number=number, session=session, threshold=threshold, improve=not last)
            rounds.append(r)
            if r.met or last:
                break
            revised = revise(output, r.improvements)
            if not isinstance(revised, str):
                raise ValidationError("revise", f"must return the revised output as a string, got {type(revised).__name__}")
            output = revised
        final = rounds[-1]
        result = PairResult(session, final.output, final.score, final.met, threshold, max_rounds, rounds)
        with self.store.transaction() as batch:
            batch.event(OP_PAIR_RESULT, self.scope, payload={
                "session": session, "converged": result.converged, "rounds": len(rounds), "score": result.score,
                "threshold": threshold, "max_rounds": max_rounds,
            })
        return result


__all__ = [
    "MAX_GAPS",
    "OP_PAIR_RESULT",
    "OP_PAIR_ROUND",
    "PairLoop",
    "PairResult",
    "PairRound",
    "combined_retriever",
    "evaluator_of",
    "gap_query",
    "rounds_of",
    "suggestions_for",
    "threshold_of",
]
