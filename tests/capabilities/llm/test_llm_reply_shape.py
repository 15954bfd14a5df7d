"""A reply the caller cannot use says why: a refusal, a tool call where text was
asked for, a body of the wrong shape. None of them is worth retrying."""

from __future__ import annotations

import pytest
from fake_openai import Reply, _responses_body, tool_calls

from memorist.errors import ProviderError, TransientProviderError
from memorist.llm.openai import OpenAIResponsesLLM
from memorist.llm.openai_compatible import OpenAICompatibleLLM


def _response(*items: dict) -> Reply:
    body = _responses_body({"model": "m"}, "", (1, 1))
    body["output"] = [{"id": "rs_1", "type": "reasoning", "summary": []}, *items]
    return Reply(body=body)


_REFUSAL = "I can't help with that. " * 20


@pytest.mark.parametrize(("reply", "said"), [
    (_response({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "refusal", "refusal": _REFUSAL}]}), "the model refused: .I can't help"),
    (_response({"id": "rf_1", "type": "refusal", "refusal": _REFUSAL}), "the model refused: .I can't help"),
    (tool_calls(("extract", {"facts": []})), "answered with a tool call"),
    (_response({"id": "ct_1", "type": "custom_tool_call", "call_id": "c", "name": "f", "input": "x"}),
     "answered with a tool call"),
], ids=["refusal-part", "refusal-item", "function-call", "custom-tool-call"])
def test_an_unusable_responses_reply_says_why_and_is_not_retried(fake_openai, reply, said) -> None:
    fake_openai.script("responses", reply)
    llm = OpenAIResponsesLLM("m", base_url=fake_openai.base_url, api_key="k", max_retries=2, sleep=lambda s: None)
    with pytest.raises(ProviderError, match=said) as caught:
        llm.generate("hi")
    assert "empty" not in str(caught.value)
    assert len(str(caught.value)) < 320  # a refusal cut to ~200 characters
    assert len(fake_openai.requests) == 1  # not retried


@pytest.mark.parametrize("endpoint", ["chat", "responses"])
@pytest.mark.parametrize(("body", "kind"), [([], "an array"), ([{"choices": []}], "an array"), (None, "null"), (5, "a number")],
                         ids=["empty-list", "list", "null", "number"])
def test_a_json_body_that_is_no_object_is_the_wrong_shape_not_retried(fake_openai, endpoint, body, kind) -> None:
    fake_openai.script(endpoint, Reply(body=body))
    llm = (OpenAICompatibleLLM("m", base_url=fake_openai.base_url, max_retries=2, sleep=lambda s: None)
           if endpoint == "chat" else
           OpenAIResponsesLLM("m", base_url=fake_openai.base_url, api_key="k", max_retries=2, sleep=lambda s: None))
    with pytest.raises(ProviderError, match=f"the reply's shape is wrong: its JSON body is {kind}, not an object") as caught:
        llm.generate("hi")
    assert not isinstance(caught.value, TransientProviderError)
    assert len(fake_openai.requests) == 1  # not retried


def test_a_responses_output_that_is_no_list_is_the_wrong_shape(fake_openai) -> None:
    body = _responses_body({"model": "m"}, "", (1, 1))
    body["output"] = 3
    fake_openai.script("responses", Reply(body=body))
    llm = OpenAIResponsesLLM("m", base_url=fake_openai.base_url, api_key="k", max_retries=2, sleep=lambda s: None)
    with pytest.raises(ProviderError, match="shape is wrong: 'output' is no list"):
        llm.generate("hi")  # was: '' returned as the answer
    assert len(fake_openai.requests) == 1


def _chat_reply(message: dict, finish: str = "stop") -> Reply:
    from fake_openai import _chat_body

    body = _chat_body({"model": "m"}, "", (1, 1))
    body["choices"][0]["message"] = {"role": "assistant", **message}
    body["choices"][0]["finish_reason"] = finish
    return Reply(body=body)


def test_chat_content_sent_as_text_parts_is_their_text(fake_openai) -> None:
    """Some compatible servers send a message's content as a list of parts: it came
    back as a list, and a JSON reply then failed on it with a raw AttributeError."""
    fake_openai.script("chat", _chat_reply({"content": [{"type": "text", "text": '{"facts": '}, {"type": "text", "text": "[]}"}]}))
    llm = OpenAICompatibleLLM("m", base_url=fake_openai.base_url, max_retries=0, sleep=lambda s: None)
    assert llm.generate("hi") == '{"facts": []}'
    fake_openai.script("chat", _chat_reply({"content": 42}))
    with pytest.raises(ProviderError, match="shape is wrong: its message's content is no text"):
        llm.generate("hi")


def test_a_chat_reply_cut_off_at_the_token_cap_is_incomplete(fake_openai) -> None:
    """Accepted whole before, it failed later as JSON that does not parse, after a
    repair that hit the same cap; the Responses API's cut reply was refused so already."""
    fake_openai.script("chat", _chat_reply({"content": '{"facts": ["Has a dog named Rex", "Lives in Ber'}, finish="length"))
    llm = OpenAICompatibleLLM("m", base_url=fake_openai.base_url, max_retries=2, sleep=lambda s: None)
    with pytest.raises(ProviderError, match="the reply is incomplete"):
        llm.generate("hi")
    assert len(fake_openai.requests) == 1
