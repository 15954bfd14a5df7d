"""``engram bench locomo``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import EngramError


def _default_data() -> str | None:
    """The development split beside a source checkout (``../shared/data``), if present."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
        if candidate.is_file():
            return str(candidate)
    return None


def _ks(value: str) -> list[int]:
    try:
        ks = [int(k) for k in value.split(",") if k.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"expected comma-separated whole numbers, got {value!r}") from exc
    if not ks or min(ks) <= 0:
        raise click.BadParameter("k values must be positive whole numbers")
    return ks


@click.command("locomo")
@click.option("--data", "data", type=click.Path(exists=True, dir_okay=False), default=None, help="A LoCoMo JSON file (default: the development split beside the checkout).")
@click.option("--unit", type=click.Choice(["dialog", "observation", "summary"]), default="dialog", show_default=True, help="What one memory is.")
@click.option("--k", "k", default="5,10,25,50", show_default=True, help="Cut-offs, comma-separated.")
@click.pass_context
def locomo(ctx: click.Context, data: str | None, unit: str, k: str) -> None:
    """Recall@k on LoCoMo: each conversation in its own user space, each question searched there."""
    from .locomo import format_table, run

    ks = _ks(k)
    data = data or _default_data()
    if data is None:
        raise click.BadParameter("no data file found; pass --data PATH", param_hint="--data")
    app = ctx.find_root().obj
    embedder = getattr(app, "embedder", None)
    as_json = bool(getattr(app, "json", False))  # --json before or after the command
    with click.progressbar(length=1, label="questions", file=sys.stderr) as bar:
        state = {"shown": 0}

        def progress(done: int, total: int) -> None:
            bar.length = total
            bar.update(done - state["shown"])
            state["shown"] = done

        try:
            result = run(data, unit=unit, ks=ks, embedder=embedder, progress=progress)
        except (ValueError, KeyError) as exc:
            raise EngramError(f"cannot run LoCoMo on {data}: {exc}") from exc
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(format_table(result))


def register(bench: click.Group) -> None:
    bench.add_command(locomo)
