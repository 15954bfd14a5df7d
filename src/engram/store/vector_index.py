"""An in-process exact vector index for one space, kept in step with the store.

Rows are unit vectors, so cosine similarity is one matrix-vector product. The index
holds, per row, what the engine filters on before ranking (run id, effective time,
end of validity) so that a search never has to touch the database for vectors.
Exact search over 100k 384-dim rows is a few milliseconds; it needs no training and
is never stale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class Row:
    memory_id: str
    run_id: str
    effective_at: float  # updated_at, or created_at when never updated
    valid_to: float | None


class SpaceIndex:
    """Exact cosine index of the active memories of one space."""

    def __init__(self, dim: int, generation: int) -> None:
        self.dim = dim
        self.generation = generation
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._size = 0
        self._alive = np.zeros(0, dtype=bool)
        self._effective = np.zeros(0, dtype=np.float64)
        self._valid_to = np.zeros(0, dtype=np.float64)  # +inf when unbounded
        self._run = np.zeros(0, dtype=object)
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._pos)

    def _grow(self, extra: int) -> None:
        need = self._size + extra
        cap = self._vectors.shape[0]
        if need <= cap:
            return
        new_cap = max(need, cap * 2, 64)
        vectors = np.zeros((new_cap, self.dim), dtype=np.float32)
        vectors[: self._size] = self._vectors[: self._size]
        self._vectors = vectors
        for name, fill in (("_alive", False), ("_effective", 0.0), ("_valid_to", np.inf)):
            old = getattr(self, name)
            new = np.full(new_cap, fill, dtype=old.dtype)
            new[: self._size] = old[: self._size]
            setattr(self, name, new)
        run = np.full(new_cap, "", dtype=object)
        run[: self._size] = self._run[: self._size]
        self._run = run

    def upsert(self, rows: list[Row], vectors: np.ndarray) -> None:
        """Add rows, or replace the rows of ids already present."""
        fresh = [i for i, r in enumerate(rows) if r.memory_id not in self._pos]
        self._grow(len(fresh))
        for i, row in enumerate(rows):
            pos = self._pos.get(row.memory_id)
            if pos is None:
                pos = self._size
                self._size += 1
                self._pos[row.memory_id] = pos
                self._ids.append(row.memory_id)
            self._vectors[pos] = vectors[i]
            self._alive[pos] = True
            self._effective[pos] = row.effective_at
            self._valid_to[pos] = np.inf if row.valid_to is None else row.valid_to
            self._run[pos] = row.run_id

    def set_times(self, memory_id: str, effective_at: float, valid_to: float | None) -> None:
        pos = self._pos.get(memory_id)
        if pos is not None:
            self._effective[pos] = effective_at
            self._valid_to[pos] = np.inf if valid_to is None else valid_to

    def remove(self, memory_ids: list[str]) -> None:
        for mid in memory_ids:
            pos = self._pos.pop(mid, None)
            if pos is not None:
                self._alive[pos] = False
        # Compact once dead rows dominate, so memory stays proportional to live rows.
        if self._size > 1024 and len(self._pos) < self._size // 2:
            self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self._alive[: self._size])
        self._vectors = self._vectors[keep].copy()
        self._alive = self._alive[keep].copy()
        self._effective = self._effective[keep].copy()
        self._valid_to = self._valid_to[keep].copy()
        self._run = self._run[keep].copy()
        self._ids = [self._ids[i] for i in keep]
        self._size = len(keep)
        self._pos = {mid: i for i, mid in enumerate(self._ids)}

    def search(
        self,
        query: np.ndarray,
        *,
        k: int | None,
        run_id: str | None = None,
        cutoff: float | None = None,
        now: float | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` most similar live rows (all of them when ``k`` is None)."""
        n = self._size
        if n == 0:
            return []
        sims = self._vectors[:n] @ query.astype(np.float32, copy=False)
        mask = self._alive[:n].copy()
        if run_id is not None:
            mask &= self._run[:n] == run_id
        if cutoff is not None:
            mask &= self._effective[:n] >= cutoff
        if now is not None:
            mask &= self._valid_to[:n] > now
        candidates = np.flatnonzero(mask)
        if candidates.size == 0:
            return []
        scores = sims[candidates]
        if k is not None and k < candidates.size:
            top = np.argpartition(-scores, k - 1)[:k]
            order = top[np.argsort(-scores[top], kind="stable")]
        else:
            order = np.argsort(-scores, kind="stable")
        ids = self._ids
        return [(ids[candidates[i]], float(scores[i])) for i in order]
