"""Spec 003 through the command line (click's runner): minutes → index → context →
evaluation → PAIR, as a user types them."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist.cli import cli

pytestmark = pytest.mark.sqlite_only("spec 003's commands through the CLI runner, on a file")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("MEMORIST_DB", "MEMORIST_EMBEDDER", "MEMORIST_DECAY_DAYS", "MEMORY_DECAY_DAYS", "MEMORIST_TENANT", "MEMORIST_LLM"):
        monkeypatch.delenv(name, raising=False)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))


class Memorist:
    def __init__(self, db: str) -> None:
        self.db = db
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int = 0, input: str | None = None):
        result = self.runner.invoke(cli, ["--db", self.db, "--embedder", "hashing", *args], input=input)
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        return result

    def json(self, *args: str):
        return json.loads(self("--json", *args).stdout)


@pytest.fixture
def memorist(tmp_path: Path) -> Memorist:
    return Memorist(str(tmp_path / "memorist.db"))


def test_minutes_record_recent_show_search(memorist):
    first = memorist.json("minutes", "record", "task_assigned", "--agent", "planner", "--project", "apollo",
                        "--note", "CSV importer goes to coder", "--data", '{"task_id": "t7", "assignment_reasoning": "knows CSV"}',
                        "--at", "2025-01-15T08:00:00Z")
    assert first["category"] == "task_assignment" and first["timestamp"].startswith("2025-01-15T08:00:00")
    out = memorist("minutes", "record", "task_completed", "--agent", "coder", "--project", "apollo", "--ref", first["id"][:8],
                 "--data", '{"success_criteria_met": 40}').stdout
    second_id = out.split()[0]
    assert out.strip().endswith("(failure_pattern)")
    recent = memorist.json("minutes", "recent", "--project", "apollo")["results"]
    assert [m["id"] for m in recent] == [first["id"], second_id] and recent[1]["context_references"] == [first["id"]]
    table = memorist("minutes", "recent", "--project", "apollo", "-n", "1").stdout
    assert second_id[:8] in table and first["id"][:8] not in table
    shown = memorist.json("minutes", "show", second_id[:8])["results"][0]
    assert shown["id"] == second_id and shown["indexed"] is True
    hits = memorist.json("minutes", "search", "CSV", "importer", "--project", "apollo", "--limit", "1")["results"]
    assert [h["id"] for h in hits] == [first["id"]]
    page = memorist.json("minutes", "history", "--project", "apollo", "--limit", "1")
    assert [m["id"] for m in page["minutes"]] == [first["id"]] and page["next"] is not None


def test_errors_name_the_flag(memorist):
    err = memorist("minutes", "record", "status", "--ref", "nope", code=1).stderr
    assert err.startswith("error:") and "nope" in err
    err = memorist("minutes", "record", "status", "--data", "[1]", code=2).stderr
    assert "--data" in err
    memorist("minutes", "record", "status")
    err = memorist("minutes", "show", "zzz", code=1).stderr
    assert "minute" in err and "zzz" in err
    err = memorist("context", "coder", "--budget", "0", code=2).stderr
    assert "--budget" in err
    assert "--output" in memorist("pair", "--task", "t", "--criteria", "c", code=2).stderr


def test_context_evaluate_reindex_and_pair(memorist, tmp_path):
    memorist("minutes", "record", "status", "--agent", "tester", "--project", "apollo", "--note", "ancient standup", "--at", "2020-01-01")
    memorist("minutes", "record", "task_completed", "--agent", "coder", "--project", "apollo",
           "--note", "Writing unit tests first caught the bug", "--data", '{"success_criteria_met": 95}')
    dry = memorist.json("evaluate", "--project", "apollo", "--dry-run")
    assert dry["dry_run"] is True and dry["pruned"] == 1
    assert "would prune 1" in memorist("evaluate", "--project", "apollo", "--dry-run").stdout
    done = memorist.json("evaluate", "--project", "apollo")
    assert done["pruned"] == 1 and done["kept_in_index"] == 1
    assert len(memorist.json("minutes", "history", "--project", "apollo")["minutes"]) == 2
    assert memorist.json("minutes", "reindex", "--project", "apollo")["restored"] == 1
    assert "0 restored" in memorist("minutes", "reindex", "--all-projects").stdout
    # (a search with a task counts as a retrieval: after the evaluation, not to change it)
    window = memorist.json("context", "coder", "--task", "unit tests", "--project", "apollo", "--budget", "500")
    assert window["tokens"] <= 500 and window["counts"]["recent"] == 2
    assert "Writing unit tests first caught the bug" in window["text"]
    human = memorist("context", "coder", "--project", "apollo", "--budget", "40")
    assert human.stdout.startswith("## Coordination context for coder") and "cut" in human.stderr


    out = tmp_path / "out.py"
    out.write_text("def load(path): return open(path).read().split(',')", encoding="utf-8")
    r = memorist.json("pair", "--task", "Write the CSV importer", "--criteria", "Has unit tests; Handles quoted fields",
                    "--output-file", str(out), "--project", "apollo")
    assert r["met"] is False and r["score"] == 0.0
    assert [imp["gap"]["criterion"] for imp in r["improvements"]] == ["Has unit tests", "Handles quoted fields"]
    assert r["improvements"][0]["memories"][0]["memory_note"] == "Writing unit tests first caught the bug"
    text = memorist("pair", "--task", "t", "--criteria", "Has unit tests", "--output", "no", "--project", "apollo").stdout
    assert text.startswith("Score 0 / 100 (below the threshold 95)") and "gap: not addressed: Has unit tests" in text


def test_demo_pair(memorist):
    result = json.loads(CliRunner().invoke(cli, ["--json", "--embedder", "hashing", "demo", "--pair"]).stdout)
    assert result["pair"]["converged"] is True and result["db_path"] is None
    assert result["history_count"] == result["evaluation"]["in_log"] == len(result["minutes"])
    assert result["evaluation"]["pruned"] >= 1
    text = CliRunner().invoke(cli, ["--embedder", "hashing", "demo", "--pair"]).stdout
    for step in ("1. Minutes", "2. Index", "3. Context", "4. Evaluation", "5. PAIR", "converged: True"):
        assert step in text



def test_times_are_iso_8601_or_epoch_seconds(memorist):
    """--at, --since and --until take either, as their help says."""
    iso = memorist.json("minutes", "record", "status", "--project", "p", "--at", "2025-01-15T08:00:00+00:00")
    assert iso["ts"] == datetime(2025, 1, 15, 8, tzinfo=UTC).timestamp()
    assert memorist.json("minutes", "record", "status", "--project", "p", "--at", "1700000000")["ts"] == 1_700_000_000.0
    assert "--at" in memorist("minutes", "record", "status", "--project", "p", "--at", "next tuesday", code=1).stderr
    memorist("trajectory", "start", "Parse", "the", "PDF", "--user", "u")
    listed = lambda *when: memorist.json("trajectory", "list", "--user", "u", *when)["results"]  # noqa: E731
    assert len(listed("--since", "1000000000")) == 1
    assert listed("--since", "4000000000") == [] and listed("--until", "1000000000") == []
