"""The minutes' evaluator: scores, and the rules of an evaluation run. Pure (but
for the work it counts on the caller's meter, :func:`memorist.work.charge`).

Each indexed minute gets four scores in [0, 1] and their mean:

- **recency** ``max(0, 1 - age_weeks / 4)``: 1 now, 0.5 at two weeks, 0 from four;
- **relevance** how often it was retrieved, normalised by the most retrieved
  memory of the run (0 for all when none was ever retrieved);
- **accuracy** its outcome insight's confidence (``success_criteria_met`` / 100),
  else 0.5 (unknown is neither right nor wrong);
- **impact** how many later minutes reference it, normalised by the most
  referenced of the run: a minute others build on shaped the coordination (0 for
  all when nothing references anything);
- **composite** ``(recency + relevance + accuracy + impact) / 4``.

A run keeps in the index what scores above :attr:`EvaluationConfig.prune_below`
(0.3): a fresh, never-retrieved minute of unknown outcome scores 0.375, so it
survives until it is about two and a half weeks old unless it is used, referenced
or succeeded.

>>> s = score(age_seconds=14 * 86400, retrieved=0, max_retrieved=0, outcome=None, referenced_by=0, max_referenced_by=0)
>>> (s.recency, s.accuracy, s.composite)
(0.5, 0.5, 0.25)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..validate import finite_number
from ..work import charge

WEEK = 7 * 24 * 3600.0
_BLOCK = 512  # rows of the similarity matrix computed at a time
#: The most minutes a run compares with every other, the best first: a bound on the
#: run's cost (each compared minute is a row against the whole index), linear in the
#: index rather than quadratic. The ones ranked below are compared with these only.
MAX_COMPARED = 5_000


@dataclass(frozen=True, slots=True)
class EvaluationConfig:
    """The evaluation run's thresholds (configuration is data)."""

    #: Minutes whose composite is below this leave the index.
    prune_below: float = 0.3
    #: Weeks after which recency is 0.
    recency_weeks: float = 4.0
    #: Cosine at or above which two minutes say the same thing (one is kept).
    duplicate_similarity: float = 0.95
    #: Cosine at or above which two minutes of opposite outcome or polarity contradict.
    contradiction_similarity: float = 0.75

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not finite_number(value) or value < 0:
                raise ValidationError(f.name, f"must be a finite number >= 0, got {value!r}")
        if self.recency_weeks <= 0:
            raise ValidationError("recency_weeks", "must be > 0")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> EvaluationConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValidationError(unknown[0], f"is not an evaluation setting (known: {', '.join(sorted(known))})")
        return cls(**data)


@dataclass(frozen=True, slots=True)
class MemoryScore:
    """A minute's scores, unrounded, since the run's decisions compare them
    (a composite of 0.29999 is below 0.3); :meth:`to_dict` rounds them to 4 places
    for display."""

    recency: float
    relevance: float
    accuracy: float
    impact: float
    composite: float

    def to_dict(self) -> dict[str, float]:
        return {name: round(value, 4) for name, value in asdict(self).items()}


def recency_score(age_seconds: float, weeks: float = 4.0) -> float:
    """``max(0, 1 - age_weeks / weeks)``; a minute from the future counts as new (1)."""
    return max(0.0, min(1.0, 1.0 - max(0.0, age_seconds) / WEEK / weeks))


def normalised(count: int, maximum: int) -> float:
    """``count / maximum``, 0 when nothing counts."""
    return 0.0 if maximum <= 0 else max(0.0, min(1.0, count / maximum))


def accuracy_score(outcome_confidence: float | None) -> float:
    """The outcome insight's confidence, else 0.5."""
    return 0.5 if outcome_confidence is None else max(0.0, min(1.0, float(outcome_confidence)))


def score(
    *,
    age_seconds: float,
    retrieved: int,
    max_retrieved: int,
    outcome: float | None,
    referenced_by: int,
    max_referenced_by: int,
    weeks: float = 4.0,
) -> MemoryScore:
    """The four scores and their mean (unrounded: see :class:`MemoryScore`)."""
    parts = (
        recency_score(age_seconds, weeks),
        normalised(retrieved, max_retrieved),
        accuracy_score(outcome),
        normalised(referenced_by, max_referenced_by),
    )
    return MemoryScore(*parts, composite=sum(parts) / 4.0)


