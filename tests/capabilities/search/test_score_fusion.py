"""retrieval.score_weight: normalised scores beside rank fusion (off by default)."""

from __future__ import annotations

import dataclasses

import pytest

from memorist import Memory
from memorist.config import MemoryConfig, RetrievalConfig
from memorist.errors import ConfigurationError


def test_score_weight_is_off_by_default_and_checked():
    assert RetrievalConfig().score_weight == 0.0
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigurationError, match="retrieval.score_weight"):
            Memory(config=MemoryConfig(path=":memory:", embedder="hashing", retrieval=RetrievalConfig(score_weight=bad)))


def test_score_weight_lets_a_clear_keyword_winner_keep_its_lead(tmp_path):
    memory = Memory(str(tmp_path / "m.db"), embedder="hashing")
    memory.add(
        [{"role": "user", "content": t} for t in [
            "The zephyrine zephyrine zephyrine greyhound",  # BM25's clear winner
            "A greyhound ran in the park near the river",
            "The river park had a greyhound race",
        ]],
        user_id="u",
        infer=False,
    )
    query = "zephyrine greyhound park river"
    for weight in (0.0, 0.5, 1.0):
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), score_weight=weight)
        hits = memory.search(query, user_id="u", limit=3)["results"]
        assert len(hits) == 3 and all(0 <= h["score"] <= 1.0 + 1e-9 for h in hits)
    memory.config.retrieval = dataclasses.replace(RetrievalConfig(), score_weight=1.0)
    assert memory.search(query, user_id="u", limit=3)["results"][0]["memory"].startswith("The zephyrine")
    memory.close()
