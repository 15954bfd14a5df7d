"""``memorist check`` and ``memorist backup``: is the store whole, and a safe copy of it.

Both work on the file itself (:mod:`memorist.store.sqlite.check`), not through an opened
Memory: ``check`` must report a store that no longer opens, and neither needs the
store's embedder.
"""

from __future__ import annotations

from typing import Any

import click

from .app import App, CommandError, cli, pass_app


@cli.command()
@click.option("--quick", is_flag=True, help="SQLite's quick_check instead of integrity_check (faster; skips matching indexes to tables).")
@pass_app
def check(app: App, quick: bool) -> None:
    """Check the store for damage; exit code 0 when healthy, 1 when not.

    \b
    SQLite's integrity check, then Memorist's own invariants:
      - every active memory is in the full-text index and (once the store has an
        embedder) has one vector of the right size; no index entry lacks its memory;
      - rows decode, texts match their content hashes;
      - the event log: every memory has its 'add' event, sequence numbers are sound;
      - the schema is this Memorist's.
    Read-only: safe while other processes use the store.
    """
    from ..store.sqlite.check import check_store

    if app.db == ":memory:":
        raise CommandError("an in-memory store has nothing to check; name a file with --db")
    report = check_store(app.sqlite_file("memorist check"), quick=quick)

    def human() -> None:
        counts = report["counts"]
        if counts:
            shown = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items())
            click.echo(f"{report['path']}: {shown}.")
        for note in report.get("notes", ()):
            click.echo(f"note: {note}.")
        if report["problems"]:
            app.table(
                [("check", {"no_wrap": True}), ("count", {"justify": "right"}), ("problem", {"overflow": "fold"}), ("examples", {"overflow": "fold"})],
                [[p["check"], p["count"], p["problem"], "\n".join(p["examples"])] for p in report["problems"]],
            )
            total = sum(p["count"] for p in report["problems"])
            kinds = len(report["problems"])
            click.echo(f"DAMAGED: {kinds} kind{'s' if kinds > 1 else ''} of problem ({total} in all) in {report['path']}.", err=True)
        else:
            kind = "quick_check" if quick else "integrity_check"
            click.echo(f"healthy: SQLite's {kind} and Memorist's invariants found no problem ({report['seconds']:.2f} s).")

    app.emit(report, human)
    if not report["healthy"]:
        raise SystemExit(1)


@cli.command()
@click.argument("dest", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Replace DEST if it exists.")
@pass_app
def backup(app: App, dest: str, force: bool) -> None:
    """Copy the store to DEST, safely, even while other processes write to it.

    Uses SQLite's online backup API: DEST is one consistent state of the store,
    checked before it is put in place. Do not copy the .db file instead: recent
    writes live in its -wal file until a checkpoint, so a copy of the .db alone
    silently misses them (or is empty).
    """
    from ..store.sqlite.check import backup_store

    app.arguments = {"dest": "DEST", "force": "--force"}
    if app.db == ":memory:":
        raise CommandError("an in-memory store cannot be backed up from the command line; name a file with --db")
    result: dict[str, Any] = backup_store(app.sqlite_file("memorist backup"), dest, force=force)
    app.emit(
        result,
        lambda: click.echo(
            f"Backed up {result['source']} to {result['path']}: {result['memories']} memories, "
            f"{result['bytes']:,} bytes, {result['seconds']:.2f} s."
        ),
    )
