"""The waits between retries stay numbers however many retries there are: a write
waiting on a locked SQLite file polls every few milliseconds, and after about a
thousand polls (some 15 s, half of the default busy_timeout) 2**attempt was no
float any more: the wait failed with an OverflowError instead of a StoreError."""

from __future__ import annotations

from memorist.llm.testing import ScriptedLLM
from memorist.store.sqlite.errors import backoff


def test_the_lock_polls_wait_is_capped_at_any_attempt() -> None:
    for attempt in (0, 1, 10, 1023, 1024, 5_000, 10**6):
        delay = backoff(attempt, first=0.001, cap=0.02)
        assert 0.0 <= delay <= 0.02, (attempt, delay)
    assert backoff(0, first=0.25, cap=4.0) <= 0.25


def test_a_models_backoff_is_capped_at_any_attempt() -> None:
    llm = ScriptedLLM([], backoff=0.5, max_backoff=8.0)
    for attempt in (1, 2, 30, 1025, 10**6):
        assert 0.0 < llm._backoff(attempt) <= 8.0, attempt
