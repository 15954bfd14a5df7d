"""``memorist import`` and ``memorist export``: JSON lines in and out (see
:mod:`memorist.pipelines.transfer` for the format and the rules), or with
``--format memories-json`` one JSON array of memory objects (the minimal ``memories.json``
format; its former name is still accepted)."""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import click

from ..errors import ImportLineError, ValidationError
from .app import (
    IN_MEMORY,
    AliasChoice,
    App,
    CommandError,
    cli,
    file_name,
    pass_app,
    progress,
    read_file,
    scope,
    scope_options,
)

_FORMAT_HELP = (
    "jsonl: JSON lines, Memorist's own format. memories-json: one JSON array of memories "
    "{id, memory, user_id, created_at, updated_at, metadata}, as a memories.json file holds them."
)
#: The format's former name, still accepted (not shown in the help).
_FORMAT_ALIASES = {"etienne": "memories-json"}


def _format_option(func: Any) -> Any:
    return click.option(
        "--format",
        "file_format",
        type=AliasChoice(["jsonl", "memories-json"], _FORMAT_ALIASES),
        default="jsonl",
        show_default=True,
        help=_FORMAT_HELP,
    )(func)


@cli.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@scope_options
@click.option(
    "--infer/--no-infer",
    default=None,
    help='Default for conversation lines without "infer" [default: --infer].',
)
@click.option(
    "--from-line",
    "from_line",
    type=click.IntRange(min=1),
    metavar="N",
    help="Start at line N of FILE: to go on after an import that stopped at a bad line N, once it is fixed.",
)
@_format_option
@pass_app
def import_(
    app: App,
    file: Any,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    infer: bool | None,
    from_line: int | None,
    file_format: str,
) -> None:
    """Add memories from FILE, JSON lines ('-' reads stdin).

    \b
    Each line is a memory written by `memorist export`:
      {"type": "memory", "id": ..., "memory": "...", "user_id": ..., "created_at": ..., ...}
    restored with its id and dates (a memory the store already holds is updated
    only when the line is newer: importing a file twice changes nothing), or a
    conversation turn:
      {"messages": [{"role": "user", "content": "..."}] | "text": "...",
       "user_id"?, "agent_id"?, "run_id"?, "metadata"?, "timestamp"?, "infer"?}
    added as `memorist add` would, or a relation tuple of `export --all`:
      {"type": "relation", "subject": ["agent", "b"], "relation": "viewer",
       "object": ["playbook", "agent_a/default"], "created_at"?, "tenant_id"?}
    written unless the store holds it. Event lines of `export --events` are skipped.

    A line without user_id, agent_id and run_id gets --user/--agent/--run.
    Verbatim turns ("infer": false) are added in batches, one per scope, in the
    file's order. A verbatim turn with a time that the store already holds (same
    scope, text, time, role and speaker) is left alone, as a memory line is: a
    second run adds nothing twice.

    A bad line stops the import with an error naming it: the lines before it
    stay imported, none after it is (a line that fails only as its batch is
    written may find lines of other scopes after it written: the message says
    up to which). Once it is fixed, --from-line N goes on from it (line numbers
    stay the file's).

    With --format memories-json, FILE is a memories.json file, one JSON
    array of {id, memory, user_id, created_at, updated_at?, metadata?}: each
    memory keeps its id and dates (dates without a timezone are UTC), and one
    without user_id gets --user. The whole file is checked first: a bad one
    imports nothing and the error names the memory and field.
    """
    from ..pipelines.transfer import ImportInterrupted

    if file_format == "memories-json":
        if infer is not None:
            raise click.UsageError("--infer/--no-infer is for conversation lines; a memories-json file holds memories")
        if from_line is not None:
            raise click.UsageError("--from-line is for JSON lines; a memories-json file is checked and imported whole")
        _import_memories_json(app, file, scope(user_id, agent_id, run_id))
        return
    # Read whole first: a file that is not UTF-8 imports nothing (split as reading it by lines would).
    lines = io.StringIO(read_file(file)).readlines()
    skip = 0 if from_line is None else from_line - 1
    if skip and skip >= len(lines):
        raise click.UsageError(f"--from-line {from_line}: {file_name(file)} has {len(lines)} lines")
    memory = app.memory(create=True)
    # The model loads now, not inside the first batch: the bar's first estimate is
    # the import's rate, not the model's loading time spread over the file.
    memory.embedder.embed(["warm up"])
    try:
        with progress("importing", len(lines) - skip) as update:

            def report(n: int) -> None:
                update(n - skip)  # the bar counts the lines read from --from-line on

            # Only a bar that is drawn (a terminal) needs progress, and the small
            # first batches that keep its estimate right.
            summary = memory.import_(
                lines, **scope(user_id, agent_id, run_id), infer=infer, progress=report if update.drawn else None, from_line=skip + 1,
            )
    except ImportInterrupted as exc:
        _interrupted(exc, len(lines))
    except ImportLineError as exc:
        done = exc.summary
        counts = f"{done['added']} memories added and {done['updated']} updated"
        if exc.later is None:
            kept = f"{counts} from the lines before line {exc.line}; they stay in the store, and no line after it was imported."
        else:  # another scope's batch, with lines after it, was written before it failed
            kept = (
                f"{counts} from the lines before line {exc.line} and from lines of other scopes after it, up to line "
                f"{exc.later}, written before it failed; they stay in the store (going on from line {exc.line} leaves "
                "those with a time alone, and adds those without one again)."
            )
        click.echo(
            f"{kept} Once line {exc.line} is fixed, run the import again with --from-line {exc.line} to go on from it.",
            err=True,
        )
        # Not cli_message: the message names the line's fields (user_id), not flags.
        raise CommandError(str(exc) + _import_hint(exc, lines, scope(user_id, agent_id, run_id))) from exc
    parts = [f"added {summary['added']} memories"]
    labels = (("updated", "updated"), ("deleted", "deleted"), ("unchanged", "already there"))
    parts += [f"{summary[key]} {label}" for key, label in labels if summary[key]]
    parts += _skipped(summary)
    if summary.get("relations"):
        parts.append(f"{summary['relations']} relation tuples")
    note = f"; {summary['events']} event lines not replayed" if summary["events"] else ""
    start = f" from line {from_line}" if skip else ""
    app.emit(summary, lambda: click.echo(f"Read {summary['lines']} lines{start}; " + ", ".join(parts) + note + "."))


