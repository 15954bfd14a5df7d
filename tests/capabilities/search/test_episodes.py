"""retrieval.episode_weight: the turns said around a strong match rise with it.

A question is usually answered in one stretch of conversation: the turn that matches
it best, and replies that match it less on their own. Deterministic hashing embedder;
both backends (the candidates' times are read through the store contract).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from memorist import Memory
from memorist.config import ConfigurationError, MemoryConfig, RetrievalConfig

DAY = 86_400.0
START = datetime(2023, 5, 1, 15, tzinfo=UTC).timestamp()
# The trip is told in the first session; other sessions, weeks apart, mention camping
# in passing, in turns that match the question about as well as the trip's reply does.
SESSIONS = [
    ["We went camping in the mountains last weekend with the kids.", "Did you have fun?", "The trip was wonderful, we saw a bear near our tent!"],
    ["I bought new shoes for running.", "Camping stoves are on sale downtown."],
    ["My sister called about her garden.", "Camping near the lake sounds fun someday."],
    ["Work has been busy this month.", "I read a book about camping history."],
]
QUERY = "What happened on the camping trip in the mountains?"
TRIP = {SESSIONS[0][0], SESSIONS[0][2]}


def _fill(memory: Memory) -> None:
    for n, said in enumerate(SESSIONS):
        at = START + n * 14 * DAY
        messages = [{"role": "user", "name": "Mel", "content": t, "timestamp": at + 60 * i} for i, t in enumerate(said)]
        memory.add(messages, user_id="u", infer=False)


def _top(memory: Memory, n: int) -> list[str]:
    return [r["memory"] for r in memory.search(QUERY, user_id="u", limit=n)["results"]]


def test_the_reply_beside_the_best_match_comes_before_lone_mentions(backend: Any) -> None:
    with Memory(backend.target, embedder="hashing") as memory:
        _fill(memory)
        found = memory.search(QUERY, user_id="u", limit=2)["results"]
        assert {r["memory"] for r in found} == TRIP
        assert all(0 < r["score"] <= 1 for r in found)
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), episode_weight=0.0)
        assert set(_top(memory, 2)) != TRIP  # without episodes a lone mention of camping wins


def test_memories_stored_together_keep_their_order(tmp_path: Any) -> None:
    # One episode for everything (all stored in the same minute): nothing moves.
    with Memory(str(tmp_path / "t.db"), embedder="hashing") as memory:
        memory.add([{"role": "user", "content": t} for said in SESSIONS for t in said], user_id="u", infer=False)
        on = _top(memory, 8)
        memory.config.retrieval = dataclasses.replace(RetrievalConfig(), episode_weight=0.0)
        assert _top(memory, 8) == on


@pytest.mark.parametrize(
    "setting, value",
    [("episode_weight", -0.1), ("episode_weight", float("nan")), ("episode_gap", float("inf")), ("episode_depth", 0), ("episode_depth", 2.5), ("episode_depth", True)],
)
def test_bad_episode_settings_are_refused_by_name(tmp_path: Any, setting: str, value: Any) -> None:
    # Refused where the setting is given (the RetrievalConfig), before any Memory.
    with pytest.raises(ConfigurationError, match=f"retrieval.{setting}"):
        RetrievalConfig(**{setting: value})
    with pytest.raises(ConfigurationError, match=f"retrieval.{setting}"):
        Memory(str(tmp_path / "t.db"), embedder="hashing", config=MemoryConfig.from_mapping({"retrieval": {setting: value}}))
