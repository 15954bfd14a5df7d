"""The minutes as commands: ``memorist minutes record|recent|show|history|search|reindex``,
``memorist context AGENT``, ``memorist evaluate`` and ``memorist pair``.

Minutes belong to ``--project`` (default ``default``); ids may be given by a unique
prefix, as tables print them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from ..validate import time_text
from .app import (
    LIMIT,
    App,
    CommandError,
    FiniteFloat,
    cli,
    echo,
    json_object,
    pass_app,
    read_file,
    read_text,
    resolve_id,
    when,
)

_TIME = "ISO-8601, epoch seconds, or an offset from now: +10h, -2d, +30m"
#: ``--at`` of a minute: what happened, so never in the future (the examples are past offsets).
_PAST = "ISO-8601, epoch seconds, or an offset into the past: -30m, -10h, -2d"


def project_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--project", "project_id", metavar="ID", help="Project id [default: 'default'].")(func)


def _rows(items: list[dict[str, Any]]) -> tuple[list[tuple[str, dict[str, Any]]], list[list[Any]]]:
    columns = [
        ("id", {"no_wrap": True}),
        ("when", {"no_wrap": True}),
        ("event", {"no_wrap": True}),
        ("agent", {"no_wrap": True}),
        ("category", {"no_wrap": True}),
        ("note", {"overflow": "fold", "ratio": 1}),
    ]
    rows = [
        [m["id"][:8], when(m.get("timestamp")), m["event_type"], m.get("agent_id"), m.get("category"),
         m.get("memory_note") or (json.dumps(m.get("data"), ensure_ascii=False) if m.get("data") else None)]
        for m in items
    ]
    return columns, rows


def _full_id(app: App, prefix: str, argument: str = "ID") -> str:
    return resolve_id(app, prefix, thing="minute", argument=argument)


@cli.group()
def minutes() -> None:
    """The coordination log of agents working together: record events, read them, search the index."""


@minutes.command("record")
@click.argument("event_type", metavar="EVENT_TYPE")
@click.option("--agent", "agent_id", metavar="ID", help="The agent involved.")
@project_option
@click.option("--data", metavar="JSON", callback=json_object, help='Event data, e.g. \'{"task_id": "t7", "success_criteria_met": 90}\'.')
@click.option("--ref", "refs", metavar="ID", multiple=True, help="An earlier minute this one refers to (repeatable; a prefix is enough).")
@click.option("--note", metavar="TEXT", help="A human-readable summary.")
@click.option("--category", type=click.Choice(["agent_capability", "coordination_pattern", "conflict_resolution", "task_assignment",
                                               "failure_pattern", "project_knowledge"]), help="[default: from the event's words and data]")
@click.option("--at", "at", metavar="TIME", help=f"When it happened ({_PAST}) [default: now].")
@pass_app
def record(app: App, event_type: str, agent_id: str | None, project_id: str | None, data: dict[str, Any] | None, refs: tuple[str, ...],
           note: str | None, category: str | None, at: str | None) -> None:
    """Append a coordination event of EVENT_TYPE to the log and index it; prints its id."""
    app.arguments = {"event_type": "EVENT_TYPE", "data": "--data", "context_references": "--ref", "memory_note": "--note", "now": "--at"}
    memory = app.memory(create=True)
    full = [_full_id(app, r, "--ref") for r in refs]
    minute = memory.minutes.record(event_type, agent_id=agent_id, project_id=project_id, data=data, context_references=full,
                                   memory_note=note, category=category, now=time_text(at))
    app.emit(minute, lambda: echo(f"{minute['id']} ({minute['category']})"))


@minutes.command("recent")
@click.option("-n", "n", default=50, show_default=True, type=click.IntRange(min=1), help="How many.")
@project_option
@click.option("--agent", "agent_id", metavar="ID", help="Only this agent's minutes.")
@pass_app
def recent(app: App, n: int, project_id: str | None, agent_id: str | None) -> None:
    """The last N minutes of the project, oldest first."""
    items = app.memory().minutes.recent(n, project_id=project_id, agent_id=agent_id)
    app.emit({"results": items}, lambda: app.table(*_rows(items)) if items else echo("No minutes."))


@minutes.command("history")
@project_option
@click.option("--agent", "agent_id", metavar="ID", help="Only this agent's minutes.")
@click.option("--since", default=0, show_default=True, type=click.IntRange(min=0), help="Start after this log position (a page's 'next').")
@click.option("--limit", default=100, show_default=True, type=LIMIT, help="Page size.")
@pass_app
def history(app: App, project_id: str | None, agent_id: str | None, since: int, limit: int) -> None:
    """The project's whole log, oldest first, a page at a time (pruning never removes a minute)."""
    page = app.memory().minutes.history(project_id=project_id, agent_id=agent_id, since=since, limit=limit)

    def human() -> None:
        app.table(*_rows(page["minutes"]))
        if page["next"] is not None:
            echo(f"More: --since {page['next']}")

    app.emit(page, human)


