"""``memorist reprocess``: retry the turns whose LLM extraction failed."""

from __future__ import annotations

from typing import Any

import click

from ..policies.text import preview
from .app import LIMIT, App, CommandError, cli, pass_app, scope, scope_options, when


@cli.command()
@scope_options
@click.option(
    "--llm",
    "llm_spec",
    metavar="SPEC",
    envvar="MEMORIST_LLM",
    show_envvar=True,
    help="The LLM: 'openai[:model]' (Responses API, OPENAI_API_KEY), "
    "'openai-compatible:<model>' (MEMORIST_LLM_BASE_URL) or 'gemini[:model]' (GEMINI_API_KEY).",
)
@click.option("--list", "list_only", is_flag=True, help="Only list the pending turns; no LLM needed.")
@click.option("--limit", type=LIMIT, metavar="N", help="At most N turns, oldest first.")
@pass_app
def reprocess(
    app: App,
    user_id: str | None,
    agent_id: str | None,
    run_id: str | None,
    llm_spec: str | None,
    list_only: bool,
    limit: int | None,
) -> None:
    """Retry the turns whose LLM extraction failed.

    A turn whose extraction failed (model unreachable, rate limited, unusable
    output) was kept in the log, marked pending, and the heuristic extractor's
    facts were stored for the time being. Once the model behaves, this runs
    extraction again: the model's facts replace the provisional ones. Without
    --user/--agent/--run, every pending turn of the store is retried.
    """
    if not list_only and not llm_spec:
        raise CommandError("reprocess needs an LLM: pass --llm openai:gpt-5-mini (or set MEMORIST_LLM)")
    memory = app.memory(llm="none" if list_only else llm_spec)
    ids = scope(user_id, agent_id, run_id)
    if list_only:
        items = memory.pending(**ids, limit=limit)

        def show_pending() -> None:
            if not items:
                click.echo("No pending turns.")
                return
            app.table(
                [
                    ("turn", {"no_wrap": True}),
                    ("when (UTC)", {"no_wrap": True}),
                    ("user", {}),
                    ("message", {"overflow": "fold"}),
                    ("reason", {"overflow": "fold"}),
                ],
                [
                    [i["seq"], when(i["created_at"]), i["user_id"], _first_message(i), i["payload"].get("reason")]
                    for i in items
                ],
            )

        app.emit({"results": items}, show_pending)
        return
    result = memory.reprocess(**ids, limit=limit)

    def show() -> None:
        if result["results"]:
            app.table(
                [("turn", {"no_wrap": True}), ("status", {"no_wrap": True}), ("outcome", {"overflow": "fold"})],
                [[r["turn_event"], r["status"], _outcome(r)] for r in result["results"]],
            )
        click.echo(
            f"Reprocessed {len(result['results'])} turns: {result['processed']} processed, "
            f"{result['failed']} failed; {result['pending']} still pending."
        )

    app.emit(result, show)


def _first_message(item: dict[str, Any]) -> str:
    messages = item["payload"].get("messages") or []
    first = next((m.get("content", "") for m in messages if m.get("role") != "system"), "")
    return preview(first, 60)


def _outcome(result: dict[str, Any]) -> str:
    if result["status"] != "processed":
        return str(result.get("reason", ""))
    changes = [f"{r['event']} {r['memory']}" for r in result.get("results", [])]
    kept = result.get("kept", 0)
    if kept:
        changes.append(f"kept {kept} provisional")
    return "; ".join(changes) or "nothing to change"
