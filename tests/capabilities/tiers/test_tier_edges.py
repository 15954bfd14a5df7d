"""The energy tiers' edges a user meets (issue 25, item 8): promotions left over by the
batch limit count as pending; items show the energy now; a run dated before a memory
existed leaves it alone; a boost above the cap names the cap; times may be offsets
from now (``+10h``, ``-2d``); the service's tier figures take ``now``. On each backend."""

from __future__ import annotations

import json
import math
import time

import pytest
from click.testing import CliRunner
from tiers_helpers import HOUR, at, remember

from memorist import ValidationError
from memorist.cli import cli


def test_promotions_left_over_by_the_batch_limit_are_pending(mem):
    mem.tiers.config({"promotion_batch": 1})
    ids = [remember(mem, f"insight number {i}", metadata={"energy": 3.0 + i}) for i in range(3)]
    # At the time they were made: no decay due, three promotions due, one allowed per run.
    first = mem.tiers.maintain(now=at(0))
    assert (first["promoted"], first["pending"]) == (1, 2)
    assert first["results"][0]["id"] == ids[2]  # the highest energy first
    second = mem.tiers.maintain(now=at(0))
    assert (second["promoted"], second["pending"]) == (1, 1)
    # Later: the one left over is decayed meanwhile, still above 2.0, still pending.
    mem.tiers.config({"promotion_batch": 0})
    third = mem.tiers.maintain(now=at(0.1))
    assert third["promoted"] == 0 and third["pending"] >= 1
    assert mem.tiers.health(now=at(0.1))["checks"][4]["promotions"] == third["pending"]
    mem.tiers.config({"promotion_batch": 1})
    last = mem.tiers.maintain(now=at(0.1))
    assert (last["promoted"], last["pending"]) == (1, 0)


def test_get_and_list_show_the_energy_now_as_status_does(mem):
    two_hours_ago = time.time() - 2 * HOUR
    mid = mem.add("The staging password rotates monthly", user_id="alex", infer=False, metadata={"energy": 2.0},
                  timestamp=two_hours_ago)["results"][0]["id"]
    expected = 2.0 * math.exp(-0.5 * 2)  # two hours in the working tier
    got = mem.get(mid, user_id="alex")
    assert got["energy"] == pytest.approx(expected, abs=1e-3)
    assert got["energy_at_last_decay"] == 2.0
    assert got["last_decay"].startswith(time.strftime("%Y-%m-%d", time.gmtime(two_hours_ago)))
    (listed,) = mem.get_all(user_id="alex")["results"]
    assert listed["energy"] == pytest.approx(expected, abs=1e-3)
    status = mem.tiers.status(user_id="alex")
    assert status["tiers"]["working"]["energy_max"] == pytest.approx(listed["energy"], abs=1e-3)
    # A run now stores what was shown; the item then shows the same energy.
    mem.tiers.maintain()
    after = mem.get(mid, user_id="alex")
    assert after["energy_at_last_decay"] == pytest.approx(expected, abs=1e-3)
    assert after["energy"] == pytest.approx(expected, abs=1e-3)


def test_a_run_dated_before_a_memory_existed_leaves_it_alone(mem):
    strong = remember(mem, "Ship on Fridays is forbidden", hours=10, metadata={"energy": 50.0})
    weak = remember(mem, "Lunch was at noon", hours=10, metadata={"energy": 0.2})
    early = mem.tiers.maintain(now=at(5))  # five hours before either existed
    assert (early["memories"], early["decayed"], early["expired"], early["promoted"], early["pending"]) == (0, 0, 0, 0, 0)
    for mid in (strong, weak):
        assert [e["event"] for e in mem.history(mid)] == ["ADD"]
        assert mem.get(mid, user_id="alex")["energy_at_last_decay"] in (50.0, 0.2)
    # At their time they are promoted and kept (0.2 is above the 0.1 expiry).
    on_time = mem.tiers.maintain(now=at(10))
    assert (on_time["memories"], on_time["promoted"], on_time["expired"]) == (2, 1, 0)


def test_get_status_and_health_count_the_retrievals_still_buffered(mem):
    # Four searches are buffered (written every 32, or with the next write); a run counts them.
    mid = mem.add("Kettle descaling happens every second Sunday", user_id="alex", infer=False)["results"][0]["id"]
    for _ in range(4):
        assert mem.search("kettle descaling sunday", user_id="alex")["results"]
    got = mem.get(mid, user_id="alex")["energy"]
    assert got == pytest.approx(3.0, abs=1e-3)  # 1.0 + 4 uses of 0.5, none of it decayed yet
    assert mem.tiers.status(user_id="alex")["tiers"]["working"]["energy_max"] == pytest.approx(got, abs=1e-3)
    (due,) = [c for c in mem.tiers.health()["checks"] if c["check"] == "due"]
    assert due["promotions"] == 1  # above 2.0: the next run promotes it
    assert mem.tiers.maintain()["promoted"] == 1


