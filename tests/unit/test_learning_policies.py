"""The learning loop's pure rules (memorist.policies.learning): confidence (§6.2),
version retention (§7.3), trace sampling and addressing (§7.1)."""

from __future__ import annotations

import pytest

from memorist import ConfigurationError
from memorist.policies.learning import (
    DAY,
    LearningConfig,
    VersionRetention,
    canonical_steps,
    category_of,
    confidence,
    improvement,
    keep_trace,
    recency_factor,
    support,
    trace_digest,
    version_label,
    versions_to_keep,
)


def test_confidence_is_success_rate_plus_an_evidence_boost_times_recency() -> None:
    assert confidence(3, 4, last_evidence_at=0, now=0) == 0.79  # 0.75 + 0.04
    assert confidence(10, 10, last_evidence_at=0, now=0) == 1.0  # capped
    assert confidence(25, 50, last_evidence_at=0, now=0) == 0.7  # the boost stops at 0.2
    assert confidence(1, 1, last_evidence_at=0, now=90 * DAY, half_life_days=90) == 0.5  # one half life
    assert confidence(1, 1, last_evidence_at=0, now=90 * DAY, half_life_days=None) == 1.0
    assert confidence(0, 0, last_evidence_at=0, now=0) == 0.0
    assert recency_factor(None, 10, 30) == 1.0


def test_support_follows_the_category() -> None:
    assert [support("helpful", s) for s in ("success", "partial", "failure")] == [1.0, 0.5, 0.0]
    assert [support("harmful", s) for s in ("success", "partial", "failure")] == [0.0, 0.5, 1.0]
    assert {support("neutral", s) for s in ("success", "partial", "failure")} == {0.5}
    assert [category_of(x) for x in ("✓", "✗", "○", "anti_pattern", "Helpful", "bogus", 3)] == [
        "helpful", "harmful", "neutral", "harmful", "helpful", None, None]


def test_version_retention_keeps_latest_majors_and_recent() -> None:
    now = 200 * DAY
    versions = [(n, n in (1, 4), (n * 10) * DAY) for n in range(1, 21)]  # v1 at day 10 ... v20 at day 200
    keep = versions_to_keep(versions, now=now, rule=VersionRetention())
    assert keep == {1, 4} | set(range(11, 21))  # majors, and the last 90 days (which hold the latest 5)
    assert versions_to_keep(versions, now=now, rule=VersionRetention(keep_latest=5, keep_all_major=False, keep_days=None)) == set(range(16, 21))
    assert versions_to_keep(versions, now=now, rule=VersionRetention(keep_latest=1, keep_days=0)) == {1, 4, 20}
    assert versions_to_keep([], now=now, rule=VersionRetention()) == set()


def test_version_labels() -> None:
    assert version_label(None, major=False) == "1.0"
    assert version_label("1.0", major=False) == "1.1"
    assert version_label("1.7", major=True) == "2.0"


def test_traces_sampling_and_address() -> None:
    assert keep_trace("failure", sample_rate=0.0, always_store_failures=True, draw=0.99)
    assert keep_trace("partial", sample_rate=0.0, always_store_failures=True, draw=0.99)
    assert not keep_trace("failure", sample_rate=0.0, always_store_failures=False, draw=0.99)
    assert keep_trace("success", sample_rate=0.1, always_store_failures=True, draw=0.05)
    assert not keep_trace("success", sample_rate=0.1, always_store_failures=True, draw=0.5)
    a = [{"type": "decision", "description": "x", "metadata": {"b": 1, "a": 2}, "at": "monday"}]
    b = [{"description": "x", "type": "decision", "metadata": {"a": 2, "b": 1}, "at": "friday"}]
    assert canonical_steps(a) == canonical_steps(b) and trace_digest(a) == trace_digest(b)
    assert len(trace_digest(a)) == 64 and trace_digest(a) != trace_digest([])


def test_improvement() -> None:
    assert improvement([0.0, 0.0], [1.0, 0.5]) == 0.75
    assert improvement([], [1.0]) == 0.0


def test_config_checks_and_mapping() -> None:
    config = LearningConfig.from_mapping({"trajectory_sample_rate": 1.0, "versions": {"keep_latest": 2}}).resolved({})
    assert config.trajectory_sample_rate == 1.0 and config.versions.keep_latest == 2 and config.trajectory_retention_days == 30
    assert LearningConfig(trajectory_retention_days=0).resolved({}).trajectory_retention_days is None
    assert LearningConfig().resolved({"TRAJECTORY_RETENTION_DAYS": "never"}).trajectory_retention_days is None
    for bad in ({"trajectory_sample_rate": 2.0}, {"merge_threshold": 0}, {"max_strategies": 0},
                {"versions": VersionRetention(keep_latest=0)}):
        with pytest.raises(ConfigurationError):
            LearningConfig(**bad).resolved({})
    with pytest.raises(ConfigurationError, match="unknown learning setting"):
        LearningConfig.from_mapping({"sample": 1})
