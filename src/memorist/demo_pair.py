"""``memorist demo --pair``: the minutes' data flow end to end, with no keys.

Minutes → index → context → evaluation → PAIR, on a small software project:

1. **Minutes**: six weeks of coordination events (assignments, a conflict, a
   failure, successes, hand-offs) are appended to the log and indexed.
2. **Index**: a search finds the past minutes about unit tests.
3. **Context**: the coder's bounded context window for its next task.
4. **Evaluation**: scores every indexed minute; the stale ones leave the index,
   the log keeps them all; a reindex would bring them back.
5. **PAIR**: a fresh evaluator scores the coder's first output against the
   criteria, the gaps are looked up in memory, the output is revised with what
   they suggest, until it meets the criteria.

>>> result = run_pair_demo(None, echo=lambda *a: None, embedder="hashing")
>>> result["pair"]["converged"], result["evaluation"]["in_log"] == result["history_count"]
(True, True)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from .embed.base import Embedder
from .memory import Memory

PROJECT = "apollo"
DAY = 86400.0
# (days ago, event type, agent, note, data, references by index of an earlier entry)
EVENTS: list[tuple[float, str, str, str, dict[str, Any], list[int]]] = [
    (40, "status", "planner", "Kick-off: the team agreed on weekly demos", {}, []),
    (38, "status", "reviewer", "Standup notes: nothing blocking", {}, []),
    (30, "task_completed", "coder", "Shipped the JSON exporter without unit tests; it broke on empty input",
     {"task_id": "t3", "success_criteria_met": 30}, []),
    (12, "task_assigned", "planner", "Gave the CSV importer to coder",
     {"task_id": "t7", "assignment_reasoning": "coder wrote the JSON exporter and knows the data model"}, []),
    (10, "conflict_resolved", "reviewer", "coder and tester disagreed on who writes the tests",
     {"conflict_type": "ownership", "resolution": "the author writes unit tests, the tester adds edge cases"}, [3]),
    (6, "task_completed", "coder", "Writing unit tests first for the exporter fix caught the empty-input bug",
     {"task_id": "t8", "success_criteria_met": 95}, [2]),
    (2, "handoff", "coder", "Handed the CSV importer draft to reviewer; quoted fields still open",
     {"task_id": "t7"}, [3]),
]
TASK = "Write the CSV importer"
CRITERIA = "Handles quoted fields\nHandles empty input\nHas unit tests"
FIRST_OUTPUT = "def load(path): return [line.split(',') for line in open(path)]"


def run_pair_demo(
    db_path: str | None,
    *,
    echo: Callable[[str], Any] = print,
    embedder: str | Embedder | None = None,
    keep: bool = False,
    now: float | None = None,
) -> dict[str, Any]:
    """Run the demo against ``db_path`` (None: a new temporary store, removed at the
    end unless ``keep``). ``echo`` gets each line of the walk-through. Returns what
    each step produced: ``minutes``, ``search``, ``context``, ``evaluation``,
    ``history_count``, ``pair``."""
    if db_path is not None:
        return _run(str(db_path), echo, embedder, now, kept=True)
    folder = tempfile.mkdtemp(prefix="memorist-demo-pair-")
    try:
        return _run(os.path.join(folder, "memorist.db"), echo, embedder, now, kept=keep)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _revise(output: str, improvements: list[dict[str, Any]]) -> str:
    """The agent's revision: one change per gap, guided by the suggestions (a real
    agent would ask its model; the demo writes the change itself)."""
    lines = [output]
    for imp in improvements:
        criterion = imp["gap"]["criterion"] or imp["gap"]["description"]
        lines.append(f"# revised: {criterion.lower()} ({len(imp['memories'])} memories consulted)")
    return "\n".join(lines)


def _run(path: str, echo: Callable[[str], Any], embedder: str | Embedder | None, now: float | None, *, kept: bool) -> dict[str, Any]:
    import time

    at = time.time() if now is None else now
    with Memory(path, embedder=embedder) as memory:
        echo("Memorist demo: the coordination log of agents (minutes) → search index → bounded context → evaluation → "
             "one PAIR round (evaluate, find gaps, retrieve, revise)")
        echo(f"store:    {path}")
        echo(f"embedder: {memory.embedder.name}")
        echo("")
        echo(f"── 1. Minutes: coordination events of project {PROJECT!r}, appended to the log and indexed")
        recorded: list[dict[str, Any]] = []
        for days, kind, agent, note, data, refs in EVENTS:
            minute = memory.minutes.record(kind, agent_id=agent, project_id=PROJECT, memory_note=note, data=data,
                                           context_references=[recorded[i]["id"] for i in refs], now=at - days * DAY)
            recorded.append(minute)
            echo(f"  {minute['id'][:8]}  {days:>4g} days ago  {kind:<17} {agent:<9} → {minute['category']}")

        echo("")
        echo("── 2. Index: memory.minutes.search('unit tests for empty input')")
        found = memory.minutes.search("unit tests for empty input", 3, project_id=PROJECT)
        for item in found:
            echo(f"  {item['id'][:8]}  score {item['score']:.2f}  {item['memory_note']}")

        echo("")
        echo(f"── 3. Context: memory.minutes.build_context('coder', task={TASK!r}, budget_tokens=220)")
        window = memory.minutes.build_context("coder", TASK, budget_tokens=220, project_id=PROJECT, now=at)
        for line in window.text.splitlines():
            echo(f"  │ {line}")
        echo(f"  {window.tokens} of {window.budget_tokens} tokens; cut to fit: {len(window.cut)} "
             f"({', '.join(sorted({c['section'] for c in window.cut})) or 'nothing'})")

        echo("")
        echo("── 4. Evaluation: memory.minutes.evaluate() scores recency, relevance, accuracy, impact")
        report = memory.minutes.evaluate(project_id=PROJECT, now=at)
        for minute in recorded:
            s = report["scores"][minute["id"]]
            gone = next((x for x in report["removed"] if x["id"] == minute["id"]), None)
            verdict = f"pruned ({gone['reason']})" if gone else "kept"
            echo(f"  {minute['id'][:8]}  R {s['recency']:.2f}  Rel {s['relevance']:.2f}  A {s['accuracy']:.2f}  "
                 f"I {s['impact']:.2f}  → {s['composite']:.3f}  {verdict}")
        history = memory.minutes.history(project_id=PROJECT, limit=1000)["minutes"]
        echo(f"  {report['in_log']} in the log, {report['kept_in_index']} kept in the index, {report['pruned']} pruned "
             f"(average score {report['average_score']}); the log still holds all {len(history)}.")

        echo("")
        echo("── 5. PAIR: memory.minutes.pair(task, criteria, output, revise) until 95% of the criteria are met")
        result = memory.minutes.pair(TASK, CRITERIA, FIRST_OUTPUT, _revise, project_id=PROJECT, agent_id="coder")
        for r in result.rounds:
            echo(f"  round {r.round}: score {r.score:g} by {r.evaluator}; gaps: {len(r.gaps)}")
            for imp in r.improvements:
                echo(f"    gap: {imp['gap']['description']}")
                for suggestion in imp["suggestions"][1:3]:
                    echo(f"      → {suggestion}")
        echo(f"  converged: {result.converged} after {len(result.rounds)} rounds (every round is in the log)")
        echo("")
        if kept:
            echo(f"Look around: memorist --db {path} minutes history --project {PROJECT}")
        else:
            echo("The temporary store is removed. Keep one to look around: memorist demo --pair --db demo.db")
        return {
            "db_path": path if kept else None,
            "embedder": memory.embedder.name,
            "project_id": PROJECT,
            "minutes": recorded,
            "search": found,
            "context": window.to_dict(),
            "evaluation": report,
            "history_count": len(history),
            "pair": result.to_dict(),
        }


__all__ = ["run_pair_demo"]