@minutes.command("show")
@click.argument("ids", metavar="ID...", nargs=-1, required=True)
@pass_app
def show(app: App, ids: tuple[str, ...]) -> None:
    """Minutes by id (a unique prefix is enough), with whether each is in the index."""
    app.arguments = {"minute_id": "ID"}
    memory = app.memory()
    items = [memory.minutes.get(_full_id(app, i)) for i in ids]

    def human() -> None:
        for item in items:
            app.pairs({k: v for k, v in item.items() if k != "ts"})

    app.emit({"results": items}, human)


@minutes.command("search")
@click.argument("query", nargs=-1, required=True)
@project_option
@click.option("--agent", "agent_id", metavar="ID", help="Only this agent's minutes.")
@click.option("--category", metavar="NAME", help="Only this category.")
@click.option("--limit", default=5, show_default=True, type=LIMIT, help="How many.")
@pass_app
def search(app: App, query: tuple[str, ...], project_id: str | None, agent_id: str | None, category: str | None, limit: int) -> None:
    """The indexed minutes most relevant to QUERY (pruned ones are not in the index)."""
    app.arguments = {"query": "QUERY"}
    items = app.memory().minutes.search(read_text(query), limit, project_id=project_id, agent_id=agent_id, category=category)

    def human() -> None:
        columns, rows = _rows(items)
        app.table([("score", {"justify": "right"}), *columns], [[m["score"], *row] for m, row in zip(items, rows, strict=True)])

    app.emit({"results": items}, human if items else lambda: echo("No minutes found."))


@minutes.command("reindex")
@project_option
@click.option("--all-projects", is_flag=True, help="Every project of the store.")
@pass_app
def reindex(app: App, project_id: str | None, all_projects: bool) -> None:
    """Rebuild the project's minutes index from the log (pruned minutes come back)."""
    if all_projects and project_id:
        raise click.UsageError("give --project or --all-projects, not both")
    result = app.memory().minutes.reindex(project_id="*" if all_projects else project_id)
    app.emit(result, lambda: echo(
        f"{result['minutes']} minutes in the log: {result['restored']} restored to the index, {result['created']} created, "
        f"{result['unchanged']} unchanged."))


@cli.command("context")
@click.argument("agent_id", metavar="AGENT")
@click.option("--task", metavar="TEXT", help="What the agent is about to do (adds the 5 most relevant past minutes).")
@click.option("--budget", "budget", default=4000, show_default=True, type=click.IntRange(min=1), help="Token budget (about 4 characters a token).")
@project_option
@click.option("--now", metavar="TIME", help=f"Build it as of this time ({_TIME}) [default: now].")
@pass_app
def context(app: App, agent_id: str, task: str | None, budget: int, project_id: str | None, now: str | None) -> None:
    """The bounded context window for AGENT: recent + referenced + own memory + retrieved."""
    app.arguments = {"agent_id": "AGENT", "budget_tokens": "--budget", "now": "--now"}
    window = app.memory().minutes.build_context(agent_id, task, budget_tokens=budget, project_id=project_id, now=time_text(now))
    data = window.to_dict()

    def human() -> None:
        echo(window.text)
        counts = ", ".join(f"{k} {v}" for k, v in data["counts"].items())
        cut = f"; cut {len(window.cut)} to fit" if window.cut else ""
        echo(f"\n[{window.tokens} of {window.budget_tokens} tokens: {counts}{cut}]", err=True)

    app.emit(data, human)


