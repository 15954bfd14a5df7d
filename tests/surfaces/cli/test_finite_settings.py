"""Every numeric setting, from the environment, a flag or a configuration object,
refuses NaN and the infinities with an error that names the setting: a NaN passes every
range check (``nan < 0`` is false), and a NaN decay window would hide every memory."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from memorist import (
    ConfigurationError,
    EvaluationConfig,
    Memory,
    MemoryConfig,
    PlaybookConfig,
    RetrievalConfig,
    ValidationError,
)
from memorist.cli import cli
from memorist.policies.learning import LearningConfig

NON_FINITE = ["nan", "inf", "-inf", "NaN", "Infinity"]


@pytest.mark.parametrize("raw", NON_FINITE)
@pytest.mark.parametrize("variable", ["MEMORIST_DECAY_DAYS", "MEMORY_DECAY_DAYS"])
def test_the_decay_window_from_the_environment(variable, raw, monkeypatch) -> None:
    monkeypatch.setenv(variable, raw)
    with pytest.raises(ConfigurationError, match=variable):
        Memory(":memory:", embedder="hashing")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_settings_given_to_the_library(value) -> None:
    with pytest.raises(ConfigurationError, match="decay_days"):
        Memory(":memory:", embedder="hashing", decay_days=value)
    for name in ("vector_weight", "text_weight", "time_weight", "speaker_weight", "score_weight", "question_discount"):
        with pytest.raises(ConfigurationError, match=f"retrieval.{name}"):  # where the setting is given
            RetrievalConfig(**{name: value})
        with pytest.raises(ConfigurationError, match=f"retrieval.{name}"):
            Memory(config=MemoryConfig(path=":memory:", embedder="hashing", retrieval={name: value}))
    with pytest.raises(ConfigurationError, match="busy_timeout"):
        Memory(":memory:", embedder="hashing", config=MemoryConfig(busy_timeout=value))
    with pytest.raises(ValidationError, match="recency_weeks|prune_below|weight"):
        EvaluationConfig(prune_below=value)
    with pytest.raises(ConfigurationError, match="dedup_threshold"):
        PlaybookConfig.preset("ltmbse", dedup_threshold=value).resolved({})


@pytest.mark.parametrize("raw", [*NON_FINITE, "1e309", "-1", "86401"])
def test_the_busy_timeout_from_the_environment_names_its_variable(raw, monkeypatch) -> None:
    """Before, MEMORIST_BUSY_TIMEOUT=nan was refused as "busy_timeout", a name the user
    who set the variable never wrote."""
    monkeypatch.setenv("MEMORIST_BUSY_TIMEOUT", raw)
    with pytest.raises(ConfigurationError, match="MEMORIST_BUSY_TIMEOUT"):
        Memory(":memory:", embedder="hashing")


@pytest.mark.parametrize("raw", NON_FINITE)
def test_settings_of_the_learning_loop_from_the_environment(raw, monkeypatch) -> None:
    monkeypatch.setenv("TRAJECTORY_SAMPLE_RATE", raw)
    with pytest.raises(ConfigurationError, match="TRAJECTORY_SAMPLE_RATE"):
        LearningConfig().resolved()


@pytest.mark.parametrize("raw", NON_FINITE)
@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--decay-days", "{raw}", "list", "--user", "a"], "--decay-days"),
        (["list", "--user", "a", "--decay-days", "{raw}"], "--decay-days"),
        (["search", "q", "--user", "a", "--threshold", "{raw}"], "--threshold"),
        (["boost", "abc", "--amount", "{raw}"], "--amount"),
        (["trajectory", "complete", "t", "success", "--score", "{raw}"], "--score"),
        (["pair", "task", "criteria", "output", "--threshold", "{raw}"], "--threshold"),
        (["tiers", "test-memory", "x", "--user", "a", "--energy", "{raw}"], "--energy"),
    ],
)
def test_number_flags(args, option, raw, tmp_path) -> None:
    db = str(tmp_path / "never.db")
    result = CliRunner().invoke(cli, ["--db", db, *[a.format(raw=raw) for a in args]])
    assert result.exit_code == 2, result.output
    # Refused before anything runs, naming the flag (an infinity outside the range is
    # refused by the range check, which says so).
    assert option in result.output and ("not a finite number" in result.output or "range" in result.output), result.output
    assert not (tmp_path / "never.db").exists()


@pytest.mark.parametrize("raw", ["nan", "inf"])
def test_the_environment_variable_of_a_flag(raw, tmp_path) -> None:
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "never.db"), "list", "--user", "a"], env={"MEMORIST_DECAY_DAYS": raw})
    assert result.exit_code == 2 and "MEMORIST_DECAY_DAYS" in result.output and "not a finite number" in result.output
