"""The energy tiers and time (a review's findings): a call that writes refuses a time
more than 5 minutes in the future, as ``minutes.record`` does; a run counts a memory
whose last decay has not come yet (left by a boost dated a year ahead) as decayed up
to its time, where before it never decayed; ``status`` and ``health`` as of a past
time count only the memories made by then, as a run does. On each backend."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner
from tiers_helpers import HOUR, at, remember

from memorist import ValidationError
from memorist.cli import cli

WEEK = 7 * 24 * HOUR
SKEW = "(up to 5 minutes ahead of this machine's clock are taken, for clock skew)"


def _checks(report: dict) -> dict[str, dict]:
    return {c["check"]: c for c in report["checks"]}


def test_a_boost_dated_in_the_future_is_refused_and_changes_nothing(mem):
    """Before, ``boost(id, now="+52w")`` set the memory's last decay a year ahead."""
    mid = remember(mem, "Had pasta for lunch")
    before = mem.get(mid, user_id="alex")
    with pytest.raises(ValidationError) as info:
        mem.tiers.boost(mid, now="+52w", user_id="alex")
    assert info.value.field == "now"
    assert str(info.value).startswith("now: '+52w' is in the future; a boost ") and str(info.value).endswith(SKEW)
    after = mem.get(mid, user_id="alex")
    assert (after["energy_at_last_decay"], after["last_decay"]) == (before["energy_at_last_decay"], before["last_decay"])
    # Clock skew: a few minutes ahead are taken.
    assert mem.tiers.boost(mid, now=time.time() + 120, user_id="alex")["tier"] == "working"


def test_the_refusal_reads_as_the_minutes_one(mem):
    with pytest.raises(ValidationError) as minute:
        mem.minutes.record("status", project_id="apollo", now="+1d")
    with pytest.raises(ValidationError) as run:
        mem.tiers.maintain(now="+1d")
    assert str(minute.value).endswith(SKEW) and str(run.value).endswith(SKEW)
    assert str(run.value).startswith("now: '+1d' is in the future; ")


def test_a_run_or_end_of_conversation_dated_in_the_future_is_refused(mem):
    remember(mem, "Had pasta for lunch")
    for now in ("+1h", time.time() + 3600, "2100-01-01T00:00:00Z"):
        with pytest.raises(ValidationError, match="is in the future") as info:
            mem.tiers.maintain(now=now)
        assert info.value.field == "now"
        with pytest.raises(ValidationError, match="is in the future"):
            mem.tiers.maintain(now=now, test_only=True)
        with pytest.raises(ValidationError, match="is in the future"):
            mem.tiers.end_conversation(user_id="alex", now=now)
    assert mem.tiers.wait(timeout=10)
    assert mem.tiers.status()["last_run"] is None  # no run was made, none scheduled
    assert mem.tiers.engine.background.info()["runs"] == 0
    assert mem.tiers.maintain(now="+4m")["memories"] == 1  # clock skew: taken
    assert mem.tiers.end_conversation(user_id="alex", now="+4m")["scheduled"]
    assert mem.tiers.wait(timeout=30)


@pytest.mark.parametrize("test", [True, False])
def test_a_memory_dated_in_the_future_is_refused_under_the_energy_policy(mem, test):
    """It would decay only from then on: a run before then leaves it alone."""
    with pytest.raises(ValidationError, match="is in the future") as info:
        mem.add("Had pasta for lunch", user_id="alex", infer=False, test=test, timestamp="+52w")
    assert info.value.field == "timestamp" and str(info.value).endswith(SKEW)
    assert mem.get_all(user_id="alex")["results"] == [] and mem.tiers.test_memories()["results"] == []
    made = mem.add("Had pasta for lunch", user_id="alex", infer=False, test=test, timestamp=time.time() + 60)
    assert len(made["results"]) == 1


def test_a_memory_dated_in_the_future_is_refused_before_its_facts_are_extracted(opened):
    """Before, the model was asked for the facts (and billed for them) first."""
    from memorist import ScriptedLLM

    model = ScriptedLLM(default=None)
    model.push({"facts": ["Had pasta for lunch"]})
    mem = opened(llm=model)
    with pytest.raises(ValidationError, match="is in the future") as info:
        mem.add("I had pasta for lunch", user_id="alex", timestamp="+52w")
    assert info.value.field == "timestamp"
    assert model.requests == [] and mem.get_all(user_id="alex")["results"] == []


def test_the_cli_refuses_a_future_time_for_a_run_a_boost_and_a_test_memory(backend):
    runner = CliRunner()

    def memorist(*args: str, code: int = 0):
        result = runner.invoke(cli, ["--db", backend.target, "--embedder", "hashing", "--policy", "energy", *args])
        assert result.exit_code == code, (result.stdout, result.stderr)
        return result

    made = json.loads(memorist("--json", "add", "--user", "alex", "--no-infer", "Had pasta for lunch").stdout)
    mid = made["results"][0]["id"]
    assert "is in the future" in memorist("maintain", "--now", "+1d", code=1).stderr
    assert "is in the future" in memorist("boost", mid[:8], "--user", "alex", "--now", "+52w", code=1).stderr
    refused = memorist("tiers", "test-memory", "--user", "alex", "--timestamp", "+1d", "Near expiry", code=1).stderr
    assert "is in the future" in refused
    assert json.loads(memorist("--json", "tiers", "tests").stdout)["results"] == []


