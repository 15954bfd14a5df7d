"""Search: a query becomes the scope's memories most relevant to it, best first.

Up to four rankings of candidates are fused by weighted reciprocal rank fusion
(:func:`~memorist.policies.fusion.reciprocal_rank_fusion`): vector similarity and BM25
always; the memories of a time window when the query names one ("last week", "in
May 2023", relative to the reference time; :mod:`memorist.policies.timeparse`; with
no reference time and nothing of the scope in that window, relative to the scope's
newest memory); and
a speaker's memories when the query names a known speaker. Among the best few,
memories said in one stretch of time (an episode) rise toward that episode's best
match (:func:`~memorist.policies.fusion.episode_fusion`). A memory that asks a
question (:func:`~memorist.policies.text.asks`) ranks with its fused score lowered by
``retrieval.question_discount``. Filters
(:mod:`memorist.policies.filters`) then drop records, and the ranking policy's terms
(:class:`~memorist.policies.ranking.RankingPolicy`) reorder the rest. A similarity
``threshold`` drops every memory less similar to the query (cosine) before that,
compared as reported (:func:`reported_similarity`): a result shown with a similarity
equal to the threshold is kept, one shown below it is not.

Only facts are candidates (:func:`memorist.model.is_fact`): playbook strategies,
trajectories and the other learning objects of the same space are dropped after
fusion; when they, or a filter, left fewer than ``limit`` records, the rankings are
read deeper (:meth:`Searcher._retrieve`).

The facade (:meth:`memorist.Memory.search`) checks the arguments, embeds the query
and turns the records into result items; everything between is here.
"""

from __future__ import annotations

import heapq
import math
from contextlib import nullcontext

import numpy as np

from ..config import MemoryConfig
from ..model import MemoryRecord, Status, is_fact
from ..policies.filters import Filter
from ..policies.fusion import episode_fusion, normalized_score_fusion, reciprocal_rank_fusion
from ..policies.ranking import RankContext, RankingPolicy
from ..policies.text import about_asking, asks, named_speakers
from ..policies.timeparse import query_window
from ..policies.validity import validity_cutoff
from ..store.base import ScopeFilter, Store
from ..work import charge

Ranked = list[tuple[MemoryRecord, float]]

#: The digits a result's ``similarity`` is reported with.
SIMILARITY_DIGITS = 6
#: Hits beyond which a search fuses and ranks them with the store let go (they grow
#: with the caller's ``limit``: 400,000 for a limit of 100,000).
_LARGE = 2_000


def reported_similarity(similarity: float) -> float:
    """A cosine similarity as search results report it, and as ``threshold`` is
    compared with: the reported value, reused as a threshold, keeps that result."""
    return round(float(similarity), SIMILARITY_DIGITS)



