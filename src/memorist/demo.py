"""``memorist demo``: the tutoring example, end to end, with no keys.

In conversation 1 a learner tells a tutor what confuses them about fractions. The
conversation ends and the Memory is closed: without long-term memory, that remark
would be gone. In conversation 2 (a new run, the same learner) the learner asks a
related question; the Memory, reopened from the same file, retrieves what it
learned and builds the context block the tutor puts in its prompt.

>>> result = run_demo(None, echo=lambda *a: None, embedder="hashing")
>>> "3/6" in result["context"]
True
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from .embed.base import Embedder
from .memory import Memory
from .pipelines.context import format_context

USER_ID = "learner-1"
RUN_1 = "conversation-1"
RUN_2 = "conversation-2"
CONVERSATION_1 = [
    {
        "role": "user",
        "content": "I get confused when adding fractions with different denominators"
        "\u2014please remind me that 1/2 becomes 3/6.",
    },
    {
        "role": "assistant",
        "content": "Of course! To add fractions, first give them the same denominator. "
        "With sixths, 1/2 becomes 3/6. I'll remind you next time.",
    },
]
QUESTION = "How do I add 1/2 + 1/3?"


def run_demo(
    db_path: str | None,
    *,
    echo: Callable[[str], Any] = print,
    embedder: str | Embedder | None = None,
    keep: bool = False,
) -> dict[str, Any]:
    """Run the two-conversation demo against ``db_path``.

    Without ``db_path`` the demo uses a new temporary folder, removed at the end
    unless ``keep``. ``echo`` receives each line of the human-readable walk-through.
    Returns the ``add()`` result of conversation 1 (``stored``), the ``search()``
    result of conversation 2 (``retrieved``), the prompt ``context``, the
    ``embedder`` name and ``db_path`` (None once a temporary store is removed).
    """
    if db_path is not None:
        return _run(str(db_path), echo, embedder, note="", kept=True)
    folder = tempfile.mkdtemp(prefix="memorist-demo-")
    path = os.path.join(folder, "memorist.db")
    try:
        note = "  (a new temporary store; yours is untouched)"
        return _run(path, echo, embedder, note=note, kept=keep)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _run(
    path: str, echo: Callable[[str], Any], embedder: str | Embedder | None, *, note: str, kept: bool
) -> dict[str, Any]:
    echo("Memorist demo: a tutor that remembers a learner across conversations")
    echo(f"store:    {path}{note}")

    # Conversation 1: the learner says what confuses them.
    with Memory(path, embedder=embedder) as memory:
        embedder_name = memory.embedder.name
        echo(f"embedder: {embedder_name}")
        echo("")
        echo(f"\u2500\u2500 Conversation 1  (user_id={USER_ID}, run_id={RUN_1})")
        for message in CONVERSATION_1:
            echo(f"  {_speaker(message['role'])} \u203a {message['content']}")
        stored = memory.add(CONVERSATION_1, user_id=USER_ID, run_id=RUN_1)
        echo(f"  memory.add() \u2192 {stored['message']}")
        for item in stored["results"]:
            echo(f"    {item['event']:<6} {item['memory']}")
    echo("  The conversation ends; the Memory is closed.")
    echo("")

    # Conversation 2: a new session. Only the file connects it to the first one.
    with Memory(path, embedder=embedder) as memory:
        echo(f"\u2500\u2500 Conversation 2  (user_id={USER_ID}, run_id={RUN_2}, a new session)")
        echo(f"  The Memory is reopened from {path}")
        echo(f"  {_speaker('user')} \u203a {QUESTION}")
        retrieved = memory.search(QUESTION, user_id=USER_ID, limit=3)
        noun = "memory" if len(retrieved["results"]) == 1 else "memories"
        echo(f"  memory.search() \u2192 {len(retrieved['results'])} {noun}")
        for rank, item in enumerate(retrieved["results"], 1):
            echo(f"    {rank}. (similarity {item['similarity']:.2f}) {item['memory']}")
    context = format_context(retrieved["results"])
    echo("  The context the tutor puts in its prompt (format_context):")
    for line in (context or "(nothing relevant)").splitlines():
        echo(f"    {line}")
    echo("")
    echo("Without long-term memory, conversation 2 would start from an empty prompt.")
    if kept:
        echo(f"Look around: memorist list --db {path} --user {USER_ID}")
    else:
        echo("The temporary store is removed. Keep one to look around: memorist demo --db demo.db")

    return {
        "db_path": path if kept else None,
        "embedder": embedder_name,
        "user_id": USER_ID,
        "conversation_1": {"run_id": RUN_1, "messages": CONVERSATION_1},
        "stored": stored,
        "conversation_2": {"run_id": RUN_2, "question": QUESTION},
        "retrieved": retrieved,
        "context": context,
    }


def _speaker(role: str) -> str:
    return "learner" if role == "user" else "tutor  "


__all__ = ["run_demo"]