def _leave_last_decay_ahead(mem, mid: str, last_decay: float, energy: float = 1.0) -> None:
    """What a boost dated a year ahead left before such boosts were refused."""
    record = mem.store.get(mid)
    ahead = record.copy(energy=energy, lineage={**record.lineage, "last_decay": last_decay})
    with mem.store.transaction() as batch:
        batch.update(ahead, None, old_text=record.text, op="boost", payload={"amount": 1.0})


def test_a_run_counts_a_last_decay_that_has_not_come_as_decayed_up_to_its_time(mem):
    """Before, runs two days and 300 days later decayed nothing: the small talk meant
    to expire in about 5 hours never did."""
    clock = time.time()
    mid = mem.add("Had pasta for lunch", user_id="alex", infer=False, timestamp=clock - 24 * HOUR)["results"][0]["id"]
    _leave_last_decay_ahead(mem, mid, clock + 52 * WEEK)
    assert mem.get(mid, user_id="alex")["last_decay"][:4] == time.strftime("%Y", time.gmtime(clock + 52 * WEEK))
    stale = _checks(mem.tiers.health(now=clock - 10 * HOUR))["stale_decays"]
    assert stale["status"] == "warn" and "1 memories last decayed at a time that has not come" in stale["detail"]

    first = mem.tiers.maintain(now=clock - 10 * HOUR)  # decayed up to its time, its energy as stored
    assert (first["decayed"], first["expired"]) == (1, 0)
    assert first["results"][0]["action"] == "decay" and "last_decay_was" in first["results"][0]
    item = mem.get(mid, user_id="alex")
    assert item["energy_at_last_decay"] == pytest.approx(1.0)
    assert abs(time.mktime(time.strptime(item["last_decay"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
               - (clock - 10 * HOUR)) < 2
    assert _checks(mem.tiers.health(now=clock - 10 * HOUR))["stale_decays"]["status"] == "ok"

    second = mem.tiers.maintain(now=clock)  # ten hours later: 1.0·e^(−0.5·10) < 0.1
    assert (second["decayed"], second["expired"]) == (1, 1)
    assert mem.get_all(user_id="alex")["results"] == []


def test_a_boost_counts_a_last_decay_that_has_not_come_as_decayed_up_to_its_time(mem):
    clock = time.time()
    mid = mem.add("Had pasta for lunch", user_id="alex", infer=False, timestamp=clock - 24 * HOUR)["results"][0]["id"]
    _leave_last_decay_ahead(mem, mid, clock + 52 * WEEK)
    boosted = mem.tiers.boost(mid, amount=0.5, now=clock - 10 * HOUR, user_id="alex")
    assert boosted["energy"] == pytest.approx(1.5)
    assert mem.tiers.maintain(now=clock)["expired"] == 1  # 1.5·e^(−5) < 0.1: it decays from the boost on


def test_a_run_dated_before_a_real_last_decay_still_leaves_it_alone(mem):
    """Only a last decay ahead of this machine's clock is counted anew: one a run dated
    earlier finds after its own time is kept (no hours decayed twice)."""
    mid = remember(mem, "Renew the TLS certificate", metadata={"type": "reminder"})
    mem.tiers.maintain(now=at(3))
    kept = mem.get(mid, user_id="alex")
    earlier = mem.tiers.maintain(now=at(2))
    assert (earlier["decayed"], earlier["results"]) == (0, [])
    assert mem.get(mid, user_id="alex")["last_decay"] == kept["last_decay"]


def test_status_and_health_as_of_a_past_time_count_only_the_memories_made_by_then(mem):
    """Before, status as of a time before the memory was made reported it live at 3.0,
    and health said it waited for promotion, while a run then saw nothing."""
    remember(mem, "made at T0+10h", hours=10, metadata={"type": "insight"})
    remember(mem, "a test memory made at T0+10h", hours=10, test=True)
    early = mem.tiers.status(now=at(0), user_id="alex")
    assert early["total"] == 0 and early["tiers"]["working"]["count"] == 0 and early["test_memories"] == 0
    assert mem.tiers.status(now=at(0))["total"] == 0
    assert mem.tiers.maintain(now=at(0), user_id="alex")["memories"] == 0
    checks = _checks(mem.tiers.health(now=at(0), user_id="alex"))
    assert checks["counts"]["counts"]["working"] == 0 and checks["counts"]["detail"].startswith("0 live memories")
    assert (checks["due"]["promotions"], checks["due"]["status"]) == (0, "ok")
    assert checks["test_memories"]["count"] == 0
    # From its time on, it counts (and waits for its promotion).
    later = mem.tiers.status(now=at(10), user_id="alex")
    assert later["total"] == 1 and later["tiers"]["working"]["energy_max"] == pytest.approx(3.0)
    assert _checks(mem.tiers.health(now=at(10), user_id="alex"))["due"]["promotions"] == 1
    assert mem.tiers.maintain(now=at(10), user_id="alex")["promoted"] == 1
    assert mem.tiers.status(now=at(0))["archived"] == 0  # its promoted original was not archived yet either
