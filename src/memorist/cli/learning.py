"""The learning loop as commands: ``memorist trajectory start|log|complete|list|show``
and ``memorist reflect``. (``memorist playbook ...`` is in :mod:`.playbook`.)

Trajectories and reflections belong to ``--user`` and/or ``--agent`` (neither: the
agent ``default``); ids may be given by a unique prefix, as tables print them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..validate import time_text
from .app import LIMIT, App, FiniteFloat, cli, echo, json_object, pass_app, read_text, resolve_id, when


def owner_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--user`` and ``--agent``: who a learning command acts for."""
    func = click.option("--agent", "agent_id", metavar="ID", help="Agent id [default: 'default' when no --user].")(func)
    return click.option("--user", "user_id", metavar="ID", help="User id.")(func)


def full_id(app: App, prefix: str, argument: str = "ID") -> str:
    """The trajectory whose id starts with ``prefix`` (given as ``argument``)."""
    return resolve_id(app, prefix, thing="trajectory", argument=argument)


def insights_text(insights: dict[str, list[str]]) -> None:
    for name, symbol in (("successful_patterns", "✓"), ("failure_patterns", "✗"), ("neutral_observations", "○"), ("recommendations", "→")):
        items = insights.get(name) or []
        echo(f"{name.replace('_', ' ')} ({len(items)}):")
        for item in items:
            echo(f"  {symbol} {item}")


def _trajectory_rows(items: list[dict[str, Any]]) -> tuple[list[tuple[str, dict[str, Any]]], list[list[Any]]]:
    columns = [
        ("id", {"no_wrap": True}),
        ("started", {"no_wrap": True}),
        ("status", {"no_wrap": True}),
        ("score", {"justify": "right"}),
        ("type", {"no_wrap": True}),
        ("steps", {"justify": "right"}),
        ("task", {"overflow": "fold", "ratio": 1}),
    ]
    rows = [
        [t["trajectory_id"][:8], when(t["started_at"]), t["status"], t["success_score"], t["task_type"], t["step_count"], t["task_description"]]
        for t in items
    ]
    return columns, rows


@cli.group()
def trajectory() -> None:
    """Record task executions to learn from: start, log steps, complete, list, show."""


@trajectory.command("start")
@click.argument("task", nargs=-1, required=True)
@click.option("--type", "task_type", metavar="TYPE", help="Task type, e.g. api_call.")
@click.option("--parent", "parent", metavar="ID", help="The parent trajectory (multi-step workflows).")
@owner_options
@pass_app
def start(app: App, task: tuple[str, ...], task_type: str | None, parent: str | None, user_id: str | None, agent_id: str | None) -> None:
    """Start a trajectory for TASK (words joined; '-' reads stdin); prints its id."""
    app.arguments = {"task_description": "TASK"}
    memory = app.memory(create=True)
    tid = memory.learning.start_trajectory(read_text(task), task_type, full_id(app, parent, "--parent") if parent else None, user_id=user_id, agent_id=agent_id)
    app.emit({"trajectory_id": tid}, lambda: echo(tid))


@trajectory.command("log")
@click.argument("trajectory_id", metavar="ID")
@click.argument("step_type", metavar="TYPE")
@click.argument("description", nargs=-1, required=True)
@click.option("--metadata", metavar="JSON", callback=json_object, help="A JSON object stored with the step.")
@owner_options
@pass_app
def log(app: App, trajectory_id: str, step_type: str, description: tuple[str, ...], metadata: dict[str, Any] | None,
        user_id: str | None, agent_id: str | None) -> None:
    """Log a step of TYPE (decision, action, observation) to trajectory ID."""
    app.arguments = {"description": "DESCRIPTION", "step_type": "TYPE", "trajectory_id": "ID"}
    tid = full_id(app, trajectory_id)
    app.memory().learning.log_step(tid, step_type, read_text(description), metadata, user_id=user_id, agent_id=agent_id)
    app.emit({"trajectory_id": tid, "logged": step_type}, lambda: echo(f"Logged {step_type} on {tid}."))


