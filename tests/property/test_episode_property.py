"""Properties of the episode rule search applies to its best candidates
(memorist.policies.fusion.episode_fusion), for any scores and times."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memorist.policies.fusion import episode_fusion

scores = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)
times = st.floats(min_value=0.0, max_value=1e7, allow_nan=False)
candidates = st.dictionaries(st.text(min_size=1, max_size=4), st.tuples(scores, times), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(candidates, st.floats(min_value=0.0, max_value=5.0), st.floats(min_value=0.0, max_value=1e5))
def test_no_candidate_falls_none_passes_its_episodes_best_and_scores_stay_in_range(cands, weight, gap):
    fused = {k: s for k, (s, _) in cands.items()}
    raised = episode_fusion(fused, {k: t for k, (_, t) in cands.items()}, weight=weight, gap=gap)
    assert raised.keys() == fused.keys()
    best = max(fused.values())
    for k, score in raised.items():
        assert fused[k] - 1e-12 <= score <= best + 1e-12  # rises, never past the best of all
        assert 0 < score <= 1
    # The best match of all keeps its score, so it stays first.
    top = max(fused, key=fused.get)
    assert raised[top] == fused[top]


@settings(max_examples=200, deadline=None)
@given(candidates, st.floats(min_value=0.01, max_value=5.0))
def test_one_episode_keeps_the_order(cands, weight):
    # Everything stored at the same moment: one episode, whose ranking does not change
    # (search re-sorts its best candidates, in their order, by the raised scores).
    fused = {k: s for k, (s, _) in cands.items()}
    ranked = sorted(fused, key=fused.__getitem__, reverse=True)
    raised = episode_fusion(fused, dict.fromkeys(fused, 42.0), weight=weight, gap=0.0)
    assert sorted(ranked, key=raised.__getitem__, reverse=True) == ranked
