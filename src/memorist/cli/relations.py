"""Sharing through relation tuples: ``memorist relations create|delete|list|check``.

The command line is the store's owner: it manages every tuple of its tenant. Subjects
and objects are written ``type:id``: ``agent:agent_b``, ``group:team``,
``playbook:agent_a/default``, ``scope:user:alex``. Inside a playbook path or a scope, a
``/`` in an id or a name is written ``%2F`` (and ``%`` as ``%25``):
``playbook:team%2Fops/default`` is agent ``team/ops``'s playbook.
"""

from __future__ import annotations

from typing import Any

import click

from ..policies.relations import RELATIONS
from .app import LIMIT, App, cli, echo, pass_app

_SUBJECT = "Who: user:<id>, agent:<id> or group:<id>."
_OBJECT = ("What: playbook:<agent>/<name>, playbook:user:<user>/<name>, scope:user:<id>, scope:agent:<id>, group:<id> "
           "(a '/' inside an id or a name written %2F).")


@cli.group()
def relations() -> None:
    """Share playbooks and memories between users, agents and groups (owner > editor > viewer)."""


def _changed(app: App, result: dict[str, Any], done: str, same: str) -> None:
    who, what = ":".join(result["subject"]), ":".join(result["object"])
    app.emit(result, lambda: echo(f"{done if result['changed'] else same}: {who} {result['relation']} {what}"))


@relations.command("create")
@click.argument("subject")
@click.argument("relation", type=click.Choice(RELATIONS))
@click.argument("object")
@pass_app
def create(app: App, subject: str, relation: str, object: str) -> None:  # noqa: A002
    """Grant SUBJECT the RELATION on OBJECT (e.g. agent:agent_b viewer playbook:agent_a/default)."""
    app.arguments = {"subject": "SUBJECT", "relation": "RELATION", "object": "OBJECT"}
    _changed(app, app.memory(create=True).relations.create(subject, relation, object), "Granted", "Already granted")


@relations.command("delete")
@click.argument("subject")
@click.argument("relation", type=click.Choice(RELATIONS))
@click.argument("object")
@pass_app
def delete(app: App, subject: str, relation: str, object: str) -> None:  # noqa: A002
    """Revoke a tuple; the subject loses it at its next call."""
    app.arguments = {"subject": "SUBJECT", "relation": "RELATION", "object": "OBJECT"}
    _changed(app, app.memory().relations.delete(subject, relation, object), "Revoked", "No such tuple")


@relations.command("list")
@click.option("--subject", metavar="TYPE:ID", help=_SUBJECT)
@click.option("--relation", type=click.Choice(RELATIONS), help="Only this relation.")
@click.option("--object", "object", metavar="TYPE:ID", help=_OBJECT)
@click.option("--limit", default=100, show_default=True, type=LIMIT, help="At most this many.")
@pass_app
def list_(app: App, subject: str | None, relation: str | None, object: str | None, limit: int) -> None:  # noqa: A002
    """The tuples of the store's tenant."""
    app.arguments = {"subject": "--subject", "object": "--object"}
    found = app.memory().relations.list(subject=subject, relation=relation, object=object, limit=limit)
    rows = [[":".join(r["subject"]), r["relation"], ":".join(r["object"]), r["created_at"] or ""] for r in found["results"]]
    columns = [("subject", {}), ("relation", {}), ("object", {}), ("created", {})]
    app.emit(found, lambda: app.table(columns, rows) if rows else echo("No relations."))


@relations.command("check")
@click.argument("subject")
@click.argument("relation", type=click.Choice(RELATIONS))
@click.argument("object")
@pass_app
def check(app: App, subject: str, relation: str, object: str) -> None:  # noqa: A002
    """Whether SUBJECT may act as RELATION on OBJECT now, and why."""
    app.arguments = {"subject": "SUBJECT", "relation": "RELATION", "object": "OBJECT"}
    result = app.memory().relations.check(subject, relation, object)
    verdict = f"allowed (via {result['via']})" if result["allowed"] else "denied"
    app.emit(result, lambda: echo(f"{':'.join(result['subject'])} {result['relation']} {':'.join(result['object'])}: {verdict}"))


