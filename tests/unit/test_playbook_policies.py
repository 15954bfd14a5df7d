"""The pure rules of playbooks: the score formula, survivor choice, merging, pruning order,
tags, ranking and the configuration presets."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

from memorist import ConfigurationError, Kind, MemoryClass, MemoryRecord, Scope
from memorist.policies import decay, dedup, playbook, taxonomy
from memorist.policies.decay import component_score, decay_rates, record_score, score
from memorist.policies.dedup import (
    choose_first_seen,
    choose_survivor,
    clusters,
    finalize_bullet,
    jaccard,
    merge_into,
    near_duplicate_pairs,
)
from memorist.policies.playbook import PlaybookConfig, context_score, prune_order, prune_plan
from memorist.policies.taxonomy import infer_memory_type, infer_topic, normalize_tags, snake_case


# --- the score formula ------------------------------------------------------------------
def test_score_matches_hand_computed_values():
    rates = {"semantic": 0.01, "episodic": 0.05, "procedural": 0.002}
    # S=2, t=10: 2 * 0.99**10 = 1.8087642; E=1, t=3: 0.95**3 = 0.857375; P=0.5, t=100: 0.5 * 0.998**100 = 0.4092834
    s = score(
        {"semantic": 2.0, "episodic": 1.0, "procedural": 0.5},
        {"semantic": 10, "episodic": 17, "procedural": -80},
        20,
        rates,
    )
    assert s == pytest.approx(2 * 0.99**10 + 0.95**3 + 0.5 * 0.998**100, rel=1e-12)
    assert s == pytest.approx(1.8087642 + 0.857375 + 0.4092834, abs=1e-6)


def test_default_rates_are_the_specs():
    assert decay.DEFAULT_DECAY_RATES == {"semantic": 0.01, "episodic": 0.05, "procedural": 0.002}
    assert score({"episodic": 1.0}, {"episodic": 0}, 1) == pytest.approx(0.95)
    assert score({"procedural": 1.0}, {"procedural": 0}, 1) == pytest.approx(0.998)


def test_component_edge_cases():
    assert component_score(0.0, 0, 100, 0.5) == 0.0  # no strength, no contribution
    assert component_score(-1.0, 0, 100, 0.5) == 0.0
    assert component_score(3.0, None, 100, 0.5) == 3.0  # never touched: t = 0
    assert component_score(3.0, 120, 100, 0.5) == 3.0  # a touch after the clock read: t = 0
    assert component_score(1.0, 0, 4, 1.0) == 0.0  # rate 1: gone after one access
    assert component_score(1.0, 0, 0, 1.0) == 1.0  # ... but not before any


def test_rates_are_clamped_and_checked():
    assert decay_rates({"episodic": 1.7, "semantic": -0.2}) == {"semantic": 0.0, "episodic": 1.0, "procedural": 0.002}
    assert decay_rates({"episodic": 0.08})["episodic"] == 0.08
    with pytest.raises(ConfigurationError, match="unknown memory class 'emotional'"):
        decay_rates({"emotional": 0.1})
    with pytest.raises(ConfigurationError, match="must be a number"):
        decay_rates({"semantic": "fast"})  # type: ignore[dict-item]


def test_decay_follows_events_not_time():
    record = MemoryRecord(id="a", scope=Scope(user_id="u"), text="x", memory_class=MemoryClass.EPISODIC,
                          strengths={"semantic": 0.0, "episodic": 1.0, "procedural": 0.0},
                          last_access={"semantic": 0, "episodic": 5, "procedural": 0}, created_at=0.0)
    assert record_score(record, 5) == 1.0
    assert record_score(record, 25) == pytest.approx(0.95**20)


# --- tags and taxonomy ------------------------------------------------------------------------
def test_tags_are_snake_case_without_class_keywords_then_one_class_tag():
    assert snake_case("Common Denominator") == "common_denominator"
    assert snake_case("commonDenominator") == "common_denominator"
    assert snake_case("  Fractions!! ") == "fractions"
    assert normalize_tags(["Semantic", "Visual Aids", "visual-aids", "PROCEDURAL", "", 3], memory_class="episodic") == [
        "visual_aids", "episodic",
    ]
    assert normalize_tags(["episodic"]) == []


def test_memory_type_and_topic_inference():
    assert infer_memory_type("anything", Kind.STRATEGY) == "procedural"
    assert infer_memory_type("anything", Kind.PREFERENCE) == "episodic"
    assert infer_memory_type("anything", Kind.OBSERVATION) == "semantic"
    assert infer_memory_type("First convert both fractions") == "procedural"
    assert infer_memory_type("The student gets confused by signs") == "episodic"
    assert infer_memory_type("Water boils at 100 degrees") == "semantic"
    assert infer_topic("I keep messing up 1/2 + 1/3") == "fractions"
    assert infer_topic("What is 20% of 50?") == "percentages"
    assert infer_topic("Tell me a story") == "general"


# --- survivor choice and merging ------------------------------------------------------------------
def _bullet(mid: str, *, helpful: int = 0, harmful: int = 0, created: float = 0.0, cls: str = "procedural", **kw) -> MemoryRecord:
    return finalize_bullet(MemoryRecord(
        id=mid, scope=Scope(user_id="sam", run_id=kw.pop("run", "c1")), text=kw.pop("text", f"text of {mid}"),
        kind=Kind.STRATEGY, memory_class=MemoryClass(cls), helpful=helpful, harmful=harmful, created_at=created,
        section=kw.pop("section", "strategies_and_hard_rules"), **kw,
    ))


def test_survivor_is_higher_net_signal_then_newest():
    a = _bullet("a", helpful=5, harmful=1, created=1.0)
    b = _bullet("b", helpful=3, harmful=0, created=9.0)
    assert choose_survivor(a, b) == (a, b)  # net 4 beats net 3, older or not
    assert choose_survivor(b, a) == (a, b)
    c = _bullet("c", helpful=4, harmful=1, created=2.0)
    d = _bullet("d", helpful=3, harmful=0, created=3.0)  # same net 3: the newer wins
    assert choose_survivor(c, d) == (d, c)
    assert choose_survivor(d, c) == (d, c)
    e = _bullet("e", helpful=1, created=5.0)
    f = _bullet("f", helpful=1, created=5.0)
    assert choose_survivor(e, f) == (e, f)  # a full tie keeps the first
    assert choose_first_seen(d, c) == (c, d)  # the baseline: the older survives


def test_merge_sums_counters_fills_gaps_unions_tags_and_keeps_one_class():
    keep = _bullet("k", helpful=3, harmful=1, created=5.0, cls="procedural", topic="fractions", concept="",
                   tags=["visual", "procedural"], metadata={"sources": ["s1"], "tone": "warm"},
                   last_access={"semantic": 0, "episodic": 0, "procedural": 7}, access_count=2)
    drop = _bullet("d", helpful=2, harmful=2, created=1.0, cls="episodic", topic="algebra", concept="common_denominator",
                   tags=["Pizza Slices", "episodic", "semantic"], metadata={"sources": ["s2", "s1"], "extra": 1},
                   strengths={"semantic": 0.0, "episodic": 2.5, "procedural": 0.0},
                   last_access={"semantic": 0, "episodic": 9, "procedural": 3}, access_count=1)
    merged = merge_into(keep, drop)
    assert merged.id == "k" and merged.text == keep.text and merged.scope == keep.scope
    assert (merged.helpful, merged.harmful, merged.access_count) == (5, 3, 3)
    assert merged.topic == "fractions"  # the survivor's metadata is kept...
    assert merged.concept == "common_denominator"  # ...and its gaps filled from the other
    assert merged.metadata == {"sources": ["s1", "s2"], "tone": "warm", "extra": 1}
    assert merged.tags == ["visual", "pizza_slices", "procedural"]  # union, normalised, one class tag last
    assert merged.memory_class is MemoryClass.PROCEDURAL
    assert merged.strengths == {"semantic": 0.0, "episodic": 0.0, "procedural": 2.5}
    assert merged.last_access["procedural"] == 7 and merged.last_access["episodic"] == 9
    assert merged.lineage["merged_from"] == ["d"]
    again = merge_into(merged, _bullet("x", helpful=1, lineage={"merged_from": ["y"]}))
    assert again.lineage["merged_from"] == ["d", "x", "y"]


def test_finalize_enforces_a_single_class():
    r = MemoryRecord(id="a", scope=Scope(user_id="u"), text="Draw it first", memory_class=MemoryClass.EPISODIC,
                     tags=["semantic", "procedural", "Fractions"])  # default strengths: every class 1.0
    out = finalize_bullet(r)
    assert out.strengths == {"semantic": 0.0, "episodic": 1.0, "procedural": 0.0}
    assert out.tags == ["fractions", "episodic"]
    zero = finalize_bullet(r.copy(strengths={"semantic": 0.0, "episodic": 0.0, "procedural": 0.0}))
    assert zero.strengths["episodic"] == 1.0


# --- similarity helpers --------------------------------------------------------------------------------
def test_jaccard_clusters_and_near_duplicates():
    assert jaccard("a b c", "a b c") == 1.0
    assert jaccard("", "a") == 0.0
    assert jaccard("Find a common denominator", "find a common denominator first") == pytest.approx(0.8)
    v = np.array([[1, 0, 0], [0.95, np.sqrt(1 - 0.95**2), 0], [0, 0, 1], [0, 0.1, 1]], dtype=np.float32)
    assert near_duplicate_pairs(v, 0.9) == 2
    sims = dedup.cosine_matrix(v)
    assert clusters(sims, 0.9) == [[0, 1], [2, 3]]
    assert clusters(sims, 0.999) == []


# --- pruning order ------------------------------------------------------------------------------------
def test_prune_ranks_by_score_then_helpful_then_newest():
    items = [
        ("low", 0.2, 9, 1.0),
        ("high", 0.9, 0, 1.0),
        ("tie-few", 0.5, 1, 5.0),
        ("tie-many", 0.5, 3, 1.0),
        ("tie-old", 0.5, 1, 2.0),
    ]
    assert prune_order(items) == ["high", "tie-many", "tie-few", "tie-old", "low"]
    assert prune_plan(items, 3) == ["tie-old", "low"]
    assert prune_plan(items, 5) == []


def test_context_score_prefers_procedural_then_episodic_then_semantic():
    s = {c: context_score(0.5, 1.0, c) for c in ("procedural", "episodic", "semantic")}
    assert s["procedural"] > s["episodic"] > s["semantic"]
    assert context_score(0.5, 1.0, "semantic", learner_match=True) > context_score(0.5, 1.0, "semantic")
    assert context_score(0.5, 1.0, "semantic", learner_match=False) < context_score(0.5, 1.0, "semantic")
    assert context_score(0.5, 1.0, "semantic", topic_match=True) > context_score(0.5, 1.0, "semantic")
    # The boosts order bullets of similar relevance; they never outweigh a clear difference.
    assert context_score(0.8, 1.0, "semantic") > context_score(0.5, 1.0, "procedural", learner_match=True, topic_match=True)


# --- configuration ------------------------------------------------------------------------------------------
def test_max_new_is_read_from_the_environment_when_built(monkeypatch):
    monkeypatch.delenv("ACE_CURATOR_MAX_NEW", raising=False)
    config = PlaybookConfig.per_learner_preset()
    monkeypatch.setenv("ACE_CURATOR_MAX_NEW", "5")
    assert config.resolved().max_new == 5  # read now, not when the config object was made
    assert playbook.PlaybookConfig().max_new is None  # nothing is read when a config is made
    monkeypatch.delenv("ACE_CURATOR_MAX_NEW")
    assert config.resolved().max_new == 2
    assert config.resolved({"ACE_CURATOR_MAX_NEW": "1"}).max_new == 1
    assert PlaybookConfig.per_learner_preset(max_new=3).resolved({"ACE_CURATOR_MAX_NEW": "1"}).max_new == 3
    with pytest.raises(ConfigurationError, match="ACE_CURATOR_MAX_NEW"):
        config.resolved({"ACE_CURATOR_MAX_NEW": "two"})


def test_use_llm_switch_and_validation():
    assert PlaybookConfig().resolved({}).use_llm is False
    assert PlaybookConfig().resolved({"ACE_CURATOR_USE_LLM": "true"}).use_llm is True
    with pytest.raises(ConfigurationError, match="ACE_CURATOR_USE_LLM"):
        PlaybookConfig().resolved({"ACE_CURATOR_USE_LLM": "maybe"})
    with pytest.raises(ConfigurationError, match="max_bullets"):
        PlaybookConfig(max_bullets=0).resolved({})
    with pytest.raises(ConfigurationError, match="dedup"):
        PlaybookConfig(dedup="fuzzy").resolved({})
    with pytest.raises(ConfigurationError, match="unknown playbook preset"):
        PlaybookConfig.preset("nope")


def test_presets():
    b = PlaybookConfig.baseline().resolved({})
    assert (b.per_learner, b.cap_new, b.reinforce_threshold, b.dedup, b.dedup_threshold, b.reload_every_access) == (
        False, False, None, "jaccard", 0.85, True,
    )
    lt = PlaybookConfig.per_learner_preset().resolved({})
    assert (lt.per_learner, lt.cap_new, lt.max_new, lt.reinforce_threshold, lt.dedup) == (True, True, 2, 0.9, "semantic")
    assert lt.decay_rates == decay.DEFAULT_DECAY_RATES
    assert PlaybookConfig.per_learner_preset(decay_rates={"episodic": 0.08, "semantic": 0.005}).resolved({}).decay_rates == {
        "semantic": 0.005, "episodic": 0.08, "procedural": 0.002,
    }


@pytest.mark.parametrize("module", ["memorist.policies.decay", "memorist.policies.dedup", "memorist.policies.taxonomy",
                                    "memorist.roles.reflector", "memorist.ace.playbook", "memorist.ace.context"])
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


def test_taxonomy_sections_cover_every_kind():
    assert {taxonomy.section_for(k) for k in Kind} <= set(taxonomy.SECTIONS)


def test_the_presets_former_name_still_works():
    assert PlaybookConfig.ltmbse(max_new=2) == PlaybookConfig.per_learner_preset(max_new=2)
