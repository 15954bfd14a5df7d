"""The learning loop's and the playbooks' settings are checked for their kind and range,
and a refusal names what the user set: the setting, or the variable when the value
came from the environment.

Before, the half life was never checked (NaN gave NaN confidences and a playbook no
strict JSON could carry), strings gave raw TypeErrors, ``PLAYBOOK_VERSION_KEEP_LATEST=2.9``
was cut to 2, ``TRAJECTORY_RETENTION_DAYS=-5`` meant "keep forever", and
``TRAJECTORY_SAMPLE_RATE=2`` or ``ACE_CURATOR_MAX_NEW=-1`` were refused under other names.
"""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from memorist import ConfigurationError, Memory
from memorist.cli import cli
from memorist.policies.learning import LearningConfig, VersionRetention
from memorist.policies.playbook import PlaybookConfig


# the half life of old evidence ------------------------------------------------------------------
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -5, 0, "90", True])
def test_a_half_life_that_is_not_a_number_of_days_above_zero_is_refused(value) -> None:
    with pytest.raises(ConfigurationError, match="confidence_half_life_days"):
        LearningConfig(confidence_half_life_days=value).resolved({})


def test_a_refused_half_life_leaves_the_playbooks_confidences_finite() -> None:
    with Memory(":memory:", embedder="hashing") as memory:
        with pytest.raises(ConfigurationError, match="confidence_half_life_days"):
            memory.learning_config = {"confidence_half_life_days": float("nan")}
        memory.learning.update_playbook([{"pattern": "Retry with backoff"}], agent_id="a")
        playbook = memory.learning.get_playbook("default", agent_id="a")
        json.dumps(playbook, allow_nan=False)  # strict JSON, as the service needs
        assert math.isfinite(playbook["strategies"]["helpful"][0]["confidence"])


def test_a_half_life_of_none_or_a_positive_number_is_kept() -> None:
    assert LearningConfig(confidence_half_life_days=None).resolved({}).confidence_half_life_days is None
    assert LearningConfig(confidence_half_life_days=0.5).resolved({}).confidence_half_life_days == 0.5


# settings given in code or in a mapping: refused under their own name ---------------------------
@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"trajectory_retention_days": "30"}, "trajectory_retention_days"),
        ({"trajectory_retention_days": -5}, "trajectory_retention_days"),
        ({"trajectory_retention_days": float("nan")}, "trajectory_retention_days"),
        ({"trajectory_retention_days": float("inf")}, "trajectory_retention_days"),
        ({"trajectory_retention_days": True}, "trajectory_retention_days"),
        ({"trajectory_sample_rate": "0.5"}, "trajectory_sample_rate"),
        ({"trajectory_sample_rate": float("nan")}, "trajectory_sample_rate"),
        ({"trajectory_sample_rate": 2}, "trajectory_sample_rate"),
        ({"trajectory_sample_rate": True}, "trajectory_sample_rate"),
        ({"always_store_failures": "no"}, "always_store_failures"),
        ({"merge_threshold": "0.5"}, "merge_threshold"),
        ({"merge_threshold": float("nan")}, "merge_threshold"),
        ({"merge_threshold": True}, "merge_threshold"),
        ({"merge_threshold": 1.5}, "merge_threshold"),
        ({"max_strategies": 2.9}, "max_strategies"),
        ({"evidence_kept": "20"}, "evidence_kept"),
        ({"retention_every": float("inf")}, "retention_every"),
        ({"versions": {"keep_latest": 2.9}}, "versions.keep_latest"),
        ({"versions": {"keep_latest": "3"}}, "versions.keep_latest"),
        ({"versions": {"keep_latest": True}}, "versions.keep_latest"),
        ({"versions": {"keep_latest": 10**400}}, "versions.keep_latest"),
        ({"versions": {"keep_days": -3}}, "versions.keep_days"),
        ({"versions": {"keep_days": "90"}}, "versions.keep_days"),
        ({"versions": {"keep_days": float("nan")}}, "versions.keep_days"),
        ({"versions": {"keep_all_major": "yes"}}, "versions.keep_all_major"),
    ],
)
def test_a_setting_of_the_wrong_kind_is_refused_under_its_name(settings, name) -> None:
    with Memory(":memory:", embedder="hashing") as memory:
        before = memory.learning_config
        with pytest.raises(ConfigurationError, match=rf"^{name.replace('.', '[.]')} must be"):
            memory.learning_config = settings
        assert memory.learning_config == before  # the settings in force stay


def test_what_a_retention_of_zero_or_none_means() -> None:
    # 0 days: trajectories are kept forever, as "none" in the variable says.
    assert LearningConfig(trajectory_retention_days=0).resolved({}).trajectory_retention_days is None
    assert LearningConfig().resolved({"TRAJECTORY_RETENTION_DAYS": "none"}).trajectory_retention_days is None
    assert LearningConfig().resolved({"TRAJECTORY_RETENTION_DAYS": "0"}).trajectory_retention_days is None
    assert LearningConfig().resolved({"TRAJECTORY_RETENTION_DAYS": "forever"}).trajectory_retention_days is None
    # Versions: None is no age rule; 0 days keeps none for its age; both are accepted.
    assert LearningConfig().resolved({"PLAYBOOK_VERSION_KEEP_DAYS": "none"}).versions.keep_days is None
    assert LearningConfig().resolved({"PLAYBOOK_VERSION_KEEP_DAYS": "0"}).versions.keep_days == 0
    assert LearningConfig(versions=VersionRetention(keep_days=None)).resolved({}).versions.keep_days is None


