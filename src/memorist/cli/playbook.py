"""The learning playbooks' commands: ``run-turn`` and ``analyze`` (the tutoring playbooks), and the ``playbook`` group (the versioned playbooks)."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from ..errors import MemoristError
from .app import (
    LIMIT,
    AliasChoice,
    App,
    CommandError,
    FiniteFloat,
    cli,
    confirm,
    echo,
    file_name,
    pass_app,
    read_file,
    resolve_id,
    stdin_closed,
)

if TYPE_CHECKING:
    from ..ace.playbook import Playbook
    from ..roles.learning import Bullet

#: The per-learner preset's former names, still accepted (not shown in the help).
_PRESETS = AliasChoice(["per-learner", "baseline"], {"ltmbse": "per-learner", "ltmbse-ace": "per-learner"})


@contextmanager
def ace_logs_to_stderr(level: int = logging.INFO) -> Iterator[None]:
    """Send the ``memorist`` log lines (the ``[ACE ...]`` lines) to stderr, as is."""
    root = logging.getLogger("memorist")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, old_level) if old_level else level)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def _playbook(app: App, preset: str, *, create: bool = False, **overrides: Any) -> Playbook:
    from .. import config
    from ..ace.playbook import Playbook

    # ACE_MEMORY_FILE chooses the playbooks' store unless --db (or
    # MEMORIST_DB) names one.
    chosen = config.ace_memory_file()
    from_variable = bool(chosen) and click.get_current_context().find_root().get_parameter_source("db") in (ParameterSource.DEFAULT, None)
    if from_variable:
        app.db = chosen
    try:
        memory = app.memory(create=create)
    except CommandError as exc:
        if not from_variable:
            raise
        # The path came from ACE_MEMORY_FILE: point there, not at --db and MEMORIST_DB.
        message = exc.message.replace("check --db (or MEMORIST_DB)", "check ACE_MEMORY_FILE, which names it (or give --db)")
        message = message.replace("`memorist add` (or `memorist serve --create`)", "`memorist run-turn`")
        if "ACE_MEMORY_FILE" not in message:
            message += " (the store ACE_MEMORY_FILE names)"
        raise CommandError(message) from exc
    return Playbook(memory, preset=preset, **{k: v for k, v in overrides.items() if v is not None})


def _preset_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--preset", type=_PRESETS, default="per-learner", show_default=True,
        help="per-learner: one playbook per learner, lessons reinforced instead of cloned, a cap on new bullets "
             "per turn; baseline: the ACE baseline, one playbook shared by every learner.",
    )(func)


# run-turn -------------------------------------------------------------------------------
@cli.command("run-turn")
@click.option("--input", "input_file", type=click.File("r", encoding="utf-8"), default="-", show_default=True,
              help="The turn as one JSON object ('-': stdin).")
@_preset_option
@click.option("--max-bullets", type=click.IntRange(min=1), help="Playbook capacity [default: 100].")
@click.option("--top-k", type=click.IntRange(min=1), help="Bullets injected per turn [default: 10].")
@pass_app
def run_turn(app: App, input_file: Any, preset: str, max_bullets: int | None, top_k: int | None) -> None:
    """Run one tutoring turn: JSON in on stdin, JSON out on stdout, logs on stderr.

    \b
    Input:  {"messages": [{"role": "user", "content": "..."}], "learner_id"?: "sam" (default: "default"),
             "conversation_id"?: "c-1", "feedback"?: "...", "outcome"?: "success|failure", "topic"?: "..."}
    Output: {"answer", "mode", "result": {...}, "scratch": {"ace_delta": {...}, ...}}

    The tutor's graph runs once: router (cot, tot or react) → planner → solver
    (the learner's playbook bullets and facts injected) → critic → learning. The
    learner's playbook is loaded once; the turn is answered by the configured model,
    else deterministically (arithmetic by the calculator; otherwise saying no model
    is configured); the playbook learns from the feedback. Needs the agent extra.
    """
    from ..agent import require_langgraph

    require_langgraph()  # before reading anything: the missing extra is the error to see
    raw = read_file(input_file)
    if not raw.strip():
        raise click.BadParameter(f"no input: {file_name(input_file)} is empty; give the turn as one JSON object", param_hint="--input")
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(
            f"the input is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", param_hint="--input"
        ) from exc
    from ..ace.runner import check_turn
    from ..agent.tutor import Tutor

    check_turn(payload)  # a refused turn opens (or creates) no store; the tutor checks it again with the store's limits
    with ace_logs_to_stderr():
        playbook = _playbook(app, preset, create=True, max_bullets=max_bullets, top_k=top_k)
        result = Tutor(playbook.memory, playbook=playbook).run_turn(payload)
    echo(json.dumps(result, ensure_ascii=False, indent=2))


# analyze --------------------------------------------------------------------------------
def _learner_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--learner", "learner_id", metavar="ID", help="One learner's playbook [default: every learner's playbook; agents' playbooks (`memorist playbook`) are not included].")(func)


@dataclass
class Analysis:
    """What ``memorist analyze`` was given, for its subcommands."""

    app: App
    preset: str
    learner_id: str | None

    def open(self, learner_id: str | None) -> tuple[App, Playbook, str | None]:
        """The app, the playbooks, and the learner: the subcommand's, else the group's."""
        return self.app, _playbook(self.app, self.preset), learner_id or self.learner_id


pass_analysis = click.make_pass_decorator(Analysis)


@cli.group("analyze", invoke_without_command=True)
@_preset_option
@_learner_option
@click.pass_context
def analyze(ctx: click.Context, preset: str, learner_id: str | None) -> None:
    """Inspect and maintain the learners' playbooks, those `memorist run-turn` builds
    (default: summary); agents' playbooks are `memorist playbook`'s.

    \b
    memorist analyze                       overview: counts, types, sections, categories, top bullets
    memorist analyze top [--limit N]       the strongest bullets (score, then helpful)
    memorist analyze recent [--limit N]    the newest bullets
    memorist analyze search "<query>"      bullets by meaning
    memorist analyze export [-o FILE]      every bullet as text, for auditing
    memorist analyze interactive           a prompt for the commands above
    memorist analyze cleanup [--dry-run]   merge near-duplicates (cosine >= 0.90)
    """
    ctx.obj = Analysis(ctx.find_object(App), preset, learner_id)  # type: ignore[arg-type]
    if ctx.invoked_subcommand is None:
        ctx.invoke(summary)


def _bullet_rows(bullets: list[Any], *, relevance: bool = False) -> tuple[list[tuple[str, dict[str, Any]]], list[list[Any]]]:
    columns = [
        ("id", {"no_wrap": True}),
        ("score", {"justify": "right"}),
        ("+/-", {"justify": "right", "no_wrap": True}),
        ("type", {"no_wrap": True}),
        ("learner", {"no_wrap": True}),
        ("content", {"overflow": "fold", "ratio": 1}),
    ]
    if relevance:
        columns.insert(1, ("similarity", {"justify": "right"}))
    rows = []
    for b in bullets:
        row = [b.id[:8], f"{b.score:.3f}", f"{b.helpful}/{b.harmful}", b.memory_type, b.learner_id, b.content]
        if relevance:
            row.insert(1, f"{(b.relevance or 0.0):.3f}")
        rows.append(row)
    return columns, rows


def _show_bullets(app: App, bullets: list[Bullet], empty: str, *, relevance: bool = False) -> None:
    if not bullets:
        echo(empty)
        return
    app.table(*_bullet_rows(bullets, relevance=relevance))


def _top(playbook: Playbook, learner: str | None, limit: int) -> list[Any]:
    bullets = playbook.bullets(learner)
    bullets.sort(key=lambda b: (b.score, b.helpful, b.created_at), reverse=True)
    return bullets[:limit]


def _recent(playbook: Playbook, learner: str | None, limit: int) -> list[Any]:
    return sorted(playbook.bullets(learner), key=lambda b: b.created_at, reverse=True)[:limit]


def _summary_data(playbook: Playbook, learner: str | None) -> dict[str, Any]:
    data = playbook.stats(learner)
    data["top"] = [b.to_dict() for b in _top(playbook, learner, 5)]
    return data


def _print_summary(app: App, data: dict[str, Any]) -> None:
    echo(
        f"Playbooks ({data['preset']}): {data['total_bullets']} bullets, {data['learners']} learner(s); "
        f"average score {data['avg_score']:.3f}, helpful {data['avg_helpful']:.2f}, harmful {data['avg_harmful']:.2f}"
    )
    if not data["total_bullets"]:
        return
    for title, key in (("memory types", "by_memory_type"), ("sections", "by_section"), ("topics", "by_topic")):
        echo(f"{title}: " + ", ".join(f"{k} {v}" for k, v in data[key].items()))
    cats = list(data["categories"].items())[:12]
    echo("categories: " + ", ".join(f"{k} {v}" for k, v in cats))
    echo("top bullets:")
    from ..roles.learning import Bullet

    _show_bullets(app, [Bullet.from_dict(b) for b in data["top"]], "")


@analyze.command()
@_learner_option
@pass_analysis
def summary(analysis: Analysis, learner_id: str | None = None) -> None:
    """Overview: counts, averages, memory types, sections, categories, top bullets."""
    app, playbook, learner = analysis.open(learner_id)
    data = _summary_data(playbook, learner)
    app.emit(data, lambda: _print_summary(app, data))


@analyze.command()
@_learner_option
@click.option("--limit", default=10, show_default=True, type=LIMIT, help="How many bullets.")
@pass_analysis
def top(analysis: Analysis, learner_id: str | None, limit: int) -> None:
    """The strongest bullets: by decay score, then helpful count."""
    app, playbook, learner = analysis.open(learner_id)
    bullets = _top(playbook, learner, limit)
    app.emit({"results": [b.to_dict() for b in bullets]}, lambda: _show_bullets(app, bullets, "No bullets."))


@analyze.command()
@_learner_option
@click.option("--limit", default=10, show_default=True, type=LIMIT, help="How many bullets.")
@pass_analysis
def recent(analysis: Analysis, learner_id: str | None, limit: int) -> None:
    """The newest bullets."""
    app, playbook, learner = analysis.open(learner_id)
    bullets = _recent(playbook, learner, limit)
    app.emit({"results": [b.to_dict() for b in bullets]}, lambda: _show_bullets(app, bullets, "No bullets."))


@analyze.command()
@click.argument("query", nargs=-1, required=True)
@_learner_option
@click.option("--limit", default=10, show_default=True, type=LIMIT, help="How many bullets.")
@pass_analysis
def search(analysis: Analysis, query: tuple[str, ...], learner_id: str | None, limit: int) -> None:
    """Bullets by similarity to QUERY (nothing is touched)."""
    app, playbook, learner = analysis.open(learner_id)
    bullets = playbook.search(" ".join(query), learner_id=learner, limit=limit)
    app.emit({"results": [b.to_dict() for b in bullets]}, lambda: _show_bullets(app, bullets, "No bullets.", relevance=True))


def export_text(bullets: list[Any]) -> str:
    """Every bullet as text, grouped by learner and section (for auditing)."""
    lines = [f"# Memorist playbooks: {len(bullets)} bullets"]
    by_learner: dict[str, list[Any]] = {}
    for b in bullets:
        by_learner.setdefault(b.learner_id, []).append(b)
    for learner, items in by_learner.items():
        lines.append("")
        lines.append(f"## learner {learner} ({len(items)} bullets)")
        sections: dict[str, list[Any]] = {}
        for b in items:
            sections.setdefault(b.section, []).append(b)
        for section, group in sections.items():
            lines.append(f"### {section}")
            for b in group:
                lines.append(
                    f"[{b.id}] helpful={b.helpful} harmful={b.harmful} score={b.score:.3f} type={b.memory_type} "
                    f"topic={b.topic or '-'} tags={list(b.tags)} :: {b.content}"
                )
    return "\n".join(lines) + "\n"


@analyze.command()
@_learner_option
@click.option("--output", "-o", type=click.File("w", encoding="utf-8", lazy=True), help="Write to this file [default: stdout].")
@pass_analysis
def export(analysis: Analysis, learner_id: str | None, output: Any) -> None:
    """Every bullet as text (with --json: as JSON), for auditing."""
    app, playbook, learner = analysis.open(learner_id)
    bullets = playbook.bullets(learner)
    if app.json:
        text = json.dumps({"bullets": [b.to_dict() for b in bullets]}, ensure_ascii=False, indent=2) + "\n"
    else:
        text = export_text(bullets)
    if output is None:
        echo(text, nl=False)
    else:
        output.write(text)
        echo(f"Exported {len(bullets)} bullets to {output.name}.", err=True)


def _cleanup(app: App, playbook: Playbook, learner: str | None, threshold: float, dry_run: bool) -> dict[str, Any]:
    with ace_logs_to_stderr():
        result = playbook.cleanup(learner, threshold=threshold, dry_run=dry_run)

    def human() -> None:
        if not result["clusters"]:
            echo(f"No near-duplicates (cosine >= {threshold:.2f}).")
            return
        for c in result["clusters"]:
            echo(f"keep   {c['kept']}  {c['kept_content']}")
            for mid, text in zip(c["merged"], c["merged_content"], strict=True):
                echo(f"  merge {mid}  {text}")
        n = sum(len(c["merged"]) for c in result["clusters"])
        if dry_run:
            echo(f"Dry run: {n} bullet(s) in {len(result['clusters'])} cluster(s) would be merged; nothing was written.")
        else:
            echo(f"Merged {result['merged']} bullet(s) in {len(result['clusters'])} cluster(s).")

    app.emit(result, human)
    return result


@analyze.command()
@_learner_option
@click.option("--dry-run", is_flag=True, help="Show what would be merged; write nothing.")
@click.option("--threshold", default=0.9, show_default=True, type=FiniteFloat(0.0, 1.0), help="Cosine similarity that makes two bullets duplicates.")
@pass_analysis
def cleanup(analysis: Analysis, learner_id: str | None, dry_run: bool, threshold: float) -> None:
    """Merge near-duplicate bullets into their survivor (higher helpful - harmful, then newest).

    Clusters are found within each playbook; the merge is the one used at run time
    (counters summed, tags united, one memory class, the survivor's id kept).
    """
    app, playbook, learner = analysis.open(learner_id)
    _cleanup(app, playbook, learner, threshold, dry_run)


_HELP = """commands: summary | top [N] | recent [N] | search <query> | export | learner <id>|all | cleanup [--dry-run] | help | quit"""


@analyze.command()
@pass_analysis
def interactive(analysis: Analysis) -> None:
    """A prompt for exploring the playbooks (reads commands from stdin)."""
    if stdin_closed():
        raise CommandError("stdin is closed, so there are no commands to read: pipe them in, or run it in a terminal")
    app, playbook, learner = analysis.open(None)
    app.json = False
    echo(_HELP)
    stream = sys.stdin
    while True:
        echo(f"analyze[{learner or 'all'}]> ", nl=False)
        line = stream.readline()
        if not line:
            echo("")
            break
        try:
            words = shlex.split(line)
        except ValueError as exc:
            echo(f"error: {exc}")
            continue
        if not words:
            continue
        cmd, args = words[0].lower(), words[1:]
        try:
            if cmd in ("quit", "exit", "q"):
                break
            if cmd == "help":
                echo(_HELP)
            elif cmd == "summary":
                _print_summary(app, _summary_data(playbook, learner))
            elif cmd in ("top", "recent"):
                n = int(args[0]) if args else 10
                bullets = (_top if cmd == "top" else _recent)(playbook, learner, n)
                _show_bullets(app, bullets, "No bullets.")
            elif cmd == "search":
                if not args:
                    echo("usage: search <query>")
                    continue
                _show_bullets(app, playbook.search(" ".join(args), learner_id=learner), "No bullets.", relevance=True)
            elif cmd == "export":
                echo(export_text(playbook.bullets(learner)), nl=False)
            elif cmd == "learner":
                learner = None if not args or args[0] == "all" else args[0]
            elif cmd == "cleanup":
                _cleanup(app, playbook, learner, 0.9, "--dry-run" in args)
            else:
                echo(f"unknown command {cmd!r}; {_HELP}")
        except (ValueError, MemoristError) as exc:
            echo(f"error: {exc}")


# memorist playbook --------------------------------------------------------------------------------
_SCOPES = click.Choice(["agent", "user", "tenant", "global"])


def _playbook_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--scope", type=_SCOPES, help="agent, user, tenant or global [default: from --user/--agent].")(func)
    func = click.option("--agent", "agent_id", metavar="ID", help="Agent id [default: 'default' when no --user].")(func)
    return click.option("--user", "user_id", metavar="ID", help="User id (a learner's playbook from run-turn is listed by `playbook list --user ID`).")(func)


def _owner(user_id: str | None, agent_id: str | None, scope: str | None) -> dict[str, Any]:
    return {"user_id": user_id, "agent_id": agent_id, "scope": scope}


def _strategy_rows(entries: list[dict[str, Any]]) -> tuple[list[tuple[str, dict[str, Any]]], list[list[Any]]]:
    columns = [
        ("", {"no_wrap": True}),
        ("confidence", {"justify": "right"}),
        ("evidence", {"justify": "right"}),
        ("pattern", {"overflow": "fold", "ratio": 1}),
        ("context", {"overflow": "fold"}),
        ("id", {"no_wrap": True}),
    ]
    rows = [[e["symbol"], f"{e['confidence']:.2f}", e["evidence_count"], e["pattern"], e["context"], e["id"][:8]] for e in entries]
    return columns, rows


def _show_playbook(app: App, data: dict[str, Any]) -> None:
    owner = ", ".join(f"{k.removesuffix('_id')} {data[k]}" for k in ("user_id", "agent_id") if data.get(k)) or data["scope"]
    head = f"Playbook {data['name']} ({data['scope']}: {owner}) version {data['version']} ({data['version_label']}), {data['size']} strategies"
    if "usage_count" in data:
        head += f"; used {data['usage_count']} times, success rate {data['success_rate']:.2f}"
    echo(head)
    entries = [e for cat in ("helpful", "harmful", "neutral") for e in data["strategies"][cat]]
    if entries:
        app.table(*_strategy_rows(entries))


def _show_diff(data: dict[str, Any]) -> None:
    echo(f"Playbook {data['name']} is at version {data['version']} ({data['version_label']}).")
    echo(f"✓ Added {len(data['added'])} new strategies")
    echo(f"↻ Updated {len(data['updated'])} existing strategies")
    echo(f"✗ Removed {len(data['removed'])} outdated strategies")
    for word, key in (("+", "added"), ("~", "updated"), ("-", "removed")):
        for e in data[key]:
            echo(f"  {word} {e['symbol']} {e['pattern']}  (confidence {e['confidence']:.2f}, evidence {e['evidence_count']})")


@cli.group("playbook")
def playbook_group() -> None:
    """Named, versioned playbooks: get, list, update, curate, versions, rollback, delete.

    A playbook belongs to an agent (--agent), a user (--user), the tenant
    (--scope tenant) or everyone (--scope global). Its strategies are ✓ helpful, ✗
    harmful (anti-patterns) or ○ neutral, each with a confidence from its evidence.
    """


@playbook_group.command("get")
@click.argument("name", default="default")
@_playbook_options
@click.option("--version", "version", type=click.IntRange(min=1), help="A kept version instead of the current one.")
@pass_app
def playbook_get(app: App, name: str, user_id: str | None, agent_id: str | None, scope: str | None, version: int | None) -> None:
    """Show playbook NAME [default: default] with its strategies, best first."""
    memory = app.memory()
    if version is None:
        data = memory.learning.get_playbook(name, agent_id, user_id=user_id, scope=scope)
        if data.get("playbook_id") is None and not data.get("version"):  # the library answers an empty one
            flags = " ".join(f"{flag} {value}" for flag, value in (("--user", user_id), ("--agent", agent_id), ("--scope", scope)) if value)
            raise CommandError(
                f"playbook not found: {name!r}: none of that name exists yet{' for ' + flags if flags else ''} "
                f"(`memorist playbook list{' ' + flags if flags else ''}` lists those that do)"
            )
    else:
        data = memory.learning.get_playbook_version(name, version, **_owner(user_id, agent_id, scope))
        data = {**data, "scope": scope or ("user" if user_id and not agent_id else "agent"), "user_id": user_id, "agent_id": agent_id}
    app.emit(data, lambda: _show_playbook(app, data))


@playbook_group.command("list")
@_playbook_options
@pass_app
def playbook_list(app: App, user_id: str | None, agent_id: str | None, scope: str | None) -> None:
    """The playbooks of a scope."""
    items = app.memory().learning.list_playbooks(**_owner(user_id, agent_id, scope))

    def human() -> None:
        if not items:
            echo("No playbooks.")
            return
        app.table(
            [("name", {"no_wrap": True}), ("version", {"justify": "right"}), ("strategies", {"justify": "right"}),
             ("used", {"justify": "right"}), ("success", {"justify": "right"}), ("updated", {"no_wrap": True})],
            [[p["name"], p["version_label"], p["size"], p["usage_count"], f"{p['success_rate']:.2f}", p["updated_at"]] for p in items],
        )

    app.emit({"results": items}, human)


@playbook_group.command("update")
@click.argument("name", default="default")
@_playbook_options
@click.option("--file", "file", type=click.File("r", encoding="utf-8"), help="A JSON list of strategies ('-': stdin).")
@click.option("--pattern", "patterns", multiple=True, metavar="TEXT", help="A strategy to add (repeatable).")
@click.option("--category", type=click.Choice(["helpful", "harmful", "neutral"]), default="helpful", show_default=True,
              help="Category of the --pattern strategies.")
@click.option("--context", default="", help="When the --pattern strategies apply.")
@click.option("--confidence", type=FiniteFloat(0.0, 1.0), help="Confidence of the --pattern strategies.")
@click.option("--evidence-count", type=click.IntRange(min=0), help="Evidence behind that confidence.")
@click.option("--replace", is_flag=True, help="Replace the playbook's strategies instead of merging (a major version).")
@pass_app
def playbook_update(app: App, name: str, user_id: str | None, agent_id: str | None, scope: str | None, file: Any,
                    patterns: tuple[str, ...], category: str, context: str, confidence: float | None,
                    evidence_count: int | None, replace: bool) -> None:
    """Add strategies to playbook NAME: from --file (JSON: [{"category", "pattern",
    "context", "confidence", "evidence_count", "examples"}]) and/or --pattern."""
    strategies: list[Any] = []
    if file is not None:
        try:
            loaded = json.loads(read_file(file))
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not valid JSON: {exc.msg} (line {exc.lineno})", param_hint="--file") from exc
        if not isinstance(loaded, list):
            raise click.BadParameter("must hold a JSON list of strategy objects", param_hint="--file")
        strategies.extend(loaded)
    for pattern in patterns:
        item: dict[str, Any] = {"pattern": pattern, "category": category, "context": context}
        if confidence is not None:
            item["confidence"] = confidence
        if evidence_count is not None:
            item["evidence_count"] = evidence_count
        strategies.append(item)
    if not strategies and not replace:
        raise click.UsageError("nothing to add: give --file or --pattern")
    memory = app.memory(create=True)
    playbook_id = memory.learning.update_playbook(strategies, name, not replace, **_owner(user_id, agent_id, scope))
    data = memory.learning.get_playbook(name, agent_id, user_id=user_id, scope=scope)
    app.emit({"playbook_id": playbook_id, **data}, lambda: _show_playbook(app, data))


@playbook_group.command("curate")
@click.argument("name")
@click.argument("reflections", nargs=-1, required=True, metavar="REFLECTION_ID...")
@_playbook_options
@pass_app
def playbook_curate(app: App, name: str, reflections: tuple[str, ...], user_id: str | None, agent_id: str | None, scope: str | None) -> None:
    """Curate reflections (ids from `memorist reflect`) into playbook NAME."""
    memory = app.memory()
    ids = [resolve_id(app, r, thing="reflection", argument="REFLECTION_ID") for r in reflections]
    result = memory.learning.curate_playbook(ids, name, **_owner(user_id, agent_id, scope))
    app.emit(result, lambda: _show_diff(result))


@playbook_group.command("versions")
@click.argument("name", default="default")
@_playbook_options
@pass_app
def playbook_versions(app: App, name: str, user_id: str | None, agent_id: str | None, scope: str | None) -> None:
    """The versions of playbook NAME that are kept (latest 5, every major one, the last 90 days)."""
    items = app.memory().learning.list_playbook_versions(name, **_owner(user_id, agent_id, scope))

    def human() -> None:
        if not items:
            echo(f"Playbook {name} has no versions yet.")
            return
        app.table(
            [("version", {"justify": "right"}), ("label", {"no_wrap": True}), ("major", {}), ("created", {"no_wrap": True})],
            [[v["version"], v["version_label"], "yes" if v["major"] else "", v["created_at"]] for v in items],
        )

    app.emit({"results": items}, human)


@playbook_group.command("rollback")
@click.argument("name")
@click.argument("version", type=click.IntRange(min=1))
@_playbook_options
@pass_app
def playbook_rollback(app: App, name: str, version: int, user_id: str | None, agent_id: str | None, scope: str | None) -> None:
    """Make a new version of playbook NAME equal to VERSION."""
    result = app.memory().learning.rollback_playbook(name, version, **_owner(user_id, agent_id, scope))
    app.emit(result, lambda: echo(
        f"Playbook {name} rolled back to version {version}: now version {result['version']} ({result['version_label']}); "
        f"{len(result['added'])} restored, {len(result['updated'])} reset, {len(result['removed'])} removed."
    ))


@playbook_group.command("delete")
@click.argument("name")
@_playbook_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def playbook_delete(app: App, name: str, user_id: str | None, agent_id: str | None, scope: str | None, yes: bool) -> None:
    """Delete playbook NAME with its strategies and versions (an unknown one: not found)."""
    memory = app.memory()
    if not yes:
        confirm(f"Delete playbook {name} with its strategies and versions in {app.label}?")
    result = memory.learning.delete_playbook(name, **_owner(user_id, agent_id, scope))
    app.emit(result, lambda: echo(result["message"]))
