"""The learning loop's commands through click's runner: ``memorist trajectory``,
``memorist reflect``, ``memorist playbook``, ``memorist bench learn``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memorist.benchmarks.learn import TRUTH
from memorist.cli import cli

pytestmark = pytest.mark.sqlite_only("the learning commands through the CLI runner, on a file")


def run(db: str, *args: str, code: int = 0, input: str | None = None):
    result = CliRunner().invoke(cli, ["--db", db, "--embedder", "hashing", *args], input=input, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def data(db: str, *args: str):
    return json.loads(run(db, "--json", *args).output)


def test_a_trajectory_then_reflection_then_curation(tmp_path) -> None:
    db = str(tmp_path / "cli.db")
    tid = run(db, "trajectory", "start", "Fetch", "users", "--type", "api_call", "--agent", "bot").output.strip()
    run(db, "trajectory", "log", tid[:8], "decision", "Back off on HTTP 429", "--agent", "bot")
    run(db, "trajectory", "log", tid, "observation", "3 pages", "--metadata", '{"pages": 3}')
    done = data(db, "trajectory", "complete", tid, "--status", "success", "--score", "0.9", "--metrics", '{"tokens": 120}')
    assert done["status"] == "success" and done["tokens_used"] == 120
    listed = run(db, "trajectory", "list", "--agent", "bot").output
    assert tid[:8] in listed and "Fetch users" in listed
    shown = data(db, "trajectory", "show", tid)
    assert [s["description"] for s in shown["steps"]] == ["Back off on HTTP 429", "3 pages"]
    reflection = data(db, "reflect", tid[:8])
    assert reflection["insights"]["successful_patterns"] == ["Back off on HTTP 429"]
    text = run(db, "reflect", tid).output
    assert "✓ Back off on HTTP 429" in text
    diff = run(db, "playbook", "curate", "api_client", reflection["memory_id"][:10], "--agent", "bot").output
    assert "✓ Added 1 new strategies" in diff
    playbook = data(db, "playbook", "get", "api_client", "--agent", "bot")
    assert [s["pattern"] for s in playbook["strategies"]["helpful"]] == ["Back off on HTTP 429"]
    assert "Back off on HTTP 429" in run(db, "playbook", "get", "api_client", "--agent", "bot").output
    batch = data(db, "reflect", "--batch", "--agent", "bot", "--min", "1")
    assert batch["results"][0]["trajectory_count"] == 1
    assert "nothing to reflect on" in run(db, "reflect", "--batch", "--agent", "bot", "--min", "5").output
    run(db, "reflect", code=2)  # neither an id nor --batch


def test_update_versions_rollback(tmp_path) -> None:
    db = str(tmp_path / "pb.db")
    run(db, "playbook", "update", "--pattern", "Validate inputs", "--context", "API calls", "--confidence", "0.9", "--evidence-count", "5")
    strategies = tmp_path / "s.json"
    strategies.write_text(json.dumps([{"category": "harmful", "pattern": "Retry immediately"}]))
    run(db, "playbook", "update", "default", "--file", str(strategies))
    versions = data(db, "playbook", "versions")["results"]
    assert [v["version"] for v in versions] == [1, 2]
    old = data(db, "playbook", "get", "--version", "1")
    assert [s["pattern"] for s in old["strategies"]["helpful"]] == ["Validate inputs"] and old["strategies"]["harmful"] == []
    assert "rolled back to version 1" in run(db, "playbook", "rollback", "default", "1").output
    now = data(db, "playbook", "get")
    assert now["version"] == 3 and now["strategies"]["harmful"] == []
    assert data(db, "playbook", "list")["results"][0]["name"] == "default"
    run(db, "playbook", "update", code=2)  # nothing to add
    bad = run(db, "playbook", "update", "--file", str(tmp_path / "missing.json"), code=2)
    assert "missing.json" in bad.output


def test_errors_name_the_flags(tmp_path) -> None:
    db = str(tmp_path / "e.db")
    tid = run(db, "trajectory", "start", "x", "--user", "alex").output.strip()
    out = run(db, "trajectory", "show", tid, "--user", "bob", code=1).output
    assert "trajectory not found" in out
    assert "error" in run(db, "reflect", tid, code=1).output  # still running


def test_bench_learn_json(tmp_path) -> None:
    out = json.loads(run(str(tmp_path / "unused.db"), "--json", "bench", "learn", "--episodes", "60", "--block", "20").stdout)
    assert out["episodes"] == 60 and len(out["learning"]["success_by_block"]) == 3 == len(out["without"]["success_by_block"])
    assert set(out["learning"]) >= {"success_by_block", "playbook_size", "near_duplicates", "versions_kept"}
    assert out["learning"]["success_by_block"][-1] > out["without"]["success_by_block"][-1]
    # Each world's learned categories against the simulator's truth.
    assert out["world"] == "basic" and out["extended"]["world"] == "extended"
    for world in (out, out["extended"]):
        learned = world["learning"]
        assert {r["strategy"] for r in learned["categories"]} == set(TRUTH[world["world"]])
        assert all(0.0 <= learned[k] <= 1.0 for k in ("category_accuracy", "precision_helpful", "recall_helpful",
                                                        "precision_harmful", "recall_harmful"))
        assert learned["foreign"] == []  # no error message taken for a strategy


def test_category_scores_fail_when_the_playbook_is_wrong() -> None:
    from memorist.benchmarks.learn import BACKOFF, HAMMER, LOG_BODIES, TIMEOUT, score_categories

    def book(helpful: list[str], harmful: list[str]) -> dict:
        return {"strategies": {"helpful": [{"pattern": p} for p in helpful], "harmful": [{"pattern": p} for p in harmful], "neutral": []}}

    truth = TRUTH["basic"]
    right = score_categories(book([BACKOFF], [HAMMER]), truth)
    assert right["precision_helpful"] == right["precision_harmful"] == 1.0 and right["recall_harmful"] == 0.5
    wrong = score_categories(book([BACKOFF, LOG_BODIES, TIMEOUT], ["Error: HTTP 429 Too Many Requests"]), truth)
    assert wrong["precision_helpful"] == round(1 / 3, 3) and wrong["recall_harmful"] == 0.0
    assert wrong["foreign"] == ["Error: HTTP 429 Too Many Requests"]
    assert wrong["category_accuracy"] < right["category_accuracy"]
