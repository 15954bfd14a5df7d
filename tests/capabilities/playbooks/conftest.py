"""Fixtures of the playbook tests: a test embedder whose similarities are chosen exactly,
and a Memory on each storage backend (``backend``, tests/conftest.py)."""

from __future__ import annotations

import logging

import pytest
from ace_helpers import MappedEmbedder

from memorist import Memory, Playbook


@pytest.fixture
def embedder() -> MappedEmbedder:
    return MappedEmbedder()


@pytest.fixture
def mem(backend, embedder):
    m = Memory(backend.target, embedder=embedder)
    yield m
    m.close()


@pytest.fixture
def playbook(mem):
    return Playbook(mem)


@pytest.fixture
def ace_logs(caplog):
    """caplog at INFO for the memorist loggers; ``ace_logs()`` returns the messages."""
    caplog.set_level(logging.INFO, logger="memorist")

    def messages() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name.startswith("memorist")]

    messages.clear = caplog.clear  # type: ignore[attr-defined]
    return messages
