"""The LLM base class with the scripted double: retries, backoff, Retry-After, JSON
repair, accounting, previews. No server, no network."""

from __future__ import annotations

import json
import logging

import pytest
from pydantic import BaseModel

from memorist.errors import ConfigurationError, InvalidOutputError, ProviderError, TransientProviderError
from memorist.llm.base import PRICES, LLMCall, loads_lenient, note_fallback, recording
from memorist.llm.testing import ScriptedLLM
from memorist.policies.text import preview


class Answer(BaseModel):
    value: int


def scripted(*replies, **options) -> tuple[ScriptedLLM, list[float]]:
    waits: list[float] = []
    return ScriptedLLM(list(replies), sleep=waits.append, **options), waits


def test_preview_shortens_with_the_length() -> None:
    assert preview("short") == "short"
    long = "x" * 300
    assert preview(long) == "x" * 120 + "… [len=300]"
    assert preview(long, 10) == "x" * 10 + "… [len=300]"


def test_generate_returns_the_reply_and_records_the_call() -> None:
    llm, _ = scripted("hello")
    with recording() as rec:
        assert llm.generate("hi", system="be brief", role="demo", prompt_version="demo/1") == "hello"
    (call,) = rec.calls
    assert isinstance(call, LLMCall)
    assert (call.provider, call.model, call.role, call.prompt, call.attempt, call.ok) == ("scripted", "scripted", "demo", "demo/1", 1, True)
    assert call.input_tokens and call.output_tokens and call.latency_ms >= 0
    assert llm.requests[0].system == "be brief"
    assert llm.usage()["calls"] == 1


def test_transient_errors_are_retried_with_backoff() -> None:
    llm, waits = scripted(TransientProviderError("boom"), TransientProviderError("boom"), "ok", max_retries=2, backoff=0.5)
    with recording() as rec:
        assert llm.generate("hi") == "ok"
    assert [c.ok for c in rec.calls] == [False, False, True]
    assert [c.attempt for c in rec.calls] == [1, 2, 3]
    assert len(waits) == 2
    assert 0.25 <= waits[0] <= 0.5 and 0.5 <= waits[1] <= 1.0  # exponential, jittered
    assert llm.usage()["failed_calls"] == 2


def test_retries_run_out() -> None:
    llm, waits = scripted(*[TransientProviderError("down")] * 3, max_retries=1)
    with pytest.raises(TransientProviderError, match="down"):
        llm.generate("hi")
    assert len(llm.requests) == 2 and len(waits) == 1


def test_retry_after_is_honoured_exactly() -> None:
    llm, waits = scripted(TransientProviderError("429", retry_after=3.0, status=429), "ok")
    assert llm.generate("hi") == "ok"
    assert waits == [3.0]


def test_a_retry_after_beyond_the_limit_fails_at_once() -> None:
    llm, waits = scripted(TransientProviderError("429", retry_after=600, status=429), "ok", max_retry_after=60)
    with pytest.raises(TransientProviderError, match="max_retry_after"):
        llm.generate("hi")
    assert waits == [] and len(llm.requests) == 1


def test_permanent_errors_are_not_retried() -> None:
    llm, waits = scripted(ProviderError("bad key"), "ok")
    with pytest.raises(ProviderError, match="bad key"):
        llm.generate("hi")
    assert waits == [] and llm.remaining == 1


def test_unexpected_provider_exceptions_become_provider_errors() -> None:
    llm, _ = scripted(KeyError("oops"))
    with recording() as rec, pytest.raises(ProviderError, match="KeyError"):
        llm.generate("hi")
    assert rec.calls[0].ok is False and "KeyError" in rec.calls[0].error


def test_a_script_that_runs_out_says_so() -> None:
    llm, _ = scripted()
    with pytest.raises(ProviderError, match="no reply left"):
        llm.generate("hi")
    assert ScriptedLLM(default="same").generate("x") == "same"


@pytest.mark.parametrize(
    "reply",
    [
        '{"value": 3}',
        '```json\n{"value": 3}\n```',
        'Sure! Here it is: {"value": 3} Hope that helps.',
        '\ufeff {"value": 3}\n',
    ],
)
def test_json_is_repaired_when_it_cheaply_can_be(reply: str) -> None:
    llm, _ = scripted(reply)
    assert llm.generate_json(Answer, "?").value == 3
    assert len(llm.requests) == 1


