"""The Evaluator seam: judge an output against its success criteria.

An :class:`Evaluator` gets the original task, the success criteria and the output,
nothing else (a fresh context), and returns an :class:`Evaluation`: the
percentage of criteria met and the gaps. :class:`HeuristicEvaluator` is the
deterministic default; the LLM evaluator (:class:`memorist.roles.llm.LLMEvaluator`)
plugs into the same seam and falls back to it.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass, field
from typing import Any

from ..policies.text import index_terms


@dataclass(frozen=True, slots=True)
class Gap:
    """One shortfall: what is missing, how much it matters, which criterion."""

    description: str
    severity: str = "medium"  # low | medium | high
    criterion: str = ""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """``score`` is the percentage (0-100) of the success criteria met."""

    score: float
    gaps: list[Gap] = field(default_factory=list)
    summary: str = ""
    evaluator: str = ""

    def meets(self, threshold: float = 95.0) -> bool:
        """Whether at least ``threshold`` % of the criteria are met (a PAIR loop stops there: 95 by default)."""
        return self.score >= threshold


class Evaluator(abc.ABC):
    """Judges an output against success criteria, with no other context."""

    @abc.abstractmethod
    def evaluate(self, task: str, criteria: str, output: str) -> Evaluation: ...


# Words that say how a criterion is met rather than what must be there ("Mentions
# the deadline", "Output must list the owners"): not looked for in the output.
_META = frozenset(
    index_terms(
        "mention mentions say says list lists include includes contain contains has have use uses explain "
        "explains describe describes state states give gives provide provides show shows name names return "
        "returns answer answers cover covers address addresses must should shall output response answer "
        "clearly correctly properly"
    )
)

_ITEM_SPLIT = re.compile(r"(?:\r?\n)+|;\s+|(?<=[.!?])\s+(?=[A-Z0-9])")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def criteria_items(criteria: str) -> list[str]:
    """The separate criteria in a text: lines, list items, sentences, ``;`` parts."""
    items = (_BULLET.sub("", part).strip(" .;") for part in _ITEM_SPLIT.split(criteria))
    return [item for item in items if item]


class HeuristicEvaluator(Evaluator):
    """A criterion counts as met when at least ``coverage`` of its content words
    (stemmed, stop words dropped) appear in the output. Crude but deterministic and
    offline; an LLM evaluator judges meaning instead."""

    def __init__(self, coverage: float = 0.6) -> None:
        self.coverage = coverage

    def evaluate(self, task: str, criteria: str, output: str) -> Evaluation:
        items = criteria_items(criteria)
        if not items:
            return Evaluation(100.0, [], "no success criteria were given", "heuristic")
        said = set(index_terms(output))
        gaps: list[Gap] = []
        for item in items:
            terms = set(index_terms(item)) - _META
            if not terms:
                continue
            found = len(terms & said) / len(terms)
            if found < self.coverage:
                missing = sorted(terms - said)
                gaps.append(Gap(f"not addressed: {item} (missing: {', '.join(missing[:6])})", "medium", item))
        checked = sum(1 for item in items if set(index_terms(item)) - _META)
        # Unrounded: a threshold is compared with it (189 of 199 is 94.97..., below 95).
        score = 100.0 if not checked else 100.0 * (checked - len(gaps)) / checked
        summary = f"{checked - len(gaps)} of {checked} criteria addressed"
        return Evaluation(score, gaps, summary, "heuristic")


class ScriptedEvaluator(Evaluator):
    """A test double: answers from a script, in order, and keeps every call.

    Each entry is an :class:`Evaluation`, a score (0-100, with one gap named after
    it unless it is 100), a callable ``(task, criteria, output) -> Evaluation``, or
    an exception to raise. The last entry repeats once the script runs out.

    >>> ev = ScriptedEvaluator([40, 100])
    >>> [ev.evaluate("t", "c", "o").score for _ in range(3)]
    [40.0, 100.0, 100.0]
    """

    def __init__(self, script: list[Any]) -> None:
        if not script:
            raise ValueError("a ScriptedEvaluator needs at least one entry")
        self.script = list(script)
        self.calls: list[tuple[str, str, str]] = []

    def evaluate(self, task: str, criteria: str, output: str) -> Evaluation:
        self.calls.append((task, criteria, output))
        entry = self.script[min(len(self.calls), len(self.script)) - 1]
        if isinstance(entry, BaseException):
            raise entry
        if callable(entry):
            return entry(task, criteria, output)
        if isinstance(entry, Evaluation):
            return entry
        score = float(entry)
        gaps = [] if score >= 100 else [Gap(f"gap of round {len(self.calls)}", "medium", criteria_items(criteria)[0] if criteria_items(criteria) else "")]
        return Evaluation(score, gaps, f"scripted {score:g}", "scripted")


__all__ = ["Evaluation", "Evaluator", "Gap", "HeuristicEvaluator", "ScriptedEvaluator", "criteria_items"]
