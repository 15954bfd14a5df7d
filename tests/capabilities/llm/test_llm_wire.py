"""The providers over real HTTP, through the official openai SDK, against the fake
server: endpoints, request bodies, retries, Retry-After, timeouts, token usage."""

from __future__ import annotations

import time

import pytest
from fake_openai import Reply, error, text
from pydantic import BaseModel

from memorist.errors import ProviderError, TransientProviderError
from memorist.llm.base import recording
from memorist.llm.gemini import GeminiLLM
from memorist.llm.openai import OpenAIResponsesLLM
from memorist.llm.openai_compatible import OpenAICompatibleLLM


class Facts(BaseModel):
    facts: list[str]


def test_openai_uses_the_responses_api_never_chat_completions(fake_openai) -> None:
    fake_openai.script("responses", text({"facts": ["Likes tea"]}, usage=(120, 8)))
    llm = OpenAIResponsesLLM()
    assert llm.model == "gpt-5-mini"
    result = llm.generate_json(Facts, "I like tea", system="Extract facts.", role="extractor")
    assert result.facts == ["Likes tea"]
    assert [r.path for r in fake_openai.requests] == ["/v1/responses"]
    assert fake_openai.calls("chat") == []
    body = fake_openai.requests[0].body
    assert body["model"] == "gpt-5-mini"
    assert body["instructions"] == "Extract facts."
    assert body["input"] == [{"role": "user", "content": "I like tea"}]
    assert "messages" not in body
    assert body["store"] is False
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["text"]["format"]["name"] == "Facts"
    assert body["text"]["format"]["schema"]["required"] == ["facts"]
    assert "temperature" not in body  # GPT-5 models refuse it; sent only when set
    assert fake_openai.requests[0].headers["authorization"] == "Bearer sk-test-fake"


def test_output_text_comes_from_the_message_item_after_reasoning(fake_openai) -> None:
    fake_openai.script("responses", text("plain answer"))
    assert OpenAIResponsesLLM().generate("hi") == "plain answer"


def test_token_usage_and_cost_are_accounted(fake_openai) -> None:
    fake_openai.script("responses", text("ok", usage=(1000, 200)))
    llm = OpenAIResponsesLLM()
    with recording() as rec:
        llm.generate("hi", role="extractor", prompt_version="extraction/1")
    (call,) = rec.calls
    assert (call.input_tokens, call.output_tokens) == (1000, 200)
    assert call.cost_usd == pytest.approx((1000 * 0.25 + 200 * 2.0) / 1e6)
    assert call.model == "gpt-5-mini" and call.provider == "openai" and call.response_id.startswith("resp_")
    assert llm.usage() == {"calls": 1, "failed_calls": 0, "input_tokens": 1000, "output_tokens": 200, "cost_usd": pytest.approx(0.00065)}


