"""The store remembers its policy: no command expires, prunes or rewrites memories
the store's own configuration keeps, and every process agrees on how it is used."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memorist import ConfigurationError, Memory, ValidationError
from memorist.cli import cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIVE_DAYS_AGO = time.time() - 5 * 86_400


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path) -> str:
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else str(tmp_path / "policy.db")


def _cli(target: str, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["--db", target, "--embedder", "hashing", *args], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def test_tier_commands_refuse_a_store_that_is_not_under_the_energy_policy(target) -> None:
    with Memory(target, embedder="hashing") as memory:
        (fact,) = memory.add("I live in Porto", user_id="alex", timestamp=FIVE_DAYS_AGO)["results"]
    for command in (("maintain",), ("maintain", "--user", "alex"), ("boost", fact["id"][:8]), ("tiers", "status"),
                    ("tiers", "health"), ("tiers", "config", "--set", "decay_batch=5"), ("tiers", "list", "--user", "alex"),
                    ("tiers", "tests")):
        out = _cli(target, *command, code=1)
        assert "'default' policy" in out and "memorist config set policy energy" in out, (command, out)
    # --policy energy does not switch it either: the store's own policy decides.
    out = _cli(target, "--policy", "energy", "maintain", code=1)
    assert "not 'energy'" in out and "memorist config set policy energy" in out
    # The five-day-old fact is where it was, unchanged.
    listed = json.loads(_cli(target, "--json", "list", "--user", "alex"))["results"]
    assert [m["id"] for m in listed] == [fact["id"]]
    found = json.loads(_cli(target, "--json", "search", "Porto", "--user", "alex"))["results"]
    assert found and found[0]["id"] == fact["id"]
    with Memory(target, embedder="hashing") as memory:
        assert memory.get(fact["id"])["memory"] == "Lives in Porto"
        assert [e["event"] for e in memory.history(fact["id"])] == ["ADD"]
        with pytest.raises(ConfigurationError, match="set_policy"):
            memory.tiers.maintain()


def test_every_tier_call_refuses_a_store_that_is_not_under_the_energy_policy(target) -> None:
    """The library refuses what the commands refuse, with the same message: no tier
    configuration is saved into the store, no energy is made up for its memories."""
    calls = {
        "status": lambda t: t.status(), "health": lambda t: t.health(), "test_memories": lambda t: t.test_memories(),
        "delete_test_memories": lambda t: t.delete_test_memories(), "maintain": lambda t: t.maintain(),
        "boost": lambda t: t.boost("x"), "end_conversation": lambda t: t.end_conversation(),
    }
    with Memory(target, embedder="hashing") as memory:
        memory.add("I live in Porto", user_id="alex", infer=False)
        events = memory.stats()["events"]
        alex = memory.scope(user_id="alex")
        tried = [(name, call, alex.tiers) for name, call in calls.items()]
        tried += [(name, call, memory.tiers) for name, call in calls.items() if name != "end_conversation"]
        tried += [("config", lambda t: t.config(), memory.tiers), ("config", lambda t: t.config({"rate_working": 0.9}), memory.tiers)]
        for name, call, tiers in tried:
            with pytest.raises(ConfigurationError) as info:
                call(tiers)
            assert str(info.value).startswith(f"tiers.{name} needs the energy policy, and this store is under the 'default' policy")
        # A test memory is the tiers' too: one that could not be listed or deleted is not made.
        for add in (lambda: memory.add("probe", user_id="alex", infer=False, test=True),
                    lambda: memory.add("probe", user_id="alex", infer=False, metadata={"is_test": True})):
            with pytest.raises(ValidationError, match="test: a test memory belongs to the energy tiers, and this store is under the 'default'"):
                add()
        assert memory.stats()["events"] == events
        assert memory.tiers.wait(0) is True  # nothing to wait for, on any store
    out = _cli(target, "tiers", "config", code=1)
    # The library's refusal, naming the command and only the CLI's way to switch.
    said = str(info.value).replace("tiers.config", "`memorist tiers config`")
    said = said.replace("Memory.set_policy('energy') or `memorist config set policy energy`", "`memorist config set policy energy`")
    assert "Memory.set_policy" not in said and "`memorist config set policy energy`" in said
    assert out == "error: " + said + "\n"


def test_an_energy_store_is_opened_under_energy_without_being_told(target) -> None:
    Memory(target, embedder="hashing", policy="energy").close()
    # `add` with no --policy: the reminder gets its start energy (2.5), not 1.0.
    _cli(target, "add", "Call the dentist", "--user", "alex", "--no-infer", "--metadata", '{"type": "reminder"}')
    with Memory(target, embedder="hashing") as memory:
        assert memory.energy and memory.stats()["policy"] == "energy"
        (item,) = memory.get_all(user_id="alex")["results"]
        assert item["energy_at_last_decay"] == pytest.approx(2.5) and item["tier"] == "working"


def test_opening_under_another_policy_is_a_clear_error(target, monkeypatch) -> None:
    Memory(target, embedder="hashing").close()
    with pytest.raises(ConfigurationError, match=r"under the 'default' policy, not 'energy'.*config set policy energy"):
        Memory(target, embedder="hashing", policy="energy")
    monkeypatch.setenv("MEMORIST_POLICY", "energy")
    with pytest.raises(ConfigurationError, match="not 'energy'"):
        Memory(target, embedder="hashing")


def test_changing_the_policy_is_explicit_logged_and_seen_by_every_process(target) -> None:
    with Memory(target, embedder="hashing") as memory:
        memory.add("I live in Porto", user_id="alex")
        assert memory.set_policy("energy") == {"policy": "energy", "previous": "default"}
        assert memory.energy
        memory.tiers.maintain(user_id="alex")  # allowed now
    out = _cli(target, "--json", "config", "show")
    assert json.loads(out)["policy"] == "energy"
    assert "already under the 'energy' policy" in _cli(target, "config", "set", "policy", "energy")
    _cli(target, "config", "set", "policy", "default")
    _cli(target, "maintain", code=1)
    with Memory(target, embedder="hashing") as memory:
        assert not memory.energy
        changes = [e.payload for e in memory.store.events(None, ops=("store_config",))]
        assert [(c["policy"], c["previous"]) for c in changes] == [("default", None), ("energy", "default"), ("default", "energy")]


def test_reset_keeps_the_policy(target) -> None:
    with Memory(target, embedder="hashing", policy="energy") as memory:
        memory.add("Call the dentist", user_id="alex", infer=False)
        memory.reset()
        assert memory.stats()["events"] == 1
    with Memory(target, embedder="hashing") as memory:
        assert memory.energy


@pytest.mark.parametrize(("fixture", "policy"), [("legacy-0.1.0.db", "default"), ("legacy-0.1.0-energy.db", "energy")])
def test_a_store_older_than_the_record_gets_the_policy_its_history_shows(tmp_path, fixture, policy) -> None:
    path = tmp_path / fixture
    shutil.copy(FIXTURES / fixture, path)
    with Memory(str(path)) as memory:
        assert memory.config.policy == policy
    with Memory(str(path)) as memory:  # recorded: the next process agrees
        assert memory.stats()["policy"] == policy


def test_config_set_opens_the_store_whatever_the_environment_asks(target, monkeypatch) -> None:
    Memory(target, embedder="hashing").close()
    monkeypatch.setenv("MEMORIST_POLICY", "energy")
    _cli(target, "maintain", code=1)
    assert "is now 'energy'" in _cli(target, "config", "set", "policy", "energy")
    _cli(target, "maintain")
