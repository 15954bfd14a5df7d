"""`memorist chat`'s command: the graph's log lines on stderr, as `run-turn` writes
them, and the model's bounds from options and variables (uvicorn replaced by a client
that sends one message, so no port is opened)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from memorist.cli import cli

pytestmark = pytest.mark.sqlite_only("memorist chat keeps its store in a SQLite file")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What `memorist chat` would have served: the app, and its answer to one message."""
    import uvicorn

    seen: dict[str, Any] = {}

    def run(app: Any, **options: Any) -> None:
        seen["app"], seen["options"] = app, options
        with TestClient(app, base_url="http://127.0.0.1") as client:
            seen["reply"] = client.post("/api/ai/chat", json={"message": "Help me multiply 12 by 5."}).json()

    monkeypatch.setattr(uvicorn, "run", run)
    for name in ("MEMORIST_CHAT_MODEL_TIMEOUT", "MEMORIST_CHAT_MODEL_RETRIES", "MEMORIST_CHAT_MAX_CONCURRENCY", "MEMORIST_CHAT_MAX_PER_USER"):
        monkeypatch.delenv(name, raising=False)
    return seen


def chat(tmp_path, *args: str, env: dict[str, str] | None = None):
    argv = ["--db", str(tmp_path / "chat.db"), "--embedder", "hashing", "chat", "--memory-url", "http://127.0.0.1:9/api/memories", *args]
    return CliRunner().invoke(cli, argv, env=env, catch_exceptions=False)


@pytest.mark.parametrize("level", ["info", "debug"])
def test_chat_logs_the_graphs_lines(tmp_path, served, level):
    """Before, `memorist chat` logged none of them, even at --log-level debug."""
    done = chat(tmp_path, "--log-level", level)
    assert done.exit_code == 0, done.output
    assert served["reply"]["response"] == "12 * 5 = 60" and served["options"]["log_level"] == level
    err = done.stderr.splitlines()
    assert [line.split()[2] for line in err if line.startswith("[ACE Graph] ")] == ["router", "planner", "solver", "critic", "learning"]
    assert "[ACE Thought] react step 1 tool=calculator input=12 * 5" in err
    assert sum(line.startswith("[ACE Memory] Loaded") for line in err) == 1
    assert any(line.startswith("[Chat] user=default conversation=") for line in err)


def test_chat_at_warning_logs_no_graph_line(tmp_path, served):
    done = chat(tmp_path, "--log-level", "warning")
    assert done.exit_code == 0 and "[ACE Graph]" not in done.stderr and "[Chat]" not in done.stderr


@pytest.mark.parametrize(("args", "env", "bounds"), [
    ((), {}, (30.0, 1)),
    (("--model-timeout", "5", "--model-retries", "0"), {}, (5.0, 0)),
    ((), {"MEMORIST_CHAT_MODEL_TIMEOUT": "7.5", "MEMORIST_CHAT_MODEL_RETRIES": "2"}, (7.5, 2)),
    (("--model-timeout", "5"), {"MEMORIST_CHAT_MODEL_TIMEOUT": "7.5"}, (5.0, 1)),  # the option wins
])
def test_the_models_timeout_and_retries_are_options_and_variables(tmp_path, served, monkeypatch, args, env, bounds):
    """Before, the model always had the provider's 60 s and 2 retries: a model that
    hangs held one chat message for three minutes."""
    monkeypatch.setenv("MEMORIST_LLM", "openai-compatible:fake")
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # refused at once
    done = chat(tmp_path, *args, "--log-level", "warning", env=env)
    assert done.exit_code == 0, done.output
    llm = served["app"].state.chat.tutor.llm
    assert (llm.timeout, llm.max_retries) == bounds
    assert f"Model: openai-compatible:fake, {bounds[0]:g} s a request." in done.stdout
    assert served["reply"]["metadata"]["scratch"]["model_error"] == "it could not be reached"
    assert served["reply"]["response"] == "12 * 5 = 60"  # the calculator, offline


@pytest.mark.parametrize("args", [("--model-timeout", "0"), ("--model-timeout", "nan"), ("--model-retries", "-1")])
def test_bad_model_bounds_name_the_option(tmp_path, served, args):
    done = CliRunner().invoke(cli, ["--db", str(tmp_path / "chat.db"), "chat", *args])
    assert done.exit_code == 2 and f"Invalid value for '{args[0]}'" in done.output and "app" not in served


@pytest.mark.parametrize(("args", "env", "limits"), [
    ((), {}, (32, 4)),
    (("--max-concurrency", "8", "--max-per-user", "2"), {}, (8, 2)),
    ((), {"MEMORIST_CHAT_MAX_CONCURRENCY": "10", "MEMORIST_CHAT_MAX_PER_USER": "1"}, (10, 1)),
])
def test_the_requests_at_work_at_once_are_options_and_variables(tmp_path, served, args, env, limits):
    done = chat(tmp_path, *args, "--log-level", "warning", env=env)
    assert done.exit_code == 0, done.output
    settings = served["app"].state.chat.settings
    assert (settings.max_concurrency, settings.max_per_user) == limits
    assert served["reply"]["response"] == "12 * 5 = 60"


@pytest.mark.parametrize(("args", "named"), [
    (("--max-concurrency", "0"), "--max-concurrency"),
    (("--max-per-user", "0"), "--max-per-user"),
    (("--max-concurrency", "2", "--max-per-user", "3"), "--max-per-user"),
])
def test_bad_limits_of_requests_at_work_name_the_option(tmp_path, served, args, named):
    done = CliRunner().invoke(cli, ["--db", str(tmp_path / "chat.db"), "chat", *args])
    assert done.exit_code == 2 and "app" not in served
    assert f"Invalid value for '{named}'" in done.output or f"Invalid value for {named}:" in done.output
