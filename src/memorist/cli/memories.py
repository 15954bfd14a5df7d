"""The mem0-style calls as commands: ``add``, ``search``, ``list``, ``get``, ``update``,
``delete``, ``delete-all``, ``erase``, ``history``, ``stats``, ``reset``, ``reindex`` and ``demo``."""

from __future__ import annotations

from typing import Any

import click

from .app import (
    LIMIT,
    TIER_COLUMNS,
    App,
    CommandError,
    FiniteFloat,
    cli,
    confirm,
    describe_scope,
    echo,
    json_object,
    pass_app,
    progress,
    read_text,
    scope,
    scope_options,
    stdin_is_tty,
    tier_cells,
    when,
)


def _results_table(app: App, results: list[dict[str, Any]]) -> None:
    app.table(
        [("event", {"no_wrap": True}), ("id", {"no_wrap": True}), ("memory", {"overflow": "fold"})],
        [[r.get("event"), r.get("id"), r.get("memory")] for r in results],
    )


def _memory_id(app: App, memory_id: str, ids: dict[str, str | None], *, include_deleted: bool = False) -> str:
    """A full id, or a unique prefix of one (as ``memorist analyze`` prints them),
    among the ids of the scope ``ids`` only: another scope's memories stay unseen."""
    return app.memory().resolve_id(memory_id, include_deleted=include_deleted, **ids)


@cli.command()
@click.argument("text", nargs=-1, required=True)
@scope_options
@click.option("--metadata", metavar="JSON", callback=json_object, help="A JSON object stored with the memories.")
@click.option("--infer/--no-infer", default=True, show_default=True, help="Extract facts, or store the text as is.")
@click.option("--timestamp", metavar="ISO", help="When the conversation happened (ISO-8601) [default: now].")
@click.option("--role", type=click.Choice(["user", "assistant"]), help="Store TEXT as a message of this role.")
@click.option("--test", is_flag=True, help="A test memory: kept apart, never returned by the normal commands.")
@click.option("--importance", type=FiniteFloat(0.0, 1.0), metavar="X",
              help="How much it matters, 0 to 1 (0.8 or more: never merged by consolidation) [default: estimated].")
@pass_app
def add(
    app: App,
    text: tuple[str, ...],
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    metadata: dict[str, Any] | None,
    infer: bool,
    timestamp: str | None,
    role: str | None,
    test: bool,
    importance: float | None,
) -> None:
    """Remember TEXT (words joined by spaces; '-' reads stdin) as one message."""
    app.arguments = {"messages": "TEXT"}
    content = read_text(text)
    messages: Any = [{"role": role, "content": content}] if role else content
    result = app.memory(create=True).add(
        messages, **scope(user_id, agent_id, run_id), metadata=metadata, infer=infer, timestamp=timestamp, test=test,
        importance=importance,
    )

    def human() -> None:
        if result["results"]:
            _results_table(app, result["results"])
        click.echo(result["message"])

    app.emit(result, human)


