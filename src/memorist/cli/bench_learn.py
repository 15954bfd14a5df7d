"""``memorist bench learn``: the learning loop against no learning, on a seeded task family.

Registered in :mod:`.bench` (``bench.add_command``), kept apart so the learning
loop's benchmark stays in a module of its own.
"""

from __future__ import annotations

import json

import click

from .app import App, MemoristCommand, pass_app


@click.command("learn", cls=MemoristCommand)
@click.option("--episodes", default=200, show_default=True, type=click.IntRange(min=1, max=100_000), help="Tasks per run.")
@click.option("--block", default=20, show_default=True, type=click.IntRange(min=1), help="Episodes per reported block.")
@click.option("--seed", default=7, show_default=True, type=int, help="The seed of the tasks and of the agent's exploration.")
@click.option("--world", type=click.Choice(["basic", "extended", "both"]), default="both", show_default=True,
              help="basic: eight strategies; extended: two more habits and a harmful step with a late effect.")
@pass_app
def learn(app: App, episodes: int, block: int, seed: int, world: str) -> None:
    """Learning vs no learning on simulated API tasks (rate limits, pagination, errors).

    The same seeded tasks run twice through execute_with_learning: once reflecting
    and curating the agent's playbook after each task, once without. Prints the
    success rate per block of episodes for both, the learning run's playbook (size,
    near-duplicates, versions kept), and each strategy's learned category against
    the simulator's truth with the precision and recall of ✓ and ✗. --embedder
    defaults to 'hashing'. With --json: the basic world's {"episodes", "learning":
    {"success_by_block", "playbook_size", "category_accuracy", "precision_helpful",
    ...}, "without": {...}}, and the extended world's under "extended".
    """
    from ..benchmarks.learn import format_table, run
    from ..embed import resolve_embedder

    embedder = resolve_embedder(app.embedder or "hashing")
    worlds = ["basic", "extended"] if world == "both" else [world]
    results = {w: run(episodes=episodes, block=block, seed=seed, embedder=embedder, world=w,
                      progress=lambda msg: click.echo(f"learn: {msg}", err=True)) for w in worlds}
    if app.json:
        first, *rest = worlds
        click.echo(json.dumps({**results[first], **{w: results[w] for w in rest}}, ensure_ascii=False))
        return
    for w in worlds:
        click.echo(f"memorist bench learn: {episodes} episodes, seed {seed}, embedder {embedder.name}, {w} world")
        click.echo(format_table(results[w]))
        click.echo("")


__all__ = ["learn"]
