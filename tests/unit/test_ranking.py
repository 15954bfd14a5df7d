"""RankingPolicy: relevance plus weighted terms; the recency term."""

from __future__ import annotations

import pytest

from memorist import RankContext, RankingPolicy
from memorist.model import MemoryRecord, Scope
from memorist.policies.ranking import recency_term

NOW = 1_700_000_000.0
DAY = 86_400.0


def rec(mid: str, created: float = NOW, updated: float | None = None, importance: float = 0.5) -> MemoryRecord:
    return MemoryRecord(id=mid, scope=Scope(user_id="u"), text=mid, created_at=created, updated_at=updated, importance=importance)


CTX = RankContext(query="q", now=NOW)


def test_no_terms_sorts_by_relevance():
    pairs = [(rec("low"), 0.2), (rec("high"), 0.9), (rec("mid"), 0.5)]
    ranked = RankingPolicy().rank(pairs, CTX)
    assert [r.id for r, _ in ranked] == ["high", "mid", "low"]
    assert [s for _, s in ranked] == [0.9, 0.5, 0.2]


def test_no_terms_is_stable_for_ties():
    pairs = [(rec("first"), 0.5), (rec("second"), 0.5), (rec("third"), 0.5)]
    assert [r.id for r, _ in RankingPolicy().rank(pairs, CTX)] == ["first", "second", "third"]


def test_a_term_reorders():
    importance = lambda r, ctx: r.importance  # noqa: E731
    pairs = [(rec("relevant", importance=0.0), 0.6), (rec("important", importance=1.0), 0.5)]
    assert RankingPolicy().rank(pairs, CTX)[0][0].id == "relevant"
    ranked = RankingPolicy(terms=((0.5, importance),)).rank(pairs, CTX)
    assert [r.id for r, _ in ranked] == ["important", "relevant"]
    assert ranked[0][1] == pytest.approx(0.5 + 0.5 * 1.0)
    assert ranked[1][1] == pytest.approx(0.6)


def test_score_is_relevance_plus_weighted_terms():
    policy = RankingPolicy(terms=((2.0, lambda r, c: 0.25), (-1.0, lambda r, c: 0.1)))
    assert policy.score(rec("x"), 0.3, CTX) == pytest.approx(0.3 + 0.5 - 0.1)


def test_terms_see_the_context():
    seen = []
    policy = RankingPolicy(terms=((1.0, lambda r, c: seen.append((c.query, c.now)) or 0.0),))
    policy.rank([(rec("x"), 1.0)], CTX)
    assert seen == [("q", NOW)]


def test_recency_term_halves_at_half_life():
    term = recency_term(half_life_days=10)
    assert term(rec("now"), CTX) == pytest.approx(1.0)
    assert term(rec("h", created=NOW - 10 * DAY), CTX) == pytest.approx(0.5)
    assert term(rec("2h", created=NOW - 20 * DAY), CTX) == pytest.approx(0.25)


def test_recency_term_uses_updated_at_when_set():
    term = recency_term(half_life_days=10)
    assert term(rec("u", created=NOW - 100 * DAY, updated=NOW - 10 * DAY), CTX) == pytest.approx(0.5)


def test_recency_term_clamps_future_to_one():
    assert recency_term(10)(rec("future", created=NOW + DAY), CTX) == pytest.approx(1.0)


def test_recency_reorders_equally_relevant_memories():
    policy = RankingPolicy(terms=((0.1, recency_term(30)),))
    pairs = [(rec("old", created=NOW - 300 * DAY), 0.5), (rec("new", created=NOW - DAY), 0.5)]
    assert [r.id for r, _ in policy.rank(pairs, CTX)] == ["new", "old"]
