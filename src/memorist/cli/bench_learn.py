"""``memorist bench learn``: spec 001's learning loop against no learning, on a seeded task family.

Registered in :mod:`.bench` (``bench.add_command``), kept apart so the benchmark
commands of other specs stay in their own module.
"""

from __future__ import annotations

import json

import click

from .app import App, MemoristCommand, pass_app


@click.command("learn", cls=MemoristCommand)
@click.option("--episodes", default=200, show_default=True, type=click.IntRange(min=1, max=100_000), help="Tasks per run.")
@click.option("--block", default=20, show_default=True, type=click.IntRange(min=1), help="Episodes per reported block.")
@click.option("--seed", default=7, show_default=True, type=int, help="The seed of the tasks and of the agent's exploration.")
@pass_app
def learn(app: App, episodes: int, block: int, seed: int) -> None:
    """Learning vs no learning on simulated API tasks (rate limits, pagination, errors).

    The same seeded tasks run twice through execute_with_learning: once reflecting
    and curating the agent's playbook after each task, once without. Prints the
    success rate per block of episodes for both, and the learning run's playbook
    (size, near-duplicates, versions kept). --embedder defaults to 'hashing'. With
    --json: {"episodes", "learning": {"success_by_block", "playbook_size",
    "near_duplicates", "versions_kept", ...}, "without": {"success_by_block", ...}}.
    """
    from ..benchmarks.learn import format_table, run
    from ..embed import resolve_embedder

    embedder = resolve_embedder(app.embedder or "hashing")
    result = run(episodes=episodes, block=block, seed=seed, embedder=embedder,
                 progress=lambda msg: click.echo(f"learn: {msg}", err=True))
    if app.json:
        click.echo(json.dumps(result, ensure_ascii=False))
        return
    click.echo(f"memorist bench learn: {episodes} episodes, seed {seed}, embedder {embedder.name}")
    click.echo(format_table(result))


__all__ = ["learn"]