# settings from the environment: refused under the variable's name -------------------------------
@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("TRAJECTORY_SAMPLE_RATE", "2"),
        ("TRAJECTORY_SAMPLE_RATE", "-0.1"),
        ("TRAJECTORY_SAMPLE_RATE", "nan"),
        ("TRAJECTORY_RETENTION_DAYS", "-5"),
        ("TRAJECTORY_RETENTION_DAYS", "inf"),
        ("TRAJECTORY_RETENTION_DAYS", "a month"),
        ("PLAYBOOK_VERSION_KEEP_LATEST", "0.5"),
        ("PLAYBOOK_VERSION_KEEP_LATEST", "2.9"),
        ("PLAYBOOK_VERSION_KEEP_LATEST", "0"),
        ("PLAYBOOK_VERSION_KEEP_LATEST", "nan"),
        ("PLAYBOOK_VERSION_KEEP_DAYS", "-3"),
        ("PLAYBOOK_VERSION_KEEP_DAYS", "nan"),
        # "forever" would mean the opposite of what it says: no version kept for its age.
        ("PLAYBOOK_VERSION_KEEP_DAYS", "forever"),
        ("TRAJECTORY_ALWAYS_STORE_FAILURES", "maybe"),
        ("PLAYBOOK_VERSION_KEEP_ALL_MAJOR", "maybe"),
    ],
)
def test_a_variable_of_the_wrong_kind_is_refused_under_its_name(variable, raw, monkeypatch) -> None:
    monkeypatch.setenv(variable, raw)
    with Memory(":memory:", embedder="hashing") as memory, pytest.raises(ConfigurationError) as caught:
        memory.learning.start_trajectory("t", agent_id="a")
    assert str(caught.value).startswith(f"{variable} must be")
    assert repr(raw) in str(caught.value)  # what the user typed, not what it became


def test_whole_numbers_from_the_environment_are_read_whole(monkeypatch) -> None:
    monkeypatch.setenv("PLAYBOOK_VERSION_KEEP_LATEST", " 3 ")
    monkeypatch.setenv("TRAJECTORY_RETENTION_DAYS", "7.5")
    config = LearningConfig().resolved()
    assert config.versions.keep_latest == 3 and isinstance(config.versions.keep_latest, int)
    assert config.trajectory_retention_days == 7.5


# the playbooks' settings -------------------------------------------------------------------------
@pytest.mark.parametrize("raw", ["-1", "2.9", "nan", "two", "٣"])
def test_the_cap_on_new_bullets_from_the_environment_names_its_variable(raw) -> None:
    with pytest.raises(ConfigurationError, match="^ACE_CURATOR_MAX_NEW must be a whole number >= 0"):
        PlaybookConfig().resolved({"ACE_CURATOR_MAX_NEW": raw})


def test_the_cap_on_new_bullets_from_the_environment_is_read() -> None:
    assert PlaybookConfig().resolved({"ACE_CURATOR_MAX_NEW": " 0 "}).max_new == 0
    assert PlaybookConfig().resolved({}).max_new == 2


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"max_new": 2.9}, "max_new"),
        ({"max_new": -1}, "max_new"),
        ({"max_new": True}, "max_new"),
        ({"top_k": "5"}, "top_k"),
        ({"top_k": 2.5}, "top_k"),
        ({"candidates": 0}, "candidates"),
        ({"candidates": None}, "candidates"),
        ({"max_bullets": 2.9}, "max_bullets"),
        ({"use_llm": "yes"}, "use_llm"),
    ],
)
def test_a_playbook_setting_of_the_wrong_kind_is_refused_under_its_name(settings, name) -> None:
    with pytest.raises(ConfigurationError, match=f"^{name} must be"):
        PlaybookConfig(**settings).resolved({})


# ACE_MEMORY_FILE ---------------------------------------------------------------------------------
@pytest.mark.sqlite_only("the CLI on a store file ACE_MEMORY_FILE names")
def test_a_missing_store_named_by_ace_memory_file_is_reported_under_that_name(tmp_path, monkeypatch) -> None:
    """Before, the error told the user to check --db or MEMORIST_DB, neither of which they set."""
    missing = tmp_path / "ace.db"
    monkeypatch.setenv("ACE_MEMORY_FILE", str(missing))
    result = CliRunner().invoke(cli, ["analyze"])
    assert result.exit_code == 1
    assert f"no store at {missing}" in result.output and "ACE_MEMORY_FILE" in result.output
    assert "MEMORIST_DB" not in result.output
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    monkeypatch.setenv("ACE_MEMORY_FILE", str(empty))
    result = CliRunner().invoke(cli, ["analyze"])
    assert result.exit_code == 1 and "empty file" in result.output and "ACE_MEMORY_FILE" in result.output
    assert not missing.exists()


@pytest.mark.sqlite_only("the CLI on a store file --db names")
def test_a_missing_store_named_by_db_is_reported_as_before(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ACE_MEMORY_FILE", str(tmp_path / "ace.db"))
    other = tmp_path / "other.db"
    result = CliRunner().invoke(cli, ["--db", str(other), "analyze"])
    assert result.exit_code == 1 and f"no store at {other}" in result.output
    assert "check --db (or MEMORIST_DB)" in result.output
