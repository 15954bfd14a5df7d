"""The energy policy's rules alone (memorist.policies.energy): spec 002's arithmetic,
strict thresholds, start energies, the configuration's checks."""

from __future__ import annotations

import math

import pytest

from memorist import Tier, ValidationError
from memorist.policies.energy import EnergyConfig, current_energy, decay, hours_to, parse_tier, start_energy


def test_spec_002_phase_3_worked_cases():
    # Case 1: energy 2.0, one hour old, working (lambda 0.5): 2.0 * e^-0.5 = 1.213.
    assert decay(2.0, 1, 0.5) == pytest.approx(1.213, abs=0.001)
    assert decay(2.0, 1, EnergyConfig().rate(Tier.WORKING)) == pytest.approx(2.0 * math.exp(-0.5))
    # Case 2: 0.05, twenty hours, working: very small (< 0.001), about 0.0000023.
    assert decay(0.05, 20, 0.5) < 0.001
    assert decay(0.05, 20, 0.5) == pytest.approx(0.0000023, abs=5e-8)
    # The other tiers' constants.
    assert decay(5.0, 10, EnergyConfig().rate(Tier.SHORT_TERM)) == pytest.approx(5.0 * math.exp(-0.5))
    assert decay(5.0, 1000, EnergyConfig().rate(Tier.LONG_TERM)) == pytest.approx(5.0 * math.exp(-1.0))


def test_decay_refuses_negative_time_and_rates():
    with pytest.raises(ValidationError, match="hours"):
        decay(1.0, -1, 0.5)
    with pytest.raises(ValidationError, match="rate"):
        decay(1.0, 1, -0.5)
    assert decay(3.0, 0, 0.5) == 3.0


def test_thresholds_are_strict():
    config = EnergyConfig()
    assert not config.promotes(Tier.WORKING, 2.0)
    assert config.promotes(Tier.WORKING, 2.0 + 1e-9)
    assert not config.promotes(Tier.SHORT_TERM, 5.0)
    assert config.promotes(Tier.SHORT_TERM, 5.000001)
    assert not config.promotes(Tier.LONG_TERM, 1e6)  # the top tier
    assert not config.expires(0.1)
    assert config.expires(0.0999999)


def test_use_boosts_add_after_the_decay():
    config = EnergyConfig()
    assert current_energy(2.0, 1, Tier.WORKING, config, uses=2) == pytest.approx(2.0 * math.exp(-0.5) + 1.0)
    assert current_energy(2.0, -3, Tier.WORKING, config) == 2.0  # a time before the last decay: none
    off = EnergyConfig(use_boost=0.0)
    assert current_energy(2.0, 0, Tier.WORKING, off, uses=5) == 2.0


def test_start_energy_by_type_explicit_or_default():
    config = EnergyConfig()
    assert start_energy({"type": "insight"}, config) == (3.0, Tier.WORKING)
    assert start_energy({"type": "Crystallization"}, config) == (3.0, Tier.WORKING)
    assert start_energy({"type": "learning"}, config) == (2.0, Tier.WORKING)
    assert start_energy({"type": " reminder "}, config) == (2.5, Tier.WORKING)
    assert start_energy({"type": "grocery list"}, config) == (1.0, Tier.WORKING)
    assert start_energy({}, EnergyConfig(default_energy=1.5)) == (1.5, Tier.WORKING)
    assert start_energy({"energy": 5.5, "tier": "shortTerm"}, config) == (5.5, Tier.SHORT_TERM)
    with pytest.raises(ValidationError, match="metadata.energy"):
        start_energy({"energy": -1}, config)
    with pytest.raises(ValidationError, match="metadata.tier"):
        start_energy({"tier": "archivedWorking"}, config)


def test_configuration_checks_name_the_setting():
    with pytest.raises(ValidationError, match="tiers.rate_working"):
        EnergyConfig(rate_working=-0.5).checked()
    with pytest.raises(ValidationError, match="tiers.working_to_short_term"):
        EnergyConfig(working_to_short_term=6.0).checked()  # above short_term_to_long_term
    with pytest.raises(ValidationError, match="tiers.decay_batch"):
        EnergyConfig(decay_batch=0).checked()
    with pytest.raises(ValidationError, match="tiers.start_energy.reminder"):
        EnergyConfig(start_energy={"reminder": 0}).checked()
    with pytest.raises(ValidationError, match="tiers.bogus"):
        EnergyConfig.from_mapping({"bogus": 1})
    with pytest.raises(ValidationError, match="tiers.decay_batch"):
        EnergyConfig().with_changes({"decay_batch": "many"})


def test_changes_from_text_and_round_trip():
    config = EnergyConfig().with_changes({"decay_batch": "50", "rate_working": "0.4", "start_energy.Reminder": "3"})
    assert (config.decay_batch, config.rate_working, config.start_energy["reminder"]) == (50, 0.4, 3)
    assert EnergyConfig.from_mapping(config.to_dict()) == config
    assert EnergyConfig().warnings() == []
    assert EnergyConfig(rate_short_term=0.9).checked().warnings()


def test_tier_names_and_hours_to_expiry():
    assert parse_tier("long-term") is Tier.LONG_TERM
    assert hours_to(2.0, 0.1, 0.5) == pytest.approx(math.log(20) / 0.5)
    assert hours_to(0.05, 0.1, 0.5) == 0.0
    assert hours_to(1.0, 0.1, 0.0) is None
