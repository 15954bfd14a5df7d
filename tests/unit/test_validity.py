"""The validity window (spec 004's MEMORY_DECAY_DAYS) as pure functions."""

from __future__ import annotations

import pytest

from memorist.policies.validity import DAY, is_valid, validity_cutoff

NOW = 1_700_000_000.0


@pytest.mark.parametrize("days", [None, 0, 0.0, -3])
def test_no_decay_means_no_cutoff(days):
    assert validity_cutoff(NOW, days) is None
    assert is_valid(0.0, None, None, now=NOW, decay_days=days)  # even from 1970


def test_cutoff_is_n_days_before_now():
    assert validity_cutoff(NOW, 6) == NOW - 6 * DAY
    assert validity_cutoff(NOW, 0.5) == NOW - 0.5 * DAY
    assert DAY == 86_400


def test_older_than_the_window_is_invalid():
    assert not is_valid(NOW - 10 * DAY, None, None, now=NOW, decay_days=6)
    assert is_valid(NOW - 5 * DAY, None, None, now=NOW, decay_days=6)


def test_boundary_is_inclusive():
    assert is_valid(NOW - 6 * DAY, None, None, now=NOW, decay_days=6)
    assert not is_valid(NOW - 6 * DAY - 1, None, None, now=NOW, decay_days=6)


def test_updated_at_takes_precedence_over_created_at():
    # Old but recently updated: valid.
    assert is_valid(NOW - 100 * DAY, NOW - 1 * DAY, None, now=NOW, decay_days=6)
    # Recently created but with an old updated_at: the update time counts.
    assert not is_valid(NOW - 1 * DAY, NOW - 10 * DAY, None, now=NOW, decay_days=6)


def test_valid_to_ends_validity_even_without_decay():
    assert not is_valid(NOW - DAY, None, NOW - 1, now=NOW, decay_days=None)
    assert not is_valid(NOW - DAY, None, NOW, now=NOW, decay_days=None)  # valid_to is exclusive
    assert is_valid(NOW - DAY, None, NOW + 1, now=NOW, decay_days=None)
    assert not is_valid(NOW - DAY, None, NOW - 1, now=NOW, decay_days=6)
