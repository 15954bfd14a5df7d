"""``memorist maintain``, ``memorist boost``, ``memorist tiers ...`` and ``memorist demo
--tiers`` through click's runner (hashing embedder, a store in tmp_path)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tiers_helpers import T0, at

from memorist.cli import cli

pytestmark = pytest.mark.sqlite_only("the tier commands through the CLI runner, on a file (and its maintenance log)")


@pytest.fixture
def memorist(tmp_path: Path):
    db = str(tmp_path / "cli.db")
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, ["--db", db, "--embedder", "hashing", *args], catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.output

    run.db = db  # type: ignore[attr-defined]
    return run


def _json(out: str):
    return json.loads(out)


def test_the_spec_phases_through_the_cli(memorist, tmp_path):
    # Phase 2: test memories with properties; real memories under the energy policy.
    memorist("--policy", "energy", "add", "Renew the TLS certificate", "--user", "milo", "--no-infer",
           "--metadata", '{"type": "reminder"}', "--timestamp", "2026-01-01T00:00:00+00:00")
    made = _json(memorist("--json", "tiers", "test-memory", "Ready for promotion", "--user", "milo", "--energy", "2.5",
                        "--timestamp", str(T0)))
    near = _json(memorist("--json", "tiers", "test-memory", "Near expiry", "--user", "milo", "--energy", "0.05",
                        "--timestamp", str(T0)))["results"][0]
    short = _json(memorist("--json", "tiers", "test-memory", "Short-term ready", "--user", "milo", "--energy", "5.5",
                         "--tier", "short_term", "--timestamp", str(T0)))["results"][0]
    assert short["tier"] == "short_term" and near["energy_at_last_decay"] == 0.05
    listed = _json(memorist("--json", "tiers", "tests"))["results"]
    assert len(listed) == 3 and all(r["is_test"] for r in listed)
    assert "Near expiry" in memorist("tiers", "tests")
    # Test isolation: the real list has one memory.
    assert len(_json(memorist("--json", "tiers", "list", "--user", "milo"))["results"]) == 1
    # Boost a test memory by its short id (phase 2's -boostMemory).
    boosted = _json(memorist("--json", "boost", made["results"][0]["id"][:8], "--now", str(at(0))))
    assert boosted["energy"] == 3.5
    # Phases 3-4: a test-only run decays, expires and promotes the test memories only.
    run = _json(memorist("--json", "maintain", "--test-only", "--now", str(at(0))))
    assert run["test_only"] and run["expired"] == 1 and run["promoted"] == 2
    assert run["promoted_to_short_term"] == 1 and run["promoted_to_long_term"] == 1
    real = _json(memorist("--json", "tiers", "list", "--user", "milo"))["results"][0]
    assert (real["energy_at_last_decay"], real["tier"]) == (2.5, "working")
    # A normal run, in human form.
    out = memorist("maintain", "--now", str(at(1)))
    assert "Maintenance run" in out and "1 decayed" in out and "Logged to" in out
    status = _json(memorist("--json", "tiers", "status", "--now", str(at(1))))
    assert status["tiers"]["working"]["count"] == 1 and status["test_memories"] == 2
    assert "short_term" in memorist("tiers", "status", "--test-only")
    log = Path(tmp_path / "cli.maintenance.log").read_text().splitlines()
    assert len(log) == 2


def test_config_health_and_errors(memorist):
    memorist("--policy", "energy", "add", "x", "--user", "u", "--no-infer")
    shown = _json(memorist("--json", "tiers", "config"))
    assert shown["persisted"] is False and shown["config"]["decay_batch"] == 100
    changed = _json(memorist("--json", "tiers", "config", "--set", "decay_batch=50", "--set", "start_energy.reminder=3"))
    assert changed["persisted"] and changed["config"]["decay_batch"] == 50
    assert "decay_batch" in memorist("tiers", "config")
    out = memorist("tiers", "config", "--set", "bogus=1", code=1)
    assert "tiers.bogus" in out
    memorist("tiers", "config", "--set", "nonsense", code=2)
    report = _json(memorist("--json", "tiers", "health", "--now", str(at(0))))
    assert report["healthy"] and {c["check"] for c in report["checks"]} >= {"config", "stale_decays", "lineage", "log"}
    assert "Energy tiers:" in memorist("tiers", "health")
    assert "--now" in memorist("maintain", "--now", "someday", code=1)
    assert "not found" in memorist("boost", "doesnotexist", code=1).lower()


def test_demo_tiers(memorist, tmp_path):
    out = memorist("demo", "--tiers")
    for expected in ("working → short_term", "short_term → long_term", "expired", "history of the expired learning",
                     "end_conversation()", "maintenance log"):
        assert expected in out, expected
    kept = str(tmp_path / "demo.db")
    data = _json(CliRunner().invoke(cli, ["--db", kept, "--embedder", "hashing", "--json", "demo", "--tiers"]).output)
    assert data["status"]["tiers"]["long_term"]["count"] == 1 and data["health"]["healthy"]
    assert len(data["log"]) == len(data["runs"]) + 1  # and the background run


def test_plot_writes_a_png(memorist, tmp_path):
    memorist("--policy", "energy", "add", "Renew the TLS certificate", "--user", "milo", "--no-infer")
    out = tmp_path / "plots" / "tiers.png"
    text = memorist("tiers", "plot", "--out", str(out))
    assert "Wrote" in text
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    from matplotlib import image

    pixels = image.imread(str(out))
    assert pixels.shape[0] > 400 and pixels.shape[1] > 600


def test_list_and_search_show_tier_and_energy_under_the_energy_policy(memorist):
    memorist("--policy", "energy", "add", "Renew the TLS certificate", "--user", "milo", "--no-infer",
           "--metadata", '{"type": "reminder"}')
    for command in (("list", "--user", "milo"), ("search", "TLS certificate", "--user", "milo")):
        shown = memorist("--policy", "energy", *command)
        assert "tier" in shown and "energy" in shown and "working" in shown and "2.500" in shown, shown
        # The store remembers its policy: without --policy the columns are there too
        # (a search counts as a use: the energy now is 0.5 higher after the first).
        again = memorist(*command)
        assert again == shown if command[0] == "list" else again == shown.replace("2.500", "3.000")
        other = str(Path(memorist.db).with_name("plain.db"))
        memorist("--db", other, "add", "Renew the TLS certificate", "--user", "milo", "--no-infer")
        plain = memorist("--db", other, *command)  # a default store: no tier, no such columns
        assert "energy" not in plain and "working" not in plain, plain
