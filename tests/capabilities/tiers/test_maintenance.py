"""Maintenance runs (spec 002, phases 3-5): decay, expiry, promotion with archive and
links, batch sizes, the persisted configuration, test isolation, the log file."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from tiers_helpers import HOUR, T0, at, item, remember

from memorist import ConfigurationError, Memory, MemoryConfig, NotFoundError, ValidationError


def _ids(result) -> set[str]:
    return {r["id"] for r in result["results"]}


def test_items_carry_energy_and_tier_with_start_energy_by_type(mem):
    kinds = {"insight": 3.0, "crystallization": 3.0, "learning": 2.0, "reminder": 2.5, None: 1.0}
    ids = {k: remember(mem, f"memory of type {k}", metadata={"type": k} if k else None) for k in kinds}
    for kind, energy in kinds.items():
        got = item(mem, ids[kind])
        assert (got["energy_at_last_decay"], got["tier"]) == (energy, "working")
    assert all("energy" in r and "tier" in r for r in mem.get_all(user_id="alex")["results"])
    assert all("energy" in r for r in mem.search("memory of type", user_id="alex")["results"])
    with pytest.raises(ValidationError, match="metadata.energy"):
        mem.add("bad", user_id="alex", metadata={"energy": "lots"})


def test_a_run_decays_by_the_hours_since_the_last_decay(mem):
    mid = remember(mem, "The deploy script needs the VPN", metadata={"type": "learning"})
    result = mem.tiers.maintain(now=at(1))
    assert (result["decayed"], result["expired"], result["promoted"]) == (1, 0, 0)
    assert item(mem, mid)["energy_at_last_decay"] == pytest.approx(1.213, abs=0.001)
    # The next run decays from the last decay, not from creation.
    mem.tiers.maintain(now=at(3))
    assert item(mem, mid)["energy_at_last_decay"] == pytest.approx(2.0 * math.exp(-0.5 * 3), abs=1e-6)
    # A run at the same time changes nothing; one before the last decay neither.
    assert mem.tiers.maintain(now=at(3))["decayed"] == 0
    assert mem.tiers.maintain(now=at(2))["decayed"] == 0
    assert item(mem, mid)["energy_at_last_decay"] == pytest.approx(2.0 * math.exp(-1.5), abs=1e-6)
    events = [e["event"] for e in mem.history(mid)]
    assert events == ["ADD", "DECAY", "DECAY"]


def test_promotion_archives_the_original_and_links_both_ways(mem):
    mem.tiers.config({"use_boost": 0})  # the searches below must not add energy
    mid = remember(mem, "Renew the TLS certificate before March", metadata={"type": "reminder"})
    mem.tiers.boost(mid, now=at(0))  # 3.5
    result = mem.tiers.maintain(now=at(0))
    assert (result["promoted"], result["promoted_to_short_term"]) == (1, 1)
    new_id = result["results"][0]["promoted_to"]
    assert new_id != mid
    new = mem.store.get(new_id)
    old = mem.store.get(mid)
    assert new.tier.value == "short_term" and new.status.value == "active" and new.energy == pytest.approx(3.5)
    assert new.lineage["promoted_from"] == mid
    assert old.status.value == "archived" and old.tier.value == "working"
    assert old.lineage["promoted_to"] == new_id and old.valid_to == at(0)
    # Retrieval returns the promoted memory once; the old id reaches it.
    listed = mem.get_all(user_id="alex")["results"]
    assert [r["id"] for r in listed] == [new_id] and listed[0]["tier"] == "short_term"
    assert item(mem, mid)["id"] == new_id
    assert [r["id"] for r in mem.search("TLS certificate", user_id="alex")["results"]] == [new_id]
    # Its history starts with the original's.
    assert [h["event"] for h in mem.history(new_id)] == ["ADD", "BOOST", "PROMOTE", "ADD"]
    # short_term -> long_term strictly above 5.0, in a later run.
    mem.tiers.boost(mid, amount=1.5, now=at(0))  # through the old id: 5.0, not above
    assert mem.tiers.maintain(now=at(0))["promoted"] == 0
    mem.tiers.boost(new_id, amount=0.01, now=at(0))
    second = mem.tiers.maintain(now=at(0))
    assert second["promoted_to_long_term"] == 1
    assert item(mem, mid)["tier"] == "long_term"


def test_expiry_hides_from_retrieval_and_keeps_the_history(mem):
    dying = remember(mem, "Had pasta for lunch")  # 1.0
    kept = remember(mem, "Renew the TLS certificate", metadata={"type": "reminder"})
    result = mem.tiers.maintain(now=at(5))  # 1.0 * e^-2.5 = 0.082 < 0.1; 2.5 * e^-2.5 = 0.205
    assert result["expired"] == 1
    assert _ids(mem.get_all(user_id="alex")) == {kept}
    assert dying not in _ids(mem.search("pasta lunch", user_id="alex"))
    with pytest.raises(NotFoundError):
        mem.get(dying, user_id="alex")
    history = mem.history(dying, user_id="alex")
    assert [h["event"] for h in history] == ["ADD", "EXPIRE"]
    assert history[-1]["payload"]["energy"] < 0.1
    assert dying in {e["memory_id"] for e in mem.events(user_id="alex")}
    record = mem.store.get(dying)
    assert (record.tier.value, record.status.value, record.valid_to) == ("expired", "archived", at(5))
    assert mem.tiers.status(now=at(5))["expired"] == 1
    with pytest.raises(NotFoundError):
        mem.tiers.boost(dying, now=at(5))


def test_batch_sizes_are_honoured(opened, backend):
    mem = opened()
    mem.tiers.config({"decay_batch": 7, "promotion_batch": 2})
    ids = [remember(mem, f"fact number {i}", hours=i * 0.01) for i in range(12)]
    for mid in ids[:4]:
        mem.tiers.boost(mid, amount=2.0, now=at(0.5))  # four promotion candidates
    first = mem.tiers.maintain(now=at(1))
    assert first["promoted"] == 2 and first["decayed"] == 7
    assert first["pending"] == 12 - 7
    # The two highest candidates (equal energies: the oldest) went first; the rest follow.
    second = mem.tiers.maintain(now=at(1))
    assert second["promoted"] == 2
    assert second["decayed"] <= 7
    totals = mem.tiers.status(now=at(1))
    assert totals["tiers"]["short_term"]["count"] == 4 and totals["archived"] == 4
    # Spec defaults: 10 promotions, 100 decays.
    config = opened(target=backend.fresh()).tiers.config()
    assert (config["config"]["promotion_batch"], config["config"]["decay_batch"]) == (10, 100)


def test_the_configuration_is_persisted_for_every_process(opened):
    first = opened()
    info = first.tiers.config()
    assert info["persisted"] is False and info["config"]["working_to_short_term"] == 2.0
    changed = first.tiers.config({"working_to_short_term": 2.5, "start_energy.reminder": 3})
    assert changed["persisted"] and changed["config"]["working_to_short_term"] == 2.5
    second = opened()  # another Memory of the same file reads it from the store
    assert second.tiers.config()["config"]["start_energy"]["reminder"] == 3
    mid = remember(second, "Water the plants", metadata={"type": "reminder"})
    assert item(second, mid)["energy_at_last_decay"] == 3.0
    with pytest.raises(ValidationError, match="tiers.expire_below"):
        second.tiers.config({"expire_below": 0})
    assert second.tiers.config(reset=True)["config"]["working_to_short_term"] == 2.0
    assert first.tiers.config()["config"]["working_to_short_term"] == 2.0  # read again, not cached


def test_the_first_run_persists_the_defaults_and_health_sees_it(mem):
    health = {c["check"]: c for c in mem.tiers.health(now=at(0))["checks"]}
    assert health["config"]["status"] == "warn" and health["last_run"]["status"] == "warn"
    remember(mem, "something")
    mem.tiers.maintain(now=at(1))
    report = mem.tiers.health(now=at(1))
    checks = {c["check"]: c for c in report["checks"]}
    assert report["healthy"] and checks["config"]["status"] == "ok" and checks["last_run"]["status"] == "ok"
    stale = {c["check"]: c for c in mem.tiers.health(now=at(30))["checks"]}["stale_decays"]
    assert stale["status"] == "warn" and stale["count"] == 1


def test_test_memories_are_isolated_from_normal_calls_and_runs(mem):
    mem.tiers.config({"use_boost": 0})  # the searches below must not add energy
    real = remember(mem, "Real memory about hiking")
    fake = remember(mem, "Test memory about hiking", test=True)
    flagged = remember(mem, "Another test about hiking", metadata={"is_test": True, "energy": 0.05})
    # Normal retrieval, counts and listings never see them.
    assert _ids(mem.get_all(user_id="alex")) == {real}
    assert _ids(mem.search("hiking", user_id="alex", limit=10)) == {real}
    with pytest.raises(NotFoundError):
        mem.get(fake, user_id="alex")
    assert mem.stats()["memories"] == 1 and mem.stats()["test_memories"] == 2
    from memorist.server.tenants import users_of

    assert users_of(mem) == [{"user_id": "alex", "memories": 1}]
    assert mem.tiers.status(now=at(0))["total"] == 1
    listed = mem.tiers.test_memories()["results"]
    assert {r["id"] for r in listed} == {fake, flagged} and all(r["is_test"] for r in listed)
    assert "tenant_id" not in listed[0]
    # A normal run never touches them; a test-only run touches only them.
    normal = mem.tiers.maintain(now=at(10))
    assert normal["memories"] == 1 and normal["expired"] == 1
    assert {r["energy_at_last_decay"] for r in mem.tiers.test_memories()["results"]} == {1.0, 0.05}
    mem.tiers.boost(fake, now=at(10))  # spec phase 2: boosting a test memory
    tests = mem.tiers.maintain(now=at(10), test_only=True)
    assert tests["memories"] == 2 and tests["test_only"] is True
    assert tests["expired"] == 1  # the 0.05 one
    assert [r["energy_at_last_decay"] for r in mem.tiers.test_memories()["results"]] == [pytest.approx(math.exp(-5) + 1.0, abs=1e-6)]
    assert mem.store.get(real).tier.value == "expired"  # untouched by the test run (expired by the normal one)
    assert mem.tiers.status(test_only=True, now=at(10))["expired"] == 1
    assert mem.tiers.delete_test_memories()["deleted"] == 2
    assert mem.tiers.test_memories()["results"] == []


@pytest.mark.sqlite_only("the maintenance log is a file beside the SQLite file")
def test_maintenance_log_lines_and_a_failing_log(opened, backend, tmp_path):
    mem = opened()
    remember(mem, "Renew the TLS certificate", metadata={"type": "reminder"})
    result = mem.tiers.maintain(now=at(1))
    log = Path(backend.target).with_suffix(".maintenance.log")
    assert result["log"] == str(log)
    mem.tiers.maintain(now=at(2), test_only=True)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 2
    first = lines[0]
    assert set(first) >= {"timestamp", "operation", "scopes", "counts", "results", "now", "run"}
    assert first["operation"] == "maintain" and first["counts"]["decayed"] == 1 and first["results"][0]["action"] == "decay"
    assert lines[1]["test_only"] is True
    # A log that cannot be written never fails the run.
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    other = opened(target=str(tmp_path / "other.db"), config=MemoryConfig(maintenance_log=str(blocked)))  # a folder: not writable as a file
    remember(other, "Water the plants")
    done = other.tiers.maintain(now=at(1))
    assert done["decayed"] == 1 and done["log"] is None
    checks = {c["check"]: c for c in other.tiers.health(now=at(1))["checks"]}
    assert checks["log"]["status"] == "warn"
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        os.chmod(ro, 0o500)
        third = opened(target=str(tmp_path / "third.db"), config=MemoryConfig(maintenance_log=str(ro / "x.log")))
        remember(third, "x")
        assert third.tiers.maintain(now=at(1))["log"] is None
    off = opened(target=str(tmp_path / "off.db"), config=MemoryConfig(maintenance_log="off"))
    remember(off, "y")
    assert off.tiers.maintain(now=at(1))["log"] is None
    assert not (tmp_path / "off.maintenance.log").exists()


def test_use_boosts_come_from_retrievals(mem):
    used = remember(mem, "Small commits make code reviews faster", metadata={"type": "learning"})
    remember(mem, "Unrelated note about gardening")
    for _ in range(3):
        assert mem.search("code reviews faster", user_id="alex", limit=1)["results"][0]["id"] == used
    result = mem.tiers.maintain(now=at(1))
    assert result["use_boosted"] == 1
    # 2.0 * e^-0.5 + 3 * 0.5 = 2.713 > 2.0: promoted.
    promoted = [r for r in result["results"] if r["action"] == "promote"]
    assert promoted and promoted[0]["energy"] == pytest.approx(2.0 * math.exp(-0.5) + 1.5, abs=1e-6)
    again = mem.tiers.maintain(now=at(1))  # counted once
    assert again["use_boosted"] == 0


def test_by_id_calls_follow_a_promotion(mem):
    mid = remember(mem, "Likes green tea", metadata={"type": "insight"})
    mem.tiers.maintain(now=at(0))  # 3.0 > 2.0
    updated = mem.update(mid, "Likes green tea with honey", user_id="alex")
    live = updated["id"]
    assert live != mid and item(mem, live)["memory"] == "Likes green tea with honey"
    assert item(mem, live)["tier"] == "short_term"
    assert mem.delete(mid, user_id="alex")["id"] == live
    assert mem.get_all(user_id="alex")["results"] == []


def test_the_default_policy_is_unchanged(opened, tmp_path):
    plain = opened(policy="default")
    mid = remember(plain, "Likes green tea")
    got = item(plain, mid)
    assert "energy" not in got and "tier" not in got
    assert "test_memories" not in plain.stats() and plain.stats()["policy"] == "default"
    for call in (lambda: plain.tiers.maintain(), lambda: plain.tiers.boost(mid), lambda: plain.tiers.end_conversation(user_id="alex")):
        with pytest.raises(ConfigurationError, match="energy policy"):
            call()
    assert list(tmp_path.glob("*.maintenance.log")) == []


def test_bad_arguments_name_their_field(mem):
    mid = remember(mem, "x")
    with pytest.raises(ValidationError, match="now"):
        mem.tiers.maintain(now="yesterday")
    with pytest.raises(ValidationError, match="amount"):
        mem.tiers.boost(mid, amount=-1)
    with pytest.raises(ValidationError, match="test_only"):
        mem.tiers.maintain(test_only="yes")
    with pytest.raises(ValidationError, match="test"):
        mem.add("y", user_id="alex", test="yes")
    with pytest.raises(NotFoundError):
        mem.tiers.boost(mid, user_id="someone-else")
    with pytest.raises(ConfigurationError, match="policy"):
        Memory(":memory:", embedder="hashing", policy="entropy")


def test_env_policy_and_datetime_now(monkeypatch, backend):
    from datetime import UTC, datetime

    monkeypatch.setenv("MEMORIST_POLICY", "energy")
    with Memory(backend.target, embedder="hashing") as m:
        assert m.energy
        remember(m, "From the environment")
        assert m.tiers.maintain(now=datetime.fromtimestamp(T0 + HOUR, UTC))["decayed"] == 1


def test_async_memory_has_the_tier_calls(backend):
    import asyncio

    from memorist import AsyncMemory

    async def run() -> dict:
        async with AsyncMemory(backend.target, embedder="hashing", policy="energy") as m:
            added = await m.add("Renew the TLS certificate", user_id="alex", infer=False, metadata={"type": "reminder"}, timestamp=at(0))
            await m.tiers.boost(added["results"][0]["id"], now=at(0))
            result = await m.tiers.maintain(at(0))
            await m.tiers.end_conversation(user_id="alex", now=at(1))
            assert await m.tiers.wait(10)
            return {"run": result, "status": await m.tiers.status(now=at(1))}

    out = asyncio.run(run())
    assert out["run"]["promoted"] == 1 and out["status"]["tiers"]["short_term"]["count"] == 1


def test_default_batches_and_strict_thresholds_in_a_run(mem):
    mem.add([{"role": "user", "content": f"Note number {i} about the garden"} for i in range(150)], user_id="alex", infer=False,
            timestamp=at(0))
    first = mem.tiers.maintain(now=at(1))
    assert (first["decayed"], first["pending"]) == (100, 50)
    second = mem.tiers.maintain(now=at(1))
    assert (second["decayed"], second["pending"]) == (50, 0)
    at_threshold = remember(mem, "Exactly at the threshold", metadata={"energy": 2.0}, hours=1)
    above = remember(mem, "Just above the threshold", metadata={"energy": 2.000001}, hours=1)
    run = mem.tiers.maintain(now=at(1))
    assert [r["id"] for r in run["results"] if r["action"] == "promote"] == [above]
    assert item(mem, at_threshold)["tier"] == "working"
    top = remember(mem, "Exactly five in short term", metadata={"energy": 5.0, "tier": "short_term"}, hours=1)
    assert mem.tiers.maintain(now=at(1))["promoted"] == 0 and item(mem, top)["tier"] == "short_term"
    for i in range(12):
        remember(mem, f"Strong memory {i}", metadata={"energy": 3.0 + i}, hours=1)
    run = mem.tiers.maintain(now=at(1))
    assert run["promoted"] == 10  # spec 002: ten promotions per run, the strongest first
    assert sorted(r["energy"] for r in run["results"] if r["action"] == "promote")[0] == 5.0


def test_a_whole_run_and_the_store_reopened(backend):
    with Memory(backend.target, embedder="hashing", policy="energy") as mem:
        mem.tiers.config({"use_boost": 0})
        promoted = remember(mem, "Renew the TLS certificate", metadata={"type": "reminder"})
        dying = remember(mem, "Had pasta for lunch")
        test = remember(mem, "A test memory", test=True, metadata={"energy": 0.05})
        mem.tiers.boost(promoted, now=at(1))  # 2.5 e^-0.5 + 1 = 2.516
        result = mem.tiers.maintain(now=at(5))
        assert result["memories"] == 2
        # 2.516 * e^-2 = 0.34: decayed, not promoted (the boost came an hour in).
        assert (result["expired"], result["promoted"]) == (1, 0)
        mem.tiers.boost(promoted, amount=2.0, now=at(5))
        second = mem.tiers.maintain(now=at(5))
        assert second["promoted_to_short_term"] == 1
        live = mem.get_all(user_id="alex")["results"]
        assert [(r["memory"], r["tier"]) for r in live] == [("Renew the TLS certificate", "short_term")]
        assert mem.get(promoted, user_id="alex")["id"] == second["results"][0]["promoted_to"]
        with pytest.raises(NotFoundError):
            mem.get(dying, user_id="alex")
        assert [h["event"] for h in mem.history(dying, user_id="alex")] == ["ADD", "EXPIRE"]
        assert mem.tiers.test_memories()["results"][0]["id"] == test
        assert mem.tiers.maintain(now=at(5), test_only=True)["expired"] == 1
        assert mem.tiers.status(now=at(5))["archived"] == 1
        assert mem.tiers.health(now=at(5))["healthy"]
        mem.tiers.end_conversation(user_id="alex", now=at(6))
        assert mem.tiers.wait(timeout=30)
    with Memory(backend.target, embedder="hashing", policy="energy") as again:  # the configuration persisted
        assert again.tiers.config()["config"]["use_boost"] == 0
        assert again.tiers.status(now=at(6))["last_run"]["operation"] == "end_conversation"


def test_one_users_status_and_health_tell_only_runs_that_reached_them(mem):
    """A run of user b's memories is not user a's last run (its id and time told a of
    b's maintenance); a run of the whole tenant reached everyone."""
    remember(mem, "note of a", user_id="a")
    remember(mem, "note of b", user_id="b")
    a = mem.scope(user_id="a")
    assert a.tiers.status()["last_run"] is None
    mine = mem.tiers.maintain(now=at(1), user_id="a")["run"]
    theirs = mem.tiers.maintain(now=at(2), user_id="b")["run"]
    assert a.tiers.status()["last_run"]["run"] == mine
    assert mem.scope(user_id="b").tiers.status()["last_run"]["run"] == theirs
    assert mem.tiers.status()["last_run"]["run"] == theirs  # the tenant's: the latest of all
    check = next(c for c in a.tiers.health()["checks"] if c["check"] == "last_run")
    assert mine in check["detail"] and theirs not in check["detail"]
    everyone = mem.tiers.maintain(now=at(3))["run"]
    assert a.tiers.status()["last_run"]["run"] == everyone
    assert "counts" not in a.tiers.status()["last_run"]  # a tenant-wide run's counts stay the tenant's
    # A user with no run that reached them is told so.
    remember(mem, "note of c", user_id="c")
    mem.tiers.maintain(now=at(4), user_id="a")
    assert mem.scope(user_id="c").tiers.status()["last_run"]["run"] == everyone
