"""The energy tiers as commands: ``memorist maintain``, ``memorist boost`` and
``memorist tiers status|health|config|list|tests|test-memory|plot``.

They need a store under the energy policy (recorded in the store; a new store
takes ``--policy energy``) and refuse any other. Times (``--now``) are ISO-8601, epoch seconds or an
offset from now (``-10h``, ``-2d``, ``+2m``), so runs can be replayed and tested without waiting hours; a
command that writes (``maintain``, ``boost``, ``tiers test-memory``) takes no time more than 5 minutes ahead of the
clock, while ``tiers status``, ``health`` and ``plot`` may look ahead.
"""

from __future__ import annotations

from typing import Any

import click

from ..errors import NotFoundError
from ..validate import time_text
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
    pass_app,
    read_text,
    scope,
    scope_options,
    tier_cells,
    when,
)

_TIME = "ISO-8601, epoch seconds, or an offset from now: +10h, -2d, +30m, -45s, +1w"
_PAST = "ISO-8601, epoch seconds, or an offset from now: -10h, -2d, +2m; at most 5 minutes ahead"
_NOW_HELP = f"The time of the run ({_PAST}) [default: now]."


def _energy(app: App, *, create: bool = False) -> Any:
    """The store, which must be under the energy policy: a tier command on another
    store would decay and expire memories its own configuration keeps. The check is
    the library's (``memory.tiers`` calls make it), so both refuse alike."""
    command = click.get_current_context().command_path.partition(" ")[2]  # "tiers status"
    if create and app.policy != "energy":
        try:
            app.require_store()
        except CommandError:  # no store yet: one made now would be under the default policy, and refused
            raise CommandError(f"`memorist {command}` needs the energy policy, and there is no store at {app.label} yet: "
                               "add --policy energy to make one under it") from None
    memory = app.memory(create=create)
    memory._require_energy(f"`memorist {command}`")
    return memory


def _tier_id(app: App, prefix: str, ids: dict[str, str | None]) -> str:
    """A full id (real or test memory) from a unique prefix, as tables print them,
    among the ids of the scope ``ids`` only."""
    memory = _energy(app)
    try:
        return memory.resolve_id(prefix, **ids)
    except NotFoundError:
        found = memory.tiers.engine.resolve_test_id(prefix.strip(), **ids)
        if found is None:
            raise
        return found


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _items_table(app: App, items: list[dict[str, Any]], empty: str | None = None) -> None:
    """Memories with their energy and tier; ``empty``: the line printed instead of an empty table."""
    if not items and empty:
        echo(empty)
        return
    app.table(
        [("id", {"no_wrap": True}), *TIER_COLUMNS,
         ("memory", {"overflow": "fold", "ratio": 1}), ("user", {"no_wrap": True}), ("created (UTC)", {"no_wrap": True})],
        [[i["id"][:8], *tier_cells(i), i["memory"], i.get("user_id"), when(i["created_at"])] for i in items],
    )


def _run_text(result: dict[str, Any]) -> str:
    what = "test memories" if result["test_only"] else "memories"
    parts = [f"{result['decayed']} decayed", f"{result['expired']} expired", f"{result['promoted']} promoted"]
    if result["promoted"]:
        parts[-1] += f" (to short_term {result['promoted_to_short_term']}, to long_term {result['promoted_to_long_term']})"
    if result["use_boosted"]:
        parts.append(f"{result['use_boosted']} boosted by use")
    tail = f"; {result['pending']} wait for the next run" if result["pending"] else ""
    return f"Maintenance run {result['run']} at {when(result['now'])} over {result['memories']} {what}: {', '.join(parts)}{tail}."


