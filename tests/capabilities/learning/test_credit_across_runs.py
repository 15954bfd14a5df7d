"""The heuristic reflector blames the right step: across trajectories, a habit that
makes no difference ends neutral, a harmful step harmful, a needed one helpful, and an
error message is never a strategy (through execute_with_learning, on each backend)."""

from __future__ import annotations

import random

from memorist import Memory


def test_credit_follows_the_outcomes_not_the_step_before_an_error(backend) -> None:
    rng = random.Random(5)
    with Memory(backend.target, embedder="hashing") as memory:
        for _ in range(80):
            habit, needed, harm = (rng.random() < 0.5 for _ in range(3))

            def task(run, habit=habit, needed=needed, harm=harm):
                if habit:
                    run.decision("Log every response body")
                run.action("GET /records")
                if harm:
                    run.decision("Retry immediately without waiting")
                    run.observation("Error: HTTP 429 Too Many Requests; locked out")
                    return None, "failure"
                if not needed:
                    run.observation("Error: only the first page came back")
                    return None, "failure"
                run.decision("Follow the next_page cursor")
                run.observation("all pages fetched", ok=True)
                return "ok", "success"

            memory.learning.execute_with_learning(task, "Fetch the records", task_type="fetch", playbook_name="p", agent_id="bot")
        playbook = memory.learning.get_playbook("p", agent_id="bot")
        by = {c: [s["pattern"] for s in playbook["strategies"][c]] for c in ("helpful", "harmful", "neutral")}
        assert by["helpful"] == ["Follow the next_page cursor"]
        assert by["harmful"] == ["Retry immediately without waiting"]
        assert by["neutral"] == ["Log every response body"]
        assert not any("Error" in p for ps in by.values() for p in ps)
