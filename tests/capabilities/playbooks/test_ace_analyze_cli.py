"""``memorist analyze`` through click's CliRunner: summary, top, recent, search, export,
interactive, cleanup [--dry-run]."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memorist import Memory, Playbook
from memorist.cli import cli

pytestmark = pytest.mark.sqlite_only("memorist analyze through the CLI runner, on a file")

LESSONS = [
    ("sam", "Use pizza slices to show the equal parts of a whole", "strategy", "fractions"),
    ("sam", "Sam adds the denominators when adding fractions", "experience", "fractions"),
    ("sam", "Line the decimals up and pad them with zeros", "strategy", "decimals"),
    ("ana", "Walk along a number line to subtract a negative", "strategy", "negative_numbers"),
]
TWIN = ("sam", "Use pizza slices to show equal parts of the whole", "strategy", "fractions")


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "analyze.db")
    with Memory(path, embedder="hashing") as memory:
        pb = Playbook(memory)
        for i, (learner, text, kind, topic) in enumerate(LESSONS):
            pb.turn(learner, f"c{i}").learn(question="q", lessons=[{"content": text, "type": kind}], topic=topic)
        # A near-duplicate that a looser configuration let in, for cleanup to find.
        loose = Playbook(memory, reinforce_threshold=None, dedup_threshold=0.999)
        learner, text, kind, topic = TWIN
        loose.turn(learner, "c9").learn(question="q", lessons=[{"content": text, "type": kind}], topic=topic)
        assert len(pb.bullets("sam")) == 4
    return path


def run(db: str, *args: str, input: str | None = None):
    result = CliRunner().invoke(cli, ["--db", db, *args], input=input, catch_exceptions=False)
    return result


def bullet_count(db: str) -> tuple[int, int]:
    with Memory(db) as memory:
        return len(Playbook(memory).bullets()), len(memory.store.events())


def test_summary_is_the_default(db):
    plain = run(db, "analyze")
    assert plain.exit_code == 0, plain.output
    assert plain.output.startswith("Playbooks (per-learner): 5 bullets, 2 learner(s)")
    assert "memory types: procedural 4, episodic 1" in plain.output
    assert run(db, "analyze", "summary").output == plain.output
    data = json.loads(run(db, "analyze", "--json").output)
    assert data["total_bullets"] == 5 and data["by_topic"]["fractions"] == 3 and len(data["top"]) == 5
    one = json.loads(run(db, "--json", "analyze", "summary", "--learner", "ana").output)
    assert one["total_bullets"] == 1 and one["learners"] == 1


def test_top_and_recent(db):
    top = json.loads(run(db, "analyze", "top", "--limit", "2", "--json").output)["results"]
    assert len(top) == 2 and all(b["score"] >= 0.9 for b in top)
    recent = json.loads(run(db, "analyze", "recent", "--learner", "sam", "--json").output)["results"]
    assert recent[0]["content"] == TWIN[1] and len(recent) == 4
    table = run(db, "analyze", "top")
    assert table.exit_code == 0 and "score" in table.output and "learner" in table.output


def test_search_finds_by_meaning_without_touching(db):
    before = bullet_count(db)
    hits = json.loads(run(db, "analyze", "search", "decimals", "zeros", "--json").output)["results"]
    assert hits[0]["content"] == "Line the decimals up and pad them with zeros"
    assert bullet_count(db) == before  # no retrieve event, nothing changed
    human = run(db, "analyze", "search", "negative number line", "--learner", "ana")
    assert "Walk along a number line" in human.output and "similarity" in human.output


def test_export_text_and_json(db, tmp_path):
    text = run(db, "analyze", "export").output
    assert text.startswith("# Memorist playbooks: 5 bullets")
    assert "## learner sam (4 bullets)" in text and "### strategies_and_hard_rules" in text
    assert "helpful=1 harmful=0 score=1.000 type=procedural topic=fractions" in text
    target = tmp_path / "out.txt"
    result = run(db, "analyze", "export", "-o", str(target))
    assert result.exit_code == 0 and target.read_text().startswith("# Memorist playbooks")
    data = json.loads(run(db, "analyze", "export", "--json").output)
    assert len(data["bullets"]) == 5


def test_cleanup_dry_run_writes_nothing_then_cleanup_merges(db):
    before = bullet_count(db)
    dry = run(db, "analyze", "cleanup", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "Dry run: 1 bullet(s) in 1 cluster(s) would be merged; nothing was written." in dry.output
    assert bullet_count(db) == before
    plan = json.loads(run(db, "analyze", "cleanup", "--dry-run", "--json").output)
    assert plan["would_merge"] == 1 and plan["clusters"][0]["kept_content"] == TWIN[1]  # equal signal: the newest
    done = run(db, "analyze", "cleanup")
    assert "Merged 1 bullet(s) in 1 cluster(s)." in done.output
    assert "[ACE Memory][Dedup Merge] kept=" in done.stderr
    assert bullet_count(db)[0] == before[0] - 1
    assert "No near-duplicates" in run(db, "analyze", "cleanup").output


def test_interactive(db):
    script = "help\nsummary\ntop 1\nrecent 1\nsearch pizza slices\nlearner ana\nexport\ncleanup --dry-run\nbogus\nquit\n"
    result = run(db, "analyze", "interactive", input=script)
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.count("commands: summary") >= 2
    assert "Playbooks (per-learner): 5 bullets" in out
    assert "analyze[ana]> " in out and "## learner ana (1 bullets)" in out
    assert "unknown command 'bogus'" in out
    assert bullet_count(db)[0] == 5  # the dry run wrote nothing


def test_baseline_preset_reads_the_shared_playbook(db):
    out = run(db, "analyze", "--preset", "baseline", "--json")
    assert json.loads(out.output)["total_bullets"] == 5  # every playbook, whatever the preset


def test_the_per_learner_preset_and_its_former_name(db):
    shown = run(db, "analyze", "--help").output
    assert "[per-learner|baseline]" in shown and "ltmbse" not in shown.lower()
    by_name = json.loads(run(db, "analyze", "--preset", "per-learner", "--json").output)
    assert by_name["preset"] == "per-learner" and by_name["total_bullets"] == 5
    # The former name still works (scripts written for 0.1.0), and reads the same playbooks.
    assert json.loads(run(db, "analyze", "--preset", "ltmbse", "--json").output) == by_name
    bad = run(db, "analyze", "--preset", "nonsense")
    assert bad.exit_code == 2 and "'per-learner'" in bad.output and "ltmbse" not in bad.output.lower()
