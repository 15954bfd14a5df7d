"""Credit by association (policies.learning.credit): what is in failures and not in
successes is harmful, the reverse helpful, what is in both alike neutral; a handful
of runs decides nothing."""

from __future__ import annotations

import random

from memorist.policies.learning import HARMFUL, HELPFUL, NEUTRAL, credit


def _runs(n: int, seed: int = 3) -> list[tuple[bool, list[str]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        taken = [d for d in ("needed", "habit", "harm") if rng.random() < 0.5]
        ok = "needed" in taken and "harm" not in taken
        out.append((ok, taken))
    return out


def test_the_truth_of_a_simulated_world_is_found() -> None:
    # On 200 runs the habit is not decided yet (neither way); on 3000 it is neutral.
    assert credit(_runs(200)) == {"needed": HELPFUL, "harm": HARMFUL}
    assert credit(_runs(3000)) == {"needed": HELPFUL, "habit": NEUTRAL, "harm": HARMFUL}


def test_a_few_runs_decide_nothing() -> None:
    assert credit(_runs(200)[:3]) == {}
    assert credit([(True, ["a"])] * 50) == {}  # no failure: nothing to compare with
    assert "rare" not in credit([*_runs(200), (False, ["rare"])])


def test_a_step_every_run_takes_is_neutral() -> None:
    runs = [(ok, [*taken, "Always"]) for ok, taken in _runs(200)]
    assert credit(runs)["always"] == NEUTRAL
