"""``memorist serve`` (the memory service) and ``memorist keys`` (its API keys)."""

from __future__ import annotations

import ipaddress
import shlex
from typing import Any

import click
from click.core import ParameterSource

from ..config import SERVE_ENVIRONMENT, serve_environment
from ..errors import ConfigurationError
from .app import App, CommandError, FiniteFloat, cli, pass_app, when

# Defaults of memorist.server.limits, repeated here so `memorist --help` imports no FastAPI.
_MAX_BODY_BYTES = 1_048_576
_MAX_MESSAGES = 100
_MAX_TEXT_CHARS = 100_000
_MAX_CONCURRENCY = 64
_TIMEOUT_KEEP_ALIVE = 5.0
_TIMEOUT_HEAD = 10.0
_TIMEOUT_BODY = 30.0
_AUTH_FAILURES = 20.0
_ERASURES = 2.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` (what uvicorn binds) is reachable only from this machine."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _env(option: str) -> str:
    return f" [env: {SERVE_ENVIRONMENT[option]}]"


def _environment_defaults(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the options of :data:`memorist.config.SERVE_ENVIRONMENT` that no
    flag gave taken from the environment, checked as the flag is (an error names the
    variable)."""
    ctx = click.get_current_context()
    out = dict(values)
    for option, (var, raw) in serve_environment().items():
        if ctx.get_parameter_source(option) is not ParameterSource.DEFAULT:
            continue
        param = next(p for p in ctx.command.params if p.name == option)
        try:
            out[option] = param.type.convert(raw.strip(), param, ctx)
        except click.BadParameter as exc:
            raise click.BadParameter(exc.message, param_hint=_hint(option, var)) from exc
        out["from environment"] = {*out.get("from environment", ()), option}
    return out


def _hint(option: str, var: str | None = None) -> str:
    flag = "--" + option.replace("_", "-")
    return f"{var} (the default of {flag})" if var else flag


def _source(option: str, settings: dict[str, Any]) -> str:
    """What gave ``option`` its value, for an error: its flag, or its variable."""
    from_environment = option in settings.get("from environment", ())
    return _hint(option, SERVE_ENVIRONMENT[option] if from_environment else None)


#: The options of ServerLimits' fields, where their names differ.
_LIMIT_OPTIONS = {"rate_per_minute": "rate_limit", "auth_failures_per_minute": "auth_failures", "erasures_per_minute": "erasures"}


def parse_cli_rate(text: str) -> float:
    """A ``--rate-limit`` as requests per minute (0: none). Only 'off' turns the limit
    off: a rate of 0 is refused, so a typo or a computed 0 never silently does."""
    from ..server.limits import parse_rate

    rate = parse_rate(text)
    if rate == 0 and text.strip().lower() not in ("off", "none"):
        raise ConfigurationError(f"a rate of 0 would turn rate limiting off: give 'off' for that, or a rate above 0 (got {text!r})")
    return rate


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host and not host.startswith("[") else f"http://{host}:{port}"


def _server_modules(command: str = "serve") -> Any:
    try:
        import uvicorn  # noqa: F401

        from .. import server
    except ImportError as exc:
        raise CommandError(f"memorist {command} needs the server extra: pip install 'memorist[server]' ({exc})") from exc
    return server


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on. Other than loopback needs API keys.")
@click.option("--port", type=click.IntRange(1, 65535), default=6060, show_default=True, help="Port to listen on.")
@click.option("--rate-limit", default="600/min", show_default=True, metavar="N/min",
              help="Requests per API key (N/s, N/min, N/h; 'off')." + _env("rate_limit"))
@click.option("--burst", type=click.IntRange(min=1), default=60, show_default=True,
              help="Requests a key may make at once." + _env("burst"))
@click.option("--max-body-bytes", type=click.IntRange(min=1), default=_MAX_BODY_BYTES, show_default=True,
              help="Largest request body (413 beyond)." + _env("max_body_bytes"))
@click.option("--max-messages", type=click.IntRange(min=1), default=_MAX_MESSAGES, show_default=True,
              help="Most messages in one add (413 beyond)." + _env("max_messages"))
@click.option("--max-text-chars", type=click.IntRange(min=1), default=_MAX_TEXT_CHARS, show_default=True,
              help="Longest message, query or memory text (422 beyond)." + _env("max_text_chars"))
@click.option("--max-connections", type=click.IntRange(min=1),
              help="Open connections at most; beyond, the one waiting longest is closed. [default: the descriptor limit less a reserve]" + _env("max_connections"))
@click.option("--max-concurrency", type=click.IntRange(min=1), default=_MAX_CONCURRENCY, show_default=True,
              help="/api/ requests at work at once (503 beyond)." + _env("max_concurrency"))
@click.option("--max-concurrency-per-caller", type=click.IntRange(min=1),
              help="/api/ requests of one API key (without keys: one client) at work at once (429 beyond). "
              "[default: a quarter of --max-concurrency, at least 2]" + _env("max_concurrency_per_caller"))
@click.option("--timeout-keep-alive", type=FiniteFloat(min=0, min_open=True, max=86_400), default=_TIMEOUT_KEEP_ALIVE,
              show_default=True, metavar="S",
              help="Seconds an idle kept-alive connection stays open." + _env("timeout_keep_alive"))
@click.option("--timeout-head", type=FiniteFloat(min=0, min_open=True, max=86_400), default=_TIMEOUT_HEAD, show_default=True,
              metavar="S",
              help="Seconds a request's line and headers may take to arrive (the connection is closed beyond)." + _env("timeout_head"))
@click.option("--timeout-body", type=FiniteFloat(min=0, min_open=True, max=86_400), default=_TIMEOUT_BODY, show_default=True,
              metavar="S", help="Seconds a request's body may take to arrive (408 beyond)." + _env("timeout_body"))
@click.option("--auth-failures", type=FiniteFloat(min=0, max=1e9), default=_AUTH_FAILURES, show_default=True,
              metavar="N",
              help="Requests with a wrong API key per minute from one address (429 beyond; 0: no limit)." + _env("auth_failures"))
@click.option("--erasures", type=FiniteFloat(min=0, max=1e9), default=_ERASURES, show_default=True, metavar="N",
              help="Erasures per minute per API key; each rewrites the whole store (429 beyond; 0: no limit)." + _env("erasures"))
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info", show_default=True)
@click.option("--access-log/--no-access-log", default=True, show_default=True, help="Log every request.")
@click.option("--create", is_flag=True, help="Make a new store if --db names none (else a missing store is an error).")
@pass_app
def serve(
    app: App,
    host: str,
    port: int,
    rate_limit: str,
    burst: int,
    max_body_bytes: int,
    max_messages: int,
    max_text_chars: int,
    max_connections: int | None,
    max_concurrency: int,
    max_concurrency_per_caller: int | None,
    timeout_keep_alive: float,
    timeout_head: float,
    timeout_body: float,
    auth_failures: float,
    erasures: float,
    log_level: str,
    access_log: bool,
    create: bool,
) -> None:
    """Serve the store over HTTP: the REST API, the memory panel at /,
    the API's documentation at /docs.

    \b
    With no API key in the store this is a development server: every request is
    allowed, and it listens on loopback only (it refuses another --host). Once
    the store holds a key (`memorist keys create --db PATH --tenant NAME`, with
    the same --db), every /api/ request needs one, in 'Authorization: Bearer
    <key>' or 'X-API-Key: <key>'.
    """
    settings = _environment_defaults({
        "rate_limit": rate_limit, "burst": burst, "max_body_bytes": max_body_bytes, "max_messages": max_messages,
        "max_text_chars": max_text_chars, "max_connections": max_connections, "max_concurrency": max_concurrency,
        "max_concurrency_per_caller": max_concurrency_per_caller, "timeout_keep_alive": timeout_keep_alive,
        "timeout_head": timeout_head, "timeout_body": timeout_body, "auth_failures": auth_failures,
        "erasures": erasures,
    })
    rate_limit, burst = settings["rate_limit"], settings["burst"]
    max_body_bytes, max_messages, max_text_chars = settings["max_body_bytes"], settings["max_messages"], settings["max_text_chars"]
    max_connections, max_concurrency = settings["max_connections"], settings["max_concurrency"]
    max_concurrency_per_caller = settings["max_concurrency_per_caller"]
    timeout_keep_alive, timeout_head, timeout_body = settings["timeout_keep_alive"], settings["timeout_head"], settings["timeout_body"]
    auth_failures, erasures = settings["auth_failures"], settings["erasures"]
    if not create:
        app.require_store()  # a mistyped --db is an error, not a new empty store
    server = _server_modules()
    import uvicorn

    app.arguments = {"rate_per_minute": "--rate-limit", "burst": "--burst"}
    try:
        rate = parse_cli_rate(rate_limit)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), param_hint=_source("rate_limit", settings)) from exc
    from ..server.connections import (
        ConnectionGuard,
        accept_backlog,
        default_max_connections,
        descriptor_limit,
        protocol_class,
    )

    descriptors = descriptor_limit()
    if max_connections is None:
        max_connections = default_max_connections(descriptors)
    elif max_connections > descriptors - 64:
        raise click.BadParameter(
            f"{max_connections} connections need more descriptors than this process may open ({descriptors}; "
            "raise it with `ulimit -n`)",
            param_hint=_source("max_connections", settings),
        )
    try:
        limits = server.ServerLimits(
            max_body_bytes=max_body_bytes,
            max_messages=max_messages,
            max_text_chars=max_text_chars,
            rate_per_minute=rate,
            burst=burst,
            auth_failures_per_minute=auth_failures,
            erasures_per_minute=erasures,
            max_concurrency=max_concurrency,
            max_concurrency_per_caller=max_concurrency_per_caller,
            timeout_keep_alive=timeout_keep_alive,
            timeout_head=timeout_head,
            timeout_body=timeout_body,
            max_connections=max_connections,
        )
    except ConfigurationError as exc:  # a bound the option's type does not know (a number too large)
        field, _, problem = str(exc).partition(" ")
        option = _LIMIT_OPTIONS.get(field, field)
        if option not in SERVE_ENVIRONMENT:
            raise
        raise click.BadParameter(problem, param_hint=_source(option, settings)) from exc
    guard = ConnectionGuard(max_connections=max_connections, timeout_head=timeout_head, timeout_body=timeout_body)
    local = is_loopback(host)
    # The app checks the store before anything writes into it (the keys' table
    # included: a damaged store gets none), so the keys are read through it.
    application = server.create_app(
        app.db,
        decay_days=app.decay_days,
        embedder=app.embedder,
        limits=limits,
        require_keys=not local,
        local_only=local,
        policy=app.policy,
    )
    service = application.state.service
    active = service.keys.list(include_revoked=False)
    if not active and not local:
        service.close()
        raise CommandError(
            f"refusing to serve on {host}: the store {app.label} holds no API key, so this would be an open "
            "development server reachable from other machines. Create a key in it first "
            f"(`memorist keys create --db {shlex.quote(app.label)} --tenant NAME`), or serve on 127.0.0.1."
        )
    # Open one tenant's Memory now: the embedder (shared by all) loads before the
    # first request, and a store that cannot be served fails here, with its error.
    tenants = sorted({k.tenant_id for k in active}) if active else [""]
    service.tenants.get(tenants[0])
    url = _url(host, port)
    click.echo(f"Memorist memory service: {url}  (store {app.label})")
    if active:
        shown = ", ".join(repr(t) for t in tenants[:5]) + (", ..." if len(tenants) > 5 else "")
        click.echo(f"  API keys required: {len(active)} active key{'s' if len(active) != 1 else ''} (tenants {shown}).")
        _warn_untenanted_served(service, tenants)
    else:
        click.echo(
            "  Development mode: the store holds no API key, so every request is allowed (loopback only).\n"
            f"  `memorist keys create --db {shlex.quote(app.label)} --tenant NAME` turns keys on."
        )
    click.echo(f"  Memory panel: {url}/   API docs: {url}/docs   Health: {url}/healthz")
    if rate:
        click.echo(f"  Limits: {rate:g} requests/min per key (bursts of {burst}), bodies up to {max_body_bytes:,} bytes, {max_messages} messages per add.")
    click.echo(
        f"  Connections: at most {max_connections:,} open, {max_concurrency} requests at work "
        f"({limits.caller_share} per {'key' if active else 'client'}); heads within "
        f"{timeout_head:g} s, bodies within {timeout_body:g} s, idle connections kept {timeout_keep_alive:g} s."
    )
    try:
        uvicorn.run(
            application,
            host=host,
            port=port,
            log_level=log_level,
            access_log=access_log,
            http=protocol_class(guard),
            timeout_keep_alive=timeout_keep_alive,  # type: ignore[arg-type]
            backlog=accept_backlog(descriptors, max_connections),
        )
    finally:
        service.close()  # the app's lifespan closed it already, unless uvicorn never started


# keys ---------------------------------------------------------------------------------
@cli.group()
def keys() -> None:
    """API keys of the memory service (stored as hashes in the store).

    \b
    A key binds a tenant, and optionally one user and/or one agent: requests
    made with it see only that tenant's memories, and act as that user or agent
    (its own memories, and another's only as a relation shares them). `memorist serve` requires a key on
    every /api/ request once the store holds one.
    """


def _key_store(app: App, *, create: bool = False) -> Any:
    server = _server_modules("keys")
    if app.db == ":memory:":
        raise CommandError("API keys live in a store file; name one with --db")
    if not create:
        app.require_store()
    store = server.KeyStore(app.db)
    click.get_current_context().call_on_close(store.close)
    return store


@keys.command("create")
@click.option("--tenant", "tenant_id", required=True, metavar="NAME", help="The tenant the key acts in.")
@click.option("--user", "user_id", metavar="ID", help="Bind the key to this user: it sees no other.")
@click.option("--agent", "agent_id", metavar="ID", help="Bind the key to this agent (alone or with --user): it acts as that agent.")
@click.option("--label", default="", help="A note to recognise the key by in `memorist keys list`.")
@pass_app
def keys_create(app: App, tenant_id: str, user_id: str | None, agent_id: str | None, label: str) -> None:
    """Create a key and print it, once: only its hash is stored.

    The key alone goes to stdout (KEY=$(memorist keys create --tenant acme)); the
    note about it to stderr.
    """
    app.arguments = {"tenant_id": "--tenant", "user_id": "--user", "agent_id": "--agent", "label": "--label"}
    store = _key_store(app, create=True)
    key, record = store.create(tenant_id, user_id=user_id, agent_id=agent_id, label=label)
    _warn_untenanted(app, record.tenant_id)
    if app.json:
        app.emit({"key": key, **record.to_item()}, lambda: None)
        return
    bound = f", user {record.user_id!r}" if record.user_id else ""
    bound += f", agent {record.agent_id!r}" if record.agent_id else ""
    bound = bound or " (any user)"
    click.echo(f"Created key {record.key_id} for tenant {record.tenant_id!r}{bound}. It is shown only now:", err=True)
    click.echo(key)


def _warn_untenanted(app: App, tenant_id: str) -> None:
    """Say so (on stderr) when the store holds records of no tenant: a key of
    ``tenant_id`` cannot see them until they are adopted."""
    from ..pipelines.adopt import untenanted

    memory = app.memory()
    source = memory.config.tenant_id
    if source == tenant_id:
        return
    count = untenanted(memory.store, source)
    if count:
        where = f"tenant {source!r}" if source else "no tenant"
        click.echo(
            f"warning: {app.label} holds {count:,} memories and other records (bullets, trajectories, minutes...) "
            f"written before keys, in {where}; keys of tenant {tenant_id!r} do not see them. Move them into it with "
            f"`memorist keys adopt --tenant {tenant_id}` (add --user ID to move one user's only).",
            err=True,
        )


def _warn_untenanted_served(service: Any, tenants: list[str]) -> None:
    """At start-up with keys: records written before them (the development server's
    tenant, "") are out of every key's reach; say how to adopt them."""
    from ..errors import StoreError
    from ..pipelines.adopt import untenanted

    try:
        count = untenanted(service.tenants.get(tenants[0]).store, "")
    except StoreError:
        return  # a damaged store says so at /healthz
    if count:
        click.echo(
            f"  warning: {count:,} memories and other records were written before keys, in no tenant: no key sees "
            f"them. `memorist keys adopt --tenant NAME` moves them into a tenant.",
            err=True,
        )


@keys.command("adopt")
@click.option("--tenant", "tenant_id", required=True, metavar="NAME", help="The tenant the records move into.")
@click.option("--user", "user_id", metavar="ID", help="Only this user's records [default: every user's].")
@pass_app
def keys_adopt(app: App, tenant_id: str, user_id: str | None) -> None:
    """Move the records written before keys (in no tenant) into tenant NAME.

    \b
    Memories, playbook bullets, trajectories, reflections, minutes and test
    memories move with their vectors; a scope that moves whole keeps its history.
    The move is one transaction, logged in the event log (an 'adopt' event), and
    running it again moves nothing. Without keys, the server, the CLI and the library
    write in no tenant (MEMORIST_TENANT names another).
    """
    from ..pipelines.adopt import adopt

    app.arguments = {"tenant_id": "--tenant"}
    app.require_store()
    memory = app.memory()
    result = adopt(memory.store, tenant_id, user_id=user_id, source=memory.config.tenant_id, actor="memorist keys adopt")

    def human() -> None:
        whose = f" of user {result['user_id']!r}" if result["user_id"] else ""
        source = f"tenant {result['from_tenant']!r}" if result["from_tenant"] else "no tenant"
        if not result["memories"]:
            click.echo(f"Nothing to adopt: {app.label} holds no records{whose} in {source}.")
            return
        click.echo(f"Moved {result['memories']:,} records{whose} from {source} into tenant {result['tenant_id']!r} "
                   f"({result['spaces']} scopes moved whole, {result['merged']} merged into scopes the tenant had).")

    app.emit(result, human)


@keys.command("list")
@click.option("--active", "active_only", is_flag=True, help="Leave out revoked keys.")
@pass_app
def keys_list(app: App, active_only: bool) -> None:
    """The keys (never their secrets), oldest first."""
    store = _key_store(app)
    records = store.list(include_revoked=not active_only)
    items = [r.to_item() for r in records]

    def human() -> None:
        if not records:
            click.echo("No API keys: `memorist serve` runs as a development server (loopback only).")
            return
        app.table(
            [("key id", {"no_wrap": True}), ("tenant", {}), ("user", {}), ("agent", {}), ("label", {}), ("status", {}), ("created", {"no_wrap": True}), ("last used", {"no_wrap": True})],
            [
                [i["key_id"], i["tenant_id"], i["user_id"] or "(any)", i["agent_id"] or "(any)", i["label"] or None, "active" if i["active"] else "revoked", when(i["created_at"]), when(i["last_used_at"])]
                for i in items
            ],
        )

    app.emit(items, human)


@keys.command("revoke")
@click.argument("key_id")
@pass_app
def keys_revoke(app: App, key_id: str) -> None:
    """Revoke KEY_ID (as `memorist keys list` shows it): requests with it get 401."""
    app.arguments = {"memory_id": "KEY_ID"}
    store = _key_store(app)
    before = store.get(key_id)
    record = store.revoke(key_id)
    app.emit(
        record.to_item(),
        lambda: click.echo(
            f"Key {record.key_id} (tenant {record.tenant_id!r}) "
            + ("was already revoked." if not before.active else "revoked: requests with it now get 401.")
        ),
    )
