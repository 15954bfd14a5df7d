"""Fixtures of the LLM tests (the fake OpenAI server is tests/capabilities/conftest.py's)."""

from __future__ import annotations

import pytest


@pytest.fixture
def waits() -> list[float]:
    """Pass ``sleep=waits.append`` to an LLM: its backoff waits are recorded, not slept."""
    return []