@cli.command()
@click.argument("query", nargs=-1, required=True)
@scope_options
@click.option("--limit", default=5, show_default=True, type=LIMIT, metavar="N", help="How many memories.")
@click.option(
    "--threshold",
    type=FiniteFloat(-1.0, 1.0),
    metavar="X",
    help="Only memories at least this similar to QUERY (cosine, -1 to 1).",
)
@click.option(
    "--filters", metavar="JSON", callback=json_object, help='Metadata / field filters, e.g. \'{"category": "food"}\'.'
)
@click.option("--reference-time", metavar="ISO", help="When the question is asked, for time words such as 'last week' [default: now].")
@pass_app
def search(
    app: App,
    query: tuple[str, ...],
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    limit: int,
    threshold: float | None,
    filters: dict[str, Any] | None,
    reference_time: str | None,
) -> None:
    """The memories most relevant to QUERY, best first.

    The similarity column is the cosine similarity of memory and query (1 is the
    same meaning, around 0 unrelated). The order also weighs keyword matches, so a
    memory found by its words can rank above a more similar one.
    """
    app.arguments = {"query": "QUERY", "reference_time": "--reference-time"}
    result = app.memory().search(
        " ".join(query), **scope(user_id, agent_id, run_id), limit=limit, filters=filters, threshold=threshold,
        reference_time=reference_time,
    )

    def human() -> None:
        if not result["results"]:
            click.echo("No memories found.")
            return
        rows = result["results"]
        tiers = _tiers_shown(rows)
        app.table(
            [
                ("#", {"justify": "right"}),
                ("similarity", {"justify": "right"}),
                ("memory", {"overflow": "fold", "ratio": 1}),
                ("id", {"no_wrap": True}),
                *(TIER_COLUMNS if tiers else []),
                ("created (UTC)", {"no_wrap": True}),
            ],
            [
                [i, f"{r['similarity']:.2f}" if "similarity" in r else "-", r["memory"], r["id"], *(tier_cells(r) if tiers else []),
                 when(r.get("created_at"))]
                for i, r in enumerate(rows, 1)
            ],
        )

    app.emit(result, human)


def _tiers_shown(rows: list[dict[str, Any]]) -> bool:
    """Whether the items carry a tier and an energy (the energy policy): then they get columns."""
    return any("tier" in r for r in rows)


@cli.command("list")
@scope_options
@click.option("--limit", default=100, show_default=True, type=LIMIT, metavar="N", help="At most N memories, newest first.")
@click.option(
    "--filters", metavar="JSON", callback=json_object, help='Metadata / field filters, e.g. \'{"category": "food"}\'.'
)
@pass_app
def list_(app: App, user_id: str | None, agent_id: str | None, run_id: str | None, limit: int,
          filters: dict[str, Any] | None) -> None:
    """The scope's memories, newest first."""
    result = app.memory().get_all(**scope(user_id, agent_id, run_id), limit=limit, filters=filters)

    def human() -> None:
        rows = result["results"]
        if not rows:
            click.echo("No memories.")
            return
        tiers = _tiers_shown(rows)
        app.table(
            [
                ("memory", {"overflow": "fold", "ratio": 1}),
                ("id", {"no_wrap": True}),
                ("kind", {"no_wrap": True}),
                *(TIER_COLUMNS if tiers else []),
                ("created (UTC)", {"no_wrap": True}),
            ],
            [[r["memory"], r["id"], r.get("kind"), *(tier_cells(r) if tiers else []), when(r.get("created_at"))] for r in rows],
        )
        noun = "memory" if len(rows) == 1 else "memories"
        click.echo(f"{len(rows)} {noun}" + (f" (--limit {limit} reached)" if len(rows) >= limit else ""))

    app.emit(result, human)