def _skipped(summary: dict[str, Any]) -> list[str]:
    """The lines skipped, by why: ``skipped`` also counts the playbook headers and
    versions that joined a playbook of the same name (``joined``), which nothing deleted."""
    joined = summary.get("joined", 0)
    deleted = summary["skipped"] - joined
    parts = [f"{deleted} deleted here since, skipped"] if deleted else []
    if joined:
        parts.append(f"{joined} joined the playbook of that name already here")
    return parts


def _interrupted(exc: Any, total: int) -> None:
    """Ctrl-C: what was written, and the --from-line that goes on from there; exit 130
    (as a shell reports a command SIGINT ended)."""
    done = exc.summary
    counts = f"{done['added']} memories added and {done['updated']} updated"
    if exc.resume > total:
        click.echo(f"Interrupted: {counts}; every line of the file was imported.", err=True)
    else:
        kept = f"{counts} from the lines before line {exc.resume}"
        if exc.later is not None:
            kept += (
                f" and from lines of other scopes after it, up to line {exc.later} (going on from line {exc.resume} "
                "leaves those with a time alone, and adds those without one again)"
            )
        click.echo(
            f"Interrupted: {kept}; they stay in the store. Run the import again with --from-line {exc.resume} to go on from it.",
            err=True,
        )
    click.get_current_context().exit(130)


def _import_hint(exc: ImportLineError, lines: list[str], ids: dict[str, str | None]) -> str:
    """What to do about an import error, when the file or the flags say more than the line."""
    if "one of user_id, agent_id or run_id" in str(exc) and not any(ids.values()):
        return " (give the line one, or give every line without one a default with --user, --agent or --run)"
    first = next((i for i, line in enumerate(lines, 1) if line.strip()), None)
    if exc.line == first and lines[first - 1].lstrip("\ufeff \t").startswith("["):
        return "; it looks like a memories.json file (one JSON array of memories): add --format memories-json"
    return ""