# the run's decisions ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Candidate:
    """What the run's rules see of one indexed minute."""

    id: str
    ts: float
    composite: float
    outcome: float | None  # the outcome insight's confidence
    negative: bool  # its note is negated ("did not", "never", "no longer"...)


@dataclass(frozen=True, slots=True)
class Removal:
    """One minute leaving the index: ``reason`` ``"duplicate"`` (``link``: the one
    kept), ``"superseded"`` (``link``: the one that contradicts and wins) or
    ``"low_score"``."""

    id: str
    reason: str
    link: str | None
    composite: float


def _wins(a: Candidate, b: Candidate) -> bool:
    """Whether ``a`` is kept over ``b``: the higher composite, then the newer, then the id."""
    return (a.composite, a.ts, a.id) > (b.composite, b.ts, b.id)


def contradicts(a: Candidate, b: Candidate) -> bool:
    """Opposite verdicts about similar things: one outcome a success (confidence >=
    0.5) and the other a failure, or one note negated and the other not."""
    if a.outcome is not None and b.outcome is not None and (a.outcome >= 0.5) != (b.outcome >= 0.5):
        return True
    return a.negative != b.negative


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Row vectors scaled to length 1 (a zero row stays zero)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.size == 0:
        return np.zeros((len(v), 0), dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return v / norms


def plan(candidates: Sequence[Candidate], vectors: np.ndarray, config: EvaluationConfig, *, most: int = MAX_COMPARED) -> list[Removal]:
    """Which minutes leave the index, in this order: deduplicate, resolve
    contradictions, prune low scores. ``vectors`` are their embeddings, one row each.

    Near-duplicates (cosine >= ``duplicate_similarity``) that do not contradict keep
    the best (:func:`_wins`); of two similar contradicting ones (cosine >=
    ``contradiction_similarity``) the lower-scored is superseded by the other. Each
    removed minute names the one it gave way to. The rest below ``prune_below`` go.

    Similarities are computed a block of kept minutes at a time, best first (a matrix
    product per block), and a minute absorbed already is never a row: memory grows
    with the minutes, not with their similar pairs (8,000 copies of one minute held
    32 million pairs). Only the ``most`` best minutes are rows (:data:`MAX_COMPARED`;
    the others are compared with them, not with each other), so time grows with the
    index times ``most``, not with its square (100,000 minutes took 110 s, at 5,000
    rows 6 s here); each row charges ``1 + n/16`` units to the caller's meter.
    """
    n = len(candidates)
    last = min(n, most)
    unit = unit_rows(vectors)
    gone: dict[int, Removal] = {}
    order = sorted(range(n), key=lambda i: (candidates[i].composite, candidates[i].ts, candidates[i].id), reverse=True)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    for step, reason, threshold in (("dup", "duplicate", config.duplicate_similarity), ("con", "superseded", config.contradiction_similarity)):
        pos = 0
        while pos < last:  # best first: a kept minute absorbs the worse ones at least as similar
            rows: list[int] = []
            while pos < last and len(rows) < _BLOCK:
                if order[pos] not in gone:
                    rows.append(order[pos])
                pos += 1
            if not rows:
                break
            charge(len(rows) * (1 + (n >> 4)))  # the work meter: cost, and a caller that left
            block = unit[rows] @ unit.T
            for k, i in enumerate(rows):
                if i in gone:
                    continue  # absorbed by a better minute of this block
                hits = np.flatnonzero((block[k] >= threshold - 1e-6) & (rank > rank[i]))
                for j in sorted(hits.tolist(), key=lambda h: rank[h]):
                    if j in gone:
                        continue
                    opposite = contradicts(candidates[i], candidates[j])
                    if (step == "dup" and not opposite) or (step == "con" and opposite):
                        gone[j] = Removal(candidates[j].id, reason, candidates[i].id, candidates[j].composite)
    for i in order:
        if i not in gone and candidates[i].composite < config.prune_below:
            gone[i] = Removal(candidates[i].id, "low_score", None, candidates[i].composite)
    return [gone[i] for i in sorted(gone, key=lambda k: candidates[k].ts)]


__all__ = [
    "MAX_COMPARED",
    "WEEK",
    "Candidate",
    "EvaluationConfig",
    "MemoryScore",
    "Removal",
    "accuracy_score",
    "contradicts",
    "normalised",
    "plan",
    "recency_score",
    "score",
    "unit_rows",
]
