"""The ``memorist`` group: shared options, the opened Memory, output and error translation.

Every command module builds on what is here and nothing else of the CLI:

- :class:`App` holds what the global options configure (``--db``, ``--json``,
  ``--embedder``, ``--decay-days``) and opens the Memory lazily, so ``memorist --help``
  never opens a store or loads a model. Commands receive it with :data:`pass_app`.
- The global options work before *and* after the subcommand
  (``memorist --db x.db list`` and ``memorist list --db x.db``):
  :class:`MemoristCommand` and :class:`MemoristGroup` give every command a copy of them
  that writes into the same :class:`App`. The copy has no default and no
  environment variable, so it only ever overrides what was typed.
- Engine errors (:class:`~memorist.MemoristError`) become ``error: <message>`` on stderr
  with exit code 1 in one place, :meth:`MemoristGroup.invoke`, which also renames the
  Python argument names in a message to the flags a CLI user typed (``user_id`` →
  ``--user``). A malformed option value is a usage error, exit code 2.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from .. import __version__
from ..config import default_db_path
from ..errors import MemoristError, NotFoundError, ValidationError
from ..validate import MAX_LIMIT

if TYPE_CHECKING:
    from ..memory import Memory

_TABLE_WIDTH = 100  # when stdout is not a terminal, so output never depends on it
IN_MEMORY = ":memory:"


class CommandError(click.ClickException):
    """A failure shown as ``error: <message>`` on stderr, exit code 1."""

    label = "error"

    def show(self, file: Any = None) -> None:
        click.echo(f"{self.label}: {self.format_message()}", file=file, err=file is None)


# Python argument names as a CLI user knows them. A ValidationError's field (the
# message's prefix) is renamed; in the rest of a message only the scope ids are, as
# they are never anything else ("embedder" may be a word of a sentence).
_FLAG_NAMES = {
    "user_id": "--user",
    "agent_id": "--agent",
    "run_id": "--run",
    "limit": "--limit",
    "filters": "--filters",
    "metadata": "--metadata",
    "timestamp": "--timestamp",
    "threshold": "--threshold",
}
_SCOPE_IDS = re.compile(r"(?<![\w.\-])(user_id|agent_id|run_id)(?![\w(=])")


#: What a message says of the Python API, as a CLI user does it.
_PYTHON_CALLS = (
    (re.compile(r"Memory\.set_policy\('(\w+)'\) or (`memorist config set policy \1`)"), r"\2"),
    (re.compile(r" \(Memory\.set_policy\('\w+'\)\)"), ""),
    (re.compile(r"Memory\.set_policy\('(\w+)'\)"), r"`memorist config set policy \1`"),
)


def param_names(command: click.Command | None) -> dict[str, str]:
    """The flags and arguments of ``command`` by the Python names they are passed as
    (``memory_type`` -> ``--type``, ``n`` -> ``-n``, ``trajectory_id`` -> ``ID``): most of
    a command's options feed the engine's argument of the same name."""
    names: dict[str, str] = {}
    for param in command.params if command is not None else ():
        if not param.name or not param.expose_value:
            continue
        if isinstance(param, click.Option):
            names[param.name] = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        else:
            names[param.name] = param.human_readable_name.strip("[]").removesuffix("...")
    return names


def cli_message(
    exc: MemoristError,
    arguments: dict[str, str] | None = None,
    *,
    command: click.Command | None = None,
    things: dict[str, str] | None = None,
) -> str:
    """The engine's message with Python names replaced by the CLI's flags and arguments.

    A ValidationError's field is named as the running ``command``'s option or argument
    of that name, or as ``arguments`` maps it: a field to what fed it in the running
    command (``{"messages": "TEXT"}`` for ``add``); a part of it, such as
    ``messages[0].content``, is that argument too. ``things`` renames what a
    NotFoundError did not find (``{"memory": "trajectory"}``: the id a command takes
    is a trajectory's). A Python call a message suggests becomes the command that does it.
    """
    message = str(exc)
    if isinstance(exc, ValidationError) and message.startswith(f"{exc.field}: "):
        base = re.split(r"[\[.]", exc.field, maxsplit=1)[0]
        names = {**_FLAG_NAMES, **param_names(command), **(arguments or {})}
        key = exc.field if exc.field in names else base  # a flag that feeds one key (metadata.energy: --energy)
        if key in names:
            message = f"{names[key]}: {message[len(exc.field) + 2:]}"
    elif isinstance(exc, NotFoundError) and things and exc.what in things:
        message = f"{things[exc.what]} not found: {exc.ident!r}"
    for pattern, replacement in _PYTHON_CALLS:
        message = pattern.sub(replacement, message)
    return _SCOPE_IDS.sub(lambda m: _FLAG_NAMES[m.group(1)], message)


def resolve_id(app: App, prefix: str, *, thing: str, argument: str) -> str:
    """The full id of which ``prefix`` is the start; its errors name it as the command
    does: ``argument`` (the argument or flag that gave it) and ``thing`` (what it is:
    "trajectory not found", not "memory not found")."""
    app.arguments["memory_id"] = argument
    app.things["memory"] = thing
    return app.memory().resolve_id(prefix)


def _has_log(path: str | os.PathLike[str]) -> bool:
    """Whether a SQLite write-ahead log holds the store's pages yet (a new store's file
    stays empty until its first checkpoint)."""
    log = f"{os.fspath(path)}-wal"
    return os.path.isfile(log) and os.path.getsize(log) > 0


class AliasChoice(click.Choice):
    """A choice that still accepts former names, not shown in the help: each alias
    converts to the name it stands for (a preset's former name is the preset it names now)."""

    def __init__(self, choices: list[str], aliases: dict[str, str], **kwargs: Any) -> None:
        super().__init__(choices, **kwargs)
        self.aliases = dict(aliases)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.lower() in self.aliases:
            value = self.aliases[value.lower()]
        return super().convert(value, param, ctx)


class FiniteFloat(click.FloatRange):
    """A number option: a float in range, never NaN or infinite (a NaN passes every
    range check, and a NaN decay window would hide every memory)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


#: Every ``--limit``: 1 to the most results any call returns (a larger one is a usage
#: error, exit 2, as the library refuses it).
LIMIT = click.IntRange(1, MAX_LIMIT)


class EmbedderSpec(click.ParamType):
    """``--embedder``: a spec with something in it. An empty or blank one is refused
    (as ``Memory(embedder="")`` is) rather than read as "the store's own"; an empty
    ``MEMORIST_EMBEDDER`` is unset, as every empty ``MEMORIST_`` variable is."""

    name = "spec"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(
                f"{value!r} is empty or blank: name an embedder ('hashing', 'hashing:<dim>' or "
                "'sentence-transformers[:<model>]'), or leave the option out for the store's own.",
                param,
                ctx,
            )
        return value


@dataclass
class App:
    """What the global options configure; commands open the Memory through it."""

    db: str
    json: bool = False
    embedder: str | None = None
    decay_days: float | None = None
    #: ``--policy`` (None: MEMORIST_POLICY, else the default policy).
    policy: str | None = None
    #: ``--db`` was typed (not taken from MEMORIST_DB or the default): ``memorist demo``
    #: only writes into a store the user named on the command line.
    db_typed: bool = False
    #: Positional arguments of the running command, by the engine field they feed
    #: (its options are found by name: :func:`param_names`).
    arguments: dict[str, str] = field(default_factory=dict)
    #: What the running command's ids name, by what the engine calls them when it
    #: does not find one (``{"memory": "trajectory"}``).
    things: dict[str, str] = field(default_factory=dict)
    _console: Any = field(default=None, repr=False)
    _memory: Memory | None = field(default=None, repr=False)

    def memory(self, *, create: bool = False, **options: Any) -> Memory:
        """The command's Memory, opened by the first call (closed when the command ends).

        Without ``create`` the store must exist: a read of a mistyped path is an
        error naming it, never a new empty store.
        """
        if self._memory is not None:
            return self._memory
        from ..memory import Memory

        if not create:
            self.require_store()
        if self.policy is not None:
            options.setdefault("policy", self.policy)
        self._memory = Memory(self.db, embedder=self.embedder, decay_days=self.decay_days, **options)
        click.get_current_context().call_on_close(self._memory.close)
        return self._memory

    def require_store(self, *, empty_ok: bool = False) -> None:
        """The store ``--db`` names must exist: no file, or (unless ``empty_ok``, for the
        commands that examine files) an empty one, is an error naming the path."""
        from ..store import sqlite_path, store_kind

        try:
            kind = store_kind(self.db)
        except MemoristError as exc:
            raise CommandError(str(exc)) from exc
        if kind != "sqlite":
            return  # a database server: opening it says whether it is there
        path = sqlite_path(self.db)
        if path != IN_MEMORY and not os.path.isfile(path):
            raise CommandError(
                f"no store at {self.label}: check --db (or MEMORIST_DB); `memorist add` (or `memorist serve --create`) creates one"
            )
        if not empty_ok and path != IN_MEMORY and os.path.getsize(path) == 0 and not _has_log(path):
            raise CommandError(
                f"{self.label} is an empty file, not a store: check --db (or MEMORIST_DB); "
                "`memorist add` (or `memorist serve --create`) makes a store there"
            )

    def sqlite_file(self, what: str) -> str:
        """The SQLite file of ``--db`` for a command that works on files only."""
        from ..store import sqlite_path, store_kind

        self.require_store(empty_ok=True)
        if store_kind(self.db) != "sqlite":
            raise CommandError(
                f"{what} works on SQLite store files; for PostgreSQL use its own tools (amcheck, pg_dump)"
            )
        path = os.fspath(sqlite_path(self.db))
        if path == IN_MEMORY:
            raise CommandError(f"an in-memory store has no file for {what}; name one with --db")
        return path

    @property
    def label(self) -> str:
        """The store as messages show it: a URL's password hidden."""
        from ..store import redact

        return redact(self.db)

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
            table.add_row(*(Text(printable(cell(v))) for v in row))
        self.console.print(table)

    def pairs(self, data: dict[str, Any]) -> None:
        self.table(
            [("key", {"style": "bold", "no_wrap": True}), ("value", {"overflow": "fold"})],
            [[k, v] for k, v in data.items()],
        )


pass_app = click.make_pass_decorator(App)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str) if value else "-"
    return str(value)


