"""Helpers of the learning-loop tests: a settable clock and an embedder whose similarities are chosen."""

from __future__ import annotations

import math
import zlib

import numpy as np

from memorist import Embedder

DIM = 16
DAY = 86_400.0


class Clock:
    """A clock the tests move: ``clock.now``, ``clock.advance(days=...)``."""

    def __init__(self, now: float = 1_750_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, *, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * DAY + seconds


class Mapped(Embedder):
    """The vector chosen for a text; any other text gets its own nearly orthogonal direction."""

    name = "test-learning-mapped-16"
    dim = DIM

    def __init__(self, mapping: dict[str, np.ndarray] | None = None) -> None:
        self.mapping: dict[str, np.ndarray] = dict(mapping or {})

    @staticmethod
    def axis(i: int) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        v[i] = 1.0
        return v

    @staticmethod
    def at(similarity: float, base: int = 0, other: int = 1) -> np.ndarray:
        """A unit vector with cosine ``similarity`` to axis ``base``."""
        v = np.zeros(DIM, dtype=np.float64)
        v[base] = similarity
        v[other] = math.sqrt(max(0.0, 1.0 - similarity * similarity))
        return v.astype(np.float32)

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for text in texts:
            if text in self.mapping:
                out.append(self.mapping[text])
                continue
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            v = np.zeros(DIM, dtype=np.float32)
            v[8:] = rng.normal(size=DIM - 8)
            out.append(v)
        return np.stack(out)


def run_task(memory, steps, status, *, agent="bot", task="Fetch users", task_type="api_call", **kw) -> str:
    """A whole trajectory: start, each (type, description[, metadata]) step, complete."""
    tid = memory.learning.start_trajectory(task, task_type, agent_id=agent, **kw)
    for step in steps:
        memory.learning.log_step(tid, *step, agent_id=agent)
    memory.learning.complete_trajectory(tid, status, agent_id=agent)
    return tid
