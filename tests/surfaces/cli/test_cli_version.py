"""``memorist --version`` prints the package's one version: ``memorist.__version__``,
which setuptools also writes into the distribution's metadata (pyproject.toml's
dynamic version; tests/docs/test_package.py checks the built wheel's)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from click.testing import CliRunner

import memorist
from memorist.cli import cli

ROOT = Path(__file__).resolve().parents[3]


def test_version_prints_the_packages_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"memorist, version {memorist.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", memorist.__version__)


def test_the_version_is_written_in_one_place() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"], "pyproject.toml writes a version of its own"
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "memorist.__version__"}