#: Control characters but newline and tab: C0, DEL and C1 (ESC among them). Printed raw,
#: a stored text could move the cursor, recolour or retitle the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` for a terminal: each control character written as ``--json`` writes
    it (ESC as ``\\u001b``), newlines and tabs kept."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def echo(message: Any = None, **options: Any) -> None:
    """:func:`click.echo` of text that may hold stored words (a bullet, a minute's note,
    an insight): its control characters escaped as :func:`printable` does."""
    click.echo(printable(message) if isinstance(message, str) else message, **options)


def when(iso: str | None) -> str:
    """``2024-05-01T12:30:05.123+00:00`` -> ``2024-05-01 12:30`` (UTC)."""
    return (iso or "")[:16].replace("T", " ") or "-"


#: The columns of a memory's tier and energy (the energy policy's items carry them).
TIER_COLUMNS: list[tuple[str, dict[str, Any]]] = [("tier", {"no_wrap": True}), ("energy", {"justify": "right"})]


def tier_cells(item: dict[str, Any]) -> list[str]:
    """An item's cells under :data:`TIER_COLUMNS`."""
    energy = item.get("energy")
    return [str(item.get("tier") or "-"), "-" if energy is None else f"{energy:.3f}"]


# the global options ------------------------------------------------------------------------
_DB_HELP = "The store: a SQLite file (or sqlite:///file.db) or a postgresql:// URL."
_JSON_HELP = "Print one JSON document on stdout instead of tables."
_EMBEDDER_HELP = (
    "The store's embedder: 'hashing', 'hashing:<dim>' or 'sentence-transformers[:<model>]' "
    "[default: the store's own; for a new store MiniLM if installed, else hashing]."
)
_DECAY_HELP = "Memories not updated for N days are no longer returned (0: never) [default: 0]."
_POLICY_HELP = (
    "The memory policy: 'default', or 'energy' for energy tiers (memories lose energy over time, "
    "expire, or move to longer-lived tiers when used) [default: default]."
)
_POLICIES = ("default", "energy")


