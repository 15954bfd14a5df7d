"""``engram import`` and ``engram export``: JSON lines in and out (see
:mod:`engram.pipelines.transfer` for the format and the rules)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..errors import ImportLineError
from .app import App, CommandError, cli, cli_message, pass_app, scope, scope_options


@cli.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@scope_options
@click.option(
    "--infer/--no-infer",
    default=None,
    help='Default for conversation lines without "infer" [default: --infer].',
)
@pass_app
def import_(app: App, file: Any, user_id: str | None, agent_id: str | None, run_id: str | None, infer: bool | None) -> None:
    """Add memories from FILE, JSON lines ('-' reads stdin).

    \b
    Each line is a memory written by `engram export`:
      {"type": "memory", "id": ..., "memory": "...", "user_id": ..., "created_at": ..., ...}
    restored with its id and dates (a memory the store already holds is updated
    only when the line is newer: importing a file twice changes nothing), or a
    conversation turn:
      {"messages": [{"role": "user", "content": "..."}] | "text": "...",
       "user_id"?, "agent_id"?, "run_id"?, "metadata"?, "timestamp"?, "infer"?}
    added as `engram add` would. Event lines of `export --events` are skipped.

    A line without user_id, agent_id and run_id gets --user/--agent/--run.
    Consecutive verbatim turns of one scope are added in batches. A bad line
    stops the import with an error naming it; the lines before it stay imported.
    """
    lines = list(file)
    memory = app.memory(create=True)
    try:
        with click.progressbar(length=len(lines), label="importing", file=sys.stderr) as bar:
            summary = memory.import_(
                lines, **scope(user_id, agent_id, run_id), infer=infer, progress=lambda n: bar.update(n - bar.pos)
            )
    except ImportLineError as exc:
        done = exc.summary
        click.echo(
            f"{done['added']} memories added and {done['updated']} updated from the lines before line {exc.line}; "
            "they stay in the store.",
            err=True,
        )
        raise CommandError(cli_message(exc)) from exc
    parts = [f"added {summary['added']} memories"]
    labels = (("updated", "updated"), ("deleted", "deleted"), ("unchanged", "already there"), ("skipped", "deleted here since, skipped"))
    parts += [f"{summary[key]} {label}" for key, label in labels if summary[key]]
    note = f"; {summary['events']} event lines not replayed" if summary["events"] else ""
    app.emit(summary, lambda: click.echo(f"Read {summary['lines']} lines; " + ", ".join(parts) + note + "."))


@cli.command()
@scope_options
@click.option("--all", "all_scopes", is_flag=True, help="Every memory of the store, whatever its scope.")
@click.option("--events", is_flag=True, help="Also the event log (turns, adds, updates, deletes, retrievals).")
@click.option("--output", "-o", type=click.File("w", encoding="utf-8", lazy=True), help="Write to this file [default: stdout].")
@pass_app
def export(
    app: App, user_id: str | None, agent_id: str | None, run_id: str | None, all_scopes: bool, events: bool, output: Any
) -> None:
    """Write memories as JSON lines, oldest first; `engram import` restores them.

    The scope's memories (--user/--agent/--run), or the whole store with --all.
    Each line is a whole memory: id, text, scope, dates, metadata, kind, class,
    counters. With --events the event log follows, one event per line.
    With --json and no --output, stdout gets one JSON document, {"results": [...]}.
    """
    if not all_scopes and not any((user_id, agent_id, run_id)):
        raise click.UsageError("name a scope with --user, --agent or --run, or pass --all for the whole store")
    items = app.memory().export(**scope(user_id, agent_id, run_id), all_scopes=all_scopes, events=events)
    if output is None and app.json:
        click.echo(json.dumps({"results": list(items)}, ensure_ascii=False, indent=2))
        return
    stream = output if output is not None else sys.stdout
    n = 0
    for item in items:
        stream.write(json.dumps(item, ensure_ascii=False) + "\n")
        n += 1
    stream.flush()
    where = output.name if output is not None else "stdout"
    if app.json:
        click.echo(json.dumps({"exported": n, "output": where}))
    else:
        click.echo(f"Exported {n} lines to {where}.", err=True)
