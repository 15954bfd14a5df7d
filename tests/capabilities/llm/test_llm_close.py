"""A Memory closes the model it built from a name (its HTTP connections), never one it
was given: that one is the caller's."""

from __future__ import annotations

from memorist import Memory, ScriptedLLM
from memorist.llm.openai_compatible import OpenAICompatibleLLM


def test_memory_closes_the_model_it_built_and_not_one_it_was_given(monkeypatch) -> None:
    monkeypatch.setenv("MEMORIST_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    closed: list[object] = []
    monkeypatch.setattr(OpenAICompatibleLLM, "close", lambda self: closed.append(self))
    memory = Memory(":memory:", embedder="hashing", llm="openai-compatible:m")
    built = memory.llm
    memory.close()
    assert closed == [built]

    given = ScriptedLLM([])
    monkeypatch.setattr(ScriptedLLM, "close", lambda self: closed.append(self))
    Memory(":memory:", embedder="hashing", llm=given).close()
    assert closed == [built]  # the caller's model stays open
