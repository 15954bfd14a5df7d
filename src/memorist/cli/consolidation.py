"""``memorist consolidate`` (merge similar memories of low importance, keeping every
name, number and date) and ``memorist rollback`` (undo a merge or a reconciliation)."""

from __future__ import annotations

from typing import Any

import click

from ..errors import NotFoundError
from .app import App, CommandError, FiniteFloat, cli, pass_app, scope, scope_options

#: What ``rollback`` can undo, as its help and its refusals say it.
_REVERSIBLE = (
    "a consolidation run, an UPDATE or DELETE that `memorist add` made when it reconciled new facts "
    "with stored ones, a curation or merge of a playbook's strategies, an evaluation of the minutes"
)


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
    """Undo a change the engine made on its own: a consolidation run (its run id), or
    the operation of event EVENT_OR_RUN_ID (its seq, as `memorist events` shows it):
    an UPDATE or DELETE that `memorist add` made when it reconciled new facts with
    stored ones, a curation or merge of a playbook's strategies, or an evaluation of
    the minutes. The memories come back exactly as they were and what it made is
    deleted. A direct `memorist update` or `memorist delete` cannot be rolled back
    (`memorist history ID` shows what a memory was)."""
    ids = scope(user_id, agent_id, run_id)
    memory = app.memory()
    try:
        result: Any = memory.rollback(event_or_run_id, **ids)
    except NotFoundError as exc:
        raise CommandError(_not_reversible(memory, event_or_run_id, ids) or str(exc)) from exc

    def human() -> None:
        click.echo(
            f"rolled back {result['op']} {result['rolled_back']}: restored {len(result['restored'])} memories, "
            f"retired {len(result['retired'])} (event {result['rollback_seq']})"
        )

    app.emit(result, human)


def _not_reversible(memory: Any, target: str, ids: dict[str, str | None]) -> str | None:
    """Why event ``target`` of the log (of the scope ``ids``) cannot be rolled back; None
    when there is no such event (the engine's not-found says so)."""
    if not target.strip().isdigit():
        return None
    seq = int(target)
    found = memory.store.events(memory._optional_scope(**ids), since=seq - 1, limit=1)
    if not found or found[0].seq != seq:
        return None
    item = found[0].to_item()
    event, memory_id, actor = item["event"], item["memory_id"], item["actor"]
    shown = f"; `memorist history {memory_id}` shows what it was" if memory_id and event in ("UPDATE", "DELETE") else ""
    if event in ("UPDATE", "DELETE") and not actor:  # an update or delete call (memorist update, delete, delete-all)
        return f"event {seq} ({event}) was a direct call, which cannot be rolled back: only {_REVERSIBLE} can be{shown}"
    by = f", by the {actor}" if actor else ""
    return f"event {seq} ({event}{by}) cannot be rolled back: only {_REVERSIBLE} can be{shown}"
