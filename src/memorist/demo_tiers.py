"""``memorist demo --tiers``: the energy tiers end to end, with no keys.

An agent keeps memories of a user under the energy policy. Over one simulated day
(every call takes ``now``, so nothing waits) memories are created with their start
energies, used and boosted; maintenance runs decay them, promote what was used to
short- and long-term, and expire what was not, which stays in the history. Test
memories live beside the real ones without touching them, a test-only run works
on them alone, and the end of the conversation runs maintenance in the background.

>>> result = run_tiers_demo(None, echo=lambda *a: None, embedder="hashing")
>>> result["status"]["tiers"]["long_term"]["count"], result["status"]["expired"]
(1, 2)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from .embed.base import Embedder
from .memory import Memory

USER_ID = "milo"
HOUR = 3600.0
MEMORIES = [
    ("Small commits make code reviews faster", "insight"),
    ("The deploy script needs the VPN", "learning"),
    ("Renew the TLS certificate before March", "reminder"),
    ("Had pasta for lunch", None),
]


def run_tiers_demo(
    db_path: str | None,
    *,
    echo: Callable[[str], Any] = print,
    embedder: str | Embedder | None = None,
    keep: bool = False,
) -> dict[str, Any]:
    """Run the energy-tiers demo against ``db_path`` (None: a temporary store,
    removed at the end unless ``keep``). ``echo`` receives each line. Returns the
    runs, the final ``status`` and ``health``, and the ``log`` lines written."""
    if db_path is not None:
        return _run(str(db_path), echo, embedder, kept=True)
    folder = tempfile.mkdtemp(prefix="memorist-tiers-demo-")
    try:
        return _run(os.path.join(folder, "memorist.db"), echo, embedder, kept=keep)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _table(echo: Callable[[str], Any], items: list[dict[str, Any]]) -> None:
    for item in items:
        echo(f"    {item['tier']:<10} energy {item['energy']:>6.3f}  {item['memory']}")


def _run_line(echo: Callable[[str], Any], hour: float, result: dict[str, Any]) -> None:
    echo(f"  maintain(now=hour {hour:g}) → {result['decayed']} decayed, {result['expired']} expired, "
         f"{result['promoted']} promoted")
    for r in result["results"]:
        if r["action"] == "promote":
            echo(f"    ↑ {r['energy']:.3f} > threshold: {r['tier']} → {r['to_tier']} (new id {r['promoted_to'][:8]}, original archived)")
        elif r["action"] == "expire":
            echo(f"    ✗ {r['energy_before']:.4f} → {r['energy']:.4f} < 0.1: expired (hidden, kept in history)")


def _run(path: str, echo: Callable[[str], Any], embedder: str | Embedder | None, *, kept: bool) -> dict[str, Any]:
    # The story's hours 0-8 end at the current hour: a run or a boost never dated ahead
    # of the clock (the tiers refuse that), so the demo's store stays true to time.
    t0 = float(int(time.time() // HOUR) * HOUR) - 8 * HOUR

    def at(hour: float) -> float:
        return t0 + hour * HOUR

    runs: list[dict[str, Any]] = []
    echo("Memorist demo: energy tiers — working → short-term → long-term, and forgetting")
    echo(f"store: {path}")
    with Memory(path, embedder=embedder, policy="energy") as memory:
        config = memory.tiers.config()["config"]
        echo(f"rates per hour: working {config['rate_working']}, short_term {config['rate_short_term']}, "
             f"long_term {config['rate_long_term']}; promote above {config['working_to_short_term']} / "
             f"{config['short_term_to_long_term']}; expire below {config['expire_below']}")
        echo("")
        echo("── hour 0: four memories, their start energy by type")
        ids: dict[str, str] = {}
        for text, kind in MEMORIES:
            added = memory.add(text, user_id=USER_ID, infer=False, metadata={"type": kind} if kind else None, timestamp=at(0))
            ids[text] = added["results"][0]["id"]
        _table(echo, memory.get_all(user_id=USER_ID)["results"])
        echo("  and two test memories, kept apart from the real ones:")
        memory.add("test: near expiry", user_id=USER_ID, infer=False, test=True, metadata={"energy": 0.05}, timestamp=at(0))
        memory.add("test: ready for promotion", user_id=USER_ID, infer=False, test=True, metadata={"energy": 2.5}, timestamp=at(0))
        echo(f"    get_all sees {len(memory.get_all(user_id=USER_ID)['results'])} memories; "
             f"test_memories() lists {len(memory.tiers.test_memories()['results'])}")
        echo("")

        echo("── hour 1: the user asks about code reviews twice; the reminder is boosted twice")
        for _ in range(2):
            memory.search("how do I make code reviews faster", user_id=USER_ID, limit=1)
        reminder = ids["Renew the TLS certificate before March"]
        for _ in range(2):
            boosted = memory.tiers.boost(reminder, now=at(1))
        echo(f"  boost() x2 → the reminder: energy {boosted['energy']:.3f} (decayed to hour 1, then +1.0 each)")
        runs.append(memory.tiers.maintain(now=at(1)))
        _run_line(echo, 1, runs[-1])
        echo("    (each search that returned the insight added 0.5: use boosts)")
        echo("")

        echo("── hour 6: nobody came back to the rest")
        runs.append(memory.tiers.maintain(now=at(6)))
        _run_line(echo, 6, runs[-1])
        found = memory.search("deploy script VPN", user_id=USER_ID, limit=3)["results"]
        echo(f"  search('deploy script VPN') → {[r['memory'] for r in found] or 'nothing'}")
        history = memory.history(ids["The deploy script needs the VPN"])
        echo(f"  history of the expired learning: {' → '.join(h['event'] for h in history)}")
        echo("")

        echo("── hour 7: the reminder matters: three boosts, then a run")
        for _ in range(3):
            boosted = memory.tiers.boost(reminder, now=at(7))
        echo(f"  boost() x3 → energy {boosted['energy']:.3f} in {boosted['tier']} (the old id reaches the promoted memory)")
        runs.append(memory.tiers.maintain(now=at(7)))
        _run_line(echo, 7, runs[-1])
        echo("")

        echo("── the test memories, alone (maintain(test_only=True)); the real ones are not touched")
        tests = memory.tiers.maintain(now=at(0), test_only=True)
        runs.append(tests)
        _run_line(echo, 0, tests)
        echo("")

        echo("── hour 8: the conversation ends; maintenance runs in the background")
        scheduled = memory.tiers.end_conversation(user_id=USER_ID, now=at(8))
        echo(f"  end_conversation() → scheduled={scheduled['scheduled']} (returned at once)")
        memory.tiers.wait(timeout=30)
        status = memory.tiers.status(now=at(8))
        health = memory.tiers.health(now=at(8))
        echo("")
        echo("── status")
        for name, tier in status["tiers"].items():
            echo(f"    {name:<10} {tier['count']} memories")
        echo(f"    archived   {status['archived']} (promoted originals)   expired {status['expired']}   "
             f"test memories {status['test_memories']}")
        _table(echo, memory.get_all(user_id=USER_ID)["results"])
        echo(f"  health: {health['status']}")
        log_path = memory.tiers.engine.log_path
    lines: list[str] = []
    if log_path and os.path.exists(log_path):
        with open(log_path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        echo(f"  maintenance log: {len(lines)} JSON lines in {log_path}")
    echo("")
    if kept:
        echo(f"Look around: memorist tiers status --db {path}; memorist tiers plot --db {path} --out tiers.png")
    else:
        echo("The temporary store is removed. Keep one: memorist demo --tiers --db tiers.db")
    return {"db_path": path if kept else None, "runs": runs, "status": status, "health": health, "log": lines}


__all__ = ["run_tiers_demo"]
