"""Reciprocal rank fusion: a pure function over ranked lists."""

from __future__ import annotations

import pytest

from memorist.policies.fusion import RRF_K, reciprocal_rank_fusion


def test_item_first_everywhere_scores_exactly_one():
    fused = reciprocal_rank_fusion({"vector": ["a", "b", "c"], "text": ["a", "c"]}, {"vector": 0.7, "text": 2.5}, k=10)
    assert fused["a"] == pytest.approx(1.0)
    assert all(0 < s <= 1.0 + 1e-12 for s in fused.values())


@pytest.mark.parametrize("k", [0, 1, 60, 1000])
def test_normalisation_holds_for_any_k(k):
    fused = reciprocal_rank_fusion({"x": ["a", "b"], "y": ["a", "b"]}, k=k)
    assert fused["a"] == pytest.approx(1.0)
    assert fused["b"] < fused["a"]


def test_scores_follow_the_formula():
    fused = reciprocal_rank_fusion({"v": ["a", "b"], "t": ["b", "c"]}, {"v": 1.0, "t": 3.0}, k=60)
    best = 1.0 / 61 + 3.0 / 61
    assert fused["a"] == pytest.approx((1.0 / 61) / best)
    assert fused["b"] == pytest.approx((1.0 / 62 + 3.0 / 61) / best)
    assert fused["c"] == pytest.approx((3.0 / 62) / best)


def test_item_in_both_lists_beats_items_in_one():
    fused = reciprocal_rank_fusion({"v": ["a", "shared"], "t": ["b", "shared"]})
    order = sorted(fused, key=lambda i: -fused[i])
    assert order[0] == "shared"
    assert set(order) == {"a", "b", "shared"}


def test_weights_decide_between_disagreeing_lists():
    rankings = {"v": ["a", "b"], "t": ["b", "a"]}
    vector_heavy = reciprocal_rank_fusion(rankings, {"v": 3.0, "t": 1.0})
    text_heavy = reciprocal_rank_fusion(rankings, {"v": 1.0, "t": 3.0})
    assert vector_heavy["a"] > vector_heavy["b"]
    assert text_heavy["b"] > text_heavy["a"]


def test_missing_weight_defaults_to_one():
    rankings = {"v": ["a", "b"], "t": ["b", "a"]}
    assert reciprocal_rank_fusion(rankings, {"v": 1.0}) == reciprocal_rank_fusion(rankings, {"v": 1.0, "t": 1.0})


def test_zero_weight_list_is_ignored():
    fused = reciprocal_rank_fusion({"v": ["a", "b"], "t": ["c", "b"]}, {"v": 1.0, "t": 0.0})
    assert set(fused) == {"a", "b"}
    assert fused["a"] == pytest.approx(1.0)


def test_all_weights_zero_gives_nothing():
    assert reciprocal_rank_fusion({"v": ["a"], "t": ["b"]}, {"v": 0.0, "t": 0.0}) == {}


def test_empty_lists():
    assert reciprocal_rank_fusion({}) == {}
    assert reciprocal_rank_fusion({"v": [], "t": []}) == {}


def test_one_empty_list_does_not_lower_the_other():
    # An empty ranking contributes no "best possible" share, so the top item of the
    # remaining list still scores 1.0.
    fused = reciprocal_rank_fusion({"v": ["a", "b"], "t": []})
    assert fused["a"] == pytest.approx(1.0)
    assert fused["b"] == pytest.approx(61 / 62)


def test_default_k_is_sixty():
    assert RRF_K == 60
    assert reciprocal_rank_fusion({"v": ["a", "b"]}) == reciprocal_rank_fusion({"v": ["a", "b"]}, k=60)


def test_negative_k_is_refused():
    with pytest.raises(ValueError):
        reciprocal_rank_fusion({"v": ["a"]}, k=-1)


def test_normalized_score_fusion_puts_scales_on_one_footing():
    from memorist.policies.fusion import normalized_score_fusion

    # Cosines in [0.2, 0.6] and BM25 scores in [1, 21]: each becomes [0, 1] first.
    fused = normalized_score_fusion({"vector": [("a", 0.6), ("b", 0.4), ("c", 0.2)], "text": [("b", 21.0), ("c", 1.0)]})
    assert fused["b"] == pytest.approx((0.5 + 1.0) / 2)
    assert fused["a"] == pytest.approx(1.0 / 2)
    assert fused["c"] == pytest.approx(0.0)
    # A clear winner keeps its lead where ranks would tie a and b.
    clear = normalized_score_fusion({"v": [("a", 0.9), ("b", 0.31), ("c", 0.3)], "t": [("b", 5.0), ("a", 4.9), ("c", 1.0)]})
    assert clear["a"] > clear["b"]
    rrf = reciprocal_rank_fusion({"v": ["a", "b", "c"], "t": ["b", "a", "c"]})
    assert rrf["a"] == pytest.approx(rrf["b"])