def _app_of(ctx: click.Context) -> App | None:
    return ctx.find_object(App)


def _late(attr: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """The callback of a global option typed after the subcommand: it overrides."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        app = _app_of(ctx)
        if app is None or value is None or value is False:
            return
        setattr(app, attr, value)
        if attr == "db":
            app.db_typed = True

    return callback


def late_global_options() -> list[click.Option]:
    """Fresh copies of the global options for one command (each command owns its params)."""
    return [
        click.Option(["--db"], metavar="PATH", expose_value=False, callback=_late("db"), help=_DB_HELP),
        click.Option(["--json"], is_flag=True, default=False, expose_value=False, callback=_late("json"), help=_JSON_HELP),
        click.Option(["--embedder"], type=EmbedderSpec(), metavar="SPEC", expose_value=False, callback=_late("embedder"), help=_EMBEDDER_HELP),
        click.Option(
            ["--decay-days"],
            type=FiniteFloat(min=0),
            metavar="N",
            expose_value=False,
            callback=_late("decay_days"),
            help=_DECAY_HELP,
        ),
        click.Option(
            ["--policy"],
            type=click.Choice(_POLICIES, case_sensitive=False),
            expose_value=False,
            callback=_late("policy"),
            help=_POLICY_HELP,
        ),
    ]


class Interrupted(CommandError):
    """Ctrl-C: ``interrupted: <what>`` on stderr, exit code 130 (as a shell reports a
    command SIGINT ended)."""

    exit_code = 130
    label = "interrupted"


#: What an interrupted command leaves behind, by its name after ``memorist``; any other
#: command's interruption only says which it was (``import`` says more itself).
_INTERRUPTED = {
    "reindex": "the store is unchanged (its vectors are rewritten in one transaction, undone by the interruption)",
    "backup": "DEST was not written, and the store is unchanged",
    "check": "the store is unchanged (check only reads it)",
    "export": "the store is unchanged; the export written so far is incomplete",
    "bench learn": "no store of yours was changed (the benchmark works in temporary stores)",
    "bench evolve": "no store of yours was changed (the benchmark works in temporary stores)",
}


def interrupted_message(command_path: str) -> str:
    """What an interrupted command says: which command, and the store's state when known."""
    name = command_path.partition(" ")[2]  # without the program's name, however it was started
    note = _INTERRUPTED.get(name)
    command = f"`memorist {name}`" if name else "`memorist`"
    return f"{command} stopped before it finished" + (f"; {note}" if note else "")


class MemoristCommand(click.Command):
    """A command that also accepts the global options after its name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        taken = {opt for p in self.params for opt in getattr(p, "opts", ())}
        self.params.extend(o for o in late_global_options() if not taken.intersection(o.opts))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted(interrupted_message(ctx.command_path)) from None
        except MemoristError as exc:
            app = _app_of(ctx)
            message = cli_message(exc, app.arguments if app else None, command=self, things=app.things if app else None)
            raise CommandError(message) from exc


class MemoristGroup(click.Group):
    """A command group whose commands accept the global options after their names.

    The root group is also the one place where engine errors become CLI errors.
    """

    command_class = MemoristCommand

    def __init__(self, *args: Any, root: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not root:
            self.params.extend(late_global_options())

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # in a group's own callback (a command's is caught by its command)
            raise Interrupted(interrupted_message(ctx.command_path)) from None
        except MemoristError as exc:
            app = _app_of(ctx)
            raise CommandError(cli_message(exc, app.arguments if app else None, things=app.things if app else None)) from exc


MemoristGroup.group_class = MemoristGroup


class _DbOption(click.Option):
    """``--db``: its default is computed when shown or used, never at import."""

    #: The default as the CLI reference states it (the computed one depends on the machine).
    doc_default = "memorist.db in the user data directory (~/.local/share/memorist on Linux)"

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return str(default_db_path())


@click.group(cls=MemoristGroup, root=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", cls=_DbOption, metavar="PATH", envvar="MEMORIST_DB", show_envvar=True, show_default=True, help=_DB_HELP)
@click.option("--json", "json_output", is_flag=True, help=_JSON_HELP)
@click.option("--embedder", type=EmbedderSpec(), metavar="SPEC", envvar="MEMORIST_EMBEDDER", show_envvar=True, help=_EMBEDDER_HELP)
@click.option(
    "--decay-days",
    type=FiniteFloat(min=0),
    metavar="N",
    envvar="MEMORIST_DECAY_DAYS",
    show_envvar=True,
    help=_DECAY_HELP,
)
@click.option(
    "--policy",
    type=click.Choice(_POLICIES, case_sensitive=False),
    envvar="MEMORIST_POLICY",
    show_envvar=True,
    help=_POLICY_HELP,
)
# The package's one version (the distribution's metadata is built from it too), not the
# installed metadata's: an editable install keeps the version it was installed at.
@click.version_option(__version__, prog_name="memorist")
@click.pass_context
def cli(ctx: click.Context, db: str, json_output: bool, embedder: str | None, decay_days: float | None, policy: str | None) -> None:
    """Memorist: long-term memory for LLM agents.

    Memories belong to a scope: a user (--user), an agent (--agent) and/or a run
    or conversation (--run); most commands need at least one of them. The options
    below also work after the command: `memorist list --db alex.db --user alex`.

    Start with `memorist demo`.
    """
    typed = ctx.get_parameter_source("db") is ParameterSource.COMMANDLINE
    ctx.obj = App(db=db, json=json_output, embedder=embedder or None, decay_days=decay_days, db_typed=typed,
                  policy=policy.lower() if policy else None)


# shared pieces of commands --------------------------------------------------------------------
def scope_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--run", "run_id", metavar="ID", help="Run (conversation) id.")(func)
    func = click.option("--agent", "agent_id", metavar="ID", help="Agent id.")(func)
    return click.option("--user", "user_id", metavar="ID", help="User id.")(func)


def scope(user_id: str | None, agent_id: str | None, run_id: str | None) -> dict[str, str | None]:
    return {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}


def describe_scope(ids: dict[str, str | None]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in ids.items() if v is not None)


def json_object(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, Any] | None:
    """Option callback: the value parsed as a JSON object, or a usage error saying why not."""
    if value is None:
        return None
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc.msg} (column {exc.colno})", ctx=ctx, param=param) from exc
    if not isinstance(data, dict):
        raise click.BadParameter(
            f'must be a JSON object like \'{{"key": "value"}}\', got {type(data).__name__}', ctx=ctx, param=param
        )
    return data


def read_text(words: tuple[str, ...]) -> str:
    """The words joined by spaces, or stdin when the only word is ``-``."""
    if words == ("-",):
        return read_file(click.open_file("-", encoding="utf-8")).rstrip("\n")  # as a click.File("r") reads "-"
    return " ".join(words)


def file_name(file: IO[Any]) -> str:
    """A file argument or option as messages name it: ``stdin`` for ``-``."""
    name = getattr(file, "name", "-")
    return "stdin" if name in ("<stdin>", "-") else str(name)


def read_file(file: IO[str]) -> str:
    """The whole text of a file argument or option, a ``click.File("r",
    encoding="utf-8")`` (``-``: stdin). Bytes that are not UTF-8 are an error naming
    the file and where they are, not a traceback."""
    try:
        return file.read()
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise CommandError(f"{file_name(file)}: is not UTF-8 text ({exc.reason} at byte {exc.start}, line {line})") from exc


def stdin_is_tty() -> bool:
    return sys.stdin.isatty()


# closed standard streams --------------------------------------------------------------------
class _ClosedStream(io.TextIOBase):
    """Stands in for a standard stream the process was started without (``<&-``,
    ``>&-``: Python makes it None). Reading a closed stdin, or writing to a closed
    stdout, is an error saying so; what goes to a closed stderr is dropped (there is
    nowhere to say anything)."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, stream: str) -> None:
        super().__init__()
        self.stream = stream
        self.name = f"<{stream}>"

    def _closed(self) -> CommandError:
        if self.stream == "stdin":
            return CommandError(
                "stdin is closed, so there is nothing to read: pipe the input in, or give it as an argument or a file"
            )
        return CommandError(
            "stdout is closed, so the output could not be written (what the command did is kept): "
            "redirect it (to /dev/null to discard it) instead of closing it"
        )

    def readable(self) -> bool:
        return self.stream == "stdin"

    def writable(self) -> bool:
        return self.stream != "stdin"

    def isatty(self) -> bool:
        return False

    def read(self, size: int | None = -1) -> str:
        raise self._closed()

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        raise self._closed()

    def write(self, text: str) -> int:
        if self.stream == "stderr":
            return len(text)
        raise self._closed()

    def flush(self) -> None:
        pass


def stdin_closed() -> bool:
    """Whether the process was started with its stdin closed (``<&-``)."""
    return isinstance(sys.stdin, _ClosedStream)


@contextmanager
def standard_streams() -> Iterator[None]:
    """The command runs with a stand-in for each standard stream the process was
    started without (see :class:`_ClosedStream`); the originals come back after."""
    saved = sys.stdin, sys.stdout, sys.stderr
    for name in ("stdin", "stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, _ClosedStream(name))
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def confirm(question: str) -> None:
    """Ask ``question`` on stderr; anything but yes aborts (exit 1). With stdin
    closed nothing can be answered: that is a no, said as an error."""
    if stdin_closed():
        asked = question if question.endswith(("?", ".")) else f"{question}."
        raise CommandError(f"stdin is closed, so this could not be asked and counts as no (nothing was changed): {asked} Pass --yes to confirm without asking.")
    click.confirm(question, abort=True, err=True)


def time_left(seconds: float) -> str:
    """A remaining time as a bar shows it: tenths of a second under ten seconds
    (a short job's estimate is worth reading), whole seconds under a minute, then
    minutes and seconds, then hours and minutes."""
    if not math.isfinite(seconds) or seconds < 0:
        return ""
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


#: A bar shows its first estimate once this much time has passed (the rate of
#: the first few items says little).
_FIRST_ESTIMATE_AFTER = 0.25


@contextmanager
def progress(label: str, total: int | None = None) -> Iterator[Callable[..., None]]:
    """An ``update(done, total=None)`` callback drawing a bar on stderr.

    The bar shows the time left at the rate so far, from a quarter of a second
    on, in tenths of a second under ten seconds. When stderr is not a terminal
    only the label is written, once (``update.drawn`` is False: callers may skip
    the work of reporting).
    """
    if not sys.stderr.isatty():
        click.echo(label, err=True)

        def ignore(done: int, total: int | None = None) -> None:
            del done, total

        ignore.drawn = False  # type: ignore[attr-defined]
        yield ignore
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TaskProgressColumn,
    )
    from rich.text import Text

    first: list[tuple[float, int]] = []  # (when, how much was done) at the first report

    class TimeLeft(ProgressColumn):
        """The time left at the rate since the first report (work done before it,
        such as loading a benchmark's conversations, is not the rate)."""

        def render(self, task: Task) -> Text:
            if task.finished or task.total is None or not first:
                return Text("")
            began, done_then = first[0]
            elapsed, moved = time.monotonic() - began, task.completed - done_then
            if moved <= 0 or elapsed < _FIRST_ESTIMATE_AFTER:
                return Text("")
            shown = time_left(elapsed * (task.total - task.completed) / moved)
            return Text(f"{shown} left" if shown else "", style="progress.remaining")

    bar = Progress(
        "[progress.description]{task.description}", BarColumn(), TaskProgressColumn(), MofNCompleteColumn(), TimeLeft(),
        console=Console(file=sys.stderr), transient=False,
    )
    task = bar.add_task(label, total=total)

    def update(done: int, total: int | None = None) -> None:
        if not first:
            first.append((time.monotonic(), done))
        bar.update(task, completed=done, **({"total": max(total, 1)} if total is not None else {}))

    update.drawn = True  # type: ignore[attr-defined]
    with bar:
        yield update


__all__ = [
    "AliasChoice",
    "App",
    "CommandError",
    "LIMIT",
    "MemoristCommand",
    "MemoristGroup",
    "cell",
    "cli",
    "cli_message",
    "param_names",
    "confirm",
    "describe_scope",
    "echo",
    "file_name",
    "json_object",
    "pass_app",
    "printable",
    "progress",
    "read_file",
    "read_text",
    "resolve_id",
    "scope",
    "FiniteFloat",
    "Interrupted",
    "interrupted_message",
    "scope_options",
    "standard_streams",
    "stdin_closed",
    "stdin_is_tty",
    "time_left",
    "when",
]
