"""``memorist bench``: benchmarks that print their figures (recorded in bench/RESULTS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import MemoristError
from .app import App, cli, pass_app, progress


@cli.group()
def bench() -> None:
    """Benchmarks that print their figures (recorded in bench/RESULTS.md)."""


def _default_data() -> str | None:
    """The development split beside a source checkout (``../shared/data``), if present."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
        if candidate.is_file():
            return str(candidate)
    return None


def _ks(value: str, what: str = "k values", hint: str = "--k") -> list[int]:
    try:
        ks = [int(k) for k in value.split(",") if k.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"expected comma-separated whole numbers, got {value!r}", param_hint=hint) from exc
    if not ks or min(ks) <= 0:
        raise click.BadParameter(f"{what} must be positive whole numbers", param_hint=hint)
    return ks


@bench.command("locomo")
@click.option("--data", "data", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A LoCoMo JSON file (default: the development split beside the checkout).")
@click.option("--unit", type=click.Choice(["dialog", "observation", "summary"]), default="dialog",
              show_default=True, help="What one memory is.")
@click.option("--k", "k", default="5,10,25,50", show_default=True, help="Cut-offs, comma-separated.")
@click.option("--budget", "budget", default=None, metavar="N[,N...]",
              help="Also measure recall per token: the context built within N tokens (e.g. 500,1000,2000,4000).")
@pass_app
def locomo(app: App, data: str | None, unit: str, k: str, budget: str | None) -> None:
    """Recall@k on LoCoMo (a public benchmark of long, multi-session conversations and
    questions about them): each conversation in its own user space, each question searched there.

    \b
    A second table gives overall recall on two halves of the questions (half A:
    the 1st, 3rd, 5th... question of each conversation; half B: the 2nd, 4th...;
    tune on one, check on the other) and in each conversation.

    \b
    In a temporary SQLite file, unless --db names a store (a file or a
    postgresql:// URL): then in a tenant of its own, deleted afterwards.

    \b
    --budget N: for each question, the context format_context builds within N
    tokens (counted by the embedding model's tokenizer) from the best 200 results,
    and the share of questions whose evidence turns are all whole inside it; beside
    plain top-k in rank order, the packing with one lever off, and the whole
    conversation replayed (dialog unit only).
    """
    from ..benchmarks.locomo import DataError, format_budget_table, format_table, run

    ks = _ks(k)
    budgets = _ks(budget, "budgets", "--budget") if budget else []
    if budgets and unit != "dialog":
        raise click.BadParameter("a budget is measured on dialog turns (--unit dialog)", param_hint="--budget")
    data = data or _default_data()
    if data is None:
        raise click.BadParameter("no data file found; pass --data PATH", param_hint="--data")
    with progress("questions") as update:
        try:
            result = run(data, unit=unit, ks=ks, embedder=app.embedder, progress=update,
                         db=app.db if app.db_typed else None, budgets=budgets)
        except DataError as exc:  # it names the file
            raise MemoristError(str(exc)) from exc
        except (ValueError, KeyError) as exc:
            raise MemoristError(f"cannot run LoCoMo on {data}: {exc}") from exc
    if app.json:
        click.echo(json.dumps(result))
    else:
        click.echo(format_table(result))
        if budgets:
            click.echo("")
            click.echo(format_budget_table(result))


@bench.command("evolve")
@click.option("--data", "data", type=click.Path(dir_okay=False), default=None,
              help="LoCoMo JSON [default: ../shared/data/locomo/locomo_dev.json beside the checkout].")
@click.option("--stream", "streams", type=click.Choice(["all", "tutoring", "locomo"]), default="all", show_default=True)
@click.option("--max-bullets", default=100, show_default=True, type=click.IntRange(min=1),
              help="Capacity: per learner for the per-learner preset, of the one shared playbook for the baseline.")
@pass_app
def evolve(app: App, data: str | None, streams: str, max_bullets: int) -> None:
    """Per-learner playbooks against the ACE baseline: bullets, near-duplicates, growth, capacity, recall.

    Runs both presets on the seeded tutoring stream shipped with Memorist and on the
    LoCoMo development observations (LoCoMo: a public benchmark of long conversations),
    with --embedder (default: all-MiniLM-L6-v2,
    offline; 'minilm' names it too). With --json: one object,
    {"streams": {"tutoring": {"baseline": {...}, "per-learner": {...}, "baseline@equal-capacity": {...}}, "locomo": {...}}}.
    """
    from ..benchmarks.evolve import format_table, run
    from ..benchmarks.locomo import DataError
    from ..embed import resolve_embedder

    spec = app.embedder or "sentence-transformers"
    spec = "sentence-transformers" if spec.lower() in ("minilm", "default") else spec
    embedder = resolve_embedder(spec)
    chosen = ("tutoring", "locomo") if streams == "all" else (streams,)
    if streams == "all" and data is None:
        from ..benchmarks.evolve import default_data_path

        if not default_data_path().is_file():  # an install, not a checkout beside the data
            chosen = ("tutoring",)
            click.echo("evolve: LoCoMo's development split is not beside this install: the tutoring stream only "
                       "(--data PATH runs LoCoMo too)", err=True)
    try:
        result = run(streams=chosen, embedder=embedder, data_path=data, max_bullets=max_bullets,
                     progress=lambda msg: click.echo(f"evolve: {msg}", err=True))
    except FileNotFoundError as exc:
        raise click.BadParameter(str(exc), param_hint="--data") from exc
    except DataError as exc:  # it names the file and what is wrong with it
        raise MemoristError(str(exc)) from exc
    if app.json:
        click.echo(json.dumps(result))
        return
    click.echo(f"memorist bench evolve: embedder {embedder.name}; max_bullets {max_bullets} "
               "(per learner for the per-learner preset, shared by all learners for the baseline; "
               "the baseline also at the per-learner playbooks' total capacity)")
    click.echo(format_table(result))


from .bench_learn import learn as _learn  # noqa: E402  (its own module; registered here)

bench.add_command(_learn)
