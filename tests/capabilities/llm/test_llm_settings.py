"""Settings refused when the provider is built, naming the option or the variable,
rather than failing later on every call (a retried "Connection error", a sleep of a
day). Nothing here talks to a server unless it says so."""

from __future__ import annotations

import pytest
from fake_openai import Reply, error, text

from memorist.errors import ConfigurationError, ProviderError
from memorist.llm import resolve_llm
from memorist.llm.gemini import GeminiLLM
from memorist.llm.openai import OPENAI_URL, OpenAIResponsesLLM
from memorist.llm.openai_compatible import OpenAICompatibleLLM

_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMORIST_LLM_BASE_URL", "MEMORIST_LLM_API_KEY",
         "GEMINI_API_KEY", "GEMINI_BASE_URL", "GEMINI_MODEL", "MEMORIST_LLM")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch) -> None:
    for var in _VARS:
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_openai_base_url_is_openais_address(monkeypatch, value) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", value)
    llm = OpenAIResponsesLLM()
    assert llm.base_url == OPENAI_URL
    assert str(llm.client.base_url).rstrip("/") == OPENAI_URL  # not "", which the SDK would read itself


@pytest.mark.parametrize("url", ["   ", "not a url", "ftp://x/v1", "http://", "localhost:11434/v1"])
def test_a_bad_base_url_is_refused_naming_where_it_came_from(monkeypatch, url) -> None:
    with pytest.raises(ConfigurationError, match="base_url must be an http"):
        OpenAICompatibleLLM("m", base_url=url)
    with pytest.raises(ConfigurationError, match="base_url must be an http"):
        OpenAIResponsesLLM(api_key="k", base_url=url)
    with pytest.raises(ConfigurationError, match="base_url must be an http"):
        GeminiLLM(api_key="k", base_url=url)
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", url)
    if url.strip():
        with pytest.raises(ConfigurationError, match="MEMORIST_LLM_BASE_URL must be an http"):
            resolve_llm("openai-compatible:m")
    monkeypatch.delenv("MEMORIST_LLM_BASE_URL")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    if url.strip():
        with pytest.raises(ConfigurationError, match="OPENAI_BASE_URL must be an http"):
            resolve_llm("openai-compatible:m")
        with pytest.raises(ConfigurationError, match="OPENAI_BASE_URL must be an http"):
            OpenAIResponsesLLM(api_key="k")
    monkeypatch.setenv("GEMINI_BASE_URL", url)
    if url.strip():
        with pytest.raises(ConfigurationError, match="GEMINI_BASE_URL must be an http"):
            GeminiLLM(api_key="k")


def test_good_base_urls_pass() -> None:
    assert OpenAICompatibleLLM("m", base_url=" http://localhost:11434/v1 ").base_url == "http://localhost:11434/v1"
    assert OpenAICompatibleLLM("m", base_url="https://[::1]:8080/v1").base_url == "https://[::1]:8080/v1"


def test_a_blank_key_is_a_missing_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "  ")
    with pytest.raises(ConfigurationError, match="set OPENAI_API_KEY"):
        resolve_llm("openai")
    with pytest.raises(ConfigurationError, match="set OPENAI_API_KEY"):
        OpenAIResponsesLLM(api_key=" ")
    monkeypatch.setenv("GEMINI_API_KEY", "  ")
    with pytest.raises(ConfigurationError, match="set GEMINI_API_KEY"):
        resolve_llm("gemini")


@pytest.mark.parametrize("option", ["timeout", "backoff", "max_backoff", "max_retry_after"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, "5", True])
def test_a_bad_number_is_refused_naming_the_option(option, value) -> None:
    with pytest.raises(ConfigurationError, match=option):
        OpenAICompatibleLLM("m", base_url="http://localhost:11434/v1", **{option: value})


def test_a_nan_temperature_and_an_unknown_option_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="temperature"):
        OpenAICompatibleLLM("m", base_url="http://localhost:11434/v1", temperature=float("nan"))
    with pytest.raises(ConfigurationError, match="frobnicate"):
        resolve_llm("openai-compatible:m", base_url="http://localhost:11434/v1", frobnicate=1)


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_an_unreadable_retry_after_is_no_retry_after(fake_openai, waits, header, value) -> None:
    """Talks to the fake server: a ``Retry-After: nan`` is not read as 0 s (nor inf as
    'wait for ever'); the default backoff applies."""
    fake_openai.script("chat", error(429, headers={header: value}), text("ok"))
    llm = OpenAICompatibleLLM("m", base_url=fake_openai.base_url, backoff=0.5, sleep=waits.append)
    assert llm.generate("hi") == "ok"
    assert len(waits) == 1 and 0.25 <= waits[0] <= 0.5


def _completion(message: dict | None = None, choices=None) -> Reply:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": choices if choices is not None else [{"index": 0, "finish_reason": "stop", "message": message}]}
    return Reply(body=body)


@pytest.mark.parametrize(("reply", "said"), [
    (_completion({"role": "assistant", "content": None, "refusal": "I can't help with that. " * 20}), "the model refused: .I can't help"),
    (_completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}), "tool call"),
    (_completion(choices="nope"), "shape is wrong"),
], ids=["refusal", "tool-call", "choices-not-a-list"])
def test_an_unusable_chat_reply_says_why(fake_openai, reply, said) -> None:
    fake_openai.script("chat", reply)
    llm = OpenAICompatibleLLM("m", base_url=fake_openai.base_url, max_retries=0)
    with pytest.raises(ProviderError, match=said) as caught:
        llm.generate("hi")
    assert len(str(caught.value)) < 320  # the refusal cut to ~200 characters
    assert len(fake_openai.requests) == 1  # not retried
