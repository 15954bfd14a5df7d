"""The README's promises: its commands are the ones CI runs, and its examples run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line.strip() for block in _blocks("bash") for line in block.splitlines()]
    test_cmd = next(c for c in commands if "pytest" in c)
    assert test_cmd in ci, "the README's test command and .ci/run have drifted apart"


def test_readme_first_command_installs_and_runs_the_demo() -> None:
    commands = [line.strip() for block in _blocks("bash") for line in block.splitlines()]
    first = next(c for c in commands if "pip install" in c)
    assert "-c constraints.txt" in first and first.endswith("engram demo")


def test_constraints_pin_torch() -> None:
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text()


def test_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENGRAM_DB", str(tmp_path / "readme.db"))
    snippets = _blocks("python")
    assert snippets, "the README has no Python example"
    for code in snippets:
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
