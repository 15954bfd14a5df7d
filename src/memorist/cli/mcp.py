"""``memorist mcp``: Memorist's memory as the tools of an MCP host.

The server itself is :mod:`memorist.mcp_server`; this command opens the store, fixes
the scope and runs it over stdio (what desktop hosts launch) or streamable HTTP.
"""

from __future__ import annotations

import contextlib
import ipaddress
import sys

import click

from .app import App, cli, describe_scope, pass_app, scope, scope_options

_LOOPBACK_NAMES = {"localhost"}


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@cli.command("mcp")
@scope_options
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: the host launches this command; http: streamable HTTP at http://HOST:PORT/mcp.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (--transport http).")
@click.option("--port", type=click.IntRange(1, 65535), default=6061, show_default=True, help="Port (--transport http).")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Listen on a non-loopback --host. The MCP endpoint has no authentication: "
    "whoever reaches it reads and changes this scope's memories.",
)
@pass_app
def mcp(
    app: App,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    transport: str,
    host: str,
    port: int,
    allow_remote: bool,
) -> None:
    """Serve the memories of one scope as MCP tools: add, search, list, get, update,
    delete and history of its memories; erasing them, undoing a merge or a
    reconciliation, consolidating, and sharing (grant, revoke, list, check) where
    the scope allows; end_conversation under --policy energy (the MCP page of the
    docs says which server lists which).

    The scope (--user, --agent and/or --run; at least one) is fixed here: the
    tools take no user id, so the model cannot reach another user's memories.
    One line of host configuration:

    \b
      {"mcpServers": {"memorist": {"command": "memorist", "args": ["mcp", "--user", "alex"]}}}
    """
    if not any((user_id, agent_id, run_id)):
        raise click.UsageError("name the scope the tools act in with --user, --agent or --run")
    if transport == "http" and not allow_remote and not _is_loopback(host):
        raise click.UsageError(
            f"--host {host} is not a loopback address and the MCP endpoint has no authentication; "
            "pass --allow-remote to listen there anyway (behind a proxy that authenticates)"
        )
    from ..mcp_server import create_server, require_sdk
    from ..validate import require_scope

    ids = scope(user_id, agent_id, run_id)
    # Both before the store is opened (or created).
    require_scope(**ids)
    require_sdk()
    # stdout is the protocol's channel under stdio: nothing else may be printed there.
    with contextlib.redirect_stdout(sys.stderr):
        server = create_server(app.memory(create=True), **ids)
    where = describe_scope(ids)
    if transport == "stdio":
        server.run("stdio")
        return
    click.echo(f"Memorist MCP server for {where} at http://{_url_host(host)}:{port}/mcp (Ctrl+C stops it)", err=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.run("streamable-http", host=host, port=port)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
