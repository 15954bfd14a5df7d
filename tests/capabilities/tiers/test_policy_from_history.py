"""A store older than the policy record (release 0.1.0 wrote none) is opened under the
policy its log shows it was used with: the energy tiers' own events mean ``energy``."""

from __future__ import annotations

import pytest

from memorist.model import Scope
from memorist.pipelines.settings import ENERGY_OPS, settle_policy
from memorist.store import open_store


@pytest.mark.parametrize("op", ENERGY_OPS)
def test_a_store_whose_log_shows_an_energy_tier_event_is_under_the_energy_policy(backend, op) -> None:
    store = open_store(backend.target)
    try:
        with store.transaction() as batch:
            batch.event("add", Scope(user_id="u"), actor="add")
            batch.event(op, Scope(user_id="u"), actor="tiers")
        assert settle_policy(store, None) == "energy"
    finally:
        store.close()


def test_a_store_of_other_events_only_is_under_the_default_policy(backend) -> None:
    store = open_store(backend.target)
    try:
        with store.transaction() as batch:
            batch.event("add", Scope(user_id="u"), actor="add")
            batch.event("expire", Scope(user_id="u"), actor="retention")  # the trajectories' retention logs it too
        assert settle_policy(store, None) == "default"
    finally:
        store.close()
