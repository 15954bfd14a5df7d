"""The integrations' examples (examples/*.py) run as a user runs them, in a process of
their own, against the fake OpenAI server playing a model that uses the memory tools,
and print what they promise: what the agent remembered, and an answer made from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai import Request, text, tool_calls

ROOT = Path(__file__).resolve().parents[3]

# Runs the example with every connection beyond loopback refused (the test's own guard
# does not reach a child process).
LOCAL_ONLY = """
import runpy, sys

def guard(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] not in ("127.0.0.1", "::1", "localhost"):
        raise ConnectionRefusedError(f"the example may not use the network (tried {args[1]!r})")

sys.addaudithook(guard)
runpy.run_path(sys.argv[1], run_name="__main__")
"""


def chef(endpoint: str):
    """A model playing the examples' chef: it saves what the user says about themselves,
    then answers from what search_memories returns (the store's content, not a script)."""

    def reply(body):
        request = Request(f"/v1/{'responses' if endpoint == 'responses' else 'chat/completions'}", {}, body)
        prompt, outputs = request.prompt_text(), request.tool_outputs()
        if "What should I cook tonight?" in prompt:
            if not outputs:
                return tool_calls(("search_memories", {"query": "diet and allergies", "limit": 5}))
            known = sorted(r["memory"] for out in outputs for r in json.loads(out)["results"])
            return text(f"Knowing that you: {'; '.join(known)}. Try a chickpea curry.")
        if "allergic to peanuts" in prompt:
            if not outputs:
                return tool_calls(("add_memory", {"text": "Is vegetarian"}), ("add_memory", {"text": "Is allergic to peanuts"}))
            return text("Noted, Sam.")
        return text("Hello.")

    return reply


@pytest.mark.parametrize(("example", "endpoint"), [
    ("openai_agents_memory.py", "responses"),
    ("langchain_memory.py", "chat"),
])
def test_the_example_prints_what_it_remembered_and_answers_from_it(fake_openai, example, endpoint, tmp_path):
    fake_openai.default[endpoint] = chef(endpoint)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", LOCAL_ONLY, str(ROOT / "examples" / example)],
        capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "chef: Noted, Sam.",
        "remembered: Is allergic to peanuts",
        "remembered: Is vegetarian",
        "chef: Knowing that you: Is allergic to peanuts; Is vegetarian. Try a chickpea curry.",
    ]
    calls = fake_openai.calls(endpoint)
    assert len(calls) == 4  # each conversation: a tool call, then the answer
    # The second conversation's first request holds nothing of the first conversation.
    assert "peanuts" not in json.dumps(calls[2].body)
    assert list(tmp_path.iterdir()) == []  # the example's memory lasted the script


def test_the_docs_show_the_examples_as_they_run():
    """docs/integrations.md shows the model runs as ``py`` blocks (they need a key, so the
    docs do not run them): each is a verbatim excerpt of an example run above."""
    import re

    page = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    shown = re.findall(r"^```py\n(.*?)^```", page, flags=re.S | re.M)
    examples = [p.read_text(encoding="utf-8") for p in (ROOT / "examples").glob("*.py")]
    assert len(shown) >= 3
    for block in shown:
        assert any(block in example for example in examples), block
