"""``memorist chat``: the tutor's chat service and page (the agent extra)."""

from __future__ import annotations

import logging
import shlex
from typing import Any

import click

from .app import App, CommandError, FiniteFloat, cli, pass_app
from .serve import _url, is_loopback, parse_cli_rate


def _chat_modules() -> Any:
    try:
        import langgraph.graph  # noqa: F401
        import uvicorn  # noqa: F401

        from ..agent import chat
    except ImportError as exc:
        raise CommandError(f"memorist chat needs the agent extra: pip install 'memorist[agent]' ({exc})") from exc
    return chat


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on. Other than loopback needs API keys.")
@click.option("--port", type=click.IntRange(1, 65535), default=6070, show_default=True, help="Port to listen on.")
@click.option("--memory-url", metavar="URL",
              help="The memory service [default: MEMORY_MANAGEMENT_URL, else http://localhost:6060/api/memories].")
@click.option("--memory-timeout", type=FiniteFloat(min=0.1), default=10.0, show_default=True,
              help="Seconds to wait for the memory service before answering without it.")
@click.option("--rate-limit", default="120/min", show_default=True, metavar="N/min", help="Chat requests per user (N/s, N/min, N/h; 'off').")
@click.option("--burst", type=click.IntRange(min=1), default=20, show_default=True, help="Requests a user may make at once.")
@click.option("--model-timeout", type=FiniteFloat(min=0.1), default=30.0, show_default=True, envvar="MEMORIST_CHAT_MODEL_TIMEOUT",
              show_envvar=True, help="Seconds to wait for the model on each request before answering without it.")
@click.option("--model-retries", type=click.IntRange(0, 10), default=1, show_default=True, envvar="MEMORIST_CHAT_MODEL_RETRIES",
              show_envvar=True, help="Times a model request that timed out or failed on the way is tried again.")
@click.option("--max-concurrency", type=click.IntRange(min=1), default=32, show_default=True, envvar="MEMORIST_CHAT_MAX_CONCURRENCY",
              show_envvar=True, help="Requests at work at once in all (503 beyond).")
@click.option("--max-per-user", type=click.IntRange(min=1), default=4, show_default=True, envvar="MEMORIST_CHAT_MAX_PER_USER",
              show_envvar=True, help="Requests of one user at work at once (429 beyond): users waiting on a slow model never hold back the others.")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info", show_default=True,
              help="The log's level: the server's lines, and the tutor's ([ACE Graph], [ACE Thought], [Chat] ...) from info.")
@pass_app
def chat(app: App, host: str, port: int, memory_url: str | None, memory_timeout: float, rate_limit: str, burst: int,
         model_timeout: float, model_retries: int, max_concurrency: int, max_per_user: int, log_level: str) -> None:
    """Serve the tutor as a chat: the page at /, POST /api/ai/chat.

    \b
    --db is the chat's own store: what the tutor learns about teaching each
    user, who owns which conversation, and the chat's API keys
    (`memorist --db CHAT_DB keys create --tenant T --user U`; each key is one
    user). With no key it is a development server, loopback only.
    The learner's facts live in the memory service (`memorist serve`), reached
    over REST only for messages sent with "Long Term Memory" on; MEMORY_API_KEY
    is the chat's key for it, MEMORY_DECAY_DAYS how long its memories count.
    The model is the store's (MEMORIST_LLM), else Gemini with GEMINI_API_KEY;
    a model that fails or does not answer within --model-timeout (tried
    --model-retries more times) leaves the turn to the offline answer.
    """
    chat_mod = _chat_modules()
    import uvicorn

    from ..server.keys import KeyStore
    from .playbook import ace_logs_to_stderr

    try:
        rate = parse_cli_rate(rate_limit)
    except Exception as exc:
        raise click.BadParameter(str(exc), param_hint="--rate-limit") from exc

    if max_per_user > max_concurrency:
        raise click.BadParameter(f"{max_per_user} is more than --max-concurrency ({max_concurrency})", param_hint="--max-per-user")
    if app.db == ":memory:" or "://" in str(app.db):
        raise CommandError("memorist chat keeps its store in a SQLite file; name one with --db")
    local = is_loopback(host)
    with KeyStore(app.db) as keys:
        active = keys.list(include_revoked=False)
    if not active and not local:
        raise CommandError(
            f"refusing to serve the chat on {host}: its store {app.label} holds no API key, so anyone could chat as "
            f"the one development user. Create a key in it first (`memorist keys create --db {shlex.quote(app.label)} --tenant NAME --user ID`), "
            "or serve on 127.0.0.1."
        )
    settings = chat_mod.ChatSettings.from_env(memory_url=memory_url, memory_timeout=memory_timeout, rate_per_minute=rate, burst=burst,
                                              model_timeout=model_timeout, model_retries=model_retries,
                                              max_concurrency=max_concurrency, max_per_user=max_per_user)
    # The graph's lines ([ACE Graph], [ACE Thought], [ACE Memory], [Chat]) to stderr, as run-turn sends them.
    with ace_logs_to_stderr(getattr(logging, log_level.upper())):
        application = chat_mod.create_chat_app(app.db, settings=settings, embedder=app.embedder, require_keys=not local,
                                               local_only=local)
        url = _url(host, port)
        click.echo(f"Memorist chat: {url}/  (store {app.label}; memory service {settings.memory_url})")
        click.echo("  API keys required." if active else "  Development mode: no API key, one user ('default'), loopback only.")
        model = application.state.chat.tutor.llm
        click.echo(f"  Model: {model.name}, {model_timeout:g} s a request." if model is not None and hasattr(model, "name")
                   else "  No model: the tutor answers offline (arithmetic by its calculator).")
        try:
            uvicorn.run(application, host=host, port=port, log_level=log_level)
        finally:
            application.state.chat.close()
