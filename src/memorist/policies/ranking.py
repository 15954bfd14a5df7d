"""Ranking: the fused relevance of a candidate, adjusted by pluggable policy terms.

A term is any callable ``term(record, context) -> float``. The final score is::

    relevance + sum(weight * term(record, context) for weight, term in terms)

Terms let later policies (access decay, memory-class priority, recency, energy)
change the order without touching retrieval. They are applied to a pool of the best
candidates by relevance, so a term can promote a memory within that pool but never
surface one that did not match the query at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..model import MemoryRecord


@dataclass(frozen=True, slots=True)
class RankContext:
    """What a ranking term may look at besides the memory itself."""

    query: str
    now: float
    access_clock: int = 0


RankingTerm = Callable[[MemoryRecord, RankContext], float]


@dataclass(frozen=True, slots=True)
class RankingPolicy:
    """Weighted terms added to the fused relevance of each candidate."""

    terms: Sequence[tuple[float, RankingTerm]] = field(default_factory=tuple)

    def score(self, record: MemoryRecord, relevance: float, ctx: RankContext) -> float:
        return relevance + sum(w * term(record, ctx) for w, term in self.terms)

    def rank(
        self, scored: Sequence[tuple[MemoryRecord, float]], ctx: RankContext
    ) -> list[tuple[MemoryRecord, float]]:
        """Re-score and sort ``(record, relevance)`` pairs, best first (stable)."""
        if not self.terms:
            return sorted(scored, key=lambda pair: -pair[1])
        rescored = [(r, self.score(r, s, ctx)) for r, s in scored]
        return sorted(rescored, key=lambda pair: -pair[1])


def recency_term(half_life_days: float = 30.0) -> RankingTerm:
    """A term in [0, 1]: 1 for a memory updated now, 0.5 after ``half_life_days``."""
    half_life = half_life_days * 86_400.0

    def term(record: MemoryRecord, ctx: RankContext) -> float:
        effective = record.updated_at if record.updated_at is not None else record.created_at
        age = max(0.0, ctx.now - effective)
        return 0.5 ** (age / half_life)

    return term