def test_malformed_json_then_success_on_the_repair_retry(fake_openai) -> None:
    fake_openai.script("responses", text("Here are the facts: Likes tea"), text({"facts": ["Likes tea"]}))
    assert OpenAIResponsesLLM().generate_json(Facts, "I like tea").facts == ["Likes tea"]
    second = fake_openai.requests[1].body["input"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == "Here are the facts: Likes tea"


def test_429_with_retry_after_is_waited_out(fake_openai, waits) -> None:
    fake_openai.script(
        "responses",
        error(429, "Rate limit reached for gpt-5-mini", headers={"retry-after": "2"}, code="rate_limit_exceeded"),
        text("ok"),
    )
    llm = OpenAIResponsesLLM(sleep=waits.append)
    with recording() as rec:
        assert llm.generate("hi") == "ok"
    assert waits == [2.0]
    assert [c.ok for c in rec.calls] == [False, True]
    assert "429" in rec.calls[0].error
    assert len(fake_openai.calls("responses")) == 2


def test_retry_after_ms_is_understood(fake_openai, waits) -> None:
    fake_openai.script("responses", error(429, headers={"retry-after-ms": "250"}), text("ok"))
    assert OpenAIResponsesLLM(sleep=waits.append).generate("hi") == "ok"
    assert waits == [0.25]


def test_a_long_retry_after_is_not_waited_for(fake_openai, waits) -> None:
    fake_openai.script("responses", error(429, headers={"retry-after": "3600"}), text("ok"))
    with pytest.raises(TransientProviderError, match="3600"):
        OpenAIResponsesLLM(sleep=waits.append, max_retry_after=30).generate("hi")
    assert waits == [] and fake_openai.remaining("responses") == 1


def test_server_errors_are_retried_and_auth_errors_are_not(fake_openai, waits) -> None:
    fake_openai.script("responses", error(500), error(503), text("ok"))
    assert OpenAIResponsesLLM(sleep=waits.append, max_retries=2).generate("hi") == "ok"
    assert len(waits) == 2
    fake_openai.reset()
    fake_openai.script("responses", error(401, "Incorrect API key provided"), text("never"))
    with pytest.raises(ProviderError, match="API key") as info:
        OpenAIResponsesLLM(sleep=waits.append).generate("hi")
    assert not isinstance(info.value, TransientProviderError)
    assert fake_openai.remaining("responses") == 1


def test_a_slow_server_times_out_and_is_retried(fake_openai, waits) -> None:
    fake_openai.script("responses", text("late", delay=2.0), text("on time"))
    llm = OpenAIResponsesLLM(timeout=0.3, sleep=waits.append)
    started = time.monotonic()
    with recording() as rec:
        assert llm.generate("hi") == "on time"
    assert time.monotonic() - started < 1.5
    assert [c.ok for c in rec.calls] == [False, True]
    assert "timed out" in rec.calls[0].error


def test_a_server_that_stays_slow_gives_a_transient_error(fake_openai, waits) -> None:
    fake_openai.script("responses", *[text("late", delay=2.0)] * 2)
    llm = OpenAIResponsesLLM(timeout=0.2, max_retries=1, sleep=waits.append)
    started = time.monotonic()
    with pytest.raises(TransientProviderError, match="timed out"):
        llm.generate("hi")
    assert time.monotonic() - started < 1.5
    assert len(waits) == 1


def test_openai_compatible_uses_chat_completions(fake_openai) -> None:
    fake_openai.script("chat", text({"facts": ["Uses Ollama"]}, usage=(50, 5)))
    llm = OpenAICompatibleLLM("llama3.1", base_url=fake_openai.base_url, temperature=0.1)
    with recording() as rec:
        assert llm.generate_json(Facts, "I use Ollama", system="Extract.").facts == ["Uses Ollama"]
    assert [r.path for r in fake_openai.requests] == ["/v1/chat/completions"]
    body = fake_openai.requests[0].body
    assert body["messages"] == [{"role": "system", "content": "Extract."}, {"role": "user", "content": "I use Ollama"}]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Facts"
    assert body["temperature"] == 0.1
    assert (rec.calls[0].input_tokens, rec.calls[0].output_tokens) == (50, 5)
    assert rec.calls[0].cost_usd is None  # a local model has no price


@pytest.mark.parametrize(("mode", "expected"), [("object", {"type": "json_object"}), ("off", None)])
def test_openai_compatible_json_modes(fake_openai, mode, expected) -> None:
    fake_openai.script("chat", text({"facts": []}))
    OpenAICompatibleLLM("m", base_url=fake_openai.base_url, json_mode=mode).generate_json(Facts, "x")
    assert fake_openai.requests[0].body.get("response_format") == expected


def test_openai_compatible_finds_its_url_and_key_in_the_environment(fake_openai, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", fake_openai.base_url)
    fake_openai.script("chat", text("hi"), text("hi"))
    OpenAICompatibleLLM("m").generate("x")
    # OPENAI_API_KEY belongs to OPENAI_BASE_URL: never sent to another server.
    assert fake_openai.requests[0].headers["authorization"] == "Bearer not-needed"
    monkeypatch.setenv("MEMORIST_LLM_API_KEY", "local-key")
    OpenAICompatibleLLM("m").generate("x")
    assert fake_openai.requests[1].headers["authorization"] == "Bearer local-key"


def test_gemini_speaks_chat_completions_with_spec_000_settings(fake_openai, monkeypatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    monkeypatch.setenv("GEMINI_BASE_URL", fake_openai.base_url)
    fake_openai.script("chat", text("hello", usage=(10, 2)))
    llm = GeminiLLM()
    with recording() as rec:
        assert llm.generate("hi") == "hello"
    body = fake_openai.requests[0].body
    assert fake_openai.requests[0].path == "/v1/chat/completions"
    assert body["model"] == "gemini-2.5-flash" and body["temperature"] == 0.2
    assert fake_openai.requests[0].headers["authorization"] == "Bearer gemini-key"
    assert rec.calls[0].provider == "gemini"
    assert rec.calls[0].cost_usd == pytest.approx((10 * 0.30 + 2 * 2.50) / 1e6)


@pytest.mark.parametrize(
    "body",
    [
        {"output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}]},
        {"id": "r", "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}], "usage": None},
        {"id": "r", "output_text": "ok", "usage": {"input_tokens": 3, "output_tokens": 1}},
    ],
    ids=["bare", "no-usage", "top-level-output_text"],
)
def test_minimal_responses_bodies_are_understood(fake_openai, body) -> None:
    """Compatible servers send less than OpenAI does; the text is still found."""
    fake_openai.script("responses", Reply(body=body))
    assert OpenAIResponsesLLM().generate("hi") == "ok"


def test_the_environments_key_goes_only_to_the_environments_url(fake_openai, monkeypatch) -> None:
    """MEMORIST_LLM_API_KEY belongs to MEMORIST_LLM_BASE_URL: base_url= naming another
    server does not get it; naming the same one (or passing api_key=) does."""
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", "https://trusted.example/v1")
    monkeypatch.setenv("MEMORIST_LLM_API_KEY", "sk-FOR-TRUSTED")
    fake_openai.script("chat", text("hi"), text("hi"), text("hi"))
    OpenAICompatibleLLM("m", base_url=fake_openai.base_url).generate("x")
    assert fake_openai.requests[0].headers["authorization"] == "Bearer not-needed"
    OpenAICompatibleLLM("m", base_url=fake_openai.base_url, api_key="mine").generate("x")
    assert fake_openai.requests[1].headers["authorization"] == "Bearer mine"
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", fake_openai.base_url + "/")
    OpenAICompatibleLLM("m", base_url=fake_openai.base_url).generate("x")
    assert fake_openai.requests[2].headers["authorization"] == "Bearer sk-FOR-TRUSTED"
