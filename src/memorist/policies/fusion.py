"""Rank fusion: combine ranked candidate lists into one ranking."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

#: The constant of reciprocal rank fusion (Cormack et al., 2009).
RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[Hashable]],
    weights: Mapping[str, float] | None = None,
    *,
    k: int = RRF_K,
) -> dict[Hashable, float]:
    """Fuse ranked lists; returns ``{item: score}`` with scores in (0, 1].

    Each list contributes ``weight / (k + rank)`` (rank starting at 1) for every
    item it holds. Scores are divided by the best possible total, so an item ranked
    first by every list scores 1.0 whatever ``k`` and the weights are.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    weights = weights or {}
    total: dict[Hashable, float] = {}
    best = 0.0
    for name, ranking in rankings.items():
        w = float(weights.get(name, 1.0))
        if w <= 0 or not ranking:
            continue
        best += w / (k + 1)
        get = total.get
        for rank, item in enumerate(ranking, start=k + 1):
            total[item] = get(item, 0.0) + w / rank
    if best == 0:
        return {}
    return {item: score / best for item, score in total.items()}