def _import_memories_json(app: App, file: Any, ids: dict[str, str | None]) -> None:
    from ..config import MemoryConfig
    from ..pipelines.transfer import check_memories_json_ids, memories_json_items

    name, text = file_name(file), read_file(file)
    limits = MemoryConfig()
    try:
        # Checked whole before the store is opened: a bad file imports (and creates) nothing.
        items = memories_json_items(
            text.removeprefix("\ufeff"),
            defaults=ids,
            max_chars=limits.max_message_chars,
            max_metadata_depth=limits.max_metadata_depth,
            max_metadata_bytes=limits.max_metadata_bytes,
        )
    except ValidationError as exc:
        # Not cli_message: the messages quote the file's keys (user_id), not flags.
        detail = str(exc).removeprefix("file: ") if exc.field == "file" else str(exc)
        hint = " (give one with --user, --agent or --run)" if detail.endswith("no default scope was given") else ""
        raise CommandError(f"{name}: {detail}{hint}") from exc
    memory = app.memory(create=True)
    try:
        check_memories_json_ids(memory.store, items, memory.config.tenant_id)
        summary = memory.import_(items, **ids)
    except ImportLineError as exc:
        done = exc.summary
        click.echo(f"{done['added']} memories added and {done['updated']} updated before it; they stay in the store.", err=True)
        raise CommandError(f"{name}: memories[{exc.line - 1}]: {str(exc).split(': ', 1)[-1]}") from exc
    except ValidationError as exc:
        raise CommandError(f"{name}: {exc}") from exc
    parts = [f"added {summary['added']} memories"]
    labels = (("updated", "updated"), ("unchanged", "already there"))
    parts += [f"{summary[key]} {label}" for key, label in labels if summary[key]]
    parts += _skipped(summary)
    read = f"{len(items)} {'memory' if len(items) == 1 else 'memories'}"
    app.emit(summary, lambda: click.echo(f"Read {read}; " + ", ".join(parts) + "."))


@cli.command()
@scope_options
@click.option("--all", "all_scopes", is_flag=True, help="Every memory of the store, whatever its scope.")
@click.option("--events", is_flag=True, help="Also the event log (turns, adds, updates, deletes, retrievals).")
@click.option("--output", "-o", type=click.File("w", encoding="utf-8", lazy=True), help="Write to this file [default: stdout].")
@_format_option
@pass_app
def export(
    app: App,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    all_scopes: bool,
    events: bool,
    output: Any,
    file_format: str,
) -> None:
    """Write memories as JSON lines, oldest first; `memorist import` restores them.

    The scope's memories (--user/--agent/--run), or the whole store with --all
    (then also its relation tuples, who shares what, one line each).
    Each line is a whole memory: id, text, scope, dates, metadata, kind, class,
    counters. With --events the event log follows, one event per line.
    With --json and no --output, stdout gets one JSON document, {"results": [...]}.

    With --format memories-json, the output is a memories.json file: one JSON
    array of the active memories, oldest first, each {id, memory, user_id,
    created_at, updated_at, metadata}.
    """
    if not all_scopes and not any((user_id, agent_id, run_id)):
        raise click.UsageError("name a scope with --user, --agent or --run, or pass --all for the whole store")
    if file_format == "memories-json" and events:
        raise click.UsageError("--events cannot go in a memories-json file: it holds memories only")
    if output is not None:
        _refuse_store_file(app, output.name)  # before the (lazy) file is opened and emptied
    items = app.memory().export(**scope(user_id, agent_id, run_id), all_scopes=all_scopes, events=events)
    if file_format == "memories-json":
        _export_memories_json(app, items, output)
        return
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


def _refuse_store_file(app: App, name: str) -> None:
    """Refuse an --output that is the store's file or one of SQLite's files beside it
    (as `memorist backup` refuses its DEST): writing the export there would empty the
    store before reading it."""
    import os

    from ..store import sqlite_path, store_kind
    from ..store.sqlite.check import store_file

    if name == "-" or store_kind(app.db) != "sqlite":
        return
    store = os.fspath(sqlite_path(app.db))
    if store == IN_MEMORY:
        return
    target = os.path.abspath(name)
    what = store_file(store, target)
    if what is not None:
        raise CommandError(f"--output: {target} is {what}; name another file")


def _export_memories_json(app: App, items: Any, output: Any) -> None:
    from ..pipelines.transfer import memories_json_memories

    memories = memories_json_memories(items)
    # As a memories.json file is written (JSON.stringify(memories, null, 2)): indented by two.
    text = json.dumps(memories, ensure_ascii=False, indent=2) + "\n"
    stream = output if output is not None else sys.stdout
    stream.write(text)
    stream.flush()
    if output is None:
        return  # stdout holds the one JSON document
    if app.json:
        click.echo(json.dumps({"exported": len(memories), "output": output.name}))
    else:
        click.echo(f"Exported {len(memories)} memories to {output.name}.", err=True)