@cli.command("evaluate")
@project_option
@click.option("--dry-run", is_flag=True, help="Report what would be pruned; change nothing.")
@click.option("--now", metavar="TIME", help=f"Score as of this time ({_TIME}) [default: now].")
@pass_app
def evaluate(app: App, project_id: str | None, dry_run: bool, now: str | None) -> None:
    """Score the project's minutes index; dedupe, resolve contradictions, prune (< 0.3) from the index, never the log."""
    app.arguments = {"now": "--now"}
    report = app.memory().minutes.evaluate(project_id=project_id, dry_run=dry_run, now=time_text(now))

    def human() -> None:
        verb = "would prune" if dry_run else "pruned"
        echo(
            f"{report['in_log']} minutes in the log, {report['in_index']} in the index: {verb} {report['pruned']} "
            f"({report['deduplicated']} duplicates, {report['superseded']} superseded, {report['pruned_low_score']} under the threshold); "
            f"{report['kept_in_index']} kept, average score {report['average_score']}."
        )
        for x in report["removed"]:
            link = f" -> {x['link'][:8]}" if x["link"] else ""
            echo(f"  {x['id'][:8]} {x['reason']}{link} (composite {x['composite']})")

    app.emit(report, human)


@cli.command("pair")
@click.option("--task", required=True, metavar="TEXT", help="The original task.")
@click.option("--criteria", required=True, metavar="TEXT", help="The success criteria (one per line or ';'-separated).")
@click.option("--output", "output", metavar="TEXT", help="The output to evaluate.")
@click.option("--output-file", "output_file", type=click.File("r", encoding="utf-8"), help="Read the output from a file ('-': stdin).")
@click.option("--threshold", default=95.0, show_default=True, type=FiniteFloat(0, 100), help="Score that counts as met.")
@click.option("--per-gap", "per_gap", default=5, show_default=True, type=click.IntRange(min=1), help="Memories retrieved per gap.")
@project_option
@click.option("--agent", "agent_id", metavar="ID", help="The agent whose output it is (recorded with the round).")
@pass_app
def pair(app: App, task: str, criteria: str, output: str | None, output_file: Any, threshold: float, per_gap: int, project_id: str | None,
         agent_id: str | None) -> None:
    """One PAIR round: a fresh evaluator scores the output against the criteria and
    names gaps; for each gap, the memories that may close it. The round is logged."""
    if (output is None) == (output_file is None):
        raise click.UsageError("give the output with --output or --output-file (one of them)")
    from ..roles.evaluator import criteria_items

    if criteria.strip() and not criteria_items(criteria):  # an empty one: the engine's refusal
        raise CommandError(f"--criteria: {criteria!r} holds no criterion, only separators; give one per line or ';'-separated")
    text = output if output is not None else read_file(output_file)
    app.arguments = {"task": "--task", "criteria": "--criteria", "output": "--output", "memories_per_gap": "--per-gap"}
    result = app.memory(create=True).minutes.pair_round(task, criteria, text, threshold=threshold, project_id=project_id,
                                                        agent_id=agent_id, memories_per_gap=per_gap)

    def human() -> None:
        state = "meets" if result["met"] else "below"
        echo(f"Score {result['score']:g} / 100 ({state} the threshold {threshold:g}) by {result['evaluator']}"
                   + (f" [fallback: {result['fallback']}]" if result["fallback"] else ""))
        if result["summary"]:
            echo(result["summary"])
        for imp in result["improvements"]:
            echo(f"gap: {imp['gap']['description']}")
            for m in imp["memories"]:
                echo(f"  memory {str(m.get('id'))[:8]} ({m.get('source')}): {m.get('memory_note') or m.get('memory')}")
            for s in imp["suggestions"]:
                echo(f"  -> {s}")

    app.emit(result, human)


__all__ = ["context", "evaluate", "minutes", "pair", "project_option"]