def test_a_boost_dated_before_the_memory_existed_is_refused(mem):
    mid = remember(mem, "beta fact", hours=10)
    assert mem.tiers.maintain(now=at(0))["memories"] == 0  # a run then leaves it alone
    with pytest.raises(ValidationError, match=r"now: 2026-01-01T00:00:00\+00:00 is before memory .* existed \(2026-01-01T10:00:00\+00:00\)") as info:
        mem.tiers.boost(mid, now=at(0), user_id="alex")
    assert info.value.field == "now"
    assert [e["event"] for e in mem.history(mid)] == ["ADD"] and mem.get(mid, user_id="alex")["energy_at_last_decay"] == 1.0
    assert mem.tiers.boost(mid, now=at(10), user_id="alex")["energy"] == pytest.approx(2.0)  # at its creation: taken


def test_a_boost_above_the_cap_names_the_cap(mem):
    mid = remember(mem, "Renew the TLS certificate")
    with pytest.raises(ValidationError, match="amount: must be a number > 0 and ≤ 1,000,000,000, got 2000000000.0"):
        mem.tiers.boost(mid, 2e9, now=at(0), user_id="alex")
    with pytest.raises(ValidationError, match="≤ 1,000,000,000"):
        mem.add("huge", user_id="alex", infer=False, metadata={"energy": 1e10})
    with pytest.raises(ValidationError, match="tiers.boost: must be a number > 0 and ≤ 1,000,000,000"):
        mem.tiers.config({"boost": 5e9})
    assert mem.tiers.boost(mid, 1e9, now=at(0), user_id="alex")["energy"] == pytest.approx(1e9 + 1.0)


@pytest.mark.parametrize(("offset", "seconds"), [("+10h", 36_000), ("-2d", -172_800), ("+30m", 1_800), ("-45s", -45),
                                                 ("+1w", 604_800), ("+1.5h", 5_400), ("+4m", 240)])
