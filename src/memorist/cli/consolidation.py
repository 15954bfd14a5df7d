"""``memorist consolidate`` (merge similar memories of low importance, keeping every
name, number and date) and ``memorist rollback`` (undo a merge or a reconciliation)."""

from __future__ import annotations

from typing import Any

import click

from .app import App, FiniteFloat, cli, pass_app, scope, scope_options


@cli.command()
@click.option("--user", "user_id", metavar="ID", help="User id.")
@click.option("--agent", "agent_id", metavar="ID", help="Agent id.")
@click.option("--type", "memory_type", metavar="KIND", help="Only memories of this kind: fact, preference, experience...")
@click.option("--scope", type=click.Choice(["user", "agent"]), help="user: every memory of --user (any agent); agent: of --agent [default: exactly the ids].")
@click.option("--min-importance", type=FiniteFloat(0.0, 1.0), default=0.5, show_default=True, metavar="X",
              help="Only memories below this importance are merged.")
@click.option("--importance-threshold", type=FiniteFloat(0.0, 1.0), default=0.8, show_default=True, metavar="X",
              help="Memories at or above it are never touched (with --preserve).")
@click.option("--preserve/--no-preserve", default=True, show_default=True, help="Never touch high-importance memories.")
@click.option("--dry-run", is_flag=True, help="Show what would be merged; change nothing.")
@pass_app
def consolidate(app: App, user_id: str | None, agent_id: str | None, memory_type: str | None, scope: str | None,
                min_importance: float, importance_threshold: float, preserve: bool, dry_run: bool) -> None:
    """Merge similar memories of low importance into one each, keeping every name,
    number and date. The run id it prints undoes it: `memorist rollback RUN_ID`."""
    report = app.memory().learning.consolidate(
        memory_type, scope, min_importance, preserve, importance_threshold, dry_run=dry_run, user_id=user_id, agent_id=agent_id
    )

    def human() -> None:
        if report["results"]:
            app.table(
                [("id", {"no_wrap": True}), ("from", {"justify": "right"}), ("memory", {"overflow": "fold", "ratio": 1})],
                [[(r["id"] or "-")[:8], len(r["consolidated_from"]), r["memory"]] for r in report["results"]],
            )
        for rejected in report["rejected"]:
            click.echo(f"kept {len(rejected['consolidated_from'])} memories: {rejected['reason']}")
        verb = "would merge" if dry_run else "merged"
        click.echo(
            f"{verb} {report['merged_count']} memories into {report['consolidated_count']}; "
            f"preserved {report['preserved_count']} for their importance; {report['space_saved_bytes']} bytes saved"
            + (f"; {report['remaining']} left for another run" if report["remaining"] else "")
        )
        if report["run_id"] and report["consolidated_count"]:
            click.echo(f"run {report['run_id']} (undo: memorist rollback {report['run_id']})")

    app.emit(report, human)


@cli.command()
@click.argument("event_or_run_id")
@scope_options
@pass_app
def rollback(app: App, event_or_run_id: str, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
    """Undo a consolidation run (its run id), or the merge, update or delete of the
    event EVENT_OR_RUN_ID (its seq, as `memorist events` shows it): the memories come
    back exactly as they were and what it made is deleted."""
    result: Any = app.memory().rollback(event_or_run_id, **scope(user_id, agent_id, run_id))

    def human() -> None:
        click.echo(
            f"rolled back {result['op']} {result['rolled_back']}: restored {len(result['restored'])} memories, "
            f"retired {len(result['retired'])} (event {result['rollback_seq']})"
        )

    app.emit(result, human)