class Searcher:
    """Runs the search pipeline against one store.

    ``config`` is read at every search (its ``retrieval`` settings and
    ``decay_days``), as the facade's other reads do.
    """

    def __init__(self, store: Store, config: MemoryConfig, ranking: RankingPolicy) -> None:
        self.store = store
        self.config = config
        self.ranking = ranking

    def search(
        self,
        scope: ScopeFilter,
        query: str,
        qvec: np.ndarray,
        *,
        limit: int,
        predicate: Filter | None,
        reference: float | None,
        now: float,
        threshold: float | None = None,
    ) -> tuple[Ranked, dict[str, float]]:
        """The ``limit`` best records with their fused scores, and the cosine
        similarity to the query of each of them.

        The returned records are touched: a search is an access (decay counts them).
        """
        # One group of reads: the store checks for other writers once, not per call.
        with self.store.reading():
            ranked, similarity = self._retrieve(scope, query, qvec, limit, predicate, reference, now, threshold)
            missing = [r.id for r, _ in ranked if r.id not in similarity]
            if missing:  # found by keywords, time or speaker only
                similarity.update(self.store.similarities(scope, qvec, missing))
            charge(sum(len(r.text) for r, _ in ranked) // 1000)  # the answer's text
            self.store.touch([r for r, _ in ranked], query=query)
        return ranked, similarity

    def _retrieve(
        self,
        scope: ScopeFilter,
        query: str,
        qvec: np.ndarray,
        limit: int,
        predicate: Filter | None,
        reference: float | None,
        now: float,
        threshold: float | None = None,
    ) -> tuple[Ranked, dict[str, float]]:
        """The ranked records, and the cosine similarity of those found by vector (of
        every candidate, with a ``threshold``).

        The vector and keyword rankings are read ``pool`` deep. When the records
        they bring are too few once a filter, or the learning objects that are not
        facts, took some out, they are read again eight times deeper, then 64 times,
        then the vector ranking whole (exactly, as a large space's approximate graph
        may skip some): a filter that keeps most memories costs what a search
        without it does, one that keeps 2 % of 100,000 reads a few hundred, and one
        that keeps almost nothing still finds what it keeps. What was read stays
        decided.

        Before reading 64 times deeper, a filter whose conditions the store can
        check itself (:meth:`Store.narrowed_ids`) is narrowed there; when that keeps
        at most ``64 * pool`` memories, the deeper readings rank and stop exactly as
        before but read only those (the others cannot pass): a filter keeping a
        handful of 100,000 memories reads that handful, and one keeping none reads
        nothing more.

        A candidate that asks a question is scored lower when it is read
        (``retrieval.question_discount``; not for a query about asking), so the candidates after the first
        ``limit`` (or ``pool``) whose fused score is still above the lowest score
        kept could overtake it: they are read too, up to ``pool`` more.
        """
        conf = self.config.retrieval
        cutoff = validity_cutoff(now, self.config.decay_days)
        pool = max(conf.candidates, 4 * limit)
        # Ranking terms may reorder the pool, so they need all of it; with none, only
        # the first ``limit`` records are ever shown.
        need = pool if self.ranking.terms else limit
        # Filters and ranking terms may read any field; showing results only needs
        # what the search index holds.
        exact = predicate is not None or bool(self.ranking.terms)
        # A query about asking ("what did I ask…") looks for the memories that ask.
        discount = 0.0 if about_asking(query) else conf.question_discount
        narrowing = predicate.narrowing if predicate is not None else None
        among: set[str] | None = None  # the memories the store narrowed the filter to
        signals = self._signals(scope, query, qvec, pool=pool, reference=reference, cutoff=cutoff, now=now)
        decided: dict[str, MemoryRecord | None] = {}  # the records read: None when not a candidate

        def candidates_of(chunk: list[str], fused: dict[str, float]) -> Ranked:
            """The candidates among ``chunk`` with their scores, each record read once."""
            unread = [m for m in chunk if m not in decided]
            if among is not None:
                # The rest cannot pass: ranked as before, but never read.
                decided.update((m, None) for m in unread if m not in among)
                unread = [m for m in unread if m in among]
            if unread:
                charge(len(unread))
                records = self.store.get_many(unread, scope=scope, exact_access=exact)
                # A filter is checked with the store let go (as long as it takes).
                with self.store.released() if predicate is not None else nullcontext():
                    for mid in unread:
                        record = records.get(mid)
                        # (Deleted, archived, promoted or moved to another tenant since
                        # the rankings were read: other callers write while the store
                        # is let go.)
                        keep = (record is not None and record.status is Status.ACTIVE and is_fact(record)
                                and scope.matches(record.scope) and (predicate is None or predicate(record)))
                        decided[mid] = record if keep else None
            return [(record, _discounted(record, fused[mid], discount)) for mid in chunk if (record := decided[mid]) is not None]

        for depth in (pool, 8 * pool, 64 * pool, None):
            if narrowing is not None and (depth is None or depth > 8 * pool):
                # Reading deeper costs more than the store's own check of the filter.
                narrowed = self.store.narrowed_ids(scope, narrowing, cutoff=cutoff, now=now, limit=64 * pool)
                narrowing = None
                if narrowed is not None:
                    charge(len(narrowed))
                    if not narrowed:
                        return [], {}
                    among = set(narrowed)
            vector_hits = self.store.vector_search(scope, qvec, k=depth, cutoff=cutoff, now=now)
            text_hits = self.store.text_search(scope, query, k=depth or 64 * pool, cutoff=cutoff, now=now)
            charge(len(vector_hits) + len(text_hits))  # the work meter: cost, and a caller that left
            with self.store.released() if len(vector_hits) + len(text_hits) > _LARGE else nullcontext():
                fused, ordered = self._fuse(scope, {"vector": vector_hits, "text": text_hits, **signals})
            similarity = dict(vector_hits)
            if threshold is not None:
                similarity.update(self.store.similarities(scope, qvec, [m for m in ordered if m not in similarity]))
                ordered = [m for m in ordered if reported_similarity(similarity.get(m, -2.0)) >= threshold]
            candidates: Ranked = []
            step = pool if exact else need
            read = 0  # how much of ``ordered`` was looked at
            while read < len(ordered) and len(candidates) < need:
                candidates += candidates_of(ordered[read : read + step], fused)
                read += step
            if len(candidates) >= need and discount:
                # Some of those read may have been lowered for asking: the next ones
                # fused above the ``need``-th score left could still rank among the
                # best. One more read (more candidates only raise that score), of
                # at most ``pool`` records (a large discount lowers the floor far).
                floor = heapq.nlargest(need, (score for _, score in candidates))[-1]
                end, last = read, min(len(ordered), read + pool)
                while end < last and fused[ordered[end]] > floor:
                    end += 1
                candidates += candidates_of(ordered[read:end], fused)
            cut = depth is not None and (len(vector_hits) >= depth or len(text_hits) >= depth)
            rejected = any(record is None for record in decided.values())
            if len(candidates) >= need or not cut or not rejected:
                break
        with self.store.released() if len(candidates) > _LARGE else nullcontext():
            return self.ranking.rank(candidates, RankContext(query=query, now=now))[:limit], similarity

    def _signals(
        self,
        scope: ScopeFilter,
        query: str,
        qvec: np.ndarray,
        *,
        pool: int,
        reference: float | None,
        cutoff: float | None,
        now: float,
    ) -> dict[str, list[tuple[str, float]]]:
        """The rankings beside vector and keywords, ``pool`` deep: the memories of the
        query's time window and of the speakers it names."""
        conf = self.config.retrieval
        scored: dict[str, list[tuple[str, float]]] = {}
        window = query_window(query, reference if reference is not None else now) if conf.time_weight else None
        if window is not None:
            timed = self.store.vector_search(scope, qvec, k=pool, cutoff=cutoff, now=now, window=window)
            if not timed and reference is None and conf.time_from_latest:
                window, timed = self._from_latest(scope, query, qvec, window, pool=pool, cutoff=cutoff, now=now)
            scored["time"] = timed
        if conf.speaker_weight:
            for speaker in named_speakers(query, self.store.speakers(scope)):
                # With a time window too, "what did Caroline say last week" asks
                # for Caroline's turns of that week: both conditions at once.
                scored["speaker:" + speaker] = self.store.vector_search(scope, qvec, k=pool, cutoff=cutoff, now=now, speaker=speaker, window=window)
        return scored

    def _fuse(self, scope: ScopeFilter, scored: dict[str, list[tuple[str, float]]]) -> tuple[dict[str, float], list[str]]:
        """The rankings fused: each memory's score, and the memories best first (of
        equal scores, the oldest first)."""
        conf = self.config.retrieval
        weights = {"vector": conf.vector_weight, "text": conf.text_weight, "time": conf.time_weight}
        weights.update({name: conf.speaker_weight for name in scored if name.startswith("speaker:")})
        fused = reciprocal_rank_fusion(
            {name: [m for m, _ in hits] for name, hits in scored.items()}, weights, k=conf.rrf_k,
            scores={name: [score for _, score in hits] for name, hits in scored.items()},
        )
        if conf.score_weight:
            # Scores, normalised, beside the ranks: a list's clear winner keeps its lead.
            by_score = normalized_score_fusion(scored, weights)
            fused = {m: (1 - conf.score_weight) * f + conf.score_weight * by_score.get(m, 0.0) for m, f in fused.items()}
        ordered = sorted(fused, key=fused.__getitem__, reverse=True)
        episodes = bool(conf.episode_weight) and len(ordered) > 1
        # Equal scores come oldest first (created_at), whichever ranking listed a
        # memory first; of equal times, in the rankings' order. The times of the
        # best few, which episodes need, are read in the same call.
        ties = _ties(ordered, fused)
        tied = [m for start, end in ties for m in ordered[start:end]]
        wanted = [*ordered[: conf.episode_depth], *tied] if episodes else tied
        times = self.store.created_times(scope, list(dict.fromkeys(wanted))) if wanted else {}
        for start, end in ties:
            ordered[start:end] = sorted(ordered[start:end], key=lambda m: times.get(m, math.inf))

        def best_first(m: str) -> tuple[float, float]:
            return -fused[m], times.get(m, math.inf)

        if episodes:
            # What was said around a strong match rises toward it, among the best
            # few (deeper, whole episodes would crowd out lone matches). Scores only
            # rise, so the best few stay ahead of the rest and only they are re-sorted.
            head = ordered[: conf.episode_depth]
            at = {m: times[m] for m in head if m in times}
            fused.update(episode_fusion(fused, at, weight=conf.episode_weight, gap=conf.episode_gap))
            ordered[: len(head)] = sorted(head, key=best_first)
        return fused, ordered

    def _from_latest(
        self,
        scope: ScopeFilter,
        query: str,
        qvec: np.ndarray,
        window: tuple[float, float],
        *,
        pool: int,
        cutoff: float | None,
        now: float,
    ) -> tuple[tuple[float, float], list[tuple[str, float]]]:
        """The query's time window counted from the scope's newest memory, and the
        memories dated in it, when the window counted from now held none of them.

        A relative expression means the same span back from another moment; an
        absolute one ("in May 2023") gives the same window again and nothing more is
        read. Two reads at most: the newest memory, and the window's memories.
        """
        newest = self.store.list(scope, limit=1, cutoff=cutoff, now=now)
        if not newest or newest[0].created_at >= now:
            return window, []
        moved = query_window(query, newest[0].created_at)
        if moved is None or moved == window:
            return window, []
        return moved, self.store.vector_search(scope, qvec, k=pool, cutoff=cutoff, now=now, window=moved)


def _ties(ordered: list[str], fused: dict[str, float]) -> list[tuple[int, int]]:
    """Where ``ordered`` (best first) holds runs of equal fused scores: each run's
    start and end."""
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(ordered) + 1):
        if i == len(ordered) or fused[ordered[i]] != fused[ordered[start]]:
            if i - start > 1:
                runs.append((start, i))
            start = i
    return runs


def _discounted(record: MemoryRecord, relevance: float, discount: float) -> float:
    """A candidate's fused score, lowered when it asks a question
    (``retrieval.question_discount``)."""
    return relevance * (1.0 - discount) if discount and asks(record.text) else relevance


__all__ = ["SIMILARITY_DIGITS", "Searcher", "reported_similarity"]
