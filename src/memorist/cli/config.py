"""``memorist config``: the configuration the store records about itself.

The policy changes what is stored, so it is the store's, recorded when the store is
created and agreed on by every process that opens it. ``config set`` changes it,
logged in the event log.
"""

from __future__ import annotations

import click

from ..config import STORE_POLICY
from .app import App, CommandError, cli, pass_app

#: The settings ``config set`` can change.
SETTINGS = {"policy": ("default", "energy")}


@cli.group()
def config() -> None:
    """The store's own configuration: what changes how memories are stored."""


@config.command("show")
@pass_app
def config_show(app: App) -> None:
    """The store's policy and embedder."""
    memory = app.memory()
    stats = memory.stats()
    data = {"policy": memory.config.policy, "embedder": stats.get("embedder"), "dim": stats.get("dim")}

    def human() -> None:
        for key, value in data.items():
            app.console.print(f"{key:9} {value if value is not None else '-'}")

    app.emit(data, human)


@config.command("set")
@click.argument("key", type=click.Choice(sorted(SETTINGS)))
@click.argument("value")
@pass_app
def config_set(app: App, key: str, value: str) -> None:
    """Change KEY to VALUE for every process that opens the store (logged).

    \b
    policy default|energy: under 'energy', new memories get a start energy and the
    tier commands (maintain, boost, tiers) decay, expire and promote memories.
    """
    allowed = SETTINGS[key]
    if value.strip().lower() not in allowed:
        raise CommandError(f"{key} must be one of {', '.join(allowed)}, got {value!r}")
    # The store is opened under its own policy whatever --policy or MEMORIST_POLICY
    # asks for: changing it is the point.
    app.policy = STORE_POLICY
    changed = app.memory().set_policy(value)

    def human() -> None:
        if changed["previous"] == changed["policy"]:
            app.console.print(f"The store is already under the {changed['policy']!r} policy.")
        else:
            app.console.print(f"The store's policy is now {changed['policy']!r} (was {changed['previous']!r}).")

    app.emit(changed, human)