@trajectory.command("complete")
@click.argument("trajectory_id", metavar="ID")
@click.option("--status", type=click.Choice(["success", "failure", "partial"]), required=True, help="How the task ended.")
@click.option("--score", type=FiniteFloat(0.0, 1.0), help="Success score, 0 to 1 [default: 1, 0.5 or 0 by status].")
@click.option("--error", "error_message", metavar="TEXT", help="The error, when it failed.")
@click.option("--metrics", metavar="JSON", callback=json_object, help='e.g. \'{"tokens": 1500, "cost_usd": 0.03, "duration_ms": 2340}\'.')
@owner_options
@pass_app
def complete(app: App, trajectory_id: str, status: str, score: float | None, error_message: str | None, metrics: dict[str, Any] | None,
             user_id: str | None, agent_id: str | None) -> None:
    """Complete trajectory ID with its outcome."""
    app.arguments = {"trajectory_id": "ID"}
    done = app.memory().learning.complete_trajectory(full_id(app, trajectory_id), status, score, error_message, metrics, user_id=user_id, agent_id=agent_id)
    stored = "stored" if done["trace_stored"] else "not sampled (steps stay in the log)"
    app.emit(done, lambda: echo(
        f"Completed {done['trajectory_id']}: {done['status']} (score {done['success_score']}); "
        f"{done['step_count']} steps, trace {done['trace_hash'][:12]} {stored}."
    ))


@trajectory.command("list")
@owner_options
@click.option("--status", type=click.Choice(["running", "success", "failure", "partial"]), help="Only this status.")
@click.option("--type", "task_type", metavar="TYPE", help="Only this task type.")
@click.option("--since", metavar="ISO", help="Started at or after (ISO-8601 or epoch seconds).")
@click.option("--until", metavar="ISO", help="Started at or before.")
@click.option("--limit", default=100, show_default=True, type=LIMIT, help="How many.")
@pass_app
def list_(app: App, user_id: str | None, agent_id: str | None, status: str | None, task_type: str | None, since: str | None,
          until: str | None, limit: int) -> None:
    """Trajectories, newest first."""
    items = app.memory().learning.query_trajectories(user_id=user_id, agent_id=agent_id, status=status, task_type=task_type,
                                            since=time_text(since), until=time_text(until), limit=limit)

    def human() -> None:
        if not items:
            echo("No trajectories.")
            return
        app.table(*_trajectory_rows(items))

    app.emit({"results": items}, human)



@trajectory.command("show")
@click.argument("trajectory_id", metavar="ID")
@owner_options
@pass_app
def show(app: App, trajectory_id: str, user_id: str | None, agent_id: str | None) -> None:
    """One trajectory with its steps."""
    app.arguments = {"trajectory_id": "ID"}
    item = app.memory().learning.get_trajectory(full_id(app, trajectory_id), user_id=user_id, agent_id=agent_id)

    def human() -> None:
        app.pairs({k: v for k, v in item.items() if k != "steps"})
        echo("steps:")
        for i, step in enumerate(item.get("steps") or (), 1):
            extra = f" {step['metadata']}" if step.get("metadata") else ""
            echo(f"  {i}. [{step['type']}] {step['description']}{extra}")

    app.emit(item, human)


@cli.command()
@click.argument("trajectory_id", metavar="[ID]", required=False)
@click.option("--batch", is_flag=True, help="Reflect on many trajectories together (patterns across them).")
@owner_options
@click.option("--since", metavar="ISO", help="--batch: trajectories started at or after this time.")
@click.option("--type", "task_type", metavar="TYPE", help="--batch: only this task type.")
@click.option("--min", "min_trajectories", default=5, show_default=True, type=click.IntRange(min=1),
              help="--batch: the fewest trajectories a pattern search needs.")
@pass_app
def reflect(app: App, trajectory_id: str | None, batch: bool, user_id: str | None, agent_id: str | None, since: str | None,
            task_type: str | None, min_trajectories: int) -> None:
    """Reflect on trajectory ID (or, with --batch, on many): what worked, what failed.

    The reflection is stored; its memory id feeds `memorist playbook curate`.
    """
    memory = app.memory()
    if batch == (trajectory_id is not None):
        raise click.UsageError("give a trajectory ID, or --batch (not both)")
    if not batch:
        app.arguments = {"trajectory_id": "ID"}
        result = memory.learning.reflect(full_id(app, trajectory_id), user_id=user_id, agent_id=agent_id)  # type: ignore[arg-type]

        def human() -> None:
            echo(f"Reflection {result['memory_id']} on {result['trajectory_id']} ({result['status']}):")
            insights_text(result["insights"])

        app.emit(result, human)
        return
    results = memory.learning.batch_reflect(agent_id, since, task_type, min_trajectories, user_id=user_id)

    def human_batch() -> None:
        if not results:
            echo(f"No task type has {min_trajectories} completed trajectories yet; nothing to reflect on.")
        for r in results:
            echo(f"Reflection {r['memory_id']}: {r['trajectory_count']} trajectories of type {r['task_type'] or '-'}, "
                       f"success rate {r['success_rate']}")
            insights_text(r["insights"])

    app.emit({"results": results}, human_batch)


__all__ = ["full_id", "insights_text", "owner_options", "reflect", "trajectory"]
