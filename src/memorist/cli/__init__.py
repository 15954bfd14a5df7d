"""The ``memorist`` command line: a thin layer over :class:`memorist.Memory`.

Each command turns its arguments into Memory calls and their results into output:
rich tables for people, or exactly one JSON document on stdout with ``--json``.
The engine decides everything.

:mod:`.app` holds the group, the global options and the error translation; each
other module is one command group: :mod:`.memories` (the mem0-style calls),
:mod:`.transfer` (import, export), :mod:`.reprocess`, :mod:`.playbook` (run-turn,
analyze, playbook), :mod:`.learning` (trajectory, reflect), :mod:`.maintenance`
(check, backup), :mod:`.consolidation` (consolidate, rollback), :mod:`.config` (the store's own configuration), :mod:`.tiers` (maintain, boost, tiers: the energy tiers), :mod:`.relations` (sharing), :mod:`.serve` (serve, keys), :mod:`.agent` (chat), :mod:`.mcp` and :mod:`.bench`. Importing them registers their commands; each keeps its
heavy imports inside its commands, so ``memorist --help`` stays instant.
"""

from __future__ import annotations

from . import (  # noqa: F401  (they register their commands)
    agent,
    bench,
    config,
    consolidation,
    learning,
    maintenance,
    mcp,
    memories,
    minutes,
    playbook,
    relations,
    reprocess,
    serve,
    tiers,
    transfer,
)
from .app import cli, standard_streams


def main(argv: list[str] | None = None) -> None:
    """The ``memorist`` console script."""
    with standard_streams():  # a closed stdin, stdout or stderr: an error naming it, never a traceback
        cli.main(args=argv, prog_name="memorist")


__all__ = ["cli", "main"]
