"""``memorist add --importance``, ``memorist consolidate`` (with ``--dry-run``) and
``memorist rollback``: a run, then its rollback, leaves ``memorist export`` as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist.cli import cli

LOW = ["Plays tennis on Sundays", "Plays tennis on Sundays with Tom", "Drinks green tea every morning",
       "Drinks green tea every morning at 7am"]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("MEMORIST_DB", "MEMORIST_EMBEDDER", "MEMORIST_LLM", "AUTO_CONSOLIDATE_THRESHOLD"):
        monkeypatch.delenv(name, raising=False)
    db = str(tmp_path / "m.db")
    runner = CliRunner()

    def invoke(*args: str, code: int = 0):
        result = runner.invoke(cli, ["--db", db, "--embedder", "hashing", *args])
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        assert "Traceback" not in result.stderr
        return result

    return invoke


def test_consolidate_then_rollback_leaves_the_export_as_it_was(run) -> None:
    for text in LOW:
        run("add", "--user", "u", "--no-infer", "--importance", "0.2", text)
    run("add", "--user", "u", "--no-infer", "--importance", "0.9", "Carries an EpiPen for a shellfish allergy")
    before = run("export", "--user", "u").stdout
    dry = run("consolidate", "--user", "u", "--dry-run")
    assert "would merge 4 memories into 2; preserved 1" in dry.stdout
    assert run("export", "--user", "u").stdout == before
    report = json.loads(run("--json", "consolidate", "--user", "u").stdout)
    assert (report["merged_count"], report["consolidated_count"], report["preserved_count"]) == (4, 2, 1)
    assert run("export", "--user", "u").stdout != before
    undone = run("rollback", report["run_id"], "--user", "u")
    assert f"rolled back consolidation {report['run_id']}: restored 4 memories, retired 2" in undone.stdout
    assert run("export", "--user", "u").stdout == before
    again = run("rollback", report["run_id"], "--user", "u", code=1)
    assert "already rolled back" in again.stderr
    assert "not found" in run("rollback", "no-such-run", "--user", "u", code=1).stderr


def test_bad_importance_and_settings_are_refused_naming_them(run) -> None:
    assert "--importance" in run("add", "--user", "u", "--importance", "1.5", "hi", code=2).stderr
    assert "--importance" in run("add", "--user", "u", "--importance", "nan", "hi", code=2).stderr
    assert "--min-importance" in run("consolidate", "--user", "u", "--min-importance", "inf", code=2).stderr
    run("add", "--user", "u", "--no-infer", "hi")
    assert "give --user or --agent" in run("consolidate", code=1).stderr
