"""Spec 003's memory evaluator: the scores against its formulas, and an evaluation
run that deduplicates, supersedes, prunes from the index (never the log) and logs
its stats."""

from __future__ import annotations

import numpy as np
import pytest

from memorist import Memory, ValidationError
from memorist.policies.evaluation import (
    WEEK,
    Candidate,
    EvaluationConfig,
    accuracy_score,
    normalised,
    plan,
    recency_score,
    score,
)

T0 = 1_700_000_000.0  # in the past: a minute dated in the future is refused


# the formulas ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("weeks", "expected"), [(0, 1.0), (1, 0.75), (2, 0.5), (3, 0.25), (4, 0.0), (6, 0.0), (52, 0.0)])
def test_recency_is_one_minus_age_weeks_over_four(weeks, expected):
    assert recency_score(weeks * WEEK) == pytest.approx(expected)


def test_recency_of_a_future_minute_is_one_and_the_window_is_configurable():
    assert recency_score(-3600) == 1.0
    assert recency_score(4 * WEEK, weeks=8) == pytest.approx(0.5)


def test_accuracy_relevance_impact_and_the_composite():
    assert accuracy_score(None) == 0.5  # no outcome insight
    assert accuracy_score(0.85) == 0.85
    assert normalised(3, 6) == 0.5 and normalised(0, 0) == 0.0 and normalised(6, 6) == 1.0
    s = score(age_seconds=2 * WEEK, retrieved=2, max_retrieved=4, outcome=0.9, referenced_by=1, max_referenced_by=1)
    assert (s.recency, s.relevance, s.accuracy, s.impact) == (0.5, 0.5, 0.9, 1.0)
    assert s.composite == pytest.approx((0.5 + 0.5 + 0.9 + 1.0) / 4)
    fresh = score(age_seconds=0, retrieved=0, max_retrieved=0, outcome=None, referenced_by=0, max_referenced_by=0)
    assert fresh.composite == 0.375  # survives a run, until it ages past about 2.5 weeks unused


def test_plan_dedup_then_contradiction_then_threshold():
    c = [
        Candidate("keep", T0, 0.8, None, False),
        Candidate("dup", T0 - 1, 0.6, None, False),
        Candidate("winner", T0, 0.7, 0.9, False),
        Candidate("loser", T0, 0.5, 0.2, False),
        Candidate("stale", T0, 0.2, None, False),
    ]
    vectors = np.array([[1, 0, 0], [0.99, 0.14, 0], [0, 1, 0], [0, 1, 0.1], [0, 0, 1]], dtype=np.float32)
    # keep/dup: the same thing twice; winner/loser: the same thing, opposite outcomes (never merged: superseded)
    gone = {r.id: (r.reason, r.link) for r in plan(c, vectors, EvaluationConfig())}
    assert gone == {"dup": ("duplicate", "keep"), "loser": ("superseded", "winner"), "stale": ("low_score", None)}


def test_many_copies_of_one_minute_all_give_way_to_the_best():
    """Before, every similar pair was kept first (8,000 copies: 32 million pairs, 4 GB,
    17 s): a minute absorbed already is no longer compared with the rest. Several
    blocks of copies, a few contradicting ones, and minutes of other subjects."""
    n = 1_300
    axes = np.eye(41, dtype=np.float32)
    same = np.tile(axes[:1], (n, 1))
    other = axes[1:]  # 40 minutes of other subjects, alike to nothing
    c = [Candidate(f"m{i}", T0 - i, 0.9 - i * 1e-4, 0.1 if i % 97 == 5 else 0.9, False) for i in range(n)]
    c += [Candidate(f"o{i}", T0 - i, 0.9, None, False) for i in range(40)]
    gone = {r.id: (r.reason, r.link) for r in plan(c, np.vstack([same, other]), EvaluationConfig())}
    contrary = [f"m{i}" for i in range(n) if i % 97 == 5]  # the opposite outcome: never merged with the rest
    assert "m0" not in gone  # the best copy stays
    assert all(gone[f"m{i}"] == ("duplicate", "m0") for i in range(1, n) if f"m{i}" not in contrary)
    assert gone["m5"] == ("superseded", "m0")  # the best contrary copy gives way to the better one
    assert all(gone[m] == ("duplicate", "m5") for m in contrary[1:])
    assert not [k for k in gone if k.startswith("o")]


