"""Duplicate handling for playbook bullets: survivor choice, merging, similarity. Pure.

The canonical rule: when two bullets say the same thing, the survivor is the
one with the higher ``helpful - harmful``, then the newer one. Merging sums the
counters, keeps the survivor's metadata and fills its gaps from the other, unions
the tags, keeps one memory class and the survivor's id.

>>> import numpy as np
>>> near_duplicate_pairs(np.eye(3, dtype=np.float32), 0.9)
0
>>> round(jaccard("Find a common denominator first", "find a common denominator"), 2)
0.8
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..model import MemoryRecord
from .decay import CLASSES
from .taxonomy import normalize_tags
from .text import content_hash

SOURCES_KEY = "sources"  # metadata key: what a bullet was learned from (lesson keys, dia_ids)


def choose_survivor(a: MemoryRecord, b: MemoryRecord) -> tuple[MemoryRecord, MemoryRecord]:
    """``(keep, drop)``: higher ``helpful - harmful`` wins, then the newer; a full tie keeps ``a``."""
    net_a, net_b = a.helpful - a.harmful, b.helpful - b.harmful
    if net_a != net_b:
        return (a, b) if net_a > net_b else (b, a)
    return (a, b) if a.created_at >= b.created_at else (b, a)


def choose_first_seen(a: MemoryRecord, b: MemoryRecord) -> tuple[MemoryRecord, MemoryRecord]:
    """The ACE baseline's rule: the bullet seen first (the older) survives."""
    return (a, b) if (a.created_at, a.id) <= (b.created_at, b.id) else (b, a)


def finalize_bullet(record: MemoryRecord, *, normalise_tags: bool = True) -> MemoryRecord:
    """Enforce one memory class: only its strength is positive, its tag is the one
    class tag; the content hash matches the text. Returns a new record."""
    cls = record.memory_class.value
    strength = float(record.strengths.get(cls, 0.0))
    if strength <= 0:
        strength = max([float(v) for v in record.strengths.values()] + [0.0]) or 1.0
    if normalise_tags:
        tags = normalize_tags(record.tags, memory_class=cls)
    else:  # the baseline keeps tags as written, only making sure its class is among them
        tags = list(dict.fromkeys(record.tags))
        if cls not in tags:
            tags.append(cls)
    return record.copy(
        strengths={c: (strength if c == cls else 0.0) for c in CLASSES},
        last_access=dict(record.last_access),
        tags=tags,
        content_hash=content_hash(record.text),
    )


def union(first: Sequence[Any], second: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys([*first, *second]))


def merge_into(keep: MemoryRecord, drop: MemoryRecord, *, normalise_tags: bool = True) -> MemoryRecord:
    """``keep`` after absorbing ``drop`` (``keep``'s id, text, scope and class stay)."""
    cls = keep.memory_class.value
    meta = {**drop.metadata, **keep.metadata}
    sources = union(keep.metadata.get(SOURCES_KEY, []), drop.metadata.get(SOURCES_KEY, []))
    if sources:
        meta[SOURCES_KEY] = sources
    lineage = dict(keep.lineage)
    lineage["merged_from"] = union(
        keep.lineage.get("merged_from", []), [drop.id, *drop.lineage.get("merged_from", [])]
    )
    strongest = max(float(keep.strengths.get(cls, 0.0)), *(float(v) for v in drop.strengths.values()))
    strengths = {c: (strongest if c == cls else 0.0) for c in CLASSES}
    last_access = {
        c: max(int(keep.last_access.get(c, 0)), int(drop.last_access.get(c, 0))) for c in CLASSES
    }
    merged = keep.copy(
        helpful=keep.helpful + drop.helpful,
        harmful=keep.harmful + drop.harmful,
        access_count=keep.access_count + drop.access_count,
        topic=keep.topic or drop.topic,
        concept=keep.concept or drop.concept,
        section=keep.section or drop.section,
        tags=union(keep.tags, drop.tags),
        metadata=meta,
        lineage=lineage,
        strengths=strengths,
        last_access=last_access,
        importance=max(keep.importance, drop.importance),
    )
    return finalize_bullet(merged, normalise_tags=normalise_tags)


def jaccard(a: str, b: str) -> float:
    """Word-set Jaccard similarity (lower-cased, split on whitespace): the ACE baseline's."""
    wa, wb = set(a.lower().split()), set(b.lower().split())
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarity of row vectors (unit-normalised here)."""
    if len(vectors) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    v = v / norms
    return v @ v.T


def near_duplicate_pairs(vectors: np.ndarray, threshold: float = 0.9) -> int:
    """How many unordered pairs of rows have cosine similarity ``>= threshold``."""
    n = len(vectors)
    if n < 2:
        return 0
    sims = cosine_matrix(vectors)
    upper = np.triu(sims >= threshold - 1e-6, k=1)
    return int(upper.sum())


def clusters(sims: np.ndarray, threshold: float) -> list[list[int]]:
    """Groups of row indices linked by similarity ``>= threshold`` (connected
    components of two or more), each sorted, in order of their first index."""
    n = sims.shape[0]
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    rows, cols = np.nonzero(np.triu(sims >= threshold - 1e-6, k=1))
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])


__all__ = [
    "SOURCES_KEY",
    "choose_first_seen",
    "choose_survivor",
    "clusters",
    "cosine_matrix",
    "finalize_bullet",
    "jaccard",
    "merge_into",
    "near_duplicate_pairs",
    "union",
]
