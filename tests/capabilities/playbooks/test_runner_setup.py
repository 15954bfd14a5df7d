"""Spec 000's set-up, as its runner reads it: ACE_MEMORY_FILE chooses the store, and
GEMINI_API_KEY alone makes the runner answer with Gemini (here the fake server of the
OpenAI wire format, which Gemini's compatible endpoint speaks, at GEMINI_BASE_URL)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))  # fake_openai

from fake_openai import FakeOpenAIServer, text  # noqa: E402

from memorist import Memory  # noqa: E402

TURN = {"messages": [{"role": "user", "content": "Help me multiply 12 by 5."}], "learner_id": "sam"}


@pytest.fixture
def gemini(monkeypatch):
    server = FakeOpenAIServer().start()
    for name in ("MEMORIST_LLM", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ACE_CURATOR_USE_LLM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    monkeypatch.setenv("GEMINI_BASE_URL", server.base_url)
    yield server
    server.stop()


def _run_turn(args: list[str], payload: dict) -> tuple[int, str]:
    from click.testing import CliRunner

    from memorist.cli import cli

    result = CliRunner().invoke(cli, [*args, "run-turn"], input=json.dumps(payload))
    return result.exit_code, result.stdout


def test_gemini_api_key_alone_makes_the_runner_answer_with_gemini(gemini, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMORIST_DB", str(tmp_path / "ace.db"))
    gemini.script("chat", text("12 × 5 = 60."))
    code, out = _run_turn(["--embedder", "hashing"], TURN)
    assert code == 0, out
    answer = json.loads(out)
    assert answer["mode"] == "llm" and answer["answer"] == "12 × 5 = 60."
    (call,) = gemini.calls("chat")
    assert call.body["model"] == "gemini-2.5-flash" and "12 by 5" in call.prompt_text()


def test_without_a_key_the_runner_answers_deterministically(tmp_path, monkeypatch) -> None:
    for name in ("GEMINI_API_KEY", "MEMORIST_LLM", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORIST_DB", str(tmp_path / "ace.db"))
    code, out = _run_turn(["--embedder", "hashing"], TURN)
    assert code == 0 and json.loads(out)["mode"] == "deterministic"


def test_ace_memory_file_chooses_the_store_unless_db_names_one(tmp_path, monkeypatch) -> None:
    for name in ("GEMINI_API_KEY", "MEMORIST_LLM", "MEMORIST_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    chosen, explicit = tmp_path / "ace_memory.db", tmp_path / "other.db"
    monkeypatch.setenv("ACE_MEMORY_FILE", str(chosen))
    feedback = {**TURN, "feedback": "Breaking 12 into 10 + 2 helped", "outcome": "success"}
    assert _run_turn(["--embedder", "hashing"], feedback)[0] == 0
    with Memory(str(chosen), embedder="hashing") as memory:
        assert memory.store.stats()["memories"] > 0
    assert not (tmp_path / "data").exists()  # nothing went to the default store
    assert _run_turn(["--db", str(explicit), "--embedder", "hashing"], feedback)[0] == 0
    assert explicit.exists()
