"""Helpers shared by the energy tiers' tests: a fixed clock and short-hands."""

from __future__ import annotations

from memorist import Memory

#: A fixed start of time: every call takes ``now``, so no test waits or patches a clock.
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
HOUR = 3600.0


def at(hours: float) -> float:
    return T0 + hours * HOUR


def remember(m: Memory, text: str, *, hours: float = 0.0, **kw) -> str:
    """Add ``text`` verbatim for user alex at ``hours``; its id."""
    kw.setdefault("user_id", "alex")
    return m.add(text, infer=False, timestamp=at(hours), **kw)["results"][0]["id"]


def item(m: Memory, memory_id: str, user_id: str = "alex") -> dict:
    return m.get(memory_id, user_id=user_id)