def test_normalized_score_fusion_weights_and_edge_cases():
    from memorist.policies.fusion import normalized_score_fusion

    assert normalized_score_fusion({}) == {}
    assert normalized_score_fusion({"v": [("a", 1.0)]}, {"v": 0.0}) == {}
    same = normalized_score_fusion({"v": [("a", 0.5), ("b", 0.5)]})
    assert same == {"a": 1.0, "b": 1.0}  # equal scores: all best
    weighted = normalized_score_fusion({"v": [("a", 1.0), ("b", 0.0)], "t": [("b", 1.0), ("a", 0.0)]}, {"v": 3.0, "t": 1.0})
    assert weighted["a"] == pytest.approx(0.75) and weighted["b"] == pytest.approx(0.25)


def test_episode_fusion_lifts_the_members_of_a_strong_episode():
    from memorist.policies.fusion import episode_fusion

    # b was said a minute after a (a strong match); x alone, a day later, matches a
    # little better than b on its own: b rises above it, a stays first.
    fused = {"a": 1.0, "b": 0.4, "x": 0.45, "deep": 0.3}
    times = {"a": 0.0, "b": 60.0, "x": 100_000.0}  # "deep" was not among the best few
    out = {**fused, **episode_fusion(fused, times, weight=0.5, gap=3600)}
    assert episode_fusion(fused, times, weight=0.5, gap=3600).keys() == times.keys()  # the others are not returned
    assert out["a"] == pytest.approx(1.0)  # the best of its episode keeps its score
    assert out["b"] == pytest.approx((0.4 + 0.5 * 1.0) / 1.5)
    assert out["x"] == pytest.approx(0.45)  # alone: loses nothing
    assert out["deep"] == 0.3  # not given a time: not changed
    assert sorted(out, key=out.get, reverse=True) == ["a", "b", "x", "deep"]
    assert all(out[m] >= fused[m] for m in fused)  # no one falls
    assert max(out.values()) <= 1.0


def test_episode_fusion_chains_by_gap_and_changes_nothing_when_off():
    from memorist.policies.fusion import episode_fusion

    fused = {"a": 0.9, "b": 0.8, "c": 0.1}
    times = {"a": 0.0, "b": 50.0, "c": 100.0}  # each within 60 s of the next: one episode
    chained = episode_fusion(fused, times, weight=0.5, gap=60)
    assert chained["a"] == pytest.approx(0.9)
    assert chained["c"] == pytest.approx((0.1 + 0.5 * 0.9) / 1.5)
    split = episode_fusion(fused, times, weight=0.5, gap=49)  # every gap too wide: each alone
    assert split == pytest.approx(fused)
    assert episode_fusion(fused, times, weight=0.0, gap=60) == fused
    assert episode_fusion(fused, {}, weight=0.5, gap=60) == {}
    # One episode for everything (stored at once): the order is kept.
    same = episode_fusion(fused, dict.fromkeys(fused, 5.0), weight=0.5, gap=60)
    assert sorted(same, key=same.get) == sorted(fused, key=fused.get)


def test_items_of_equal_score_share_the_rank_of_the_first():
    """The order of a tie says nothing (stores break it differently): tied items get
    the same credit, and the next one the rank after all of them."""
    rankings = {"t": ["a", "b", "c", "d"], "v": ["d", "c", "b", "a"]}
    scores = {"t": [2.0, 1.5, 1.5, 1.0]}
    fused = reciprocal_rank_fusion(rankings, k=10, scores=scores)
    swapped = reciprocal_rank_fusion({"t": ["a", "c", "b", "d"], "v": rankings["v"]}, k=10, scores=scores)
    assert fused == pytest.approx(swapped)
    best = 2 / 11
    assert fused["b"] == pytest.approx((1 / 12 + 1 / 13) / best)  # t: rank 2 (tied), v: rank 3
    assert fused["d"] == pytest.approx((1 / 14 + 1 / 11) / best)  # after both tied items: rank 4
    # Without scores, positions are ranks.
    assert reciprocal_rank_fusion(rankings, k=10)["c"] == pytest.approx((1 / 13 + 1 / 12) / best)
