"""The global --embedder option: an empty or blank spec is refused, as the library
refuses ``Memory(embedder="")``; an empty ``MEMORIST_EMBEDDER`` is unset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import Memory
from memorist.cli import cli


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MEMORIST_"):
            monkeypatch.delenv(name)


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "m.db")
    with Memory(path, embedder="hashing:64") as memory:
        memory.add("I like jazz", user_id="alex", infer=False)
    return path


@pytest.mark.parametrize("spec", ["", "   "])
@pytest.mark.parametrize("after", [False, True])
def test_an_empty_embedder_option_is_refused(db: str, spec: str, after: bool) -> None:
    argv = ["--db", db, "list", "--user", "alex", "--embedder", spec] if after else ["--db", db, "--embedder", spec, "list", "--user", "alex"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert "--embedder" in result.stderr and "empty" in result.stderr
    assert "jazz" not in result.stdout


def test_a_blank_memorist_embedder_is_refused(db: str) -> None:
    result = CliRunner().invoke(cli, ["--db", db, "list", "--user", "alex"], env={"MEMORIST_EMBEDDER": "  "})
    assert result.exit_code == 2, result.output
    assert "MEMORIST_EMBEDDER" in result.stderr


def test_an_empty_memorist_embedder_is_unset(db: str) -> None:
    # As every empty MEMORIST_ variable: the store's own embedder (hashing:64) is used.
    result = CliRunner().invoke(cli, ["--db", db, "--json", "stats"], env={"MEMORIST_EMBEDDER": ""})
    assert result.exit_code == 0, result.output
    assert '"hashing-v1-64"' in result.stdout