def test_now_takes_offsets_from_the_current_time(mem, offset, seconds):
    before = time.time()
    status = mem.tiers.status(now=offset)
    seen_at = time.mktime(time.strptime(status["now"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert before + seconds - 2 <= seen_at <= time.time() + seconds + 2
    if seconds > 300:  # a run dated in the future is refused: up to 5 minutes ahead are taken, for clock skew
        with pytest.raises(ValidationError, match="is in the future"):
            mem.tiers.maintain(now=offset)
    else:
        run = mem.tiers.maintain(now=offset)
        assert run["now"][:16] == status["now"][:16]


def test_an_offset_that_is_not_one_is_refused(mem):
    for bad in ("+10", "10h", "+h", "+10 light-years", "+99999999999d"):
        with pytest.raises(ValidationError) as info:
            mem.tiers.maintain(now=bad)
        assert info.value.field == "now"


def test_the_cli_takes_offsets_and_names_the_energy_flag(backend, tmp_path):
    runner = CliRunner()

    def memorist(*args: str, code: int = 0):
        result = runner.invoke(cli, ["--db", backend.target, "--embedder", "hashing", "--policy", "energy", *args])
        assert result.exit_code == code, (result.stdout, result.stderr)
        return result

    memorist("add", "--user", "alex", "--no-infer", "--metadata", '{"energy": 3.0}', "--timestamp", "-10h",
             "Renew the TLS certificate")
    assert "is in the future" in memorist("maintain", "--now", "+10h", code=1).stderr  # a run is dated at most 5 min ahead
    run = json.loads(memorist("--json", "maintain", "--now", "+2m").stdout)
    assert run["decayed"] == 1 and run["expired"] == 1  # 3.0 * e^-5 < 0.1
    earlier = json.loads(memorist("--json", "maintain", "--now", "-2d").stdout)
    assert earlier["memories"] == 0  # the memory did not exist two days ago
    assert "--now" in memorist("maintain", "--now", "+ten hours", code=1).stderr
    nan = memorist("tiers", "test-memory", "--user", "alex", "--energy", "nan", "Near expiry", code=2).stderr
    assert "--energy" in nan and "--metadata" not in nan
    huge = memorist("tiers", "test-memory", "--user", "alex", "--energy", "1e12", "Near expiry", code=1).stderr
    assert "--energy: a start energy must be a number > 0 and ≤ 1,000,000,000" in huge and "--metadata" not in huge
    status = json.loads(memorist("--json", "tiers", "status", "--now", "+1d").stdout)
    assert status["now"][:10] == time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86_400))


def test_a_time_typed_as_text_means_the_same_on_every_surface(backend):
    """A flag, a query parameter, a JSON string and the library read one time text
    alike: digits are epoch seconds everywhere, and a signed number without a unit is
    refused, not taken as 1970. Before, ``--now +10`` (or ``?now=%2B10``) ran as of
    1970-01-01T00:00:10 and did nothing, and ``20240101`` was 1970 on the command line
    but 2024 in the library."""
    from fastapi.testclient import TestClient

    from memorist.server import create_app
    from memorist.validate import time_text, timestamp
    from service_helpers import UNLIMITED

    for text in ("1700000000", "20240101", "1700000000.5"):
        assert timestamp(text) == timestamp(time_text(text)) == float(text)
    for text in ("+10", "-10", "1_000", "١٢٣", " 12 ", "nan", "inf", "1e9"):
        with pytest.raises(ValidationError):
            timestamp(time_text(text), field="now")
        with pytest.raises(ValidationError):
            timestamp(text, field="now")

    app = create_app(backend.target, embedder="hashing", limits=UNLIMITED, policy="energy")
    try:
        with TestClient(app) as c:
            c.post("/api/memories/", json={"messages": "Renew the TLS certificate", "user_id": "alex", "infer": False})
            r = c.get("/api/tiers/", params={"user_id": "alex", "now": "+10"})
            assert r.status_code == 422 and "now" in r.text, r.text
            by_query = c.get("/api/tiers/", params={"user_id": "alex", "now": "1700000000"})
            by_body = c.post("/api/tiers/maintain/", json={"user_id": "alex", "now": "1700000000"})
            assert by_query.status_code == by_body.status_code == 200, (by_query.text, by_body.text)
            assert by_query.json()["now"][:19] == by_body.json()["now"][:19] == "2023-11-14T22:13:20"
            # A status may look ahead; a run dated in the future is refused (5 minutes of clock skew aside).
            ahead = c.get("/api/tiers/", params={"user_id": "alex", "now": "4102444800"})
            assert ahead.status_code == 200 and ahead.json()["now"][:19] == "2100-01-01T00:00:00", ahead.text
            refused = c.post("/api/tiers/maintain/", json={"user_id": "alex", "now": "4102444800"})
            assert refused.status_code == 422 and "is in the future" in refused.text, refused.text
    finally:
        app.state.service.close()
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", backend.target, "--embedder", "hashing", "--policy", "energy", "maintain", "--now", "+10"])
    assert result.exit_code == 1 and "--now" in result.stderr, (result.stdout, result.stderr)


def test_a_large_run_writes_in_transactions_of_a_bounded_size(mem, monkeypatch, between_transactions):
    """One transaction for a run of a million decays held every other write of the
    store (every tenant's, on SQLite) for 13 s. A run now changes at most RUN_CHUNK
    memories a transaction, another writer gets in between, and the run is logged
    once, whole."""
    from memorist.pipelines import tiers

    ids = [remember(mem, f"note number {i}") for i in range(5)]
    monkeypatch.setattr(tiers, "RUN_CHUNK", 2)
    store = mem.store
    transactions = between_transactions(
        store, 2, lambda: mem.add("written between two of the run's transactions", user_id="other", infer=False))
    run = mem.tiers.maintain(now=at(1))
    assert run["decayed"] == len(ids) and run["memories"] == len(ids) and run["expired"] == 0
    assert len(transactions) == 3 + 1  # the run's three, and the add between them
    logged = [e for e in store.events(None, ops=(tiers.RUN_OP,)) if e.payload.get("run") == run["run"]]
    assert len(logged) == 1 and logged[0].payload["counts"]["decayed"] == len(ids)
    assert all(mem.get(i, user_id="alex")["energy"] < 1.0 for i in ids)
    assert [m["memory"] for m in mem.get_all(user_id="other")["results"]] == ["written between two of the run's transactions"]


def test_status_health_and_runs_count_the_memories_they_read(mem):
    """A status or health of a large tenant reads each of its memories (over a second
    at 100,000): the call's meter counts them, so a service charges what it costs."""
    from memorist.work import metered

    for i in range(30):
        remember(mem, f"note number {i}")
    for call in (lambda: mem.tiers.status(), lambda: mem.tiers.health(), lambda: mem.tiers.maintain(now=at(1))):
        with metered() as meter:
            call()
        assert meter.units >= 30
