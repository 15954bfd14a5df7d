"""`memorist serve`'s connection limits: flags, their MEMORIST_ variables (read through
memorist.config) and the errors that name whichever was wrong, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist.cli import cli
from memorist.config import SERVE_ENVIRONMENT


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, ["--db", str(tmp_path / "s.db"), "--embedder", "hashing", "serve", "--create", *args], env=env)


@pytest.mark.parametrize("option", sorted(SERVE_ENVIRONMENT))
def test_every_limit_has_a_flag_and_a_documented_variable(option: str) -> None:
    out = CliRunner().invoke(cli, ["serve", "--help"], terminal_width=200).output
    flag = "--" + option.replace("_", "-")
    assert flag in out
    assert SERVE_ENVIRONMENT[option] in out


@pytest.mark.parametrize(("variable", "raw"), [
    ("MEMORIST_TIMEOUT_HEAD", "nan"), ("MEMORIST_TIMEOUT_BODY", "0"), ("MEMORIST_TIMEOUT_KEEP_ALIVE", "inf"),
    ("MEMORIST_MAX_CONCURRENCY", "many"), ("MEMORIST_MAX_CONNECTIONS", "0"), ("MEMORIST_AUTH_FAILURES", "-1"),
])
def test_a_bad_variable_is_an_error_naming_it(tmp_path: Path, variable: str, raw: str) -> None:
    result = serve(tmp_path, env={variable: raw})
    assert result.exit_code == 2, result.output
    assert variable in result.output
    assert not (tmp_path / "s.db").exists()  # refused before the store was made


def test_a_flag_wins_over_its_variable(tmp_path: Path) -> None:
    # A flag that is wrong is named as the flag, even when the variable is fine...
    result = serve(tmp_path, "--timeout-head", "nan", env={"MEMORIST_TIMEOUT_HEAD": "3"})
    assert result.exit_code == 2 and "--timeout-head" in result.output and "MEMORIST_" not in result.output
    # ...and a good flag hides a bad variable.
    result = serve(tmp_path, "--max-connections", "10000000", env={"MEMORIST_MAX_CONNECTIONS": "zero"})
    assert result.exit_code == 2 and "--max-connections" in result.output and "descriptors" in result.output


def test_more_connections_than_descriptors_is_refused(tmp_path: Path) -> None:
    result = serve(tmp_path, env={"MEMORIST_MAX_CONNECTIONS": "10000000"})
    assert result.exit_code == 2
    assert "MEMORIST_MAX_CONNECTIONS" in result.output and "ulimit -n" in result.output
