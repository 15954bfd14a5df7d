"""The ``engram`` command line: a thin layer over :class:`engram.Memory`.

Each command turns its arguments into :class:`~engram.Memory` calls and their
results into output: rich tables for people, or exactly one JSON document on stdout
with ``--json``. The engine decides everything. The errors it raises
(:class:`~engram.EngramError`) are translated in one place, :class:`EngramGroup`,
into ``error: <message>`` on stderr and exit code 1; a malformed option value
(``--metadata``, ``--filters``) is a usage error, exit code 2.

The Memory is opened lazily inside each command, so ``engram --help`` never
opens a store or loads a model, and it is closed when the command ends.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import click

from .config import default_db_path
from .errors import EngramError

_SCOPE_KEYS = ("user_id", "agent_id", "run_id")
#: ``get_all`` needs a limit; an export wants every memory of the scope.
_EVERYTHING = 2**62
#: Most messages in one batched ``add(..., infer=False)`` call of ``import``.
IMPORT_BATCH = 500
_TABLE_WIDTH = 100  # when stdout is not a terminal, so output never depends on it


class CommandError(click.ClickException):
    """A failure shown as ``error: <message>`` on stderr, exit code 1."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file, err=file is None)


class EngramGroup(click.Group):
    """The command group; the one place where engine errors become CLI errors."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EngramError as exc:
            raise CommandError(str(exc)) from exc


class _DbOption(click.Option):
    """``--db``: its default is computed when shown or used, never at import."""

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return str(default_db_path())


@dataclass
class App:
    """What the group's options configure; commands open the Memory through it."""

    db: str
    json: bool = False
    embedder: str | None = None
    decay_days: float | None = None
    _console: Any = field(default=None, repr=False)

    def memory(self) -> Any:
        """Open the Memory (closed when the running command ends)."""
        from .memory import Memory

        memory = Memory(self.db, embedder=self.embedder, decay_days=self.decay_days)
        click.get_current_context().call_on_close(memory.close)
        return memory

    @property
    def console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            tty = sys.stdout.isatty()
            self._console = Console(
                file=sys.stdout,
                width=None if tty else _TABLE_WIDTH,
                soft_wrap=False,
                highlight=False,
                emoji=False,
            )
        return self._console

    def emit(self, data: Any, human: Callable[[], None]) -> None:
        """One JSON document with ``--json``, else the human rendering."""
        if self.json:
            click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        else:
            human()

    def table(self, columns: list[tuple[str, dict[str, Any]]], rows: list[list[Any]]) -> None:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for name, options in columns:
            table.add_column(name, **options)
        for row in rows:
            # Text, not markup: a memory saying "[bold]" must print as written.
            table.add_row(*(Text(_cell(v)) for v in row))
        self.console.print(table)

    def pairs(self, data: dict[str, Any]) -> None:
        self.table(
            [("key", {"style": "bold", "no_wrap": True}), ("value", {"overflow": "fold"})],
            [[k, v] for k, v in data.items()],
        )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str) if value else "-"
    return str(value)


def _when(iso: str | None) -> str:
    """``2024-05-01T12:30:05.123+00:00`` -> ``2024-05-01 12:30`` (UTC)."""
    return (iso or "")[:16].replace("T", " ") or "-"