@cli.command()
@click.argument("memory_id", metavar="ID")
@scope_options
@pass_app
def get(app: App, memory_id: str, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
    """One memory by ID (or a unique prefix of it); --user/--agent/--run: only if it is theirs."""
    ids = scope(user_id, agent_id, run_id)
    item = app.memory().get(_memory_id(app, memory_id, ids), **ids)
    app.emit(item, lambda: app.pairs(item))


@cli.command()
@click.argument("memory_id", metavar="ID")
@click.argument("text", nargs=-1, required=True)
@click.option("--metadata", metavar="JSON", callback=json_object, help="A JSON object merged into the metadata.")
@scope_options
@pass_app
def update(
    app: App, memory_id: str, text: tuple[str, ...], metadata: dict[str, Any] | None, user_id: str | None, agent_id: str | None, run_id: str | None
) -> None:
    """Replace the text of memory ID (or a unique prefix) with TEXT ('-' reads stdin)."""
    app.arguments = {"text": "TEXT"}
    ids = scope(user_id, agent_id, run_id)
    result = app.memory().update(_memory_id(app, memory_id, ids), read_text(text), metadata=metadata, **ids)
    app.emit(
        result,
        lambda: app.pairs(
            {"event": result["event"], "id": result["id"], "before": result.get("previous_memory"), "after": result["memory"]}
        ),
    )


@cli.command()
@click.argument("memory_id", metavar="ID")
@scope_options
@pass_app
def delete(app: App, memory_id: str, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
    """Delete memory ID or a unique prefix of it (its history stays readable)."""
    ids = scope(user_id, agent_id, run_id)
    result = app.memory().delete(_memory_id(app, memory_id, ids), **ids)
    app.emit(result, lambda: echo(f"Deleted {result['id']}: {result['memory']}"))


@cli.command("delete-all")
@scope_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def delete_all(app: App, user_id: str | None, agent_id: str | None, run_id: str | None, yes: bool) -> None:
    """Delete every memory of a scope (--user, --agent and/or --run)."""
    ids = scope(user_id, agent_id, run_id)
    memory = app.memory()
    # Without any id the engine refuses; asking first would be pointless.
    if not yes and any(ids.values()):
        confirm(f"Delete every memory of {describe_scope(ids)} in {app.label}?")
    result = memory.delete_all(**ids)
    app.emit(result, lambda: click.echo(result["message"]))


@cli.command()
@scope_options
@click.option("--dry-run", is_flag=True, help="Only count what would be erased; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def erase(app: App, user_id: str | None, agent_id: str | None, run_id: str | None, dry_run: bool, yes: bool) -> None:
    """Forget a user, agent or run for good: every memory of it in every capability
    (facts, test memories, playbooks, trajectories, reflections, minutes), the text of
    its events (their shape stays), and every byte of it in the store."""
    ids = scope(user_id, agent_id, run_id)
    memory = app.memory()
    if not yes and not dry_run and any(ids.values()):
        confirm(f"Erase everything of {describe_scope(ids)} in {app.label}? This cannot be undone")
    result = memory.erase(**ids, dry_run=dry_run)

    def show() -> None:
        click.echo(result["message"])
        app.pairs({name: n for name, n in result["erased"].items() if n} | {"vectors": result["vectors"], "events": result["events"]})

    app.emit(result, show)


@cli.command()
@click.argument("memory_id", metavar="ID")
@scope_options
@pass_app
def history(app: App, memory_id: str, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
    """Every event of memory ID (or a unique prefix), oldest first."""
    ids = scope(user_id, agent_id, run_id)
    events = app.memory().history(_memory_id(app, memory_id, ids, include_deleted=True), **ids)

    def human() -> None:
        app.table(
            [
                ("seq", {"justify": "right"}),
                ("event", {"no_wrap": True}),
                ("old", {"overflow": "fold", "ratio": 1}),
                ("new", {"overflow": "fold", "ratio": 1}),
                ("when (UTC)", {"no_wrap": True}),
            ],
            [[e["seq"], e["event"], e.get("old_memory"), e.get("new_memory"), when(e.get("created_at"))] for e in events],
        )

    app.emit(events, human)


@cli.command()
@scope_options
@click.option("--since", default=0, show_default=True, type=click.IntRange(min=0), metavar="SEQ", help="Only events after this sequence number.")
@click.option("--limit", type=LIMIT, metavar="N", help="At most N events.")
@pass_app
def events(app: App, user_id: str | None, agent_id: str | None, run_id: str | None, since: int, limit: int | None) -> None:
    """The scope's event log (turns, adds, updates, deletes, retrievals), oldest first."""
    items = app.memory().events(**scope(user_id, agent_id, run_id), since=since, limit=limit)

    def human() -> None:
        app.table(
            [
                ("seq", {"justify": "right"}),
                ("event", {"no_wrap": True}),
                ("memory", {"no_wrap": True}),
                ("old", {"overflow": "fold", "ratio": 1}),
                ("new", {"overflow": "fold", "ratio": 1}),
                ("when (UTC)", {"no_wrap": True}),
            ],
            [[e["seq"], e["event"], (e.get("memory_id") or "")[:8], e.get("old_memory"), e.get("new_memory"), when(e.get("created_at"))]
             for e in items],
        )

    app.emit(items, human)


@cli.command()
@pass_app
def stats(app: App) -> None:
    """The tenant's counts (memories, users, events) and the store's identity."""
    data = app.memory().stats()
    app.emit(data, lambda: app.pairs(data))


@cli.command()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def reset(app: App, yes: bool) -> None:
    """Delete EVERYTHING in the store: memories, vectors and the event log."""
    app.require_store()
    if not yes:
        if not stdin_is_tty():
            raise CommandError(f"refusing to reset {app.label} without confirmation; pass --yes")
        confirm(f"Delete every memory and event in {app.label}? This cannot be undone")
    app.memory().reset()
    result = {"reset": True, "db": app.label}
    app.emit(result, lambda: click.echo(f"Reset {app.label}: every memory and event deleted."))


@cli.command()
@click.option(
    "--embedder",
    "new_embedder",
    metavar="SPEC",
    help="Re-embed every memory with this embedder (it becomes the store's).",
)
@pass_app
def reindex(app: App, new_embedder: str | None) -> None:
    """Rebuild the indexes from the store, or re-embed with a new embedder.

    Re-embedding needs only the stored texts, so it works even when the store's
    old embedder is not available here.
    """
    if new_embedder:
        from ..embed import resolve_embedder
        from ..memory import reembed

        app.require_store()
        embedder = resolve_embedder(new_embedder)
        with progress("re-embedding") as update:
            result = reembed(app.db, embedder, progress=update)
        result = {**result, "embedder": embedder.name}
    else:
        memory = app.memory()
        result = {**memory.reindex(), "embedder": memory.embedder.name}
    app.emit(
        result,
        lambda: click.echo(
            f"Indexed {result['indexed']} memories"
            + (f"; re-embedded {result['re_embedded']} with {result['embedder']}" if new_embedder else "")
            + "."
        ),
    )


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the temporary store (its path is printed) to look around.")
@click.option("--pair", "pair", is_flag=True, help="The coordination log instead: minutes → index → context → evaluation → one PAIR round (evaluate, find gaps, retrieve, revise).")
@click.option("--tiers", "tiers", is_flag=True, help="The energy tiers instead: decay, promotion, expiry, test memories.")
@click.option("--agent", "agent", is_flag=True, help="The tutor agent instead: two conversations through its graph (needs the agent extra).")
@pass_app
def demo(app: App, keep: bool, pair: bool = False, tiers: bool = False, agent: bool = False) -> None:
    """Show what Memorist is for: a tutor that remembers a learner across conversations.

    The demo writes into a new temporary store, removed afterwards (--keep keeps it).
    It only writes into a store of yours when you name one with --db; MEMORIST_DB is
    never used, so your own store is untouched.
    """
    chosen = [flag for flag, on in (("--pair", pair), ("--tiers", tiers), ("--agent", agent)) if on]
    if len(chosen) > 1:
        raise click.UsageError(f"{' and '.join(chosen)} are different demos: give one of them (or none, for the tutor's)")
    if agent:
        from ..agent import require_langgraph

        require_langgraph()
        from ..agent.demo import run_agent_demo as run
    elif tiers:
        from ..demo_tiers import run_tiers_demo as run
    elif pair:
        from ..demo_pair import run_pair_demo as run
    else:
        from ..demo import run_demo as run
    # With --json the story is not printed: only the result, as JSON.
    say = (lambda *_a, **_k: None) if app.json else click.echo
    result = run(app.db if app.db_typed else None, echo=say, embedder=app.embedder, keep=keep)
    if app.json:
        app.emit(result, lambda: None)
