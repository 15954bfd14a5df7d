"""``memorist bench learn``: does the learning loop make an agent better?

A seeded family of tasks against a simulated API: fetch every record of a
resource. Each task draws the service's behaviour — pagination (``next_page``
cursor), rate limiting (HTTP 429 with ``Retry-After``), transient HTTP 503s, an
access token that expires mid-task (HTTP 401) — and succeeds only when the agent
handles every one of them and does nothing harmful (retrying at once without
waiting locks the client out on any error; asking for ``page_size=1000`` is
refused outright). Two more habits make no difference either way.

The agent knows eight strategies by name. It applies what its playbook's ✓ helpful
entries say (confidence >= 0.5), avoids what its ✗ harmful entries say, and tries
each strategy the playbook says nothing about with probability 0.3. It logs each
strategy as a ``decision`` step when it uses it, service errors as observations.

Both runs see the same tasks and draw the same exploration (one seed):

- **learning**: every task through :meth:`memorist.Memory.execute_with_learning`
  (reflect and curate after each, the heuristic reflector: no model);
- **without**: the same tasks through ``execute_with_learning(auto_reflect=False,
  auto_curate=False)`` — recorded, never learned from, so the playbook stays empty.

Reported: the success rate per block of episodes for both; for the learning run the
playbook's size, its near-duplicate pairs (cosine >= 0.85 within a category), the
versions made and kept (default retention; the simulated clock puts one task a day)
and the trajectories kept (30 days); and whether each strategy's learned category
matches the simulator's truth, with the precision and recall of ✓ and ✗ — a figure
that fails when a habit is marked ✓, an error message becomes a strategy, or a
harmful step is missed.

Two worlds: ``basic`` (the eight strategies above) and ``extended``: two more habits
that make no difference, and a harmful step whose effect comes late ("Write every
record in one transaction at the end": decided first, the run fails at its very end
after every step went well), so only the runs' outcomes, not the step before an
error, can blame it.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..embed.base import Embedder
from ..policies.learning import DAY

# The strategies the agent can use, by name, as it logs them.
BACKOFF = "Back off and honour Retry-After when the API answers HTTP 429"
RETRY = "Retry transient HTTP 503 errors with exponential backoff"
PAGINATE = "Follow the next_page cursor until the last page"
REFRESH = "Refresh the access token when the API answers HTTP 401"
HAMMER = "Retry immediately without waiting after an error"
BIG_PAGE = "Request page_size=1000 to fetch everything in one call"
LOG_BODIES = "Log every response body"
TIMEOUT = "Set a 30 second timeout on every request"
STRATEGIES = (BACKOFF, RETRY, PAGINATE, REFRESH, HAMMER, BIG_PAGE, LOG_BODIES, TIMEOUT)
# The extended world: two more habits that make no difference, and a harmful step
# whose effect comes late (decided at the start, the run fails at its very end after
# every step went well), so no step directly before an error points at it.
USER_AGENT = "Send a descriptive User-Agent header"
SORT = "Sort the records by id before saving them"
ONE_COMMIT = "Write every record in one transaction at the end"
EXTENDED = (*STRATEGIES, USER_AGENT, SORT, ONE_COMMIT)
#: What each strategy truly is in each world (the simulator's truth).
TRUTH = {
    "basic": {**{x: "helpful" for x in (BACKOFF, RETRY, PAGINATE, REFRESH)}, **{x: "harmful" for x in (HAMMER, BIG_PAGE)},
              **{x: "neutral" for x in (LOG_BODIES, TIMEOUT)}},
}
TRUTH["extended"] = {**TRUTH["basic"], USER_AGENT: "neutral", SORT: "neutral", ONE_COMMIT: "harmful"}
WORLDS = ("basic", "extended")
#: What each condition of a task needs, and the error the service gives without it.
NEEDS = {
    "paginated": (PAGINATE, "Error: only the first page came back; records are missing"),
    "rate_limited": (BACKOFF, "Error: HTTP 429 Too Many Requests; the task gave up"),
    "transient": (RETRY, "Error: HTTP 503 Service Unavailable; the task gave up"),
    "auth_expiry": (REFRESH, "Error: HTTP 401 Unauthorized; the access token expired"),
}
ODDS = {"paginated": 0.7, "rate_limited": 0.5, "transient": 0.4, "auth_expiry": 0.3}
EXPLORE = 0.3
APPLY = 0.5
NEAR_DUPLICATE = 0.85
AGENT = "api-agent"
PLAYBOOK = "api_client"


@dataclass(frozen=True, slots=True)
class Task:
    """One task: which conditions the simulated service shows, in the order they happen."""

    number: int
    conditions: tuple[str, ...]

    @property
    def description(self) -> str:
        return f"Fetch every record of resource {self.number % 7} from the partner API"


def tasks(n: int, seed: int) -> list[Task]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        conditions = [c for c, p in ODDS.items() if rng.random() < p]
        rng.shuffle(conditions)
        out.append(Task(i, tuple(conditions)))
    return out


def _phrase(rng: random.Random, strategy: str) -> str:
    """How the agent words a decision: sometimes "Decided to ..." (the same strategy)."""
    return f"Decided to {strategy[0].lower()}{strategy[1:]}" if rng.random() < 0.3 else strategy


class Agent:
    """The simulated agent: chooses strategies from its playbook and exploration, then runs the task."""

    def __init__(self, seed: int, world: str = "basic") -> None:
        self.rng = random.Random(seed)
        self.world = world
        self.strategies = EXTENDED if world == "extended" else STRATEGIES

    def choose(self, playbook: dict[str, Any]) -> set[str]:
        helpful = {s["pattern"] for s in playbook["strategies"]["helpful"] if s["confidence"] >= APPLY}
        harmful = {s["pattern"] for s in playbook["strategies"]["harmful"] if s["confidence"] >= APPLY}
        chosen = set()
        for strategy in self.strategies:
            draw = self.rng.random()  # drawn for every strategy: both runs stay in step
            if strategy in harmful:
                continue
            if strategy in helpful or draw < EXPLORE:
                chosen.add(strategy)
        return chosen

    def run(self, task: Task, run: Any) -> tuple[Any, str]:
        """Perform ``task`` with the strategies chosen from ``run.playbook``; log as it goes."""
        chosen = self.choose(run.playbook)
        for habit in (TIMEOUT, LOG_BODIES, USER_AGENT, SORT, ONE_COMMIT):
            if habit in chosen:
                run.decision(_phrase(self.rng, habit))
        if BIG_PAGE in chosen:
            run.decision(_phrase(self.rng, BIG_PAGE))
            run.action("GET /records?page_size=1000")
            run.observation("Error: HTTP 400 Bad Request: page_size must be at most 100")
            return None, "failure"
        run.action("GET /records")
        run.observation("HTTP 200: the first page came back", ok=True)
        fetched = 1
        for condition in task.conditions:
            needed, error = NEEDS[condition]
            if condition != "paginated" and HAMMER in chosen:
                run.observation(f"The API answered HTTP {'429' if condition == 'rate_limited' else '503' if condition == 'transient' else '401'}", handled=True)
                run.decision(_phrase(self.rng, HAMMER))
                run.observation("Error: the API locked the client out after immediate retries")
                return None, "failure"
            if needed not in chosen:
                run.observation(error)
                return None, "failure"
            run.decision(_phrase(self.rng, needed))
            run.observation(f"{condition.replace('_', ' ')} handled", ok=True)
            fetched += 1
        if ONE_COMMIT in chosen and task.conditions:
            # The late effect: every page came back, then the one big write times out.
            run.action(f"INSERT {fetched * 100} records")
            run.observation("Error: the write timed out after 30 s; nothing was saved")
            return None, "failure"
        return {"pages": fetched}, "success"


def _near_duplicates(memory: Any, playbook: dict[str, Any]) -> int:
    entries = [e for cat in ("helpful", "harmful", "neutral") for e in playbook["strategies"][cat]]
    if len(entries) < 2:
        return 0
    vectors = memory.embedder.embed([e["pattern"] for e in entries])
    sims = np.asarray(vectors) @ np.asarray(vectors).T
    return sum(
        1
        for i in range(len(entries))
        for j in range(i + 1, len(entries))
        if entries[i]["category"] == entries[j]["category"] and float(sims[i, j]) >= NEAR_DUPLICATE
    )


def score_categories(playbook: dict[str, Any], truth: dict[str, str]) -> dict[str, Any]:
    """The learned category of each strategy of the simulator against its truth (one
    the playbook does not hold counts as ○ neutral: the agent neither applies nor
    avoids it), and the precision and recall of ✓ and ✗ (a list with nothing
    predicted has precision 1.0)."""
    learned = {s["pattern"]: cat for cat in ("helpful", "harmful", "neutral") for s in playbook["strategies"][cat]}
    rows = [{"strategy": name, "truth": truth[name], "learned": learned.get(name, "neutral"), "in_playbook": name in learned}
            for name in truth]
    out: dict[str, Any] = {"categories": rows, "category_accuracy": round(sum(r["truth"] == r["learned"] for r in rows) / len(rows), 3)}
    for cat in ("helpful", "harmful"):
        said = [r for r in rows if r["learned"] == cat]
        real = [r for r in rows if r["truth"] == cat]
        hits = sum(1 for r in said if r["truth"] == cat)
        out[f"precision_{cat}"] = round(hits / len(said), 3) if said else 1.0
        out[f"recall_{cat}"] = round(hits / len(real), 3) if real else 1.0
    # What the playbook holds beyond the simulator's strategies (an error message taken for one).
    out["foreign"] = sorted(p for p in learned if p not in truth)
    return out


def _one_run(path: str, embedder: Embedder, task_list: list[Task], *, learning: bool, seed: int, block: int,
             world: str = "basic") -> dict[str, Any]:
    from ..memory import Memory

    start = 1_700_000_000.0
    with Memory(path, embedder=embedder) as memory:
        clock = {"now": start}
        memory.learning.clock = lambda: clock["now"]
        agent = Agent(seed, world)
        outcomes: list[int] = []
        for task in task_list:
            clock["now"] = start + task.number * DAY
            _result, tid = memory.learning.execute_with_learning(
                lambda run, task=task: agent.run(task, run),
                task.description,
                task_type="api_fetch",
                auto_reflect=learning,
                auto_curate=learning,
                playbook_name=PLAYBOOK,
                agent_id=AGENT,
            )
            outcomes.append(1 if memory.learning.get_trajectory(tid, agent_id=AGENT)["status"] == "success" else 0)
        blocks = [round(sum(outcomes[i : i + block]) / len(outcomes[i : i + block]), 3) for i in range(0, len(outcomes), block)]
        out: dict[str, Any] = {"success_by_block": blocks, "success_rate": round(sum(outcomes) / len(outcomes), 3) if outcomes else 0.0}
        if learning:
            playbook = memory.learning.get_playbook(PLAYBOOK, agent_id=AGENT)
            versions = memory.learning.list_playbook_versions(PLAYBOOK, agent_id=AGENT)
            memory.learning.prune_trajectories(agent_id=AGENT)
            out.update(
                playbook_size=playbook["size"],
                near_duplicates=_near_duplicates(memory, playbook),
                versions_kept=len(versions),
                versions_made=playbook["version"],
                trajectories_kept=len(memory.learning.query_trajectories(agent_id=AGENT, limit=1_000_000)),
                helpful=[(s["pattern"], s["confidence"], s["evidence_count"]) for s in playbook["strategies"]["helpful"]],
                harmful=[(s["pattern"], s["confidence"], s["evidence_count"]) for s in playbook["strategies"]["harmful"]],
                **score_categories(playbook, TRUTH[world]),
            )
        return out


def run(
    *,
    episodes: int = 200,
    block: int = 20,
    seed: int = 7,
    embedder: Embedder | None = None,
    progress: Callable[[str], None] | None = None,
    world: str = "basic",
) -> dict[str, Any]:
    """Both runs in ``world`` (``basic``: the eight strategies; ``extended``: two more
    habits and a harmful step with a late effect); returns ``{"episodes", "block",
    "seed", "world", "learning": {...}, "without": {...}}``."""
    from ..embed import resolve_embedder

    if world not in WORLDS:
        raise ValueError(f"world must be one of {', '.join(WORLDS)}, got {world!r}")
    embedder = embedder or resolve_embedder("hashing")
    task_list = tasks(episodes, seed)
    out: dict[str, Any] = {"episodes": episodes, "block": block, "seed": seed, "world": world, "embedder": embedder.name}
    with tempfile.TemporaryDirectory(prefix="memorist-learn-") as folder:
        for name, learning in (("learning", True), ("without", False)):
            started = time.perf_counter()
            out[name] = _one_run(str(Path(folder) / f"{name}.db"), embedder, task_list, learning=learning, seed=seed, block=block,
                                 world=world)
            if progress:
                progress(f"{world}/{name}: {time.perf_counter() - started:.1f} s")
    return out


def format_table(result: dict[str, Any]) -> str:
    """The success rate per block for both runs, then the learning run's playbook."""
    lr, wo = result["learning"], result["without"]
    block = result["block"]
    lines = ["| episodes | learning | without |", "|---|---:|---:|"]
    for i, (a, b) in enumerate(zip(lr["success_by_block"], wo["success_by_block"], strict=True)):
        lines.append(f"| {i * block + 1}-{min((i + 1) * block, result['episodes'])} | {a:.2f} | {b:.2f} |")
    lines.append(f"| all | {lr['success_rate']:.2f} | {wo['success_rate']:.2f} |")
    lines.append("")
    lines.append(
        f"playbook {PLAYBOOK}: {lr['playbook_size']} strategies, {lr['near_duplicates']} near-duplicate pairs; "
        f"versions kept {lr['versions_kept']} of {lr['versions_made']}; trajectories kept {lr['trajectories_kept']} of {result['episodes']}"
    )
    for symbol, key in (("✓", "helpful"), ("✗", "harmful")):
        for pattern, conf, evidence in lr[key]:
            lines.append(f"  {symbol} {conf:.2f} ({evidence}) {pattern}")
    lines.append("")
    lines.append(f"learned category against the simulator's truth ({result.get('world', 'basic')} world):")
    lines.append("| strategy | truth | learned | match |")
    lines.append("|---|---|---|---|")
    symbols = {"helpful": "✓", "harmful": "✗", "neutral": "○"}
    for row in lr["categories"]:
        learned = symbols[row["learned"]] + ("" if row["in_playbook"] else " (not held)")
        lines.append(f"| {row['strategy']} | {symbols[row['truth']]} | {learned} | {'yes' if row['truth'] == row['learned'] else 'NO'} |")
    lines.append(
        f"category accuracy {lr['category_accuracy']:.2f}; ✓ precision {lr['precision_helpful']:.2f} recall {lr['recall_helpful']:.2f}; "
        f"✗ precision {lr['precision_harmful']:.2f} recall {lr['recall_harmful']:.2f}"
        + (f"; not a strategy of the simulator: {', '.join(lr['foreign'])}" if lr["foreign"] else "")
    )
    return "\n".join(lines)


__all__ = ["EXTENDED", "STRATEGIES", "TRUTH", "WORLDS", "Agent", "Task", "format_table", "run", "score_categories", "tasks"]
