"""Validity window (``MEMORY_DECAY_DAYS``)."""

from __future__ import annotations

DAY = 86_400.0


def validity_cutoff(now: float, decay_days: float | None) -> float | None:
    """Oldest effective time still valid, or None when nothing decays.

    A memory is valid when its ``updated_at`` (or ``created_at`` if it was never
    updated) is at or after the cutoff. ``decay_days`` of 0 or None means no decay.
    """
    if not decay_days or decay_days <= 0:
        return None
    return now - float(decay_days) * DAY


def is_valid(
    created_at: float,
    updated_at: float | None,
    valid_to: float | None,
    *,
    now: float,
    decay_days: float | None,
) -> bool:
    """Whether a memory is inside its validity window at ``now``."""
    if valid_to is not None and valid_to <= now:
        return False
    cutoff = validity_cutoff(now, decay_days)
    effective = updated_at if updated_at is not None else created_at
    return cutoff is None or effective >= cutoff
