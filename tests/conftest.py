"""Shared fixtures: a hermetic environment, no network, and a throwaway Memory."""

from __future__ import annotations

import ipaddress
import socket

import pytest

# Settings Engram reads from the environment when a Memory is built. Tests that
# need one set it themselves with monkeypatch.
_ENGRAM_ENV = (
    "ENGRAM_DB",
    "ENGRAM_EMBEDDER",
    "ENGRAM_DECAY_DAYS",
    "MEMORY_DECAY_DAYS",
    "ENGRAM_TENANT",
    "ENGRAM_BUSY_TIMEOUT",
    # LLM providers: no test may pick up a developer's real key or endpoint.
    "ENGRAM_LLM",
    "ENGRAM_LLM_BASE_URL",
    "ENGRAM_LLM_API_KEY",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "GEMINI_API_KEY",
    "GEMINI_MODEL",
    "GEMINI_BASE_URL",
    "ACE_LLM_TEMPERATURE",
    "ACE_CURATOR_USE_LLM",
)


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENGRAM_ENV:
        monkeypatch.delenv(name, raising=False)


def _is_local(address: object) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False  # a host name other than localhost: would need DNS
    return False


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch):
    """Any connection to a non-loopback address fails the test, even if the code
    under test swallows the error."""
    attempts: list[object] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guard(real):
        def connect(self, address, *args, **kwargs):
            if not _is_local(address):
                attempts.append(address)
                raise ConnectionRefusedError(f"tests may not use the network (tried {address!r})")
            return real(self, address, *args, **kwargs)

        return connect

    monkeypatch.setattr(socket.socket, "connect", guard(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guard(real_connect_ex))
    yield
    if attempts:
        pytest.fail(f"test tried to reach the network: {attempts!r}")


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "m.db")


@pytest.fixture
def memory(db_path):
    from engram import Memory

    m = Memory(db_path, embedder="hashing")
    yield m
    m.close()