def test_config_is_checked():
    with pytest.raises(ValidationError, match="prune_below"):
        EvaluationConfig(prune_below=-1)
    with pytest.raises(ValidationError, match="nonsense"):
        EvaluationConfig.from_mapping({"nonsense": 1})


# the run ------------------------------------------------------------------------------------------
def rec(m: Memory, note: str, *, days: float = 0, **kw) -> str:
    kw.setdefault("project_id", "apollo")
    kw.setdefault("agent_id", "coder")
    return m.minutes.record(kw.pop("kind", "status"), memory_note=note, now=T0 - days * 86400, **kw)["id"]


def test_scores_of_a_run_follow_the_formulas(m):
    a = rec(m, "assigned the parser", days=14)
    b = rec(m, "parser shipped", days=0, data={"success_criteria_met": 80}, context_references=[a])
    rec(m, "parser reviewed", days=0, context_references=[a, b])
    m.minutes.search("parser shipped", 1, project_id="apollo")  # b retrieved once: the most retrieved
    report = m.minutes.evaluate(project_id="apollo", now=T0, dry_run=True)
    sa, sb = report["scores"][a], report["scores"][b]
    assert (sa["recency"], sa["relevance"], sa["accuracy"], sa["impact"]) == (0.5, 0.0, 0.5, 1.0)
    assert (sb["recency"], sb["relevance"], sb["accuracy"], sb["impact"]) == (1.0, 1.0, 0.8, 0.5)
    assert sb["composite"] == pytest.approx((1.0 + 1.0 + 0.8 + 0.5) / 4)


def test_a_run_decides_on_the_unrounded_composite(m):
    # recency 0.69996: the composite (0.69996 + 0 + 0.5 + 0) / 4 = 0.29999 is below 0.3, though it shows as 0.3.
    age = (1 - 0.69996) * 4 * WEEK
    s = score(age_seconds=age, retrieved=0, max_retrieved=0, outcome=None, referenced_by=0, max_referenced_by=0)
    assert s.composite == pytest.approx(0.29999) and s.composite < 0.3 and s.to_dict()["composite"] == 0.3
    assert [r.reason for r in plan([Candidate("x", T0, s.composite, None, False)], np.ones((1, 3)), EvaluationConfig())] == ["low_score"]
    almost = rec(m, "weekly sync about the parser", days=age / 86400)
    report = m.minutes.evaluate(project_id="apollo", now=T0, dry_run=True)
    assert report["scores"][almost]["composite"] == 0.3  # shown rounded
    assert report["removed"] == [{"id": almost, "reason": "low_score", "link": None, "composite": 0.3}]


def test_a_run_prunes_from_the_index_never_the_log_and_logs_its_stats(m):
    old = rec(m, "ancient standup notes", days=40)
    fresh = rec(m, "fresh release checklist", days=0)
    report = m.minutes.evaluate(project_id="apollo", now=T0)
    assert report["removed"] == [{"id": old, "reason": "low_score", "link": None, "composite": 0.125}]
    assert (report["in_log"], report["in_index"], report["kept_in_index"], report["pruned"]) == (2, 2, 1, 1)
    assert report["average_score"] == 0.375
    assert [x["id"] for x in m.minutes.history(project_id="apollo")["minutes"]] == [old, fresh]
    assert m.minutes.get(old)["indexed"] is False and m.minutes.get(fresh)["indexed"] is True
    assert [x["id"] for x in m.minutes.search("ancient standup notes", 5, project_id="apollo")] == [fresh]
    stats = m.store.events(ops=["minute_evaluation"])
    assert len(stats) == 1 and stats[0].seq == report["event_seq"]
    assert stats[0].payload == {"in_log": 2, "in_index": 2, "kept_in_index": 1, "pruned": 1, "deduplicated": 0,
                                "superseded": 0, "pruned_low_score": 1, "average_score": 0.375}
    again = m.minutes.evaluate(project_id="apollo", now=T0)  # what left the index is not evaluated again
    assert (again["in_log"], again["in_index"], again["pruned"]) == (2, 1, 0)


