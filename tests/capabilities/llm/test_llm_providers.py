"""Choosing and configuring providers: strings, instances, the environment, missing
keys and extras. Nothing here talks to a server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memorist import Memory
from memorist.errors import ConfigurationError, MissingDependencyError
from memorist.llm import resolve_llm
from memorist.llm.gemini import BASE_URL, GeminiLLM
from memorist.llm.openai import OpenAIResponsesLLM
from memorist.llm.openai_compatible import OpenAICompatibleLLM
from memorist.llm.testing import ScriptedLLM
from memorist.roles.extractor import HeuristicExtractor
from memorist.roles.reconciler import HeuristicReconciler


def test_no_llm_unless_one_is_configured(db_path) -> None:
    assert resolve_llm(None) is None
    for off in ("none", "off", "heuristic", " "):
        assert resolve_llm(off) is None
    with Memory(db_path, embedder="hashing") as m:
        assert m.llm is None
        assert isinstance(m.extractor, HeuristicExtractor) and isinstance(m.reconciler, HeuristicReconciler)
        assert m.add("I'm a vegetarian.", user_id="alex")["results"][0]["memory"] == "Is vegetarian"
        # The network guard of tests/conftest.py fails this test on any connection attempt.


def test_provider_strings(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert isinstance(resolve_llm("openai"), OpenAIResponsesLLM)
    assert resolve_llm("openai").model == "gpt-5-mini"  # spec 004's model
    assert resolve_llm("OpenAI:gpt-5").name == "openai:gpt-5"
    compatible = resolve_llm("openai-compatible:llama3.1", base_url="http://127.0.0.1:11434/v1")
    assert isinstance(compatible, OpenAICompatibleLLM) and compatible.model == "llama3.1"
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    assert isinstance(resolve_llm("gemini"), GeminiLLM)
    assert resolve_llm("gemini:gemini-2.5-pro").model == "gemini-2.5-pro"
    llm = ScriptedLLM()
    assert resolve_llm(llm) is llm
    assert resolve_llm("openai", timeout=5, max_retries=0).timeout == 5


def test_memorist_llm_names_the_provider(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MEMORIST_LLM", "openai:gpt-5-nano")
    assert resolve_llm(None).name == "openai:gpt-5-nano"


def test_the_environment_bounds_every_model_named_by_a_string(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    assert (resolve_llm("openai").timeout, resolve_llm("openai").max_retries) == (60.0, 2)
    monkeypatch.setenv("MEMORIST_LLM_TIMEOUT", "7.5")
    monkeypatch.setenv("MEMORIST_LLM_RETRIES", "0")
    for spec in ("openai", "gemini", "openai-compatible:llama3.1"):
        llm = resolve_llm(spec, base_url="http://127.0.0.1:11434/v1") if "compatible" in spec else resolve_llm(spec)
        assert (llm.timeout, llm.max_retries) == (7.5, 0), spec
    assert resolve_llm("openai", timeout=3).timeout == 3  # an option given in code wins
    model = ScriptedLLM()
    assert resolve_llm(model) is model  # an object keeps its own


@pytest.mark.parametrize(("name", "value"), [
    ("MEMORIST_LLM_TIMEOUT", "nan"), ("MEMORIST_LLM_TIMEOUT", "inf"), ("MEMORIST_LLM_TIMEOUT", "0"), ("MEMORIST_LLM_TIMEOUT", "-1"),
    ("MEMORIST_LLM_TIMEOUT", "ten"), ("MEMORIST_LLM_TIMEOUT", "7200"), ("MEMORIST_LLM_RETRIES", "-1"), ("MEMORIST_LLM_RETRIES", "2.5"),
    ("MEMORIST_LLM_RETRIES", "11"), ("MEMORIST_LLM_RETRIES", "many"),
])
def test_a_bad_model_bound_names_its_variable(monkeypatch, name, value) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=name):
        resolve_llm("openai")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("openai", "set OPENAI_API_KEY"),
        ("gemini", "set GEMINI_API_KEY"),
        ("openai-compatible:llama3.1", "set MEMORIST_LLM_BASE_URL"),
        ("openai-compatible", "needs a model name"),
        ("anthropic:claude", "unknown LLM provider 'anthropic'"),
    ],
)
def test_what_is_missing_is_named(spec, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        resolve_llm(spec)


def test_a_missing_key_fails_before_the_store_is_created(tmp_path: Path) -> None:
    path = tmp_path / "never.db"
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        Memory(str(path), embedder="hashing", llm="openai:gpt-5-mini")
    assert not path.exists()


def test_a_bad_llm_value_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="a string like 'openai:gpt-5-mini'"):
        resolve_llm(42)  # type: ignore[arg-type]


def test_a_missing_sdk_names_the_pip_command(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # import openai -> ImportError
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(MissingDependencyError, match=r"pip install 'memorist\[llm\]'"):
        resolve_llm("openai")
    with pytest.raises(MissingDependencyError, match="pip install"):
        OpenAICompatibleLLM("m", base_url="http://127.0.0.1:1/v1")


def test_gemini_reads_spec_000s_variables(monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    llm = GeminiLLM()
    assert (llm.model, llm.temperature, llm.base_url) == ("gemini-2.5-flash", 0.2, BASE_URL)
    monkeypatch.setenv("GEMINI_MODEL", "gemini-2.5-pro")
    monkeypatch.setenv("ACE_LLM_TEMPERATURE", "0.7")
    llm = GeminiLLM()
    assert (llm.model, llm.temperature) == ("gemini-2.5-pro", 0.7)
    assert GeminiLLM("gemini-2.5-flash-lite", temperature=0.0).temperature == 0.0
    monkeypatch.setenv("ACE_LLM_TEMPERATURE", "warm")
    with pytest.raises(ConfigurationError, match="ACE_LLM_TEMPERATURE"):
        GeminiLLM()


def test_openai_compatible_settings(monkeypatch) -> None:
    with pytest.raises(ConfigurationError, match="json_mode"):
        OpenAICompatibleLLM("m", base_url="http://127.0.0.1:1/v1", json_mode="yaml")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:2/v1")
    assert OpenAICompatibleLLM("m").base_url == "http://127.0.0.1:2/v1"
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", "http://127.0.0.1:3/v1")
    assert OpenAICompatibleLLM("m").base_url == "http://127.0.0.1:3/v1"


def test_config_and_constructor_agree(monkeypatch, db_path) -> None:
    llm = ScriptedLLM()
    with Memory(db_path, embedder="hashing", llm=llm) as m:
        assert m.llm is llm and m.config.llm is llm
    with pytest.raises(ConfigurationError, match="unknown config key"):
        Memory.from_config({"path": db_path, "lm": "openai"})
