"""Rank fusion: combine ranked candidate lists into one ranking."""

from __future__ import annotations

import operator
from collections.abc import Hashable, Mapping, Sequence

#: The constant of reciprocal rank fusion (Cormack et al., 2009).
RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[Hashable]],
    weights: Mapping[str, float] | None = None,
    *,
    k: int = RRF_K,
    scores: Mapping[str, Sequence[float]] | None = None,
) -> dict[Hashable, float]:
    """Fuse ranked lists; returns ``{item: score}`` with scores in (0, 1].

    Each list contributes ``weight / (k + rank)`` (rank starting at 1) for every
    item it holds. Scores are divided by the best possible total, so an item ranked
    first by every list scores 1.0 whatever ``k`` and the weights are. ``scores``
    gives a list's scores, best first: items of equal score share the rank of the
    first of them (the order of a tie says nothing, and differs between stores).
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    weights = weights or {}
    scores = scores or {}
    total: dict[Hashable, float] = {}
    best = 0.0
    for name, ranking in rankings.items():
        w = float(weights.get(name, 1.0))
        if w <= 0 or not ranking:
            continue
        best += w / (k + 1)
        get = total.get
        values = scores.get(name)
        if values is None or not any(map(operator.eq, values, values[1:])):
            for rank, item in enumerate(ranking, start=k + 1):
                total[item] = get(item, 0.0) + w / rank
            continue
        rank, previous = k + 1, None
        for i, item in enumerate(ranking):
            if values[i] != previous:  # best first: a tie is a run of equal scores
                rank, previous = k + 1 + i, values[i]
            total[item] = get(item, 0.0) + w / rank
    if best == 0:
        return {}
    return {item: score / best for item, score in total.items()}


def normalized_score_fusion(
    scored: Mapping[str, Sequence[tuple[Hashable, float]]],
    weights: Mapping[str, float] | None = None,
) -> dict[Hashable, float]:
    """Fuse scored lists by their scores, each first normalised to [0, 1].

    Each list's scores are min-max normalised over the list (its best 1, its worst
    0; a list of equal scores gives 1), so cosines and BM25 scores, on different
    scales, can be added: ``sum(weight * normalised)``, divided by the total weight
    (an item first in every list scores 1.0). An item a list lacks gets 0 from it.
    Unlike rank fusion, a clear winner of one list keeps its lead over items that
    are only a little better in another.
    """
    weights = weights or {}
    total: dict[Hashable, float] = {}
    best = 0.0
    for name, items in scored.items():
        w = float(weights.get(name, 1.0))
        if w <= 0 or not items:
            continue
        best += w
        values = [float(s) for _, s in items]
        hi, lo = max(values), min(values)
        span = hi - lo
        for (item, _), v in zip(items, values, strict=True):
            norm = (v - lo) / span if span > 0 else 1.0
            total[item] = total.get(item, 0.0) + w * norm
    if best == 0:
        return {}
    return {item: score / best for item, score in total.items()}


def episode_fusion(
    fused: Mapping[Hashable, float],
    times: Mapping[Hashable, float],
    *,
    weight: float,
    gap: float,
) -> dict[Hashable, float]:
    """The fused scores of the candidates in ``times``, raised toward their episode's best.

    Memories are episodic: what a question asks about was usually said in one
    stretch of conversation, and the turns of that stretch that match the question
    less well on their own (a reply, a follow-up) are the ones a ranking misses.
    The candidates given a time (``times``, seconds; search gives the best few)
    whose times lie within ``gap`` seconds of the next one form an episode, and
    each becomes ``(score + weight * best) / (1 + weight)``, ``best`` being its
    episode's best fused score. A member rises toward its episode's best match; the
    best of each episode keeps its score, so the best match of all stays first and
    a lone memory loses nothing to a long conversation; no candidate falls, so those
    given times stay ahead of the others, whose scores (not returned) do not change.
    Memories stored all at once are one episode, and their order does not change.
    """
    if weight <= 0:
        return {item: fused[item] for item in times if item in fused}
    ordered = sorted(((t, item) for item, t in times.items() if item in fused), key=lambda pair: pair[0])
    episodes: list[list[Hashable]] = []
    last = None
    for t, item in ordered:
        if last is None or t - last > gap:
            episodes.append([])
        last = t
        episodes[-1].append(item)
    raised: dict[Hashable, float] = {}
    for members in episodes:
        best = max(fused[item] for item in members)
        for item in members:
            score = fused[item]
            raised[item] = score if score == best else (score + weight * best) / (1 + weight)
    return raised