def _json_object(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(
            f"not valid JSON: {exc.msg} (column {exc.colno})", ctx=ctx, param=param
        ) from exc
    if not isinstance(data, dict):
        raise click.BadParameter(
            f'must be a JSON object like \'{{"key": "value"}}\', got {type(data).__name__}',
            ctx=ctx,
            param=param,
        )
    return data


def _stdin_is_tty() -> bool:
    return sys.stdin.isatty()


def _scope_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--run", "run_id", metavar="ID", help="Run (conversation) id.")(func)
    func = click.option("--agent", "agent_id", metavar="ID", help="Agent id.")(func)
    return click.option("--user", "user_id", metavar="ID", help="User id.")(func)


def _scope(user_id: str | None, agent_id: str | None, run_id: str | None) -> dict[str, str | None]:
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


def _describe_scope(scope: dict[str, str | None]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in scope.items() if v is not None)


def _read_text(words: tuple[str, ...]) -> str:
    """The words joined by spaces, or stdin when the only word is ``-``."""
    if words == ("-",):
        return sys.stdin.read().rstrip("\n")
    return " ".join(words)


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback drawing a bar on stderr."""
    bar: Any = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=max(total, 1), label=label, file=sys.stderr)
            bar.__enter__()
        bar.update(done - bar.pos)

    try:
        yield update
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


def _results_table(app: App, results: list[dict[str, Any]]) -> None:
    app.table(
        [("event", {"no_wrap": True}), ("id", {"no_wrap": True}), ("memory", {"overflow": "fold"})],
        [[r.get("event"), r.get("id"), r.get("memory")] for r in results],
    )


# the group ------------------------------------------------------------------------------
@click.group(cls=EngramGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    cls=_DbOption,
    metavar="PATH",
    envvar="ENGRAM_DB",
    show_envvar=True,
    show_default=True,
    help="The SQLite store.",
)
@click.option(
    "--json", "json_output", is_flag=True, help="Print one JSON document on stdout instead of tables."
)
@click.option(
    "--embedder",
    metavar="SPEC",
    envvar="ENGRAM_EMBEDDER",
    show_envvar=True,
    help="The store's embedder: 'hashing', 'hashing:<dim>' or 'sentence-transformers[:<model>]' "
    "[default: the store's own; for a new store MiniLM if installed, else hashing].",
)
@click.option(
    "--decay-days",
    type=click.FloatRange(min=0),
    metavar="N",
    envvar="ENGRAM_DECAY_DAYS",
    show_envvar=True,
    help="Memories not updated for N days are no longer returned (0: never) [default: 0].",
)
@click.version_option(package_name="engram-memory", prog_name="engram")
@click.pass_context
def cli(
    ctx: click.Context, db: str, json_output: bool, embedder: str | None, decay_days: float | None
) -> None:
    """Engram: long-term memory for LLM agents.

    Memories belong to a scope: a user (--user), an agent (--agent) and/or a run
    or conversation (--run); most commands need at least one of them.

    Start with `engram demo`.
    """
    ctx.obj = App(db=db, json=json_output, embedder=embedder or None, decay_days=decay_days)


pass_app = click.make_pass_decorator(App)


# the mem0-style calls -------------------------------------------------------------------
@cli.command()
@click.argument("text", nargs=-1, required=True)
@_scope_options
@click.option(
    "--metadata", metavar="JSON", callback=_json_object, help="A JSON object stored with the memories."
)
@click.option(
    "--infer/--no-infer", default=True, show_default=True, help="Extract facts, or store the text as is."
)
@click.option("--timestamp", metavar="ISO", help="When the conversation happened (ISO-8601) [default: now].")
@click.option(
    "--role", type=click.Choice(["user", "assistant"]), help="Store TEXT as a message of this role."
)
@pass_app
def add(
    app: App,
    text: tuple[str, ...],
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    metadata: dict[str, Any] | None,
    infer: bool,
    timestamp: str | None,
    role: str | None,
) -> None:
    """Remember TEXT (words joined by spaces; '-' reads stdin) as one message."""
    content = _read_text(text)
    messages: Any = [{"role": role, "content": content}] if role else content
    result = app.memory().add(
        messages, **_scope(user_id, agent_id, run_id), metadata=metadata, infer=infer, timestamp=timestamp
    )

    def human() -> None:
        if result["results"]:
            _results_table(app, result["results"])
        click.echo(result["message"])

    app.emit(result, human)


@cli.command()
@click.argument("query", nargs=-1, required=True)
@_scope_options
@click.option("--limit", default=5, show_default=True, metavar="N", help="How many memories.")
@click.option(
    "--filters",
    metavar="JSON",
    callback=_json_object,
    help='Metadata / field filters, e.g. \'{"category": "food"}\'.',
)
@pass_app
def search(
    app: App,
    query: tuple[str, ...],
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    limit: int,
    filters: dict[str, Any] | None,
) -> None:
    """The memories most relevant to QUERY, best first."""
    result = app.memory().search(
        " ".join(query), **_scope(user_id, agent_id, run_id), limit=limit, filters=filters
    )

    def human() -> None:
        if not result["results"]:
            click.echo("No memories found.")
            return
        app.table(
            [
                ("#", {"justify": "right"}),
                ("score", {"justify": "right"}),
                ("memory", {"overflow": "fold", "ratio": 1}),
                ("id", {"no_wrap": True}),
                ("created (UTC)", {"no_wrap": True}),
            ],
            [
                [i, f"{r['score']:.4f}", r["memory"], r["id"], _when(r.get("created_at"))]
                for i, r in enumerate(result["results"], 1)
            ],
        )

    app.emit(result, human)


@cli.command("list")
@_scope_options
@click.option(
    "--limit", default=100, show_default=True, metavar="N", help="At most N memories, newest first."
)
@pass_app
def list_(app: App, user_id: str | None, agent_id: str | None, run_id: str | None, limit: int) -> None:
    """The scope's memories, newest first."""
    result = app.memory().get_all(**_scope(user_id, agent_id, run_id), limit=limit)

    def human() -> None:
        rows = result["results"]
        if not rows:
            click.echo("No memories.")
            return
        app.table(
            [
                ("memory", {"overflow": "fold", "ratio": 1}),
                ("id", {"no_wrap": True}),
                ("kind", {"no_wrap": True}),
                ("created (UTC)", {"no_wrap": True}),
            ],
            [[r["memory"], r["id"], r.get("kind"), _when(r.get("created_at"))] for r in rows],
        )
        noun = "memory" if len(rows) == 1 else "memories"
        click.echo(f"{len(rows)} {noun}" + (f" (--limit {limit} reached)" if len(rows) >= limit else ""))

    app.emit(result, human)


@cli.command()
@click.argument("memory_id", metavar="ID")
@pass_app
def get(app: App, memory_id: str) -> None:
    """One memory by ID."""
    item = app.memory().get(memory_id)
    app.emit(item, lambda: app.pairs(item))


@cli.command()
@click.argument("memory_id", metavar="ID")
@click.argument("text", nargs=-1, required=True)
@click.option(
    "--metadata", metavar="JSON", callback=_json_object, help="A JSON object merged into the metadata."
)
@pass_app
def update(app: App, memory_id: str, text: tuple[str, ...], metadata: dict[str, Any] | None) -> None:
    """Replace the text of memory ID with TEXT ('-' reads stdin)."""
    result = app.memory().update(memory_id, _read_text(text), metadata=metadata)
    app.emit(
        result,
        lambda: app.pairs(
            {
                "event": result["event"],
                "id": result["id"],
                "before": result.get("previous_memory"),
                "after": result["memory"],
            }
        ),
    )


@cli.command()
@click.argument("memory_id", metavar="ID")
@pass_app
def delete(app: App, memory_id: str) -> None:
    """Delete memory ID (its history stays readable)."""
    result = app.memory().delete(memory_id)
    app.emit(result, lambda: click.echo(f"Deleted {result['id']}: {result['memory']}"))


@cli.command("delete-all")
@_scope_options
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def delete_all(app: App, user_id: str | None, agent_id: str | None, run_id: str | None, yes: bool) -> None:
    """Delete every memory of a scope (--user, --agent and/or --run)."""
    scope = _scope(user_id, agent_id, run_id)
    # Without any id the engine refuses; asking first would be pointless.
    if not yes and any(scope.values()):
        click.confirm(f"Delete every memory of {_describe_scope(scope)} in {app.db}?", abort=True, err=True)
    result = app.memory().delete_all(**scope)
    app.emit(result, lambda: click.echo(result["message"]))


@cli.command()
@click.argument("memory_id", metavar="ID")
@pass_app
def history(app: App, memory_id: str) -> None:
    """Every event of memory ID, oldest first."""
    events = app.memory().history(memory_id)

    def human() -> None:
        app.table(
            [
                ("seq", {"justify": "right"}),
                ("event", {"no_wrap": True}),
                ("old", {"overflow": "fold", "ratio": 1}),
                ("new", {"overflow": "fold", "ratio": 1}),
                ("when (UTC)", {"no_wrap": True}),
            ],
            [
                [e["seq"], e["event"], e.get("old_memory"), e.get("new_memory"), _when(e.get("created_at"))]
                for e in events
            ],
        )

    app.emit(events, human)


@cli.command()
@pass_app
def stats(app: App) -> None:
    """Counts and identity of the store."""
    data = app.memory().stats()
    app.emit(data, lambda: app.pairs(data))


@cli.command()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_app
def reset(app: App, yes: bool) -> None:
    """Delete EVERYTHING in the store: memories, vectors and the event log."""
    if not yes:
        if not _stdin_is_tty():
            raise CommandError(f"refusing to reset {app.db} without confirmation; pass --yes")
        click.confirm(
            f"Delete every memory and event in {app.db}? This cannot be undone", abort=True, err=True
        )
    app.memory().reset()
    result = {"reset": True, "db": app.db}
    app.emit(result, lambda: click.echo(f"Reset {app.db}: every memory and event deleted."))


# bulk: import and export --------------------------------------------------------------------
@dataclass
class _Batch:
    """Consecutive verbatim message lines that can go in one ``add`` call."""

    key: tuple[Any, ...]
    kwargs: dict[str, Any]
    lines: list[tuple[int, list[Any]]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(len(m) for _, m in self.lines)


@dataclass
class _Importer:
    memory: Any
    defaults: dict[str, str | None]
    infer: bool | None
    counts: dict[str, int] = field(default_factory=lambda: {"ADD": 0, "UPDATE": 0, "DELETE": 0})
    calls: int = 0
    pending: _Batch | None = None

    def call(self, line_no: int, messages: Any, kwargs: dict[str, Any]) -> None:
        try:
            result = self.memory.add(messages, **kwargs)
        except EngramError as exc:
            raise _LineError(line_no, str(exc)) from exc
        self.calls += 1
        for item in result["results"]:
            self.counts[item["event"]] = self.counts.get(item["event"], 0) + 1

    def flush(self) -> None:
        batch, self.pending = self.pending, None
        if batch is None:
            return
        if len(batch.lines) == 1:
            self.call(batch.lines[0][0], batch.lines[0][1], batch.kwargs)
            return
        try:
            result = self.memory.add([m for _, ms in batch.lines for m in ms], **batch.kwargs)
        except EngramError:
            # The batch wrote nothing; replay it line by line so the lines before
            # the bad one are kept and the error names the bad line.
            for line_no, messages in batch.lines:
                self.call(line_no, messages, batch.kwargs)
            return
        self.calls += 1
        self.counts["ADD"] += len(result["results"])

    def line(self, line_no: int, raw: str) -> None:
        try:
            self._line(line_no, raw)
        except _LineError:
            self.flush()  # the lines before a bad one are kept
            raise

    def _line(self, line_no: int, raw: str) -> None:
        if not raw.strip():
            return
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _LineError(line_no, f"not valid JSON: {exc.msg} (column {exc.colno})") from exc
        if not isinstance(obj, dict):
            raise _LineError(line_no, f"must be a JSON object, got {type(obj).__name__}")
        present = [k for k in ("messages", "text", "memory") if k in obj]
        if len(present) != 1:
            raise _LineError(
                line_no,
                'needs exactly one of "messages", "text" (a conversation turn) or "memory" (an exported memory)'
                + (f"; found {', '.join(present)}" if present else ""),
            )
        exported = present[0] == "memory"
        scope = {k: obj.get(k) for k in _SCOPE_KEYS}
        if not any(v is not None for v in scope.values()):
            scope = dict(self.defaults)
        metadata = obj.get("metadata")
        timestamp = obj.get("timestamp", obj.get("created_at") if exported else None)
        infer = obj.get("infer", self.infer if self.infer is not None else not exported)
        messages: Any = obj[present[0]]
        if (
            exported
            and isinstance(metadata, dict)
            and obj.get("kind") == "turn"
            and metadata.get("role") in ("user", "assistant")
        ):
            # An exported conversation message goes back in as a message, so it
            # stays a "turn" and keeps its role.
            messages = [{"role": metadata["role"], "content": messages}]
        kwargs = {**scope, "metadata": metadata, "infer": infer, "timestamp": timestamp}
        batchable = (
            infer is False and isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
        )
        if not batchable:
            self.flush()
            self.call(line_no, messages, kwargs)
            return
        key = (
            tuple(scope.values()),
            json.dumps(metadata, sort_keys=True, default=str),
            json.dumps(timestamp, default=str),
        )
        if self.pending is not None and (
            self.pending.key != key or self.pending.size + len(messages) > IMPORT_BATCH
        ):
            self.flush()
        if self.pending is None:
            self.pending = _Batch(key, kwargs)
        self.pending.lines.append((line_no, messages))


class _LineError(Exception):
    def __init__(self, line_no: int, message: str) -> None:
        self.line_no = line_no
        super().__init__(f"line {line_no}: {message}")


@cli.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@_scope_options
@click.option(
    "--infer/--no-infer",
    default=None,
    help='Default for lines without "infer" [default: --infer for conversation lines, --no-infer for exported memories].',
)
@pass_app
def import_(
    app: App, file: Any, user_id: str | None, agent_id: str | None, run_id: str | None, infer: bool | None
) -> None:
    """Add memories from FILE, JSON lines ('-' reads stdin).

    \b
    Each line is a conversation turn:
      {"messages": [{"role": "user", "content": "..."}] | "text": "...",
       "user_id"?, "agent_id"?, "run_id"?, "metadata"?, "timestamp"?, "infer"?}
    or a memory written by `engram export`:
      {"memory": "...", "user_id": ..., "metadata": ..., "created_at": ...}
    (stored as is, dated created_at).

    A line without user_id, agent_id and run_id gets --user/--agent/--run.
    Consecutive verbatim turns of one scope are added in batches. A bad line
    stops the import with an error naming it; the lines before it stay imported.
    """
    lines = list(file)
    importer = _Importer(app.memory(), _scope(user_id, agent_id, run_id), infer)
    try:
        with click.progressbar(length=len(lines), label="importing", file=sys.stderr) as bar:
            for line_no, raw in enumerate(lines, 1):
                importer.line(line_no, raw)
                bar.update(1)
            importer.flush()
    except _LineError as exc:
        click.echo(
            f"{importer.counts['ADD']} memories from the lines before line {exc.line_no} were imported "
            "and stay in the store.",
            err=True,
        )
        raise CommandError(str(exc)) from exc
    counts = importer.counts
    summary = {
        "lines": len(lines),
        "added": counts["ADD"],
        "updated": counts["UPDATE"],
        "deleted": counts["DELETE"],
        "calls": importer.calls,
    }
    app.emit(
        summary,
        lambda: click.echo(
            f"Read {summary['lines']} lines; added {summary['added']} memories"
            + (f", updated {summary['updated']}" if summary["updated"] else "")
            + (f", deleted {summary['deleted']}" if summary["deleted"] else "")
            + "."
        ),
    )


@cli.command()
@_scope_options
@click.option(
    "--output",
    "-o",
    type=click.File("w", encoding="utf-8", lazy=True),
    help="Write to this file [default: stdout].",
)
@pass_app
def export(app: App, user_id: str | None, agent_id: str | None, run_id: str | None, output: Any) -> None:
    """Write the scope's memories as JSON lines, oldest first (`engram import` reads them).

    With --json and no --output, stdout gets one JSON document, {"results": [...]}.
    """
    items = app.memory().get_all(**_scope(user_id, agent_id, run_id), limit=_EVERYTHING)["results"][::-1]
    if output is None and app.json:
        click.echo(json.dumps({"results": items}, ensure_ascii=False, indent=2, default=str))
        return
    stream = output if output is not None else sys.stdout
    for item in items:
        stream.write(json.dumps(item, ensure_ascii=False, default=str) + "\n")
    stream.flush()
    where = output.name if output is not None else "stdout"
    if app.json:
        click.echo(json.dumps({"exported": len(items), "output": where}))
    else:
        click.echo(f"Exported {len(items)} memories to {where}.", err=True)


# maintenance ------------------------------------------------------------------------------
@cli.command()
@click.option(
    "--embedder",
    "new_embedder",
    metavar="SPEC",
    help="Re-embed every memory with this embedder (it becomes the store's).",
)
@pass_app
def reindex(app: App, new_embedder: str | None) -> None:
    """Rebuild the indexes from the store, or re-embed with a new embedder.

    Re-embedding needs only the stored texts, so it works even when the store's
    old embedder is not available here.
    """
    if new_embedder:
        from .embed import resolve_embedder
        from .memory import reembed

        embedder = resolve_embedder(new_embedder)
        with _progress("re-embedding") as progress:
            result = reembed(app.db, embedder, progress=progress)
        result = {**result, "embedder": embedder.name}
    else:
        memory = app.memory()
        result = {**memory.reindex(), "embedder": memory.embedder.name}
    app.emit(
        result,
        lambda: click.echo(
            f"Indexed {result['indexed']} memories"
            + (f"; re-embedded {result['re_embedded']} with {result['embedder']}" if new_embedder else "")
            + "."
        ),
    )


@cli.command()
@click.option(
    "--db",
    "demo_db",
    metavar="PATH",
    type=click.Path(dir_okay=False),
    help="Store to use [default: a new temporary folder; engram's --db and ENGRAM_DB are not used, "
    "so your own store is untouched].",
)
@pass_app
def demo(app: App, demo_db: str | None) -> None:
    """Show what Engram is for: a tutor that remembers a learner across conversations."""
    from .demo import run_demo

    result = run_demo(
        demo_db, echo=(lambda *_a, **_k: None) if app.json else click.echo, embedder=app.embedder
    )
    if app.json:
        app.emit(result, lambda: None)


def _json_after_command(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        app = ctx.find_object(App)
        if app is not None:
            app.json = True


@cli.group()
def bench() -> None:
    """Benchmarks that print their figures (recorded in bench/RESULTS.md)."""


# Commands that live in their own modules register here, before the --json pass
# below (each module keeps its heavy imports inside its commands).
from .benchmarks.commands import register as _register_benchmarks  # noqa: E402
from .cli_reprocess import register as _register_reprocess  # noqa: E402

_register_benchmarks(bench)
_register_reprocess(cli)
from .ace.commands import register as _register_ace  # noqa: E402

_register_ace(cli, bench)


def _accept_json_after(command: click.Command) -> None:
    """`engram list --json` reads as naturally as `engram --json list`: accept both."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_json_after(sub)
        return
    command.params.append(
        click.Option(
            ["--json"],
            is_flag=True,
            expose_value=False,
            callback=_json_after_command,
            help="Print one JSON document on stdout instead of tables.",
        )
    )


for _command in cli.commands.values():
    _accept_json_after(_command)


def main(argv: list[str] | None = None) -> None:
    """The ``engram`` console script."""
    cli.main(args=argv, prog_name="engram")


__all__ = ["cli", "main"]