def test_malformed_json_gets_one_repair_retry_in_the_same_conversation(caplog) -> None:
    llm, _ = scripted("not json at all", json.dumps({"value": 7}))
    with caplog.at_level(logging.WARNING, logger="memorist"), recording() as rec:
        assert llm.generate_json(Answer, "What is 3 + 4?", role="math").value == 7
    second = llm.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "user"]
    assert second[1].content == "not json at all"
    assert "not valid JSON" in second[2].content and "ONLY" in second[2].content
    assert [c.attempt for c in rec.calls] == [1, 2]
    assert "not json at all" in caplog.text  # the raw output is logged
    assert llm.requests[0].json_schema["properties"]["value"]["type"] == "integer"


def test_schema_mismatch_is_repaired_too() -> None:
    llm, _ = scripted('{"value": "many"}', '{"value": 2}')
    assert llm.generate_json(Answer, "?").value == 2
    assert "value" in llm.requests[1].messages[2].content


def test_persistent_garbage_raises_invalid_output_with_the_raw_reply() -> None:
    llm, _ = scripted("garbage", "more garbage", "never asked")
    with pytest.raises(InvalidOutputError) as info:
        llm.generate_json(Answer, "?")
    assert info.value.raw == "more garbage"
    assert llm.remaining == 1  # exactly one repair retry


def test_check_failures_count_as_invalid_output() -> None:
    def positive(answer: Answer) -> None:
        if answer.value <= 0:
            raise ValueError("value must be positive")

    llm, _ = scripted('{"value": -1}', '{"value": 5}')
    assert llm.generate_json(Answer, "?", check=positive).value == 5
    assert "value must be positive" in llm.requests[1].messages[2].content


def test_transport_retries_inside_the_repair_call_keep_counting() -> None:
    llm, _ = scripted("bad", TransientProviderError("blip"), '{"value": 1}')
    with recording() as rec:
        assert llm.generate_json(Answer, "?").value == 1
    assert [(c.attempt, c.ok) for c in rec.calls] == [(1, True), (2, False), (3, True)]


def test_loads_lenient_reports_where_it_failed() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        loads_lenient("{oops")
    assert loads_lenient('[1, 2]') == [1, 2]


def test_cost_estimates_use_the_longest_matching_model() -> None:
    llm = ScriptedLLM(model="gpt-5-mini")
    assert llm.estimate_cost("gpt-5-mini", 1_000_000, 1_000_000) == pytest.approx(sum(PRICES["gpt-5-mini"]))
    assert llm.estimate_cost("gpt-5-mini-2025-08-07", 1_000_000, 0) == pytest.approx(PRICES["gpt-5-mini"][0])
    assert llm.estimate_cost("gpt-5", 0, 1_000_000) == pytest.approx(PRICES["gpt-5"][1])
    assert llm.estimate_cost("llama3.1", 100, 100) is None
    assert llm.estimate_cost("gpt-5", None, None) is None
    custom = ScriptedLLM(model="local", prices={"local": (1.0, 1.0)})
    assert custom.estimate_cost("local", 500_000, 500_000) == pytest.approx(1.0)


def test_recordings_nest_and_see_fallbacks() -> None:
    llm, _ = scripted("a", "b")
    with recording() as outer:
        llm.generate("1")
        with recording() as inner:
            llm.generate("2")
            note_fallback("extractor", InvalidOutputError("bad"))
    assert len(outer.calls) == 2 and len(inner.calls) == 1
    assert inner.failed("extractor").reason == "InvalidOutputError: bad"
    assert outer.failed("extractor") is not None and outer.failed("reconciler") is None


@pytest.mark.parametrize(
    "options",
    [{"timeout": 0}, {"max_retries": -1}, {"max_retries": True}, {"temperature": 3}],
)
def test_bad_settings_are_configuration_errors(options) -> None:
    with pytest.raises(ConfigurationError):
        ScriptedLLM(**options)
    with pytest.raises(ConfigurationError, match="model"):
        ScriptedLLM(model=" ")