@cli.command()
@click.option("--test-only", is_flag=True, help="Run over the test memories only (the real ones are not touched).")
@click.option("--now", metavar="TIME", help=_NOW_HELP)
@scope_options
@pass_app
def maintain(app: App, test_only: bool, now: str | None, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
    """Run energy-tier maintenance: decay, expire, promote.

    \b
    Every memory of the scope (no --user/--agent/--run: the whole store) decays as
    E0*exp(-lambda*t), t the hours since its last decay (lambda 0.5 working, 0.05
    short_term, 0.001 long_term); below 0.1 it expires (hidden, kept in history);
    working above 2.0 and short_term above 5.0 are promoted: a new memory in the next
    tier, the original archived and linked. At most 10 promotions and 100 decays per
    run (`memorist tiers config`). The run is logged (event log, and the maintenance log
    file next to the store).
    """
    app.arguments = {"now": "--now"}
    result = _energy(app).tiers.maintain(now=time_text(now), test_only=test_only, **scope(user_id, agent_id, run_id))

    def human() -> None:
        echo(_run_text(result))
        changed = result["results"]
        if changed:
            app.table(
                [("id", {"no_wrap": True}), ("action", {"no_wrap": True}), ("tier", {"no_wrap": True}),
                 ("energy", {"justify": "right"}), ("after", {"justify": "right"}), ("to", {"no_wrap": True})],
                [[r["id"][:8], r["action"], r["tier"], _number(r["energy_before"]), _number(r["energy"]),
                  f"{r['to_tier']} {r['promoted_to'][:8]}" if r["action"] == "promote" else ""] for r in changed],
            )
        if result.get("log"):
            echo(f"Logged to {result['log']}.")

    app.emit(result, human)


@cli.command()
@click.argument("memory_id", metavar="ID")
@click.option("--amount", type=FiniteFloat(min=0, min_open=True), help="Energy to add [default: the configured boost, 1.0].")
@click.option("--now", metavar="TIME", help=f"When ({_PAST}) [default: now].")
@scope_options
@pass_app
def boost(app: App, memory_id: str, amount: float | None, now: str | None, user_id: str | None, agent_id: str | None,
          run_id: str | None) -> None:
    """Add energy to memory ID (a unique prefix will do; test memories too)."""
    app.arguments = {"memory_id": "ID", "now": "--now", "amount": "--amount"}
    ids = scope(user_id, agent_id, run_id)
    item = _energy(app).tiers.boost(_tier_id(app, memory_id, ids), amount, time_text(now), **ids)
    app.emit(item, lambda: echo(
        f"Boosted {item['id']} by {item['amount']:g}: energy {item['energy_before']:.3f} -> {item['energy']:.3f} ({item['tier']})."
    ))


@cli.group()
def tiers() -> None:
    """Energy tiers: status, health, configuration, test memories, a plot."""


@tiers.command("status")
@click.option("--test-only", is_flag=True, help="The test memories' distribution.")
@click.option("--now", metavar="TIME", help=f"Energies as of this time ({_TIME}) [default: now].")
@scope_options
@pass_app
def status(app: App, test_only: bool, now: str | None, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
    """How many memories each tier holds, and their energies (the store's, or with
    --user/--agent/--run only those memories')."""
    app.arguments = {"now": "--now"}
    data = _energy(app).tiers.status(test_only=test_only, now=time_text(now), **scope(user_id, agent_id, run_id))

    def human() -> None:
        label = "test memories" if test_only else "memories"
        echo(f"Energy tiers of {app.label} ({label}, energies as of {when(data['now'])}):")
        app.table(
            [("tier", {"no_wrap": True}), ("memories", {"justify": "right"}), ("energy mean", {"justify": "right"}),
             ("min", {"justify": "right"}), ("max", {"justify": "right"})],
            [[name, t["count"], _number(t["energy_mean"]), _number(t["energy_min"]), _number(t["energy_max"])]
             for name, t in data["tiers"].items()]
            + [["archived (promoted)", data["archived"], "", "", ""], ["expired", data["expired"], "", "", ""]],
        )
        extra = f"; {data['test_memories']} test memories kept apart" if "test_memories" in data else ""
        echo(f"{data['total']} live {label}{extra}.")
        run = data["last_run"]
        echo(f"Last run: {run['run']} at {when(run['at'])} (run time {when(run['now'])})." if run else "No maintenance run yet.")

    app.emit(data, human)


@tiers.command("health")
@click.option("--now", metavar="TIME", help=f"Check as of this time ({_TIME}) [default: now].")
@scope_options
@pass_app
def health(app: App, now: str | None, user_id: str | None, agent_id: str | None, run_id: str | None) -> None:
    """Check the energy tiers: configuration, counts, stale decays, links, last run, log
    (with --user/--agent/--run, of those memories only). Exit code 1 when a check fails."""
    app.arguments = {"now": "--now"}
    report = _energy(app).tiers.health(now=time_text(now), **scope(user_id, agent_id, run_id))

    def human() -> None:
        app.table(
            [("check", {"no_wrap": True}), ("status", {"no_wrap": True}), ("detail", {"overflow": "fold", "ratio": 1})],
            [[c["check"], c["status"].upper(), c["detail"]] for c in report["checks"]],
        )
        echo(f"Energy tiers: {report['status'].upper()}.")

    app.emit(report, human)
    if not report["healthy"]:
        raise SystemExit(1)


@tiers.command("config")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Change a setting (repeatable): decay_batch=50, rate_working=0.4, start_energy.reminder=3.")
@click.option("--reset", is_flag=True, help="Back to the default settings (then --set applies).")
@pass_app
def config(app: App, settings: tuple[str, ...], reset: bool) -> None:
    """Show (or change) the energy tiers' configuration, persisted in the store."""
    changes: dict[str, str] = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{setting!r} is not KEY=VALUE", param_hint="--set")
        changes[key.strip()] = value.strip()
    memory = _energy(app)
    info = memory.tiers.config(changes or None, reset=reset)

    def human() -> None:
        source = f"persisted (event {info['seq']}, {when(info['changed_at'])})" if info["persisted"] else "the defaults (not persisted yet)"
        echo(f"Energy tiers configuration: {source}.")
        app.pairs({k: (", ".join(f"{n} {e:g}" for n, e in v.items()) if isinstance(v, dict) else v) for k, v in info["config"].items()})
        if info.get("problem"):
            echo(f"problem: {info['problem']}", err=True)

    app.emit(info, human)


@tiers.command("list")
@scope_options
@click.option("--limit", default=100, show_default=True, type=LIMIT, help="How many.")
@pass_app
def list_(app: App, user_id: str | None, agent_id: str | None, run_id: str | None, limit: int) -> None:
    """The scope's memories with their energy and tier, newest first."""
    data = _energy(app).get_all(**scope(user_id, agent_id, run_id), limit=limit)
    app.emit(data, lambda: _items_table(app, data["results"], empty="No memories."))


@tiers.command("tests")
@scope_options
@click.option("--limit", default=100, show_default=True, type=LIMIT, help="How many.")
@click.option("--delete", is_flag=True, help="Delete them instead (the real memories are never touched); "
              "with no --user, --agent or --run, every user's.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (with --delete).")
@pass_app
def tests(app: App, user_id: str | None, agent_id: str | None, run_id: str | None, limit: int, delete: bool, yes: bool) -> None:
    """The test memories (kept apart from the real ones), or --delete them."""
    memory = _energy(app)
    if delete:
        ids = scope(user_id, agent_id, run_id)
        if not yes:
            confirm(f"Delete the test memories of {describe_scope(ids) or 'every user'} in {app.label}?")
        done = memory.tiers.delete_test_memories(**ids)
        app.emit(done, lambda: echo(f"Deleted {done['deleted']} test memories."))
        return
    data = memory.tiers.test_memories(**scope(user_id, agent_id, run_id), limit=limit)
    app.emit(data, lambda: _items_table(app, data["results"], empty="No test memories."))


@tiers.command("test-memory")
@click.argument("text", nargs=-1, required=True)
@scope_options
@click.option("--energy", type=FiniteFloat(min=0, min_open=True), help="Start energy [default: by --type, else 1.0].")
@click.option("--tier", type=click.Choice(["working", "short_term", "long_term"]), help="Start tier [default: working].")
@click.option("--type", "kind", metavar="TYPE", help="insight, crystallization, learning, reminder (start energy by type).")
@click.option("--timestamp", metavar="TIME", help=f"When it was made ({_PAST}) [default: now].")
@pass_app
def test_memory(app: App, text: tuple[str, ...], user_id: str | None, agent_id: str | None, run_id: str | None,
                energy: float | None, tier: str | None, kind: str | None, timestamp: str | None) -> None:
    """Create a test memory of TEXT (stored as is), apart from the real ones."""
    app.arguments = {"messages": "TEXT", "timestamp": "--timestamp", "metadata.energy": "--energy", "metadata.tier": "--tier",
                     "metadata.type": "--type"}
    metadata: dict[str, Any] = {}
    for key, value in (("energy", energy), ("tier", tier), ("type", kind)):
        if value is not None:
            metadata[key] = value
    memory = _energy(app, create=True)
    added = memory.add(read_text(text), **scope(user_id, agent_id, run_id), metadata=metadata or None, infer=False,
                       timestamp=time_text(timestamp), test=True)
    ids = [r["id"] for r in added["results"]]
    items = [i for i in memory.tiers.test_memories(**scope(user_id, agent_id, run_id), limit=1000)["results"] if i["id"] in ids]
    app.emit({"results": items}, lambda: _items_table(app, items))


@tiers.command("plot")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="The PNG file to write.")
@click.option("--samples", default=4, show_default=True, type=click.IntRange(1, 20), help="Sample memories per tier.")
@click.option("--now", metavar="TIME", help=f"Energies as of this time ({_TIME}) [default: now].")
@pass_app
def plot(app: App, out: str, samples: int, now: str | None) -> None:
    """Draw energy over time per tier, with the thresholds, as a PNG (needs the plot extra).

    Each tier's panel shows sample memories of the store (its highest energies; the
    default start energies when the tier is empty) decaying at the tier's rate, the
    promotion threshold and the expiry line; the last panel follows one memory
    through boosts and maintenance runs from working to long_term.
    """
    import time

    from ..tiers_plot import plot_tiers
    from ..validate import timestamp

    app.arguments = {"now": "--now"}
    memory = _energy(app)
    at = timestamp(time_text(now), field="now")
    try:
        result = plot_tiers(out, memory.tiers.engine.config(), memory.tiers.engine.samples(now=time.time() if at is None else at, per_tier=samples))
    except OSError as exc:
        raise CommandError(f"cannot write {out}: {exc.strerror or exc}") from exc
    app.emit(result, lambda: echo(f"Wrote {result['path']} ({result['bytes']:,} bytes, {result['curves']} curves)."))


__all__ = ["boost", "maintain", "tiers"]