def test_contradicting_minutes_the_lower_scored_is_superseded_with_a_link(m):
    good = rec(m, "coder handled the database migration", days=1, kind="task_completed", data={"success_criteria_met": 90})
    bad = rec(m, "coder handled the database migration", days=3, kind="task_completed", data={"success_criteria_met": 20})
    report = m.minutes.evaluate(project_id="apollo", now=T0)
    assert [(x["id"], x["reason"], x["link"]) for x in report["removed"]] == [(bad, "superseded", good)]
    assert m.minutes.get(bad)["lineage"]["superseded_by"] == good
    assert m.minutes.get(good)["lineage"]["supersedes"] == [bad]
    assert [e.op for e in m.store.history(bad)][-1] == "minute_supersede"


def test_duplicates_keep_the_best_and_link_it(m):
    first = rec(m, "the team agreed on weekly demos", days=2)
    second = rec(m, "the team agreed on weekly demos", days=1)
    report = m.minutes.evaluate(project_id="apollo", now=T0)
    assert [(x["id"], x["reason"], x["link"]) for x in report["removed"]] == [(first, "duplicate", second)]
    assert report["deduplicated"] == 1
    assert m.minutes.get(second)["lineage"]["merged_from"] == [first]


def test_a_dry_run_changes_nothing(m):
    rec(m, "ancient standup notes", days=40)
    rec(m, "the team agreed on weekly demos", days=2)
    rec(m, "the team agreed on weekly demos", days=1)
    events = len(m.store.events())
    before = {r.id: (r.status, r.lineage) for r in m.store.list(m.minutes.engine.scope("apollo"))}
    report = m.minutes.evaluate(project_id="apollo", now=T0, dry_run=True)
    assert report["dry_run"] is True and report["pruned"] == 2 and report["event_seq"] is None
    assert len(m.store.events()) == events
    assert {r.id: (r.status, r.lineage) for r in m.store.list(m.minutes.engine.scope("apollo"))} == before
    assert m.minutes.evaluate(project_id="apollo", now=T0)["removed"] == report["removed"]  # the same decisions for real


def test_evaluate_checks_its_arguments(m):
    with pytest.raises(ValidationError, match="dry_run"):
        m.minutes.evaluate(dry_run="yes")
    with pytest.raises(ValidationError, match="config"):
        m.minutes.evaluate(config=3)
    rec(m, "a note", days=10)
    assert m.minutes.evaluate(project_id="apollo", now=T0, config={"prune_below": 0.5}, dry_run=True)["pruned"] == 1
    assert m.minutes.evaluate(project_id="empty", now=T0)["in_log"] == 0


def test_an_evaluation_s_dropped_duplicate_comes_back_with_rollback(m):
    first = rec(m, "the team agreed on weekly demos", days=2)
    second = rec(m, "the team agreed on weekly demos", days=1)
    before = {r.id: (r.status, r.lineage, r.valid_to) for r in m.store.list(m.minutes.engine.scope("apollo"))}
    report = m.minutes.evaluate(project_id="apollo", now=T0)
    assert report["deduplicated"] == 1 and m.minutes.get(first)["indexed"] is False
    m.rollback(report["rollback_id"], user_id="apollo")
    assert {r.id: (r.status, r.lineage, r.valid_to) for r in m.store.list(m.minutes.engine.scope("apollo"))} == before
    assert m.minutes.get(first)["indexed"] is True and "merged_from" not in m.minutes.get(second).get("lineage", {})
